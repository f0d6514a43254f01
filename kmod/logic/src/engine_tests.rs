//! The engine protocol against a fake engine: each outcome (done, polled, timeout, error bits, short count,
//! removal mid-run, a kill, a stop that leaves the engine busy) with the register accesses it makes.

extern crate std;
use super::*;
use core::cell::{Cell, RefCell};
use std::vec::Vec;

/// A fake engine behind a fake gate. Run rises on a write of Run to the control register; the hardware
/// "ends" the chain when the waiter waits (as the interrupt handler would see it) or after `end_after`
/// status reads of a poll; clearing Run makes it idle unless `sticky_busy`.
struct Fake {
    dir: Dir,
    /// ('r' | 'w', offset, value) of every register access.
    log: RefCell<Vec<(char, usize, u32)>>,
    /// The hardware status register: error/stop bits plus the live busy bit.
    hw: Cell<u32>,
    completed: Cell<u32>,
    /// What the chain ends with: status bits and completed count.
    end_with: (u32, u32),
    /// A poll sees the end after this many status reads (None: the run never ends by itself).
    end_after: Cell<Option<u32>>,
    /// What `wait` returns; on Completed the hardware ends and the handler gathers its status.
    waited: Waited,
    /// Clearing Run does not stop the engine.
    sticky_busy: bool,
    /// The engine is in a read of the stream window: clearing Run does not stop it, `unblock` does.
    on_source: Cell<bool>,
    /// The card left the bus when the waiter waits: every read is all ones.
    vanish_on_wait: bool,
    all_ones: Cell<bool>,
    /// Removal starts while the waiter waits.
    gone_on_wait: bool,
    gone: Cell<bool>,
    wedged: Cell<bool>,
    status: Cell<u32>,
    clock: Cell<u64>,
    events: RefCell<Vec<Event>>,
    /// The write-back word's bus address (None: the glue keeps none), the word, and whether the running
    /// chain has poll mode on.
    wb_addr: Option<u64>,
    wb: Cell<u32>,
    pollmode: Cell<bool>,
    /// The engine ends after this many reads of the word (each read takes 1 us of the clock).
    wb_after: Cell<Option<u32>>,
    /// The performance monitor: its control, its cycle count, and the cycles each run adds.
    perf_ctrl: Cell<u32>,
    perf: Cell<u64>,
    run_cycles: u64,
}

impl Fake {
    fn new(dir: Dir) -> Self {
        Self {
            dir,
            log: RefCell::default(),
            hw: Cell::new(0),
            completed: Cell::new(0),
            end_with: (xdma::STAT_DESC_STOPPED | xdma::STAT_DESC_COMPLETED, 1),
            end_after: Cell::new(None),
            waited: Waited::Completed,
            sticky_busy: false,
            on_source: Cell::new(false),
            vanish_on_wait: false,
            all_ones: Cell::new(false),
            gone_on_wait: false,
            gone: Cell::new(false),
            wedged: Cell::new(false),
            status: Cell::new(0),
            clock: Cell::new(0),
            events: RefCell::default(),
            wb_addr: None,
            wb: Cell::new(0),
            pollmode: Cell::new(false),
            wb_after: Cell::new(None),
            perf_ctrl: Cell::new(0),
            perf: Cell::new(0),
            run_cycles: 5000,
        }
    }
    fn with_writeback(dir: Dir) -> Self {
        Self {
            wb_addr: Some(0x1_0000_1fe0),
            ..Self::new(dir)
        }
    }
    fn ch(&self, reg: usize) -> usize {
        self.dir.channel_base() + reg
    }
    fn end_chain(&self) {
        if self.perf_ctrl.get() & xdma::PERF_RUN != 0 {
            self.perf
                .set(self.perf.get().saturating_add(self.run_cycles));
        }
        self.hw.set(self.end_with.0 & !xdma::STAT_BUSY);
        self.completed.set(self.end_with.1);
        if self.pollmode.get() {
            let err = self.end_with.0 & xdma::STAT_ERRORS != 0;
            self.wb.set(u32::from(err) << 31 | self.end_with.1);
        }
    }
    fn writes(&self) -> Vec<(usize, u32)> {
        let log = self.log.borrow();
        log.iter()
            .filter(|a| a.0 == 'w')
            .map(|a| (a.1, a.2))
            .collect()
    }
    fn reads_of(&self, off: usize) -> usize {
        let log = self.log.borrow();
        log.iter().filter(|a| a.0 == 'r' && a.1 == off).count()
    }
}

