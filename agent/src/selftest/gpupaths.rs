//! `gdr-selftest --gpu-paths`: what a real GPU says about the three ways its memory can reach the card
//! (`gdr_client::gpu_path`), run by `agent/gpu/gpu-check.sh` on a machine without a card. It reads the
//! three attributes, asks CUDA to export dma-buf fds from `cuMemAlloc` and `cuMemHostAlloc` memory at
//! several sizes and offsets (recording which CUDA refuses and the exporter the kernel names), and runs
//! the client's path choice for each driver flavour up to the ioctl argument it would pass.
//!
//! The two entry points newer than the CUDA 11.4 bindings the agent links (`cuMemGetHandleForAddressRange`
//! and the attributes' numbers) are looked up in libcuda at run time; an older driver reports them absent.

use std::ffi::{CStr, c_void};
use std::fmt::Write;

use cudarc::driver::{result, sys};
use gdr_client::gpu_path::{self, CudaAttrs, DriverPaths, GpuPath};
use picoevb_abi::{CAP_CUDA_DGPU, CAP_CUDA_JETSON, CAP_DMABUF, CAP_HOST_SURFACE};

use super::gpu::{Gpu, GpuError, cu, unavailable};

/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`.
const DMA_BUF_FD: i32 = 1;

type GetAttr = unsafe extern "C" fn(*mut i32, i32, i32) -> i32;
type GetHandle = unsafe extern "C" fn(*mut c_void, u64, usize, i32, u64) -> i32;

/// libcuda's symbols that the 11.4 bindings lack.
struct Newer {
    get_attr: GetAttr,
    get_handle: Option<GetHandle>,
}

/// A symbol of libcuda (loaded by cudarc already), or null.
pub(super) fn cuda_sym(name: &CStr) -> *mut c_void {
    // SAFETY: dlopen of the library cudarc has already loaded (a reference count, never dropped);
    // `name` is NUL-terminated.
    unsafe {
        let lib = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW);
        if lib.is_null() {
            return std::ptr::null_mut();
        }
        libc::dlsym(lib, name.as_ptr())
    }
}

impl Newer {
    fn load() -> Result<Self, GpuError> {
        let a = cuda_sym(c"cuDeviceGetAttribute");
        if a.is_null() {
            return Err(GpuError::Missing("cuDeviceGetAttribute"));
        }
        let h = cuda_sym(c"cuMemGetHandleForAddressRange");
        // SAFETY: both symbols are CUDA driver API functions with exactly these C signatures
        // (cuda.h: CUresult (int *, CUdevice_attribute, CUdevice) and
        // CUresult (void *, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long)).
        Ok(unsafe {
            Newer {
                get_attr: std::mem::transmute::<*mut c_void, GetAttr>(a),
                get_handle: (!h.is_null())
                    .then(|| std::mem::transmute::<*mut c_void, GetHandle>(h)),
            }
        })
    }

    fn attr(&self, attr: i32) -> Result<bool, i32> {
        let mut v = 0;
        // SAFETY: a valid out pointer; device 0 exists (checked by `unavailable`).
        match unsafe { (self.get_attr)(&mut v, attr, 0) } {
            0 => Ok(v != 0),
            e => Err(e),
        }
    }

    /// Exports `[ptr, ptr + len)` as a dma-buf; the report's words: the exporter's name, or CUDA's error.
    fn export(&self, ptr: u64, len: usize) -> String {
        let Some(get) = self.get_handle else {
            return "no cuMemGetHandleForAddressRange".into();
        };
        let mut fd: i32 = -1;
        // SAFETY: the handle for DMA_BUF_FD is an int written through the pointer.
        let r = unsafe { get((&mut fd as *mut i32).cast(), ptr, len, DMA_BUF_FD, 0) };
        if r != 0 {
            return format!("refused ({})", error_name(r));
        }
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
        // SAFETY: `fd` is the dma-buf fd CUDA just returned to this process; closed once.
        unsafe { libc::close(fd) };
        let exp = info
            .lines()
            .find_map(|l| l.strip_prefix("exp_name:"))
            .map(str::trim)
            .unwrap_or("?");
        format!("ok (exporter {exp})")
    }
}

/// Exports `[ptr, ptr + len)` of device memory as a dma-buf (the self-test's dma-buf path): its fd.
pub fn export_dmabuf(ptr: sys::CUdeviceptr, len: usize) -> Result<std::os::fd::OwnedFd, GpuError> {
    let get = Newer::load()?
        .get_handle
        .ok_or(GpuError::Missing("cuMemGetHandleForAddressRange"))?;
    let mut fd: i32 = -1;
    // SAFETY: the handle for DMA_BUF_FD is an int written through the pointer.
    let r = unsafe { get((&mut fd as *mut i32).cast(), ptr, len, DMA_BUF_FD, 0) };
    if r != 0 || fd < 0 {
        return Err(GpuError::Check(format!(
            "cuMemGetHandleForAddressRange(DMA_BUF_FD) of {len} bytes: {}",
            error_name(r)
        )));
    }
    // SAFETY: CUDA just returned this fd to this process, and nothing else owns it.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// The three attributes of device 0 (an attribute this driver does not know reads as false), for the
/// self-test's choice of path. Needs a current context (`Gpu::new`).
pub fn attrs() -> Result<CudaAttrs, GpuError> {
    let n = Newer::load()?;
    Ok(CudaAttrs {
        gpu_direct_rdma: n
            .attr(gpu_path::CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED)
            .unwrap_or(false),
        dma_buf: n.attr(gpu_path::CU_ATTR_DMA_BUF_SUPPORTED).unwrap_or(false),
        host_alloc_dma_buf: n
            .attr(gpu_path::CU_ATTR_HOST_ALLOC_DMA_BUF_SUPPORTED)
            .unwrap_or(false),
    })
}

fn error_name(code: i32) -> String {
    match code {
        1 => "CUDA_ERROR_INVALID_VALUE".into(),
        2 => "CUDA_ERROR_OUT_OF_MEMORY".into(),
        101 => "CUDA_ERROR_INVALID_DEVICE".into(),
        801 => "CUDA_ERROR_NOT_SUPPORTED".into(),
        c => format!("CUresult {c}"),
    }
}

fn attr_text(v: Result<bool, i32>) -> String {
    match v {
        Ok(b) => b.to_string(),
        Err(e) => format!("unknown to this driver ({})", error_name(e)),
    }
}

/// Runs the probe; returns the report text.
pub fn run() -> Result<String, GpuError> {
    if let Some(why) = unavailable() {
        return Err(why.into());
    }
    let g = Gpu::new()?;
    let n = Newer::load()?;
    let mut r = String::new();
    let mut version = 0;
    // SAFETY: a valid out pointer.
    let _ = unsafe { sys::cuDriverGetVersion(&mut version) };
    let _ = writeln!(
        r,
        "GPU: {}, CUDA driver API {}.{}",
        g.name,
        version / 1000,
        version % 1000 / 10
    );
    let rdma = n.attr(gpu_path::CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED);
    let dmabuf = n.attr(gpu_path::CU_ATTR_DMA_BUF_SUPPORTED);
    let host_dmabuf = n.attr(gpu_path::CU_ATTR_HOST_ALLOC_DMA_BUF_SUPPORTED);
    let _ = writeln!(r, "GPU_DIRECT_RDMA_SUPPORTED:      {}", attr_text(rdma));
    let _ = writeln!(r, "DMA_BUF_SUPPORTED:              {}", attr_text(dmabuf));
    let _ = writeln!(
        r,
        "HOST_ALLOC_DMA_BUF_SUPPORTED:   {}",
        attr_text(host_dmabuf)
    );
    let attrs = CudaAttrs {
        gpu_direct_rdma: rdma.unwrap_or(false),
        dma_buf: dmabuf.unwrap_or(false),
        host_alloc_dma_buf: host_dmabuf.unwrap_or(false),
    };

    // dma-buf export: 4 MiB of each kind, ranges at several offsets and lengths.
    const SPAN: usize = 4 << 20;
    // SAFETY: plain allocation, freed with the process.
    let dev = cu("cuMemAlloc", unsafe { result::malloc_sync(SPAN) })?;
    let host = g.alloc_host(SPAN / 4)?;
    let host_dev = g.device_ptr(&host)?;
    let _ = writeln!(
        r,
        "dma-buf export (cuMemGetHandleForAddressRange, DMA_BUF_FD):"
    );
    let _ = writeln!(
        r,
        "  {:<28} {:>8} {:>8}  result",
        "memory", "offset", "length"
    );
    let ranges: [(usize, usize); 9] = [
        (0, 4 << 10),
        (0, 64 << 10),
        (0, 2 << 20),
        (4 << 10, 4 << 10),
        (64 << 10, 64 << 10),
        (2 << 20, 2 << 20),
        (256, 4 << 10),
        (0, (4 << 10) + 256),
        (0, 256),
    ];
    for (what, base) in [
        ("cuMemAlloc", dev),
        ("cuMemHostAlloc (device ptr)", host_dev),
        ("cuMemHostAlloc (host ptr)", host.ptr as u64),
    ] {
        for (off, len) in ranges {
            let res = n.export(base + off as u64, len);
            let _ = writeln!(r, "  {what:<28} {off:>8} {len:>8}  {res}");
        }
    }

    // The client's choice for each driver flavour, up to the ioctl it would make.
    let page = page_size();
    let _ = writeln!(
        r,
        "path choice (gdr_client::gpu_path::choose), host page {page}:"
    );
    for (flavour, paths) in [
        (
            "Jetson build (CAP_CUDA_JETSON)",
            DriverPaths::from_caps(CAP_CUDA_JETSON | CAP_HOST_SURFACE),
        ),
        (
            "dGPU build (CAP_CUDA_DGPU)",
            DriverPaths::from_caps(CAP_CUDA_DGPU | CAP_HOST_SURFACE),
        ),
        (
            "no provider (Thor-like)",
            DriverPaths::from_caps(CAP_HOST_SURFACE),
        ),
        ("a driver before PIN_HOST", DriverPaths::from_caps(0)),
        (
            "a 6.18 dGPU build (CAP_DMABUF)",
            DriverPaths::from_caps(CAP_DMABUF | CAP_HOST_SURFACE),
        ),
    ] {
        let p = gpu_path::choose(attrs, paths);
        let (buf, len) = match p {
            GpuPath::PinnedHost => (host.ptr as u64, 64 << 10),
            _ => (dev, 64 << 10),
        };
        let call = match p {
            GpuPath::NvP2pTegra | GpuPath::NvP2pDgpu => {
                format!("PIN_CUDA {{ va: {buf:#x}, size: {len} }}")
            }
            GpuPath::DmaBuf => format!(
                "export of [{buf:#x}, +{len}): {}; IMPORT_DMABUF {{ fd, offset: 0, size: {len} }}",
                n.export(buf, len)
            ),
            GpuPath::PinnedHost if paths.host_surface => {
                format!("PIN_HOST {{ va: {buf:#x}, size: {len} }}")
            }
            GpuPath::PinnedHost => {
                format!("H2C/C2H on host memory {{ src: {buf:#x}, len: {len} }}")
            }
        };
        let _ = writeln!(
            r,
            "  {flavour:<32} -> {:<12} align {:>6}, aligned: {}; {call}",
            p.name(),
            p.alignment(page),
            gpu_path::aligned(p, page, buf, len as u64)
        );
    }
    Ok(r)
}

pub(super) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(p).unwrap_or(4096)
}
