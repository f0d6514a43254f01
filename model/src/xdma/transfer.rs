//! The engine worker: one thread per engine runs the descriptor list a rising edge of Run latched, so DMA is
//! asynchronous to the MMIO write that started it (and can be slow, hang or be cancelled).
//!
//! Fetch rules (PG195, xdma.md §5.1): fetch `1 + dsc_adj` adjacent descriptors at the first-descriptor
//! address, then continue at `next` of the last descriptor fetched, with its `Nxt_adj`. Modelling choices
//! where the hardware is undefined or undocumented:
//! * an adjacent block that crosses a 4 KiB boundary, or a descriptor address that is not 32-byte aligned, is
//!   a descriptor error (desc_error UR) and stops the engine;
//! * a descriptor length of 0, or with bits above the 28-bit field set, is invalid_length;
//! * every error stops the engine; its status bit is logged only when the matching `ie_*` bit is set;
//! * in poll mode an error stop also writes back the completed count with `Sts_err` set;
//! * in poll mode the stopping descriptor's write-back is the engine's last act: busy is clear, the status
//!   final and the run's modeled end known when it lands, so a driver that saw the word and then reads a
//!   register sees the run ended (PG195 does not order the two);
//! * clearing Run while busy stops the engine at the next descriptor boundary and logs idle_stopped;
//! * while bus mastering is off the engine issues no memory request: it holds its next descriptor fetch or
//!   data piece, and goes on when bus mastering is enabled again (or stops there if Run was cleared);
//! * a C2H write to host memory no DMA map covers is dropped (a posted write cannot fail) and counted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, warn};
use picoevb_regs::xdma::{self, Descriptor, Dir};

use crate::bram::BEAT_BYTES;
use crate::device::{Shared, State};
use crate::guest_memory::Unmapped;
use crate::timing::RunCost;
use crate::xdma::engine::Job;

/// Bytes moved per step; the state lock is released between steps so MMIO stays responsive.
const CHUNK: usize = 64 * 1024;
/// AXI clock cycles charged per descriptor for fetch and completion (perf counters only).
const DESC_OVERHEAD_CYCLES: u64 = 64;
/// The XDMA's AXI clock for 64-bit Gen2 x1: 125 MHz, i.e. 8 ns per cycle (perf counters only).
const NS_PER_CYCLE: u128 = xdma::AXI_CLOCK_NS as u128;

/// How a transfer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// A descriptor with STOP completed.
    Stopped,
    /// Run was cleared while busy.
    IdleStopped,
    /// An error: the status bits to log.
    Error(u32),
}

/// The transfer was superseded (reset, new Run, shutdown): leave all state alone.
struct Abandoned;

/// Runs jobs for `dir` until the device shuts down.
pub(crate) fn worker(shared: Arc<Shared>, dir: Dir) {
    loop {
        let job = {
            let mut st = shared.lock();
            loop {
                if st.shutdown {
                    return;
                }
                if let Some(job) = st.xdma.engine_mut(dir).pending.take() {
                    break job;
                }
                st = shared.wait(st, None);
            }
        };
        Transfer::new(&shared, dir, job).run();
    }
}

/// The bits `corrupt_data` flips, different per engine: a round trip through both engines with the fault
/// armed for every transfer must still come back corrupted, not flipped twice back to the original.
pub fn corrupt_mask(dir: Dir) -> u8 {
    match dir {
        Dir::H2c => 0x55,
        Dir::C2h => 0xaa,
    }
}

struct Transfer<'a> {
    shared: &'a Shared,
    dir: Dir,
    job: Job,
    /// The first descriptor fetch of the transfer is where `bad_magic` / `desc_error` strike.
    first_fetch: bool,
    /// The first data descriptor is recorded in `host_addrs` (and where `stale_addr` strikes).
    first_data: bool,
    /// `corrupt_data` flips bits of the first data byte the transfer moves (see [`corrupt_mask`]).
    corrupt_pending: bool,
    /// When the data moved so far may be done at the configured bandwidth.
    paced_until: Instant,
    /// What the run costs on the modeled link (timing mode).
    cost: Option<RunCost>,
    /// The stopping descriptor asked for a write-back, which `finish` sends.
    wb_at_stop: bool,
    /// Timing mode: the run's modeled ns the performance monitor has counted.
    perf_ns: u64,
}

