//! `gdr-guest-tests perf`: the performance report (bench/perf.sh, docs/perf.md).
//!
//! For H2C, C2H and H2C2H at each size, from host memory and from GPU surfaces, it runs the same transfer
//! several ways on the same model in the same boot and prints one `GUEST PERF` line each:
//! * `hit`: gdr with the registration cache warm (host), or a surface pinned once (GPU);
//! * `miss`: gdr, first use of each buffer (a fresh buffer per request, cache on), or PIN_CUDA + DMA +
//!   UNPIN per request (GPU);
//! * `uncached`: gdr with the cache off (host only);
//! * `reference`: the reference driver's scheme through gdr's ABI: cache off (pin per call), the round trip
//!   serial through the 64 KiB RAM (H2C a window, then C2H it), one ioctl (one descriptor, one engine run,
//!   one interrupt) per physically contiguous run of the buffer, as the reference builds one descriptor
//!   per bus-contiguous range; for GPU memory one PIN_CUDA per 64 KiB window and call.
//!
//! The model runs in timing mode: `MB/s` is bytes over the model's clock (link, descriptor fetch,
//! interrupt and register costs of a PicoEVB on a Gen2 x1 link), beside the link's ceiling; interrupts,
//! descriptors and engine runs per MiB come from the model's counters, pinned pages from /proc/vmstat,
//! and `wall` is the guest's time per request (TCG: compare within one run only). One-way requests above
//! 64 KiB are a series of 64 KiB ioctls (the card RAM's size), for every scheme alike.
//!
//! It prints and never judges times: a case fails only when a DMA fails or moves wrong bytes.

mod pagemap;

use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use crate::bench::Op;
use crate::buf::compare;
use crate::dev::{Device, Mapping};
use crate::kstat;
use crate::rng::Rng;
use crate::rpc::Rpc;
use crate::suite::{report, report_skip, summary};
use crate::surface::{Flavour, Surface};

pub struct Options {
    pub seed: u64,
    pub dev_path: String,
    pub rpc_path: String,
    /// Request sizes in bytes.
    pub sizes: Vec<u64>,
    /// Operations to measure.
    pub ops: Vec<Op>,
    /// Bytes each case moves per scheme at least (more requests for small sizes), capped at 32 requests.
    pub volume: u64,
    /// Only the driver's stream ring, for this many modeled seconds (the soak of issue 22's target).
    pub ring_seconds: Option<u64>,
}

/// The card RAM: the largest one-way request, and the reference's round-trip window.
const RAM: usize = FPGA_RAM_SIZE as usize;
const MIB: f64 = 1024.0 * 1024.0;
const RW: libc::c_int = libc::PROT_READ | libc::PROT_WRITE;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scheme {
    Hit,
    Miss,
    /// A miss when the cache is full: it evicts (unpins) another buffer in the request.
    MissFull,
    Uncached,
    Reference,
}

impl Scheme {
    fn name(self) -> &'static str {
        match self {
            Scheme::Hit => "hit",
            Scheme::Miss => "miss",
            Scheme::MissFull => "miss-full",
            Scheme::Uncached => "uncached",
            Scheme::Reference => "reference",
        }
    }
}

/// The model's timing counters at one moment.
#[derive(Clone, Copy, Default)]
struct Counters {
    clock_ns: u64,
    irqs: u64,
    descs: u64,
    runs: u64,
}

/// One measured scheme of one case.
struct Row {
    scheme: Scheme,
    bytes: u64,
    reps: u64,
    model: Counters,
    pins: Option<u64>,
    wall: Duration,
    /// Each request's modeled time (ns), for its latency distribution.
    lat_ns: Vec<u64>,
}

impl Row {
    fn new(scheme: Scheme, bytes: u64) -> Self {
        Row {
            scheme,
            bytes,
            reps: 0,
            model: Counters::default(),
            pins: Some(0),
            wall: Duration::ZERO,
            lat_ns: Vec::new(),
        }
    }

    /// The modeled latency at quantile `q` (0..=1) of this row's requests, in microseconds (nearest rank).
    fn lat_us(&self, q: f64) -> f64 {
        let mut v = self.lat_ns.clone();
        v.sort_unstable();
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
        v.get(rank - 1).map_or(0.0, |&ns| ns as f64 / 1000.0)
    }

    fn mbps(&self) -> f64 {
        (self.bytes * self.reps) as f64 * 1000.0 / self.model.clock_ns.max(1) as f64
    }

