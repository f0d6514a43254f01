//! Renders the Verilog header `fpga-bitstream/rtl/gdr_id_regs.vh` from this crate (`idblock.rs`, with the PCI
//! identity, BAR and RAM sizes from `pci.rs` and the GPIO decode from `gpio.rs`) and fails if the checked-in
//! copy differs.
//!
//! The RTL includes that header and never spells its own numbers, and the FPGA model serves the block from the
//! same constants, so the bitstream and the model derive from one definition.
//!
//! Regenerate after changing the register map: `GDR_REGEN=1 cargo test -p picoevb-regs --test verilog_header`.

use std::fmt::Write as _;
use std::path::PathBuf;

use picoevb_regs::{gpio, idblock, pci, stream};

/// Every capability bit the header names. A new `CAP_*` that goes into `CAPS_PICOEVB` must be listed here, or
/// `caps_table_is_complete` fails.
const CAPS: [(&str, u32); 7] = [
    ("BRAM", idblock::CAP_BRAM),
    ("LEDS", idblock::CAP_LEDS),
    ("M2_GPIO", idblock::CAP_M2_GPIO),
    ("MSI", idblock::CAP_MSI),
    ("USER_IRQ", idblock::CAP_USER_IRQ),
    ("RAM_WRAPS", idblock::CAP_RAM_WRAPS),
    ("STREAM", idblock::CAP_STREAM),
];

const REGEN_HINT: &str = "GDR_REGEN=1 cargo test -p picoevb-regs --test verilog_header";

fn header_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fpga-bitstream/rtl/gdr_id_regs.vh")
}

fn hex32(v: u64) -> String {
    let v = u32::try_from(v).expect("value does not fit the 32-bit registers");
    format!("32'h{:04x}_{:04x}", v >> 16, v & 0xffff)
}

/// Number of address bits that select a register inside one [`idblock::WINDOW`].
fn index_bits() -> u32 {
    const { assert!(idblock::WINDOW.is_power_of_two() && idblock::WINDOW >= 4) };
    (idblock::WINDOW / 4).trailing_zeros()
}

