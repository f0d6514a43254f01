//! Threads sharing one cache while their memory changes.

use super::*;

const THREADS: usize = 4;
const THREAD_BUFS: usize = 4;
const THREAD_LEN: usize = 16 << 10;
const THREAD_OPS: [&str; 4] = ["round trip", "MADV_DONTNEED", "MAP_FIXED", "REG_CACHE"];

/// One thread of `threads`: random round trips through its FPGA slice between its own buffers, whose
/// memory it replaces now and then, and cache operations on its file (shared with another thread).
fn thread_work(
    t: usize,
    dev: &Device,
    seed: u64,
    until: Instant,
    stop: &AtomicBool,
) -> Result<[u64; 4], String> {
    let mut rng = Rng::new(seed);
    let off = t * (RAM / THREADS);
    let mut bufs = (0..THREAD_BUFS)
        .map(|_| host(THREAD_LEN, &mut rng))
        .collect::<Result<Vec<_>, _>>()?;
    let mut counts = [0u64; 4];
    let mut n = 0usize;
    while (n < 40 || Instant::now() < until) && !stop.load(Ordering::Relaxed) {
        let op = match n {
            // Use, reuse, invalidate, use: every thread does each at least once.
            0 | 1 | 3 => 0,
            2 => 1,
            _ => match rng.next_u64() % 10 {
                0..=5 => 0,
                6 => 1,
                7 => 2,
                _ => 3,
            },
        };
        let i = if n < 4 {
            0
        } else {
            (rng.next_u64() as usize) % THREAD_BUFS
        };
        let r = match op {
            0 => {
                let j = (rng.next_u64() as usize) % THREAD_BUFS;
                let len = 1 + (rng.next_u64() as usize) % (RAM / THREADS);
                let oi = (rng.next_u64() as usize) % (THREAD_LEN - len + 1);
                let oj = (rng.next_u64() as usize) % (THREAD_LEN - len + 1);
                rng.fill(&mut bufs[i].as_mut_slice()[oi..oi + len]);
                let want = bufs[i].as_slice()[oi..oi + len].to_vec();
                h2c(dev, &bufs[i].as_slice()[oi..oi + len], off, "thread")
                    .and_then(|()| {
                        let dst = &mut bufs[j].as_mut_slice()[oj..oj + len];
                        dst.iter_mut().zip(&want).for_each(|(d, w)| *d = !w);
                        c2h(dev, dst, off, "thread")
                    })
                    .and_then(|()| {
                        compare(
                            &format!("buffer {i} +{oi} -> buffer {j} +{oj}, {len} bytes"),
                            &want,
                            &bufs[j].as_slice()[oj..oj + len],
                        )
                    })
            }
            1 => ctx_err(
                "madvise(MADV_DONTNEED)",
                bufs[i].madvise(libc::MADV_DONTNEED),
            ),
            2 => ctx_err("mmap MAP_FIXED", bufs[i].remap_fixed()),
            _ => {
                let r = match rng.next_u64() % 4 {
                    0 => dev.reg_cache_flush(),
                    1 => dev.reg_cache_set_limits(
                        (rng.next_u64() % 9) as u32,
                        [THREAD_LEN as u64, 4 * THREAD_LEN as u64, DEFAULT_BYTES]
                            [(rng.next_u64() % 3) as usize],
                    ),
                    _ => dev.reg_cache_query(),
                };
                ctx_err("REG_CACHE", r).and_then(|s| consistent("REG_CACHE", &s))
            }
        };
        if let Err(e) = r {
            stop.store(true, Ordering::Relaxed);
            return Err(format!(
                "thread {t}, operation #{n} ({}): {e}",
                THREAD_OPS[op]
            ));
        }
        counts[op] += 1;
        n += 1;
    }
    if stop.load(Ordering::Relaxed) {
        return Err(format!("thread {t}: stopped by another thread's failure"));
    }
    Ok(counts)
}

/// THREADS threads on two files (max_entries 6 for the 8 buffers of each file's two threads, so buffers
/// are evicted under each other): round trips, memory replaced under cached buffers, and FLUSH, QUERY and
/// random limits from the other thread of the file, all at once; every byte checked, every answer
/// consistent, nothing pinned after close.
pub(super) fn threads(ctx: &mut Ctx, dur: Duration) -> TestResult {
    let p0 = kstat::pinned_pages()?;
    let files = [open_cached(ctx)?, open_cached(ctx)?];
    for f in &files {
        set_limits(f, 6, DEFAULT_BYTES)?;
    }
    let stop = AtomicBool::new(false);
    let until = Instant::now() + dur;
    let seeds: Vec<u64> = (0..THREADS).map(|_| ctx.rng.next_u64()).collect();
    let results: Vec<Result<[u64; 4], String>> = thread::scope(|sc| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                let (dev, seed, stop) = (&files[t % 2], seeds[t], &stop);
                sc.spawn(move || thread_work(t, dev, seed, until, stop))
            })
            .collect();
        hs.into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join()
                    .unwrap_or_else(|_| Err(format!("thread {t} panicked")))
            })
            .collect()
    });
    super::super::first_failure(&results)?;
    let mut ops = [0u64; 4];
    for r in &results {
        for (s, k) in ops
            .iter_mut()
            .zip(r.as_ref().expect("errors returned above"))
        {
            *s += k;
        }
    }
    let mut sum = RegCache::default();
    for (i, f) in files.iter().enumerate() {
        let s = query(f)?;
        consistent(&format!("file {i} at the end"), &s)?;
        sum.hits += s.hits;
        sum.misses += s.misses;
        sum.evictions += s.evictions;
        sum.invalidations += s.invalidations;
        sum.uncached += s.uncached;
    }
    let line: Vec<String> = THREAD_OPS
        .iter()
        .zip(ops)
        .map(|(n, k)| format!("{n} {k}"))
        .collect();
    println!(
        "GUEST REGCACHE {THREADS} threads, 2 files, {} s: {}; hits {}, misses {}, evictions {}, \
         invalidations {}, uncached {}",
        dur.as_secs(),
        line.join(", "),
        sum.hits,
        sum.misses,
        sum.evictions,
        sum.invalidations,
        sum.uncached
    );
    ensure!(
        sum.hits > 0 && sum.misses > 0 && sum.invalidations > 0,
        "the run did not exercise the cache (hits, misses and invalidations all needed): {}",
        describe(&sum)
    );
    drop(files);
    pins_are(p0, INVALIDATE, "after closing both files")
}
