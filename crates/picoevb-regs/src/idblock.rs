//! The gdr ID/version block: lets the driver and the agent tell which bitstream a card runs.
//!
//! It sits in BAR0 at [`BASE`], above the AXI GPIO window, so the reference layout (GPIO data at BAR0+0, the
//! only register any driver writes) is undisturbed. The block decodes address bits [5:2] and repeats every
//! [`WINDOW`] bytes up to [`END`]. On the reference bitstream the GPIO aliases there instead, so
//! [`MAGIC`] never matches and the card is reported as "reference design, no ID block".
//!
//! This file is the single source of truth: `fpga-bitstream/rtl/gdr_id_regs.vh` is generated from it
//! (and checked in a test), and the FPGA model serves the block from these constants.

use crate::channel::Regs32;

/// Offset of the block in BAR0.
pub const BASE: usize = 0x800;
/// The block repeats every `WINDOW` bytes from [`BASE`] up to [`END`].
pub const WINDOW: usize = 0x40;
/// First BAR0 offset past the block (the stream block, `stream.rs`, takes the rest of BAR0).
pub const END: usize = 0xc00;

/// RO: [`MAGIC`].
pub const REG_MAGIC: usize = 0x00;
/// RO: layout version of this block ([`LAYOUT_VERSION`]).
pub const REG_LAYOUT: usize = 0x04;
/// RO: design version, [`version`] encoding.
pub const REG_DESIGN_VERSION: usize = 0x08;
/// RO: first 32 bits of the git commit the bitstream was built from.
pub const REG_BUILD_HASH: usize = 0x0c;
/// RO: build time, seconds since the Unix epoch (32-bit, wraps in 2106).
pub const REG_BUILD_TIME: usize = 0x10;
/// RO: capability bits (`CAP_*`).
pub const REG_CAPS: usize = 0x14;
/// RO: bytes of FPGA RAM behind the DMA engines.
pub const REG_RAM_SIZE: usize = 0x18;
/// RW: scratch register, reset [`SCRATCH_RESET`]; lets software prove the block is live and writable.
pub const REG_SCRATCH: usize = 0x1c;
/// Registers 0x20..0x3c are reserved and read 0.
pub const REG_COUNT: usize = 8;

/// "GDR1" in ASCII, most significant byte first.
pub const MAGIC: u32 = 0x4744_5231;
/// Bumped when registers are added or change meaning.
pub const LAYOUT_VERSION: u32 = 1;
/// Reset value of [`REG_SCRATCH`].
pub const SCRATCH_RESET: u32 = 0;

/// BRAM at AXI 0 behind the XDMA engines.
pub const CAP_BRAM: u32 = 1 << 0;
/// Three active-low LEDs on GPIO channel 1.
pub const CAP_LEDS: u32 = 1 << 1;
/// Four M.2 edge GPIOs on GPIO channel 2.
pub const CAP_M2_GPIO: u32 = 1 << 2;
/// MSI capability in config space.
pub const CAP_MSI: u32 = 1 << 3;
/// GPIO interrupt wired to XDMA user IRQ 0.
pub const CAP_USER_IRQ: u32 = 1 << 4;
/// FPGA RAM addresses wrap modulo the RAM size (only AXI bits [15:0] decoded below the stream window).
pub const CAP_RAM_WRAPS: u32 = 1 << 5;
/// The stream block (`stream.rs`): registers at BAR0 0xc00, the DMA window at AXI bit 32.
pub const CAP_STREAM: u32 = 1 << 6;
/// Capabilities of the gdr PicoEVB design.
pub const CAPS_PICOEVB: u32 =
    CAP_BRAM | CAP_LEDS | CAP_M2_GPIO | CAP_MSI | CAP_USER_IRQ | CAP_RAM_WRAPS | CAP_STREAM;

/// Encodes a design version as major[31:24] minor[23:16] patch[15:0].
pub const fn version(major: u8, minor: u8, patch: u16) -> u32 {
    (major as u32) << 24 | (minor as u32) << 16 | patch as u32
}

/// Splits a [`version`] word into (major, minor, patch).
pub const fn version_parts(v: u32) -> (u8, u8, u16) {
    ((v >> 24) as u8, (v >> 16) as u8, v as u16)
}

