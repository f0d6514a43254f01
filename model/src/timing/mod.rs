//! Timing mode: a modeled clock that says how long the driver's DMA would take on a real PicoEVB link, while
//! the model itself still moves data as fast as it can. Off by default (`--timing`, or the control socket's
//! `timing` command); the functional behaviour is the same either way.
//!
//! Two kinds of time advance the modeled clock:
//! * the **software clock** (`clock_ns`): every BAR access costs the CPU a posted write or a non-posted
//!   read round trip; when the driver reads a register that reveals an engine's completion (the channel
//!   status, the completed count, the IRQ block's request or pending bits), it cannot have done so before
//!   that completion happened, plus the interrupt's latency if the completion interrupted: the clock jumps
//!   to that moment;
//! * each **engine** runs from `max(software clock at Run, engine free)` for the time its descriptors take
//!   on the link ([`link`]): first descriptor block fetch (later blocks are prefetched under the data),
//!   the data, poll-mode write-back. H2C and C2H use opposite directions of the link, so they overlap.
//!
//! So a request's modeled time is the software clock's advance across its ioctl: what the device, the link,
//! interrupts and register accesses cost, not the guest CPU's (which TCG makes meaningless; the report
//! gives guest wall time separately). Observation follows the model's real completion order, so a driver
//! that waits for two engines at once is charged in the order the model finished them, never less.

pub mod link;

use picoevb_regs::xdma::{self, Dir};
use std::collections::BTreeMap;

use gdr_model_control::{Ceiling, TimingEngine, TimingReply};

pub use link::{Params, Profile, Wire};

/// What one engine run did, accumulated by the worker without the state lock.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunCost {
    params: Params,
    /// Blocks of adjacent descriptors fetched, and the first block's size.
    blocks: u64,
    first_block: u64,
    descriptors: u64,
    wire: Wire,
    data_ns: u64,
    writebacks: u64,
    /// Time the engine waited for the stream source (a read with no record ready).
    stall_ns: u64,
    dir: Option<Dir>,
}

impl RunCost {
    /// A run of `dir` under `params` (MPS/MRRS as the OS programmed them when Run rose).
    pub fn new(dir: Dir, params: Params) -> Self {
        Self {
            params,
            dir: Some(dir),
            ..Self::default()
        }
    }

    /// The engine fetched a block of `count` adjacent descriptors.
    pub fn block(&mut self, count: u32) {
        if self.blocks == 0 {
            self.first_block = u64::from(count);
        }
        self.blocks += 1;
    }

    /// The engine moved `len` bytes at host address `host`.
    pub fn descriptor(&mut self, host: u64, len: u64) {
        let Some(dir) = self.dir else { return };
        let w = self.params.wire(dir, host, len);
        self.data_ns += self.params.data_ns(dir, &w);
        self.wire.add(&w);
        self.descriptors += 1;
    }

    /// A poll-mode write-back went out.
    pub fn writeback(&mut self) {
        self.writebacks += 1;
    }

    /// The engine waited `ns` for data from the card (the stream source had no record ready).
    pub fn stall(&mut self, ns: u64) {
        self.stall_ns += ns;
    }

    /// Modeled duration of the run: the first block's fetch, the data (H2C waits one read latency for its
    /// first completion), the write-backs.
    pub fn ns(&self) -> u64 {
        let p = &self.params;
        let fetch = if self.blocks > 0 {
            p.fetch_ns(self.first_block)
        } else {
            0
        };
        let first_data = match self.dir {
            Some(Dir::H2c) if self.descriptors > 0 => p.read_latency_ns,
            _ => 0,
        };
        fetch + first_data + self.data_ns + self.writebacks * p.small_write_ns() + self.stall_ns
    }
}

/// Per-engine modeled counters (the control socket's `timing` answer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineTiming {
    /// Runs that finished.
    pub runs: u64,
    /// Descriptors they completed.
    pub descriptors: u64,
    /// Descriptor blocks fetched.
    pub blocks: u64,
    /// Payload bytes.
    pub bytes: u64,
    /// Modeled time the engine was busy.
    pub busy_ns: u64,
    /// Interrupts its completions raised.
    pub irqs: u64,
    /// Wire traffic.
    pub wire: Wire,
}

