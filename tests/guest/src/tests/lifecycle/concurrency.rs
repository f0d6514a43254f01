//! Concurrent users of one card, and pin/unpin churn.

use super::*;

/// Lets several users of one kind into FPGA RAM at once, never two kinds: an H2C2H bounces through FPGA
/// RAM from offset 0 and would overwrite a separate H2C + C2H pair's data between its two ioctls (the
/// pairs use disjoint slices, so they may overlap each other). Waiters of the other kind hold new entries
/// back, so neither kind starves.
#[derive(Default)]
struct Phase {
    s: Mutex<PhaseState>,
    cv: Condvar,
}

#[derive(Default)]
struct PhaseState {
    kind: usize,
    active: usize,
    waiting: [usize; 2],
}

const PAIRS: usize = 0;
const ROUND_TRIPS: usize = 1;

struct PhaseGuard<'a>(&'a Phase);

impl Phase {
    fn enter(&self, kind: usize) -> PhaseGuard<'_> {
        let mut s = self.s.lock().unwrap_or_else(|e| e.into_inner());
        s.waiting[kind] += 1;
        while s.active > 0 && (s.kind != kind || s.waiting[1 - kind] > 0) {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.waiting[kind] -= 1;
        s.kind = kind;
        s.active += 1;
        PhaseGuard(self)
    }
}

impl Drop for PhaseGuard<'_> {
    fn drop(&mut self) {
        let mut s = self.0.s.lock().unwrap_or_else(|e| e.into_inner());
        s.active -= 1;
        if s.active == 0 {
            self.0.cv.notify_all();
        }
    }
}

/// One thread of `threads_mixed`: random operations (the first five cover every kind) until `until`,
/// every byte checked. Returns how many of each kind it did.
fn worker(
    t: usize,
    dev: &Device,
    f: Flavour,
    seed: u64,
    until: Instant,
    stop: &AtomicBool,
    phase: &Phase,
) -> Result<[u64; 5], String> {
    let mut rng = Rng::new(seed);
    let slice = RAM / THREADS;
    let off = (t * slice) as u64;
    // Small enough that TCG gets through many operations in a few seconds, big enough for several
    // FPGA RAM windows per H2C2H.
    let mut a = surface(f, 192 << 10)?;
    let mut b = surface(f, 192 << 10)?;
    let ha = pin(dev, &a)?;
    let hb = pin(dev, &b)?;
    let mut counts = [0u64; 5];
    let mut n = 0u64;
    while (n < 5 || Instant::now() < until) && !stop.load(Ordering::Relaxed) {
        let op = if n < 5 {
            n as usize
        } else {
            (rng.next_u64() % 5) as usize
        };
        let small = 1 + (rng.next_u64() as usize) % slice;
        let big = 1 + (rng.next_u64() as usize) % a.len();
        let r = match op {
            0 => {
                let (m1, m2) = (
                    (rng.next_u64() % 4096) as usize,
                    (rng.next_u64() % 4096) as usize,
                );
                let _g = phase.enter(ROUND_TRIPS);
                h2c2h_check(dev, &mut rng, big, m1, m2).map(|_| ())
            }
            1 => {
                let _g = phase.enter(ROUND_TRIPS);
                let (src, dst) = if rng.next_u64().is_multiple_of(2) {
                    (Side::Gpu(&mut a, ha), Side::Gpu(&mut b, hb))
                } else {
                    (Side::Gpu(&mut b, hb), Side::Gpu(&mut a, ha))
                };
                h2c2h_sides(dev, &mut rng, src, dst, big).map(|_| ())
            }
            2 => {
                let _g = phase.enter(PAIRS);
                surface_to_host(dev, &mut rng, &mut a, ha, small, off)
            }
            3 => {
                let _g = phase.enter(PAIRS);
                host_to_surface(dev, &mut rng, &mut b, hb, small, off)
            }
            _ => pin_dma_unpin(dev, f, &mut rng, small, off, phase),
        };
        if let Err(e) = r {
            stop.store(true, Ordering::Relaxed);
            return Err(format!("thread {t}, operation #{n} ({}): {e}", OPS[op]));
        }
        counts[op] += 1;
        n += 1;
    }
    if stop.load(Ordering::Relaxed) {
        return Err(format!("thread {t}: stopped by another thread's failure"));
    }
    unpin(dev, ha)?;
    unpin(dev, hb)?;
    Ok(counts)
}

/// A fresh surface pinned, one transfer from it, unpinned: pinning runs concurrently with other threads' DMA.
fn pin_dma_unpin(
    dev: &Device,
    f: Flavour,
    rng: &mut Rng,
    len: usize,
    off: u64,
    phase: &Phase,
) -> TestResult {
    let mut s = surface(f, f.granule())?;
    let h = pin(dev, &s)?;
    {
        let _g = phase.enter(PAIRS);
        let len = len.min(s.len());
        surface_to_host(dev, rng, &mut s, h, len, off)?;
    }
    unpin(dev, h)
}

