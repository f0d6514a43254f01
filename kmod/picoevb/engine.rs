// SPDX-License-Identifier: GPL-2.0

//! One XDMA engine (H2C or C2H channel 0): its descriptor table, its completion and status, the kernel
//! services the shared engine protocol (`kmod/logic/src/engine.rs`) runs chains with, and `Run`: one chain
//! from Run to the proof that the engine is idle again, holding the descriptor table meanwhile, with a drop
//! that ends a run nobody ended (an early return) through the protocol's cancel.

use crate::chain;
use crate::channel::Regs32;
use crate::done::Done;
use crate::engine_logic::{self as engine, Event, Waited};
use crate::errno::Errno;
use crate::errors::{errno, kerr};
use crate::killable::{self, KillableMutex};
use crate::pipeline::Wake;
use crate::port::Port;
use crate::segments::Cursor;
use crate::status;
use crate::xdma::{self, Descriptor, Dir};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{dma::CoherentAllocation, prelude::*, time::Delta};

/// Slots in one table: one page, so no adjacent block can cross 4 KiB; the last holds the engine's
/// write-back word (`engine_logic::writeback_offset`), the others chains. A request that needs more
/// descriptors (a very fragmented buffer) simply runs as several chains.
pub(crate) const TABLE_LEN: usize = 4096 / xdma::DESC_SIZE;

/// One DMA engine. Its mutex serialises users of the engine (the other engine runs independently);
/// waiting for it is killable (`killable.rs`).
#[pin_data]
pub(crate) struct Engine {
    pub(crate) dir: Dir,
    /// The descriptor table; `None` once the card is gone (freed at unbind, while the device is bound).
    #[pin]
    table: KillableMutex<Table>,
    #[pin]
    pub(crate) done: Done,
    /// Status the interrupt handler read (read-to-clear) for the chain in flight.
    status: AtomicU32,
}

/// An engine's descriptor table, taken with the engine's lock.
pub(crate) type Table = Option<CoherentAllocation<Descriptor>>;

impl Engine {
    pub(crate) fn new(
        dev: &kernel::device::Device<kernel::device::Bound>,
        dir: Dir,
    ) -> Result<impl PinInit<Self, Error>> {
        let table = CoherentAllocation::<Descriptor>::alloc_coherent(dev, TABLE_LEN, GFP_KERNEL)?;
        Ok(try_pin_init!(Self {
            dir,
            // One lock class per engine (`helpers.c`): H2C2H holds both, H2C first.
            table <- KillableMutex::new(Some(table), match dir { Dir::H2c => 0, Dir::C2h => 1 }),
            done <- Done::new(),
            status: AtomicU32::new(0),
        }))
    }

    /// Called by the interrupt handler with the status it read for this engine.
    pub(crate) fn signal(&self, status: u32) {
        self.status.fetch_or(status, Ordering::AcqRel);
        self.done.complete();
    }

    /// Locks the engine for a request; EINTR if the task is killed while another request runs.
    pub(crate) fn lock(&self) -> Result<killable::Guard<'_, Table>> {
        self.table.lock_killable()
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
    /// With `card_time`, the engine's run time by the card's clock (else 0).
    pub(crate) fn transfer(
        &self,
        port: &Port,
        table: &mut Table,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
        card_time: bool,
    ) -> Result<u64> {
        let table = table.as_mut().ok_or(ENODEV)?;
        let p = self.platform_with(port, table);
        engine::transfer(&p, len, card_time, |done| {
            self.build(table, host, fpga + done, len - done)
        })
        .map_err(kerr)
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
        let p = self.platform_with(port, table);
        let run = engine::Run::start(&p, wake, false, || self.build(table, host, fpga, len))
            .map_err(kerr)?;
        Ok(Run::new(p, table, run))
    }

    /// Writes a chain into the table; called by the shared protocol only once it has refused a wedged card
    /// (whose engine may still fetch descriptors: its table is never written again; `wedge` runs under the
    /// engine's lock, which the caller holds, so every later holder sees it).
    fn build(
        &self,
        table: &mut CoherentAllocation<Descriptor>,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
    ) -> core::result::Result<chain::Chain, Errno> {
        let base = table.dma_handle();
        // SAFETY: the engine does not read the table now: we hold its lock, and every chain started on
        // it was a `Run` holding this borrow until it ended (`finish`, `cancel` or its drop), which
        // returned only once the engine was shown idle, or else wedged the card, which the shared
        // protocol refuses before calling this.
        let descs = unsafe { table.as_slice_mut(0, engine::chain_slots(TABLE_LEN)) }
            .map_err(|_| Errno::EINVAL)?;
        chain::build(self.dir, host, len, fpga, xdma::DESC_LEN_MAX, descs, base)
    }

