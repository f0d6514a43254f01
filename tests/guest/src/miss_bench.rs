//! The cost of a cache miss beside an uncached request (`gdr-guest-tests bench`, after the on/off cases):
//! wall time per ioctl of lanes that take turns request by request, in a new random order each round
//! (whatever a request leaves behind, deferred work or a cold TLB, lands on whichever comes next: with a
//! fixed order the lane after `hit` was measured up to 2.5x slower at C2H 64 KiB, whichever lane it was):
//!
//! * `hit`: one buffer, cached before the first timed request (used twice);
//! * `miss`: a fresh buffer per request, cache on with room (default limits): a buffer's first use, which
//!   is never cached (an uncached request plus a lookup);
//! * `second`: a buffer used once before (untimed), cache with room: cached now, so this is the
//!   registration cost (long-term pin, map, notifier); past 63 iterations it evicts too;
//! * `second-full`: the same in a full cache (max_entries 1): registration plus the victim's release;
//! * `uncached`: a fresh buffer per request, cache off: the same memory freshness as the misses (TCG's
//!   software TLB and the page walks make new memory dearer than reused memory);
//! * `uncached-reused`: one buffer, cache off (what the on/off cases compare).
//!
//! Prints; judges only bytes.

use std::time::{Duration, Instant};

use crate::bench::{Op, mean_median};
use crate::buf::compare;
use crate::dev::{Device, Mapping};
use crate::rng::Rng;

const RW: libc::c_int = libc::PROT_READ | libc::PROT_WRITE;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Lane {
    Hit,
    Miss,
    Second,
    SecondFull,
    Uncached,
    UncachedReused,
}

const LANES: [Lane; 6] = [
    Lane::Hit,
    Lane::Miss,
    Lane::Second,
    Lane::SecondFull,
    Lane::Uncached,
    Lane::UncachedReused,
];

impl Lane {
    fn name(self) -> &'static str {
        match self {
            Lane::Hit => "hit",
            Lane::Miss => "miss",
            Lane::Second => "second",
            Lane::SecondFull => "second-full",
            Lane::Uncached => "uncached",
            Lane::UncachedReused => "uncached-reused",
        }
    }

    fn fresh(self) -> bool {
        !matches!(self, Lane::Hit | Lane::UncachedReused)
    }
}

struct State {
    lane: Lane,
    dev: Device,
    bufs: Vec<Mapping>,
    wall: Vec<Duration>,
    /// Wall time minus the driver's `dma_time_ns`: what pinning, mapping and the rest cost.
    overhead: Vec<Duration>,
}

fn open(path: &str) -> Result<Device, String> {
    Device::open(path).map_err(|e| format!("open {path}: {e}"))
}

fn map(len: usize) -> Result<Mapping, String> {
    Mapping::new(len, RW).map_err(|e| format!("mmap {len}: {e}"))
}

/// One request of `op` (H2C or C2H) on `buf`, bytes checked through `check` (cache off); its wall time
/// and the DMA time the driver reports.
fn request(
    op: Op,
    dev: &Device,
    buf: &mut Mapping,
    check: &Device,
    pattern: &[u8],
    rng: &mut Rng,
) -> Result<(Duration, Duration), String> {
    let len = buf.len();
    let what = format!("{} of {len} bytes", op.name());
    match op {
        Op::H2c => {
            rng.fill(buf.as_mut_slice());
            let t0 = Instant::now();
            let r = dev.h2c(buf.as_slice(), 0);
            let wall = t0.elapsed();
            let ns = r.map_err(|e| format!("{what}: {e}"))?;
            let mut back = vec![0u8; len];
            check
                .c2h(&mut back, 0)
                .map_err(|e| format!("{what}: reading back: {e}"))?;
            compare(&what, buf.as_slice(), &back)?;
            Ok((wall, Duration::from_nanos(ns)))
        }
        _ => {
            buf.as_mut_slice()
                .iter_mut()
                .zip(pattern)
                .for_each(|(d, p)| *d = !p);
            let t0 = Instant::now();
            let r = dev.c2h(buf.as_mut_slice(), 0);
            let wall = t0.elapsed();
            let ns = r.map_err(|e| format!("{what}: {e}"))?;
            compare(&what, pattern, buf.as_slice())?;
            Ok((wall, Duration::from_nanos(ns)))
        }
    }
}