#[derive(Clone, Copy, Debug, Default)]
struct EngineClock {
    /// When the engine is free again (end of its last run).
    free_at: u64,
    /// Start of the run in progress.
    started: Option<u64>,
    /// When the software may learn of the last finished run, until it reads a register that tells it.
    unobserved: Option<u64>,
    counters: EngineTiming,
}

/// The timing state, behind the device's state lock.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    /// Timing mode on.
    pub enabled: bool,
    /// Link and host parameters.
    pub params: Params,
    clock: u64,
    engines: [EngineClock; 2],
}

impl Timing {
    /// Timing on or off with `params` (validated).
    pub fn new(enabled: bool, params: Params) -> Self {
        Self {
            enabled,
            params,
            ..Self::default()
        }
    }

    /// The software clock (ns).
    pub fn clock_ns(&self) -> u64 {
        self.clock
    }

    /// Counters of `dir`.
    pub fn engine(&self, dir: Dir) -> &EngineTiming {
        &self.engines[dir.index()].counters
    }

    /// Zeroes the counters; the clocks keep running.
    pub fn reset_counters(&mut self) {
        for e in &mut self.engines {
            e.counters = EngineTiming::default();
        }
    }

    /// Modeled time of the run of `dir` in progress, `cost` into it (the run's start if none is; the
    /// software clock if no run started).
    pub fn engine_now(&self, dir: Dir, cost: &RunCost) -> u64 {
        self.engines[dir.index()].started.unwrap_or(self.clock) + cost.ns()
    }

    /// A CPU write to a BAR.
    pub fn mmio_write(&mut self) {
        if self.enabled {
            self.clock += self.params.mmio_write_ns;
        }
    }

    /// A CPU read of BAR1 `offset` (or any BAR0 register: `offset` None) that returned `value`.
    pub fn mmio_read(&mut self, offset: Option<usize>, value: u32) {
        if !self.enabled {
            return;
        }
        for dir in offset.map_or(0, |o| revealed(o, value)).then_iter() {
            if let Some(t) = self.engines[dir.index()].unobserved.take() {
                self.clock = self.clock.max(t);
            }
        }
        self.clock += self.params.mmio_read_ns;
    }

    /// Run rose on `dir` with the OS's MPS and MRRS in the device control register: the parameters its run
    /// uses (the profile's MPS and MRRS unless it follows the OS), or None with timing off.
    pub fn start(&mut self, dir: Dir, os_mps: u64, os_mrrs: u64) -> Option<Params> {
        if !self.enabled {
            return None;
        }
        let e = &mut self.engines[dir.index()];
        e.started = Some(self.clock.max(e.free_at));
        e.unobserved = None;
        let (mps, mrrs) = self.params.payload(os_mps, os_mrrs);
        Some(Params {
            mps,
            mrrs,
            ..self.params
        })
    }

    /// The run of `dir` ended (stopped or on an error); `irq` says whether that raised an interrupt.
    pub fn finish(&mut self, dir: Dir, cost: &RunCost, irq: bool) {
        if !self.enabled {
            return;
        }
        let p = self.params;
        let e = &mut self.engines[dir.index()];
        let start = e.started.take().unwrap_or(self.clock);
        let took = cost.ns();
        let end = start + took;
        e.free_at = end;
        e.unobserved = Some(if irq {
            end + p.small_write_ns() + p.irq_latency_ns
        } else {
            end
        });
        let c = &mut e.counters;
        c.runs += 1;
        c.descriptors += cost.descriptors;
        c.blocks += cost.blocks;
        c.bytes += cost.wire.payload;
        c.busy_ns += took;
        c.irqs += u64::from(irq);
        c.wire.add(&cost.wire);
    }