    /// Stops the engine (PG195's stop, `engine::stop`); whether it was shown idle.
    pub(crate) fn stop(&self, port: &Port) -> bool {
        engine::stop(&self.platform(port))
    }

    /// The kernel services the shared protocol runs on, for this engine of `port`'s card, without a
    /// write-back word (a stop, which starts nothing).
    pub(crate) fn platform<'a>(&'a self, port: &'a Port) -> Platform<'a> {
        Platform {
            engine: self,
            port,
            wb: None,
        }
    }

    /// The same with the write-back word in the last slot of `table`. Its two callers keep `table`
    /// borrowed for as long as the platform lives: `transfer` for the whole call, `start` in the returned
    /// [`Run`], which holds both and drops its platform before its table borrow (field order).
    fn platform_with<'a>(
        &'a self,
        port: &'a Port,
        table: &mut CoherentAllocation<Descriptor>,
    ) -> Platform<'a> {
        let at = engine::writeback_offset(TABLE_LEN);
        Platform {
            engine: self,
            port,
            wb: Some(WriteBack {
                // In bounds: `at` lies inside the last of the table's `TABLE_LEN` slots.
                cpu: table
                    .start_ptr_mut()
                    .cast::<u8>()
                    .wrapping_add(at)
                    .cast::<u32>(),
                bus: table.dma_handle() + at as u64,
            }),
        }
    }
}

/// An engine's write-back word: where the engine writes its completed count (PG195's poll mode), in the
/// last slot of its descriptor table.
#[derive(Clone, Copy)]
struct WriteBack {
    cpu: *mut u32,
    bus: u64,
}

/// One engine of a card as the shared protocol (`kmod/logic/src/engine.rs`) sees it: the DMA BAR, the
/// gate, the completion and status the interrupt handler fills, the write-back word, the clock and the log.
pub(crate) struct Platform<'a> {
    engine: &'a Engine,
    port: &'a Port,
    /// Set only while the table it lies in is borrowed for the platform's whole life (`platform_with`).
    wb: Option<WriteBack>,
}

impl Regs32 for Platform<'_> {
    type Error = Errno;
    fn read32(&self, offset: usize) -> core::result::Result<u32, Errno> {
        self.port
            .regs()
            .and_then(|r| r.read32(offset))
            .map_err(errno)
    }
    fn write32(&self, value: u32, offset: usize) -> core::result::Result<(), Errno> {
        self.port
            .regs()
            .and_then(|r| r.write32(value, offset))
            .map_err(errno)
    }
}

