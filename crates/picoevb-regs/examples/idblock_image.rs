//! Prints what one window of the ID block must read back at reset, computed from `idblock.rs` alone, for the
//! build values given on the command line:
//!
//! ```text
//! cargo run -q -p picoevb-regs --example idblock_image -- 1.0.0 0x1234abcd 1700000000
//! ```
//!
//! One line per register, `0x<bar0 offset> 0x<value>`. `fpga-bitstream/sim/run.sh` compares this with what the
//! RTL simulation read back through the BAR0 address decode, so the bitstream and the model (which serves the
//! block from the same constants) are checked against one definition.

use picoevb_regs::{idblock, pci};

fn parse_u32(s: &str) -> Result<u32, String> {
    match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => s.parse(),
    }
    .map_err(|e| format!("bad number '{s}': {e}"))
}

fn parse_version(s: &str) -> Result<u32, String> {
    let parts: Vec<&str> = s.trim().split('.').collect();
    let [major, minor, patch] = parts[..] else {
        return Err(format!("version '{s}' is not MAJOR.MINOR.PATCH"));
    };
    let field = |p: &str| p.parse::<u32>().map_err(|e| format!("version '{s}': {e}"));
    let (major, minor, patch) = (field(major)?, field(minor)?, field(patch)?);
    match (
        u8::try_from(major),
        u8::try_from(minor),
        u16::try_from(patch),
    ) {
        (Ok(a), Ok(b), Ok(c)) => Ok(idblock::version(a, b, c)),
        _ => Err(format!(
            "version '{s}' does not fit major<256, minor<256, patch<65536"
        )),
    }
}

fn value(offset: usize, version: u32, hash: u32, time: u32) -> u32 {
    match offset {
        idblock::REG_MAGIC => idblock::MAGIC,
        idblock::REG_LAYOUT => idblock::LAYOUT_VERSION,
        idblock::REG_DESIGN_VERSION => version,
        idblock::REG_BUILD_HASH => hash,
        idblock::REG_BUILD_TIME => time,
        idblock::REG_CAPS => idblock::CAPS_PICOEVB,
        idblock::REG_RAM_SIZE => pci::FPGA_RAM_SIZE as u32,
        idblock::REG_SCRATCH => idblock::SCRATCH_RESET,
        _ => 0,
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [version, hash, time] = &args[..] else {
        return Err("usage: idblock_image VERSION BUILD_HASH BUILD_TIME".into());
    };
    let (version, hash, time) = (parse_version(version)?, parse_u32(hash)?, parse_u32(time)?);
    for offset in (0..idblock::WINDOW).step_by(4) {
        println!(
            "0x{:03x} 0x{:08x}",
            idblock::BASE + offset,
            value(offset, version, hash, time)
        );
    }
    Ok(())
}