impl Regs32 for Fake {
    type Error = Errno;
    fn read32(&self, offset: usize) -> Result<u32, Errno> {
        let v = if self.all_ones.get() {
            u32::MAX
        } else if offset == self.ch(xdma::CH_STATUS) || offset == self.ch(xdma::CH_STATUS_RC) {
            if let Some(n) = self.end_after.get() {
                if n <= 1 {
                    self.end_after.set(None);
                    self.end_chain();
                } else {
                    self.end_after.set(Some(n - 1));
                }
            }
            let v = self.hw.get();
            if offset == self.ch(xdma::CH_STATUS_RC) {
                self.hw.set(v & xdma::STAT_BUSY);
            }
            v
        } else if offset == self.ch(xdma::CH_COMPLETED_COUNT) {
            self.completed.get()
        } else if offset == self.ch(xdma::CH_PERF_CYC_LO) {
            self.perf.get() as u32
        } else if offset == self.ch(xdma::CH_PERF_CYC_HI) {
            let c = self.perf.get();
            (c >> 32) as u32 & 0x3ff
                | if c > 0x3ff_ffff_ffff {
                    xdma::PERF_MAXED
                } else {
                    0
                }
        } else {
            0
        };
        self.log.borrow_mut().push(('r', offset, v));
        Ok(v)
    }
    fn write32(&self, value: u32, offset: usize) -> Result<(), Errno> {
        self.log.borrow_mut().push(('w', offset, value));
        if offset == self.ch(xdma::CH_PERF_CTRL) {
            self.perf_ctrl.set(value);
        }
        if offset == self.ch(xdma::CH_CONTROL) && value & xdma::CTRL_RUN != 0 {
            if self.perf_ctrl.get() & xdma::PERF_AUTO != 0 {
                self.perf.set(0);
            }
            self.hw.set(xdma::STAT_BUSY);
            self.completed.set(0);
            self.pollmode.set(value & xdma::CTRL_POLLMODE_WB != 0);
        } else if offset == self.ch(xdma::CH_CONTROL_W1C)
            && !self.sticky_busy
            && !self.on_source.get()
        {
            self.hw.set(self.hw.get() & !xdma::STAT_BUSY);
        }
        Ok(())
    }
}

impl Platform for Fake {
    fn dir(&self) -> Dir {
        self.dir
    }
    fn gone(&self) -> bool {
        self.gone.get()
    }
    fn wedged(&self) -> bool {
        self.wedged.get()
    }
    fn vanished(&self) -> bool {
        if self.all_ones.get() {
            self.gone.set(true);
        }
        self.all_ones.get()
    }
    fn wedge(&self) {
        assert!(!self.wedged.get(), "wedged twice");
        self.wedged.set(true);
    }
    fn gated(&self, program: &mut dyn FnMut() -> Result<(), Errno>) -> Result<(), Errno> {
        if self.gone.get() {
            return Err(Errno::ENODEV);
        }
        if self.wedged.get() {
            return Err(Errno::EIO);
        }
        program()
    }
    fn status(&self) -> u32 {
        self.status.get()
    }
    fn add_status(&self, bits: u32) {
        self.status.set(self.status.get() | bits);
    }
    fn rearm(&self) {
        self.status.set(0);
    }
    fn wait(&self, ms: u32) -> Waited {
        if self.gone_on_wait {
            self.gone.set(true);
        }
        if self.vanish_on_wait {
            self.all_ones.set(true);
        }
        match self.waited {
            Waited::Completed => {
                // The interrupt handler reads the status (read-to-clear) and signals.
                self.end_chain();
                let v = self.read32(self.ch(xdma::CH_STATUS_RC)).unwrap();
                self.add_status(v);
            }
            _ => self.clock.set(self.clock.get() + u64::from(ms) * 1000),
        }
        self.waited
    }
    fn writeback_addr(&self) -> Option<u64> {
        self.wb_addr
    }
    fn writeback(&self) -> u32 {
        self.clock.set(self.clock.get() + 1);
        if let Some(n) = self.wb_after.get() {
            if n <= 1 {
                self.wb_after.set(None);
                self.end_chain();
            } else {
                self.wb_after.set(Some(n - 1));
            }
        }
        self.wb.get()
    }
    fn clear_writeback(&self) {
        self.wb.set(0);
    }
    fn unblock(&self) -> bool {
        if self.on_source.replace(false) {
            self.hw.set(self.hw.get() & !xdma::STAT_BUSY);
            return true;
        }
        false
    }
    fn now_us(&self) -> u64 {
        self.clock.get()
    }
    fn sleep_us(&self, us: u32) {
        self.clock.set(self.clock.get() + u64::from(us));
    }
    fn log(&self, event: Event) {
        self.events.borrow_mut().push(event);
    }
}