impl<'a> Transfer<'a> {
    fn new(shared: &'a Shared, dir: Dir, job: Job) -> Self {
        Self {
            shared,
            dir,
            job,
            first_fetch: true,
            first_data: true,
            corrupt_pending: job.faults.corrupt_data,
            paced_until: Instant::now(),
            cost: job.timing.map(|p| RunCost::new(dir, p)),
            wb_at_stop: false,
            perf_ns: 0,
        }
    }

    fn run(mut self) {
        match self.walk() {
            Ok(end) => self.finish(end),
            Err(Abandoned) => debug!("{:?}: transfer abandoned", self.dir),
        }
    }

    fn stale(&self, st: &State) -> bool {
        st.shutdown || st.unplugged || st.xdma.engine(self.dir).seq != self.job.seq
    }

    fn walk(&mut self) -> Result<End, Abandoned> {
        if let Some(delay) = self.job.faults.slow
            && let Some(end) = self.stall_until(Instant::now() + delay)?
        {
            return Ok(end);
        }
        let mut addr = self.job.first;
        let mut left = self.job.adjacent + 1;
        if let Err(bits) = self.check_block(addr, left) {
            return Ok(End::Error(bits));
        }
        self.cost_block(left);
        loop {
            if let Some(end) = self.gate()? {
                return Ok(end);
            }
            let desc = match self.fetch(addr) {
                Ok(d) => self.note_first_data(d),
                Err(bits) => return Ok(End::Error(bits)),
            };
            let start = Instant::now();
            let moved = match self.dir {
                Dir::H2c => self.host_to_card(&desc)?,
                Dir::C2h => self.card_to_host(&desc)?,
            };
            if let Err(bits) = moved {
                return Ok(End::Error(bits));
            }
            if let Some(c) = &mut self.cost {
                let host = match self.dir {
                    Dir::H2c => desc.src(),
                    Dir::C2h => desc.dst(),
                };
                c.descriptor(host, u64::from(desc.len));
            }
            if self.complete(&desc, start.elapsed())? {
                return Ok(End::Stopped);
            }
            left -= 1;
            if left > 0 {
                addr = addr.wrapping_add(xdma::DESC_SIZE as u64);
            } else {
                addr = desc.next();
                left = xdma::desc_next_adj(desc.control) + 1;
                if let Err(bits) = self.check_block(addr, left) {
                    return Ok(End::Error(bits));
                }
                self.cost_block(left);
            }
        }
    }

    fn cost_block(&mut self, count: u32) {
        if let Some(c) = &mut self.cost {
            c.block(count);
        }
    }

    /// A block of `count` adjacent descriptors at `addr` must be 32-byte aligned and stay in one 4 KiB page.
    fn check_block(&self, addr: u64, count: u32) -> Result<(), u32> {
        if !addr.is_multiple_of(xdma::DESC_ALIGN) {
            warn!(
                "{:?}: descriptor address {addr:#x} is not 32-byte aligned",
                self.dir
            );
            return Err(xdma::STAT_DESC_ERROR_UR);
        }
        let end = addr % xdma::DESC_BLOCK_BOUNDARY + u64::from(count) * xdma::DESC_SIZE as u64;
        if end > xdma::DESC_BLOCK_BOUNDARY {
            warn!(
                "{:?}: block of {count} adjacent descriptors at {addr:#x} crosses a 4 KiB boundary",
                self.dir
            );
            return Err(xdma::STAT_DESC_ERROR_UR);
        }
        Ok(())
    }

