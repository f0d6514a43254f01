// SPDX-License-Identifier: GPL-2.0

//! One XDMA engine (H2C or C2H channel 0): its descriptor table, its completion, and running chains on it
//! with a timeout and recovery.

use crate::chain;
use crate::channel::{Channel, Status};
use crate::done::Done;
use crate::errno::Errno;
use crate::port::Port;
use crate::run::{Run, Wake, POLL_READS};
use crate::segments::Cursor;
use crate::status;
use crate::xdma::{self, Descriptor, Dir};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    c_str, dma::CoherentAllocation, io::poll::read_poll_timeout, prelude::*, sync::Mutex,
    time::Delta,
};

/// Descriptors in one table: one page, so no adjacent block can cross 4 KiB; a request that needs more
/// (a very fragmented buffer) simply runs as several chains.
pub(crate) const TABLE_LEN: usize = 4096 / xdma::DESC_SIZE;

/// Interrupt sources the engine reports to us: the end of the chain and every error.
const INT_MASK: u32 = xdma::STAT_DESC_STOPPED | xdma::STAT_DESC_COMPLETED | xdma::STAT_ERRORS;

/// Control word that starts a chain: Run plus logging of every status bit (as NVIDIA's driver).
const CTRL_START: u32 = xdma::CTRL_RUN | xdma::CTRL_IE_ALL;

/// One DMA engine. Its mutex serialises users of the engine (the other engine runs independently).
#[pin_data]
pub(crate) struct Engine {
    pub(crate) dir: Dir,
    /// The descriptor table; `None` once the card is gone (freed at unbind, while the device is bound).
    #[pin]
    table: Mutex<Table>,
    #[pin]
    pub(crate) done: Done,
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