    /// The control socket's `timing` answer.
    /// The `timing` reply (interrupt counts are the device's, filled in by the caller).
    pub fn reply(&self) -> TimingReply {
        let engine = |d: Dir| {
            let c = self.engine(d);
            TimingEngine {
                runs: c.runs,
                descriptors: c.descriptors,
                blocks: c.blocks,
                bytes: c.bytes,
                busy_ns: c.busy_ns,
                irqs: c.irqs,
                data_tlps: c.wire.data_tlps,
                request_tlps: c.wire.request_tlps,
                wire_bytes: c.wire.data_bytes,
                reverse_bytes: c.wire.reverse_bytes,
            }
        };
        let p = &self.params;
        TimingReply {
            enabled: self.enabled,
            clock_ns: self.clock,
            h2c: engine(Dir::H2c),
            c2h: engine(Dir::C2h),
            ceiling_mbps: Ceiling {
                h2c: p.ceiling_mbps(Dir::H2c),
                c2h: p.ceiling_mbps(Dir::C2h),
            },
            params: params_map(p),
            irqs_msi: 0,
            irqs_intx: 0,
        }
    }
}

/// Which engines a read of BAR1 `offset` returning `value` tells the driver have finished.
fn revealed(offset: usize, value: u32) -> u32 {
    let (target, reg) = (xdma::target_of(offset), xdma::reg_of(offset));
    match target {
        xdma::TARGET_H2C | xdma::TARGET_C2H
            if xdma::channel_of(offset) == 0
                && matches!(
                    reg,
                    xdma::CH_STATUS | xdma::CH_STATUS_RC | xdma::CH_COMPLETED_COUNT
                ) =>
        {
            if target == xdma::TARGET_H2C {
                Dir::H2c.irq_bit()
            } else {
                Dir::C2h.irq_bit()
            }
        }
        xdma::TARGET_IRQ
            if xdma::channel_of(offset) == 0
                && matches!(reg, xdma::IRQ_CHAN_REQ | xdma::IRQ_CHAN_PENDING) =>
        {
            value & (Dir::H2c.irq_bit() | Dir::C2h.irq_bit())
        }
        _ => 0,
    }
}

/// Engines named by a mask of `Dir::irq_bit`s.
trait DirBits {
    fn then_iter(self) -> impl Iterator<Item = Dir>;
}

impl DirBits for u32 {
    fn then_iter(self) -> impl Iterator<Item = Dir> {
        Dir::ALL
            .into_iter()
            .filter(move |d| self & d.irq_bit() != 0)
    }
}

/// The parameter names the CLI and the control socket accept, with their fields.
const NAMES: [&str; 11] = [
    "ps_per_byte",
    "mps",
    "mrrs",
    "os_payload",
    "cpl_bytes",
    "dllps_per_1000_tlps",
    "read_latency_ns",
    "read_tags",
    "irq_latency_ns",
    "mmio_read_ns",
    "mmio_write_ns",
];

fn field<'a>(p: &'a mut Params, name: &str) -> Option<&'a mut u64> {
    Some(match name {
        "ps_per_byte" => &mut p.ps_per_byte,
        "mps" => &mut p.mps,
        "mrrs" => &mut p.mrrs,
        "os_payload" => &mut p.os_payload,
        "cpl_bytes" => &mut p.cpl_bytes,
        "dllps_per_1000_tlps" => &mut p.dllps_per_1000_tlps,
        "read_latency_ns" => &mut p.read_latency_ns,
        "read_tags" => &mut p.read_tags,
        "irq_latency_ns" => &mut p.irq_latency_ns,
        "mmio_read_ns" => &mut p.mmio_read_ns,
        "mmio_write_ns" => &mut p.mmio_write_ns,
        _ => return None,
    })
}

/// Sets parameter `name` of `p`; unknown names are an error that lists the known ones.
pub fn set_param(p: &mut Params, name: &str, value: u64) -> Result<(), String> {
    let slot = field(p, name).ok_or_else(|| {
        format!(
            "unknown timing parameter '{name}' (known: {})",
            NAMES.join(", ")
        )
    })?;
    *slot = value;
    Ok(())
}

