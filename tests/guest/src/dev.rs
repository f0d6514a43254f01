//! `/dev/picoevbN` ioctl wrappers. Safe ones take slices; the `unsafe` `*_raw` ones pass arbitrary argument
//! structs for the bad-input tests.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

use picoevb_abi as abi;

/// Default device node in the bench guest.
pub const DEFAULT_PATH: &str = "/dev/picoevb0";

/// An open device file.
pub struct Device {
    file: File,
}

impl Device {
    pub fn open(path: &str) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Device { file })
    }

    /// `ioctl(fd, cmd, arg)` with `arg` passed through untouched; returns the ioctl's return value.
    ///
    /// # Safety
    /// If `arg` is a pointer, the memory the driver may write through it (the argument struct and any user
    /// buffers named in it) must be writable by the driver without breaking Rust's aliasing rules, or not be
    /// writable by this process at all (the kernel then fails the copy with EFAULT).
    pub unsafe fn ioctl_raw(&self, cmd: u32, arg: libc::c_ulong) -> io::Result<i32> {
        // SAFETY: the fd is open for the whole call; what the kernel may touch through `arg` is the caller's
        // contract above.
        let rc = unsafe { libc::ioctl(self.file.as_raw_fd(), cmd as libc::Ioctl, arg) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(rc)
        }
    }

    /// # Safety
    /// As [`Device::ioctl_raw`]: `arg` is the only memory of ours the driver touches besides the buffers
    /// named in it.
    unsafe fn ioctl_ptr<T>(&self, cmd: u32, arg: *mut T) -> io::Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ioctl_raw(cmd, arg as libc::c_ulong) }.map(|_| ())
    }

    pub fn card_info(&self) -> io::Result<abi::CardInfo> {
        let mut info = abi::CardInfo::default();
        // SAFETY: CARD_INFO writes exactly one `CardInfo` through the pointer, which is ours and live.
        unsafe { self.ioctl_ptr(abi::IOC_CARD_INFO, &mut info) }?;
        Ok(info)
    }

    /// IOC_ABI_INFO: the gdr extension's version, capabilities and card identity.
    pub fn abi_info(&self) -> io::Result<abi::AbiInfo> {
        let mut info = abi::AbiInfo::default();
        // SAFETY: ABI_INFO writes exactly one `AbiInfo` through the pointer, which is ours and live.
        unsafe { self.ioctl_ptr(abi::IOC_ABI_INFO, &mut info) }?;
        Ok(info)
    }

    /// Writes `value` to the LED GPIO. The ABI passes the value itself as the argument, not a pointer.
    pub fn set_leds(&self, value: u32) -> io::Result<()> {
        // SAFETY: the argument is a plain integer; the driver dereferences nothing.
        unsafe { self.ioctl_raw(abi::IOC_LED, libc::c_ulong::from(value)) }.map(|_| ())
    }

    /// Host memory -> FPGA RAM at `fpga_offset`; returns `dma_time_ns`.
    pub fn h2c(&self, src: &[u8], fpga_offset: u64) -> io::Result<u64> {
        let mut a = abi::H2cDma {
            src: src.as_ptr() as u64,
            dst: fpga_offset,
            len: src.len() as u64,
            ..Default::default()
        };
        // SAFETY: H2C only reads `src`, which is borrowed for the call.
        unsafe { self.h2c_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// FPGA RAM at `fpga_offset` -> host memory; returns `dma_time_ns`.
    pub fn c2h(&self, dst: &mut [u8], fpga_offset: u64) -> io::Result<u64> {
        let mut a = abi::C2hDma {
            dst: dst.as_mut_ptr() as u64,
            src: fpga_offset,
            len: dst.len() as u64,
            ..Default::default()
        };
        // SAFETY: C2H writes at most `dst.len()` bytes into `dst`, which is mutably borrowed for the call.
        unsafe { self.c2h_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// Host -> FPGA -> host; returns `dma_time_ns`.
    pub fn h2c2h(&self, src: &[u8], dst: &mut [u8]) -> io::Result<u64> {
        assert_eq!(src.len(), dst.len(), "h2c2h needs equal lengths");
        let mut a = abi::H2c2hDma {
            src: src.as_ptr() as u64,
            dst: dst.as_mut_ptr() as u64,
            len: src.len() as u64,
            ..Default::default()
        };
        // SAFETY: reads `src`, writes at most `len` bytes of `dst`; both borrowed for the call.
        unsafe { self.h2c2h_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// # Safety
    /// See [`Device::ioctl_raw`]; the driver only reads user memory for H2C.
    pub unsafe fn h2c_raw(&self, a: &mut abi::H2cDma) -> io::Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ioctl_ptr(abi::IOC_H2C_DMA, a) }
    }

    /// # Safety
    /// `a.dst` must be writable for `a.len` bytes (or be memory the process cannot write), see
    /// [`Device::ioctl_raw`].
    pub unsafe fn c2h_raw(&self, a: &mut abi::C2hDma) -> io::Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ioctl_ptr(abi::IOC_C2H_DMA, a) }
    }

    /// # Safety
    /// As [`Device::c2h_raw`] for `a.dst`.
    pub unsafe fn h2c2h_raw(&self, a: &mut abi::H2c2hDma) -> io::Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ioctl_ptr(abi::IOC_H2C2H_DMA, a) }
    }

    /// PIN_CUDA on `va..va+size`; returns the handle.
    pub fn pin_cuda(&self, va: u64, size: u64) -> io::Result<u32> {
        let mut a = abi::PinCuda {
            va,
            size,
            ..Default::default()
        };
        // SAFETY: PIN_CUDA reads and writes only the struct; it does not write the pinned memory.
        unsafe { self.ioctl_ptr(abi::IOC_PIN_CUDA, &mut a) }?;
        Ok(a.handle)
    }

    /// UNPIN_CUDA of `handle`.
    pub fn unpin_cuda(&self, handle: u32) -> io::Result<()> {
        let mut a = abi::UnpinCuda { handle };
        // SAFETY: UNPIN_CUDA only reads the struct, which is ours and live.
        unsafe { self.ioctl_ptr(abi::IOC_UNPIN_CUDA, &mut a) }
    }

    /// GPU surface `handle` (its first `len` bytes) -> FPGA RAM at `fpga_offset`; returns `dma_time_ns`.
    /// The handle is a u64 in the DMA structs: tests pass values above 32 bits on purpose.
    pub fn h2c_cuda(&self, handle: u64, fpga_offset: u64, len: u64) -> io::Result<u64> {
        let mut a = abi::H2cDma {
            src: handle,
            dst: fpga_offset,
            len,
            flags: abi::H2C_SRC_CUDA,
            ..Default::default()
        };
        // SAFETY: with H2C_SRC_CUDA the driver dereferences no user pointer; it reads pinned memory only.
        unsafe { self.h2c_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// FPGA RAM at `fpga_offset` -> the first `len` bytes of GPU surface `handle`; returns `dma_time_ns`.
    ///
    /// # Safety
    /// No Rust reference into the memory pinned under `handle` may be live during the call (the device
    /// writes it behind the compiler's back).
    pub unsafe fn c2h_cuda(&self, handle: u64, fpga_offset: u64, len: u64) -> io::Result<u64> {
        let mut a = abi::C2hDma {
            dst: handle,
            src: fpga_offset,
            len,
            flags: abi::C2H_DST_CUDA,
            ..Default::default()
        };
        // SAFETY: forwarded contract; no user pointer is involved.
        unsafe { self.c2h_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// H2C2H with `src`/`dst` pointers or handles as `flags` say; returns `dma_time_ns`.
    ///
    /// # Safety
    /// As [`Device::c2h_cuda`] for a destination handle; a destination pointer must be writable for `len`
    /// bytes with no Rust reference to that memory live during the call.
    pub unsafe fn h2c2h_any(&self, src: u64, dst: u64, len: u64, flags: u64) -> io::Result<u64> {
        let mut a = abi::H2c2hDma {
            src,
            dst,
            len,
            flags,
            dma_time_ns: 0,
        };
        // SAFETY: forwarded contract.
        unsafe { self.h2c2h_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }
}

/// An anonymous private mapping, for pointers with chosen protections (read-only, unmapped).
pub struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    pub fn new(len: usize, prot: libc::c_int) -> io::Result<Self> {
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; no existing memory is affected.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { addr, len })
    }

    pub fn addr(&self) -> u64 {
        self.addr as u64
    }

    /// Unmaps `len` bytes at `offset` inside the mapping (page-aligned), leaving a hole.
    pub fn punch(&mut self, offset: usize, len: usize) -> io::Result<()> {
        // SAFETY: the range lies inside our own mapping, and no Rust reference points into it.
        let rc = unsafe { libc::munmap(self.addr.cast::<u8>().add(offset).cast(), len) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our mapping; munmap of an already punched hole inside it is harmless.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}