fn chain(bytes: u64, count: usize) -> Chain {
    Chain {
        first: 0x1_0000_1000,
        first_adj: 0,
        count,
        bytes,
    }
}

/// One run: start, wait, finish.
fn run(f: &Fake, wake: Wake) -> Result<u64, Errno> {
    let mut r = Run::start(f, wake, false, || Ok(chain(4096, 1)))?;
    r.wait(f);
    r.finish(f)
}

const C2H_CH: usize = 0x1000;
const C2H_SG: usize = 0x5000;

/// The stop sequence's writes for C2H (clear Run, mask, IRQ off, halt fetch; then let fetching go).
fn stop_writes() -> Vec<(usize, u32)> {
    [
        (C2H_CH + xdma::CH_CONTROL_W1C, xdma::CTRL_RUN),
        (C2H_CH + xdma::CH_INT_MASK, 0),
        (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C, 1 << 1),
        (xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S, 1 << 16),
        (xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C, 1 << 16),
    ]
    .into()
}

/// The start sequence's writes for C2H, armed or not (an unarmed run leaves the mask at its 0).
fn start_writes(irq: bool) -> Vec<(usize, u32)> {
    let mut w: Vec<(usize, u32)> = [
        (C2H_SG + xdma::SG_DESC_LO, 0x1000),
        (C2H_SG + xdma::SG_DESC_HI, 1),
        (C2H_SG + xdma::SG_DESC_ADJ, 0),
    ]
    .into();
    if irq {
        w.push((C2H_CH + xdma::CH_INT_MASK, INT_MASK));
        w.push((xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S, 1 << 1));
    }
    w.push((C2H_CH + xdma::CH_CONTROL, CTRL_START));
    w
}

#[test]
fn done_by_interrupt_programs_in_order_and_clears_run() {
    let f = Fake::new(Dir::C2h);
    assert_eq!(run(&f, Wake::Irq), Ok(4096));
    let mut want = start_writes(true);
    // Shown idle by the status that ended it: Run and the mask cleared, no stop.
    want.extend([
        (C2H_CH + xdma::CH_CONTROL_W1C, xdma::CTRL_RUN),
        (C2H_CH + xdma::CH_INT_MASK, 0),
    ]);
    assert_eq!(f.writes(), want);
    assert!(!f.wedged.get() && f.events.borrow().is_empty());
}

#[test]
fn polled_run_that_ends_is_never_armed() {
    let f = Fake::new(Dir::C2h);
    f.end_after.set(Some(3));
    assert_eq!(run(&f, Wake::Poll), Ok(4096));
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_STATUS_RC), 3);
    let w = f.writes();
    assert_eq!(w[..4], start_writes(false)[..]);
    // Never armed, so its mask is never written: it stays 0 from the run before (or reset).
    assert!(!w.iter().any(|&(at, _)| at == C2H_CH + xdma::CH_INT_MASK));
}

