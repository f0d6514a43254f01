//! The PicoEVB function as a whole: region dispatch (config space, BAR0, BAR1), the shared state the engine
//! worker threads operate on, and the control-channel view of it.
//!
//! Locking: one mutex guards all register state, BRAM, faults and counters. Guest memory and the interrupt
//! sink have their own locks and are only ever taken *inside* the state lock (never the other way round), so
//! the order is always state -> guest memory / sink.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, warn};
use picoevb_regs::gpio;
use picoevb_regs::pci::{BAR_DMA, BAR_DMA_SIZE, BAR_USER, BAR_USER_SIZE};
use picoevb_regs::xdma::{self, Dir};

use crate::bram::Bram;
use crate::config_space::{self, ConfigSpace};
use crate::faults::{FaultKind, FaultQueue, TransferFaults};
use crate::guest_memory::GuestMemory;
use crate::interrupts::InterruptSink;
use crate::options::DeviceOptions;
use crate::stats::{EngineStats, Stats};
use crate::timing::{Params, Timing};
use crate::user_bar::UserBar;
use crate::xdma::engine::{ControlEdge, Job};
use crate::xdma::irq::{IrqOutput, USER_SHIFT};
use crate::xdma::regs::{Context, Effects};
use crate::xdma::{Xdma, transfer};

/// Everything behind the state lock.
pub(crate) struct State {
    pub(crate) config: ConfigSpace,
    pub(crate) user: UserBar,
    pub(crate) xdma: Xdma,
    pub(crate) bram: Bram,
    pub(crate) irq_out: IrqOutput,
    pub(crate) faults: FaultQueue,
    pub(crate) stats: Stats,
    pub(crate) timing: Timing,
    pub(crate) shutdown: bool,
    /// Surprise removal: the card answers nothing (BAR reads all ones, writes lost, no DMA, no IRQ).
    pub(crate) unplugged: bool,
    /// Programming state: golden design, armed faults (see `program.rs`).
    pub(crate) program: crate::program::ProgramState,
}

impl State {
    /// Re-evaluates the interrupt request bits and signals what they call for.
    pub(crate) fn update_irqs(&mut self, sink: &dyn InterruptSink) {
        let chan = self.xdma.channel_sources() & self.xdma.irq.chan_enable();
        let user = self.user_sources() & self.xdma.irq.user_enable();
        let intx_disabled = self.config.command() & config_space::COMMAND_INTX_DISABLE != 0;
        let irq_block = &self.xdma.irq;
        let level = self.irq_out.update(
            chan | user << USER_SHIFT,
            |bit| irq_block.vector(bit),
            intx_disabled,
            sink,
            &mut self.stats,
        );
        self.config.set_interrupt_status(level);
    }

    /// Raw user interrupt sources: the GPIO interrupt drives `usr_irq_req[0]`.
    fn user_sources(&self) -> u32 {
        u32::from(self.user.gpio.irq())
    }

    fn xdma_context(&self) -> Context {
        Context {
            msi_enabled: self.irq_out.msi_vectors() > 0,
            max_payload: self.config.max_payload_code(),
            max_read: self.config.max_read_request_code(),
            user_sources: self.user_sources(),
        }
    }

    /// Now, for the stream block's registers: the software clock in timing mode, the wall clock otherwise.
    pub(crate) fn stream_now(&self) -> u64 {
        if self.timing.enabled {
            self.timing.clock_ns()
        } else {
            self.user.stream.wall_ns()
        }
    }

    /// Whether the function may issue memory requests: the command register's bus master enable.
    pub(crate) fn bus_master(&self) -> bool {
        self.config.command() & config_space::COMMAND_MASTER != 0
    }

