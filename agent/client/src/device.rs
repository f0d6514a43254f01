//! An open `/dev/picoevbN` and its ioctls (the ABI from `picoevb-abi`). Works the same on an fd from the
//! agent's `Open` and on a node opened directly (tests, the self-test child).

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use picoevb_abi as abi;

use crate::{Error, Ring, RingConfig, RingWriter, SurfaceRing};

/// An open card.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
    /// One-way requests ask for the card's clock ([`Device::time_by_card`]).
    card_clock: AtomicBool,
}

/// Which clock timed a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// The kernel's, from the first register write to the completion seen: includes the interrupt's or
    /// the poll's latency and the driver's own work between chains.
    Kernel,
    /// The card's: the engines' performance monitors, the time the DMA engine was busy with the data
    /// (one-way requests, with [`Device::time_by_card`]).
    Card,
}

/// Result of one DMA request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub bytes: u64,
    /// DMA time as the driver measured it (pinning and mapping excluded), on [`Transfer::clock`].
    pub dma_time_ns: u64,
    pub clock: Clock,
}

impl Transfer {
    /// MB/s (10^6 bytes per second).
    pub fn mbps(&self) -> f64 {
        if self.dma_time_ns == 0 {
            return 0.0;
        }
        self.bytes as f64 * 1e3 / self.dma_time_ns as f64
    }
}

/// The driver's handle of a pinned CUDA allocation; unpin it with [`Device::unpin_cuda`] before freeing the
/// memory (or use [`Device::pin`], which unpins on drop). A handle is only a name the driver checks: a stale
/// or foreign one makes a call fail, never touch other memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaHandle(pub u32);

/// A CUDA allocation pinned for DMA for as long as this lives: dropping it unpins it.
#[derive(Debug)]
pub struct Pinned<'d> {
    dev: &'d Device,
    handle: CudaHandle,
    size: u64,
}

impl Pinned<'_> {
    pub fn handle(&self) -> CudaHandle {
        self.handle
    }

    /// Bytes pinned.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Unpins now and reports a failure (dropping unpins too, but cannot report).
    pub fn unpin(self) -> Result<(), Error> {
        let me = std::mem::ManuallyDrop::new(self);
        me.dev.unpin_cuda(me.handle)
    }
}

impl Drop for Pinned<'_> {
    fn drop(&mut self) {
        let _ = self.dev.unpin_cuda(self.handle);
    }
}

/// Where an [`Device::h2c2h`] transfer reads from.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// Host memory the transfer reads (at least `len` bytes).
    Host(&'a [u8]),
    /// Pinned CUDA memory.
    Cuda(&'a Pinned<'a>),
}

/// Where an [`Device::h2c2h`] transfer writes to.
#[derive(Debug)]
pub enum Sink<'a> {
    /// Host memory the transfer overwrites (at least `len` bytes).
    Host(&'a mut [u8]),
    /// Pinned CUDA memory.
    Cuda(&'a Pinned<'a>),
}

impl Device {
    /// Wraps an fd (from the agent's `Open`).
    pub fn from_fd(fd: OwnedFd) -> Self {
        Self {
            fd,
            card_clock: AtomicBool::new(false),
        }
    }