    /// Wakes a waiter early (the card is going away); it finds out why from the gate.
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
        port: &Port,
        table: &mut Table,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
    ) -> Result {
        let mut done = 0;
        while done < len {
            let mut run = self.start(port, table, host, fpga + done, len - done, Wake::Irq)?;
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
        port: &'a Port,
        table: &'a mut Table,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
        wake: Wake,
    ) -> Result<Run<'a>> {
        let table = table.as_mut().ok_or(ENODEV)?;
        // A wedged engine may still fetch descriptors: its table is never written again. `wedge` runs
        // under this lock (in `finish`), so every later holder sees it.
        if port.is_wedged() {
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
        self.program(port, &c, wake == Wake::Irq)?;
        Ok(Run::new(self, port, table, c, wake))
    }

    /// Programs the chain and sets Run, last; with `irq` its interrupt is armed. An error means Run was not
    /// written: nothing runs. No stale status is read first: every run's status was read-to-clear when it
    /// ended (interrupt handler, poll or `stop`), and Run's rising edge clears bits [23:1] anyway.
    fn program(&self, port: &Port, c: &chain::Chain, irq: bool) -> Result {
        let _start = port.start_guard()?;
        let r = port.regs()?;
        let ch = Channel::new(&*r, self.dir);
        ch.set_chain(c.first, c.first_adj)?;
        ch.set_int_mask(if irq { INT_MASK } else { 0 })?;
        if irq {
            ch.irq_enable(true)?;
        }
        // writel orders the descriptor writes in coherent memory before this MMIO write.
        ch.control(CTRL_START)
    }

    /// Arms the interrupt of a polled run that is still busy. The channel interrupt is the status masked
    /// by the enable mask (PG195; the model: `status & int_mask`), so a run that ends between the last
    /// poll and this write still interrupts.
    pub(crate) fn arm(&self, port: &Port) -> Result {
        let r = port.regs()?;
        let ch = Channel::new(&*r, self.dir);
        ch.set_int_mask(INT_MASK)?;
        ch.irq_enable(true)
    }

    /// Reads the status of an unarmed run up to [`POLL_READS`] times: whether it ended (stopped, or an
    /// error bit), with every bit the reads cleared kept in `status`.
    pub(crate) fn poll(&self, port: &Port) -> bool {
        let Ok(r) = port.regs() else {
            return false;
        };
        let ch = Channel::new(&*r, self.dir);
        for _ in 0..POLL_READS {
            let s = match ch.take_status() {
                // All ones: the card may be gone; the armed wait and its timeout decide.
                Ok(s) if !s.unreachable() => s,
                _ => return false,
            };
            self.status
                .fetch_or(s.0 & !xdma::STAT_BUSY, Ordering::AcqRel);
            if s.ended() {
                // Busy as last read: `finish` needs it to tell whether the engine is idle.
                self.status
                    .fetch_or(s.0 & xdma::STAT_BUSY, Ordering::AcqRel);
                return true;
            }
        }
        false
    }

    /// What the run came to, judged before the engine is stopped (the completed count is read while Run
    /// is still set).
    pub(crate) fn outcome(
        &self,
        port: &Port,
        c: &chain::Chain,
        completed: bool,
        bytes: u64,
    ) -> Result {
        if port.is_gone() {
            // Removal is stopping the engines; `finish` still waits for this one to be idle.
            return Err(ENODEV);
        }
        if !completed {
            if port.vanished() {
                dev_err!(port.dev(), "card stopped answering (surprise removal?)\n");
                return Err(ENODEV);
            }
            dev_err!(
                port.dev(),
                "{:?} engine: no completion after {} ms; engine reset\n",
                self.dir,
                timeout_ms(bytes)
            );
            return Err(ETIMEDOUT);
        }
        let st = self.status.load(Ordering::Acquire);
        if let Err(e) = status::outcome(st) {
            // A card that left the bus mid-run reads all ones, error bits included: that is removal.
            if port.vanished() {
                dev_err!(port.dev(), "card stopped answering (surprise removal?)\n");
                return Err(ENODEV);
            }
            dev_err!(
                port.dev(),
                "{:?} engine: {} (status {:#010x})\n",
                self.dir,
                status::describe(st),
                st
            );
            return Err(kerr(e));
        }
        let n = Channel::new(&*port.regs()?, self.dir).completed_count()?;
        if n as usize != c.count {
            dev_err!(
                port.dev(),
                "{:?} engine: completed {} of {} descriptors\n",
                self.dir,
                n,
                c.count
            );
            return Err(removal_or(port, EIO));
        }
        Ok(())
    }

    /// The one way out of a run: the engine is stopped and shown idle before the caller may unpin its pages
    /// or rewrite the table. An engine that cannot be shown idle wedges the card (bus mastering off, no new
    /// chain) and the request fails with EIO (ENODEV if the card is gone): the caller keeps its pages
    /// pinned until unbind (`Card::quarantine`).
    pub(crate) fn finish(&self, port: &Port, outcome: Result) -> Result {
        let idle = match outcome {
            Ok(()) => self.clear_run(port) || self.stop(port),
            Err(_) => self.stop(port),
        };
        if idle {
            return outcome;
        }
        port.wedge();
        Err(if outcome == Err(ENODEV) {
            ENODEV
        } else {
            removal_or(port, EIO)
        })
    }

    /// `finish` for a run nobody judges (the request failed elsewhere): stops it; Ok if shown idle, else
    /// the card is wedged and the error says so.
    pub(crate) fn halt(&self, port: &Port) -> Result {
        if self.stop(port) {
            return Ok(());
        }
        port.wedge();
        Err(removal_or(port, EIO))
    }

    /// After a completed chain: clears Run and the interrupt mask; whether the engine is idle. The status
    /// that told us the chain ended (read-to-clear, bit 0 the live busy bit) already shows it when busy was
    /// clear then: a stopped engine starts again only on a rising edge of Run. Otherwise it is read again.
    fn clear_run(&self, port: &Port) -> bool {
        let seen_idle = !Status(self.status.load(Ordering::Acquire)).busy();
        let idle = || -> Result<bool> {
            let r = port.regs()?;
            let ch = Channel::new(&*r, self.dir);
            ch.clear_run()?;
            ch.set_int_mask(0)?;
            Ok(seen_idle || !ch.status()?.busy())
        };
        idle().unwrap_or(false)
    }

    /// Stops the engine the way PG195 and NVIDIA's teardown do: clear Run, halt descriptor fetching, wait
    /// for busy to drop, clear the status. Returns whether the engine was shown idle (false if busy stayed
    /// set, or the registers could not be reached).
    pub(crate) fn stop(&self, port: &Port) -> bool {
        let quiesce = || -> Result {
            let r = port.regs()?;
            let ch = Channel::new(&*r, self.dir);
            ch.clear_run()?;
            ch.set_int_mask(0)?;
            ch.irq_enable(false)?;
            ch.halt_fetch(true)
        };
        if quiesce().is_err() {
            return false;
        }
        let idle = read_poll_timeout(
            || Channel::new(&*port.regs()?, self.dir).status(),
            |s: &Status| !s.busy(),
            Delta::from_millis(1),
            Delta::from_millis(100),
        )
        .is_ok();
        // Let fetching go again and drop the stopped run's status, for the next run.
        let release = || -> Result {
            let r = port.regs()?;
            let ch = Channel::new(&*r, self.dir);
            ch.halt_fetch(false)?;
            ch.take_status().map(|_| ())
        };
        if let Err(e) = release() {
            // Only once the BAR is gone (unbind): no chain starts after that.
            dev_warn!(
                port.dev(),
                "{:?} engine: release after stop: {:?}\n",
                self.dir,
                e
            );
        }
        if !idle {
            dev_err!(port.dev(), "{:?} engine still busy after halt\n", self.dir);
        }
        idle
    }
}

/// How long a chain of `bytes` may take: far above the Gen2 x1 ceiling (~400 MB/s) even under emulation,
/// short enough that a lost interrupt is reported in seconds, not never.
pub(crate) fn timeout_ms(bytes: u64) -> u32 {
    (2000 + bytes / 4096).min(60_000) as u32
}

/// `e`, unless the card has left the bus (removal, or every identifier reads all ones): then ENODEV. An
/// engine of a vanished card reads busy for ever and its completed count as all ones, which is removal, not
/// an engine fault.
fn removal_or(port: &Port, e: Error) -> Error {
    if port.is_gone() || port.vanished() {
        ENODEV
    } else {
        e
    }
}
