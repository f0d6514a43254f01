//! The ioctl, its defaults, and reuse: hits pin nothing, the cache off pins every time.

use super::*;

/// CAP_REG_CACHE and the ioctl agree: with the bit QUERY works (and the ABI is 1.1 or later), without it
/// the ioctl is unknown (ENOTTY).
pub(super) fn cap_matches_ioctl(ctx: &mut Ctx) -> TestResult {
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
pub(super) fn defaults_and_query(ctx: &mut Ctx) -> TestResult {
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

/// The first use of a buffer pins it for once (uncached), the second registers it (a miss, exactly its
/// pages); using it again, a part of it, in the other direction or in an H2C2H pins nothing (hits), and
/// every byte still arrives.
pub(super) fn reuse_hits(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut src = host(RAM, &mut ctx.rng)?;
    let mut dst = host(RAM, &mut ctx.rng)?;
    let per = pages(src.addr(), RAM);
    let s = query(&dev)?;
    used_once(&dev, src.as_slice(), "source")?;
    used_once(&dev, dst.as_slice(), "destination")?;
    pins_are(p0, Duration::ZERO, "after the first use of two buffers")?;
    let s0 = query(&dev)?;
    delta("first use of two buffers", &s, &s0, (0, 0, 0, 2))?;
    holds("after the first use", &s0, 0, 0)?;
    let acq0 = kstat::pins_acquired()?;
    h2c(&dev, src.as_slice(), 0, "second H2C")?;
    c2h(&dev, dst.as_mut_slice(), 0, "second C2H")?;
    compare("second round trip", src.as_slice(), dst.as_slice())?;
    let s1 = query(&dev)?;
    delta("second use of two buffers", &s0, &s1, (0, 2, 0, 0))?;
    holds("after the second use", &s1, 2, 2 * RAM as u64)?;
    let acq1 = kstat::pins_acquired()?;
    ensure!(
        (acq1 - acq0) as i64 == 2 * per,
        "the second use of two {RAM}-byte buffers pinned {} pages, expected {}",
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
pub(super) fn cache_off(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut src = host(RAM, &mut ctx.rng)?;
    let mut dst = host(RAM, &mut ctx.rng)?;
    let per = pages(src.addr(), RAM);
    used_once(&dev, src.as_slice(), "source")?;
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
    // On again: the buffer was used before (with the cache off too), so the next miss caches it.
    set_limits(&dev, DEFAULT_ENTRIES, DEFAULT_BYTES)?;
    h2c(&dev, src.as_slice(), 0, "cache on again")?;
    h2c(&dev, src.as_slice(), 0, "cache on again, next use")?;
    let s3 = query(&dev)?;
    delta("cache on again", &s2, &s3, (1, 1, 0, 0))?;
    pins_are(p0 + per, Duration::ZERO, "one buffer cached again")
}
