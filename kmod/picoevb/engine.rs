// SPDX-License-Identifier: GPL-2.0

//! One XDMA engine (H2C or C2H channel 0): its descriptor table, its completion, and running chains on it
//! with a timeout and recovery.

use crate::card::Card;
use crate::chain;
use crate::errno::Errno;
use crate::ffi;
use crate::segments::Cursor;
use crate::status;
use crate::xdma::{self, Descriptor, Dir};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    bindings, c_str, dma::CoherentAllocation, io::poll::read_poll_timeout, prelude::*, sync::Mutex,
    time::Delta, types::Opaque,
};

/// Descriptors in one table: one page, so no adjacent block can cross 4 KiB; a request that needs more
/// (a very fragmented buffer) simply runs as several chains.
pub(crate) const TABLE_LEN: usize = 4096 / xdma::DESC_SIZE;

/// Interrupt sources the engine reports to us: the end of the chain and every error.
const INT_MASK: u32 = xdma::STAT_DESC_STOPPED | xdma::STAT_DESC_COMPLETED | xdma::STAT_ERRORS;

/// Control word that starts a chain: Run plus logging of every status bit (as NVIDIA's driver).
const CTRL_START: u32 = xdma::CTRL_RUN | xdma::CTRL_IE_ALL;

/// Status reads a polled run gets before its interrupt is armed: each is a non-posted round trip over the
/// link (about 1 us on Gen2 x1), so about 32 us of spinning, a third of a 32 KiB H2C.
const POLL_READS: u32 = 32;

/// How the waiter learns that a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The run's interrupt wakes the waiter.
    Irq,
    /// No interrupt: the waiter reads the status (the run is expected to end about now), and arms the
    /// interrupt only if the run is still busy after [`POLL_READS`] reads.
    Poll,
}

/// A `struct completion` signalled by the interrupt handler.
#[pin_data]
struct Done {
    #[pin]
    inner: Opaque<bindings::completion>,
}

// SAFETY: a completion is designed to be signalled and waited on from any context and thread.
unsafe impl Send for Done {}
// SAFETY: as above.
unsafe impl Sync for Done {}

impl Done {
    fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- Opaque::ffi_init(|slot: *mut bindings::completion| {
                // SAFETY: `slot` points to an uninitialised completion we own.
                unsafe { bindings::init_completion(slot) };
            }),
        })
    }
    fn reinit(&self) {
        // SAFETY: `inner` is an initialised completion; callers hold the engine lock, so nobody waits on it.
        unsafe { ffi::pevb_completion_reinit(self.inner.get()) };
    }
    fn complete(&self) {
        // SAFETY: `inner` is an initialised completion; complete() is safe from hard IRQ context.
        unsafe { ffi::pevb_completion_complete(self.inner.get()) };
    }
    fn wait(&self, ms: u32) -> bool {
        // SAFETY: `inner` is an initialised completion that outlives the wait.
        unsafe { ffi::pevb_completion_wait_ms(self.inner.get(), ms) > 0 }
    }
}

/// One DMA engine. Its mutex serialises users of the engine (the other engine runs independently).
#[pin_data]
pub(crate) struct Engine {
    pub(crate) dir: Dir,
    /// The descriptor table; `None` once the card is gone (freed at unbind, while the device is bound).
    #[pin]
    table: Mutex<Table>,
    #[pin]
    done: Done,
    /// Status the interrupt handler read (read-to-clear) for the chain in flight.
    status: AtomicU32,
}

/// An engine's descriptor table, taken with the engine's lock.
pub(crate) type Table = Option<CoherentAllocation<Descriptor>>;

/// Errno values of the shared logic as kernel errors.
pub(crate) fn kerr(e: Errno) -> Error {
    Error::from_errno(-e.0)
}

impl Engine {
    pub(crate) fn new(
        dev: &kernel::device::Device<kernel::device::Bound>,
        dir: Dir,
    ) -> Result<impl PinInit<Self, Error>> {
        let table = CoherentAllocation::<Descriptor>::alloc_coherent(dev, TABLE_LEN, GFP_KERNEL)?;
        // One lock class per engine: H2C2H holds both (H2C first), which lockdep would otherwise take
        // for recursive locking of one class.
        let (name, class) = match dir {
            Dir::H2c => (c_str!("picoevb_h2c"), kernel::static_lock_class!()),
            Dir::C2h => (c_str!("picoevb_c2h"), kernel::static_lock_class!()),
        };
        Ok(try_pin_init!(Self {
            dir,
            table <- Mutex::new(Some(table), name, class),
            done <- Done::new(),
            status: AtomicU32::new(0),
        }))
    }

