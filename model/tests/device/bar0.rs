//! BAR0: LEDs, GPIO aliasing, the ID block and the reference design variant.

use picoevb_model::options::DESIGN_VERSION;
use picoevb_model::{Design, DeviceOptions};
use picoevb_regs::{gpio, idblock};

use crate::common::*;

#[test]
fn leds_are_active_low_and_alias_every_512_bytes() {
    let r = Rig::new();
    assert_eq!(
        r.dev.snapshot().leds(),
        0b111,
        "DOUT default 0: all lit at power-on"
    );
    r.set_bar0(gpio::GPIO_DATA, 0x5);
    let s = r.dev.snapshot();
    assert_eq!((s.gpio_data, s.leds()), (0x5, 0b010));
    for alias in [0x200, 0x400, 0x600] {
        assert_eq!(r.bar0(alias), 0x5, "GPIO data aliased at {alias:#x}");
    }
    r.set_bar0(0x600, 0xffff_ffff);
    assert_eq!(r.bar0(gpio::GPIO_DATA), 0x7, "3-bit channel");
    assert_eq!(r.dev.snapshot().leds(), 0);
    assert_eq!(r.bar0(gpio::GPIO2_TRI), gpio::GPIO2_TRI_RESET);
    r.set_bar0(gpio::IP_IER, 3);
    assert_eq!(r.bar0(0x200 + gpio::IP_IER), 3);
}

#[test]
fn id_block_values_repeat_every_window() {
    let r = Rig::with(DeviceOptions {
        build_hash: 0x81690a8c,
        build_time: 1_700_000_000,
        ..DeviceOptions::default()
    });
    for base in [
        idblock::BASE,
        idblock::BASE + idblock::WINDOW,
        idblock::END - idblock::WINDOW,
    ] {
        assert_eq!(
            r.bar0(base + idblock::REG_MAGIC),
            idblock::MAGIC,
            "at {base:#x}"
        );
        assert_eq!(r.bar0(base + idblock::REG_LAYOUT), idblock::LAYOUT_VERSION);
        assert_eq!(r.bar0(base + idblock::REG_DESIGN_VERSION), DESIGN_VERSION);
        assert_eq!(r.bar0(base + idblock::REG_BUILD_HASH), 0x81690a8c);
        assert_eq!(r.bar0(base + idblock::REG_BUILD_TIME), 1_700_000_000);
        assert_eq!(r.bar0(base + idblock::REG_CAPS), idblock::CAPS_PICOEVB);
        assert_eq!(r.bar0(base + idblock::REG_RAM_SIZE), 65536);
        assert_eq!(r.bar0(base + 0x20), 0, "reserved");
    }
    assert_eq!(idblock::version_parts(DESIGN_VERSION), (1, 0, 0));
    // The GPIO is untouched by ID block accesses and vice versa.
    r.set_bar0(idblock::BASE + idblock::REG_MAGIC, 0);
    assert_eq!(r.bar0(idblock::BASE), idblock::MAGIC, "read-only");
    assert_eq!(r.bar0(gpio::GPIO_DATA), 0);
}

#[test]
fn scratch_is_read_write_and_resets() {
    let r = Rig::new();
    let scratch = idblock::BASE + idblock::REG_SCRATCH;
    assert_eq!(r.bar0(scratch), idblock::SCRATCH_RESET);
    r.set_bar0(scratch, 0xdead_beef);
    assert_eq!(
        r.bar0(scratch + idblock::WINDOW),
        0xdead_beef,
        "same register in the next window"
    );
    assert_eq!(r.dev.snapshot().scratch, 0xdead_beef);
    r.dev.reset();
    assert_eq!(r.bar0(scratch), idblock::SCRATCH_RESET);
}

#[test]
fn reference_design_aliases_gpio_across_the_bar() {
    let r = Rig::with(DeviceOptions {
        design: Design::Reference,
        ..DeviceOptions::default()
    });
    r.set_bar0(gpio::GPIO_DATA, 0x3);
    assert_eq!(
        r.bar0(idblock::BASE),
        0x3,
        "GPIO data where the gdr magic would be"
    );
    assert_ne!(r.bar0(idblock::BASE), idblock::MAGIC);
    assert_eq!(r.bar0(0xe00), 0x3);
    r.set_bar0(idblock::BASE + idblock::REG_SCRATCH, 0x1234);
    assert_eq!(
        r.bar0(idblock::REG_SCRATCH),
        0,
        "offset 0x1c of the GPIO is unmapped"
    );
    r.set_bar0(0xa00, 0x6);
    assert_eq!(
        r.dev.snapshot().leds(),
        0b001,
        "a write through a high alias drives the LEDs"
    );
}

#[test]
fn sub_dword_access() {
    let r = Rig::new();
    let mut b = [0u8; 2];
    r.dev.bar_read(0, (idblock::BASE + 2) as u64, &mut b);
    assert_eq!(u16::from_le_bytes(b), (idblock::MAGIC >> 16) as u16);
    r.dev.bar_write(0, 0, &[0x2]);
    assert_eq!(r.bar0(0), 0, "sub-DWORD writes are ignored");
    let mut q = [0u8; 8];
    r.dev.bar_read(0, idblock::BASE as u64, &mut q);
    assert_eq!(q[..4], idblock::MAGIC.to_le_bytes());
    assert_eq!(q[4..], idblock::LAYOUT_VERSION.to_le_bytes());
}