#[test]
fn polled_run_still_busy_is_armed_after_the_poll_reads() {
    let f = Fake::new(Dir::C2h);
    assert_eq!(run(&f, Wake::Poll), Ok(4096));
    // The poll's reads, then the handler's one.
    assert_eq!(
        f.reads_of(C2H_CH + xdma::CH_STATUS_RC),
        POLL_READS as usize + 1
    );
    let w = f.writes();
    assert_eq!(
        w[4..6],
        [
            (C2H_CH + xdma::CH_INT_MASK, INT_MASK),
            (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S, 1 << 1)
        ]
    );
    // Armed, so its end leaves the mask 0 again for the next unarmed run.
    assert_eq!(w.last(), Some(&(C2H_CH + xdma::CH_INT_MASK, 0)));
}

#[test]
fn timeout_stops_the_engine_and_says_etimedout() {
    let mut f = Fake::new(Dir::C2h);
    f.waited = Waited::TimedOut;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::ETIMEDOUT));
    let mut want = start_writes(true);
    want.extend(stop_writes());
    assert_eq!(f.writes(), want);
    assert_eq!(*f.events.borrow(), [Event::Timeout { ms: 2001 }]);
    assert!(!f.wedged.get());
    // The next run works.
    f.waited = Waited::Completed;
    assert_eq!(run(&f, Wake::Irq), Ok(4096));
}

#[test]
fn error_bits_are_the_errno_and_stop_the_engine() {
    for (bits, e) in [
        (xdma::STAT_READ_ERROR_UR, Errno::EIO),
        (xdma::STAT_MAGIC_STOPPED, Errno::EPROTO),
    ] {
        let mut f = Fake::new(Dir::C2h);
        f.end_with = (xdma::STAT_DESC_STOPPED | bits, 1);
        assert_eq!(run(&f, Wake::Irq), Err(e));
        let st = xdma::STAT_DESC_STOPPED | bits;
        assert_eq!(*f.events.borrow(), [Event::Failed { status: st }]);
        assert!(f.writes().ends_with(&stop_writes()));
        assert!(!f.wedged.get());
    }
}

#[test]
fn short_completed_count_is_eio() {
    let mut f = Fake::new(Dir::C2h);
    f.end_with.1 = 0;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::EIO));
    assert_eq!(
        *f.events.borrow(),
        [Event::Short {
            completed: 0,
            count: 1
        }]
    );
    assert!(f.writes().ends_with(&stop_writes()));
}

#[test]
fn removal_mid_run_is_enodev_after_the_stop() {
    let mut f = Fake::new(Dir::C2h);
    f.gone_on_wait = true;
    f.waited = Waited::TimedOut;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::ENODEV));
    assert!(f.writes().ends_with(&stop_writes()));
    assert!(!f.wedged.get() && f.events.borrow().is_empty());
}

#[test]
fn card_that_left_the_bus_is_enodev_and_wedged() {
    let mut f = Fake::new(Dir::C2h);
    f.vanish_on_wait = true;
    f.waited = Waited::TimedOut;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::ENODEV));
    // All ones reads busy: the stop cannot show it idle.
    assert!(f.wedged.get());
    assert_eq!(*f.events.borrow(), [Event::Vanished, Event::StillBusy]);
    // Error bits read as all ones are removal too.
    let mut f = Fake::new(Dir::C2h);
    f.vanish_on_wait = true;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::ENODEV));
    assert_eq!(f.events.borrow()[0], Event::Vanished);
}

#[test]
fn stop_that_leaves_run_set_wedges_the_card() {
    let mut f = Fake::new(Dir::C2h);
    f.waited = Waited::TimedOut;
    f.sticky_busy = true;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::EIO));
    assert!(f.wedged.get());
    assert_eq!(
        *f.events.borrow(),
        [Event::Timeout { ms: 2001 }, Event::StillBusy]
    );
    // It waited the stop's full time (after the run's timeout) before giving up.
    assert!(f.clock.get() > 2_001_000 + STOP_TIMEOUT_US);
    // Never started again, and the table is never built again.
    f.log.borrow_mut().clear();
    let r = Run::start(&f, Wake::Irq, false, || {
        panic!("table written on a wedged card")
    });
    assert_eq!(r.map(|_| ()), Err(Errno::EIO));
    assert!(f.log.borrow().is_empty());
}

