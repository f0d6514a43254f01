//! The registration cache of host memory (IOC_REG_CACHE, ABI 1.1): host buffers stay pinned and DMA-mapped
//! between the requests of one open file. What must hold: a buffer used again is not pinned again (the
//! kernel's FOLL_PIN counters), a buffer whose memory changed never serves a request (the device reads and
//! writes the memory the address maps now), the limits and the LRU order bound what stays pinned, and
//! FLUSH, close and process exit unpin everything.
//!
//! Every test opens its own files and first flushes the suite's shared one, whose cached buffers would
//! otherwise be dropped under the test's pinned-page counts by the driver's invalidation work. The DMA-API
//! error count must not grow in any of them.

use std::io::{self, Read};
use std::os::fd::FromRawFd;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use picoevb_abi::{self as abi, RegCache};
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, pins_are, sanity, test};
use crate::buf::compare;
use crate::dev::{Device, Mapping};
use crate::kstat;
use crate::rng::Rng;

const RAM: usize = FPGA_RAM_SIZE as usize;
const PAGE: usize = 4096;
/// A new file's limits.
pub const DEFAULT_ENTRIES: u32 = 64;
pub const DEFAULT_BYTES: u64 = 64 << 20;
/// How long the driver's work item may take to drop a buffer whose memory changed.
const INVALIDATE: Duration = Duration::from_secs(2);
const RW: libc::c_int = libc::PROT_READ | libc::PROT_WRITE;
/// The start of the x86-64 direct map: never a valid user pointer.
const KERNEL_ADDR: u64 = 0xffff_8880_0000_0000;

pub fn register(v: &mut Vec<Test>) {
    // Always runs: a driver that fails to announce its cache must not turn the rest into skips.
    v.push(test("regcache::cap_matches_ioctl", cap_matches_ioctl));
    v.push(rc("regcache::defaults_and_query", defaults_and_query));
    v.push(rc("regcache::reuse_hits_without_pinning", reuse_hits));
    v.push(rc("regcache::cache_off_pins_every_time", cache_off));
    v.push(rc("regcache::dontneed_h2c_sends_new_bytes", dontneed_h2c));
    v.push(rc(
        "regcache::dontneed_c2h_lands_in_new_memory",
        dontneed_c2h,
    ));
    v.push(rc("regcache::remap_fixed_sends_new_bytes", remap_fixed));
    v.push(rc("regcache::munmap_and_mremap_efault", munmap_and_mremap));
    v.push(rc(
        "regcache::mprotect_readonly_c2h_efault",
        mprotect_readonly,
    ));
    v.push(rc("regcache::readonly_mapping_uncached", readonly_mapping));
    v.push(rc("regcache::lru_eviction_order", lru_order));
    v.push(rc("regcache::max_bytes_bound", max_bytes_bound));
    v.push(rc("regcache::superset_drops_contained", superset));
    v.push(rc("regcache::overlapping_ranges", overlapping_ranges));
    v.push(rc("regcache::set_limits_validation", set_limits_validation));
    v.push(rc("regcache::bad_arg_pointer_efault", bad_arg_pointer));
    v.push(rc("regcache::lower_limits_evict_and_flush", lower_limits));
    v.push(rc("regcache::close_releases_pins", close_releases));
    v.push(rc("regcache::per_file_caches", per_file));
    v.push(rc("regcache::fork_child_misses", fork_child));
    v.push(rc("regcache::threads_share_a_cache", |ctx| {
        threads(ctx, Duration::from_secs(3))
    }));
    v.push(
        rc("regcache::surface_memory_is_not_cached", surface_memory).needs(Needs::JetsonRegCache),
    );
    v.push(rc("regcache::device_still_works", sanity));
}

/// A test that needs the cache: runs on a quiet system and must not add DMA-API errors.
fn rc(name: &str, run: impl Fn(&mut Ctx) -> TestResult + 'static) -> Test {
    test(name, move |ctx| {
        quiesce(ctx.dev)?;
        // Without DMA-API debug (debugfs) there is nothing to compare; the bench always has it.
        let before = kstat::read().ok().map(|k| k.dma_errors);
        run(ctx)?;
        if let Some(b) = before {
            let now = kstat::read()?.dma_errors;
            ensure!(
                now == b,
                "dma-api error_count went from {b} to {now} during the test: the kernel log has the details \
                 (overlapping bidirectional mappings of one cacheline are one cause)"
            );
        }
        Ok(())
    })
    .needs(Needs::RegCache)
}

// ---- helpers, shared with `lifecycle` ----

/// A file with the cache turned off, when the driver has one: for tests that count pinned pages exactly
/// while their files are open, or that need every request to pin for itself.
pub(super) fn open_uncached(ctx: &Ctx) -> Result<Device, String> {
    let dev = ctx_err(
        &format!("open {}", ctx.dev_path),
        Device::open(ctx.dev_path),
    )?;
    if ctx_err("ABI_INFO", dev.has_reg_cache())? {
        let st = ctx_err(
            "REG_CACHE SET_LIMITS max_entries 0",
            dev.reg_cache_disable(),
        )?;
        ensure!(
            st.max_entries == 0 && st.entries == 0,
            "cache not off after SET_LIMITS max_entries 0: {}",
            describe(&st)
        );
    }
    Ok(dev)
}

/// Drops what `dev` (the suite's shared file) has cached and waits until the pinned-page count stops
/// moving: buffers whose memory earlier tests freed are unpinned by the driver's work item, later.
pub(super) fn quiesce(dev: &Device) -> TestResult {
    // ABI_INFO failing is basic::abi_info's failure; there is nothing to flush without a cache.
    if dev.has_reg_cache().unwrap_or(false) {
        ctx_err("REG_CACHE FLUSH of the shared file", dev.reg_cache_flush())?;
    }
    let until = Instant::now() + INVALIDATE;
    let (mut last, mut same) = (kstat::pinned_pages()?, 0);
    while same < 3 && Instant::now() < until {
        thread::sleep(Duration::from_millis(50));
        let now = kstat::pinned_pages()?;
        same = if now == last { same + 1 } else { 0 };
        last = now;
    }
    Ok(())
}

fn open_cached(ctx: &Ctx) -> Result<Device, String> {
    ctx_err(
        &format!("open {}", ctx.dev_path),
        Device::open(ctx.dev_path),
    )
}

fn query(dev: &Device) -> Result<RegCache, String> {
    ctx_err("REG_CACHE QUERY", dev.reg_cache_query())
}

fn set_limits(dev: &Device, max_entries: u32, max_bytes: u64) -> Result<RegCache, String> {
    let st = ctx_err(
        &format!("REG_CACHE SET_LIMITS {max_entries} entries, {max_bytes} bytes"),
        dev.reg_cache_set_limits(max_entries, max_bytes),
    )?;
    ensure!(
        st.max_entries == max_entries && st.max_bytes == max_bytes,
        "SET_LIMITS {max_entries}/{max_bytes} answered {}",
        describe(&st)
    );
    consistent("after SET_LIMITS", &st)?;
    Ok(st)
}

fn describe(s: &RegCache) -> String {
    format!(
        "entries {}/{} (capacity {}), bytes {}/{}, hits {}, misses {}, evictions {}, invalidations {}, \
         uncached {}, reserved {:?}",
        s.entries,
        s.max_entries,
        s.capacity,
        s.bytes,
        s.max_bytes,
        s.hits,
        s.misses,
        s.evictions,
        s.invalidations,
        s.uncached,
        s.reserved
    )
}

/// What every answer must satisfy, whatever ran before.
fn consistent(what: &str, s: &RegCache) -> TestResult {
    ensure!(
        s.max_entries <= s.capacity
            && s.entries <= s.max_entries
            && s.bytes <= s.max_bytes
            && (s.entries == 0) == (s.bytes == 0)
            && s.reserved == [0; 4],
        "{what}: inconsistent cache state: {}",
        describe(s)
    );
    Ok(())
}

