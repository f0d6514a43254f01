//! Card info, LEDs and several open files: the device works before any DMA detail matters.

use picoevb_abi as abi;
use picoevb_regs::gpio::{LED_MASK, leds_lit};
use picoevb_regs::idblock;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::{Ctx, Test, TestResult, ctx_err, ensure, test};
use crate::buf::{GuardedBuf, compare};
use crate::dev::Device;

pub fn register(v: &mut Vec<Test>) {
    v.push(test("basic::card_info", card_info));
    v.push(test("basic::abi_info", abi_info));
    v.push(test("basic::leds", leds));
    v.push(test("basic::two_fds_interleaved", two_fds_interleaved));
    v.push(test("basic::reopen_many_times", reopen_many_times));
    v.push(test("basic::node_has_the_drivers_major", node_major));
}

/// `/dev/picoevbN` is the driver's own character device: minor N of a major that `/proc/devices` names
/// `picoevb`, so a sandbox admits the cards and nothing else (`DeviceAllow=char-picoevb`, the agent's unit).
/// Fails on a driver whose node is a misc device (major 10, `misc`).
fn node_major(ctx: &mut Ctx) -> TestResult {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(ctx.dev_path).map_err(|e| format!("{}: {e}", ctx.dev_path))?;
    ensure!(
        meta.file_type().is_char_device(),
        "{} is not a character device",
        ctx.dev_path
    );
    let (major, minor) = (libc::major(meta.rdev()), libc::minor(meta.rdev()));
    let devices =
        std::fs::read_to_string("/proc/devices").map_err(|e| format!("/proc/devices: {e}"))?;
    let named = char_major_name(&devices, major);
    ensure!(
        named == Some("picoevb"),
        "{} is {major}:{minor}, and /proc/devices names major {major} {named:?}, not \"picoevb\"",
        ctx.dev_path
    );
    let index = ctx_err("ABI_INFO", ctx.dev.abi_info())?.card_index;
    ensure!(
        minor == index,
        "{} has minor {minor}, its card is number {index}",
        ctx.dev_path
    );
    Ok(())
}

/// The name `/proc/devices` gives character major `major`.
fn char_major_name(devices: &str, major: u32) -> Option<&str> {
    devices
        .lines()
        .skip_while(|l| !l.starts_with("Character devices:"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .find_map(|l| {
            let (num, name) = l.trim().split_once(' ')?;
            (num.parse() == Ok(major)).then_some(name)
        })
}

fn card_info(ctx: &mut Ctx) -> TestResult {
    let info = ctx_err("CARD_INFO", ctx.dev.card_info())?;
    ensure!(
        info.fpga_ram_size == FPGA_RAM_SIZE,
        "fpga_ram_size {} != {FPGA_RAM_SIZE}",
        info.fpga_ram_size
    );
    Ok(())
}

/// The versioned extension: version 1.x, this card's index and RAM, the ID block the model serves (the
/// gdr design, version 1.0.0 unless the model is told otherwise) and the interrupt mode the model sees.
fn abi_info(ctx: &mut Ctx) -> TestResult {
    let info = ctx_err("ABI_INFO", ctx.dev.abi_info())?;
    ensure!(
        abi::abi_major(info.abi_version) == 1,
        "abi_version {:#x}",
        info.abi_version
    );
    ensure!(info.card_index == 0, "card_index {}", info.card_index);
    ensure!(
        info.fpga_ram_size == FPGA_RAM_SIZE,
        "fpga_ram_size {}",
        info.fpga_ram_size
    );
    ensure!(
        info.caps & abi::CAP_ID_BLOCK != 0,
        "no ID block reported: caps {:#x}",
        info.caps
    );
    ensure!(
        info.design_version == idblock::version(1, 0, 0),
        "design_version {:#x}",
        info.design_version
    );
    ensure!(
        info.reserved == [0; 4],
        "reserved not zero: {:?}",
        info.reserved
    );
    let msi = ctx.rpc.get()?.state()?.msi_enabled;
    ensure!(
        (info.caps & abi::CAP_MSI != 0) == msi,
        "driver says MSI {} but the model says {msi}",
        info.caps & abi::CAP_MSI != 0
    );
    Ok(())
}

/// LED values as the ioctl argument itself; the model must see them in the GPIO data register.
/// High bits are not LEDs: they must not break the low three.
fn leds(ctx: &mut Ctx) -> TestResult {
    let values = (0..=7u32).chain([
        0xffff_fff8,
        0x8000_0005,
        0x0000_0102,
        0xffff_ffff,
        0x7fff_fffa,
    ]);
    for value in values {
        ctx_err(&format!("LED {value:#x}"), ctx.dev.set_leds(value))?;
        let st = ctx.rpc.get()?.state()?;
        ensure!(
            st.gpio_data & LED_MASK == value & LED_MASK,
            "LED {value:#x}: model gpio_data {:#x}, low bits should be {:#x}",
            st.gpio_data,
            value & LED_MASK
        );
        ensure!(
            st.leds == leds_lit(value),
            "LED {value:#x}: model reports lit mask {:#x}, expected {:#x}",
            st.leds,
            leds_lit(value)
        );
    }
    // Leave them off.
    ctx_err("LED 7", ctx.dev.set_leds(7))
}

/// Two open files with DMAs interleaved into separate FPGA RAM ranges: neither disturbs the other.
fn two_fds_interleaved(ctx: &mut Ctx) -> TestResult {
    let a = ctx_err("open a", Device::open(ctx.dev_path))?;
    let b = ctx_err("open b", Device::open(ctx.dev_path))?;
    let len = 12_288;
    let (off_a, off_b) = (0u64, 32_768u64 + 5);
    let mut src_a = GuardedBuf::new(len, 1);
    let mut src_b = GuardedBuf::new(len, 4095);
    ctx.rng.fill(src_a.as_mut_slice());
    ctx.rng.fill(src_b.as_mut_slice());
    ctx_err("h2c a", a.h2c(src_a.as_slice(), off_a))?;
    ctx_err("h2c b", b.h2c(src_b.as_slice(), off_b))?;
    let mut dst_a = GuardedBuf::new(len, 3);
    let mut dst_b = GuardedBuf::new(len, 0);
    ctx_err("c2h b", b.c2h(dst_b.as_mut_slice(), off_b))?;
    ctx_err("c2h a", a.c2h(dst_a.as_mut_slice(), off_a))?;
    compare("fd a round trip", src_a.as_slice(), dst_a.as_slice())?;
    compare("fd b round trip", src_b.as_slice(), dst_b.as_slice())?;
    dst_a.check_guards()?;
    dst_b.check_guards()?;
    // H2C2H on both, alternating, through the shared FPGA RAM.
    for i in 0..3 {
        super::h2c2h_check(&a, &mut ctx.rng, 65_537 + i, i, 4095 - i)?;
        super::h2c2h_check(&b, &mut ctx.rng, 4099 + i, 3 + i, i)?;
    }
    // The original fd still works after the others close.
    drop((a, b));
    super::sanity(ctx)
}

/// Opening and closing repeatedly leaves nothing behind (leaks show in kmemleak) and always succeeds.
fn reopen_many_times(ctx: &mut Ctx) -> TestResult {
    for i in 0..64 {
        let d = ctx_err(&format!("open #{i}"), Device::open(ctx.dev_path))?;
        let info = ctx_err("CARD_INFO", d.card_info())?;
        ensure!(
            info.fpga_ram_size == FPGA_RAM_SIZE,
            "fpga_ram_size {}",
            info.fpga_ram_size
        );
    }
    Ok(())
}