    fn per_mib(&self, n: u64) -> f64 {
        n as f64 * MIB / (self.bytes * self.reps) as f64
    }

    /// "MB/s modeled (share of `ceiling`), irqs, descriptors and runs per MiB", as the report prints them.
    fn model_figures(&self, ceiling: f64) -> String {
        format!(
            "{:.1} MB/s modeled ({:.1}% of {ceiling:.1}), irqs {:.1}/MiB, descriptors {:.1}/MiB, runs {:.1}/MiB",
            self.mbps(),
            100.0 * self.mbps() / ceiling,
            self.per_mib(self.model.irqs),
            self.per_mib(self.model.descs),
            self.per_mib(self.model.runs),
        )
    }

    /// "wall per request, requests, modeled p50/p99/max per request", as the report prints them.
    fn latency_figures(&self) -> String {
        format!(
            "wall {:.1} us/req, x{}, modeled us/req p50 {:.1} p99 {:.1} max {:.1}",
            self.wall_us(),
            self.reps,
            self.lat_us(0.5),
            self.lat_us(0.99),
            self.lat_us(1.0),
        )
    }

    fn wall_us(&self) -> f64 {
        self.wall.as_secs_f64() * 1e6 / self.reps as f64
    }
}

struct Ctx {
    rpc: Rpc,
    dev_path: String,
    rng: Rng,
    /// A cached file for setup and checks (never measured).
    check: Device,
    check_buf: Mapping,
    flavour: Option<Flavour>,
    ceiling: (f64, f64),
    /// pagemap could not be read: reference runs are split per page instead.
    page_runs: bool,
    /// The card has the stream block.
    stream: bool,
}

impl Ctx {
    fn counters(&mut self) -> Result<Counters, String> {
        let t = self.rpc.timing()?;
        Ok(Counters {
            clock_ns: t.clock_ns,
            irqs: t.irqs_msi + t.irqs_intx,
            descs: t.h2c.descriptors + t.c2h.descriptors,
            runs: t.h2c.runs + t.c2h.runs,
        })
    }

    fn open(&self, cache: bool) -> Result<Device, String> {
        let d = Device::open(&self.dev_path).map_err(|e| format!("open {}: {e}", self.dev_path))?;
        if !cache {
            d.reg_cache_disable()
                .map_err(|e| format!("REG_CACHE off: {e}"))?;
        }
        Ok(d)
    }

    fn ceiling(&self, op: Op) -> f64 {
        match op {
            Op::H2c => self.ceiling.0,
            Op::C2h => self.ceiling.1,
            Op::H2c2h => self.ceiling.0.min(self.ceiling.1),
        }
    }

    /// One request (`one` returns its wall time), added to `row` with the model's counters around it.
    /// Callers interleave the schemes request by request, so drift in the emulator's speed hits all alike.
    fn once(
        &mut self,
        row: &mut Row,
        one: impl FnOnce() -> Result<Duration, String>,
    ) -> Result<(), String> {
        let c0 = self.counters()?;
        let p0 = kstat::pins_acquired().ok();
        row.wall += one()?;
        let p1 = kstat::pins_acquired().ok();
        let c1 = self.counters()?;
        row.reps += 1;
        row.model.clock_ns += c1.clock_ns - c0.clock_ns;
        row.lat_ns.push(c1.clock_ns - c0.clock_ns);
        row.model.irqs += c1.irqs - c0.irqs;
        row.model.descs += c1.descs - c0.descs;
        row.model.runs += c1.runs - c0.runs;
        row.pins = match (row.pins, p0, p1) {
            (Some(p), Some(a), Some(b)) => Some(p + b - a),
            _ => None,
        };
        Ok(())
    }

    /// Writes `pattern` into card RAM at 0 (what C2H cases read).
    fn put_ram(&self, pattern: &[u8]) -> Result<(), String> {
        self.check
            .h2c(pattern, 0)
            .map(|_| ())
            .map_err(|e| format!("writing the RAM pattern: {e}"))
    }

    /// Compares card RAM at 0 with `want`.
    fn check_ram(&mut self, what: &str, want: &[u8]) -> Result<(), String> {
        let got = &mut self.check_buf.as_mut_slice()[..want.len()];
        self.check
            .c2h(got, 0)
            .map_err(|e| format!("{what}: reading RAM back: {e}"))?;
        compare(what, want, got)
    }