/// One case: `iterations` timed requests per lane. Returns the GUEST BENCH MISS line.
pub(crate) fn case(
    op: Op,
    len: usize,
    iterations: u64,
    dev_path: &str,
    rng: &mut Rng,
) -> Result<String, String> {
    let check = open(dev_path)?;
    check
        .reg_cache_disable()
        .map_err(|e| format!("REG_CACHE SET_LIMITS 0: {e}"))?;
    let mut pattern = vec![0u8; len];
    rng.fill(&mut pattern);
    if op == Op::C2h {
        check
            .h2c(&pattern, 0)
            .map_err(|e| format!("writing the C2H pattern: {e}"))?;
    }
    let mut lanes = Vec::new();
    for lane in LANES {
        let dev = open(dev_path)?;
        let n = if lane.fresh() { iterations as usize } else { 1 };
        let mut bufs = (0..n).map(|_| map(len)).collect::<Result<Vec<_>, _>>()?;
        // Every page touched before timing, in every lane alike.
        for b in &mut bufs {
            rng.fill(b.as_mut_slice());
        }
        let setup = |r: std::io::Result<picoevb_abi::RegCache>| {
            r.map(|_| ())
                .map_err(|e| format!("{}: REG_CACHE: {e}", lane.name()))
        };
        match lane {
            Lane::Uncached | Lane::UncachedReused => setup(dev.reg_cache_disable())?,
            Lane::SecondFull => {
                setup(dev.reg_cache_set_limits(1, 64 << 20))?;
                // Full: one buffer cached (used twice: the cache admits on the second use).
                let mut other = map(len)?;
                for _ in 0..2 {
                    request(op, &dev, &mut other, &check, &pattern, rng)?;
                }
            }
            _ => {}
        }
        match lane {
            Lane::Hit => {
                for _ in 0..2 {
                    request(op, &dev, &mut bufs[0], &check, &pattern, rng)?;
                }
            }
            Lane::Second | Lane::SecondFull => {
                for b in &mut bufs {
                    request(op, &dev, b, &check, &pattern, rng)?;
                }
            }
            _ => {}
        }
        lanes.push(State {
            lane,
            dev,
            bufs,
            wall: Vec::new(),
            overhead: Vec::new(),
        });
    }
    let k = lanes.len();
    let mut order: Vec<usize> = (0..k).collect();
    for i in 0..iterations as usize {
        // Fisher-Yates: every lane follows every other equally often on average.
        for j in (1..k).rev() {
            order.swap(j, (rng.next_u64() % (j as u64 + 1)) as usize);
        }
        for &j in &order {
            let s = &mut lanes[j];
            let b = if s.bufs.len() == 1 { 0 } else { i };
            let (wall, dma) = request(op, &s.dev, &mut s.bufs[b], &check, &pattern, rng)
                .map_err(|e| format!("{}: {e}", s.lane.name()))?;
            s.wall.push(wall);
            s.overhead.push(wall.saturating_sub(dma));
        }
    }
    let stats: Vec<(Lane, f64, f64, f64)> = lanes
        .iter()
        .map(|s| {
            let (mean, median) = mean_median(&s.wall);
            (s.lane, mean, median, mean_median(&s.overhead).1)
        })
        .collect();
    let get = |l: Lane| {
        stats
            .iter()
            .find(|s| s.0 == l)
            .map_or((0.0, 0.0), |s| (s.1, s.2))
    };
    let ratio = |a: Lane, b: Lane| {
        let (x, y) = (get(a), get(b));
        let r = |p: f64, q: f64| if q > 0.0 { p / q } else { 0.0 };
        format!("{:.2}x/{:.2}x", r(x.0, y.0), r(x.1, y.1))
    };
    let times = stats
        .iter()
        .map(|(l, mean, median, _)| format!("{} {mean:.0}/{median:.0}", l.name()))
        .collect::<Vec<_>>()
        .join(", ");
    let overheads = stats
        .iter()
        .map(|(l, _, _, o)| format!("{} {o:.0}", l.name()))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "GUEST BENCH MISS {} {len} B x{iterations}: us mean/median {times}; mean/median ratios: \
         miss/uncached {}, second/uncached {}, second-full/uncached {}, hit/uncached {}, \
         uncached/uncached-reused {}; median us outside the DMA (wall - dma_time_ns) {overheads}",
        op.name(),
        ratio(Lane::Miss, Lane::Uncached),
        ratio(Lane::Second, Lane::Uncached),
        ratio(Lane::SecondFull, Lane::Uncached),
        ratio(Lane::Hit, Lane::Uncached),
        ratio(Lane::Uncached, Lane::UncachedReused),
    ))
}
