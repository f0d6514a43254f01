//! `gdr-guest-tests bench`: wall time per DMA ioctl with the registration cache on and off, side by side,
//! and the FOLL_PIN pages each ioctl cost. It prints numbers and never judges them: a TCG guest's times say
//! nothing absolute, only ratios within one run mean something. A case fails only if a DMA fails or moves
//! wrong bytes. With a cache, `miss_bench` then puts misses beside uncached requests.

use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use crate::buf::compare;
use crate::dev::{Device, Mapping};
use crate::kstat;
use crate::rng::Rng;
use crate::suite::{report, summary};

pub struct Options {
    pub seed: u64,
    pub iterations: u64,
    pub dev_path: String,
}

const RAM: usize = FPGA_RAM_SIZE as usize;
/// Timed ioctls per FOLL_PIN reading; the two files take turns block by block, so drift in the emulator's
/// speed hits both alike.
const BLOCK: u64 = 10;

/// The three transfer kinds, shared with the performance report (`perf`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    H2c,
    C2h,
    H2c2h,
}

impl Op {
    pub(crate) const ALL: [Op; 3] = [Op::H2c, Op::C2h, Op::H2c2h];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::H2c => "h2c",
            Op::C2h => "c2h",
            Op::H2c2h => "h2c2h",
        }
    }
}

/// Host buffer sizes: a page and all of FPGA RAM one way, and 1 MiB through it and back.
const CASES: [(Op, usize); 5] = [
    (Op::H2c, 4096),
    (Op::C2h, 4096),
    (Op::H2c, RAM),
    (Op::C2h, RAM),
    (Op::H2c2h, 1 << 20),
];

/// One file's half of a case: its own buffers (never shared with the other file, whose pins would then
/// overlap), its timings and the pages it pinned.
struct Side<'a> {
    dev: &'a Device,
    src: Mapping,
    dst: Mapping,
    wall: Vec<Duration>,
    dma_ns: u64,
    /// `None` once /proc/vmstat could not be read.
    pinned: Option<u64>,
}

impl<'a> Side<'a> {
    fn new(dev: &'a Device, len: usize) -> Result<Self, String> {
        let map = || {
            Mapping::new(len, libc::PROT_READ | libc::PROT_WRITE)
                .map_err(|e| format!("mmap {len}: {e}"))
        };
        Ok(Side {
            dev,
            src: map()?,
            dst: map()?,
            wall: Vec::new(),
            dma_ns: 0,
            pinned: Some(0),
        })
    }
}

/// What the cases share: the cached file reads back what an H2C wrote, into its own (cached) buffer, so
/// checking costs no pins on either side.
struct Check<'a> {
    on: &'a Device,
    buf: Mapping,
    /// FPGA RAM contents the C2H cases read.
    pattern: Vec<u8>,
}

