//! The CUDA side of the self-test through cudarc's driver API (libcuda loaded at run time, 11.4
//! bindings): context, pinned host surfaces allocated as a Jetson app does (`cuMemHostAlloc` flags 0), and
//! the fill/verify kernels of `ptx/pattern.ptx`, JIT-compiled by the driver.

use std::ffi::{CString, c_void};

use cudarc::driver::{result, sys};

/// The kernels, as text (see the file's header).
pub const PTX: &str = include_str!("../../ptx/pattern.ptx");

const BLOCK: u32 = 256;

/// Why CUDA cannot be used here.
#[derive(Debug, thiserror::Error)]
pub enum Unavailable {
    #[error("libcuda not found")]
    NoLibcuda,
    #[error("cuInit failed: {0:?}")]
    Init(result::DriverError),
    #[error("no CUDA device")]
    NoDevice,
}

/// Why a CUDA step of the self-test or of a GPU probe (`gdr-selftest --gpu-*`) failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no CUDA here: {0}")]
    Unavailable(#[from] Unavailable),
    /// A driver API call failed.
    #[error("{call}: {source:?}")]
    Driver {
        call: &'static str,
        source: result::DriverError,
    },
    /// libcuda lacks an entry point newer than the bindings.
    #[error("libcuda has no {0}")]
    Missing(&'static str),
    #[error("verify: buffer {0:#x} is not 16-byte aligned")]
    Unaligned(sys::CUdeviceptr),
    #[error("size too large")]
    TooLarge,
    /// A probe found the GPU's answer wrong.
    #[error("check failed: {0}")]
    Check(String),
}

/// `r`, its error named by the driver call `call`.
pub(super) fn cu<T>(call: &'static str, r: Result<T, result::DriverError>) -> Result<T, GpuError> {
    r.map_err(|source| GpuError::Driver { call, source })
}

/// A CUDA context on GPU 0 with the kernels loaded. Lives only in the short-lived self-test child.
pub struct Gpu {
    pub name: String,
    fill: sys::CUfunction,
    verify: sys::CUfunction,
    /// Two words on the device: mismatch count and first wrong index.
    result: sys::CUdeviceptr,
}

/// Pinned host memory (`cuMemHostAlloc` with flags 0), freed on drop.
pub struct HostBuf {
    pub ptr: *mut u32,
    pub words: usize,
}

impl Drop for HostBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from malloc_host and is freed once, here.
        let _ = unsafe { result::free_host(self.ptr.cast()) };
    }
}

/// Why CUDA cannot be used here (no libcuda, no GPU), or None when it can.
pub fn unavailable() -> Option<Unavailable> {
    // SAFETY: is_culib_present only tries to dlopen the library; it never panics.
    if !unsafe { sys::is_culib_present() } {
        return Some(Unavailable::NoLibcuda);
    }
    if let Err(e) = result::init() {
        return Some(Unavailable::Init(e));
    }
    match result::device::get_count() {
        Ok(0) | Err(_) => Some(Unavailable::NoDevice),
        Ok(_) => None,
    }
}

impl Gpu {
    /// Opens GPU 0 and loads the kernels. Call [`unavailable`] first: cudarc panics without libcuda.
    pub fn new() -> Result<Self, GpuError> {
        cu("cuInit", result::init())?;
        let dev = cu("cuDeviceGet", result::device::get(0))?;
        let name = cu("cuDeviceGetName", result::device::get_name(dev))?;
        // SAFETY: `dev` is a valid device; the primary context is retained for the life of the process
        // (the child exits right after the test).
        let ctx = cu("cuDevicePrimaryCtxRetain", unsafe {
            result::primary_ctx::retain(dev)
        })?;
        // SAFETY: `ctx` was just retained.
        cu("cuCtxSetCurrent", unsafe { result::ctx::set_current(ctx) })?;
        let ptx = CString::new(PTX).expect("PTX has no NUL");
        // SAFETY: a NUL-terminated PTX image, valid for the call.
        let module = cu("cuModuleLoadData", unsafe {
            result::module::load_data(ptx.as_ptr().cast())
        })?;
        // SAFETY: `module` is loaded; the names are the PTX entries.
        let fill = cu("gdr_fill", unsafe {
            result::module::get_function(module, CString::new("gdr_fill").expect("no NUL"))
        })?;
        // SAFETY: as above.
        let verify = cu("gdr_verify", unsafe {
            result::module::get_function(module, CString::new("gdr_verify").expect("no NUL"))
        })?;
        // SAFETY: a plain 8-byte device allocation, freed with the process.
        let result = cu("cuMemAlloc", unsafe { result::malloc_sync(8) })?;
        Ok(Self {
            name,
            fill,
            verify,
            result,
        })
    }

