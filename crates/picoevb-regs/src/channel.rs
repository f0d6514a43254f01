//! Typed access to the XDMA registers a driver touches for one engine (its channel and SGDMA blocks, its
//! bits in the IRQ and SGDMA common blocks) and to the IRQ block, over any window of 32-bit registers: the
//! kernel's BAR, a C glue's readl/writel, a test's fake. Every step of driving an engine is one method
//! here, so no driver writes a raw offset and every access reports its error.

use crate::xdma::{self, Dir};

/// A window of 32-bit little-endian registers: BAR1 of the XDMA, or BAR0 (LEDs and ID block, see
/// `gpio::Leds` and `idblock::IdBlock`).
pub trait Regs32 {
    /// Why an access failed (the kernel: the offset is outside the BAR).
    type Error;
    /// Reads the register at byte `offset`.
    fn read32(&self, offset: usize) -> Result<u32, Self::Error>;
    /// Writes `value` to the register at byte `offset`.
    fn write32(&self, value: u32, offset: usize) -> Result<(), Self::Error>;
}

/// An engine's status word (channel register 0x40/0x44).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status(pub u32);

impl Status {
    /// The engine is fetching or moving data (the live bit 0).
    pub const fn busy(self) -> bool {
        self.0 & xdma::STAT_BUSY != 0
    }

    /// The run is over: the engine went idle, or reported an error (which halts it).
    pub const fn ended(self) -> bool {
        !self.busy() || self.0 & xdma::STAT_ERRORS != 0
    }

    /// All ones: the read did not reach the card (surprise removal, a dead link).
    pub const fn unreachable(self) -> bool {
        self.0 == u32::MAX
    }
}

/// An engine's poll-mode write-back word (PG195: `Sts_err << 31 | completed[23:0]`), in host memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteBack(pub u32);

impl WriteBack {
    /// The engine stopped on an error.
    pub const fn error(self) -> bool {
        self.0 & xdma::WB_ERROR != 0
    }

    /// Descriptors completed since Run rose.
    pub const fn count(self) -> u32 {
        self.0 & xdma::WB_COUNT
    }

    /// The word says a chain of `count` descriptors ended: all of them completed, or an error.
    pub const fn ended(self, count: usize) -> bool {
        self.error() || self.count() as usize >= count
    }

    /// The word says a chain of `count` descriptors completed, all of them and no error.
    pub const fn completed(self, count: usize) -> bool {
        !self.error() && self.count() as usize == count
    }
}

/// One engine's registers.
pub struct Channel<'a, R: ?Sized> {
    regs: &'a R,
    dir: Dir,
}

impl<'a, R: Regs32 + ?Sized> Channel<'a, R> {
    /// The registers of engine `dir` in `regs`.
    pub fn new(regs: &'a R, dir: Dir) -> Self {
        Self { regs, dir }
    }

    fn ch(&self, reg: usize) -> usize {
        self.dir.channel_base() + reg
    }

    /// Points the SGDMA at a chain: the bus address of its first descriptor and how many adjacent
    /// descriptors follow it in the first block.
    pub fn set_chain(&self, first: u64, first_adj: u32) -> Result<(), R::Error> {
        let sg = self.dir.sgdma_base();
        self.regs.write32(first as u32, sg + xdma::SG_DESC_LO)?;
        self.regs
            .write32((first >> 32) as u32, sg + xdma::SG_DESC_HI)?;
        self.regs.write32(first_adj, sg + xdma::SG_DESC_ADJ)
    }

    /// Where the engine writes its poll-mode write-back word (bus address, 4-byte aligned).
    pub fn set_writeback(&self, addr: u64) -> Result<(), R::Error> {
        self.regs
            .write32(addr as u32, self.ch(xdma::CH_POLL_WB_LO))?;
        self.regs
            .write32((addr >> 32) as u32, self.ch(xdma::CH_POLL_WB_HI))
    }

    /// Which status bits raise the channel's interrupt (0: none).
    pub fn set_int_mask(&self, mask: u32) -> Result<(), R::Error> {
        self.regs.write32(mask, self.ch(xdma::CH_INT_MASK))
    }