#[test]
fn killed_wait_stops_the_run_unjudged() {
    let mut f = Fake::new(Dir::C2h);
    f.waited = Waited::Killed;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::EINTR));
    assert!(f.writes().ends_with(&stop_writes()));
    assert!(f.events.borrow().is_empty());
    f.gone_on_wait = true;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::ENODEV));
}

#[test]
fn gate_refuses_a_start_after_removal_without_a_register_write() {
    let f = Fake::new(Dir::C2h);
    f.gone.set(true);
    let r = Run::start(&f, Wake::Irq, false, || Ok(chain(4096, 1)));
    assert_eq!(r.map(|_| ()), Err(Errno::ENODEV));
    assert!(f.log.borrow().is_empty());
}

#[test]
fn cancel_stops_and_wedges_only_a_busy_engine() {
    let f = Fake::new(Dir::C2h);
    let r = Run::start(&f, Wake::Irq, false, || Ok(chain(4096, 1))).unwrap();
    assert_eq!(r.cancel(&f), Ok(()));
    assert!(f.writes().ends_with(&stop_writes()) && !f.wedged.get());
    let mut f = Fake::new(Dir::C2h);
    f.sticky_busy = true;
    let r = Run::start(&f, Wake::Irq, false, || Ok(chain(4096, 1))).unwrap();
    assert_eq!(r.cancel(&f), Err(Errno::EIO));
    assert!(f.wedged.get());
}

#[test]
fn transfer_runs_chains_until_every_byte_moved() {
    let f = Fake::new(Dir::C2h);
    let mut starts = Vec::new();
    let r = transfer(&f, 10_000, false, |done| {
        starts.push(done);
        Ok(chain((10_000 - done).min(4096), 1))
    });
    assert_eq!(r, Ok(0), "not timed");
    assert_eq!(starts, [0, 4096, 8192]);
}

#[test]
fn wedged_card_never_gets_its_table_rewritten() {
    let f = Fake::new(Dir::C2h);
    f.wedged.set(true);
    let r = Run::start(&f, Wake::Irq, false, || {
        panic!("table written on a wedged card")
    });
    assert_eq!(r.map(|_| ()), Err(Errno::EIO));
    assert!(f.log.borrow().is_empty());
}

/// The start sequence's writes for C2H with the write-back word at the fake's address, armed or not.
fn start_writes_wb(irq: bool) -> Vec<(usize, u32)> {
    let mut w = start_writes(irq);
    let run = w.pop().unwrap();
    w.extend([
        (C2H_CH + xdma::CH_POLL_WB_LO, 0x1fe0),
        (C2H_CH + xdma::CH_POLL_WB_HI, 1),
        (run.0, CTRL_START | xdma::CTRL_POLLMODE_WB),
    ]);
    w
}

#[test]
fn the_tables_last_slot_is_the_writeback_word() {
    assert_eq!(chain_slots(128), 127);
    assert_eq!(writeback_offset(128), 4064);
    // 4-byte aligned in any table (PG195), and past every descriptor a chain may use.
    assert_eq!(writeback_offset(128) % 4, 0);
    assert_eq!(writeback_offset(128), chain_slots(128) * xdma::DESC_SIZE);
}

#[test]
fn polled_run_with_writeback_reads_one_register() {
    let f = Fake::with_writeback(Dir::C2h);
    f.wb_after.set(Some(3));
    assert_eq!(run(&f, Wake::Poll), Ok(4096));
    // The word told it; one status read (stop bits, idle) and no count read, no interrupt.
    let reads: Vec<usize> = f
        .log
        .borrow()
        .iter()
        .filter(|a| a.0 == 'r')
        .map(|a| a.1)
        .collect();
    assert_eq!(reads, [C2H_CH + xdma::CH_STATUS_RC]);
    let mut want = start_writes_wb(false);
    want.push((C2H_CH + xdma::CH_CONTROL_W1C, xdma::CTRL_RUN));
    assert_eq!(f.writes(), want);
}

