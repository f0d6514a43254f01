//! Limits, LRU order, merging of ranges and IOC_REG_CACHE argument checks.

use super::*;

/// What one request of a script must do to the counters.
#[derive(Clone, Copy)]
enum Want {
    Hit,
    /// Cached, evicting this many.
    Miss(u64),
    /// The first use of a buffer (here in a full cache): pinned for once, nothing evicted.
    Once,
}

/// max_entries 4 over six buffers: the least recently used goes first, a hit makes a buffer recent, and a
/// buffer is cached (in a full cache evicting one) only on its second use.
pub(super) fn lru_order(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 8 << 10;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    set_limits(&dev, 4, DEFAULT_BYTES)?;
    let mut bufs = (0..6)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, b) in bufs[..4].iter().enumerate() {
        used_once(&dev, b.as_slice(), &format!("buffer {i}"))?;
    }
    // (buffer, hit, evictions): LRU order in the comments, oldest first; 0-3 used once before.
    let script: [(usize, Want); 19] = [
        (0, Want::Miss(0)),
        (1, Want::Miss(0)),
        (2, Want::Miss(0)),
        (3, Want::Miss(0)), // 0 1 2 3
        (4, Want::Once),    // full, and 4 never used: 0 1 2 3
        (4, Want::Miss(1)), // 1 2 3 4
        (5, Want::Once),
        (5, Want::Miss(1)), // 2 3 4 5
        (2, Want::Hit),     // 3 4 5 2
        (0, Want::Miss(1)), // 4 5 2 0: 3 went, not 2, because the hit made 2 recent; 0 was used before
        (2, Want::Hit),     // 4 5 0 2
        (4, Want::Hit),     // 5 0 2 4
        (5, Want::Hit),     // 0 2 4 5
        (3, Want::Miss(1)), // 2 4 5 3
        (1, Want::Miss(1)), // 4 5 3 1
        (4, Want::Hit),
        (5, Want::Hit),
        (3, Want::Hit),
        (1, Want::Hit),
    ];
    for (step, &(i, kind)) in script.iter().enumerate() {
        ctx.rng.fill(bufs[i].as_mut_slice());
        let before = query(&dev)?;
        let what = format!("step {step}: buffer {i}");
        h2c(&dev, bufs[i].as_slice(), i * LEN, &what)?;
        let after = query(&dev)?;
        let (want, name) = match kind {
            Want::Hit => ((1, 0, 0, 0), "hit"),
            Want::Miss(ev) => ((0, 1, ev, 0), "miss"),
            Want::Once => ((0, 0, 0, 1), "first use in a full cache"),
        };
        delta(&format!("{what} ({name})"), &before, &after, want)?;
        fpga_holds(&verify, i * LEN, bufs[i].as_slice(), &what)?;
    }
    let end = query(&dev)?;
    holds("at the end", &end, 4, 4 * LEN as u64)?;
    ensure!(
        (end.hits, end.misses, end.evictions, end.uncached) == (8, 9, 5, 6),
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
/// buffer fits (on its second use: the first in a full cache is pinned for once); a buffer over the limit
/// is never cached; one of exactly the limit replaces everything.
pub(super) fn max_bytes_bound(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    const LIMIT: u64 = 3 * LEN as u64;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    set_limits(&dev, DEFAULT_ENTRIES, LIMIT)?;
    let odd = host(LEN, &mut ctx.rng)?;
    used_once(&dev, &odd.as_slice()[100..5100], "5000 bytes")?;
    let s0 = query(&dev)?;
    h2c(&dev, &odd.as_slice()[100..5100], 0, "5000 bytes")?;
    let s1 = query(&dev)?;
    delta("5000 bytes", &s0, &s1, (0, 1, 0, 0))?;
    holds("5000 bytes cached (lengths, not pages)", &s1, 1, 5000)?;
    let bufs = (0..4)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    // 5000 + 16K, + 16K, then each new one pushes the oldest out, on its second use.
    let expect: [(bool, u64, u32, u64); 4] = [
        (false, 0, 2, 5000 + LEN as u64),
        (false, 0, 3, 5000 + 2 * LEN as u64),
        (true, 1, 3, LIMIT),
        (true, 1, 3, LIMIT),
    ];
    for (i, (b, &(full, ev, entries, bytes))) in bufs.iter().zip(&expect).enumerate() {
        if full {
            once_in_full_cache(&dev, &verify, b.as_slice(), &format!("buffer {i}"))?;
        } else {
            used_once(&dev, b.as_slice(), &format!("buffer {i}"))?;
        }
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
    once_in_full_cache(
        &dev,
        &verify,
        exact.as_slice(),
        "a buffer of exactly max_bytes",
    )?;
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

/// The first use of `buf` in a full cache: pinned for once, nothing evicted, the bytes arrive.
fn once_in_full_cache(dev: &Device, verify: &Device, buf: &[u8], what: &str) -> TestResult {
    let what = format!("{what}, first use in a full cache");
    let before = query(dev)?;
    h2c(dev, buf, 0, &what)?;
    let after = query(dev)?;
    delta(&what, &before, &after, (0, 0, 0, 1))?;
    holds(&what, &after, before.entries, before.bytes)?;
    fpga_holds(verify, 0, buf, &what)
}

/// A range covering cached ones replaces them (they count as evictions) and serves their requests; a range
/// sharing a page with a cached one is cached as their union, in place of it (no page is in two cached
/// buffers of one file), and then serves both.
pub(super) fn superset(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let b = host(RAM, &mut ctx.rng)?;
    let c = host(16 << 10, &mut ctx.rng)?;
    used_once(&dev, b.as_slice(), "the whole buffer")?;
    used_once(&dev, c.as_slice(), "the second buffer")?;
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
pub(super) fn overlapping_ranges(ctx: &mut Ctx) -> TestResult {
    const N: usize = 12;
    const LEN: usize = 5000;
    const STEP: usize = 5;
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(4 * PAGE, &mut ctx.rng)?;
    let mut out = host(LEN, &mut ctx.rng)?;
    let union = LEN + STEP * (N - 1);
    used_once(&dev, b.as_slice(), "the H2C buffer")?;
    used_once(&dev, out.as_slice(), "the C2H buffer")?;
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
pub(super) fn set_limits_validation(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let b = host(8 << 10, &mut ctx.rng)?;
    used_once(&dev, b.as_slice(), "the buffer")?;
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
pub(super) fn bad_arg_pointer(ctx: &mut Ctx) -> TestResult {
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
pub(super) fn lower_limits(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 8 << 10;
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let bufs = (0..6)
        .map(|_| host(LEN, &mut ctx.rng))
        .collect::<Result<Vec<_>, _>>()?;
    let per = pages(bufs[0].addr(), LEN);
    for (i, b) in bufs.iter().enumerate() {
        used_once(&dev, b.as_slice(), &format!("buffer {i}"))?;
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
