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

mod aliases;
mod basics;
mod files;
mod invalidation;
mod lifetime;
mod limits;
mod surfaces;
mod threads;

use aliases::{
    many_addresses_one_page, many_files_one_page, pin_cuda_evicts_alias, pin_cuda_twice,
};
use basics::{cache_off, cap_matches_ioctl, defaults_and_query, reuse_hits};
use invalidation::{
    dontneed_c2h, dontneed_h2c, mprotect_readonly, munmap_and_mremap, readonly_mapping, remap_fixed,
};
use lifetime::{close_releases, fork_child, per_file};
use limits::{
    bad_arg_pointer, lower_limits, lru_order, max_bytes_bound, overlapping_ranges,
    set_limits_validation, superset,
};
use surfaces::surface_memory;
use threads::threads;

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
    v.push(
        rc(
            "regcache::shared_file_mapping_uncached",
            files::shared_file_mappings,
        )
        .needs(Needs::RegCacheWritebackFs),
    );
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
    v.push(rc(
        "regcache::one_page_many_files_cached_once",
        many_files_one_page,
    ));
    v.push(rc(
        "regcache::one_page_many_addresses_cached_once",
        many_addresses_one_page,
    ));
    v.push(rc("regcache::alias_pin_cuda_twice_ebusy", pin_cuda_twice).needs(Needs::JetsonRegCache));
    v.push(
        rc(
            "regcache::alias_pin_cuda_evicts_cached",
            pin_cuda_evicts_alias,
        )
        .needs(Needs::JetsonRegCache),
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

/// The first use of `buf` on `dev`: an uncached H2C from it (into FPGA RAM at 0, a window at a time). A
/// first use never registers a buffer; the cache remembers it, so the buffer's next use on `dev` does.
/// Tests of what a cached buffer does call it first, before the counters and pin counts they compare.
pub(crate) fn used_once(dev: &Device, buf: &[u8], what: &str) -> TestResult {
    for (i, w) in buf.chunks(RAM).enumerate() {
        h2c(dev, w, 0, &format!("{what}: first use, window {i}"))?;
    }
    Ok(())
}

/// Reads FPGA RAM through `verify` (a file with the cache off) and compares it with `want`.
fn fpga_holds(verify: &Device, off: usize, want: &[u8], what: &str) -> TestResult {
    let mut got: Vec<u8> = want.iter().map(|b| !b).collect();
    c2h(verify, &mut got, off, &format!("{what}: read back"))?;
    compare(&format!("{what}: FPGA RAM at {off:#x}"), want, &got)
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
                "regcache::surface_memory_is_not_cached"
                | "regcache::alias_pin_cuda_twice_ebusy"
                | "regcache::alias_pin_cuda_evicts_cached" => Needs::JetsonRegCache,
                "regcache::shared_file_mapping_uncached" => Needs::RegCacheWritebackFs,
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