    /// Opens a node directly (needs permission on the node: the agent and tests).
    pub fn open_path(path: &Path) -> Result<Self, Error> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::Os {
                op: "open",
                errno: e.raw_os_error().unwrap_or(0),
            })?;
        Ok(Self::from_fd(f.into()))
    }

    fn ioctl<T>(&self, op: &'static str, cmd: u32, arg: *mut T) -> Result<(), Error> {
        #[cfg(test)]
        tests::IOCTLS.with(|l| l.borrow_mut().push(op));
        // SAFETY: `cmd` is one of picoevb-abi's commands and `arg` points to the struct of the size and
        // layout that command encodes (every caller below passes `&mut` of the matching type), valid for the
        // duration of the call.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), cmd as _, arg) };
        if rc < 0 {
            return Err(Error::last_os(op));
        }
        Ok(())
    }

    /// Takes the card RAM for this file now, never waiting (`IOC_RAM_OWNER` CLAIM, ABI 1.2): `Ok(false)`
    /// if another holder has it (EBUSY). A driver without the ownership rules (ENOTTY) has nothing to take:
    /// `Ok(true)`. The RAM is given back when the file closes.
    pub fn claim_ram(&self) -> Result<bool, Error> {
        let mut o = abi::RamOwner {
            op: abi::RAM_CLAIM,
            ..Default::default()
        };
        match self.ioctl("RAM_OWNER", abi::IOC_RAM_OWNER, &mut o) {
            Ok(()) => Ok(true),
            Err(e) if e.errno() == Some(libc::EBUSY) => Ok(false),
            Err(e) if e.errno() == Some(libc::ENOTTY) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Driver ABI version, capabilities and the card's ID block.
    pub fn abi_info(&self) -> Result<abi::AbiInfo, Error> {
        let mut info = abi::AbiInfo::default();
        self.ioctl("ABI_INFO", abi::IOC_ABI_INFO, &mut info)?;
        Ok(info)
    }

    /// Bytes of FPGA RAM.
    pub fn card_info(&self) -> Result<abi::CardInfo, Error> {
        let mut info = abi::CardInfo::default();
        self.ioctl("CARD_INFO", abi::IOC_CARD_INFO, &mut info)?;
        Ok(info)
    }

    /// Sets the three LEDs: bit set = LED lit (the ABI's active-low value is handled here).
    pub fn set_leds(&self, lit: u32) -> Result<(), Error> {
        if lit > 7 {
            return Err(Error::InvalidArgument(format!("LED mask {lit} is above 7")));
        }
        // SAFETY: IOC_LED takes its argument by value, not as a pointer.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), abi::IOC_LED as _, !lit & 7) };
        if rc < 0 {
            return Err(Error::last_os("LED"));
        }
        Ok(())
    }

    /// Pins `size` bytes of CUDA memory at `va` (a cudaHostAlloc/cuMemAlloc address) for DMA, until the
    /// returned [`Pinned`] is dropped. The driver checks that `va..va + size` is CUDA memory of this process.
    pub fn pin(&self, va: u64, size: u64) -> Result<Pinned<'_>, Error> {
        let handle = self.pin_cuda(va, size)?;
        Ok(Pinned {
            dev: self,
            handle,
            size,
        })
    }

    /// [`Self::pin`] without the guard: the handle stays pinned until [`Self::unpin_cuda`] or the fd closes.
    pub fn pin_cuda(&self, va: u64, size: u64) -> Result<CudaHandle, Error> {
        self.pin_ioctl("PIN_CUDA", abi::IOC_PIN_CUDA, va, size)
    }

    /// Pins `size` bytes of host memory at `va` (a `cuMemHostAlloc` allocation: the GPU path of Thor, and of
    /// Orin after CUDA 14) as a surface, until the returned [`Pinned`] is dropped. Its handle works wherever
    /// a PIN_CUDA handle does. Needs `CAP_HOST_SURFACE` (ABI 1.3); counts against `RLIMIT_MEMLOCK`.
    pub fn pin_host_memory(&self, va: u64, size: u64) -> Result<Pinned<'_>, Error> {
        let handle = self.pin_host(va, size)?;
        Ok(Pinned {
            dev: self,
            handle,
            size,
        })
    }

    /// [`Self::pin_host_memory`] without the guard: pinned until [`Self::unpin_cuda`], the fd closes or the
    /// memory is unmapped.
    pub fn pin_host(&self, va: u64, size: u64) -> Result<CudaHandle, Error> {
        self.pin_ioctl("PIN_HOST", abi::IOC_PIN_HOST, va, size)
    }

    /// Imports `size` bytes at `offset` of dma-buf `buf` (a dGPU's memory exported by
    /// `cuMemGetHandleForAddressRange`, a udmabuf, a heap's buffer) as a surface: returns its handle, which
    /// works wherever a PIN_CUDA handle does, and where its bytes lie (`abi::DMABUF_*`). `offset` and `size`
    /// are whole host pages. Needs `CAP_DMABUF` (ABI 1.4). The import holds the buffer: `buf` may be closed
    /// after. It lives until [`Self::unpin_cuda`], the fd closes, or the exporter moves the buffer.
    pub fn import_dmabuf(
        &self,
        buf: BorrowedFd<'_>,
        offset: u64,
        size: u64,
    ) -> Result<(CudaHandle, u32), Error> {
        let mut a = abi::ImportDmabuf {
            fd: buf.as_raw_fd(),
            offset,
            size,
            ..Default::default()
        };
        self.ioctl("IMPORT_DMABUF", abi::IOC_IMPORT_DMABUF, &mut a)?;
        Ok((CudaHandle(a.handle), a.placement))
    }

    /// PIN_CUDA or PIN_HOST (one argument struct).
    fn pin_ioctl(
        &self,
        what: &'static str,
        cmd: u32,
        va: u64,
        size: u64,
    ) -> Result<CudaHandle, Error> {
        let mut p = abi::PinCuda {
            va,
            size,
            ..Default::default()
        };
        self.ioctl(what, cmd, &mut p)?;
        Ok(CudaHandle(p.handle))
    }

    pub fn unpin_cuda(&self, h: CudaHandle) -> Result<(), Error> {
        let mut u = abi::UnpinCuda { handle: h.0 };
        self.ioctl("UNPIN_CUDA", abi::IOC_UNPIN_CUDA, &mut u)
    }

    /// Host memory -> FPGA RAM at `fpga_offset`.
    pub fn h2c(&self, src: &[u8], fpga_offset: u64) -> Result<Transfer, Error> {
        self.h2c_raw(src.as_ptr() as u64, src.len() as u64, fpga_offset, 0)
    }

    /// FPGA RAM at `fpga_offset` -> host memory.
    pub fn c2h(&self, dst: &mut [u8], fpga_offset: u64) -> Result<Transfer, Error> {
        self.c2h_raw(dst.as_mut_ptr() as u64, dst.len() as u64, fpga_offset, 0)
    }

    /// Pinned CUDA memory -> FPGA RAM.
    pub fn h2c_cuda(&self, src: CudaHandle, len: u64, fpga_offset: u64) -> Result<Transfer, Error> {
        self.h2c_raw(src.0 as u64, len, fpga_offset, abi::H2C_SRC_CUDA)
    }

    /// FPGA RAM -> pinned CUDA memory.
    pub fn c2h_cuda(&self, dst: CudaHandle, len: u64, fpga_offset: u64) -> Result<Transfer, Error> {
        self.c2h_raw(dst.0 as u64, len, fpga_offset, abi::C2H_DST_CUDA)
    }

    /// The next `dst.len()` bytes of the card's stream source: whole records when the length is a multiple
    /// of the record size ([`Self::stream_control`]). Needs `CAP_STREAM` (ABI 1.5); the length a multiple of
    /// 8. With no record ready the request waits for the source (bounded by the driver's timeout); a
    /// disabled source reads as zeros.
    pub fn stream_read(&self, dst: &mut [u8]) -> Result<Transfer, Error> {
        self.c2h_raw(
            dst.as_mut_ptr() as u64,
            dst.len() as u64,
            0,
            abi::C2H_SRC_STREAM,
        )
    }

    /// [`Self::stream_read`] into `len` bytes of pinned CUDA memory.
    pub fn stream_read_cuda(&self, dst: CudaHandle, len: u64) -> Result<Transfer, Error> {
        self.c2h_raw(
            dst.0 as u64,
            len,
            0,
            abi::C2H_DST_CUDA | abi::C2H_SRC_STREAM,
        )
    }

    /// `src` into the card's stream checker, which counts good, corrupt and missing records
    /// ([`Self::stream_control`]). Needs `CAP_STREAM`; the length a multiple of 8.
    pub fn stream_write(&self, src: &[u8]) -> Result<Transfer, Error> {
        self.h2c_raw(
            src.as_ptr() as u64,
            src.len() as u64,
            0,
            abi::H2C_DST_STREAM,
        )
    }

    /// Starts the driver filling a ring of `config`'s shape from the card's stream source (IOC_STREAM_RING:
    /// ABI 1.6 and `CAP_STREAM`; a driver without it fails the first read with ENOTTY, a design without
    /// the block with EOPNOTSUPP). The source's settings are [`Self::stream_control`]'s. With a driver of
    /// ABI 1.7 or later the reader sleeps on the ring's eventfd. See [`Ring`].
    pub fn stream_ring(&self, config: RingConfig) -> Result<Ring, Error> {
        Ring::start(self.dup()?, config, self.ring_eventfd())
    }

    /// Starts the driver emptying a ring of `config`'s shape (back-pressure) into the card's stream checker
    /// (IOC_STREAM_RING with `RING_H2C`: ABI 1.6 and `CAP_STREAM`). See [`RingWriter`].
    pub fn stream_ring_writer(&self, config: RingConfig) -> Result<RingWriter, Error> {
        RingWriter::start(self.dup()?, config, self.ring_eventfd())
    }

    /// Starts the driver filling a ring of `config`'s shape from the card's stream source in `surface`
    /// (a handle of this device: `pin`, `pin_host_memory`, `import_dmabuf`), from its offset 0; the reader is
    /// the application's (a CUDA kernel). See [`SurfaceRing`].
    pub fn stream_ring_on(
        &self,
        surface: CudaHandle,
        config: RingConfig,
    ) -> Result<SurfaceRing, Error> {
        SurfaceRing::start(self.dup()?, surface, config, self.ring_eventfd())
    }

    /// Whether the driver signals a ring's eventfd (ABI 1.7 or later).
    fn ring_eventfd(&self) -> bool {
        self.abi_at_least(abi::ABI_EVENTFD_MINOR)
    }

    /// Whether the driver speaks ABI 1.`minor` or later of major 1.
    fn abi_at_least(&self, minor: u32) -> bool {
        self.abi_info()
            .is_ok_and(|i| abi::abi_major(i.abi_version) == 1 && i.abi_version & 0xffff >= minor)
    }

    /// Times this device's one-way requests (H2C, C2H, the stream's reads and writes) by the card's clock
    /// from now on ([`Clock::Card`]): MB/s of the link and the engine, without the CPU's latency (what
    /// `gdrctl latency`'s card column shows). Returns `false`, and keeps the kernel's clock, with a
    /// driver older than ABI 1.8. Round trips are always timed by the kernel.
    pub fn time_by_card(&self) -> bool {
        let can = self.abi_at_least(abi::ABI_CARD_TIME_MINOR);
        self.card_clock.store(can, Ordering::Relaxed);
        can
    }

    /// The flag and clock of a one-way request: `flag` when timed by the card.
    fn clock(&self, flag: u64) -> (u64, Clock) {
        if self.card_clock.load(Ordering::Relaxed) {
            (flag, Clock::Card)
        } else {
            (0, Clock::Kernel)
        }
    }

    /// A duplicate of the card's descriptor, for a ring's thread.
    fn dup(&self) -> Result<OwnedFd, Error> {
        self.fd.try_clone().map_err(|e| Error::Os {
            op: "dup",
            errno: e.raw_os_error().unwrap_or(0),
        })
    }

    /// Controls and reads the card's stream block (IOC_STREAM): its source's settings and counters, its
    /// checker's counters. The block is the card's, shared by every holder.
    pub fn stream_control(&self, op: StreamOp) -> Result<abi::Stream, Error> {
        let mut a = abi::Stream::default();
        match op {
            StreamOp::Query => a.op = abi::STREAM_QUERY,
            StreamOp::Set {
                enable,
                record_bytes,
                period_ticks,
            } => {
                if !picoevb_regs::stream::record_bytes_valid(record_bytes) {
                    return Err(Error::InvalidArgument(format!(
                        "a record of {record_bytes} bytes: records are 24 to 4096 bytes, a multiple of 8"
                    )));
                }
                a = abi::Stream {
                    op: abi::STREAM_SET,
                    enable: enable.into(),
                    record_bytes,
                    period_ticks,
                    ..a
                };
            }
            StreamOp::ClearSource => a.op = abi::STREAM_CLEAR_SOURCE,
            StreamOp::ClearSink => a.op = abi::STREAM_CLEAR_SINK,
        }
        self.ioctl("STREAM", abi::IOC_STREAM, &mut a)?;
        Ok(a)
    }

    fn h2c_raw(&self, src: u64, len: u64, dst: u64, flags: u64) -> Result<Transfer, Error> {
        let (timed, clock) = self.clock(abi::H2C_CARD_TIME);
        let mut d = abi::H2cDma {
            src,
            dst,
            len,
            flags: flags | timed,
            dma_time_ns: 0,
        };
        self.ioctl("H2C_DMA", abi::IOC_H2C_DMA, &mut d)?;
        Ok(Transfer {
            bytes: len,
            dma_time_ns: d.dma_time_ns,
            clock,
        })
    }

    fn c2h_raw(&self, dst: u64, len: u64, src: u64, flags: u64) -> Result<Transfer, Error> {
        let (timed, clock) = self.clock(abi::C2H_CARD_TIME);
        let mut d = abi::C2hDma {
            dst,
            src,
            len,
            flags: flags | timed,
            dma_time_ns: 0,
        };
        self.ioctl("C2H_DMA", abi::IOC_C2H_DMA, &mut d)?;
        Ok(Transfer {
            bytes: len,
            dma_time_ns: d.dma_time_ns,
            clock,
        })
    }

    /// `len` bytes from `src` through the FPGA RAM into `dst` in one request. Host buffers must hold at
    /// least `len` bytes; the borrow rules keep them from overlapping.
    pub fn h2c2h(&self, src: Source<'_>, dst: Sink<'_>, len: u64) -> Result<Transfer, Error> {
        let (s, mut flags) = match src {
            Source::Host(b) => {
                fits("source", b.len(), len)?;
                (b.as_ptr() as u64, 0)
            }
            Source::Cuda(p) => {
                fits("source", p.size, len)?;
                (u64::from(p.handle.0), abi::H2C2H_SRC_CUDA)
            }
        };
        let d = match dst {
            Sink::Host(b) => {
                fits("destination", b.len(), len)?;
                b.as_mut_ptr() as u64
            }
            Sink::Cuda(p) => {
                fits("destination", p.size, len)?;
                flags |= abi::H2C2H_DST_CUDA;
                u64::from(p.handle.0)
            }
        };
        // SAFETY: every host address comes from a slice borrowed for this call and at least `len` bytes
        // long (checked above): the source shared, the destination exclusive, so nothing else reads or
        // writes them until the ioctl has returned. CUDA sides are handles the driver checks.
        unsafe { self.h2c2h_raw(s, d, len, flags) }
    }

    /// [`Self::h2c2h`] on raw addresses: `flags` (`H2C2H_SRC_CUDA`, `H2C2H_DST_CUDA`) say which side is a
    /// pin handle instead of an address.
    ///
    /// # Safety
    /// The card writes `len` bytes at `dst` and reads `len` bytes at `src` by DMA, behind the compiler's back.
    /// For each side that is a host address: it must be mapped in this process for `len` bytes (readable for
    /// `src`, writable for `dst`), and for the duration of the call no Rust reference may point into the
    /// destination range and no mutable one into the source range. Handle sides have no requirement.
    pub unsafe fn h2c2h_raw(
        &self,
        src: u64,
        dst: u64,
        len: u64,
        flags: u64,
    ) -> Result<Transfer, Error> {
        let mut d = abi::H2c2hDma {
            src,
            dst,
            len,
            flags,
            dma_time_ns: 0,
        };
        self.ioctl("H2C2H_DMA", abi::IOC_H2C2H_DMA, &mut d)?;
        Ok(Transfer {
            bytes: len,
            dma_time_ns: d.dma_time_ns,
            clock: Clock::Kernel,
        })
    }
}