    /// Called by the interrupt handler with the status it read for this engine.
    pub(crate) fn signal(&self, status: u32) {
        self.status.fetch_or(status, Ordering::AcqRel);
        self.done.complete();
    }

    /// Locks the engine for a request.
    pub(crate) fn lock(&self) -> kernel::sync::MutexGuard<'_, Table> {
        self.table.lock()
    }

    /// Wakes a waiter early (the card is going away); it finds out why from the card.
    pub(crate) fn wake(&self) {
        self.done.complete();
    }

    /// Frees the descriptor table: at unbind, once no request uses the engine.
    pub(crate) fn release_table(&self) {
        *self.table.lock() = None;
    }

    /// Moves `len` bytes between the host pieces under `host` and FPGA RAM at `fpga`, as few chains as the
    /// descriptor table allows (one for any request of the PicoEVB's size). The caller holds `table`.
    pub(crate) fn transfer(
        &self,
        card: &Card,
        table: &mut Table,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
    ) -> Result {
        let mut done = 0;
        while done < len {
            let mut run = self.start(card, table, host, fpga + done, len - done, Wake::Irq)?;
            run.wait();
            done += run.finish()?;
        }
        Ok(())
    }

    /// Builds a chain of up to `len` bytes (as many as the table holds) from `host` to or from FPGA RAM at
    /// `fpga` and starts it. The returned [`Run`] holds the table until it is finished: nothing rewrites
    /// descriptors the engine may still fetch.
    pub(crate) fn start<'a>(
        &'a self,
        card: &'a Card,
        table: &'a mut Table,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
        wake: Wake,
    ) -> Result<Run<'a>> {
        let table = table.as_mut().ok_or(ENODEV)?;
        // A wedged engine may still fetch descriptors: its table is never written again. `wedge` runs
        // under this lock (in `finish`), so every later holder sees it.
        if card.is_wedged() {
            return Err(EIO);
        }
        let base = table.dma_handle();
        // SAFETY: the engine does not read the table now: we hold its lock, and every chain started on
        // it was a `Run` holding this borrow until `finish` (or its drop), which returned only once the
        // engine was shown idle, or else wedged the card, which the check above refuses.
        let descs = unsafe { table.as_slice_mut(0, TABLE_LEN)? };
        let c = chain::build(self.dir, host, len, fpga, xdma::DESC_LEN_MAX, descs, base)
            .map_err(kerr)?;
        self.status.store(0, Ordering::Release);
        self.done.reinit();
        self.program(card, &c, wake == Wake::Irq)?;
        Ok(Run {
            engine: self,
            card,
            _table: table,
            chain: c,
            wake,
            completed: false,
            finished: false,
        })
    }

    /// Programs the chain and sets Run, last; with `irq` its interrupt is armed. An error means Run was not
    /// written: nothing runs. No stale status is read first: every run's status was read-to-clear when it
    /// ended (interrupt handler, poll or `stop`), and Run's rising edge clears bits [23:1] anyway.
    fn program(&self, card: &Card, c: &chain::Chain, irq: bool) -> Result {
        let (ch, sg) = (self.dir.channel_base(), self.dir.sgdma_base());
        let _start = card.start_guard()?;
        let r = card.dma_regs()?;
        r.try_write32(c.first as u32, sg + xdma::SG_DESC_LO)?;
        r.try_write32((c.first >> 32) as u32, sg + xdma::SG_DESC_HI)?;
        r.try_write32(c.first_adj, sg + xdma::SG_DESC_ADJ)?;
        if irq {
            r.try_write32(INT_MASK, ch + xdma::CH_INT_MASK)?;
            r.try_write32(self.dir.irq_bit(), xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S)?;
        } else {
            r.try_write32(0, ch + xdma::CH_INT_MASK)?;
        }
        // writel orders the descriptor writes in coherent memory before this MMIO write.
        r.try_write32(CTRL_START, ch + xdma::CH_CONTROL)
    }

    /// Arms the interrupt of a polled run that is still busy. The channel interrupt is the status masked
    /// by the enable mask (PG195; the model: `status & int_mask`), so a run that ends between the last
    /// poll and this write still interrupts.
    fn arm(&self, card: &Card) -> Result {
        let r = card.dma_regs()?;
        r.try_write32(INT_MASK, self.dir.channel_base() + xdma::CH_INT_MASK)?;
        r.try_write32(self.dir.irq_bit(), xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S)
    }

    /// Reads the status of an unarmed run up to [`POLL_READS`] times: whether it ended (stopped, or an
    /// error bit), with every bit the reads cleared kept in `status`.
    fn poll(&self, card: &Card) -> bool {
        let Ok(r) = card.dma_regs() else {
            return false;
        };
        let reg = self.dir.channel_base() + xdma::CH_STATUS_RC;
        for _ in 0..POLL_READS {
            let s = match r.try_read32(reg) {
                // All ones: the card may be gone; the armed wait and its timeout decide.
                Ok(s) if s != u32::MAX => s,
                _ => return false,
            };
            self.status.fetch_or(s & !xdma::STAT_BUSY, Ordering::AcqRel);
            if s & xdma::STAT_BUSY == 0 || s & xdma::STAT_ERRORS != 0 {
                // Busy as last read: `finish` needs it to tell whether the engine is idle.
                self.status.fetch_or(s & xdma::STAT_BUSY, Ordering::AcqRel);
                return true;
            }
        }
        false
    }

    /// What the run came to, judged before the engine is stopped (the completed count is read while Run
    /// is still set).
    fn outcome(&self, card: &Card, c: &chain::Chain, completed: bool, bytes: u64) -> Result {
        if card.is_gone() {
            // Removal is stopping the engines; `finish` still waits for this one to be idle.
            return Err(ENODEV);
        }
        if !completed {
            if card.vanished() {
                dev_err!(card.dev(), "card stopped answering (surprise removal?)\n");
                return Err(ENODEV);
            }
            dev_err!(
                card.dev(),
                "{:?} engine: no completion after {} ms; engine reset\n",
                self.dir,
                timeout_ms(bytes)
            );
            return Err(ETIMEDOUT);
        }
        let st = self.status.load(Ordering::Acquire);
        if let Err(e) = status::outcome(st) {
            dev_err!(
                card.dev(),
                "{:?} engine: {} (status {:#010x})\n",
                self.dir,
                status::describe(st),
                st
            );
            return Err(kerr(e));
        }
        let n = card
            .dma_regs()?
            .try_read32(self.dir.channel_base() + xdma::CH_COMPLETED_COUNT)?;
        if n as usize != c.count {
            dev_err!(
                card.dev(),
                "{:?} engine: completed {} of {} descriptors\n",
                self.dir,
                n,
                c.count
            );
            return Err(EIO);
        }
        Ok(())
    }

    /// The one way out of a run: the engine is stopped and shown idle before the caller may unpin its pages
    /// or rewrite the table. An engine that cannot be shown idle wedges the card (bus mastering off, no new
    /// chain) and the request fails with EIO (ENODEV if the card is gone): the caller keeps its pages
    /// pinned until unbind (`Card::quarantine`).
    fn finish(&self, card: &Card, outcome: Result) -> Result {
        let idle = match outcome {
            Ok(()) => self.clear_run(card) || self.stop(card),
            Err(_) => self.stop(card),
        };
        if idle {
            return outcome;
        }
        card.wedge();
        Err(if outcome == Err(ENODEV) { ENODEV } else { EIO })
    }

    /// `finish` for a run nobody judges (the request failed elsewhere): stops it; Ok if shown idle, else
    /// the card is wedged and the error says so.
    fn halt(&self, card: &Card) -> Result {
        if self.stop(card) {
            return Ok(());
        }
        card.wedge();
        Err(if card.is_gone() { ENODEV } else { EIO })
    }

    /// After a completed chain: clears Run and the interrupt mask; whether the engine is idle. The status
    /// that told us the chain ended (read-to-clear, bit 0 the live busy bit) already shows it when busy was
    /// clear then: a stopped engine starts again only on a rising edge of Run. Otherwise it is read again.
    fn clear_run(&self, card: &Card) -> bool {
        let ch = self.dir.channel_base();
        let seen_idle = self.status.load(Ordering::Acquire) & xdma::STAT_BUSY == 0;
        let idle = || -> Result<bool> {
            let r = card.dma_regs()?;
            r.try_write32(xdma::CTRL_RUN, ch + xdma::CH_CONTROL_W1C)?;
            r.try_write32(0, ch + xdma::CH_INT_MASK)?;
            Ok(seen_idle || r.try_read32(ch + xdma::CH_STATUS)? & xdma::STAT_BUSY == 0)
        };
        idle().unwrap_or(false)
    }

    /// Stops the engine the way PG195 and NVIDIA's teardown do: clear Run, halt descriptor fetching, wait
    /// for busy to drop, clear the status. Returns whether the engine was shown idle (false if busy stayed
    /// set, or the registers could not be reached).
    pub(crate) fn stop(&self, card: &Card) -> bool {
        let ch = self.dir.channel_base();
        let halt = self.dir.sgdma_common_bit();
        let quiesce = || -> Result {
            let r = card.dma_regs()?;
            r.try_write32(xdma::CTRL_RUN, ch + xdma::CH_CONTROL_W1C)?;
            r.try_write32(0, ch + xdma::CH_INT_MASK)?;
            r.try_write32(self.dir.irq_bit(), xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C)?;
            r.try_write32(halt, xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S)?;
            Ok(())
        };
        if quiesce().is_err() {
            return false;
        }
        let idle = read_poll_timeout(
            || card.dma_regs()?.try_read32(ch + xdma::CH_STATUS),
            |s: &u32| s & xdma::STAT_BUSY == 0,
            Delta::from_millis(1),
            Delta::from_millis(100),
        )
        .is_ok();
        if let Ok(r) = card.dma_regs() {
            let _ = r.try_write32(halt, xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C);
            let _ = r.try_read32(ch + xdma::CH_STATUS_RC);
        }
        if !idle {
            dev_err!(card.dev(), "{:?} engine still busy after halt\n", self.dir);
        }
        idle
    }
}