    /// Enables or disables this engine's request in the IRQ block.
    pub fn irq_enable(&self, on: bool) -> Result<(), R::Error> {
        let reg = if on {
            xdma::IRQ_CHAN_EN_W1S
        } else {
            xdma::IRQ_CHAN_EN_W1C
        };
        self.regs.write32(self.dir.irq_bit(), xdma::IRQ_BLOCK + reg)
    }

    /// Writes the control register: with `CTRL_RUN` set, its rising edge starts the chain.
    pub fn control(&self, ctrl: u32) -> Result<(), R::Error> {
        self.regs.write32(ctrl, self.ch(xdma::CH_CONTROL))
    }

    /// Clears Run (a running engine stops after the descriptor in flight).
    pub fn clear_run(&self) -> Result<(), R::Error> {
        self.regs
            .write32(xdma::CTRL_RUN, self.ch(xdma::CH_CONTROL_W1C))
    }

    /// The status, unchanged.
    pub fn status(&self) -> Result<Status, R::Error> {
        self.regs.read32(self.ch(xdma::CH_STATUS)).map(Status)
    }

    /// The status, clearing bits [23:1] (read-to-clear).
    pub fn take_status(&self) -> Result<Status, R::Error> {
        self.regs.read32(self.ch(xdma::CH_STATUS_RC)).map(Status)
    }

    /// Arms the performance monitor in auto mode (PG195): its counters clear when Run rises and stop when a
    /// STOP descriptor completes, so after a chain they hold that chain's run.
    pub fn perf_arm(&self) -> Result<(), R::Error> {
        self.regs.write32(
            xdma::PERF_AUTO | xdma::PERF_RUN,
            self.ch(xdma::CH_PERF_CTRL),
        )
    }

    /// The performance monitor's cycle count (42 bits; `u64::MAX` once it saturated): AXI clock cycles of
    /// the last run since Run rose, in auto mode.
    pub fn perf_cycles(&self) -> Result<u64, R::Error> {
        let lo = self.regs.read32(self.ch(xdma::CH_PERF_CYC_LO))?;
        let hi = self.regs.read32(self.ch(xdma::CH_PERF_CYC_HI))?;
        if hi & xdma::PERF_MAXED != 0 {
            return Ok(u64::MAX);
        }
        Ok(u64::from(hi & 0x3ff) << 32 | u64::from(lo))
    }

    /// Descriptors completed since Run rose.
    pub fn completed_count(&self) -> Result<u32, R::Error> {
        self.regs.read32(self.ch(xdma::CH_COMPLETED_COUNT))
    }

    /// Halts (or lets go of) descriptor fetching for this engine in the SGDMA common block.
    pub fn halt_fetch(&self, on: bool) -> Result<(), R::Error> {
        let reg = if on {
            xdma::SGC_DESC_CTRL_W1S
        } else {
            xdma::SGC_DESC_CTRL_W1C
        };
        self.regs
            .write32(self.dir.sgdma_common_bit(), xdma::SGDMA_COMMON + reg)
    }
}

/// The IRQ block.
pub struct IrqRegs<'a, R: ?Sized> {
    regs: &'a R,
}

impl<'a, R: Regs32 + ?Sized> IrqRegs<'a, R> {
    /// The IRQ block in `regs`.
    pub fn new(regs: &'a R) -> Self {
        Self { regs }
    }

    /// The channel requests now raised (enabled and pending), `Dir::irq_bit` per engine.
    pub fn channel_requests(&self) -> Result<u32, R::Error> {
        self.regs.read32(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ)
    }

    /// Disables every channel and user interrupt and routes the channels to vector 0 (one MSI vector).
    pub fn reset(&self) -> Result<(), R::Error> {
        self.regs
            .write32(u32::MAX, xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C)?;
        self.regs
            .write32(u32::MAX, xdma::IRQ_BLOCK + xdma::IRQ_USER_EN_W1C)?;
        self.regs.write32(0, xdma::IRQ_BLOCK + xdma::IRQ_CHAN_VEC)
    }
}