/// A counter change [`delta`] does not check: a request right after the memory of a cached buffer changed
/// may find the stale buffer still there (its work item not run yet), and whether dropping it then counts
/// as an eviction (it lies inside the new range) is the driver's choice.
const ANY: u64 = u64::MAX;

/// Checks the counter changes from `a` to `b`: `(hits, misses, evictions, uncached)` exactly, [`ANY`] for
/// one not checked. Invalidations come from a work item (see [`settle`]); they only must not go back.
fn delta(what: &str, a: &RegCache, b: &RegCache, want: (u64, u64, u64, u64)) -> TestResult {
    consistent(what, b)?;
    ensure!(
        b.invalidations >= a.invalidations,
        "{what}: invalidations went back from {} to {}",
        a.invalidations,
        b.invalidations
    );
    let got = (
        b.hits.wrapping_sub(a.hits),
        b.misses.wrapping_sub(a.misses),
        b.evictions.wrapping_sub(a.evictions),
        b.uncached.wrapping_sub(a.uncached),
    );
    let ok = |g: u64, w: u64| w == ANY || g == w;
    ensure!(
        ok(got.0, want.0) && ok(got.1, want.1) && ok(got.2, want.2) && ok(got.3, want.3),
        "{what}: (hits, misses, evictions, uncached) changed by {got:?}, expected {} ({ANY} = any); now {}",
        format!("{want:?}").replace(&ANY.to_string(), "any"),
        describe(b)
    );
    Ok(())
}

/// Checks what the cache holds.
fn holds(what: &str, s: &RegCache, entries: u32, bytes: u64) -> TestResult {
    ensure!(
        s.entries == entries && s.bytes == bytes,
        "{what}: {} entries of {} bytes cached, expected {entries} of {bytes}; {}",
        s.entries,
        s.bytes,
        describe(s)
    );
    Ok(())
}