    /// Physically contiguous runs of each 64 KiB window of `m`, offsets relative to the window.
    fn runs(&mut self, addr: u64, len: usize) -> Vec<Vec<(u64, u64)>> {
        windows(len)
            .map(|(s, l)| {
                pagemap::contiguous_runs(addr + s as u64, l as u64).unwrap_or_else(|e| {
                    if !self.page_runs {
                        println!("GUEST PERF NOTE reference runs split per page: {e}");
                        self.page_runs = true;
                    }
                    per_page(addr + s as u64, l as u64)
                })
            })
            .collect()
    }
}

fn per_page(addr: u64, len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < len {
        let n = (4096 - (addr + off) % 4096).min(len - off);
        out.push((off, n));
        off += n;
    }
    out
}

/// `(start, len)` of each 64 KiB window of `len` bytes.
fn windows(len: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..len).step_by(RAM).map(move |s| (s, RAM.min(len - s)))
}

fn timed(f: impl FnOnce() -> Result<(), String>) -> Result<Duration, String> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed())
}

fn io<T>(what: &str, r: std::io::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

/// gdr's way with host buffers: one ioctl per request (one-way: one per 64 KiB window).
fn gdr_host(dev: &Device, op: Op, src: &Mapping, dst: &mut Mapping) -> Result<(), String> {
    match op {
        Op::H2c => {
            for (s, l) in windows(src.len()) {
                io("h2c", dev.h2c(&src.as_slice()[s..s + l], 0))?;
            }
        }
        Op::C2h => {
            for (s, l) in windows(dst.len()) {
                io("c2h", dev.c2h(&mut dst.as_mut_slice()[s..s + l], 0))?;
            }
        }
        Op::H2c2h => {
            io("h2c2h", dev.h2c2h(src.as_slice(), dst.as_mut_slice()))?;
        }
    }
    Ok(())
}

/// The reference's way with host buffers: serial, window by window, one ioctl per contiguous run.
fn ref_host(
    dev: &Device,
    op: Op,
    src: &Mapping,
    dst: &mut Mapping,
    src_runs: &[Vec<(u64, u64)>],
    dst_runs: &[Vec<(u64, u64)>],
) -> Result<(), String> {
    let len = src.len().max(dst.len());
    for (w, (s, _)) in windows(len).enumerate() {
        if op != Op::C2h {
            for &(o, n) in &src_runs[w] {
                let at = s + o as usize;
                io("h2c", dev.h2c(&src.as_slice()[at..at + n as usize], o))?;
            }
        }
        if op != Op::H2c {
            for &(o, n) in &dst_runs[w] {
                let at = s + o as usize;
                io(
                    "c2h",
                    dev.c2h(&mut dst.as_mut_slice()[at..at + n as usize], o),
                )?;
            }
        }
    }
    Ok(())
}

/// Checks what a request left behind: RAM holds the last window of `src` (H2C), every window of `dst`
/// holds the RAM pattern (C2H), `dst` equals `src` (H2C2H).
fn verify(
    ctx: &mut Ctx,
    op: Op,
    what: &str,
    src: &[u8],
    dst: &[u8],
    pattern: &[u8],
) -> Result<(), String> {
    match op {
        Op::H2c => {
            let (s, l) = windows(src.len()).last().expect("a window");
            ctx.check_ram(what, &src[s..s + l])
        }
        Op::C2h => {
            for (s, l) in windows(dst.len()) {
                compare(what, &pattern[..l], &dst[s..s + l])?;
            }
            Ok(())
        }
        Op::H2c2h => compare(what, src, dst),
    }
}

fn buffers(
    ctx: &mut Ctx,
    op: Op,
    size: usize,
    pattern: &[u8],
) -> Result<(Mapping, Mapping), String> {
    let mut src = io("mmap", Mapping::new(size, RW))?;
    let mut dst = io("mmap", Mapping::new(size, RW))?;
    ctx.rng.fill(src.as_mut_slice());
    // Every destination byte must change: start from the complement of what must arrive.
    let want: Vec<u8> = match op {
        Op::C2h => windows(size)
            .flat_map(|(_, l)| pattern[..l].to_vec())
            .collect(),
        _ => src.as_slice().to_vec(),
    };
    dst.as_mut_slice()
        .iter_mut()
        .zip(&want)
        .for_each(|(d, w)| *d = !w);
    Ok((src, dst))
}

/// Physically contiguous runs `(offset, len)` of each 64 KiB window of a buffer.
type Runs = Vec<Vec<(u64, u64)>>;

/// One scheme's file and buffers for a host case: one pair reused, or (misses) a fresh pair per request.
struct Lane {
    row: Row,
    dev: Device,
    pairs: Vec<(Mapping, Mapping)>,
    runs: (Runs, Runs),
}

/// Request `i` of a lane's scheme.
fn lane_request(
    scheme: Scheme,
    dev: &Device,
    pairs: &mut [(Mapping, Mapping)],
    runs: &(Runs, Runs),
    op: Op,
    i: u64,
) -> Result<Duration, String> {
    let k = if pairs.len() == 1 { 0 } else { i as usize };
    let (src, dst) = &mut pairs[k];
    timed(|| match scheme {
        Scheme::Reference => ref_host(dev, op, src, dst, &runs.0, &runs.1),
        _ => gdr_host(dev, op, src, dst),
    })
}

fn host_case(ctx: &mut Ctx, op: Op, size: usize, reps: u64) -> Result<Vec<Row>, String> {
    let mut pattern = vec![0u8; RAM];
    ctx.rng.fill(&mut pattern);
    ctx.put_ram(&pattern)?;
    let bytes = size as u64;
    let mut lanes = Vec::new();
    for scheme in [
        Scheme::Hit,
        Scheme::Miss,
        Scheme::MissFull,
        Scheme::Uncached,
        Scheme::Reference,
    ] {
        let dev = ctx.open(!matches!(scheme, Scheme::Uncached | Scheme::Reference))?;
        let fresh = matches!(scheme, Scheme::Miss | Scheme::MissFull);
        let pairs = (0..if fresh { reps } else { 1 })
            .map(|_| buffers(ctx, op, size, &pattern))
            .collect::<Result<Vec<_>, _>>()?;
        let (s, d) = (pairs[0].0.addr(), pairs[0].1.addr());
        let runs = match scheme {
            Scheme::Reference => (ctx.runs(s, size), ctx.runs(d, size)),
            _ => (Vec::new(), Vec::new()),
        };
        let mut lane = Lane {
            row: Row::new(scheme, bytes),
            dev,
            pairs,
            runs,
        };
        match scheme {
            // Warm: the buffer is cached before the first timed request.
            Scheme::Hit => {
                let (src, dst) = &mut lane.pairs[0];
                gdr_host(&lane.dev, op, src, dst)?;
            }
            // A cache of one entry, already holding a buffer: every timed miss evicts one.
            Scheme::MissFull => {
                let max_bytes = io("REG_CACHE", lane.dev.reg_cache_query())?.max_bytes;
                io("REG_CACHE", lane.dev.reg_cache_set_limits(1, max_bytes))?;
                let (src, mut dst) = buffers(ctx, op, size, &pattern)?;
                gdr_host(&lane.dev, op, &src, &mut dst)?;
            }
            _ => {}
        }
        lanes.push(lane);
    }
    let n = lanes.len();
    for i in 0..reps {
        // The first scheme of a round changes every round: deferred kernel work a request leaves behind
        // (frees, RCU callbacks) lands on whichever request comes next, so it must not always be the same.
        for j in 0..n {
            let lane = &mut lanes[(i as usize + j) % n];
            let scheme = lane.row.scheme;
            let Lane {
                row,
                dev,
                pairs,
                runs,
            } = lane;
            ctx.once(row, || lane_request(scheme, dev, pairs, runs, op, i))?;
            if i + 1 == reps {
                // Checked at once: the next scheme's request overwrites the card RAM.
                let what = format!("{} host {size} {}", op.name(), lane.row.scheme.name());
                let (src, dst) = lane.pairs.last().expect("a pair");
                verify(ctx, op, &what, src.as_slice(), dst.as_slice(), &pattern)?;
            }
        }
    }
    Ok(lanes.into_iter().map(|l| l.row).collect())
}

/// GPU surfaces (provider loaded): pinned once, pinned per request, and the reference's pin per 64 KiB
/// window and call, each scheme on its own pair of surfaces (a range is pinned once per process), the
/// schemes taking turns request by request. One-way only up to the RAM size: a handle's DMA starts at the
/// surface's start.
fn gpu_case(
    ctx: &mut Ctx,
    op: Op,
    size: usize,
    reps: u64,
    fl: Flavour,
) -> Result<Vec<Row>, String> {
    let mut pattern = vec![0u8; RAM];
    ctx.rng.fill(&mut pattern);
    ctx.put_ram(&pattern)?;
    let dev = ctx.open(true)?;
    let len = size as u64;
    let schemes = [Scheme::Hit, Scheme::Miss, Scheme::Reference];
    let mut surfaces = Vec::new();
    for _ in schemes {
        let surf = |len| io("surface", Surface::new(fl, len));
        let (mut src, mut dst) = (surf(size)?, surf(size)?);
        src.fill_random(&mut ctx.rng);
        match op {
            Op::C2h => dst.fill_complement(&pattern[..size]),
            _ => dst.fill_complement(&src.as_slice()[..size]),
        }
        surfaces.push((src, dst));
    }
    let pin = |va: u64, n: u64| io("PIN_CUDA", dev.pin_cuda(va, n)).map(u64::from);
    let unpin = |h: u64| io("UNPIN_CUDA", dev.unpin_cuda(h as u32));
    // One request on handles `hs` (source) and `hd` (destination) of `n` bytes.
    let request = |hs: u64, hd: u64, n: u64| -> Result<(), String> {
        match op {
            Op::H2c => io("h2c", dev.h2c_cuda(hs, 0, n)).map(|_| ()),
            // SAFETY: no reference into the destination surface is live during the call.
            Op::C2h => io("c2h", unsafe { dev.c2h_cuda(hd, 0, n) }).map(|_| ()),
            // SAFETY: as above.
            Op::H2c2h => io("h2c2h", unsafe {
                dev.h2c2h_any(hs, hd, n, abi::H2C2H_FLAGS)
            })
            .map(|_| ()),
        }
    };
    let va = |k: usize| (surfaces[k].0.va(), surfaces[k].1.va());
    let (hit_s, hit_d) = va(0);
    let pinned = (pin(hit_s, len)?, pin(hit_d, len)?);
    let mut rows: Vec<Row> = schemes.iter().map(|&s| Row::new(s, len)).collect();
    for i in 0..reps {
        for j in 0..schemes.len() {
            let k = (i as usize + j) % schemes.len();
            let row = &mut rows[k];
            let (sva, dva) = va(k);
            ctx.once(row, || {
                timed(|| match schemes[k] {
                    Scheme::Hit => request(pinned.0, pinned.1, len),
                    Scheme::Miss => {
                        let (hs, hd) = (pin(sva, len)?, pin(dva, len)?);
                        request(hs, hd, len)?;
                        unpin(hs)?;
                        unpin(hd)
                    }
                    _ => {
                        for (s, l) in windows(size) {
                            let (s, l) = (s as u64, l as u64);
                            let (hs, hd) = (pin(sva + s, l)?, pin(dva + s, l)?);
                            match op {
                                Op::H2c2h => {
                                    io("h2c", dev.h2c_cuda(hs, 0, l))?;
                                    // SAFETY: no reference into the destination surface is live.
                                    io("c2h", unsafe { dev.c2h_cuda(hd, 0, l) })?;
                                }
                                _ => request(hs, hd, l)?,
                            }
                            unpin(hs)?;
                            unpin(hd)?;
                        }
                        Ok(())
                    }
                })
            })?;
            if i + 1 == reps {
                let what = format!("{} gpu {size} {}", op.name(), schemes[k].name());
                let (src, dst) = &surfaces[k];
                verify(
                    ctx,
                    op,
                    &what,
                    &src.as_slice()[..size],
                    &dst.as_slice()[..size],
                    &pattern,
                )?;
                src.check_guards()?;
                dst.check_guards()?;
            }
        }
    }
    unpin(pinned.0)?;
    unpin(pinned.1)?;
    Ok(rows)
}

fn print_rows(ctx: &Ctx, op: Op, mem: &str, size: usize, rows: &[Row]) {
    let ceiling = ctx.ceiling(op);
    for r in rows {
        let pins = r
            .pins
            .map_or("n/a".into(), |p| format!("{:.1}", p as f64 / r.reps as f64));
        println!(
            "GUEST PERF {} {mem} {size} {}: {}, {pins} pages pinned/req, {}",
            op.name(),
            r.scheme.name(),
            r.model_figures(ceiling),
            r.latency_figures(),
        );
    }
    let get = |s: Scheme| rows.iter().find(|r| r.scheme == s);
    let ratio = |a: Option<&Row>, b: Option<&Row>, f: fn(&Row) -> f64| match (a, b) {
        (Some(a), Some(b)) if f(b) > 0.0 => format!("{:.2}x", f(a) / f(b)),
        _ => "n/a".into(),
    };
    let (hit, miss, full, unc, rf) = (
        get(Scheme::Hit),
        get(Scheme::Miss),
        get(Scheme::MissFull),
        get(Scheme::Uncached),
        get(Scheme::Reference),
    );
    println!(
        "GUEST PERF VS {} {mem} {size}: modeled MB/s hit/reference {}, miss/reference {}; wall reference/hit {}, \
         reference/miss {}; wall miss/uncached {}, miss-full/uncached {}, hit/uncached {}",
        op.name(),
        ratio(hit, rf, Row::mbps),
        ratio(miss, rf, Row::mbps),
        ratio(rf, hit, Row::wall_us),
        ratio(rf, miss, Row::wall_us),
        ratio(miss, unc, Row::wall_us),
        ratio(full, unc, Row::wall_us),
        ratio(hit, unc, Row::wall_us),
    );
}

/// Bytes per record of the stream cases: one page, one descriptor.
const STREAM_RECORD: u32 = 4096;

/// The stream block through requests (ABI 1.5): `reps` C2H of `size` bytes from the source (on demand, so
/// never a drop) into one host buffer (a cache hit after the first), each checked record by record
/// (sequence, CRC); then the last one written back to the checker, whose counters must agree. Stream
/// requests are not bounded by the card RAM: one request is one chain up to 127 pages.
fn stream_case(ctx: &mut Ctx, size: usize, reps: u64) -> Result<(Row, Row), String> {
    use picoevb_regs::stream as regs;
    let dev = ctx.open(true)?;
    io("STREAM restart", dev.stream_restart(STREAM_RECORD, 0))?;
    let mut buf = io("mmap", Mapping::new(size, RW))?;
    io("warm-up C2H", dev.c2h_stream(buf.as_mut_slice()))?;
    let per = size / STREAM_RECORD as usize;
    let mut next = per as u32;
    let (mut c2h, mut h2c) = (
        Row::new(Scheme::Hit, size as u64),
        Row::new(Scheme::Hit, size as u64),
    );
    for _ in 0..reps {
        ctx.once(&mut c2h, || {
            timed(|| io("C2H stream", dev.c2h_stream(buf.as_mut_slice())).map(|_| ()))
        })?;
        for (i, r) in buf.as_slice().chunks(STREAM_RECORD as usize).enumerate() {
            let rec = regs::check_record(r).map_err(|e| format!("record {i}: {e:?}"))?;
            if rec.seq != next {
                return Err(format!(
                    "record {i}: sequence {} where {next} was due",
                    rec.seq
                ));
            }
            next += 1;
        }
    }
    io(
        "STREAM CLEAR_SINK",
        dev.stream(abi::STREAM_CLEAR_SINK, false, 0, 0),
    )?;
    for _ in 0..reps {
        ctx.once(&mut h2c, || {
            timed(|| io("H2C stream", dev.h2c_stream(buf.as_slice())).map(|_| ()))
        })?;
    }
    let s = io("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    io(
        "STREAM SET (off)",
        dev.stream(abi::STREAM_SET, false, STREAM_RECORD, 0),
    )?;
    let want = (reps * per as u64) as u32;
    // The same records again and again: the checker sees one run of `per`, then a step back each time.
    if s.sink_good != want || s.sink_crc_errors != 0 || s.sink_bad_length != 0 {
        return Err(format!("checker after {want} records: {s:?}"));
    }
    Ok((c2h, h2c))
}

fn print_stream(ctx: &Ctx, size: usize, rows: &(Row, Row)) {
    for (op, r) in [(Op::C2h, &rows.0), (Op::H2c, &rows.1)] {
        let ceiling = ctx.ceiling(op);
        println!(
            "GUEST PERF STREAM {} {size}: {}, {}",
            if op == Op::C2h {
                "source->host"
            } else {
                "host->checker"
            },
            r.model_figures(ceiling),
            r.latency_figures(),
        );
    }
}

/// The stream ring (`crate::ring`): the driver's producer (`by`: or a thread of ours) filling a ring of
/// `slots` one-record slots (4 KiB) from the source, `chain` slots per C2H, a consumer checking every record;
/// back-pressure, no stall. The modeled clock runs only while the card works or the CPU touches its
/// registers, so the rate is what the card sustains with one chain after another, whatever the emulated
/// CPU's speed.
fn ring_case(
    ctx: &mut Ctx,
    slots: u64,
    chain: u64,
    total: u64,
    by: crate::ring::By,
) -> Result<(), String> {
    let dev = ctx.open(true)?;
    let c0 = ctx.counters()?;
    let (cpu0, wall0) = (crate::kstat::CpuTicks::now(), std::time::Instant::now());
    let seen = crate::ring::run(
        &dev,
        crate::ring::Setup {
            slots,
            slot_bytes: STREAM_RECORD as usize,
            record_bytes: STREAM_RECORD,
            period_ticks: 0,
            policy: picoevb_logic::stream_ring::Policy::BackPressure,
            total,
            chain,
            stall: None,
            by,
            surface: false,
            wake: false,
        },
    )?;
    let c1 = ctx.counters()?;
    let (wall, cpu) = (
        wall0.elapsed(),
        crate::kstat::CpuTicks::now().shares_since(&cpu0),
    );
    if (seen.bad, seen.missing, seen.ring_drops, seen.slots) != (0, 0, 0, total) {
        return Err(format!("the ring lost or broke records: {seen:?}"));
    }
    let bytes = total * u64::from(STREAM_RECORD);
    let mbps = bytes as f64 * 1000.0 / (c1.clock_ns - c0.clock_ns).max(1) as f64;
    let ceiling = ctx.ceiling(Op::C2h);
    println!(
        "GUEST PERF STREAM RING {} chain {} KiB, {} MiB in {:.3} modeled s: {mbps:.1} MB/s modeled ({:.1}% of {ceiling:.1}), {} chains, \
         producer waited {} times, irqs {:.1}/MiB, runs {:.1}/MiB, records {} (0 missing, 0 bad); guest wall {:.1} s ({cpu})",
        if by == crate::ring::By::Driver {
            "driver"
        } else {
            "thread"
        },
        chain * u64::from(STREAM_RECORD) / 1024,
        bytes >> 20,
        (c1.clock_ns - c0.clock_ns) as f64 / 1e9,
        100.0 * mbps / ceiling,
        seen.chains,
        seen.waits,
        (c1.irqs - c0.irqs) as f64 * MIB / bytes as f64,
        (c1.runs - c0.runs) as f64 * MIB / bytes as f64,
        seen.records,
        wall.as_secs_f64(),
    );
    Ok(())
}

fn setup(opts: &Options) -> Result<Ctx, String> {
    let mut rpc = Rpc::open(&opts.rpc_path)?;
    let t = rpc.timing()?;
    let t = if t.enabled { t } else { rpc.timing_on()? };
    let ceiling = (t.ceiling_mbps.h2c, t.ceiling_mbps.c2h);
    println!(
        "GUEST PERF MODEL ceilings h2c {:.1} MB/s, c2h {:.1} MB/s, round trip full duplex {:.1}, serial {:.1}; \
         parameters {}",
        ceiling.0,
        ceiling.1,
        ceiling.0.min(ceiling.1),
        1.0 / (1.0 / ceiling.0 + 1.0 / ceiling.1),
        serde_json::to_string(&t.params).unwrap_or_default()
    );
    let check = Device::open(&opts.dev_path).map_err(|e| format!("open {}: {e}", opts.dev_path))?;
    let info = io("ABI_INFO", check.abi_info())?;
    Ok(Ctx {
        rpc,
        dev_path: opts.dev_path.clone(),
        rng: Rng::new(opts.seed),
        check,
        check_buf: io("mmap", Mapping::new(RAM, RW))?,
        flavour: Flavour::from_caps(info.caps),
        ceiling,
        page_runs: false,
        stream: info.caps & abi::CAP_STREAM != 0,
    })
}

pub fn run(opts: &Options) -> i32 {
    println!("GUEST SEED {}", opts.seed);
    let mut ctx = match setup(opts) {
        Ok(c) => c,
        Err(e) => {
            report("perf::setup", &Err(e));
            return summary(0, 1, 0);
        }
    };
    if let Some(seconds) = opts.ring_seconds {
        let name = format!("perf::stream_ring_soak_{seconds}s");
        if !ctx.stream {
            report_skip(&name, "no stream block (CAP_STREAM)");
            return summary(0, 0, 1);
        }
        // Enough 4 KiB slots for `seconds` at the link's ceiling: at any lower rate the ring runs longer.
        // 512 slots, chains of up to 256: the producer starts a chain as soon as half the ring is free,
        // while the consumer checks the other half. Per chain the emulated CPU's work costs more than
        // per byte: 64 slots in chains of 64 took three times the guest time (2026-11-29, 8 modeled s:
        // about 115 s against 39 s), and ten modeled minutes would not fit an afternoon.
        let total =
            (seconds as f64 * ctx.ceiling(Op::C2h) * 1e6 / f64::from(STREAM_RECORD)).ceil() as u64;
        let r = ring_case(&mut ctx, 512, 256, total, crate::ring::By::Driver);
        report(&name, &r);
        return if r.is_ok() {
            summary(1, 0, 0)
        } else {
            summary(0, 1, 0)
        };
    }
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for &op in &opts.ops {
        for &size in &opts.sizes {
            let size = size as usize;
            let reps = (opts.volume / size as u64).clamp(1, 32);
            let mems: [(&str, Option<Flavour>); 2] = [("host", None), ("gpu", ctx.flavour)];
            for (mem, fl) in mems {
                let name = format!("perf::{}_{mem}_{size}", op.name());
                if mem == "gpu" && fl.is_none() {
                    skipped += 1;
                    report_skip(&name, "no GPU-memory provider loaded");
                    continue;
                }
                if mem == "gpu" && op != Op::H2c2h && size > RAM {
                    continue; // a handle's one-way DMA cannot go past the card RAM
                }
                let rows = match fl {
                    Some(fl) if mem == "gpu" => gpu_case(&mut ctx, op, size, reps, fl),
                    _ => host_case(&mut ctx, op, size, reps),
                };
                let r = rows.map(|rows| print_rows(&ctx, op, mem, size, &rows));
                if r.is_ok() {
                    passed += 1;
                } else {
                    failed += 1;
                }
                report(&name, &r);
            }
        }
    }
    // Streaming by request: the stream sizes are the report's sizes of at least a record, in whole records.
    for &size in &opts.sizes {
        let size = size as usize;
        if size < STREAM_RECORD as usize || !size.is_multiple_of(STREAM_RECORD as usize) {
            continue;
        }
        let name = format!("perf::stream_{size}");
        if !ctx.stream {
            skipped += 1;
            report_skip(&name, "no stream block (CAP_STREAM)");
            continue;
        }
        let reps = (opts.volume / size as u64).clamp(1, 32);
        let r = stream_case(&mut ctx, size, reps).map(|rows| print_stream(&ctx, size, &rows));
        if r.is_ok() {
            passed += 1;
        } else {
            failed += 1;
        }
        report(&name, &r);
    }
    // The ring, 16 MiB at least, chains of 64 KiB and 256 KiB, filled by the driver (one ioctl) and by a
    // thread of ours (one ioctl per chain).
    for (chain, by) in [16u64, 64]
        .into_iter()
        .flat_map(|c| [(c, crate::ring::By::Driver), (c, crate::ring::By::Thread)])
    {
        let name = format!(
            "perf::stream_ring_{}k{}",
            chain * 4,
            if by == crate::ring::By::Thread {
                "_thread"
            } else {
                ""
            }
        );
        if !ctx.stream {
            skipped += 1;
            report_skip(&name, "no stream block (CAP_STREAM)");
            continue;
        }
        let total = (opts.volume.max(16 << 20) / u64::from(STREAM_RECORD)).max(2 * chain);
        let r = ring_case(&mut ctx, 64, chain, total, by);
        if r.is_ok() {
            passed += 1;
        } else {
            failed += 1;
        }
        report(&name, &r);
    }
    summary(passed, failed, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_quantiles_are_nearest_rank() {
        let mut r = Row::new(Scheme::Hit, 4096);
        assert_eq!(r.lat_us(0.5), 0.0, "no request: no latency");
        // 100 requests of 1..=100 us, shuffled: p50 is the 50th, p99 the 99th, max the 100th.
        r.lat_ns = (1..=100u64).rev().map(|us| us * 1000).collect();
        assert_eq!(
            (r.lat_us(0.5), r.lat_us(0.99), r.lat_us(1.0)),
            (50.0, 99.0, 100.0)
        );
        // Ten requests: the 99th percentile is the slowest one (rank 10), never the one before it.
        r.lat_ns = (1..=10u64).map(|us| us * 1000).collect();
        assert_eq!((r.lat_us(0.5), r.lat_us(0.99)), (5.0, 10.0));
        r.lat_ns = vec![7000];
        assert_eq!((r.lat_us(0.5), r.lat_us(1.0)), (7.0, 7.0));
    }
}