/// Parses the CLI's `--timing` value: `on` (the default profile), or a profile name
/// ([`Profile::ALL`]) and/or `key=value` pairs over it, comma-separated, the name first.
pub fn parse_spec(spec: &str) -> Result<Params, String> {
    let mut items = spec.split(',').filter(|s| !s.is_empty()).peekable();
    let mut p = match items.peek().copied() {
        Some("on") => {
            items.next();
            Params::default()
        }
        Some(name) if !name.contains('=') => {
            items.next();
            Profile::named(name)
                .ok_or_else(|| {
                    let known: Vec<&str> = Profile::ALL.iter().map(|(n, _)| *n).collect();
                    format!(
                        "--timing: '{name}' is neither a profile ({}) nor key=value",
                        known.join(", ")
                    )
                })?
                .params()
        }
        _ => Params::default(),
    };
    for kv in items {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--timing: '{kv}' is not key=value"))?;
        let v: u64 = v
            .parse()
            .map_err(|_| format!("--timing: {k}: '{v}' is not a number"))?;
        set_param(&mut p, k, v)?;
    }
    p.validate()?;
    Ok(p)
}

fn params_map(p: &Params) -> BTreeMap<String, u64> {
    let mut copy = *p;
    NAMES
        .iter()
        .map(|name| {
            let v = *field(&mut copy, name).expect("every name has a field");
            (name.to_string(), v)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timing on with the PCIe reset profile, which the formulas below are worked out for.
    fn on() -> Timing {
        Timing::new(true, Params::pcie_reset())
    }

    fn c2h_64k(p: Params) -> RunCost {
        let mut c = RunCost::new(Dir::C2h, p);
        c.block(1);
        c.descriptor(0x10_0000, 65536);
        c
    }

    #[test]
    fn one_c2h_run_then_observed_by_the_isr() {
        let mut t = on();
        let p = t.start(Dir::C2h, 128, 512).unwrap();
        let cost = c2h_64k(p);
        // Fetch of one descriptor, then 77824 wire bytes.
        assert_eq!(cost.ns(), 1104 + 155_648);
        t.finish(Dir::C2h, &cost, true);
        assert_eq!(t.clock_ns(), 0, "nothing observed yet");
        // A read of an unrelated register reveals nothing.
        t.mmio_read(Some(xdma::block(xdma::TARGET_CONFIG, 0)), 0);
        assert_eq!(t.clock_ns(), 1000);
        // The ISR reads the request register with the C2H bit set.
        t.mmio_read(
            Some(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ),
            Dir::C2h.irq_bit(),
        );
        assert_eq!(t.clock_ns(), 1104 + 155_648 + 56 + 5000 + 1000);
        // Observed once only.
        t.mmio_read(Some(Dir::C2h.channel_base() + xdma::CH_STATUS_RC), 6);
        assert_eq!(t.clock_ns(), 1104 + 155_648 + 56 + 5000 + 2000);
        let c = t.engine(Dir::C2h);
        assert_eq!((c.runs, c.descriptors, c.bytes, c.irqs), (1, 1, 65536, 1));
        assert_eq!(c.busy_ns, 156_752);
    }

    #[test]
    fn both_directions_overlap() {
        let mut t = on();
        let ph = t.start(Dir::H2c, 128, 512).unwrap();
        t.mmio_write();
        let pc = t.start(Dir::C2h, 128, 512).unwrap();
        let mut h = RunCost::new(Dir::H2c, ph);
        h.block(1);
        h.descriptor(0, 32768);
        let c = c2h_64k(pc);
        t.finish(Dir::H2c, &h, true);
        t.finish(Dir::C2h, &c, true);
        t.mmio_read(
            Some(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ),
            Dir::H2c.irq_bit() | Dir::C2h.irq_bit(),
        );
        // The later of the two, not their sum.
        let h_end = h.ns();
        let c_end = 60 + c.ns();
        assert_eq!(t.clock_ns(), h_end.max(c_end) + 5056 + 1000);
        assert!(t.clock_ns() < h_end + c_end);
    }

    #[test]
    fn a_busy_engine_delays_the_next_run() {
        let mut t = on();
        let p = t.start(Dir::C2h, 128, 512).unwrap();
        t.finish(Dir::C2h, &c2h_64k(p), false);
        // Restarted without observing the first run: it starts when the engine is free.
        let p = t.start(Dir::C2h, 128, 512).unwrap();
        t.finish(Dir::C2h, &c2h_64k(p), false);
        t.mmio_read(Some(Dir::C2h.channel_base() + xdma::CH_STATUS), 6);
        assert_eq!(t.clock_ns(), 2 * 156_752 + 1000);
    }

    #[test]
    fn chains_pay_one_fetch_and_one_interrupt() {
        let p = Params::pcie_reset();
        let mut chain = RunCost::new(Dir::C2h, p);
        chain.block(16);
        for i in 0..16 {
            chain.descriptor(0x10_0000 + i * 0x2000, 4096);
        }
        assert_eq!(chain.ns(), p.fetch_ns(16) + 16 * 32 * 152 * 2);
    }

    #[test]
    fn the_jetson_profile_keeps_its_payload_and_the_reset_one_follows_the_os() {
        let mut t = Timing::new(true, Params::default());
        let p = t.start(Dir::C2h, 128, 512).unwrap();
        assert_eq!(
            (p.mps, p.mrrs),
            (256, 512),
            "L4T's values, whatever the guest wrote"
        );
        let mut t = Timing::new(true, Params::pcie_reset());
        let p = t.start(Dir::C2h, 256, 1024).unwrap();
        assert_eq!((p.mps, p.mrrs), (256, 1024), "what the OS programmed");
        assert!((t.reply().ceiling_mbps.c2h - 500.0 * 128.0 / 152.0).abs() < 0.01);
        let jetson = Timing::new(true, Params::default());
        assert!((jetson.reply().ceiling_mbps.c2h - 500.0 * 256.0 / 280.0).abs() < 0.01);
    }

    #[test]
    fn off_does_nothing() {
        let mut t = Timing::default();
        assert!(t.start(Dir::H2c, 128, 512).is_none());
        t.mmio_write();
        t.mmio_read(None, 0);
        t.finish(Dir::H2c, &RunCost::default(), true);
        assert_eq!(t.clock_ns(), 0);
        assert_eq!(t.engine(Dir::H2c).runs, 0);
    }

    #[test]
    fn spec_parsing() {
        assert_eq!(parse_spec("on").unwrap(), Params::default());
        assert_eq!(parse_spec("jetson").unwrap(), Params::default());
        assert_eq!(parse_spec("").unwrap(), Params::default());
        let r = parse_spec("pcie-reset,irq_latency_ns=2000").unwrap();
        assert_eq!((r.mps, r.os_payload, r.irq_latency_ns), (128, 1, 2000));
        assert!(
            parse_spec("thor")
                .unwrap_err()
                .contains("neither a profile (jetson, pcie-reset) nor key=value")
        );
        assert!(
            parse_spec("mps=256,jetson")
                .unwrap_err()
                .contains("not key=value")
        );
        assert!(parse_spec("os_payload=2").unwrap_err().contains("0 or 1"));
        let p = parse_spec("mps=256,irq_latency_ns=2000").unwrap();
        assert_eq!((p.mps, p.irq_latency_ns), (256, 2000));
        assert!(parse_spec("mps").unwrap_err().contains("neither a profile"));
        assert!(
            parse_spec("bogus=1")
                .unwrap_err()
                .contains("unknown timing parameter 'bogus'")
        );
        assert!(parse_spec("mps=x").unwrap_err().contains("not a number"));
        assert!(parse_spec("mps=100").unwrap_err().contains("power of two"));
        let r = Timing::new(true, p).reply();
        assert_eq!(r.params["mps"], 256);
        assert!(r.enabled);
    }
}