impl engine::Platform for Platform<'_> {
    fn dir(&self) -> Dir {
        self.engine.dir
    }
    fn gone(&self) -> bool {
        self.port.is_gone()
    }
    fn wedged(&self) -> bool {
        self.port.is_wedged()
    }
    fn vanished(&self) -> bool {
        self.port.vanished()
    }
    fn wedge(&self) {
        self.port.wedge()
    }
    fn gated(
        &self,
        program: &mut dyn FnMut() -> core::result::Result<(), Errno>,
    ) -> core::result::Result<(), Errno> {
        let _start = self.port.start_guard().map_err(errno)?;
        program()
    }
    fn status(&self) -> u32 {
        self.engine.status.load(Ordering::Acquire)
    }
    fn add_status(&self, bits: u32) {
        self.engine.status.fetch_or(bits, Ordering::AcqRel);
    }
    fn rearm(&self) {
        self.engine.status.store(0, Ordering::Release);
        self.engine.done.reinit();
    }
    fn wait(&self, ms: u32) -> Waited {
        self.engine.done.wait(ms)
    }
    fn writeback_addr(&self) -> Option<u64> {
        self.wb.map(|w| w.bus)
    }
    fn writeback(&self) -> u32 {
        self.wb.map_or(0, |w| {
            // SAFETY: `w.cpu` is the 4-byte aligned word at `writeback_offset` in the engine's coherent
            // descriptor table (`platform_with`), whose allocation outlives this platform: both callers of
            // `platform_with` keep the table borrowed while the platform lives, and the table is freed
            // only through `release_table`, which takes the engine lock they hold. The engine writes the
            // word, hence the volatile read.
            unsafe { core::ptr::read_volatile(w.cpu) }
        })
    }
    fn clear_writeback(&self) {
        if let Some(w) = self.wb {
            // SAFETY: as in `writeback`; no run of this engine is going (the protocol zeroes the word
            // before it sets Run), so only this thread touches it. The MMIO write that sets Run orders it
            // before the engine's own write.
            unsafe { core::ptr::write_volatile(w.cpu, 0) };
        }
    }
    fn now_us(&self) -> u64 {
        // SAFETY: ktime_get() may be called from any context but NMI.
        let ns = unsafe { kernel::bindings::ktime_get() };
        ns as u64 / 1000
    }
    fn sleep_us(&self, us: u32) {
        kernel::time::delay::fsleep(Delta::from_micros(us.into()));
    }
    fn unblock(&self) -> bool {
        self.port.stop_stream_source()
    }
    fn log(&self, event: Event) {
        let (dev, dir) = (self.port.dev(), self.engine.dir);
        // Each arm is a statement: the kernel's dev_* macros end in a semicolon, which newer rustc refuses in
        // expression position (semicolon_in_expressions_from_non_local_macros).
        match event {
            Event::Vanished => {
                dev_err!(dev, "card stopped answering (surprise removal?)\n");
            }
            Event::Timeout { ms } => {
                dev_err!(
                    dev,
                    "{:?} engine: no completion after {} ms; engine reset\n",
                    dir,
                    ms
                );
            }
            Event::Failed { status: st } => {
                dev_err!(
                    dev,
                    "{:?} engine: {} (status {:#010x})\n",
                    dir,
                    status::describe(st),
                    st
                );
            }
            Event::Short { completed, count } => {
                dev_err!(
                    dev,
                    "{:?} engine: completed {} of {} descriptors\n",
                    dir,
                    completed,
                    count
                );
            }
            Event::StillBusy => {
                dev_err!(dev, "{:?} engine still busy after halt\n", dir);
            }
            Event::SourceStopped => {
                dev_warn!(
                    dev,
                    "{:?} engine: waiting on the stream source when stopped; source disabled\n",
                    dir
                );
            }
            Event::ReleaseFailed(e) => {
                dev_warn!(dev, "{:?} engine: release after stop: {:?}\n", dir, kerr(e));
            }
        }
    }
}

/// A chain started on an engine. It holds the engine's descriptor table until it is finished, and every
/// way out goes through the shared protocol: [`Run::finish`], [`Run::cancel`], or the drop of a run
/// neither reached, which cancels it.
pub(crate) struct Run<'a> {
    p: Platform<'a>,
    _table: &'a mut CoherentAllocation<Descriptor>,
    run: Option<engine::Run>,
}

impl<'a> Run<'a> {
    /// A chain `Engine::start` has just started, holding the engine's `table`.
    pub(crate) fn new(
        p: Platform<'a>,
        table: &'a mut CoherentAllocation<Descriptor>,
        run: engine::Run,
    ) -> Self {
        Self {
            p,
            _table: table,
            run: Some(run),
        }
    }

    /// Waits until the chain ended or its timeout passed (or removal woke us, or a fatal signal came).
    pub(crate) fn wait(&mut self) {
        if let Some(run) = self.run.as_mut() {
            run.wait(&self.p);
        }
    }

    /// Judges the chain (after [`Run::wait`]) and ends the run: the bytes moved, or why not.
    pub(crate) fn finish(mut self) -> Result<u64> {
        let run = self.run.take().ok_or(EINVAL)?;
        run.finish(&self.p).map_err(kerr)
    }

    /// Stops the run without judging it (the request failed elsewhere): Ok if the engine was shown idle.
    pub(crate) fn cancel(mut self) -> Result {
        let run = self.run.take().ok_or(EINVAL)?;
        run.cancel(&self.p).map_err(kerr)
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            let _ = run.cancel(&self.p);
        }
    }
}
