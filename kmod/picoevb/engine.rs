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
        let table = table.as_mut().ok_or(ENODEV)?;
        let mut done = 0;
        while done < len {
            // A wedged engine may still fetch descriptors: its table is never written again. `wedge` runs
            // under this lock (in `finish`), so every later holder sees it.
            if card.is_wedged() {
                return Err(EIO);
            }
            let base = table.dma_handle();
            // SAFETY: the engine does not read the table now: we hold its lock, and every chain started on
            // it went through `finish`, which returned only once the engine was shown idle, or else wedged
            // the card, which the check above refuses.
            let descs = unsafe { table.as_slice_mut(0, TABLE_LEN)? };
            let c = chain::build(
                self.dir,
                host,
                len - done,
                fpga + done,
                xdma::DESC_LEN_MAX,
                descs,
                base,
            )
            .map_err(kerr)?;
            self.run(card, &c, c.bytes)?;
            done += c.bytes;
        }
        Ok(())
    }

    /// Runs one chain to its STOP descriptor. Every chain that was started ends in `finish`.
    fn run(&self, card: &Card, c: &chain::Chain, bytes: u64) -> Result {
        self.status.store(0, Ordering::Release);
        self.done.reinit();
        self.start(card, c)?;
        let completed = self.done.wait(timeout_ms(bytes));
        let outcome = self.outcome(card, c, completed, bytes);
        self.finish(card, outcome)
    }

    /// Programs the chain and sets Run, last. An error means Run was not written: nothing runs.
    fn start(&self, card: &Card, c: &chain::Chain) -> Result {
        let (ch, sg) = (self.dir.channel_base(), self.dir.sgdma_base());
        let _start = card.start_guard()?;
        let r = card.dma_regs()?;
        r.try_write32(c.first as u32, sg + xdma::SG_DESC_LO)?;
        r.try_write32((c.first >> 32) as u32, sg + xdma::SG_DESC_HI)?;
        r.try_write32(c.first_adj, sg + xdma::SG_DESC_ADJ)?;
        // Drop status a previous (stopped) run may have left.
        r.try_read32(ch + xdma::CH_STATUS_RC)?;
        r.try_write32(INT_MASK, ch + xdma::CH_INT_MASK)?;
        r.try_write32(self.dir.irq_bit(), xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S)?;
        // writel orders the descriptor writes in coherent memory before this MMIO write.
        r.try_write32(CTRL_START, ch + xdma::CH_CONTROL)
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

    /// After a completed chain: clears Run and the interrupt mask; whether the engine then reads idle.
    fn clear_run(&self, card: &Card) -> bool {
        let ch = self.dir.channel_base();
        let idle = || -> Result<bool> {
            let r = card.dma_regs()?;
            r.try_write32(xdma::CTRL_RUN, ch + xdma::CH_CONTROL_W1C)?;
            r.try_write32(0, ch + xdma::CH_INT_MASK)?;
            Ok(r.try_read32(ch + xdma::CH_STATUS)? & xdma::STAT_BUSY == 0)
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