/// Polls QUERY until `done` holds (the invalidation work item runs asynchronously).
fn settle(dev: &Device, what: &str, done: impl Fn(&RegCache) -> bool) -> Result<RegCache, String> {
    let until = Instant::now() + INVALIDATE;
    loop {
        let s = query(dev)?;
        if done(&s) {
            return Ok(s);
        }
        ensure!(
            Instant::now() < until,
            "{what}: not within {} ms: {}",
            INVALIDATE.as_millis(),
            describe(&s)
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// FOLL_PIN pages a host range costs.
fn pages(addr: u64, len: usize) -> i64 {
    let page = PAGE as u64;
    ((addr + len as u64).div_ceil(page) - addr / page) as i64
}

/// A page-aligned private anonymous buffer, filled from `rng`.
fn host(len: usize, rng: &mut Rng) -> Result<Mapping, String> {
    let mut m = ctx_err(&format!("mmap {len} bytes"), Mapping::new(len, RW))?;
    rng.fill(m.as_mut_slice());
    Ok(m)
}

fn random(len: usize, rng: &mut Rng) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    v
}

fn h2c(dev: &Device, src: &[u8], off: usize, what: &str) -> TestResult {
    ctx_err(
        &format!("{what}: H2C of {} bytes to FPGA {off:#x}", src.len()),
        dev.h2c(src, off as u64),
    )
    .map(|_| ())
}

fn c2h(dev: &Device, dst: &mut [u8], off: usize, what: &str) -> TestResult {
    ctx_err(
        &format!("{what}: C2H of {} bytes from FPGA {off:#x}", dst.len()),
        dev.c2h(dst, off as u64),
    )
    .map(|_| ())
}

/// Reads FPGA RAM through `verify` (a file with the cache off) and compares it with `want`.
fn fpga_holds(verify: &Device, off: usize, want: &[u8], what: &str) -> TestResult {
    let mut got: Vec<u8> = want.iter().map(|b| !b).collect();
    c2h(verify, &mut got, off, &format!("{what}: read back"))?;
    compare(&format!("{what}: FPGA RAM at {off:#x}"), want, &got)
}

// ---- tests ----

/// Memory pinned as a GPU surface keeps that one long-lived mapping (the DMA API does not support two):
/// PIN_CUDA drops the host buffers cached on its pages, in every file, and host DMA on the surface's memory
/// is pinned for once only, moving the right bytes; after UNPIN the memory is cached again.
fn surface_memory(ctx: &mut Ctx) -> TestResult {
    let f = super::cuda::flavour(ctx.dev)?;
    let (a, b) = (open_cached(ctx)?, open_cached(ctx)?);
    let verify = open_uncached(ctx)?;
    let mut s = super::cuda::surface(f, 2 * RAM)?;
    ctx.rng.fill(s.as_mut_slice());
    h2c(&a, &s.as_slice()[..RAM], 0, "host H2C from the first half")?;
    h2c(&b, &s.as_slice()[RAM..], 0, "host H2C from the second half")?;
    let (a0, b0) = (query(&a)?, query(&b)?);
    holds("file a before PIN_CUDA", &a0, 1, RAM as u64)?;
    holds("file b before PIN_CUDA", &b0, 1, RAM as u64)?;
    let h = super::cuda::pin(&a, &s)?;
    let (a1, b1) = (query(&a)?, query(&b)?);
    delta("PIN_CUDA, the pinning file", &a0, &a1, (0, 0, 1, 0))?;
    delta("PIN_CUDA, another file", &b0, &b1, (0, 0, 1, 0))?;
    holds("file a after PIN_CUDA", &a1, 0, 0)?;
    holds("file b after PIN_CUDA", &b1, 0, 0)?;
    for i in 0..3 {
        ctx.rng.fill(&mut s.as_mut_slice()[RAM..]);
        let what = format!("host H2C #{i} from a pinned surface's memory");
        h2c(&b, &s.as_slice()[RAM..], 0, &what)?;
        fpga_holds(&verify, 0, &s.as_slice()[RAM..], &what)?;
    }
    let b2 = query(&b)?;
    delta("host DMA on surface memory", &b1, &b2, (0, 0, 0, 3))?;
    holds("file b after host DMA on surface memory", &b2, 0, 0)?;
    super::cuda::unpin(&a, h)?;
    h2c(&b, &s.as_slice()[RAM..], 0, "host H2C after UNPIN_CUDA")?;
    delta("host DMA after UNPIN_CUDA", &b2, &query(&b)?, (0, 1, 0, 0))
}

/// CAP_REG_CACHE and the ioctl agree: with the bit QUERY works (and the ABI is 1.1 or later), without it
/// the ioctl is unknown (ENOTTY).
fn cap_matches_ioctl(ctx: &mut Ctx) -> TestResult {
    let info = ctx_err("ABI_INFO", ctx.dev.abi_info())?;
    let dev = open_cached(ctx)?;
    let r = dev.reg_cache_query();
    if info.caps & abi::CAP_REG_CACHE == 0 {
        return expect_errno(
            &format!(
                "REG_CACHE QUERY without CAP_REG_CACHE (caps {:#x})",
                info.caps
            ),
            r,
            libc::ENOTTY,
        );
    }
    let st = ctx_err("REG_CACHE QUERY with CAP_REG_CACHE announced", r)?;
    ensure!(
        info.abi_version & 0xffff >= 1,
        "CAP_REG_CACHE needs ABI 1.1, ABI_INFO says {:#x}",
        info.abi_version
    );
    consistent("QUERY", &st)
}

/// A new file: the documented limits, nothing cached, counters zero. QUERY and FLUSH ignore the limit
/// fields, output fields given as input are overwritten, and the limits are per file.
fn defaults_and_query(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let st = query(&dev)?;
    consistent("QUERY of a new file", &st)?;
    let fresh = RegCache {
        op: st.op,
        max_entries: DEFAULT_ENTRIES,
        capacity: DEFAULT_ENTRIES,
        max_bytes: DEFAULT_BYTES,
        ..Default::default()
    };
    ensure!(
        st == fresh,
        "new file: {}, expected {}",
        describe(&st),
        describe(&fresh)
    );
    for op in [abi::REG_CACHE_QUERY, abi::REG_CACHE_FLUSH] {
        let mut a = RegCache {
            op,
            max_entries: 1,
            max_bytes: 4096,
            entries: 77,
            capacity: 5,
            bytes: 12345,
            hits: 9,
            misses: 9,
            evictions: 9,
            invalidations: 9,
            uncached: 9,
            reserved: [0; 4],
        };
        ctx_err(&format!("REG_CACHE op {op}"), dev.reg_cache_raw(&mut a))?;
        ensure!(
            a == RegCache { op: a.op, ..fresh },
            "op {op} with limits and output fields set: answered {}, expected the unchanged {}",
            describe(&a),
            describe(&fresh)
        );
    }
    set_limits(&dev, 3, 1 << 20)?;
    let other = open_cached(ctx)?;
    let o = query(&other)?;
    ensure!(
        (o.max_entries, o.max_bytes) == (DEFAULT_ENTRIES, DEFAULT_BYTES),
        "another file's SET_LIMITS changed a new file's limits: {}",
        describe(&o)
    );
    Ok(())
}

/// The first use of a buffer pins it (a miss, exactly its pages); using it again, a part of it, in the
/// other direction or in an H2C2H pins nothing (hits), and every byte still arrives.
fn reuse_hits(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut src = host(RAM, &mut ctx.rng)?;
    let mut dst = host(RAM, &mut ctx.rng)?;
    let per = pages(src.addr(), RAM);
    let acq0 = kstat::pins_acquired()?;
    let s0 = query(&dev)?;
    h2c(&dev, src.as_slice(), 0, "first H2C")?;
    c2h(&dev, dst.as_mut_slice(), 0, "first C2H")?;
    compare("first round trip", src.as_slice(), dst.as_slice())?;
    let s1 = query(&dev)?;
    delta("first use of two buffers", &s0, &s1, (0, 2, 0, 0))?;
    holds("after the first use", &s1, 2, 2 * RAM as u64)?;
    let acq1 = kstat::pins_acquired()?;
    ensure!(
        (acq1 - acq0) as i64 == 2 * per,
        "the first use of two {RAM}-byte buffers pinned {} pages, expected {}",
        acq1 - acq0,
        2 * per
    );
    pins_are(p0 + 2 * per, Duration::ZERO, "with two buffers cached")?;
    const ROUNDS: u64 = 20;
    for i in 0..ROUNDS {
        ctx.rng.fill(src.as_mut_slice());
        let s = src.as_slice().to_vec();
        dst.as_mut_slice()
            .iter_mut()
            .zip(&s)
            .for_each(|(d, s)| *d = !s);
        h2c(&dev, src.as_slice(), 0, &format!("round {i}"))?;
        c2h(&dev, dst.as_mut_slice(), 0, &format!("round {i}"))?;
        compare(&format!("round {i}"), &s, dst.as_slice())?;
    }
    let s2 = query(&dev)?;
    delta(
        &format!("{ROUNDS} more round trips"),
        &s1,
        &s2,
        (2 * ROUNDS, 0, 0, 0),
    )?;
    let acq2 = kstat::pins_acquired()?;
    ensure!(
        acq2 == acq1,
        "{ROUNDS} round trips through cached buffers pinned {} pages, expected none",
        acq2 - acq1
    );
    // Part of a cached buffer, and each buffer in the other direction: still the same pins.
    let (o, l) = (100usize, 5000usize);
    h2c(&dev, &src.as_slice()[o..o + l], 7, "part of the source")?;
    c2h(
        &dev,
        &mut dst.as_mut_slice()[PAGE..PAGE + l],
        7,
        "part of the destination",
    )?;
    compare(
        "sub-range round trip",
        &src.as_slice()[o..o + l],
        &dst.as_slice()[PAGE..PAGE + l],
    )?;
    ctx.rng.fill(dst.as_mut_slice());
    h2c(&dev, dst.as_slice(), 0, "H2C from the C2H buffer")?;
    c2h(&dev, src.as_mut_slice(), 0, "C2H into the H2C buffer")?;
    compare("reversed round trip", dst.as_slice(), src.as_slice())?;
    // An H2C2H looks up both ends.
    ctx.rng.fill(src.as_mut_slice());
    ctx_err(
        "H2C2H between the cached buffers",
        dev.h2c2h(src.as_slice(), dst.as_mut_slice()),
    )?;
    compare("H2C2H", src.as_slice(), dst.as_slice())?;
    let s3 = query(&dev)?;
    delta(
        "sub-ranges, reversed directions, H2C2H",
        &s2,
        &s3,
        (6, 0, 0, 0),
    )?;
    holds("at the end", &s3, 2, 2 * RAM as u64)?;
    ensure!(
        kstat::pins_acquired()? == acq2,
        "hits in sub-ranges, reversed directions or H2C2H pinned pages"
    );
    pins_are(p0 + 2 * per, Duration::ZERO, "with two buffers cached")?;
    drop(dev);
    pins_are(p0, INVALIDATE, "after close")
}

/// With max_entries 0 every request pins its pages and lets them go (uncached), as before the cache; turning
/// it off evicts what was cached, turning it on again caches again.
fn cache_off(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut src = host(RAM, &mut ctx.rng)?;
    let mut dst = host(RAM, &mut ctx.rng)?;
    let per = pages(src.addr(), RAM);
    h2c(&dev, src.as_slice(), 0, "while cached")?;
    let s0 = query(&dev)?;
    let s1 = set_limits(&dev, 0, DEFAULT_BYTES)?;
    delta("turning the cache off", &s0, &s1, (0, 0, 1, 0))?;
    holds("cache off", &s1, 0, 0)?;
    pins_are(p0, INVALIDATE, "after turning the cache off")?;
    const ROUNDS: u64 = 20;
    let acq0 = kstat::pins_acquired()?;
    for i in 0..ROUNDS {
        ctx.rng.fill(src.as_mut_slice());
        h2c(&dev, src.as_slice(), 0, &format!("uncached round {i}"))?;
        c2h(&dev, dst.as_mut_slice(), 0, &format!("uncached round {i}"))?;
        compare(
            &format!("uncached round {i}"),
            src.as_slice(),
            dst.as_slice(),
        )?;
    }
    let acq1 = kstat::pins_acquired()?;
    ensure!(
        (acq1 - acq0) as i64 == 2 * ROUNDS as i64 * per,
        "{ROUNDS} uncached round trips of {per}-page buffers pinned {} pages, expected {}",
        acq1 - acq0,
        2 * ROUNDS as i64 * per
    );
    let s2 = query(&dev)?;
    delta("uncached round trips", &s1, &s2, (0, 0, 0, 2 * ROUNDS))?;
    holds("cache off", &s2, 0, 0)?;
    pins_are(p0, Duration::ZERO, "after uncached requests")?;
    // On again: cached from the next miss.
    set_limits(&dev, DEFAULT_ENTRIES, DEFAULT_BYTES)?;
    h2c(&dev, src.as_slice(), 0, "cache on again")?;
    h2c(&dev, src.as_slice(), 0, "cache on again, second use")?;
    let s3 = query(&dev)?;
    delta("cache on again", &s2, &s3, (1, 1, 0, 0))?;
    pins_are(p0 + per, Duration::ZERO, "one buffer cached again")
}

/// madvise(MADV_DONTNEED) gives the cached address fresh zeroed pages: the next H2C must send those (not
/// the old pinned pages), then what the program writes there; the old pages are unpinned. Once with the
/// H2C right after the madvise (racing the invalidation work), once after the work dropped the buffer.
fn dontneed_h2c(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(RAM, &mut ctx.rng)?;
    let per = pages(b.addr(), RAM);
    h2c(&dev, b.as_slice(), 0, "pattern A")?;
    fpga_holds(&verify, 0, b.as_slice(), "pattern A")?;
    for wait in [false, true] {
        let how = if wait {
            "after the invalidation"
        } else {
            "right after MADV_DONTNEED"
        };
        let s0 = query(&dev)?;
        holds(&format!("{how}: cached before"), &s0, 1, RAM as u64)?;
        ctx_err("madvise(MADV_DONTNEED)", b.madvise(libc::MADV_DONTNEED))?;
        let ev = if wait {
            settle(&dev, "MADV_DONTNEED dropped the cached buffer", |s| {
                s.invalidations > s0.invalidations && s.entries == 0
            })?;
            pins_are(p0, INVALIDATE, "after the invalidation")?;
            0
        } else {
            ANY
        };
        let s1 = query(&dev)?;
        // Not touched by the CPU first: the driver's pin faults the fresh pages in itself.
        h2c(&dev, b.as_slice(), 0, &format!("{how}: zeros"))?;
        let s2 = query(&dev)?;
        delta(
            &format!("{how}: H2C (a stale buffer must neither serve it nor count as a hit)"),
            &s1,
            &s2,
            (0, 1, ev, 0),
        )?;
        ensure!(
            b.as_slice().iter().all(|&x| x == 0),
            "{how}: the buffer is not zero after MADV_DONTNEED"
        );
        fpga_holds(&verify, 0, &vec![0u8; RAM], &format!("{how}: zeros"))?;
        let pattern = random(RAM, &mut ctx.rng);
        b.as_mut_slice().copy_from_slice(&pattern);
        h2c(&dev, b.as_slice(), 0, &format!("{how}: pattern B"))?;
        fpga_holds(&verify, 0, &pattern, &format!("{how}: pattern B"))?;
        let s3 = query(&dev)?;
        // Racing the work item, a driver may still take the stale buffer's range for a miss.
        let (hit, miss) = if wait { (1, 0) } else { (ANY, ANY) };
        delta(
            &format!("{how}: H2C of pattern B, written by the CPU"),
            &s2,
            &s3,
            (hit, miss, ev, 0),
        )?;
        settle(&dev, &format!("{how}: the old pages dropped"), |s| {
            s.entries == 1
        })?;
        pins_are(
            p0 + per,
            INVALIDATE,
            &format!("{how}: the old pages unpinned"),
        )?;
    }
    Ok(())
}

/// A C2H after madvise(MADV_DONTNEED) lands in the memory the address maps now: once after the
/// invalidation work dropped the buffer, then twice right after the madvise.
fn dontneed_c2h(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(RAM, &mut ctx.rng)?;
    let per = pages(b.addr(), RAM);
    c2h(&dev, b.as_mut_slice(), 0, "caching the buffer")?;
    for round in 0..3 {
        let x = random(RAM, &mut ctx.rng);
        h2c(&verify, &x, 0, "new FPGA contents")?;
        let s0 = settle(&dev, &format!("round {round}: one buffer cached"), |s| {
            s.entries == 1
        })?;
        ctx_err("madvise(MADV_DONTNEED)", b.madvise(libc::MADV_DONTNEED))?;
        let ev = if round == 0 {
            settle(&dev, "MADV_DONTNEED dropped the cached buffer", |s| {
                s.invalidations > s0.invalidations && s.entries == 0
            })?;
            0
        } else {
            ANY
        };
        let s1 = query(&dev)?;
        c2h(&dev, b.as_mut_slice(), 0, "after MADV_DONTNEED")?;
        compare(
            &format!("round {round}: C2H after MADV_DONTNEED, read by the CPU"),
            &x,
            b.as_slice(),
        )?;
        let s2 = query(&dev)?;
        delta(
            &format!("round {round}: C2H after MADV_DONTNEED (a stale buffer is no hit)"),
            &s1,
            &s2,
            (0, 1, ev, 0),
        )?;
    }
    settle(&dev, "the old pages dropped", |s| s.entries == 1)?;
    pins_are(p0 + per, INVALIDATE, "after the old pages were dropped")
}

/// New memory at a cached address (mmap MAP_FIXED over it, or munmap and mmap MAP_FIXED): H2C sends the
/// new bytes, C2H lands in the new memory.
fn remap_fixed(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    for munmap_first in [false, true] {
        let how = if munmap_first {
            "munmap + mmap MAP_FIXED"
        } else {
            "mmap MAP_FIXED over it"
        };
        let mut b = host(RAM, &mut ctx.rng)?;
        let addr = b.addr();
        h2c(&dev, b.as_slice(), 0, &format!("{how}: pattern A"))?;
        let s0 = query(&dev)?;
        if munmap_first {
            ctx_err("munmap", b.punch(0, RAM))?;
        }
        ctx_err(how, b.remap_fixed())?;
        ensure!(b.addr() == addr, "{how}: moved");
        let pattern = random(RAM, &mut ctx.rng);
        b.as_mut_slice().copy_from_slice(&pattern);
        h2c(&dev, b.as_slice(), 0, &format!("{how}: pattern B"))?;
        fpga_holds(&verify, 0, &pattern, &format!("{how}: pattern B"))?;
        let s1 = query(&dev)?;
        delta(&format!("{how}: H2C"), &s0, &s1, (0, 1, ANY, 0))?;
        let x = random(RAM, &mut ctx.rng);
        h2c(&verify, &x, 0, "new FPGA contents")?;
        c2h(&dev, b.as_mut_slice(), 0, &format!("{how}: C2H"))?;
        compare(&format!("{how}: C2H into new memory"), &x, b.as_slice())?;
        settle(&dev, &format!("{how}: the old pages dropped"), |s| {
            s.entries == 1
        })?;
        pins_are(
            p0 + pages(addr, RAM),
            INVALIDATE,
            &format!("{how}: the old pages unpinned"),
        )?;
        // `b` is unmapped here: its cached buffer goes too.
    }
    // Earlier drops may have been taken for evictions by the next miss on their range; the last munmap
    // is followed by nothing.
    settle(&dev, "everything unmapped", |s| {
        s.entries == 0 && s.invalidations > 0
    })?;
    pins_are(p0, INVALIDATE, "after unmapping every buffer")
}

/// A stale buffer must not make an unmapped address work: after munmap, and at the old address after
/// mremap moved the pages, H2C and C2H fail with EFAULT; at the new address the bytes are right.
fn munmap_and_mremap(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(LEN, &mut ctx.rng)?;
    h2c(&dev, b.as_slice(), 0, "caching")?;
    let s0 = query(&dev)?;
    let old = b.addr();
    ctx_err("munmap", b.punch(0, LEN))?;
    expect_errno(
        "H2C from an unmapped, once cached address",
        dev.h2c_at(old, LEN as u64, 0),
        libc::EFAULT,
    )?;
    // SAFETY: nothing is mapped there.
    let r = unsafe { dev.c2h_at(old, LEN as u64, 0) };
    expect_errno("C2H into an unmapped, once cached address", r, libc::EFAULT)?;
    settle(&dev, "munmap dropped the buffer", |s| {
        s.invalidations > s0.invalidations && s.entries == 0
    })?;
    drop(b);

    let mut m = host(LEN, &mut ctx.rng)?;
    let content = m.as_slice().to_vec();
    h2c(&dev, m.as_slice(), 0, "caching")?;
    let s1 = query(&dev)?;
    let target = ctx_err("mmap", Mapping::new(LEN, libc::PROT_NONE))?;
    let old = ctx_err("mremap", m.move_to(target))?;
    expect_errno(
        "H2C from the old address after mremap",
        dev.h2c_at(old, LEN as u64, 0),
        libc::EFAULT,
    )?;
    let s2 = query(&dev)?;
    ensure!(
        s2.hits == s1.hits,
        "a failed H2C at the old address after mremap counted as a hit: {}",
        describe(&s2)
    );
    compare("moved pages", &content, m.as_slice())?;
    h2c(&verify, &vec![0u8; LEN], 0, "clearing FPGA RAM")?;
    h2c(&dev, m.as_slice(), 0, "from the new address")?;
    fpga_holds(&verify, 0, &content, "H2C from the new address")?;
    let s3 = query(&dev)?;
    delta("H2C from the new address", &s2, &s3, (0, 1, 0, 0))?;
    settle(&dev, "mremap dropped the old buffer", |s| {
        s.invalidations > s1.invalidations && s.entries == 1
    })?;
    pins_are(
        p0 + pages(m.addr(), LEN),
        INVALIDATE,
        "after mremap, one buffer cached",
    )
}

/// A buffer cached writable whose mapping becomes read-only must not be written through the cache: C2H is
/// EFAULT and the memory unchanged; H2C still works (pinned for once); once writable again C2H lands.
fn mprotect_readonly(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let mut b = host(LEN, &mut ctx.rng)?;
    let x = random(LEN, &mut ctx.rng);
    h2c(&verify, &x, 0, "FPGA contents")?;
    c2h(&dev, b.as_mut_slice(), 0, "caching by C2H")?;
    compare("C2H", &x, b.as_slice())?;
    let s0 = query(&dev)?;
    holds("cached", &s0, 1, LEN as u64)?;
    ctx_err("mprotect(PROT_READ)", b.protect(libc::PROT_READ))?;
    let y = random(LEN, &mut ctx.rng);
    h2c(&verify, &y, 0, "new FPGA contents")?;
    // SAFETY: the mapping is read-only to us and no slice of it is live during the call.
    let r = unsafe { dev.c2h_at(b.addr(), LEN as u64, 0) };
    expect_errno("C2H into a cached buffer made read-only", r, libc::EFAULT)?;
    compare("a read-only mapping after a refused C2H", &x, b.as_slice())?;
    let s1 = query(&dev)?;
    h2c(&dev, b.as_slice(), 0, "H2C from the read-only buffer")?;
    fpga_holds(&verify, 0, &x, "H2C from the read-only buffer")?;
    let s2 = query(&dev)?;
    delta("H2C from a read-only mapping", &s1, &s2, (0, 0, 0, 1))?;
    settle(&dev, "mprotect dropped the buffer", |s| {
        s.invalidations > s0.invalidations && s.entries == 0
    })?;
    ctx_err("mprotect(PROT_READ|PROT_WRITE)", b.protect(RW))?;
    c2h(&dev, b.as_mut_slice(), 0, "writable again")?;
    fpga_holds(&verify, 0, b.as_slice(), "C2H into the writable buffer")
}

/// A PROT_READ mapping cannot be pinned writable: H2C (and an H2C2H source) from it work, pinned for once
/// (uncached), nothing of it stays pinned; C2H and an H2C2H into it are EFAULT and leave it unchanged.
fn readonly_mapping(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 8 << 10;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    // Written first, so the device reads real pages, not the shared zero page.
    let mut ro = host(LEN, &mut ctx.rng)?;
    let want = ro.as_slice().to_vec();
    ctx_err("mprotect(PROT_READ)", ro.protect(libc::PROT_READ))?;
    let s0 = query(&dev)?;
    for i in 1..=2u64 {
        h2c(&dev, ro.as_slice(), 0, "from a read-only mapping")?;
        let s = query(&dev)?;
        delta(
            &format!("H2C #{i} from a read-only mapping"),
            &s0,
            &s,
            (0, 0, 0, i),
        )?;
        holds("after H2C from a read-only mapping", &s, 0, 0)?;
        pins_are(
            p0,
            Duration::ZERO,
            "after H2C from a read-only mapping (pinned for once)",
        )?;
        fpga_holds(&verify, 0, &want, "H2C from a read-only mapping")?;
    }
    let mut rw = host(LEN, &mut ctx.rng)?;
    let s1 = query(&dev)?;
    ctx_err(
        "H2C2H from a read-only mapping",
        dev.h2c2h(ro.as_slice(), rw.as_mut_slice()),
    )?;
    compare("H2C2H from a read-only mapping", &want, rw.as_slice())?;
    let s2 = query(&dev)?;
    delta(
        "H2C2H from a read-only mapping (source once, destination cached)",
        &s1,
        &s2,
        (0, 1, 0, 1),
    )?;
    holds("the destination cached", &s2, 1, LEN as u64)?;
    // SAFETY: `ro` is read-only to us; no slice of it is live during the call.
    let r = unsafe { dev.c2h_at(ro.addr(), LEN as u64, 0) };
    expect_errno("C2H into a read-only mapping", r, libc::EFAULT)?;
    // SAFETY: as above, for the destination; the source is `rw`, cached, not written.
    let r = unsafe { dev.h2c2h_any(rw.addr(), ro.addr(), LEN as u64, 0) };
    expect_errno("H2C2H into a read-only mapping", r, libc::EFAULT)?;
    compare(
        "a read-only mapping after refused writes",
        &want,
        ro.as_slice(),
    )?;
    let s3 = query(&dev)?;
    holds("after refused writes", &s3, 1, LEN as u64)?;
    pins_are(
        p0 + pages(rw.addr(), LEN),
        Duration::ZERO,
        "only the destination cached",
    )
}

/// max_entries 4 over six buffers: the least recently used goes first, and a hit makes a buffer recent.
fn lru_order(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 8 << 10;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    set_limits(&dev, 4, DEFAULT_BYTES)?;
    let mut bufs = (0..6)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    // (buffer, hit, evictions): LRU order in the comments, oldest first.
    let script: [(usize, bool, u64); 17] = [
        (0, false, 0),
        (1, false, 0),
        (2, false, 0),
        (3, false, 0),
        (4, false, 1), // 1 2 3 4
        (5, false, 1), // 2 3 4 5
        (2, true, 0),  // 3 4 5 2
        (0, false, 1), // 4 5 2 0: 3 went, not 2, because the hit made 2 recent
        (2, true, 0),  // 4 5 0 2
        (4, true, 0),  // 5 0 2 4
        (5, true, 0),  // 0 2 4 5
        (3, false, 1), // 2 4 5 3
        (1, false, 1), // 4 5 3 1
        (4, true, 0),
        (5, true, 0),
        (3, true, 0),
        (1, true, 0),
    ];
    for (step, &(i, hit, ev)) in script.iter().enumerate() {
        ctx.rng.fill(bufs[i].as_mut_slice());
        let before = query(&dev)?;
        let what = format!("step {step}: buffer {i}");
        h2c(&dev, bufs[i].as_slice(), i * LEN, &what)?;
        let after = query(&dev)?;
        let want = if hit { (1, 0, 0, 0) } else { (0, 1, ev, 0) };
        delta(
            &format!("{what} ({})", if hit { "hit" } else { "miss" }),
            &before,
            &after,
            want,
        )?;
        fpga_holds(&verify, i * LEN, bufs[i].as_slice(), &what)?;
    }
    let end = query(&dev)?;
    holds("at the end", &end, 4, 4 * LEN as u64)?;
    ensure!(
        (end.hits, end.misses, end.evictions) == (8, 9, 5),
        "totals {}",
        describe(&end)
    );
    pins_are(
        p0 + 4 * pages(bufs[0].addr(), LEN),
        INVALIDATE,
        "four buffers cached",
    )
}

/// max_bytes bounds the bytes cached (request lengths, not pages): the least recently used go until a new
/// buffer fits; a buffer over the limit is never cached; one of exactly the limit replaces everything.
fn max_bytes_bound(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    const LIMIT: u64 = 3 * LEN as u64;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    set_limits(&dev, DEFAULT_ENTRIES, LIMIT)?;
    let odd = host(LEN, &mut ctx.rng)?;
    let s0 = query(&dev)?;
    h2c(&dev, &odd.as_slice()[100..5100], 0, "5000 bytes")?;
    let s1 = query(&dev)?;
    delta("5000 bytes", &s0, &s1, (0, 1, 0, 0))?;
    holds("5000 bytes cached (lengths, not pages)", &s1, 1, 5000)?;
    let bufs = (0..4)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    // 5000 + 16K, + 16K, then each new one pushes the oldest out.
    let expect: [(u64, u32, u64); 4] = [
        (0, 2, 5000 + LEN as u64),
        (0, 3, 5000 + 2 * LEN as u64),
        (1, 3, LIMIT),
        (1, 3, LIMIT),
    ];
    for (i, (b, &(ev, entries, bytes))) in bufs.iter().zip(&expect).enumerate() {
        let before = query(&dev)?;
        h2c(&dev, b.as_slice(), 0, &format!("buffer {i}"))?;
        let after = query(&dev)?;
        delta(&format!("buffer {i}"), &before, &after, (0, 1, ev, 0))?;
        holds(&format!("after buffer {i}"), &after, entries, bytes)?;
        fpga_holds(&verify, 0, b.as_slice(), &format!("buffer {i}"))?;
    }
    let held = p0 + 3 * pages(bufs[0].addr(), LEN);
    pins_are(held, INVALIDATE, "three buffers cached")?;
    let big = host(4 * LEN, &mut ctx.rng)?;
    for i in 1..=2 {
        let before = query(&dev)?;
        h2c(&dev, big.as_slice(), 0, "a buffer over max_bytes")?;
        let after = query(&dev)?;
        delta(
            &format!("a buffer over max_bytes, use {i}"),
            &before,
            &after,
            (0, 0, 0, 1),
        )?;
        holds("after a buffer over max_bytes", &after, 3, LIMIT)?;
        fpga_holds(&verify, 0, big.as_slice(), "a buffer over max_bytes")?;
        pins_are(held, Duration::ZERO, "after a buffer over max_bytes")?;
    }
    let exact = host(LIMIT as usize, &mut ctx.rng)?;
    let before = query(&dev)?;
    h2c(&dev, exact.as_slice(), 0, "a buffer of exactly max_bytes")?;
    let after = query(&dev)?;
    delta(
        "a buffer of exactly max_bytes",
        &before,
        &after,
        (0, 1, 3, 0),
    )?;
    holds("after a buffer of exactly max_bytes", &after, 1, LIMIT)?;
    pins_are(
        p0 + pages(exact.addr(), LIMIT as usize),
        INVALIDATE,
        "one buffer of max_bytes cached",
    )
}

/// A range covering cached ones replaces them (they count as evictions) and serves their requests; a range
/// sharing a page with a cached one is cached as their union, in place of it (no page is in two cached
/// buffers of one file), and then serves both.
fn superset(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let b = host(RAM, &mut ctx.rng)?;
    let parts = [(0usize, PAGE), (2 * PAGE, PAGE), (20000, 1)];
    for &(o, l) in &parts {
        h2c(&dev, &b.as_slice()[o..o + l], o, "a part")?;
    }
    let s0 = query(&dev)?;
    holds("three parts cached", &s0, 3, 2 * PAGE as u64 + 1)?;
    h2c(&dev, b.as_slice(), 0, "the whole buffer")?;
    let s1 = query(&dev)?;
    delta(
        "the whole buffer over three cached parts",
        &s0,
        &s1,
        (0, 1, 3, 0),
    )?;
    holds("the whole buffer cached", &s1, 1, RAM as u64)?;
    let per = pages(b.addr(), RAM);
    pins_are(p0 + per, INVALIDATE, "the parts unpinned")?;
    for &(o, l) in &parts {
        h2c(&dev, &b.as_slice()[o..o + l], o, "a part again")?;
    }
    let s2 = query(&dev)?;
    delta("parts of the cached whole", &s1, &s2, (3, 0, 0, 0))?;
    fpga_holds(&verify, 0, b.as_slice(), "the whole buffer")?;

    let c = host(16 << 10, &mut ctx.rng)?;
    h2c(&dev, &c.as_slice()[..2 * PAGE], 0, "pages 0-1")?;
    h2c(&dev, &c.as_slice()[PAGE..3 * PAGE], 0, "pages 1-2")?;
    let s3 = query(&dev)?;
    delta("two ranges sharing page 1", &s2, &s3, (0, 2, 1, 0))?;
    holds(
        "the whole buffer and the union of pages 0-2",
        &s3,
        2,
        (RAM + 3 * PAGE) as u64,
    )?;
    fpga_holds(&verify, 0, &c.as_slice()[PAGE..3 * PAGE], "pages 1-2")?;
    pins_are(p0 + per + 3, Duration::ZERO, "the union pinned once")?;
    h2c(&dev, &c.as_slice()[..2 * PAGE], 0, "pages 0-1 again")?;
    h2c(&dev, &c.as_slice()[2 * PAGE..3 * PAGE], 0, "page 2")?;
    let s4 = query(&dev)?;
    delta("both ranges inside the union", &s3, &s4, (2, 0, 0, 0))?;
    fpga_holds(&verify, 0, &c.as_slice()[2 * PAGE..3 * PAGE], "page 2")
}

/// Twelve ranges starting in the same cacheline, none inside another: each shares pages with what is
/// cached, so the cached union grows by each (the previous union evicted) and, in the second round, serves
/// them all. All move the right bytes, and DMA-API debug sees no misuse (checked by `rc`; more than 7
/// mappings of one cacheline are what it objects to).
fn overlapping_ranges(ctx: &mut Ctx) -> TestResult {
    const N: usize = 12;
    const LEN: usize = 5000;
    const STEP: usize = 5;
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(4 * PAGE, &mut ctx.rng)?;
    let mut out = host(LEN, &mut ctx.rng)?;
    let union = LEN + STEP * (N - 1);
    let s0 = query(&dev)?;
    for round in 0..2 {
        for i in 0..N {
            let o = STEP * i;
            ctx.rng.fill(&mut b.as_mut_slice()[o..o + LEN]);
            let what = format!("round {round}, range +{o}");
            h2c(&dev, &b.as_slice()[o..o + LEN], 0, &what)?;
            c2h(&dev, out.as_mut_slice(), 0, &what)?;
            compare(&what, &b.as_slice()[o..o + LEN], out.as_slice())?;
        }
    }
    let s1 = query(&dev)?;
    // Round 0: N misses (all but the first evicting the previous union), the C2H buffer one miss and
    // N - 1 hits; round 1: 2N hits.
    delta(
        "twelve staggered ranges, twice",
        &s0,
        &s1,
        (3 * N as u64 - 1, N as u64 + 1, N as u64 - 1, 0),
    )?;
    holds(
        "the union of the twelve ranges and the C2H buffer",
        &s1,
        2,
        (union + LEN) as u64,
    )?;
    pins_are(
        p0 + pages(b.addr(), union) + pages(out.addr(), LEN),
        Duration::ZERO,
        "the union and the C2H buffer pinned",
    )
}

/// Bad SET_LIMITS, unknown ops and nonzero reserved words are EINVAL and change nothing; QUERY after each
/// shows the same state. max_entries = capacity is accepted and raising limits evicts nothing.
fn set_limits_validation(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let b = host(8 << 10, &mut ctx.rng)?;
    h2c(&dev, b.as_slice(), 0, "one cached buffer")?;
    let s0 = set_limits(&dev, 8, 1 << 20)?;
    let cap = s0.capacity;
    let base = |op| RegCache {
        op,
        max_entries: 2,
        max_bytes: 4096,
        ..Default::default()
    };
    let mut bad: Vec<(String, RegCache)> = vec![
        (
            format!("max_entries capacity + 1 ({})", cap + 1),
            RegCache {
                max_entries: cap + 1,
                ..base(abi::REG_CACHE_SET_LIMITS)
            },
        ),
        (
            "max_entries u32::MAX".into(),
            RegCache {
                max_entries: u32::MAX,
                ..base(abi::REG_CACHE_SET_LIMITS)
            },
        ),
    ];
    for op in [3, 0x100, 0x8000_0000, u32::MAX] {
        bad.push((format!("op {op:#x}"), base(op)));
    }
    for op in [
        abi::REG_CACHE_QUERY,
        abi::REG_CACHE_SET_LIMITS,
        abi::REG_CACHE_FLUSH,
    ] {
        for (i, v) in [(0, 1), (1, 1 << 63), (2, 0x100), (3, u64::MAX)] {
            let mut a = base(op);
            a.reserved[i] = v;
            bad.push((format!("op {op} with reserved[{i}] = {v:#x}"), a));
        }
    }
    for (what, mut a) in bad {
        expect_errno(
            &format!("REG_CACHE {what}"),
            dev.reg_cache_raw(&mut a),
            libc::EINVAL,
        )?;
        let now = query(&dev)?;
        ensure!(
            now == RegCache { op: now.op, ..s0 },
            "REG_CACHE {what} was refused but changed the cache: {}, before {}",
            describe(&now),
            describe(&s0)
        );
    }
    let s1 = set_limits(&dev, cap, DEFAULT_BYTES)?;
    delta("raising the limits", &s0, &s1, (0, 0, 0, 0))?;
    holds("after raising the limits", &s1, 1, 8 << 10)
}

/// An argument pointer the driver cannot read or write back: EFAULT, and the file still answers.
fn bad_arg_pointer(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let s0 = query(&dev)?;
    let ro = ctx_err("mmap", Mapping::new(PAGE, libc::PROT_READ))?;
    let mut edge = ctx_err("mmap", Mapping::new(2 * PAGE, RW))?;
    ctx_err("munmap", edge.punch(PAGE, PAGE))?;
    // A zeroed struct (a valid QUERY: fresh anonymous memory) whose tail runs into the hole.
    let straddle = edge.addr() + (PAGE - 50) as u64;
    let hole = ctx_err("mmap", Mapping::new(PAGE, libc::PROT_NONE))?;
    for (what, p) in [
        ("NULL", 0u64),
        ("0x10", 0x10),
        ("a kernel address", KERNEL_ADDR),
        ("a PROT_NONE page", hole.addr()),
        (
            "a read-only page (a QUERY that cannot be written back)",
            ro.addr(),
        ),
        ("a struct running into an unmapped page", straddle),
    ] {
        // SAFETY: none of these is memory Rust references: the kernel must fail to copy (EFAULT).
        let r = unsafe { dev.ioctl_raw(abi::IOC_REG_CACHE, p as libc::c_ulong) };
        expect_errno(&format!("REG_CACHE with {what}"), r, libc::EFAULT)?;
    }
    let s1 = query(&dev)?;
    ensure!(
        s1 == RegCache { op: s1.op, ..s0 },
        "refused calls changed the cache: {} before {}",
        describe(&s1),
        describe(&s0)
    );
    Ok(())
}

/// Lowering the limits evicts at once, least recently used first, down to them; counters carry on. FLUSH
/// drops everything (not counted as evictions or invalidations) and unpins it with the file still open.
fn lower_limits(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 8 << 10;
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let bufs = (0..6)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    let per = pages(bufs[0].addr(), LEN);
    for (i, b) in bufs.iter().enumerate() {
        h2c(&dev, b.as_slice(), 0, &format!("buffer {i}"))?;
    }
    let s0 = query(&dev)?;
    holds("six cached", &s0, 6, 6 * LEN as u64)?;
    let s1 = set_limits(&dev, 2, DEFAULT_BYTES)?;
    delta("max_entries 6 -> 2", &s0, &s1, (0, 0, 4, 0))?;
    holds("max_entries 2", &s1, 2, 2 * LEN as u64)?;
    pins_are(p0 + 2 * per, INVALIDATE, "after lowering max_entries to 2")?;
    for i in [4, 5] {
        h2c(&dev, bufs[i].as_slice(), 0, "a survivor")?;
    }
    let s2 = query(&dev)?;
    delta("the two most recent survived", &s1, &s2, (2, 0, 0, 0))?;
    let s3 = set_limits(&dev, DEFAULT_ENTRIES, 2 * LEN as u64)?;
    delta("max_bytes = what is cached", &s2, &s3, (0, 0, 0, 0))?;
    let s4 = set_limits(&dev, DEFAULT_ENTRIES, LEN as u64 + 1)?;
    delta("max_bytes below what is cached", &s3, &s4, (0, 0, 1, 0))?;
    holds("max_bytes one buffer", &s4, 1, LEN as u64)?;
    h2c(&dev, bufs[5].as_slice(), 0, "the most recent")?;
    let s5 = query(&dev)?;
    delta("the most recent survived max_bytes", &s4, &s5, (1, 0, 0, 0))?;
    let s6 = ctx_err("REG_CACHE FLUSH", dev.reg_cache_flush())?;
    delta("FLUSH", &s5, &s6, (0, 0, 0, 0))?;
    holds("after FLUSH", &s6, 0, 0)?;
    ensure!(
        s6.invalidations == s5.invalidations
            && (s6.max_entries, s6.max_bytes) == (DEFAULT_ENTRIES, LEN as u64 + 1),
        "FLUSH changed invalidations or limits: {}",
        describe(&s6)
    );
    pins_are(p0, INVALIDATE, "after FLUSH, the file still open")?;
    h2c(&dev, bufs[5].as_slice(), 0, "after FLUSH")?;
    let s7 = query(&dev)?;
    delta("after FLUSH", &s6, &s7, (0, 1, 0, 0))?;
    ensure!(
        s7.hits == 3 && s7.misses == 7 && s7.evictions == 5,
        "counters must count since open: {}",
        describe(&s7)
    );
    Ok(())
}

/// Closing a file with buffers cached (one of them stale, its work item maybe pending) unpins and unmaps
/// them all; unmapping the memory afterwards releases nothing twice.
fn close_releases(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let p0 = kstat::pinned_pages()?;
    let dma0 = kstat::read().ok().map(|k| k.dma_entries);
    let mut bufs = (0..5)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    let per = pages(bufs[0].addr(), LEN);
    {
        let dev = open_cached(ctx)?;
        for (i, b) in bufs.iter_mut().enumerate() {
            if i % 2 == 0 {
                h2c(&dev, b.as_slice(), 0, &format!("buffer {i}"))?;
            } else {
                c2h(&dev, b.as_mut_slice(), 0, &format!("buffer {i}"))?;
            }
        }
        holds("five cached", &query(&dev)?, 5, 5 * LEN as u64)?;
        pins_are(p0 + 5 * per, Duration::ZERO, "five buffers cached")?;
        if let Some(d0) = dma0 {
            let d = kstat::read()?.dma_entries;
            ensure!(
                d >= d0 + 5,
                "{d} DMA-debug entries in use with five buffers cached, {d0} before: cached buffers are \
                 not DMA-mapped?"
            );
        }
        ctx_err(
            "madvise(MADV_DONTNEED)",
            bufs[4].madvise(libc::MADV_DONTNEED),
        )?;
    }
    pins_are(
        p0,
        INVALIDATE,
        "after closing a file with five buffers cached",
    )?;
    if let Some(d0) = dma0 {
        let until = Instant::now() + INVALIDATE;
        let mut d = kstat::read()?.dma_entries;
        while d != d0 && Instant::now() < until {
            thread::sleep(Duration::from_millis(20));
            d = kstat::read()?.dma_entries;
        }
        ensure!(
            d == d0,
            "{d} DMA-debug entries in use after close, {d0} before open"
        );
    }
    drop(bufs);
    pins_are(p0, INVALIDATE, "after unmapping the once cached memory")
}

/// Each file has its own cache: the same buffer is a miss on each, pinned once per file; closing one file
/// leaves the other's buffer cached.
fn per_file(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let p0 = kstat::pinned_pages()?;
    let a = open_cached(ctx)?;
    let b = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let mut buf = host(LEN, &mut ctx.rng)?;
    let per = pages(buf.addr(), LEN);
    let (a0, b0) = (query(&a)?, query(&b)?);
    h2c(&a, buf.as_slice(), 0, "file a")?;
    h2c(&b, buf.as_slice(), 0, "file b")?;
    h2c(&a, buf.as_slice(), 0, "file a again")?;
    delta("file a", &a0, &query(&a)?, (1, 1, 0, 0))?;
    delta("file b", &b0, &query(&b)?, (0, 1, 0, 0))?;
    pins_are(
        p0 + 2 * per,
        Duration::ZERO,
        "one buffer cached by two files",
    )?;
    drop(a);
    pins_are(p0 + per, INVALIDATE, "after closing file a")?;
    ctx.rng.fill(buf.as_mut_slice());
    h2c(&b, buf.as_slice(), 0, "file b after a closed")?;
    fpga_holds(&verify, 0, buf.as_slice(), "file b after a closed")?;
    delta("file b after a closed", &b0, &query(&b)?, (1, 1, 0, 0))?;
    drop(b);
    pins_are(p0, INVALIDATE, "after closing both files")
}

/// A forked child using the inherited file at the parent's address is in another address space: a miss,
/// its own copy. Whether or not fork's copy-on-write drops the parent's buffer, the parent's new bytes
/// reach the device and C2H lands in the memory the parent sees; the child's buffers go with its exit and
/// close leaves nothing pinned.
fn fork_child(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    const CHILD_OFF: usize = 32 << 10;
    let p0 = kstat::pinned_pages()?;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let mut b = host(LEN, &mut ctx.rng)?;
    let a = b.as_slice().to_vec();
    let child_pattern = random(LEN, &mut ctx.rng);
    h2c(&dev, b.as_slice(), 0, "parent")?;
    h2c(&dev, b.as_slice(), 0, "parent again")?;
    let s0 = query(&dev)?;
    ensure!(
        (s0.hits, s0.misses) == (1, 1),
        "parent before fork: {}",
        describe(&s0)
    );
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out array of two ints.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    ensure!(rc == 0, "pipe: {}", io::Error::last_os_error());
    // SAFETY: the suite is single-threaded here (no test leaves threads behind), so the child may run
    // ordinary Rust; it never returns into the suite: it ends in _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            child_uses_inherited_file(&dev, &mut b, &a, &child_pattern, CHILD_OFF)
        }));
        let msg = match r {
            Ok(Ok(())) => String::new(),
            Ok(Err(e)) => e,
            Err(_) => "child panicked".into(),
        };
        // SAFETY: writes our own bytes to our pipe, then ends the child without the parent's destructors.
        unsafe {
            libc::write(fds[1], msg.as_ptr().cast(), msg.len());
            libc::_exit(i32::from(!msg.is_empty()));
        }
    }
    // SAFETY: the write end belongs to the child now; the read end becomes a File we own.
    let mut pipe = unsafe {
        libc::close(fds[1]);
        std::fs::File::from_raw_fd(fds[0])
    };
    let status = reap(pid, Duration::from_secs(60))?;
    let mut msg = String::new();
    let _ = pipe.read_to_string(&mut msg);
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child (status {status:#x}): {msg}"
    );
    compare(
        "the parent's buffer after the child wrote its copy",
        &a,
        b.as_slice(),
    )?;
    let d = random(LEN, &mut ctx.rng);
    b.as_mut_slice().copy_from_slice(&d);
    h2c(&dev, b.as_slice(), 0, "parent after fork")?;
    fpga_holds(&verify, 0, &d, "parent's H2C after fork")?;
    c2h(&dev, b.as_mut_slice(), CHILD_OFF, "parent after fork")?;
    compare(
        "parent's C2H of the child's data after fork",
        &child_pattern,
        b.as_slice(),
    )?;
    // The child cached two buffers (its copy of `b` and its own); its exit drops them.
    settle(&dev, "the child's buffers dropped after its exit", |s| {
        s.entries == 1 && s.invalidations >= s0.invalidations + 2
    })?;
    pins_are(
        p0 + pages(b.addr(), LEN),
        INVALIDATE,
        "the parent's buffer cached, the child's gone",
    )?;
    drop(dev);
    pins_are(p0, INVALIDATE, "after close")
}