    /// Run rose on `dir`: latch the job (with the faults armed for it) for the worker. A `leftover` run
    /// (see [`Device::leave_running`]) is no transfer of the driver's: it takes no armed fault.
    fn start(&mut self, dir: Dir, leftover: bool) {
        let faults = if leftover {
            TransferFaults::default()
        } else {
            self.faults.take_for_transfer()
        };
        self.stats.faults_injected += faults.count();
        self.stats.engines[dir.index()].runs += 1;
        if !self.bus_master() {
            warn!(
                "{dir:?}: Run set while bus mastering is disabled: the engine holds its requests until it is enabled"
            );
        }
        let timing = self.timing.start(
            dir,
            128u64 << self.config.max_payload_code().min(5),
            128u64 << self.config.max_read_request_code().min(5),
        );
        let e = self.xdma.engine_mut(dir);
        debug!(
            "{dir:?}: run, first descriptor {:#x} + {} adjacent, faults {faults:?}{}",
            e.desc_addr,
            e.desc_adj,
            if leftover { ", left running" } else { "" }
        );
        e.pending = Some(Job {
            seq: e.seq,
            first: e.desc_addr,
            adjacent: e.desc_adj,
            faults,
            timing,
            leftover,
        });
    }
}

/// How long a config write that enables bus mastering waits for held engines to resume.
const HELD_ENGINE_WAIT: Duration = Duration::from_secs(1);

/// State shared by the device handle and the engine workers.
pub(crate) struct Shared {
    state: Mutex<State>,
    /// Signalled whenever something a worker (or `wait_idle`) may be waiting for changes.
    pub(crate) wake: Condvar,
    pub(crate) mem: Arc<dyn GuestMemory>,
    pub(crate) irq: Arc<dyn InterruptSink>,
    pub(crate) options: DeviceOptions,
}

