//! Register state of one XDMA channel: its channel block (control, status, counters, masks, perf) and its
//! SGDMA block (first descriptor), plus the job handed to its worker thread.

use picoevb_regs::xdma::{self, Dir};

use crate::faults::TransferFaults;

/// Perf counters are 42 bits wide; bit 16 of the high word says the counter saturated.
const PERF_MAX: u64 = (1 << 42) - 1;

/// A transfer for the worker: what Run latched.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    /// [`Engine::seq`] when Run rose; the transfer is abandoned as soon as they differ.
    pub seq: u64,
    /// First descriptor bus address.
    pub first: u64,
    /// Extra adjacent descriptors after the first one.
    pub adjacent: u32,
    /// Injected faults for this transfer.
    pub faults: TransferFaults,
    /// Link parameters of the run when timing mode is on.
    pub timing: Option<crate::timing::Params>,
    /// Started by the control channel's `leave_running` (a driver that is gone left it running), not by
    /// the bound driver: every descriptor it fetches is counted as stray DMA.
    pub leftover: bool,
}

/// What a control write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlEdge {
    /// Run unchanged.
    None,
    /// Run went 0 -> 1: the caller must post a [`Job`].
    Started,
    /// Run went 1 -> 0.
    Stopped,
}

/// The performance monitor (PG195 bit names: 0 auto, 1 clear, 2 run).
#[derive(Clone, Copy, Debug, Default)]
pub struct Perf {
    ctrl: u32,
    cycles: u64,
    beats: u64,
}

impl Perf {
    fn clear(&mut self) {
        self.cycles = 0;
        self.beats = 0;
    }

    /// Adds activity when the monitor is armed.
    pub fn account(&mut self, cycles: u64, beats: u64) {
        if self.ctrl & xdma::PERF_RUN != 0 {
            self.cycles = (self.cycles + cycles).min(PERF_MAX);
            self.beats = (self.beats + beats).min(PERF_MAX);
        }
    }

    fn hi(v: u64) -> u32 {
        ((v >> 32) as u32 & 0x3ff) | if v == PERF_MAX { xdma::PERF_MAXED } else { 0 }
    }
}

/// One channel's registers.
#[derive(Clone, Debug)]
pub struct Engine {
    /// Which engine.
    pub dir: Dir,
    /// Control register.
    pub control: u32,
    /// Status register (bit 0 = busy).
    pub status: u32,
    /// Completed descriptor count.
    pub completed: u32,
    /// Poll-mode write-back address.
    pub writeback: u64,
    /// Interrupt enable mask.
    pub int_mask: u32,
    /// Performance monitor.
    pub perf: Perf,
    /// SGDMA first descriptor address.
    pub desc_addr: u64,
    /// SGDMA extra adjacent count.
    pub desc_adj: u32,
    desc_credits: u32,
    /// Bumped on every start and reset; the worker abandons a transfer whose `Job::seq` is stale.
    pub seq: u64,
    /// The job waiting for the worker.
    pub pending: Option<Job>,
    /// The worker holds its next memory request until bus mastering is enabled again.
    pub bus_wait: bool,
}

impl Engine {
    /// The channel at reset.
    pub fn new(dir: Dir) -> Self {
        Self {
            dir,
            control: 0,
            status: 0,
            completed: 0,
            writeback: 0,
            int_mask: 0,
            perf: Perf::default(),
            desc_addr: 0,
            desc_adj: 0,
            desc_credits: 0,
            seq: 0,
            pending: None,
            bus_wait: false,
        }
    }

    /// Back to reset values; any transfer in flight is abandoned.
    pub fn reset(&mut self) {
        let seq = self.seq + 1;
        *self = Self::new(self.dir);
        self.seq = seq;
    }

    fn writable_control(&self) -> u32 {
        let mut m =
            xdma::CTRL_RUN | xdma::CTRL_IE_ALL | xdma::CTRL_NON_INC_ADDR | xdma::CTRL_POLLMODE_WB;
        if self.dir == Dir::C2h {
            m &= !xdma::CTRL_IE_WRITE_ERROR; // reserved on C2H
        }
        m
    }

    /// Whether the engine is busy.
    pub fn busy(&self) -> bool {
        self.status & xdma::STAT_BUSY != 0
    }

    /// Whether Run is set.
    pub fn running(&self) -> bool {
        self.control & xdma::CTRL_RUN != 0
    }

    /// Logs status `bits` whose `ie_*` enable is set (the ie bits share the status bit positions).
    pub fn log(&mut self, bits: u32) {
        self.status |= bits & self.control & xdma::STAT_CLEARABLE;
    }

    /// The engine's interrupt source: a logged status bit that is also unmasked.
    pub fn irq_source(&self) -> bool {
        self.status & self.int_mask & xdma::STAT_CLEARABLE != 0
    }

    /// Whether poll-mode write-back is on (needs ie_desc_completed too, PG195).
    pub fn pollmode(&self) -> bool {
        let need = xdma::CTRL_POLLMODE_WB | xdma::CTRL_IE_DESC_COMPLETED;
        self.control & need == need
    }