/// THREADS threads on two files, for `secs`: host H2C2H, surface H2C2H, surface <-> FPGA <-> host pairs
/// and pin/DMA/unpin of fresh surfaces, all at once, every byte checked.
pub(super) fn threads_mixed(ctx: &mut Ctx, dur: Duration) -> TestResult {
    let f = flavour(ctx.dev)?;
    quiesce(ctx.dev)?;
    // Registration cache on (host H2C2H buffers come and go from the heap): counted after close only.
    let p0 = kstat::pinned_pages()?;
    let fds = [open(ctx)?, open(ctx)?];
    let stop = AtomicBool::new(false);
    let phase = Phase::default();
    let until = Instant::now() + dur;
    let seeds: Vec<u64> = (0..THREADS).map(|_| ctx.rng.next_u64()).collect();
    let results: Vec<Result<[u64; 5], String>> = thread::scope(|sc| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (dev, seed, stop, phase) = (&fds[t % 2], seeds[t], &stop, &phase);
                sc.spawn(move || worker(t, dev, f, seed, until, stop, phase))
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join().unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(format!("thread {t} panicked: {msg}"))
                })
            })
            .collect()
    });
    super::super::first_failure(&results)?;
    let mut total = [0u64; 5];
    for (t, r) in results.iter().enumerate() {
        let c = r.as_ref().expect("errors returned above");
        ensure!(c.iter().all(|&k| k > 0), "thread {t} did not mix: {c:?}");
        for (s, k) in total.iter_mut().zip(c) {
            *s += k;
        }
    }
    let line: Vec<String> = OPS
        .iter()
        .zip(total)
        .map(|(n, k)| format!("{n} {k}"))
        .collect();
    println!(
        "GUEST THREADS {THREADS} threads, 2 files, {} s: {}",
        dur.as_secs(),
        line.join(", ")
    );
    drop(fds);
    pins_are(
        p0,
        SETTLE,
        "after all threads unpinned and the files closed",
    )?;
    sanity(ctx)
}

/// `pins` PIN_CUDAs with UNPINs interleaved (up to 16 live) over 24 slots of one surface, each in its own
/// 64 KiB window: live handles are always distinct, pinning a live slot again is EBUSY, every UNPIN
/// succeeds once, a sample of handles moves their own slot's bytes, unpinned ones are refused afterwards,
/// and the pinned-page count comes back.
pub(super) fn churn(ctx: &mut Ctx, pins: usize) -> TestResult {
    const SLOTS: usize = 24;
    let f = flavour(ctx.dev)?;
    let g = f.granule();
    quiesce(ctx.dev)?;
    let dev = open_uncached(ctx)?;
    let mut s = surface(f, SLOTS * ISOLATION)?;
    s.fill_random(&mut ctx.rng);
    let p0 = kstat::pinned_pages()?;
    let mut live: Vec<(u32, usize)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let (mut pinned, mut unpinned, mut max_live, mut busy) = (0usize, 0usize, 0usize, 0usize);
    while pinned < pins {
        let r = ctx.rng.next_u64();
        if live.len() < 16 && (live.is_empty() || r.is_multiple_of(2)) {
            let free: Vec<usize> = (0..SLOTS)
                .filter(|k| live.iter().all(|&(_, j)| j != *k))
                .collect();
            let k = free[(r >> 8) as usize % free.len()];
            let h = pin_range(&dev, s.va() + (k * ISOLATION) as u64, g)?;
            if let Some((_, j)) = live.iter().find(|(x, _)| *x == h) {
                return Err(format!(
                    "PIN_CUDA #{pinned} returned handle {h}, still pinned (slot {j})"
                ));
            }
            live.push((h, k));
            seen.insert(h);
            pinned += 1;
            max_live = max_live.max(live.len());
            if pinned.is_multiple_of(10) {
                let (_, j) = live[(r >> 16) as usize % live.len()];
                expect_errno(
                    &format!("PIN_CUDA of slot {j}, pinned"),
                    dev.pin_cuda(s.va() + (j * ISOLATION) as u64, g as u64),
                    libc::EBUSY,
                )?;
                busy += 1;
            }
            if pinned.is_multiple_of(50) {
                let (h, j) = live[(r >> 24) as usize % live.len()];
                let len = g.min(RAM);
                ctx_err(
                    &format!("H2C from slot {j}"),
                    dev.h2c_cuda(h.into(), 0, len as u64),
                )?;
                let mut host = crate::buf::GuardedBuf::new(len, 0);
                ctx_err("C2H", dev.c2h(host.as_mut_slice(), 0))?;
                let at = j * ISOLATION;
                compare(
                    &format!("after {pinned} pins, slot {j} (handle {h})"),
                    &s.as_slice()[at..at + len],
                    host.as_slice(),
                )?;
            }
        } else {
            let (h, _) = live.swap_remove((r >> 8) as usize % live.len());
            unpin(&dev, h)?;
            unpinned += 1;
            if unpinned.is_multiple_of(25) {
                expect_errno(
                    &format!("UNPIN_CUDA {h} again"),
                    dev.unpin_cuda(h),
                    libc::EINVAL,
                )?;
            }
        }
    }
    for (h, _) in live.drain(..) {
        unpin(&dev, h)?;
        dma_refuses(&dev, h.into(), &format!("unpinned handle {h}"))?;
    }
    pins_are(p0, SETTLE, "after the last UNPIN_CUDA")?;
    println!(
        "GUEST CHURN {pinned} pins, {unpinned} early unpins, {busy} overlapping pins refused, at most \
         {max_live} live, {} distinct handle values",
        seen.len()
    );
    sanity(ctx)
}