/// The child's side of `fork_child`.
fn child_uses_inherited_file(
    dev: &Device,
    b: &mut Mapping,
    a: &[u8],
    pattern: &[u8],
    off: usize,
) -> TestResult {
    let s0 = query(dev)?;
    h2c(dev, b.as_slice(), off, "child, the parent's address")?;
    let s1 = query(dev)?;
    delta(
        "child's first H2C at the parent's cached address (another address space)",
        &s0,
        &s1,
        (0, 1, ANY, 0),
    )?;
    let mut d = ctx_err("mmap", Mapping::new(b.len(), RW))?;
    c2h(dev, d.as_mut_slice(), off, "child")?;
    compare("child: its copy of the parent's data", a, d.as_slice())?;
    b.as_mut_slice().copy_from_slice(pattern);
    h2c(dev, b.as_slice(), off, "child, new bytes")?;
    c2h(dev, d.as_mut_slice(), off, "child")?;
    compare("child: its new bytes", pattern, d.as_slice())
}

/// waitpid with a limit; kills the child past it.
fn reap(pid: libc::pid_t, limit: Duration) -> Result<libc::c_int, String> {
    let until = Instant::now() + limit;
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Ok(status);
        }
        if r < 0 {
            return Err(format!("waitpid: {}", io::Error::last_os_error()));
        }
        if Instant::now() > until {
            // SAFETY: our own child, not reaped yet.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!("child still running after {} s", limit.as_secs()));
        }
        thread::sleep(Duration::from_millis(10));
    }
}

