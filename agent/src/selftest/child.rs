//! What the `gdr-selftest` child does: two surfaces (CUDA pinned memory when it can, else plain host
//! memory, and it says which), pattern fill, PIN_CUDA, H2C then C2H through the card's RAM, verify (on the
//! GPU for CUDA memory), UNPIN before the memory is freed.

use std::path::Path;
use std::time::Instant;

use gdr_client::{Device, Transfer};

use super::{Measurement, Mismatch, gpu, pattern};

/// Runs the test on `node` with `bytes` per direction; `memory` is `auto`, `cuda` or `host`.
pub fn run(node: &Path, bytes: u64, memory: &str) -> Result<Measurement, String> {
    let start = Instant::now();
    let dev = Device::open_path(node).map_err(|e| format!("{}: {e}", node.display()))?;
    // Before anything moves: never over a holder's data. Ours until this process exits.
    if !dev.claim_ram().map_err(|e| e.to_string())? {
        return Err(super::BUSY.into());
    }
    let words = usize::try_from(bytes / 4).map_err(|_| "size too large".to_string())?;
    let why_not_cuda = match memory {
        "host" => Some("host memory requested".to_string()),
        "cuda" | "auto" => gpu::unavailable(),
        other => return Err(format!("unknown memory kind '{other}'")),
    };
    let mut m = match why_not_cuda {
        None => cuda(&dev, words)?,
        Some(why) if memory == "cuda" => return Err(format!("CUDA memory required: {why}")),
        Some(why) => host(&dev, words, why)?,
    };
    m.duration_us = start.elapsed().as_micros() as u64;
    Ok(m)
}

fn host(dev: &Device, words: usize, why: String) -> Result<Measurement, String> {
    let mut src = vec![0u32; words];
    let mut dst = vec![0u32; words];
    pattern::fill(&mut src, &mut dst);
    let h2c = dev.h2c(as_bytes(&src), 0).map_err(|e| e.to_string())?;
    let c2h = dev
        .c2h(as_bytes_mut(&mut dst), 0)
        .map_err(|e| e.to_string())?;
    let (mismatches, first_mismatch) = pattern::verify(&dst);
    Ok(measurement(
        "host",
        why,
        h2c,
        c2h,
        mismatches,
        first_mismatch,
    ))
}

fn cuda(dev: &Device, words: usize) -> Result<Measurement, String> {
    let g = gpu::Gpu::new()?;
    let n = u32::try_from(words).map_err(|_| "size too large".to_string())?;
    let src = g.alloc_host(words)?;
    let dst = g.alloc_host(words)?;
    let (ds, dd) = (g.device_ptr(&src)?, g.device_ptr(&dst)?);
    g.fill(ds, dd, n)?;
    g.sync_memops(ds)?;
    g.sync_memops(dd)?;
    let bytes = (words * 4) as u64;
    let hs = dev
        .pin_cuda(src.ptr as u64, bytes)
        .map_err(|e| e.to_string())?;
    let hd = match dev.pin_cuda(dst.ptr as u64, bytes) {
        Ok(h) => h,
        Err(e) => {
            let _ = dev.unpin_cuda(hs);
            return Err(e.to_string());
        }
    };
    let moved = dev
        .h2c_cuda(hs, bytes, 0)
        .and_then(|h2c| Ok((h2c, dev.c2h_cuda(hd, bytes, 0)?)));
    // Unpin before the memory can be freed, whatever happened (else nvidia_p2p's free callback fires).
    let unpinned = dev.unpin_cuda(hs).and(dev.unpin_cuda(hd));
    let (h2c, c2h) = moved.map_err(|e| e.to_string())?;
    unpinned.map_err(|e| e.to_string())?;
    let (count, first) = g.verify(dd, n)?;
    let first_mismatch = match first {
        Some(i) => {
            // SAFETY: `i` < n words of the live pinned buffer `dst`; the GPU is idle (verify synchronised).
            let got = unsafe { *dst.ptr.add(i as usize) };
            Some(Mismatch {
                offset: u64::from(i) * 4,
                expected: pattern::word(i as usize),
                got,
            })
        }
        None => None,
    };
    Ok(measurement(
        "cuda",
        g.name.clone(),
        h2c,
        c2h,
        count.into(),
        first_mismatch,
    ))
}

fn measurement(
    memory: &str,
    note: String,
    h2c: Transfer,
    c2h: Transfer,
    mismatches: u64,
    first_mismatch: Option<Mismatch>,
) -> Measurement {
    Measurement {
        memory: memory.into(),
        memory_note: note,
        bytes: h2c.bytes,
        h2c_mbps: h2c.mbps(),
        c2h_mbps: c2h.mbps(),
        duration_us: 0,
        mismatches,
        first_mismatch,
    }
}

fn as_bytes(w: &[u32]) -> &[u8] {
    // SAFETY: u32 has no padding; the byte view covers exactly the same memory.
    unsafe { std::slice::from_raw_parts(w.as_ptr().cast(), w.len() * 4) }
}

fn as_bytes_mut(w: &mut [u32]) -> &mut [u8] {
    // SAFETY: as above; every byte pattern is a valid u32.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr().cast(), w.len() * 4) }
}