impl Shared {
    /// Takes the state lock (a panic elsewhere must not wedge the model, so poisoning is ignored).
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits on [`Shared::wake`], at most `timeout` if given.
    pub(crate) fn wait<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, State> {
        match timeout {
            Some(t) => {
                self.wake
                    .wait_timeout(guard, t)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => self.wake.wait(guard).unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// What the control channel's `state` command reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Channel 1 GPIO data (LEDs, active-low).
    pub gpio_data: u32,
    /// ID block scratch register.
    pub scratch: u32,
    /// MSI enabled by the OS.
    pub msi_enabled: bool,
    /// Counters.
    pub stats: Stats,
    /// DMA maps held.
    pub dma_maps: u64,
    /// Names of armed faults.
    pub pending_faults: Vec<&'static str>,
    /// Engines holding a memory request until bus mastering is enabled.
    pub bus_waits: Vec<Dir>,
}

impl Snapshot {
    /// Lit LEDs, one bit per LED.
    pub fn leds(&self) -> u32 {
        gpio::leds_lit(self.gpio_data)
    }

    /// Counters of one engine.
    pub fn engine(&self, dir: Dir) -> EngineStats {
        self.stats.engines[dir.index()]
    }
}

/// The device model. Cheap to share by reference; dropping it stops the engine workers.
pub struct Device {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Device {
    /// A device at power-on, with one worker thread per DMA engine.
    pub fn new(
        options: DeviceOptions,
        mem: Arc<dyn GuestMemory>,
        irq: Arc<dyn InterruptSink>,
    ) -> Self {
        let state = State {
            config: ConfigSpace::picoevb(),
            user: UserBar::new(&options),
            xdma: Xdma::default(),
            bram: Bram::default(),
            irq_out: IrqOutput::default(),
            faults: FaultQueue::default(),
            stats: Stats::default(),
            timing: Timing::new(options.timing.is_some(), options.timing.unwrap_or_default()),
            shutdown: false,
            unplugged: false,
            program: crate::program::ProgramState::new(&options),
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            wake: Condvar::new(),
            mem,
            irq,
            options,
        });
        let workers = Dir::ALL
            .into_iter()
            .map(|dir| {
                let shared = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("{dir:?}-engine").to_lowercase())
                    .spawn(move || transfer::worker(shared, dir))
                    .expect("spawning an engine worker thread")
            })
            .collect();
        Self { shared, workers }
    }

    /// The options the device was built with.
    pub fn options(&self) -> &DeviceOptions {
        &self.shared.options
    }

    /// Config space read of any size and alignment.
    pub fn config_read(&self, offset: u64, data: &mut [u8]) {
        let st = self.shared.lock();
        match usize::try_from(offset) {
            Ok(o) => st.config.read(o, data),
            Err(_) => data.fill(0),
        }
    }

    /// Config space write of any size and alignment.
    pub fn config_write(&self, offset: u64, data: &[u8]) {
        let mut st = self.shared.lock();
        if let Ok(o) = usize::try_from(offset) {
            let master_before = st.bus_master();
            st.config.write(o, data);
            // The command register's INTx disable bit gates the INTx level.
            st.update_irqs(&*self.shared.irq);
            // Its bus master bit gates the engines' memory requests (held engines and a stuck one wait on it).
            self.shared.wake.notify_all();
            if !master_before && st.bus_master() {
                self.let_held_engines_go(st);
            }
        }
    }

    /// Bus mastering came on. A held engine issues its next request within nanoseconds of that on hardware,
    /// long before the CPU's next MMIO access arrives; here its worker thread may be scheduled late, so the
    /// config write completes only once every held engine went past its wait (bounded, so a wedged worker
    /// cannot hang the vfio-user server). A driver's next write, e.g. clearing Run, then cannot overtake
    /// the engine in the model either.
    fn let_held_engines_go(&self, mut st: MutexGuard<'_, State>) {
        let deadline = Instant::now() + HELD_ENGINE_WAIT;
        while Dir::ALL.iter().any(|&d| st.xdma.engine(d).bus_wait) {
            let now = Instant::now();
            if now >= deadline {
                warn!(
                    "an engine held for bus mastering did not resume within {HELD_ENGINE_WAIT:?}"
                );
                return;
            }
            st = self.shared.wait(st, Some(deadline - now));
        }
    }

    /// BAR read. Registers are DWORDs: an access reads each DWORD it overlaps once and returns the bytes
    /// asked for. Offsets past the BAR read 0.
    pub fn bar_read(&self, bar: u32, offset: u64, data: &mut [u8]) {
        let Some(size) = bar_size(bar) else {
            warn!("read from BAR{bar}, which does not exist");
            data.fill(0xff);
            return;
        };
        let mut st = self.shared.lock();
        if st.unplugged {
            // What a read of a vanished PCIe device completes with.
            data.fill(0xff);
            return;
        }
        let mut i = 0;
        while i < data.len() {
            let at = offset.saturating_add(i as u64);
            let dword = at & !3;
            let value = if dword + 4 <= size as u64 {
                self.read_dword(&mut st, bar, dword as usize)
            } else {
                0
            };
            let bytes = value.to_le_bytes();
            let mut b = (at & 3) as usize;
            while b < 4 && i < data.len() {
                data[i] = bytes[b];
                b += 1;
                i += 1;
            }
        }
    }

    /// BAR write. Only whole, aligned DWORDs are accepted (the XDMA registers are DWORD-only); anything else
    /// is logged and ignored.
    pub fn bar_write(&self, bar: u32, offset: u64, data: &[u8]) {
        let Some(size) = bar_size(bar) else {
            warn!("write to BAR{bar}, which does not exist");
            return;
        };
        if !offset.is_multiple_of(4)
            || !data.len().is_multiple_of(4)
            || offset.saturating_add(data.len() as u64) > size as u64
        {
            warn!(
                "ignoring {}-byte write to BAR{bar} offset {offset:#x}: registers are aligned DWORDs",
                data.len()
            );
            return;
        }
        let mut st = self.shared.lock();
        if st.unplugged {
            return;
        }
        for (i, chunk) in data.chunks_exact(4).enumerate() {
            let v = u32::from_le_bytes(chunk.try_into().expect("4-byte chunk"));
            self.write_dword(&mut st, bar, offset as usize + 4 * i, v);
        }
    }

    /// Reads one register DWORD (convenience for tests and tools).
    pub fn read32(&self, bar: u32, offset: u64) -> u32 {
        let mut b = [0; 4];
        self.bar_read(bar, offset, &mut b);
        u32::from_le_bytes(b)
    }

    /// Writes one register DWORD (convenience for tests and tools).
    pub fn write32(&self, bar: u32, offset: u64, value: u32) {
        self.bar_write(bar, offset, &value.to_le_bytes());
    }

    fn read_dword(&self, st: &mut State, bar: u32, offset: usize) -> u32 {
        if bar == BAR_USER {
            let now = st.stream_now();
            let v = st.user.read32(offset, now);
            st.timing.mmio_read(None, v);
            return v;
        }
        let ctx = st.xdma_context();
        let (v, fx) = st.xdma.read(offset, &ctx);
        st.timing.mmio_read(Some(offset), v);
        self.apply(st, fx);
        v
    }

    fn write_dword(&self, st: &mut State, bar: u32, offset: usize, v: u32) {
        st.timing.mmio_write();
        if bar == BAR_USER {
            let leds_before = st.user.gpio.data();
            let now = st.stream_now();
            st.user.write32(offset, v, now);
            if st.user.gpio.data() != leds_before {
                debug!("LEDs lit: {:#05b}", gpio::leds_lit(st.user.gpio.data()));
            }
            // The GPIO interrupt is XDMA user IRQ 0.
            st.update_irqs(&*self.shared.irq);
            return;
        }
        let fx = st.xdma.write(offset, v);
        self.apply(st, fx);
    }

    fn apply(&self, st: &mut State, fx: Effects) {
        if let Some(dir) = fx.started {
            st.start(dir, false);
        }
        if fx.irq {
            st.update_irqs(&*self.shared.irq);
        }
        if fx.started.is_some() || fx.wake {
            self.shared.wake.notify_all();
        }
    }

    /// Function reset (vfio-user `DEVICE_RESET`): registers and config space to reset values, transfers in
    /// flight abandoned. BRAM contents, DMA maps, interrupt eventfds, armed faults and counters survive.
    pub fn reset(&self) {
        let mut st = self.shared.lock();
        st.config = ConfigSpace::picoevb();
        st.user.reset();
        st.xdma.reset();
        st.irq_out.reset();
        self.shared.wake.notify_all();
    }

    /// Surprise removal (`true`) and re-insertion (`false`). While unplugged the card answers nothing and a
    /// transfer in flight never completes; re-inserted, its engines are idle, as after a power cycle, and
    /// the guest finds it again by a rescan.
    pub fn set_unplugged(&self, unplugged: bool) {
        let mut st = self.shared.lock();
        st.unplugged = unplugged;
        if !unplugged {
            st.xdma.reset();
            st.irq_out.reset();
        }
        self.shared.wake.notify_all();
    }

    /// Runs `f` on the programming state under the state lock.
    pub(crate) fn with_program<T>(
        &self,
        f: impl FnOnce(&mut crate::program::ProgramState) -> T,
    ) -> T {
        f(&mut self.shared.lock().program)
    }

    /// A new design takes over (the end of programming): BAR0 decoding and ID block of `image`, config
    /// space, engines and interrupts at reset. BRAM keeps its contents (it is not initialised by the bitstream
    /// in this design either).
    pub fn load_design(&self, image: &crate::image::ModelImage) {
        let mut st = self.shared.lock();
        st.user.load(image);
        st.config = ConfigSpace::picoevb();
        st.xdma.reset();
        st.irq_out.reset();
        self.shared.wake.notify_all();
    }

    /// Whether the card is unplugged.
    pub fn unplugged(&self) -> bool {
        self.shared.lock().unplugged
    }

    /// MSI enabled with `vectors` eventfds (0 = disabled).
    pub fn set_msi_vectors(&self, vectors: u32) {
        let mut st = self.shared.lock();
        st.irq_out.set_msi(vectors);
        st.update_irqs(&*self.shared.irq);
    }

    /// INTx eventfd installed or removed.
    pub fn set_intx(&self, enabled: bool) {
        let mut st = self.shared.lock();
        st.irq_out.set_intx(enabled);
        st.update_irqs(&*self.shared.irq);
    }

    /// QEMU masked INTx.
    pub fn intx_mask(&self) {
        self.shared.lock().irq_out.mask_intx();
    }

    /// QEMU unmasked INTx: re-assert if the request is still pending (level semantics).
    pub fn intx_unmask(&self) {
        let mut st = self.shared.lock();
        st.irq_out.unmask_intx();
        st.update_irqs(&*self.shared.irq);
    }

    /// Waits until `dir` has no job pending and is not busy; false on timeout.
    pub fn wait_idle(&self, dir: Dir, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            let e = st.xdma.engine(dir);
            if !e.busy() && e.pending.is_none() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self.shared.wait(st, Some(deadline - now));
        }
    }

    /// Copies BRAM contents (for tests and debugging; wraps like the engines do).
    pub fn peek_bram(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        self.shared.lock().bram.read(addr, &mut buf, false);
        buf
    }

    /// What the control channel reports.
    pub fn snapshot(&self) -> Snapshot {
        let st = self.shared.lock();
        Snapshot {
            gpio_data: st.user.gpio.data(),
            scratch: st.user.id.scratch(),
            msi_enabled: st.irq_out.msi_vectors() > 0,
            stats: st.stats.clone(),
            dma_maps: self.shared.mem.map_count(),
            pending_faults: st.faults.pending_names(),
            bus_waits: Dir::ALL
                .into_iter()
                .filter(|&d| st.xdma.engine(d).bus_wait)
                .collect(),
        }
    }

    /// Arms a fault for the next `count` transfers (0 = until cleared).
    pub fn inject(&self, kind: FaultKind, count: u64, delay: Option<Duration>) {
        self.shared.lock().faults.inject(kind, count, delay);
    }

    /// Arms a fault that lets `after` transfers pass first (see [`crate::faults::FaultQueue::inject_after`]).
    pub fn inject_after(&self, kind: FaultKind, after: u64, count: u64, delay: Option<Duration>) {
        self.shared
            .lock()
            .faults
            .inject_after(kind, after, count, delay);
    }

    /// Sets Run on `dir` as a driver that is gone left it: at the first-descriptor address `desc` (default:
    /// what the SGDMA registers hold, i.e. the last chain a driver programmed) with `adjacent` extra
    /// descriptors. What NVIDIA's reference driver leaves behind when it is unbound mid-transfer: it never
    /// stops its engines. With bus mastering off (the PCI core clears it when a driver lets go) the engine
    /// holds its first fetch until bus mastering comes back, unless Run is cleared first; every
    /// descriptor it fetches counts as stray DMA.
    pub fn leave_running(
        &self,
        dir: Dir,
        desc: Option<u64>,
        adjacent: Option<u32>,
    ) -> Result<(), String> {
        let mut st = self.shared.lock();
        if st.unplugged {
            return Err("the card is unplugged".into());
        }
        let e = st.xdma.engine_mut(dir);
        if e.running() || e.busy() {
            return Err(format!("{dir:?} engine is already running"));
        }
        if let Some(a) = desc {
            e.write_sgdma(xdma::SG_DESC_LO, a as u32);
            e.write_sgdma(xdma::SG_DESC_HI, (a >> 32) as u32);
        }
        if let Some(n) = adjacent {
            e.write_sgdma(xdma::SG_DESC_ADJ, n);
        }
        if e.write_channel(xdma::CH_CONTROL_W1S, xdma::CTRL_RUN) != ControlEdge::Started {
            return Err(format!("{dir:?}: Run did not rise"));
        }
        st.start(dir, true);
        self.shared.wake.notify_all();
        Ok(())
    }

    /// Disarms every fault.
    pub fn clear_faults(&self) {
        self.shared.lock().faults.clear();
    }

    /// Zeroes the counters.
    pub fn reset_counters(&self) {
        let mut st = self.shared.lock();
        st.stats = Stats::default();
        st.timing.reset_counters();
    }

    /// Timing mode's clock, counters and parameters (the control socket's `timing` answer).
    pub fn timing_reply(&self) -> gdr_model_control::TimingReply {
        let st = self.shared.lock();
        let mut r = st.timing.reply();
        r.irqs_msi = st.stats.irqs_msi;
        r.irqs_intx = st.stats.irqs_intx;
        r
    }

    /// Turns timing mode on with `params` (clock and counters restart at 0), or off.
    pub fn set_timing(&self, params: Option<Params>) {
        self.shared.lock().timing = Timing::new(params.is_some(), params.unwrap_or_default());
    }

    /// Timing mode's parameters now.
    pub fn timing_params(&self) -> Params {
        self.shared.lock().timing.params
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.shared.lock().shutdown = true;
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn bar_size(bar: u32) -> Option<usize> {
    match bar {
        BAR_USER => Some(BAR_USER_SIZE),
        BAR_DMA => Some(BAR_DMA_SIZE),
        _ => None,
    }
}