#[test]
fn writeback_that_does_not_come_arms_the_interrupt_after_the_spin() {
    let f = Fake::with_writeback(Dir::C2h);
    assert_eq!(run(&f, Wake::Poll), Ok(4096));
    assert!(f.clock.get() >= SPIN_US);
    // No status poll after the spin: armed at once; the handler's status read; the count from the word.
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_STATUS_RC), 1);
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_COMPLETED_COUNT), 0);
    let w = f.writes();
    assert_eq!(w[..6], start_writes_wb(false)[..]);
    assert_eq!(
        w[6..8],
        [
            (C2H_CH + xdma::CH_INT_MASK, INT_MASK),
            (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S, 1 << 1)
        ]
    );
}

#[test]
fn interrupt_run_takes_its_count_from_the_writeback_word() {
    let f = Fake::with_writeback(Dir::C2h);
    assert_eq!(run(&f, Wake::Irq), Ok(4096));
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_COMPLETED_COUNT), 0);
    assert_eq!(f.writes()[..8], start_writes_wb(true)[..]);
}

#[test]
fn writeback_error_is_judged_by_the_status() {
    let mut f = Fake::with_writeback(Dir::C2h);
    f.end_with = (xdma::STAT_DESC_STOPPED | xdma::STAT_READ_ERROR_UR, 1);
    f.wb_after.set(Some(2));
    assert_eq!(run(&f, Wake::Poll), Err(Errno::EIO));
    let st = xdma::STAT_DESC_STOPPED | xdma::STAT_READ_ERROR_UR;
    assert_eq!(*f.events.borrow(), [Event::Failed { status: st }]);
    assert!(f.writes().ends_with(&stop_writes()));
}

#[test]
fn short_writeback_count_is_read_from_the_register_and_is_eio() {
    let mut f = Fake::with_writeback(Dir::C2h);
    f.end_with.1 = 0;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::EIO));
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_COMPLETED_COUNT), 1);
    assert_eq!(
        *f.events.borrow(),
        [Event::Short {
            completed: 0,
            count: 1
        }]
    );
}

/// A timed transfer (`card_time`) arms the performance monitor before each chain's Run and adds each chain's
/// cycles, read after it completed, at the design's AXI clock; an untimed one touches neither. Seen
/// failing with the arm written after Run (the count cleared by nothing: the sum grows past 3 runs).
#[test]
fn a_timed_transfer_arms_the_monitor_before_run_and_sums_every_chain() {
    let f = Fake::new(Dir::C2h);
    // Cycles left from an earlier, untimed use: the auto mode's clear on Run drops them.
    f.perf.set(777);
    let r = transfer(&f, 10_000, true, |done| {
        Ok(chain((10_000 - done).min(4096), 1))
    });
    assert_eq!(r, Ok(3 * 5000 * xdma::AXI_CLOCK_NS));
    let w = f.writes();
    let arms: Vec<usize> = w
        .iter()
        .enumerate()
        .filter(|(_, a)| {
            **a == (
                C2H_CH + xdma::CH_PERF_CTRL,
                xdma::PERF_AUTO | xdma::PERF_RUN,
            )
        })
        .map(|(i, _)| i)
        .collect();
    let runs: Vec<usize> = w
        .iter()
        .enumerate()
        .filter(|(_, a)| a.0 == C2H_CH + xdma::CH_CONTROL && a.1 & xdma::CTRL_RUN != 0)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(arms.len(), 3);
    assert!(arms.iter().zip(&runs).all(|(a, r)| a < r), "{w:?}");
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_PERF_CYC_LO), 3);

    // Untimed: no arm, no read.
    let f = Fake::new(Dir::C2h);
    assert_eq!(transfer(&f, 4096, false, |_| Ok(chain(4096, 1))), Ok(0));
    let armed = f
        .writes()
        .iter()
        .any(|a| a.0 == C2H_CH + xdma::CH_PERF_CTRL);
    assert!(!armed);
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_PERF_CYC_LO), 0);

    // 42 bits of cycles; a saturated count reads as the longest time.
    let f = Fake {
        run_cycles: (1 << 35) + 3,
        ..Fake::new(Dir::H2c)
    };
    let r = transfer(&f, 4096, true, |_| Ok(chain(4096, 1)));
    assert_eq!(r, Ok(((1 << 35) + 3) * xdma::AXI_CLOCK_NS));
    let f = Fake {
        run_cycles: 1 << 43,
        ..Fake::new(Dir::H2c)
    };
    assert_eq!(
        transfer(&f, 4096, true, |_| Ok(chain(4096, 1))),
        Ok(u64::MAX)
    );

    // A chain that did not complete is not read, and its error is the transfer's.
    let f = Fake {
        waited: Waited::TimedOut,
        ..Fake::new(Dir::C2h)
    };
    assert_eq!(
        transfer(&f, 4096, true, |_| Ok(chain(4096, 1))),
        Err(Errno::ETIMEDOUT)
    );
    assert_eq!(f.reads_of(C2H_CH + xdma::CH_PERF_CYC_LO), 0);
}

