//! `/dev/picoevbN` ioctl wrappers. Safe ones take slices; the `unsafe` `*_raw` ones pass arbitrary argument
//! structs for the bad-input tests.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;

use picoevb_abi as abi;

use crate::surface;

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

    /// The descriptor, for raw calls (a forked child's ioctl on the shared file).
    pub fn raw_fd(&self) -> libc::c_int {
        self.file.as_raw_fd()
    }

    /// `lseek(fd, offset, whence)`: the new file position.
    pub fn lseek(&self, offset: i64, whence: libc::c_int) -> io::Result<i64> {
        // SAFETY: a plain syscall on our open fd; it touches no memory of ours.
        let r = unsafe { libc::lseek(self.file.as_raw_fd(), offset, whence) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r)
        }
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
        self.h2c_at(src.as_ptr() as u64, src.len() as u64, fpga_offset)
    }

    /// H2C of `len` bytes at user address `addr`, which may not be mapped (or no longer be): the driver
    /// must then fail the request. Returns `dma_time_ns`.
    pub fn h2c_at(&self, addr: u64, len: u64, fpga_offset: u64) -> io::Result<u64> {
        let mut a = abi::H2cDma {
            src: addr,
            dst: fpga_offset,
            len,
            ..Default::default()
        };
        // SAFETY: H2C only reads user memory; an address that is not ours to read fails the request.
        unsafe { self.h2c_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// FPGA RAM at `fpga_offset` -> host memory; returns `dma_time_ns`.
    pub fn c2h(&self, dst: &mut [u8], fpga_offset: u64) -> io::Result<u64> {
        // SAFETY: C2H writes at most `dst.len()` bytes into `dst`, which is mutably borrowed for the call.
        unsafe { self.c2h_at(dst.as_mut_ptr() as u64, dst.len() as u64, fpga_offset) }
    }

    /// C2H into `len` bytes at user address `addr`, which may not be writable (read-only or unmapped).
    /// Returns `dma_time_ns`.
    ///
    /// # Safety
    /// No Rust reference into `addr..addr + len` may be live during the call.
    pub unsafe fn c2h_at(&self, addr: u64, len: u64, fpga_offset: u64) -> io::Result<u64> {
        let mut a = abi::C2hDma {
            dst: addr,
            src: fpga_offset,
            len,
            ..Default::default()
        };
        // SAFETY: forwarded contract.
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

    /// IOC_STREAM_RING with `a`: returns when the ring is done, stopped, interrupted or failed.
    ///
    /// # Safety
    /// A user-memory ring (`a.ring` without `RING_CUDA`) must be writable for `slots * slot_bytes` bytes
    /// and `a.control` for one `RingControl`, both for the whole call, and read by the caller only through
    /// raw pointers or atomics (the device and the driver write them while the call runs).
    pub unsafe fn stream_ring_raw(&self, a: &mut abi::StreamRing) -> io::Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ioctl_ptr(abi::IOC_STREAM_RING, a) }
    }

    /// IOC_STREAM with `a` (any op, any values); the driver writes the block's state back.
    pub fn stream_raw(&self, a: &mut abi::Stream) -> io::Result<()> {
        // SAFETY: STREAM reads and writes exactly one `Stream` through the pointer, ours and live.
        unsafe { self.ioctl_ptr(abi::IOC_STREAM, a) }
    }

    /// IOC_STREAM `op` with the source settings `enable`, `record_bytes`, `period_ticks` (used by SET).
    pub fn stream(
        &self,
        op: u32,
        enable: bool,
        record_bytes: u32,
        period_ticks: u32,
    ) -> io::Result<abi::Stream> {
        let mut a = abi::Stream {
            op,
            enable: enable.into(),
            record_bytes,
            period_ticks,
            ..Default::default()
        };
        self.stream_raw(&mut a)?;
        Ok(a)
    }

    /// A fresh stream: the source stopped, cleared (sequence, clock, counters, FIFO) and started again with
    /// `record_bytes` and `period_ticks`, the checker cleared. Returns the block after the last SET.
    pub fn stream_restart(&self, record_bytes: u32, period_ticks: u32) -> io::Result<abi::Stream> {
        self.stream(abi::STREAM_SET, false, record_bytes, period_ticks)?;
        self.stream(abi::STREAM_CLEAR_SOURCE, false, 0, 0)?;
        self.stream(abi::STREAM_CLEAR_SINK, false, 0, 0)?;
        self.stream(abi::STREAM_SET, true, record_bytes, period_ticks)
    }

    /// The next `dst.len()` bytes of the card's stream source (C2H_SRC_STREAM); returns `dma_time_ns`.
    pub fn c2h_stream(&self, dst: &mut [u8]) -> io::Result<u64> {
        let mut a = abi::C2hDma {
            dst: dst.as_mut_ptr() as u64,
            src: 0,
            len: dst.len() as u64,
            flags: abi::C2H_SRC_STREAM,
            ..Default::default()
        };
        // SAFETY: C2H writes at most `dst.len()` bytes into `dst`, which is mutably borrowed for the call.
        unsafe { self.c2h_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// `src` into the card's stream checker (H2C_DST_STREAM); returns `dma_time_ns`.
    pub fn h2c_stream(&self, src: &[u8]) -> io::Result<u64> {
        let mut a = abi::H2cDma {
            src: src.as_ptr() as u64,
            dst: 0,
            len: src.len() as u64,
            flags: abi::H2C_DST_STREAM,
            ..Default::default()
        };
        // SAFETY: H2C only reads `src`, borrowed for the call.
        unsafe { self.h2c_raw(&mut a) }?;
        Ok(a.dma_time_ns)
    }

    /// IOC_RAM_OWNER with any argument struct (bad ops, reserved words); the driver writes `state` back.
    pub fn ram_owner_raw(&self, a: &mut abi::RamOwner) -> io::Result<()> {
        // SAFETY: RAM_OWNER reads and writes exactly one `RamOwner` through the pointer, ours and live.
        unsafe { self.ioctl_ptr(abi::IOC_RAM_OWNER, a) }
    }

    /// IOC_RAM_OWNER `op` (`RAM_QUERY`, `RAM_CLAIM`, `RAM_RELEASE`); returns the state after it.
    pub fn ram_owner(&self, op: u32) -> io::Result<u32> {
        let mut a = abi::RamOwner {
            op,
            ..Default::default()
        };
        self.ram_owner_raw(&mut a)?;
        Ok(a.state)
    }

    /// IOC_REG_CACHE with any argument struct (bad ops, reserved words): returns the cache's state as the
    /// driver wrote it back into `a`.
    pub fn reg_cache_raw(&self, a: &mut abi::RegCache) -> io::Result<()> {
        // SAFETY: REG_CACHE reads and writes only the struct, which is ours and live; it names no buffers.
        unsafe { self.ioctl_ptr(abi::IOC_REG_CACHE, a) }
    }

    /// IOC_REG_CACHE `op`; `max_entries` and `max_bytes` matter only to SET_LIMITS. Returns the state after
    /// the operation.
    pub fn reg_cache(
        &self,
        op: u32,
        max_entries: u32,
        max_bytes: u64,
    ) -> io::Result<abi::RegCache> {
        let mut a = abi::RegCache {
            op,
            max_entries,
            max_bytes,
            ..Default::default()
        };
        self.reg_cache_raw(&mut a)?;
        Ok(a)
    }

    /// This file's registration cache: limits, contents and counters.
    pub fn reg_cache_query(&self) -> io::Result<abi::RegCache> {
        self.reg_cache(abi::REG_CACHE_QUERY, 0, 0)
    }

    /// New limits for this file's cache (evicting down to them).
    pub fn reg_cache_set_limits(
        &self,
        max_entries: u32,
        max_bytes: u64,
    ) -> io::Result<abi::RegCache> {
        self.reg_cache(abi::REG_CACHE_SET_LIMITS, max_entries, max_bytes)
    }

    /// Drops every buffer this file has cached.
    pub fn reg_cache_flush(&self) -> io::Result<abi::RegCache> {
        self.reg_cache(abi::REG_CACHE_FLUSH, 0, 0)
    }

    /// Turns this file's cache off (max_entries 0, byte limit kept): every request pins for itself again.
    pub fn reg_cache_disable(&self) -> io::Result<abi::RegCache> {
        let now = self.reg_cache_query()?;
        self.reg_cache_set_limits(0, now.max_bytes)
    }

    /// Whether the driver announces the registration cache (ABI_INFO `CAP_REG_CACHE`).
    pub fn has_reg_cache(&self) -> io::Result<bool> {
        Ok(self.abi_info()?.caps & abi::CAP_REG_CACHE != 0)
    }

    /// PIN_CUDA on `va..va+size`; returns the handle.
    pub fn pin_cuda(&self, va: u64, size: u64) -> io::Result<u32> {
        self.pin_ioctl(abi::IOC_PIN_CUDA, va, size)
    }

    /// PIN_HOST on `va..va+size` (host memory as a surface); returns the handle.
    pub fn pin_host(&self, va: u64, size: u64) -> io::Result<u32> {
        self.pin_ioctl(abi::IOC_PIN_HOST, va, size)
    }

    /// PIN_CUDA or PIN_HOST (`cmd`; one argument struct).
    fn pin_ioctl(&self, cmd: u32, va: u64, size: u64) -> io::Result<u32> {
        let mut a = abi::PinCuda {
            va,
            size,
            ..Default::default()
        };
        // SAFETY: both ioctls read and write only the struct; they do not write the pinned memory.
        unsafe { self.ioctl_ptr(cmd, &mut a) }?;
        Ok(a.handle)
    }

    /// PIN_CUDA or PIN_HOST, whichever the running test pins its surfaces with ([`surface::pin_kind`]).
    pub fn pin_surface(&self, va: u64, size: u64) -> io::Result<u32> {
        self.pin_ioctl(surface::pin_kind().cmd(), va, size)
    }

    /// IMPORT_DMABUF of `size` bytes at `offset` of dma-buf `fd`; returns the filled-in argument (handle,
    /// placement).
    pub fn import_dmabuf(&self, fd: i32, offset: u64, size: u64) -> io::Result<abi::ImportDmabuf> {
        let mut a = abi::ImportDmabuf {
            fd,
            offset,
            size,
            ..Default::default()
        };
        self.import_dmabuf_raw(&mut a)?;
        Ok(a)
    }

    /// IMPORT_DMABUF with every field the caller's (bad flags, reserved bits).
    pub fn import_dmabuf_raw(&self, a: &mut abi::ImportDmabuf) -> io::Result<()> {
        // SAFETY: IMPORT_DMABUF reads and writes only the struct, which is ours and live.
        unsafe { self.ioctl_ptr(abi::IOC_IMPORT_DMABUF, a) }
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

/// An eventfd (non-blocking) for a stream ring's wake-ups (`RING_EVENTFD`).
pub struct EventFd(std::os::fd::OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<Self> {
        // SAFETY: creates a descriptor, which we own from here.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nothing else owns.
        Ok(EventFd(unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
        }))
    }

    pub fn raw(&self) -> i32 {
        self.0.as_raw_fd()
    }

    /// Sleeps until the count is nonzero (poll) or `timeout` passes; the count read (and so reset), or
    /// None at the timeout.
    pub fn wait(&self, timeout: std::time::Duration) -> io::Result<Option<u64>> {
        let mut p = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one pollfd of ours.
        match unsafe { libc::poll(&mut p, 1, ms) } {
            0 => return Ok(None),
            n if n < 0 => return Err(io::Error::last_os_error()),
            _ => {}
        }
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into `v`.
        let n = unsafe { libc::read(self.raw(), (&raw mut v).cast(), 8) };
        if n == 8 {
            Ok(Some(v))
        } else if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
            Ok(Some(0))
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// An anonymous private mapping, for pointers with chosen protections (read-only, unmapped) and for memory
/// whose mapping a test changes under the driver (madvise, MAP_FIXED, mremap, mprotect).
pub struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
    prot: libc::c_int,
}

fn os_result(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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
        Ok(Mapping { addr, len, prot })
    }

    pub fn addr(&self) -> u64 {
        self.addr as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The mapping's bytes. Only for a readable mapping with no hole punched into it.
    pub fn as_slice(&self) -> &[u8] {
        assert!(
            self.prot & libc::PROT_READ != 0,
            "reading an unreadable mapping"
        );
        // SAFETY: `len` bytes mapped readable for our lifetime (the caller punched no hole, see above).
        unsafe { std::slice::from_raw_parts(self.addr.cast(), self.len) }
    }

    /// The mapping's bytes, writable. Only for a writable mapping with no hole punched into it.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        assert!(
            self.prot & libc::PROT_WRITE != 0,
            "writing a read-only mapping"
        );
        // SAFETY: `len` bytes mapped writable for our lifetime, borrowed mutably through `self`.
        unsafe { std::slice::from_raw_parts_mut(self.addr.cast(), self.len) }
    }

    /// Unmaps `len` bytes at `offset` inside the mapping (page-aligned), leaving a hole.
    pub fn punch(&mut self, offset: usize, len: usize) -> io::Result<()> {
        // SAFETY: the range lies inside our own mapping, and no Rust reference points into it.
        os_result(unsafe { libc::munmap(self.addr.cast::<u8>().add(offset).cast(), len) })
    }

    /// `madvise(advice)` on the whole mapping (MADV_DONTNEED: the next touch gets fresh zeroed pages).
    pub fn madvise(&mut self, advice: libc::c_int) -> io::Result<()> {
        // SAFETY: our own mapping; `&mut self` means no Rust reference points into it.
        os_result(unsafe { libc::madvise(self.addr, self.len, advice) })
    }

    /// `mprotect` of the whole mapping; the slice accessors follow the new protection.
    pub fn protect(&mut self, prot: libc::c_int) -> io::Result<()> {
        // SAFETY: our own mapping; `&mut self` means no Rust reference points into it.
        os_result(unsafe { libc::mprotect(self.addr, self.len, prot) })?;
        self.prot = prot;
        Ok(())
    }

    /// Fresh zeroed memory at the same address (mmap MAP_FIXED over whatever is there, or over a punched
    /// hole), with the mapping's protection.
    pub fn remap_fixed(&mut self) -> io::Result<()> {
        // SAFETY: MAP_FIXED replaces only our own range; `&mut self` means no Rust reference points into it.
        let addr = unsafe {
            libc::mmap(
                self.addr,
                self.len,
                self.prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        assert_eq!(addr, self.addr, "MAP_FIXED moved the mapping");
        Ok(())
    }

    /// Moves the pages to `target`'s address (mremap MREMAP_FIXED over `target`, same length), leaving the
    /// old address unmapped. Returns the old address.
    pub fn move_to(&mut self, target: Mapping) -> io::Result<u64> {
        assert_eq!(target.len, self.len, "mremap target of another length");
        // SAFETY: both ranges are our own mappings and no Rust reference points into either; `target`'s
        // range is replaced, so it is forgotten below instead of unmapped.
        let addr = unsafe {
            libc::mremap(
                self.addr,
                self.len,
                self.len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                target.addr,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let old = self.addr as u64;
        self.addr = addr;
        std::mem::forget(target);
        Ok(old)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our mapping; munmap of an already punched hole inside it is harmless.
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RW: libc::c_int = libc::PROT_READ | libc::PROT_WRITE;

    /// Whether `addr` is mapped: msync fails with ENOMEM on an unmapped page.
    fn mapped(addr: u64) -> bool {
        // SAFETY: msync only inspects the mapping; MS_ASYNC on anonymous memory does nothing else.
        unsafe { libc::msync(addr as *mut libc::c_void, 4096, libc::MS_ASYNC) == 0 }
    }

    #[test]
    fn mapping_changes_under_the_same_address() {
        let mut m = Mapping::new(8192, RW).unwrap();
        let addr = m.addr();
        m.as_mut_slice().fill(7);
        m.madvise(libc::MADV_DONTNEED).unwrap();
        assert!(m.as_slice().iter().all(|&b| b == 0), "DONTNEED zeroes");
        m.as_mut_slice().fill(9);
        m.remap_fixed().unwrap();
        assert_eq!(m.addr(), addr);
        assert!(
            m.as_slice().iter().all(|&b| b == 0),
            "MAP_FIXED gives new memory"
        );
        m.punch(0, 8192).unwrap();
        assert!(!mapped(addr));
        m.remap_fixed().unwrap();
        assert!(mapped(addr));
        m.protect(libc::PROT_READ).unwrap();
        assert_eq!(m.as_slice().len(), 8192);
        m.protect(RW).unwrap();
        m.as_mut_slice()[0] = 1;
    }

    #[test]
    fn move_to_leaves_the_old_address_unmapped() {
        let mut m = Mapping::new(8192, RW).unwrap();
        m.as_mut_slice().fill(5);
        let target = Mapping::new(8192, libc::PROT_NONE).unwrap();
        let to = target.addr();
        let old = m.move_to(target).unwrap();
        assert_eq!(m.addr(), to);
        assert!(!mapped(old));
        assert!(
            m.as_slice().iter().all(|&b| b == 5),
            "pages moved with their bytes"
        );
    }

    #[test]
    #[should_panic(expected = "read-only")]
    fn no_mutable_slice_of_a_readonly_mapping() {
        let mut m = Mapping::new(4096, libc::PROT_READ).unwrap();
        m.as_mut_slice();
    }
}