/// What [`Device::stream_control`] does before it reads the block back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamOp {
    /// Only read.
    Query,
    /// The source on or off, its record size (change it only while it is off, or in the call that turns
    /// it off) and its period in 8 ns ticks (0: a record whenever the engine asks, never a drop).
    Set {
        enable: bool,
        record_bytes: u32,
        period_ticks: u32,
    },
    /// The source's sequence, clock, counters and FIFO back to 0.
    ClearSource,
    /// The checker's counters and expected sequence back to 0.
    ClearSink,
}

/// A host buffer or pinned range of `have` bytes must hold a transfer of `len`.
fn fits(what: &str, have: impl TryInto<u64>, len: u64) -> Result<(), Error> {
    let have: u64 = have.try_into().unwrap_or(u64::MAX);
    if len > have {
        return Err(Error::InvalidArgument(format!(
            "the {what} holds {have} bytes, the transfer is {len}"
        )));
    }
    Ok(())
}

impl Device {
    /// Gives up the fd.
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }
}

impl AsRawFd for Device {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        /// The ioctls this thread issued, by name.
        pub(super) static IOCTLS: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    fn ioctls() -> Vec<&'static str> {
        IOCTLS.with(|l| std::mem::take(&mut *l.borrow_mut()))
    }

    /// Fails if a driver without ABI 1.8 were sent the card-time flag (an older driver refuses it with
    /// EINVAL), or if asking again did not check the driver again.
    #[test]
    fn the_card_clock_is_asked_for_only_where_the_driver_has_it() {
        let d = Device::open_path(Path::new("/dev/null")).unwrap();
        assert!(!d.time_by_card(), "no ABI_INFO: the kernel's clock");
        assert_eq!(d.clock(abi::H2C_CARD_TIME), (0, Clock::Kernel));
        d.card_clock.store(true, Ordering::Relaxed);
        assert_eq!(
            d.clock(abi::C2H_CARD_TIME),
            (abi::C2H_CARD_TIME, Clock::Card)
        );
        assert!(!d.time_by_card(), "asking again checks again");
        assert_eq!(d.clock(abi::C2H_CARD_TIME), (0, Clock::Kernel));
    }

    #[test]
    fn h2c2h_takes_buffers_that_hold_the_transfer() {
        let d = Device::open_path(Path::new("/dev/null")).unwrap();
        ioctls();
        let src = [1u8; 8];
        let mut dst = [0u8; 4];
        let e = d
            .h2c2h(Source::Host(&src), Sink::Host(&mut dst), 8)
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(ref m) if m.contains("destination holds 4 bytes")),
            "{e}"
        );
        let e = d
            .h2c2h(Source::Host(&src[..2]), Sink::Host(&mut dst), 4)
            .unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(ref m) if m.contains("source")),
            "{e}"
        );
        assert!(ioctls().is_empty(), "nothing reached the driver");
        // Buffers that hold it go to the driver (/dev/null: ENOTTY).
        let e = d
            .h2c2h(Source::Host(&src), Sink::Host(&mut dst), 4)
            .unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENOTTY));
        assert_eq!(ioctls(), ["H2C2H_DMA"]);
        // A pinned range is checked the same way.
        let p = Pinned {
            dev: &d,
            handle: CudaHandle(7),
            size: 4,
        };
        assert!(matches!(
            d.h2c2h(Source::Cuda(&p), Sink::Host(&mut [0u8; 8]), 8),
            Err(Error::InvalidArgument(_))
        ));
        std::mem::forget(p);
    }

    #[test]
    fn a_pinned_range_is_unpinned_when_dropped_or_unpinned_once() {
        let d = Device::open_path(Path::new("/dev/null")).unwrap();
        ioctls();
        let p = Pinned {
            dev: &d,
            handle: CudaHandle(7),
            size: 4096,
        };
        drop(p);
        assert_eq!(ioctls(), ["UNPIN_CUDA"]);
        let p = Pinned {
            dev: &d,
            handle: CudaHandle(8),
            size: 4096,
        };
        assert_eq!(
            p.unpin().unwrap_err().errno(),
            Some(libc::ENOTTY),
            "reported"
        );
        assert_eq!(ioctls(), ["UNPIN_CUDA"], "exactly once");
        // pin() on memory the driver refuses gives no guard at all.
        assert!(d.pin(0x1000, 4096).is_err());
        assert_eq!(ioctls(), ["PIN_CUDA"]);
    }

    #[test]
    fn stream_calls_reach_the_driver_with_their_flags_and_bad_records_do_not() {
        let d = Device::open_path(Path::new("/dev/null")).unwrap();
        ioctls();
        let bad = StreamOp::Set {
            enable: true,
            record_bytes: 100,
            period_ticks: 0,
        };
        assert!(matches!(
            d.stream_control(bad),
            Err(Error::InvalidArgument(_))
        ));
        assert!(ioctls().is_empty());
        let ok = StreamOp::Set {
            enable: true,
            record_bytes: 256,
            period_ticks: 0,
        };
        assert_eq!(
            d.stream_control(ok).unwrap_err().errno(),
            Some(libc::ENOTTY)
        );
        assert!(d.stream_read(&mut [0u8; 64]).is_err());
        assert!(d.stream_write(&[0u8; 64]).is_err());
        assert_eq!(ioctls(), ["STREAM", "C2H_DMA", "H2C_DMA"]);
    }

    #[test]
    fn errors_name_the_operation_and_errno() {
        // /dev/null answers every ioctl with ENOTTY: the error must say which call and why.
        let d = Device::open_path(Path::new("/dev/null")).unwrap();
        let e = d.abi_info().unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENOTTY));
        assert!(e.to_string().starts_with("ABI_INFO: "), "{e}");
        assert!(matches!(d.set_leds(8), Err(Error::InvalidArgument(_))));
        let missing = Device::open_path(Path::new("/nonexistent/picoevb9")).unwrap_err();
        assert_eq!(missing.errno(), Some(libc::ENOENT));
    }

    #[test]
    fn bandwidth() {
        let t = Transfer {
            bytes: 65536,
            dma_time_ns: 65536,
            clock: Clock::Card,
        };
        assert_eq!(t.mbps(), 1000.0);
        assert_eq!(
            Transfer {
                bytes: 1,
                dma_time_ns: 0,
                clock: Clock::Kernel,
            }
            .mbps(),
            0.0
        );
    }
}