#[test]
fn transfer_polls_small_chains_and_sleeps_on_large_ones() {
    let f = Fake::with_writeback(Dir::C2h);
    f.wb_after.set(Some(1));
    assert_eq!(
        transfer(&f, crate::pipeline::POLL_BYTES, false, |_| Ok(chain(
            crate::pipeline::POLL_BYTES,
            1
        ))),
        Ok(0)
    );
    assert!(!f.writes().contains(&(C2H_CH + xdma::CH_INT_MASK, INT_MASK)));
    let f = Fake::with_writeback(Dir::C2h);
    let big = crate::pipeline::POLL_BYTES + 4096;
    assert_eq!(transfer(&f, big, false, |_| Ok(chain(big, 1))), Ok(0));
    assert_eq!(f.writes()[..8], start_writes_wb(true)[..]);
    // Without a write-back word every one-way chain sleeps on its interrupt, as before.
    let f = Fake::new(Dir::C2h);
    assert_eq!(transfer(&f, 4096, false, |_| Ok(chain(4096, 1))), Ok(0));
    assert_eq!(f.writes()[..6], start_writes(true)[..]);
}

#[test]
fn a_stop_that_finds_the_engine_waiting_on_the_stream_source_ends_the_read() {
    // Killed while its C2H waits for the source's next record: clearing Run does not end the read.
    let mut f = Fake::new(Dir::C2h);
    f.waited = Waited::Killed;
    f.on_source.set(true);
    assert_eq!(run(&f, Wake::Irq), Err(Errno::EINTR));
    assert!(!f.wedged.get(), "the card was wedged");
    let ev = f.events.borrow();
    assert_eq!(ev.as_slice(), [Event::SourceStopped]);
    // It waited the whole stop timeout first: a source that delivers in time is never disabled.
    assert!(f.clock.get() > STOP_TIMEOUT_US, "{}", f.clock.get());
}

#[test]
fn an_h2c_engine_that_will_not_stop_is_never_unblocked() {
    // The fake would end the wait if asked: stop must not ask for H2C.
    let mut f = Fake::new(Dir::H2c);
    f.waited = Waited::Killed;
    f.on_source.set(true);
    assert_eq!(run(&f, Wake::Irq), Err(Errno::EIO));
    assert!(f.wedged.get());
    assert!(f.on_source.get(), "unblock was asked of H2C");
}

#[test]
fn an_engine_busy_for_another_reason_still_wedges_the_card() {
    let mut f = Fake::new(Dir::C2h);
    f.waited = Waited::Killed;
    f.sticky_busy = true;
    assert_eq!(run(&f, Wake::Irq), Err(Errno::EIO));
    assert!(f.wedged.get());
    assert!(!f.events.borrow().contains(&Event::SourceStopped));
}