    /// Before each descriptor: go on, wait (bus mastering off, halted, hung, stuck), or stop (Run cleared).
    /// PCIe forbids a function to issue memory requests while bus mastering is off: the engine holds its
    /// fetch and resumes when it comes back on, unless Run was cleared meanwhile. A stuck engine ignores
    /// Run; bus mastering off ends it (with a descriptor error), the only way out a wedged engine has.
    fn gate(&self) -> Result<Option<End>, Abandoned> {
        let mut st = self.shared.lock();
        let verdict = loop {
            if self.stale(&st) {
                break Err(Abandoned);
            }
            let master = st.bus_master();
            if master {
                // No longer held for the bus, even if it now waits for something else (halt, hang).
                self.release_bus(&mut st);
            }
            if self.job.faults.stuck {
                if !master {
                    warn!(
                        "{:?}: stuck engine ended: bus mastering is disabled",
                        self.dir
                    );
                    break Ok(Some(End::Error(xdma::STAT_DESC_ERROR_UR)));
                }
            } else if !st.xdma.engine(self.dir).running() {
                break Ok(Some(End::IdleStopped));
            } else if !master {
                self.hold_for_bus(&mut st);
            } else if !(self.job.faults.hang || st.xdma.halted(self.dir)) {
                if self.job.leftover {
                    st.stats.stray_dma += 1;
                    warn!(
                        "{:?}: stray DMA: an engine left running fetches a descriptor",
                        self.dir
                    );
                }
                break Ok(None);
            }
            st = self.shared.wait(st, None);
        };
        self.release_bus(&mut st);
        verdict
    }

    /// Before each piece of data: hold the memory request while bus mastering is off. A descriptor is not
    /// cut short by clearing Run, so only bus mastering (or a reset) lets it go on.
    fn bus(&self) -> Result<(), Abandoned> {
        let mut st = self.shared.lock();
        let verdict = loop {
            if self.stale(&st) {
                break Err(Abandoned);
            }
            if st.bus_master() {
                break Ok(());
            }
            self.hold_for_bus(&mut st);
            st = self.shared.wait(st, None);
        };
        self.release_bus(&mut st);
        verdict
    }

    /// Marks the engine as holding a request for bus mastering (what `state` reports, and what a config
    /// write that enables bus mastering waits on).
    fn hold_for_bus(&self, st: &mut State) {
        let e = st.xdma.engine_mut(self.dir);
        if !e.bus_wait {
            debug!(
                "{:?}: holding memory requests: bus mastering is disabled",
                self.dir
            );
            e.bus_wait = true;
        }
    }

    fn release_bus(&self, st: &mut State) {
        if std::mem::take(&mut st.xdma.engine_mut(self.dir).bus_wait) {
            debug!("{:?}: no longer holding memory requests", self.dir);
            self.shared.wake.notify_all();
        }
    }