fn render() -> String {
    let mut s = String::new();
    let mut line = |name: &str, value: String, comment: &str| {
        let def = format!("`define {name:<28} {value}");
        if comment.is_empty() {
            writeln!(s, "{def}").unwrap();
        } else {
            writeln!(s, "{def:<58} // {comment}").unwrap();
        }
    };

    // PCI identity: not used by the RTL; the build checks compare the XDMA settings with it.
    line(
        "GDR_PCI_VENDOR_ID",
        format!("16'h{:04x}", pci::VENDOR_ID),
        "XDMA vendor_id",
    );
    line(
        "GDR_PCI_DEVICE_ID",
        format!("16'h{:04x}", pci::DEVICE_ID),
        "XDMA pf0_device_id",
    );
    line(
        "GDR_PCI_SUBSYS_VENDOR_ID",
        format!("16'h{:04x}", pci::SUBSYSTEM_VENDOR_ID),
        "",
    );
    line(
        "GDR_PCI_SUBSYS_ID",
        format!("16'h{:04x}", pci::SUBSYSTEM_ID_PICOEVB),
        "",
    );
    line(
        "GDR_PCI_CLASS_CODE",
        format!("24'h{:06x}", pci::CLASS_CODE),
        "",
    );
    line(
        "GDR_BAR0_SIZE",
        hex32(pci::BAR_USER_SIZE as u64),
        "bytes of BAR0 (XDMA AXI-Lite master)",
    );
    line(
        "GDR_BAR1_SIZE",
        hex32(pci::BAR_DMA_SIZE as u64),
        "bytes of BAR1 (XDMA registers)",
    );
    line(
        "GDR_GPIO_DECODE_MASK",
        hex32(gpio::DECODE_MASK as u64),
        "AXI GPIO decodes these bits",
    );
    line(
        "GDR_GPIO_DATA",
        hex32(gpio::GPIO_DATA as u64),
        "LEDs, active-low",
    );
    line(
        "GDR_ID_BASE",
        hex32(idblock::BASE as u64),
        "BAR0 offsets >= this hit the ID block",
    );
    line(
        "GDR_ID_WINDOW",
        hex32(idblock::WINDOW as u64),
        "the block repeats every WINDOW bytes",
    );
    line(
        "GDR_ID_INDEX_BITS",
        index_bits().to_string(),
        "register index = addr[INDEX_BITS+1:2]",
    );
    line(
        "GDR_ID_REG_COUNT",
        idblock::REG_COUNT.to_string(),
        "registers; the rest of the window reads 0",
    );
    for (name, offset, _) in idblock::REGISTERS {
        line(
            &format!("GDR_ID_REG_{name}"),
            format!("{}'h{:02x}", index_bits() + 2, offset),
            "",
        );
    }
    let writable = idblock::REGISTERS
        .iter()
        .filter(|(_, _, w)| *w)
        .fold(0u32, |m, (_, offset, _)| m | 1 << (offset >> 2));
    line(
        "GDR_ID_WRITABLE",
        hex32(writable.into()),
        "bit i set: register i is RW",
    );
    line("GDR_ID_MAGIC", hex32(idblock::MAGIC.into()), "\"GDR1\"");
    line(
        "GDR_ID_LAYOUT_VERSION",
        hex32(idblock::LAYOUT_VERSION.into()),
        "",
    );
    line(
        "GDR_ID_SCRATCH_RESET",
        hex32(idblock::SCRATCH_RESET.into()),
        "",
    );
    for (name, bit) in CAPS {
        line(&format!("GDR_ID_CAP_{name}"), hex32(bit.into()), "");
    }
    line(
        "GDR_ID_CAPS_PICOEVB",
        hex32(idblock::CAPS_PICOEVB.into()),
        "",
    );
    line(
        "GDR_ID_RAM_SIZE",
        hex32(pci::FPGA_RAM_SIZE),
        "bytes of BRAM behind the DMA engines",
    );

    line(
        "GDR_ID_END",
        hex32(idblock::END as u64),
        "BAR0 offsets >= this hit the stream block",
    );

    // The stream block (stream.rs).
    line(
        "GDR_STREAM_BASE",
        hex32(stream::BASE as u64),
        "BAR0 offset of the stream registers",
    );
    line(
        "GDR_STREAM_REG_BITS",
        (stream::REG_WINDOW.trailing_zeros()).to_string(),
        "register offset = addr[REG_BITS-1:0]",
    );
    for (name, offset, _) in stream::REGISTERS {
        line(
            &format!("GDR_STREAM_REG_{name}"),
            format!("{}'h{:02x}", stream::REG_WINDOW.trailing_zeros(), offset),
            "",
        );
    }
    let bits = [
        ("GDR_STREAM_SRC_ENABLE", stream::SRC_ENABLE),
        ("GDR_STREAM_SRC_CLEAR", stream::SRC_CLEAR),
        ("GDR_STREAM_SINK_CLEAR", stream::SINK_CLEAR),
    ];
    for (name, bit) in bits {
        line(name, bit.trailing_zeros().to_string(), "bit number");
    }
    line(
        "GDR_STREAM_RECORD_BYTES_RESET",
        hex32(stream::RECORD_BYTES_RESET.into()),
        "",
    );
    line(
        "GDR_STREAM_RECORD_BYTES_MIN",
        hex32(stream::RECORD_BYTES_MIN.into()),
        "",
    );
    line(
        "GDR_STREAM_RECORD_BYTES_MAX",
        hex32(stream::RECORD_BYTES_MAX.into()),
        "",
    );
    line(
        "GDR_STREAM_FIFO_DEPTH",
        stream::FIFO_DEPTH.to_string(),
        "records the source holds",
    );
    line(
        "GDR_STREAM_RECORD_END",
        hex32(stream::RECORD_END.into()),
        "\"GDRS\", last word of a record",
    );
    line(
        "GDR_STREAM_CRC32C_POLY",
        hex32(stream::CRC32C_POLY.into()),
        "bit-reflected",
    );
    line(
        "GDR_STREAM_AXI_BIT",
        stream::WINDOW_AXI_BIT.to_string(),
        "AXI address bit selecting the stream window",
    );

    format!(
        "// GENERATED FILE, DO NOT EDIT.\n\
         // Rendered from crates/picoevb-regs/src/idblock.rs and stream.rs (plus pci.rs, gpio.rs) by\n\
         // crates/picoevb-regs/tests/verilog_header.rs. Regenerate with:\n\
         //   {REGEN_HINT}\n\
         `ifndef GDR_ID_REGS_VH\n\
         `define GDR_ID_REGS_VH\n\
         {s}\
         `endif // GDR_ID_REGS_VH\n"
    )
}

#[test]
fn verilog_header_is_current() {
    let path = header_path();
    let want = render();
    if std::env::var_os("GDR_REGEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let first = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "{} is not what idblock.rs renders (first difference at line {}).\n\
             The RTL must follow the register map: regenerate it with\n    {REGEN_HINT}\n\
             then rerun fpga-bitstream/sim/run.sh.",
            path.display(),
            first + 1
        );
    }
}

#[test]
fn caps_table_is_complete() {
    let mut all = 0;
    for (name, bit) in CAPS {
        assert_eq!(bit.count_ones(), 1, "CAP_{name} is not a single bit");
        assert_eq!(all & bit, 0, "CAP_{name} overlaps another capability");
        all |= bit;
    }
    assert_eq!(
        idblock::CAPS_PICOEVB & !all,
        0,
        "CAPS_PICOEVB has a bit the Verilog header does not name: add it to CAPS in this file"
    );
}

#[test]
fn register_table_matches_the_map() {
    // The header derives offsets and the writable mask from REGISTERS: check the table is sound.
    let mut seen = 0u32;
    for (i, (name, offset, writable)) in idblock::REGISTERS.iter().enumerate() {
        assert_eq!(*offset, i * 4, "{name} is not at its index");
        assert!(*offset < idblock::WINDOW, "{name} is outside the window");
        seen |= 1 << i;
        if *writable {
            assert_eq!(
                *name, "SCRATCH",
                "the RTL implements SCRATCH as the only RW register"
            );
        }
    }
    assert_eq!(seen.count_ones() as usize, idblock::REG_COUNT);
    const { assert!(idblock::BASE + idblock::WINDOW <= pci::BAR_USER_SIZE) };
    assert_eq!(idblock::BASE % idblock::WINDOW, 0);
    const {
        assert!(
            gpio::DECODE_MASK < idblock::BASE,
            "the GPIO window must end below the ID block"
        )
    };
}