/// How long a chain of `bytes` may take: far above the Gen2 x1 ceiling (~400 MB/s) even under emulation,
/// short enough that a lost interrupt is reported in seconds, not never.
fn timeout_ms(bytes: u64) -> u32 {
    (2000 + bytes / 4096).min(60_000) as u32
}

/// A chain started on an engine. It holds the engine's descriptor table until it is finished, and every
/// way out goes through `Engine::finish`: [`Run::finish`], [`Run::cancel`], or the drop of a run neither
/// reached (an early return), which cancels it.
pub(crate) struct Run<'a> {
    engine: &'a Engine,
    card: &'a Card,
    _table: &'a mut CoherentAllocation<Descriptor>,
    chain: chain::Chain,
    wake: Wake,
    completed: bool,
    finished: bool,
}

impl Run<'_> {
    /// Waits until the chain ended or its timeout passed (or removal woke us).
    pub(crate) fn wait(&mut self) {
        let e = self.engine;
        if self.wake == Wake::Poll {
            if e.poll(self.card) {
                self.completed = true;
                return;
            }
            if e.arm(self.card).is_err() {
                return;
            }
        }
        self.completed = e.done.wait(timeout_ms(self.chain.bytes));
    }

    /// Judges the chain (after [`Run::wait`]) and ends the run: the bytes moved, or why not.
    pub(crate) fn finish(mut self) -> Result<u64> {
        let outcome = self
            .engine
            .outcome(self.card, &self.chain, self.completed, self.chain.bytes);
        self.finished = true;
        self.engine.finish(self.card, outcome)?;
        Ok(self.chain.bytes)
    }

    /// Stops the run without judging it (the request failed elsewhere): Ok if the engine was shown idle.
    pub(crate) fn cancel(mut self) -> Result {
        self.finished = true;
        self.engine.halt(self.card)
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.engine.halt(self.card);
        }
    }
}