    /// Waits until `deadline` unless Run is cleared first (`slow` fault).
    fn stall_until(&self, deadline: Instant) -> Result<Option<End>, Abandoned> {
        let mut st = self.shared.lock();
        loop {
            if self.stale(&st) {
                return Err(Abandoned);
            }
            if !st.xdma.engine(self.dir).running() {
                return Ok(Some(End::IdleStopped));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            st = self.shared.wait(st, Some(deadline - now));
        }
    }

    /// Holds the data phase back to the configured bandwidth. Clearing Run does not cut a descriptor short.
    fn pace(&mut self, bytes: usize) -> Result<(), Abandoned> {
        let Some(mbps) = self.shared.options.bandwidth_mbps.filter(|&b| b > 0) else {
            return Ok(());
        };
        let nanos = (bytes as u128 * 1000 / u128::from(mbps)).min(u128::from(u64::MAX)) as u64;
        // Pacing starts from now if the transfer fell behind: no credit is saved up for later bursts.
        self.paced_until = self.paced_until.max(Instant::now()) + Duration::from_nanos(nanos);
        let mut st = self.shared.lock();
        loop {
            if self.stale(&st) {
                return Err(Abandoned);
            }
            let now = Instant::now();
            if now >= self.paced_until {
                return Ok(());
            }
            st = self.shared.wait(st, Some(self.paced_until - now));
        }
    }

    fn fetch(&mut self, addr: u64) -> Result<Descriptor, u32> {
        let first = std::mem::replace(&mut self.first_fetch, false);
        if first && self.job.faults.desc_error {
            return Err(xdma::STAT_DESC_ERROR_UR);
        }
        let mut raw = [0u8; xdma::DESC_SIZE];
        if let Err(Unmapped(at)) = self.shared.mem.read(addr, &mut raw) {
            warn!(
                "{:?}: descriptor fetch at {addr:#x} hit unmapped memory at {at:#x}",
                self.dir
            );
            return Err(xdma::STAT_DESC_ERROR_UR);
        }
        let mut d = Descriptor::from_le_bytes(&raw);
        if first && self.job.faults.bad_magic {
            d.control &= 0x0000_ffff;
        }
        if xdma::desc_magic(d.control) != xdma::DESC_MAGIC {
            warn!(
                "{:?}: bad descriptor magic {:#010x} at {addr:#x}",
                self.dir, d.control
            );
            return Err(xdma::STAT_MAGIC_STOPPED);
        }
        if d.len == 0 || d.len > xdma::DESC_LEN_FIELD_MAX {
            warn!(
                "{:?}: invalid descriptor length {:#x} at {addr:#x}",
                self.dir, d.len
            );
            return Err(xdma::STAT_INVALID_LENGTH);
        }
        Ok(d)
    }

    /// Records the transfer's first host address; with `stale_addr`, runs the previous transfer's instead.
    fn note_first_data(&mut self, d: Descriptor) -> Descriptor {
        if !std::mem::replace(&mut self.first_data, false) {
            return d;
        }
        let stale = self.job.faults.stale_addr;
        let (d, replaced) = self
            .shared
            .lock()
            .stats
            .host_addrs
            .first_data(self.dir, &d, stale);
        if replaced {
            warn!(
                "{:?}: stale_addr: first descriptor runs at the previous transfer's host address",
                self.dir
            );
        }
        d
    }

    fn corrupt(&mut self, buf: &mut [u8]) {
        if self.corrupt_pending && !buf.is_empty() {
            buf[0] ^= corrupt_mask(self.dir);
            self.corrupt_pending = false;
        }
    }

    /// H2C: host memory -> BRAM.
    fn host_to_card(&mut self, desc: &Descriptor) -> Result<Result<(), u32>, Abandoned> {
        let faults = self.job.faults;
        let len = desc.len as usize;
        let mut buf = vec![0u8; len.min(CHUNK)];
        let mut off = 0usize;
        while off < len {
            let n = (len - off).min(CHUNK);
            let piece = &mut buf[..n];
            let src = desc.src().wrapping_add(off as u64);
            self.bus()?;
            if faults.read_error {
                return Ok(Err(xdma::STAT_READ_ERROR_UR));
            }
            if let Err(Unmapped(at)) = self.shared.mem.read(src, piece) {
                warn!("H2C: host read at {src:#x} hit unmapped memory at {at:#x}");
                return Ok(Err(xdma::STAT_READ_ERROR_UR));
            }
            self.corrupt(piece);
            if faults.write_error {
                return Ok(Err(xdma::STAT_WRITE_ERROR_DECODE));
            }
            {
                let mut st = self.shared.lock();
                if self.stale(&st) {
                    return Err(Abandoned);
                }
                let fixed = st.xdma.engine(self.dir).control & xdma::CTRL_NON_INC_ADDR != 0;
                let dst = if fixed {
                    desc.dst()
                } else {
                    desc.dst().wrapping_add(off as u64)
                };
                if st.user.stream_window(desc.dst()) {
                    st.user.stream.sink.write(piece);
                } else {
                    st.bram.write(dst, piece, fixed);
                }
            }
            self.pace(n)?;
            off += n;
        }
        Ok(Ok(()))
    }

    /// C2H: BRAM -> host memory. Writes to unmapped host memory are dropped and counted.
    fn card_to_host(&mut self, desc: &Descriptor) -> Result<Result<(), u32>, Abandoned> {
        let faults = self.job.faults;
        let len = desc.len as usize;
        let mut buf = vec![0u8; len.min(CHUNK)];
        let mut dropped = false;
        let mut off = 0usize;
        let window = self.shared.lock().user.stream_window(desc.src());
        while off < len {
            let n = (len - off).min(CHUNK);
            let piece = &mut buf[..n];
            self.bus()?;
            if faults.read_error {
                return Ok(Err(xdma::STAT_READ_ERROR_UR)); // C2H bit 9: AXI decode error
            }
            if window {
                self.stream_fill(piece)?;
            } else {
                let st = self.shared.lock();
                if self.stale(&st) {
                    return Err(Abandoned);
                }
                let fixed = st.xdma.engine(self.dir).control & xdma::CTRL_NON_INC_ADDR != 0;
                let src = if fixed {
                    desc.src()
                } else {
                    desc.src().wrapping_add(off as u64)
                };
                st.bram.read(src, piece, fixed);
            }
            self.corrupt(piece);
            let dst = desc.dst().wrapping_add(off as u64);
            if faults.write_error {
                dropped = true;
            } else if let Err(Unmapped(at)) = self.shared.mem.write(dst, piece) {
                if !dropped {
                    warn!(
                        "C2H: host write at {dst:#x} hit unmapped memory at {at:#x}; dropping it"
                    );
                }
                dropped = true;
            }
            self.pace(n)?;
            off += n;
        }
        if dropped {
            self.shared.lock().stats.dropped_writes += 1;
        }
        Ok(Ok(()))
    }

    /// C2H from the stream window: the source's next bytes. With no record ready the read waits for the
    /// next one, as the AXI read does on the card: in modeled time (the run takes longer) in timing mode,
    /// in wall time otherwise. Clearing Run does not cut it short; a reset or removal abandons it.
    fn stream_fill(&mut self, buf: &mut [u8]) -> Result<(), Abandoned> {
        /// Longest wall-clock sleep before the source is looked at again (it may be disabled meanwhile).
        const RECHECK: Duration = Duration::from_millis(10);
        let mut done = 0;
        loop {
            let (now, due) = {
                let mut st = self.shared.lock();
                if self.stale(&st) {
                    return Err(Abandoned);
                }
                let now = match &self.cost {
                    Some(c) => st.timing.engine_now(self.dir, c),
                    None => st.user.stream.wall_ns(),
                };
                let f = st.user.stream.source.fill(now, &mut buf[done..]);
                done += f.bytes;
                match f.wait_until {
                    None => return Ok(()),
                    Some(due) => (now, due),
                }
            };
            let wait = due.saturating_sub(now);
            if let Some(c) = &mut self.cost {
                c.stall(wait);
                continue;
            }
            let deadline = Instant::now() + Duration::from_nanos(wait).min(RECHECK);
            let mut st = self.shared.lock();
            loop {
                if self.stale(&st) {
                    return Err(Abandoned);
                }
                let t = Instant::now();
                if t >= deadline {
                    break;
                }
                st = self.shared.wait(st, Some(deadline - t));
            }
        }
    }

    /// Descriptor done: count it, log COMPLETED (and write back in poll mode), raise interrupts. Returns
    /// whether the descriptor had STOP.
    fn complete(&mut self, desc: &Descriptor, took: Duration) -> Result<bool, Abandoned> {
        let mut st = self.shared.lock();
        if self.stale(&st) {
            return Err(Abandoned);
        }
        let len = u64::from(desc.len);
        let beats = len.div_ceil(BEAT_BYTES);
        let stats = &mut st.stats.engines[self.dir.index()];
        stats.descriptors += 1;
        stats.bytes += len;
        let e = st.xdma.engine_mut(self.dir);
        e.completed = e.completed.wrapping_add(1);
        let stop = desc.control & xdma::DESC_STOP != 0;
        if desc.control & xdma::DESC_COMPLETED != 0 {
            e.log(xdma::STAT_DESC_COMPLETED);
            if e.pollmode() {
                if let Some(c) = &mut self.cost {
                    c.writeback();
                }
                if stop {
                    self.wb_at_stop = true;
                } else {
                    self.write_back(&mut st, false);
                }
            }
        }
        // The monitor counts the card's clock: in timing mode the modeled one, so that a run's cycles
        // are its modeled time (the timing counters' `busy_ns`); else the wall time, at least the beats.
        let cycles = match &self.cost {
            Some(c) => {
                let cycles = u128::from(c.ns().saturating_sub(self.perf_ns)) / NS_PER_CYCLE;
                self.perf_ns += (cycles * NS_PER_CYCLE) as u64;
                cycles as u64
            }
            None => (beats + DESC_OVERHEAD_CYCLES).max((took.as_nanos() / NS_PER_CYCLE) as u64),
        };
        st.xdma.engine_mut(self.dir).perf.account(cycles, beats);
        if stop {
            st.xdma.engine_mut(self.dir).log(xdma::STAT_DESC_STOPPED);
        } else {
            // Mid-list COMPLETED descriptors (cyclic lists) interrupt while the engine keeps running.
            self.raise(&mut st);
        }
        Ok(stop)
    }

    /// Poll-mode write-back: the DWORD `Sts_err << 31 | completed[23:0]` at the write-back address.
    fn write_back(&self, st: &mut State, error: bool) {
        let e = st.xdma.engine(self.dir);
        let value = if error { xdma::WB_ERROR } else { 0 } | (e.completed & xdma::WB_COUNT);
        let addr = e.writeback;
        if self.shared.mem.write(addr, &value.to_le_bytes()).is_err() {
            warn!(
                "{:?}: poll-mode write-back to unmapped {addr:#x} dropped",
                self.dir
            );
            st.stats.dropped_writes += 1;
        } else {
            st.stats.engines[self.dir.index()].writebacks += 1;
        }
    }

    fn raise(&self, st: &mut State) {
        if self.job.faults.drop_irq {
            st.irq_out.suppress(self.dir.irq_bit());
        }
        st.update_irqs(&*self.shared.irq);
    }

    /// The engine stops: log how, clear busy, interrupt.
    fn finish(&mut self, end: End) {
        let mut st = self.shared.lock();
        if self.stale(&st) {
            return;
        }
        match end {
            End::Stopped => {}
            End::IdleStopped => st.xdma.engine_mut(self.dir).log(xdma::STAT_IDLE_STOPPED),
            End::Error(bits) => {
                st.stats.engines[self.dir.index()].errors += 1;
                st.xdma.engine_mut(self.dir).log(bits);
                if st.xdma.engine(self.dir).pollmode() {
                    self.write_back(&mut st, true);
                    if let Some(c) = &mut self.cost {
                        c.writeback();
                    }
                }
            }
        }
        let e = st.xdma.engine_mut(self.dir);
        e.status &= !xdma::STAT_BUSY;
        debug!(
            "{:?}: stopped ({end:?}), status {:#010x}, {} descriptors",
            self.dir, e.status, e.completed
        );
        let irqs = st.stats.irqs_msi + st.stats.irqs_intx;
        // Before the interrupt: the write-back is posted ahead of the MSI on the link.
        if self.wb_at_stop && matches!(end, End::Stopped) && st.xdma.engine(self.dir).pollmode() {
            self.write_back(&mut st, false);
        }
        self.raise(&mut st);
        if let Some(c) = &self.cost {
            let raised = st.stats.irqs_msi + st.stats.irqs_intx > irqs;
            st.timing.finish(self.dir, c, raised);
        }
        self.shared.wake.notify_all();
    }
}