/// A register window for host tests: records every access, reads what `values` holds (else 0), and can
/// fail at one offset.
#[cfg(test)]
pub(crate) mod fake {
    extern crate std;
    use core::cell::RefCell;
    use std::vec::Vec;

    #[derive(Default)]
    pub(crate) struct Fake {
        /// ('r' or 'w', offset, value) of every access that succeeded, in order.
        pub(crate) log: RefCell<Vec<(char, usize, u32)>>,
        /// (offset, value) a read returns; `read_value` for any other offset.
        pub(crate) values: RefCell<Vec<(usize, u32)>>,
        pub(crate) read_value: u32,
        /// An access at this offset fails with the offset as its error.
        pub(crate) fail_at: Option<usize>,
    }

    impl super::Regs32 for Fake {
        type Error = usize;
        fn read32(&self, offset: usize) -> Result<u32, usize> {
            if self.fail_at == Some(offset) {
                return Err(offset);
            }
            let v = self
                .values
                .borrow()
                .iter()
                .find(|(o, _)| *o == offset)
                .map_or(self.read_value, |&(_, v)| v);
            self.log.borrow_mut().push(('r', offset, v));
            Ok(v)
        }
        fn write32(&self, value: u32, offset: usize) -> Result<(), usize> {
            if self.fail_at == Some(offset) {
                return Err(offset);
            }
            self.log.borrow_mut().push(('w', offset, value));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::fake::Fake;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn writeback_word_decodes_pg195s_fields() {
        let done = WriteBack(3);
        assert!(done.ended(3) && done.completed(3) && !done.error());
        // Short, or more than the chain has: ended only once all came, completed only at exactly all.
        assert!(!done.ended(4) && !done.completed(4) && !done.completed(2));
        let failed = WriteBack(xdma::WB_ERROR | 3);
        assert!(failed.error() && failed.ended(5) && !failed.completed(3));
        // Bits 30:24 are not part of the count.
        assert_eq!(WriteBack(0x7f00_0002).count(), 2);
    }

    #[test]
    fn c2h_chain_and_run_hit_pg195_offsets() {
        let f = Fake::default();
        let c = Channel::new(&f, Dir::C2h);
        c.set_chain(0x1_2345_6780, 3).unwrap();
        c.set_int_mask(0x7e).unwrap();
        c.irq_enable(true).unwrap();
        c.control(xdma::CTRL_RUN).unwrap();
        c.clear_run().unwrap();
        c.halt_fetch(true).unwrap();
        assert_eq!(
            *f.log.borrow(),
            [
                ('w', 0x5080, 0x2345_6780),
                ('w', 0x5084, 0x1),
                ('w', 0x5088, 3),
                ('w', 0x1090, 0x7e),
                ('w', 0x2014, 1 << 1),
                ('w', 0x1004, 1),
                ('w', 0x100c, 1),
                ('w', 0x6014, 1 << 16),
            ]
        );
    }

    #[test]
    fn h2c_reads_and_status_bits() {
        let f = Fake {
            read_value: xdma::STAT_DESC_STOPPED | xdma::STAT_BUSY,
            ..Fake::default()
        };
        let c = Channel::new(&f, Dir::H2c);
        let s = c.take_status().unwrap();
        assert!(s.busy() && !s.ended() && !s.unreachable());
        c.status().unwrap();
        c.completed_count().unwrap();
        let offsets: Vec<usize> = f.log.borrow().iter().map(|a| a.1).collect();
        assert_eq!(offsets, [0x0044, 0x0040, 0x0048]);
        assert!(Status(xdma::STAT_BUSY | xdma::STAT_READ_ERROR_UR).ended());
        assert!(Status(xdma::STAT_DESC_STOPPED).ended());
        assert!(Status(u32::MAX).unreachable());
    }

    #[test]
    fn irq_block_reset_and_requests() {
        let f = Fake::default();
        let irq = IrqRegs::new(&f);
        irq.reset().unwrap();
        irq.channel_requests().unwrap();
        assert_eq!(
            *f.log.borrow(),
            [
                ('w', 0x2018, u32::MAX),
                ('w', 0x200c, u32::MAX),
                ('w', 0x20a0, 0),
                ('r', 0x2044, 0),
            ]
        );
    }
}