    /// Reads a channel-block register. Reading the read-to-clear status clears bits [23:1].
    pub fn read_channel(&mut self, reg: usize) -> u32 {
        match reg {
            xdma::CH_IDENTIFIER => xdma::identifier(self.target(), 0),
            xdma::CH_CONTROL | xdma::CH_CONTROL_W1S | xdma::CH_CONTROL_W1C => self.control,
            xdma::CH_STATUS => self.status,
            xdma::CH_STATUS_RC => {
                let v = self.status;
                self.status &= xdma::STAT_BUSY;
                v
            }
            xdma::CH_COMPLETED_COUNT => self.completed,
            xdma::CH_ALIGNMENTS => xdma::ALIGNMENTS_MM64,
            xdma::CH_POLL_WB_LO => self.writeback as u32,
            xdma::CH_POLL_WB_HI => (self.writeback >> 32) as u32,
            xdma::CH_INT_MASK
            | xdma::CH_INT_MASK_W1S
            | xdma::CH_INT_MASK_W1C
            | xdma::CH_INT_MASK_W1C_ALIAS => self.int_mask,
            xdma::CH_PERF_CTRL => self.perf.ctrl,
            xdma::CH_PERF_CYC_LO => self.perf.cycles as u32,
            xdma::CH_PERF_CYC_HI => Perf::hi(self.perf.cycles),
            xdma::CH_PERF_DAT_LO => self.perf.beats as u32,
            xdma::CH_PERF_DAT_HI => Perf::hi(self.perf.beats),
            _ => 0, // includes the perf pending counters 0xd4/0xd8: the model never stalls on credits
        }
    }

    /// Writes a channel-block register and reports what happened to Run.
    pub fn write_channel(&mut self, reg: usize, v: u32) -> ControlEdge {
        match reg {
            xdma::CH_CONTROL => return self.set_control(v),
            xdma::CH_CONTROL_W1S => return self.set_control(self.control | v),
            xdma::CH_CONTROL_W1C => return self.set_control(self.control & !v),
            xdma::CH_STATUS => self.status &= !(v & xdma::STAT_CLEARABLE),
            xdma::CH_POLL_WB_LO => self.writeback = (self.writeback & !0xffff_ffff) | u64::from(v),
            xdma::CH_POLL_WB_HI => {
                self.writeback = (self.writeback & 0xffff_ffff) | u64::from(v) << 32
            }
            xdma::CH_INT_MASK => self.int_mask = v & xdma::STAT_CLEARABLE,
            xdma::CH_INT_MASK_W1S => self.int_mask |= v & xdma::STAT_CLEARABLE,
            // 0x98 per PG195 and 0x9c where Linux's xdma-regs.h (wrongly) puts it: accept both.
            xdma::CH_INT_MASK_W1C | xdma::CH_INT_MASK_W1C_ALIAS => self.int_mask &= !v,
            xdma::CH_PERF_CTRL => {
                if v & xdma::PERF_CLEAR != 0 {
                    self.perf.clear();
                }
                self.perf.ctrl = v & (xdma::PERF_AUTO | xdma::PERF_RUN);
            }
            _ => log::debug!(
                "{:?}: write to read-only or unknown channel register {reg:#04x} = {v:#x}",
                self.dir
            ),
        }
        ControlEdge::None
    }

    fn set_control(&mut self, v: u32) -> ControlEdge {
        let was = self.running();
        self.control = v & self.writable_control();
        match (was, self.running()) {
            (false, true) => {
                // Rising edge of Run: status [23:1] and the completed count reset, the engine goes busy.
                self.status = xdma::STAT_BUSY;
                self.completed = 0;
                if self.perf.ctrl & xdma::PERF_AUTO != 0 {
                    self.perf.clear();
                }
                self.seq += 1;
                ControlEdge::Started
            }
            (true, false) => ControlEdge::Stopped,
            _ => ControlEdge::None,
        }
    }

    /// Reads an SGDMA-block register.
    pub fn read_sgdma(&self, reg: usize) -> u32 {
        match reg {
            xdma::SG_IDENTIFIER => xdma::identifier(self.sgdma_target(), 0),
            xdma::SG_DESC_LO => self.desc_addr as u32,
            xdma::SG_DESC_HI => (self.desc_addr >> 32) as u32,
            xdma::SG_DESC_ADJ => self.desc_adj,
            xdma::SG_DESC_CREDITS => self.desc_credits,
            _ => 0,
        }
    }

    /// Writes an SGDMA-block register.
    pub fn write_sgdma(&mut self, reg: usize, v: u32) {
        match reg {
            xdma::SG_DESC_LO => self.desc_addr = (self.desc_addr & !0xffff_ffff) | u64::from(v),
            xdma::SG_DESC_HI => {
                self.desc_addr = (self.desc_addr & 0xffff_ffff) | u64::from(v) << 32
            }
            xdma::SG_DESC_ADJ => self.desc_adj = v & 0x3f,
            xdma::SG_DESC_CREDITS => self.desc_credits = v & 0x3ff,
            _ => log::debug!(
                "{:?}: write to read-only or unknown SGDMA register {reg:#04x} = {v:#x}",
                self.dir
            ),
        }
    }

    fn target(&self) -> usize {
        match self.dir {
            Dir::H2c => xdma::TARGET_H2C,
            Dir::C2h => xdma::TARGET_C2H,
        }
    }

    fn sgdma_target(&self) -> usize {
        match self.dir {
            Dir::H2c => xdma::TARGET_H2C_SGDMA,
            Dir::C2h => xdma::TARGET_C2H_SGDMA,
        }
    }
}
