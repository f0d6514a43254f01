//! `gdr-selftest --gpu-check`: the CUDA part of the self-test on a real GPU without a card, with the
//! device's own memory bandwidth measured in the same run as the baseline. Run by `agent/gpu/gpu-check.sh`.
//!
//! Proves: the PTX loads (JIT) on this driver; fill and verify agree with each other and with the host's
//! pattern; verify finds planted errors at the right offset, in every lane of its 16-byte loads and in
//! the word-by-word tail (so a broken verify cannot pass); pinned host
//! memory allocated as the self-test does (flags 0) works with the kernels.

use std::fmt::Write;

use super::gpu::{Gpu, GpuError, unavailable};
use super::pattern;

fn best(runs: usize, mut f: impl FnMut() -> Result<f64, GpuError>) -> Result<f64, GpuError> {
    let mut b = f64::MAX;
    for _ in 0..runs {
        b = b.min(f()?);
    }
    Ok(b)
}

fn check(ok: bool, what: &str) -> Result<(), GpuError> {
    if ok {
        Ok(())
    } else {
        Err(GpuError::Check(what.to_string()))
    }
}

/// Runs the check on `mib` MiB of device memory; returns the report text.
pub fn run(mib: usize) -> Result<String, GpuError> {
    if let Some(why) = unavailable() {
        return Err(why.into());
    }
    let g = Gpu::new()?;
    let mut r = String::new();
    let _ = writeln!(
        r,
        "GPU: {} (PTX JIT-compiled from ptx/pattern.ptx, ISA 6.4, sm_50)",
        g.name
    );
    let words = mib * 256 * 1024;
    let n = u32::try_from(words).map_err(|_| GpuError::TooLarge)?;
    let bytes = words * 4;
    let a = g.alloc_device(words)?;
    let b = g.alloc_device(words)?;

    let t_fill = best(5, || g.time(|| g.fill(a, b, n)))?;
    let (bad, _) = g.verify(a, n)?;
    check(bad == 0, "the pattern fill verifies")?;
    let (bad, first) = g.verify(b, n)?;
    check(
        bad == n && first == Some(0),
        "verify fails every word of the complement",
    )?;
    let t_verify = best(5, || g.time(|| g.verify(a, n).map(|_| ())))?;
    let t_copy = best(5, || g.time(|| g.copy(b, a, bytes)))?;
    let (bad, _) = g.verify(b, n)?;
    check(bad == 0, "the copy verifies")?;

    // Pinned host memory as the self-test allocates it: one 1024x1024 surface, an error planted.
    let host_words = 1024 * 1024;
    let src = g.alloc_host(host_words)?;
    let dst = g.alloc_host(host_words)?;
    let (ds, dd) = (g.device_ptr(&src)?, g.device_ptr(&dst)?);
    g.fill(ds, dd, host_words as u32)?;
    g.sync_memops(ds)?;
    // SAFETY: both are live pinned allocations of host_words u32; the GPU is idle (fill synchronised).
    let (s, d) = unsafe {
        (
            std::slice::from_raw_parts(src.ptr, host_words),
            std::slice::from_raw_parts_mut(dst.ptr, host_words),
        )
    };
    check(
        pattern::verify(s).0 == 0,
        "the GPU's pattern equals the host's (pattern.rs)",
    )?;
    d.copy_from_slice(s);
    // One error in each of the four words a thread loads at once, and one in the last thread's words
    // checked one by one (n not a multiple of four).
    for i in [777_776, 777_777, 777_778, 777_779, host_words - 2] {
        d[i] ^= 0x10;
    }
    let (bad, first) = g.verify(dd, host_words as u32 - 1)?;
    check(
        bad == 5 && first == Some(777_776),
        "verify on pinned host memory finds the five planted errors",
    )?;

    let gbs = |bytes: f64, secs: f64| bytes / secs / 1e9;
    let verify_gbs = gbs(bytes as f64, t_verify);
    let copy_gbs = gbs(2.0 * bytes as f64, t_copy);
    let _ = writeln!(r, "buffer: {mib} MiB of device memory; best of 5 runs each");
    let _ = writeln!(
        r,
        "verify kernel (reads every word):      {verify_gbs:8.1} GB/s"
    );
    let _ = writeln!(
        r,
        "fill kernel (writes two buffers):      {:8.1} GB/s",
        gbs(2.0 * bytes as f64, t_fill)
    );
    let _ = writeln!(
        r,
        "device memory baseline (cuMemcpyDtoD): {copy_gbs:8.1} GB/s (read + write)"
    );
    let _ = writeln!(
        r,
        "verify / baseline:                     {:8.2}",
        verify_gbs / copy_gbs
    );
    let _ = writeln!(
        r,
        "checks: fill/verify agree, complement fails, planted errors found (4 lanes + tail): ok"
    );
    Ok(r)
}