    /// Pinned host memory as `cudaHostAlloc(..., cudaHostAllocDefault)` gives a Jetson app.
    pub fn alloc_host(&self, words: usize) -> Result<HostBuf, GpuError> {
        // SAFETY: flags 0; the memory is initialised by the fill kernel before anyone reads it.
        let ptr = cu("cuMemHostAlloc", unsafe {
            result::malloc_host(words * 4, 0)
        })?;
        Ok(HostBuf {
            ptr: ptr.cast(),
            words,
        })
    }

    /// Device memory (the bench's baseline).
    pub fn alloc_device(&self, words: usize) -> Result<sys::CUdeviceptr, GpuError> {
        // SAFETY: plain allocation; freed by the caller or at exit.
        cu("cuMemAlloc", unsafe { result::malloc_sync(words * 4) })
    }

    /// One word of device memory, read back (a mismatch's value).
    pub fn read_word(&self, ptr: sys::CUdeviceptr) -> Result<u32, GpuError> {
        let mut w = [0u32];
        // SAFETY: `ptr` is a live device allocation holding at least one u32 there.
        cu("cuMemcpyDtoH", unsafe {
            result::memcpy_dtoh_sync(&mut w, ptr)
        })?;
        Ok(w[0])
    }

    /// The device address of pinned host memory.
    pub fn device_ptr(&self, buf: &HostBuf) -> Result<sys::CUdeviceptr, GpuError> {
        let mut d: sys::CUdeviceptr = 0;
        // SAFETY: `buf.ptr` is a live cuMemHostAlloc allocation.
        let r = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, buf.ptr.cast(), 0) };
        cu("cuMemHostGetDevicePointer", r.result())?;
        Ok(d)
    }

    /// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: DMA by a third party must see completed GPU writes.
    pub fn sync_memops(&self, ptr: sys::CUdeviceptr) -> Result<(), GpuError> {
        let mut one: u32 = 1;
        // SAFETY: `ptr` is a live allocation; the attribute takes a pointer to an unsigned int.
        let r = unsafe {
            sys::cuPointerSetAttribute(
                (&mut one as *mut u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                ptr,
            )
        };
        cu("cuPointerSetAttribute(SYNC_MEMOPS)", r.result())
    }

    /// Loads a PTX image (through the driver's JIT) and returns its entry `name`.
    pub fn load_function(&self, ptx: &str, name: &str) -> Result<sys::CUfunction, GpuError> {
        let image = CString::new(ptx).expect("PTX has no NUL");
        // SAFETY: a NUL-terminated PTX image, valid for the call; the context is current (`new`).
        let module = cu("cuModuleLoadData", unsafe {
            result::module::load_data(image.as_ptr().cast())
        })?;
        // SAFETY: `module` is loaded; a missing entry is an error, not undefined behaviour.
        cu("cuModuleGetFunction", unsafe {
            result::module::get_function(module, CString::new(name).expect("no NUL"))
        })
    }

    fn launch(
        &self,
        f: sys::CUfunction,
        threads: u32,
        params: &mut [*mut c_void],
    ) -> Result<(), GpuError> {
        let grid = threads.div_ceil(BLOCK).max(1);
        // SAFETY: `params` point to values of the kernel's parameter types, alive for the call.
        cu("cuLaunchKernel", unsafe {
            result::launch_kernel(
                f,
                (grid, 1, 1),
                (BLOCK, 1, 1),
                0,
                std::ptr::null_mut(),
                params,
            )
        })?;
        cu("cuCtxSynchronize", result::ctx::synchronize())
    }

    /// Pattern into `src`, its complement into `dst` (`n` words each).
    pub fn fill(
        &self,
        src: sys::CUdeviceptr,
        dst: sys::CUdeviceptr,
        n: u32,
    ) -> Result<(), GpuError> {
        let (mut s, mut d, mut n2) = (src, dst, n);
        self.launch(
            self.fill,
            n,
            &mut [
                (&mut s as *mut u64).cast(),
                (&mut d as *mut u64).cast(),
                (&mut n2 as *mut u32).cast(),
            ],
        )
    }

    /// Checks `n` words of `buf` on the GPU: (wrong words, first wrong index). Each thread loads four
    /// words at once, so `buf` must be 16-byte aligned (every CUDA allocation is).
    pub fn verify(&self, buf: sys::CUdeviceptr, n: u32) -> Result<(u32, Option<u32>), GpuError> {
        if !buf.is_multiple_of(16) {
            return Err(GpuError::Unaligned(buf));
        }
        let init = [0u32, u32::MAX];
        // SAFETY: `self.result` holds 8 bytes.
        cu("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(self.result, &init)
        })?;
        let (mut b, mut n2, mut r) = (buf, n, self.result);
        self.launch(
            self.verify,
            n.div_ceil(4),
            &mut [
                (&mut b as *mut u64).cast(),
                (&mut n2 as *mut u32).cast(),
                (&mut r as *mut u64).cast(),
            ],
        )?;
        let mut out = [0u32; 2];
        // SAFETY: as above.
        cu("cuMemcpyDtoH", unsafe {
            result::memcpy_dtoh_sync(&mut out, self.result)
        })?;
        Ok((out[0], (out[0] > 0).then_some(out[1])))
    }

    /// Queues the verify kernel on `stream` and returns at once (the wake benchmark's consumer; its
    /// result is not read).
    ///
    /// # Safety
    /// `stream` is a live stream of this context, and `buf` holds `n` words until the stream has run.
    pub unsafe fn verify_on(
        &self,
        stream: sys::CUstream,
        buf: sys::CUdeviceptr,
        n: u32,
    ) -> Result<(), GpuError> {
        let (mut b, mut n2, mut r) = (buf, n, self.result);
        let mut params: [*mut c_void; 3] = [
            (&mut b as *mut u64).cast(),
            (&mut n2 as *mut u32).cast(),
            (&mut r as *mut u64).cast(),
        ];
        let grid = n.div_ceil(4).div_ceil(BLOCK).max(1);
        // SAFETY: the parameters match gdr_verify's and are copied by the call; `stream` is live.
        cu("cuLaunchKernel", unsafe {
            result::launch_kernel(
                self.verify,
                (grid, 1, 1),
                (BLOCK, 1, 1),
                0,
                stream,
                &mut params,
            )
        })
    }

    /// Seconds `f` takes on the GPU, timed with events.
    pub fn time(&self, f: impl FnOnce() -> Result<(), GpuError>) -> Result<f64, GpuError> {
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let start = cu("cuEventCreate", result::event::create(flags))?;
        let end = cu("cuEventCreate", result::event::create(flags))?;
        // SAFETY: valid events on the legacy default stream.
        cu("cuEventRecord", unsafe {
            result::event::record(start, std::ptr::null_mut())
        })?;
        f()?;
        // SAFETY: as above.
        cu("cuEventRecord", unsafe {
            result::event::record(end, std::ptr::null_mut())
        })?;
        cu("cuCtxSynchronize", result::ctx::synchronize())?;
        // SAFETY: both events recorded and complete.
        let ms = cu("cuEventElapsedTime", unsafe {
            result::event::elapsed(start, end)
        })?;
        Ok(f64::from(ms) / 1e3)
    }

    /// Device-to-device copy (the memory bandwidth baseline).
    pub fn copy(
        &self,
        dst: sys::CUdeviceptr,
        src: sys::CUdeviceptr,
        bytes: usize,
    ) -> Result<(), GpuError> {
        // SAFETY: both allocations hold `bytes`.
        cu("cuMemcpyDtoD", unsafe {
            result::memcpy_dtod_sync(dst, src, bytes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words gdr-selftest, the self-test history and `gdrctl validate` show (the driver's own error
    /// needs libcuda to be shown, so it is not here).
    #[test]
    fn messages_keep_their_words() {
        assert_eq!(
            GpuError::from(Unavailable::NoLibcuda).to_string(),
            "no CUDA here: libcuda not found"
        );
        assert_eq!(Unavailable::NoDevice.to_string(), "no CUDA device");
        assert_eq!(
            GpuError::Unaligned(0x1004).to_string(),
            "verify: buffer 0x1004 is not 16-byte aligned"
        );
        assert_eq!(
            GpuError::Missing("cuStreamWaitValue32_v2").to_string(),
            "libcuda has no cuStreamWaitValue32_v2"
        );
        assert_eq!(
            GpuError::Check("the copy verifies".into()).to_string(),
            "check failed: the copy verifies"
        );
    }
}