// ---- concurrency ----

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
fn threads(ctx: &mut Ctx, dur: Duration) -> TestResult {
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
    super::first_failure(&results)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_behind_the_capability() {
        let mut v = Vec::new();
        register(&mut v);
        for t in &v {
            assert!(t.name.starts_with("regcache::"), "{}", t.name);
            assert!(!t.extended, "{}", t.name);
            // Only the capability check itself runs on drivers without the cache.
            let want = match t.name.as_str() {
                "regcache::cap_matches_ioctl" => Needs::Nothing,
                "regcache::surface_memory_is_not_cached" => Needs::JetsonRegCache,
                _ => Needs::RegCache,
            };
            assert_eq!(t.needs, want, "{}", t.name);
        }
    }

    #[test]
    fn page_counts() {
        assert_eq!(pages(0, 1), 1);
        assert_eq!(pages(0, 4096), 1);
        assert_eq!(pages(1, 4096), 2);
        assert_eq!(pages(4095, 2), 2);
        assert_eq!(pages(8192, 65536), 16);
        assert_eq!(pages(100, 5000), 2);
    }

    #[test]
    fn delta_and_consistency() {
        let a = RegCache {
            max_entries: 4,
            capacity: 64,
            max_bytes: 100,
            ..Default::default()
        };
        let b = RegCache {
            hits: 2,
            misses: 1,
            entries: 1,
            bytes: 10,
            ..a
        };
        assert!(delta("x", &a, &b, (2, 1, 0, 0)).is_ok());
        assert!(delta("x", &a, &b, (1, 1, 0, 0)).is_err());
        let over = RegCache { entries: 5, ..b };
        assert!(consistent("x", &over).is_err());
        let bytes_without_entries = RegCache { entries: 0, ..b };
        assert!(consistent("x", &bytes_without_entries).is_err());
        let reserved = RegCache {
            reserved: [0, 0, 1, 0],
            ..b
        };
        assert!(consistent("x", &reserved).is_err());
    }
}