/// Register index (0..[`REG_COUNT`] and reserved above) that a BAR0 offset inside the block decodes to.
pub const fn decode(bar0_offset: usize) -> usize {
    (bar0_offset & (WINDOW - 1)) >> 2
}

/// Whether a BAR0 offset falls in the ID block rather than the GPIO.
pub const fn contains(bar0_offset: usize) -> bool {
    bar0_offset >= BASE && bar0_offset < END
}

/// Every register of the block, for generators and tests: (name, offset, writable).
pub const REGISTERS: [(&str, usize, bool); REG_COUNT] = [
    ("MAGIC", REG_MAGIC, false),
    ("LAYOUT", REG_LAYOUT, false),
    ("DESIGN_VERSION", REG_DESIGN_VERSION, false),
    ("BUILD_HASH", REG_BUILD_HASH, false),
    ("BUILD_TIME", REG_BUILD_TIME, false),
    ("CAPS", REG_CAPS, false),
    ("RAM_SIZE", REG_RAM_SIZE, false),
    ("SCRATCH", REG_SCRATCH, true),
];

/// What a driver needs from the block: which build of the design the card runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// [`REG_DESIGN_VERSION`], [`version`] encoding.
    pub design_version: u32,
    /// [`REG_BUILD_HASH`].
    pub build_hash: u32,
    /// [`REG_CAPS`]: `CAP_*` bits.
    pub caps: u32,
}

/// The block's registers, over BAR0.
pub struct IdBlock<'a, R: ?Sized> {
    regs: &'a R,
}

impl<'a, R: Regs32 + ?Sized> IdBlock<'a, R> {
    /// The block behind `regs` (BAR0).
    pub fn new(regs: &'a R) -> Self {
        Self { regs }
    }

    fn reg(&self, reg: usize) -> Result<u32, R::Error> {
        self.regs.read32(BASE + reg)
    }

    /// Reads the identity, or `None` when [`REG_MAGIC`] does not hold [`MAGIC`]: NVIDIA's reference design
    /// (its GPIO aliases here) or no gdr design at all. Nothing past the magic is read then.
    pub fn identity(&self) -> Result<Option<Identity>, R::Error> {
        if self.reg(REG_MAGIC)? != MAGIC {
            return Ok(None);
        }
        Ok(Some(Identity {
            design_version: self.reg(REG_DESIGN_VERSION)?,
            build_hash: self.reg(REG_BUILD_HASH)?,
            caps: self.reg(REG_CAPS)?,
        }))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::channel::fake::Fake;
    use std::vec::Vec;

    #[test]
    fn identity_reads_magic_then_version_and_hash() {
        let f = Fake::default();
        f.values.borrow_mut().extend([
            (0x800, MAGIC),
            (0x808, version(1, 2, 3)),
            (0x80c, 0xdead_beef),
            (0x814, CAPS_PICOEVB),
        ]);
        assert_eq!(
            IdBlock::new(&f).identity(),
            Ok(Some(Identity {
                design_version: version(1, 2, 3),
                build_hash: 0xdead_beef,
                caps: CAPS_PICOEVB,
            }))
        );
        let offsets: Vec<usize> = f.log.borrow().iter().map(|a| a.1).collect();
        assert_eq!(offsets, [0x800, 0x808, 0x80c, 0x814]);
    }

    #[test]
    fn no_magic_is_no_id_block() {
        // The reference design's GPIO data (at most 0x7) reads at 0x800.
        let f = Fake::default();
        f.values.borrow_mut().push((0x800, 0x5));
        assert_eq!(IdBlock::new(&f).identity(), Ok(None));
        assert_eq!(f.log.borrow().len(), 1, "nothing read past the magic");
    }

    #[test]
    fn a_failed_read_is_an_error_not_a_missing_block() {
        let f = Fake {
            fail_at: Some(BASE + REG_BUILD_HASH),
            ..Fake::default()
        };
        f.values.borrow_mut().push((0x800, MAGIC));
        assert_eq!(IdBlock::new(&f).identity(), Err(0x80c));
    }
}
