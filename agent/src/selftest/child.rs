//! What the `gdr-selftest` child does: two surfaces (CUDA pinned memory when it can, else plain host
//! memory, and it says which), pattern fill, H2C then C2H through the card's RAM, verify (on the GPU for
//! CUDA memory). CUDA memory reaches the card on the path `gdr_client::gpu_path::choose` picks from CUDA's
//! attributes and the driver's capabilities: PIN_CUDA (nv-p2p, unpinned before the memory is freed) or the
//! host DMA path on `cuMemHostAlloc` memory (pinned host: Thor, Orin after CUDA 14).

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cudarc::driver::sys;
use gdr_client::gpu_path::{self, DriverPaths, GpuPath};
use gdr_client::{CudaHandle, Device, Error, Transfer};
use picoevb_abi::CAP_CUDA_JETSON;

use super::gpu::{GpuError, Unavailable};
use super::{Measurement, Mismatch, gpu, gpupaths, pattern};
use crate::config::Memory;

/// Why the self-test child measured nothing.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    #[error("{}: {source}", node.display())]
    Open { node: PathBuf, source: Error },
    /// An ioctl on the card failed (what was attempted and the errno).
    #[error(transparent)]
    Card(#[from] Error),
    /// An application holds the card RAM (see [`super::BUSY`]).
    #[error("{}", super::BUSY)]
    Busy,
    #[error("size too large")]
    TooLarge,
    #[error("CUDA memory required: {0}")]
    CudaRequired(Unavailable),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// Runs the test on `node` with `bytes` per direction from and to `memory`.
pub fn run(node: &Path, bytes: u64, memory: Memory) -> Result<Measurement, ChildError> {
    let start = Instant::now();
    let dev = Device::open_path(node).map_err(|source| ChildError::Open {
        node: node.to_path_buf(),
        source,
    })?;
    // Before anything moves: never over a holder's data. Ours until this process exits.
    if !dev.claim_ram()? {
        return Err(ChildError::Busy);
    }
    let words = usize::try_from(bytes / 4).map_err(|_| ChildError::TooLarge)?;
    let why_not_cuda = match memory {
        Memory::Host => Some("host memory requested".to_string()),
        Memory::Cuda => match gpu::unavailable() {
            Some(why) => return Err(ChildError::CudaRequired(why)),
            None => None,
        },
        Memory::Auto => gpu::unavailable().map(|why| why.to_string()),
    };
    let mut m = match why_not_cuda {
        None => cuda(&dev, words)?,
        Some(why) => host(&dev, words, why)?,
    };
    m.duration_us = start.elapsed().as_micros() as u64;
    Ok(m)
}

fn host(dev: &Device, words: usize, why: String) -> Result<Measurement, ChildError> {
    let mut src = vec![0u32; words];
    let mut dst = vec![0u32; words];
    pattern::fill(&mut src, &mut dst);
    let h2c = dev.h2c(as_bytes(&src), 0)?;
    let c2h = dev.c2h(as_bytes_mut(&mut dst), 0)?;
    let (mismatches, first_mismatch) = pattern::verify(&dst);
    Ok(measurement(
        "host",
        "host",
        why,
        h2c,
        c2h,
        mismatches,
        first_mismatch,
    ))
}

/// What the driver can pin. A driver without ABI_INFO is NVIDIA's reference, which has Jetson nv-p2p.
fn driver_paths(dev: &Device) -> Result<DriverPaths, Error> {
    match dev.abi_info() {
        Ok(info) => Ok(DriverPaths::from_caps(info.caps)),
        Err(Error::Os { errno, .. }) if errno == libc::ENOTTY || errno == libc::EINVAL => {
            Ok(DriverPaths::from_caps(CAP_CUDA_JETSON))
        }
        Err(e) => Err(e),
    }
}

/// CUDA memory through the card (`words` u32 each way) on the path CUDA and the driver support, verified
/// on the GPU; `gdrctl validate` runs it too. Call [`gpu::unavailable`] first.
pub fn cuda(dev: &Device, words: usize) -> Result<Measurement, ChildError> {
    let g = gpu::Gpu::new()?;
    let driver = driver_paths(dev)?;
    let path = gpu_path::choose(gpupaths::attrs()?, driver);
    match path {
        GpuPath::NvP2pTegra | GpuPath::NvP2pDgpu => p2p(dev, &g, words, path),
        GpuPath::PinnedHost if driver.host_surface => p2p(dev, &g, words, path),
        GpuPath::PinnedHost => pinned_host(dev, &g, words),
        GpuPath::DmaBuf => dma_buf(dev, &g, words),
    }
}

/// nv-p2p (PIN_CUDA) or pinned host memory as surfaces (PIN_HOST): both buffers pinned, moved through
/// their handles.
fn p2p(dev: &Device, g: &gpu::Gpu, words: usize, path: GpuPath) -> Result<Measurement, ChildError> {
    let pin = |va, len| {
        if path == GpuPath::PinnedHost {
            dev.pin_host(va, len)
        } else {
            dev.pin_cuda(va, len)
        }
    };
    let n = u32::try_from(words).map_err(|_| ChildError::TooLarge)?;
    let src = g.alloc_host(words)?;
    let dst = g.alloc_host(words)?;
    let (ds, dd) = (g.device_ptr(&src)?, g.device_ptr(&dst)?);
    g.fill(ds, dd, n)?;
    g.sync_memops(ds)?;
    g.sync_memops(dd)?;
    let bytes = (words * 4) as u64;
    let (h2c, c2h) = through_surfaces(dev, bytes, pin(src.ptr as u64, bytes), || {
        pin(dst.ptr as u64, bytes)
    })?;
    verified(g, dd, n, path, h2c, c2h)
}

/// H2C from surface `src` and C2H into the one `dst` takes (PIN_CUDA, PIN_HOST or IMPORT_DMABUF handles);
/// both are unpinned before this returns, whatever happened, so before the memory can be freed (else
/// nvidia_p2p's free callback fires).
fn through_surfaces(
    dev: &Device,
    bytes: u64,
    src: Result<CudaHandle, Error>,
    dst: impl FnOnce() -> Result<CudaHandle, Error>,
) -> Result<(Transfer, Transfer), ChildError> {
    let hs = src?;
    let hd = match dst() {
        Ok(h) => h,
        Err(e) => {
            let _ = dev.unpin_cuda(hs);
            return Err(e.into());
        }
    };
    let moved = dev
        .h2c_cuda(hs, bytes, 0)
        .and_then(|h2c| Ok((h2c, dev.c2h_cuda(hd, bytes, 0)?)));
    let unpinned = dev.unpin_cuda(hs).and(dev.unpin_cuda(hd));
    let moved = moved?;
    unpinned?;
    Ok(moved)
}

/// dma-buf: device memory (`cuMemAlloc`, whole host pages) exported by CUDA and imported by the driver
/// (IMPORT_DMABUF), moved through the imports' handles, verified on the GPU.
fn dma_buf(dev: &Device, g: &gpu::Gpu, words: usize) -> Result<Measurement, ChildError> {
    let n = u32::try_from(words).map_err(|_| ChildError::TooLarge)?;
    let bytes = (words * 4) as u64;
    // The export and the import take whole host pages (docs/driver.md, the alignment contract).
    let page = gpupaths::page_size();
    let span = bytes.div_ceil(page) * page;
    let alloc_words = usize::try_from(span / 4).map_err(|_| ChildError::TooLarge)?;
    let (ds, dd) = (g.alloc_device(alloc_words)?, g.alloc_device(alloc_words)?);
    g.fill(ds, dd, n)?;
    let export = |p| gpupaths::export_dmabuf(p, span as usize);
    let (fs, fd) = (export(ds)?, export(dd)?);
    let import = |f: &std::os::fd::OwnedFd| dev.import_dmabuf(f.as_fd(), 0, span).map(|(h, _)| h);
    let (h2c, c2h) = through_surfaces(dev, bytes, import(&fs), || import(&fd))?;
    verified(g, dd, n, GpuPath::DmaBuf, h2c, c2h)
}

/// Pinned host with a driver older than PIN_HOST: `cuMemHostAlloc` memory, filled by the GPU, moved by the
/// host DMA path (the driver pins it as any host memory), verified by the GPU.
fn pinned_host(dev: &Device, g: &gpu::Gpu, words: usize) -> Result<Measurement, ChildError> {
    let n = u32::try_from(words).map_err(|_| ChildError::TooLarge)?;
    let src = g.alloc_host(words)?;
    let dst = g.alloc_host(words)?;
    let (ds, dd) = (g.device_ptr(&src)?, g.device_ptr(&dst)?);
    g.fill(ds, dd, n)?;
    // SAFETY: both are live cuMemHostAlloc allocations of `words` u32, distinct; the GPU is idle (fill
    // synchronised the context) and touches them again only in `verified`, after these borrows end.
    let (s, d) = unsafe {
        (
            std::slice::from_raw_parts(src.ptr.cast::<u8>(), words * 4),
            std::slice::from_raw_parts_mut(dst.ptr.cast::<u8>(), words * 4),
        )
    };
    let h2c = dev.h2c(s, 0)?;
    let c2h = dev.c2h(d, 0)?;
    verified(g, dd, n, GpuPath::PinnedHost, h2c, c2h)
}

/// Verifies `dst` (device address of the destination: device memory, or pinned host memory's mapping) on
/// the GPU and builds the measurement.
fn verified(
    g: &gpu::Gpu,
    dst: sys::CUdeviceptr,
    n: u32,
    path: GpuPath,
    h2c: Transfer,
    c2h: Transfer,
) -> Result<Measurement, ChildError> {
    let (count, first) = g.verify(dst, n)?;
    let first_mismatch = match first {
        Some(i) => Some(Mismatch {
            offset: u64::from(i) * 4,
            expected: pattern::word(i as usize),
            got: g.read_word(dst + u64::from(i) * 4)?,
        }),
        None => None,
    };
    Ok(measurement(
        "cuda",
        path.name(),
        g.name.clone(),
        h2c,
        c2h,
        count.into(),
        first_mismatch,
    ))
}

fn measurement(
    memory: &str,
    path: &str,
    note: String,
    h2c: Transfer,
    c2h: Transfer,
    mismatches: u64,
    first_mismatch: Option<Mismatch>,
) -> Measurement {
    Measurement {
        memory: memory.into(),
        path: path.into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_that_does_not_open_is_named() {
        let e = run(Path::new("/nonexistent/picoevb0"), 4096, Memory::Host).unwrap_err();
        assert!(matches!(e, ChildError::Open { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("/nonexistent/picoevb0: open: No such file or directory"),
            "{e}"
        );
        assert_eq!(ChildError::Busy.to_string(), super::super::BUSY);
    }
}
