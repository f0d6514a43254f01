//! GPU surfaces and cached host memory: one long-lived mapping per page.

use super::*;

/// Memory pinned as a GPU surface keeps that one long-lived mapping (the DMA API does not support two):
/// PIN_CUDA drops the host buffers cached on its pages, in every file, and host DMA on the surface's memory
/// is pinned for once only, moving the right bytes; after UNPIN the memory is cached again.
pub(super) fn surface_memory(ctx: &mut Ctx) -> TestResult {
    let f = super::super::cuda::flavour(ctx.dev)?;
    let (a, b) = (open_cached(ctx)?, open_cached(ctx)?);
    let verify = open_uncached(ctx)?;
    let mut s = super::super::cuda::surface(f, 2 * RAM)?;
    ctx.rng.fill(s.as_mut_slice());
    used_once(&a, &s.as_slice()[..RAM], "the first half")?;
    used_once(&b, &s.as_slice()[RAM..], "the second half")?;
    h2c(&a, &s.as_slice()[..RAM], 0, "host H2C from the first half")?;
    h2c(&b, &s.as_slice()[RAM..], 0, "host H2C from the second half")?;
    let (a0, b0) = (query(&a)?, query(&b)?);
    holds("file a before PIN_CUDA", &a0, 1, RAM as u64)?;
    holds("file b before PIN_CUDA", &b0, 1, RAM as u64)?;
    let h = super::super::cuda::pin(&a, &s)?;
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
    super::super::cuda::unpin(&a, h)?;
    h2c(&b, &s.as_slice()[RAM..], 0, "host H2C after UNPIN_CUDA")?;
    delta("host DMA after UNPIN_CUDA", &b2, &query(&b)?, (0, 1, 0, 0))
}
