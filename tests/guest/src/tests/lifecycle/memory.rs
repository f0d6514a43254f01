//! A surface's memory going away under its handle (munmap), and files closed with surfaces pinned.

use super::*;

/// Unmapping a pinned surface kills its handle: DMA and UNPIN are EINVAL, its pages are unpinned. The
/// dead pin no longer blocks its range (new memory at that address pins), and other handles, both files
/// and the device go on working.
pub(super) fn munmap_pinned(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    quiesce(ctx.dev)?;
    let a = open_uncached(ctx)?;
    let b = open_uncached(ctx)?;
    let mut victim = surface(f, 1 << 20)?;
    let mut keep = surface(f, 1 << 20)?;
    let mut other = surface(f, 1 << 20)?;
    let pages = (victim.len() / PAGE) as i64;
    let p0 = kstat::pinned_pages()?;
    let hv = pin(&a, &victim)?;
    let hk = pin(&a, &keep)?;
    let ho = pin(&b, &other)?;
    pins_are(p0 + 3 * pages, Duration::ZERO, "after pinning 3 surfaces")?;
    surface_to_host(&a, &mut ctx.rng, &mut victim, hv, 4096, 0)?;
    let (va, len) = (victim.va(), victim.len());
    ctx_err("munmap of the pinned surface", victim.unmap())?;
    // The provider may unpin from a work item (it cannot take folio locks inside an invalidation).
    pins_are(p0 + 2 * pages, SETTLE, "after munmap of a pinned surface")?;
    dma_refuses(&a, hv.into(), &format!("handle {hv} of unmapped memory"))?;
    expect_errno(
        &format!("UNPIN_CUDA of handle {hv} of unmapped memory"),
        a.unpin_cuda(hv),
        libc::EINVAL,
    )?;
    // New memory where the victim was (mmap usually reuses the hole): the dead pin must not block it.
    let mut reborn = surface(f, len)?;
    let hr = pin(&b, &reborn).map_err(|e| {
        format!(
            "new surface at {:#x} after munmap of the pinned one at {va:#x}: {e}",
            reborn.va()
        )
    })?;
    surface_to_host(&b, &mut ctx.rng, &mut reborn, hr, 4096, 0)?;
    unpin(&b, hr)?;
    // The other surfaces, on both files, are unaffected.
    surface_to_host(&a, &mut ctx.rng, &mut keep, hk, RAM, 0)?;
    host_to_surface(&a, &mut ctx.rng, &mut keep, hk, RAM, 0)?;
    let len = keep.len();
    let mut host = crate::buf::GuardedBuf::new(len, 7);
    h2c2h_sides(
        &a,
        &mut ctx.rng,
        Side::Gpu(&mut keep, hk),
        Side::Host(&mut host),
        len,
    )?;
    host_to_surface(&b, &mut ctx.rng, &mut other, ho, RAM, 0)?;
    unpin(&a, hk)?;
    unpin(&b, ho)?;
    pins_are(p0, SETTLE, "after unpinning everything")?;
    sanity(ctx)
}

/// Closing a file with surfaces pinned releases them (the memory can be pinned and used again at once),
/// also when some of its handles already died with their memory.
pub(super) fn close_with_pins(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    quiesce(ctx.dev)?;
    let mut surfaces = (0..4)
        .map(|_| surface(f, 256 << 10))
        .collect::<Result<Vec<_>, _>>()?;
    let pages = (surfaces[0].len() / PAGE) as i64;
    let p0 = kstat::pinned_pages()?;
    {
        let d1 = open_uncached(ctx)?;
        let hs = surfaces
            .iter()
            .map(|s| pin(&d1, s))
            .collect::<Result<Vec<_>, _>>()?;
        pins_are(p0 + 4 * pages, Duration::ZERO, "after pinning 4 surfaces")?;
        surface_to_host(&d1, &mut ctx.rng, &mut surfaces[0], hs[0], 4096, 0)?;
        host_to_surface(&d1, &mut ctx.rng, &mut surfaces[3], hs[3], 4096, 0)?;
        // Closed with all four pinned.
    }
    pins_are(p0, SETTLE, "after closing the file with 4 surfaces pinned")?;
    {
        let d2 = open_uncached(ctx)?;
        let hs = surfaces
            .iter()
            .map(|s| pin(&d2, s))
            .collect::<Result<Vec<_>, _>>()?;
        for (s, &h) in surfaces.iter_mut().zip(&hs) {
            host_to_surface(&d2, &mut ctx.rng, s, h, 8192, 0)?;
        }
        // Two handles die with their memory; the file is closed with two live and two dead ones.
        ctx_err("munmap", surfaces[0].unmap())?;
        ctx_err("munmap", surfaces[1].unmap())?;
        dma_refuses(&d2, hs[0].into(), "handle of unmapped memory")?;
        surface_to_host(&d2, &mut ctx.rng, &mut surfaces[2], hs[2], 4096, 0)?;
        pins_are(
            p0 + 2 * pages,
            SETTLE,
            "after munmap of 2 of 4 pinned surfaces",
        )?;
    }
    pins_are(
        p0,
        SETTLE,
        "after closing the file with 2 live and 2 dead handles",
    )?;
    // The CPU still owns intact memory, and a new file pins it again.
    let d3 = open_uncached(ctx)?;
    for s in &mut surfaces[2..] {
        s.check_guards()?;
        let h = pin(&d3, s)?;
        surface_to_host(&d3, &mut ctx.rng, s, h, RAM, 0)?;
        unpin(&d3, h)?;
    }
    drop(d3);
    sanity(ctx)
}
