//! Memory that changes under a cached buffer: the device reads and writes what the address maps now.

use super::*;

/// madvise(MADV_DONTNEED) gives the cached address fresh zeroed pages: the next H2C must send those (not
/// the old pinned pages), then what the program writes there; the old pages are unpinned. Once with the
/// H2C right after the madvise (racing the invalidation work), once after the work dropped the buffer.
pub(super) fn dontneed_h2c(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(RAM, &mut ctx.rng)?;
    let per = pages(b.addr(), RAM);
    used_once(&dev, b.as_slice(), "the buffer")?;
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
pub(super) fn dontneed_c2h(ctx: &mut Ctx) -> TestResult {
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(RAM, &mut ctx.rng)?;
    let per = pages(b.addr(), RAM);
    used_once(&dev, b.as_slice(), "the buffer")?;
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
pub(super) fn remap_fixed(ctx: &mut Ctx) -> TestResult {
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
        used_once(&dev, b.as_slice(), how)?;
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
pub(super) fn munmap_and_mremap(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let p0 = kstat::pinned_pages()?;
    let mut b = host(LEN, &mut ctx.rng)?;
    used_once(&dev, b.as_slice(), "the buffer")?;
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
    used_once(&dev, m.as_slice(), "the new buffer")?;
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
    used_once(&dev, m.as_slice(), "the new address")?;
    h2c(&verify, &vec![0u8; LEN], 0, "clearing FPGA RAM")?;
    let s2 = query(&dev)?;
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
pub(super) fn mprotect_readonly(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 16 << 10;
    let dev = open_cached(ctx)?;
    let verify = open_uncached(ctx)?;
    let mut b = host(LEN, &mut ctx.rng)?;
    used_once(&dev, b.as_slice(), "the buffer")?;
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
pub(super) fn readonly_mapping(ctx: &mut Ctx) -> TestResult {
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
    used_once(&dev, rw.as_slice(), "the destination")?;
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