/// One ioctl of `op` on `side`, bytes checked; returns its wall time and `dma_time_ns`.
fn once(
    op: Op,
    side: &mut Side,
    check: &mut Check,
    rng: &mut Rng,
) -> Result<(Duration, u64), String> {
    let len = side.src.len();
    let what = format!("{} of {len} bytes", op.name());
    let (wall, ns) = match op {
        Op::H2c => {
            rng.fill(side.src.as_mut_slice());
            let t0 = Instant::now();
            let ns = side.dev.h2c(side.src.as_slice(), 0);
            let wall = t0.elapsed();
            let ns = ns.map_err(|e| format!("{what}: {e}"))?;
            let back = &mut check.buf.as_mut_slice()[..len];
            check
                .on
                .c2h(back, 0)
                .map_err(|e| format!("{what}: reading back: {e}"))?;
            compare(&what, side.src.as_slice(), back)?;
            (wall, ns)
        }
        Op::C2h => {
            // The complement of what must arrive, so every byte has to change.
            side.dst
                .as_mut_slice()
                .iter_mut()
                .zip(&check.pattern)
                .for_each(|(d, p)| *d = !p);
            let t0 = Instant::now();
            let ns = side.dev.c2h(side.dst.as_mut_slice(), 0);
            let wall = t0.elapsed();
            let ns = ns.map_err(|e| format!("{what}: {e}"))?;
            compare(&what, &check.pattern, side.dst.as_slice())?;
            (wall, ns)
        }
        Op::H2c2h => {
            rng.fill(side.src.as_mut_slice());
            let (src, dst) = (side.src.as_slice(), side.dst.as_mut_slice());
            dst.iter_mut().zip(src).for_each(|(d, s)| *d = !s);
            let t0 = Instant::now();
            let ns = side.dev.h2c2h(src, dst);
            let wall = t0.elapsed();
            let ns = ns.map_err(|e| format!("{what}: {e}"))?;
            compare(&what, side.src.as_slice(), side.dst.as_slice())?;
            (wall, ns)
        }
    };
    Ok((wall, ns))
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Mean and median of `v`, in microseconds.
pub(crate) fn mean_median(v: &[Duration]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let mean = v.iter().map(|d| micros(*d)).sum::<f64>() / v.len() as f64;
    let mut s = v.to_vec();
    s.sort_unstable();
    let n = s.len();
    let median = if n % 2 == 1 {
        micros(s[n / 2])
    } else {
        (micros(s[n / 2 - 1]) + micros(s[n / 2])) / 2.0
    };
    (mean, median)
}

fn describe_side(s: &Side) -> (String, f64, f64) {
    let n = s.wall.len().max(1) as u64;
    let (mean, median) = mean_median(&s.wall);
    let pins = s
        .pinned
        .map_or("n/a".to_string(), |p| format!("{:.2}", p as f64 / n as f64));
    (
        format!(
            "mean {mean:.1} us, median {median:.1} us, dma {:.1} us, {pins} pages pinned/ioctl",
            s.dma_ns as f64 / n as f64 / 1e3
        ),
        mean,
        median,
    )
}

/// One case: files with the cache on and off, `iterations` timed ioctls each after two untimed warm-ups
/// (on the cached file, a buffer's first use and its registration). Returns the GUEST BENCH line.
fn case(op: Op, len: usize, opts: &Options, rng: &mut Rng, cache: bool) -> Result<String, String> {
    let open = || Device::open(&opts.dev_path).map_err(|e| format!("open {}: {e}", opts.dev_path));
    let (on, off) = (open()?, open()?);
    if cache {
        let st = off
            .reg_cache_disable()
            .map_err(|e| format!("REG_CACHE SET_LIMITS 0: {e}"))?;
        if st.max_entries != 0 {
            return Err(format!("cache still on: max_entries {}", st.max_entries));
        }
    }
    let mut check = Check {
        on: &on,
        buf: Mapping::new(RAM, libc::PROT_READ | libc::PROT_WRITE)
            .map_err(|e| format!("mmap: {e}"))?,
        pattern: vec![0u8; len.min(RAM)],
    };
    if op == Op::C2h {
        rng.fill(&mut check.pattern);
        on.h2c(&check.pattern, 0)
            .map_err(|e| format!("writing the C2H pattern: {e}"))?;
    }
    let mut sides = [Side::new(&on, len)?, Side::new(&off, len)?];
    for s in &mut sides {
        for _ in 0..2 {
            once(op, s, &mut check, rng).map_err(|e| format!("warm-up: {e}"))?;
        }
    }
    let blocks = opts.iterations.div_ceil(BLOCK);
    for b in 0..blocks {
        let k = BLOCK.min(opts.iterations - b * BLOCK);
        let order = if b % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let side = &mut sides[i];
            let before = kstat::pins_acquired().ok();
            for _ in 0..k {
                let (wall, ns) = once(op, side, &mut check, rng)?;
                side.wall.push(wall);
                side.dma_ns += ns;
            }
            let after = kstat::pins_acquired().ok();
            side.pinned = match (side.pinned, before, after) {
                (Some(p), Some(b), Some(a)) => Some(p + (a - b)),
                _ => None,
            };
        }
    }
    let (text_on, mean_on, median_on) = describe_side(&sides[0]);
    let (text_off, mean_off, median_off) = describe_side(&sides[1]);
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let counters = match on.reg_cache_query() {
        Ok(c) => format!(
            "; cache on file: hits {}, misses {}, uncached {}",
            c.hits, c.misses, c.uncached
        ),
        Err(_) => String::new(),
    };
    Ok(format!(
        "GUEST BENCH {} {len} B x{}: cache on: {text_on}; cache off: {text_off}; off/on: mean {:.2}x, \
         median {:.2}x{counters}",
        op.name(),
        opts.iterations,
        ratio(mean_off, mean_on),
        ratio(median_off, median_on),
    ))
}

pub fn run(opts: &Options) -> i32 {
    println!("GUEST SEED {}", opts.seed);
    println!(
        "GUEST BENCH wall time per ioctl, registration cache on vs off, {} timed ioctls per file and case, \
         files taking turns every {BLOCK}; a TCG guest: absolute times mean nothing, compare only ratios \
         within this run",
        opts.iterations
    );
    let cache = match Device::open(&opts.dev_path).and_then(|d| d.abi_info()) {
        Ok(i) if i.caps & abi::CAP_REG_CACHE != 0 => true,
        Ok(i) => {
            println!(
                "GUEST BENCH no registration cache (ABI_INFO caps {:#x}): both files pin every request",
                i.caps
            );
            false
        }
        Err(e) => {
            println!("GUEST BENCH ABI_INFO failed ({e}): both files taken as without a cache");
            false
        }
    };
    let mut rng = Rng::new(opts.seed);
    let (mut passed, mut failed) = (0, 0);
    for (op, len) in CASES {
        let r = case(op, len, opts, &mut rng, cache).map(|line| println!("{line}"));
        if r.is_ok() {
            passed += 1
        } else {
            failed += 1
        }
        report(&format!("bench::{}_{len}", op.name()), &r);
    }
    if cache {
        for (op, len) in [
            (Op::H2c, 4096),
            (Op::C2h, 4096),
            (Op::H2c, RAM),
            (Op::C2h, RAM),
        ] {
            let r = crate::miss_bench::case(op, len, opts.iterations, &opts.dev_path, &mut rng)
                .map(|line| println!("{line}"));
            if r.is_ok() {
                passed += 1
            } else {
                failed += 1
            }
            report(&format!("bench::miss_{}_{len}", op.name()), &r);
        }
    }
    summary(passed, failed, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_median() {
        let us = |v: &[u64]| {
            v.iter()
                .map(|&x| Duration::from_micros(x))
                .collect::<Vec<_>>()
        };
        assert_eq!(mean_median(&us(&[3, 1, 2])), (2.0, 2.0));
        assert_eq!(mean_median(&us(&[1, 10, 2, 3])), (4.0, 2.5));
        assert_eq!(mean_median(&[]), (0.0, 0.0));
    }
}
