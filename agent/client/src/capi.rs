//! The C interface. `include/gdrpico.h` is generated from this file by cbindgen (`cbindgen.toml`;
//! `tests/header.rs` fails when the committed header differs, `GDR_BLESS=1` rewrites it), so the
//! constants, the struct and the prototypes C sees are these. Every symbol is prefixed `gdrpico_`:
//! NVIDIA's gdrcopy exports `gdr_open` and friends, and both may live in one process. Every function
//! returns 0 or a negative `GDRPICO_E_*` code; after `GDRPICO_E_OS`, `errno` holds the system error
//! (ENODEV: the card was reprogrammed or removed).

use std::ffi::{c_char, c_int};
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};

use crate::{
    Agent, CudaHandle, Device, Error, Ring, RingConfig, RingPolicy, RingSummary, RingWriter,
    StreamOp, SurfaceRing,
};

/// The C interface's version: the library answers `gdrpico_version()` with
/// `GDRPICO_VERSION_MAJOR << 16 | GDRPICO_VERSION_MINOR`. A new major breaks programs built against an
/// older header (and renames the shared library's soname, `libgdr_client.so.MAJOR`); a new minor only adds.
pub const GDRPICO_VERSION_MAJOR: u32 = 1;
/// See [`GDRPICO_VERSION_MAJOR`].
pub const GDRPICO_VERSION_MINOR: u32 = 4;

/// nobody owns org.gdr.Agent1: the agent is not running
pub const GDRPICO_E_NO_AGENT: c_int = -1;
/// the system bus could not be reached
pub const GDRPICO_E_BUS: c_int = -2;
/// the agent refused this caller
pub const GDRPICO_E_ACCESS: c_int = -3;
/// no such card
pub const GDRPICO_E_NO_CARD: c_int = -4;
/// the card is programming, failed or removed
pub const GDRPICO_E_NOT_READY: c_int = -5;
/// any other agent error
pub const GDRPICO_E_AGENT: c_int = -6;
/// system error: see errno
pub const GDRPICO_E_OS: c_int = -7;
/// invalid argument
pub const GDRPICO_E_INVALID: c_int = -8;
/// the agent did not answer in time (25 s): it is wedged
pub const GDRPICO_E_TIMEOUT: c_int = -9;

/// gdrpico_h2c2h flag: src is a handle from gdrpico_pin_cuda (the driver's H2C2H flag).
pub const GDRPICO_H2C2H_SRC_CUDA: u64 = 1;
/// gdrpico_h2c2h flag: dst is a handle from gdrpico_pin_cuda.
pub const GDRPICO_H2C2H_DST_CUDA: u64 = 2;
/// gdrpico_import_dmabuf placement bit: some bytes lie in system memory (the driver's DMABUF_SYSTEM).
pub const GDRPICO_DMABUF_SYSTEM: u32 = 1;
/// gdrpico_import_dmabuf placement bit: some bytes lie in another device's memory (DMABUF_PEER).
pub const GDRPICO_DMABUF_PEER: u32 = 2;

const _: () = assert!(
    GDRPICO_H2C2H_SRC_CUDA == picoevb_abi::H2C2H_SRC_CUDA
        && GDRPICO_H2C2H_DST_CUDA == picoevb_abi::H2C2H_DST_CUDA
        && GDRPICO_DMABUF_SYSTEM == picoevb_abi::DMABUF_SYSTEM
        && GDRPICO_DMABUF_PEER == picoevb_abi::DMABUF_PEER,
    "the C flags are the driver's"
);

/// A card's identity and the driver's ABI (ABI_INFO).
#[repr(C)]
pub struct GdrCardInfo {
    /// driver ABI, major << 16 | minor
    pub abi_version: u32,
    /// N of /dev/picoevbN
    pub card_index: u32,
    /// PICOEVB capability bits
    pub caps: u64,
    /// bytes
    pub fpga_ram_size: u64,
    /// ID block: major << 24 | minor << 16 | patch; 0 = none
    pub design_version: u32,
    /// ID block: first 32 bits of the design's git commit
    pub build_hash: u32,
}

// The layout C compiles against (the header asserts the same numbers with _Static_assert).
const _: () = assert!(
    std::mem::size_of::<GdrCardInfo>() == 32
        && std::mem::align_of::<GdrCardInfo>() == 8
        && std::mem::offset_of!(GdrCardInfo, caps) == 8
        && std::mem::offset_of!(GdrCardInfo, fpga_ram_size) == 16
        && std::mem::offset_of!(GdrCardInfo, design_version) == 24
        && std::mem::offset_of!(GdrCardInfo, build_hash) == 28
);

/// This library's C interface version, GDRPICO_VERSION_MAJOR << 16 | GDRPICO_VERSION_MINOR, to compare with
/// the header's at run time: a different major means the program was built against another interface.
#[unsafe(no_mangle)]
pub extern "C" fn gdrpico_version() -> u32 {
    GDRPICO_VERSION_MAJOR << 16 | GDRPICO_VERSION_MINOR
}

fn fail(e: Error) -> c_int {
    if let Some(errno) = e.errno() {
        // SAFETY: __errno_location returns this thread's errno, always valid to write.
        unsafe { *libc::__errno_location() = errno };
    }
    e.code()
}

/// Borrows `fd` as a Device without taking ownership (the caller keeps and closes it). A negative fd (a
/// failed open's -1) is refused here: an `OwnedFd` of -1 would abort the caller's process.
fn borrow(fd: c_int) -> Result<ManuallyDrop<Device>, Error> {
    if fd < 0 {
        return Err(Error::Os {
            op: "fd",
            errno: libc::EBADF,
        });
    }
    // SAFETY: `fd` is not negative, and the caller passes an fd it owns (a wrong one makes the ioctls fail
    // with EBADF/ENOTTY); ManuallyDrop never closes it.
    Ok(ManuallyDrop::new(Device::from_fd(unsafe {
        OwnedFd::from_raw_fd(fd)
    })))
}

/// Asks the agent for card `card`'s fd (close-on-exec) and stores it in `*fd_out`; the caller closes it.
/// Gives up after 25 s.
///
/// # Safety
/// `fd_out` must be a valid pointer to an int.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_open(card: u32, fd_out: *mut c_int) -> c_int {
    if fd_out.is_null() {
        return Error::InvalidArgument("fd_out is NULL".into()).code();
    }
    match Agent::system().and_then(|a| a.open(card)) {
        Ok(dev) => {
            let fd: OwnedFd = dev.into();
            // SAFETY: checked non-null above; the caller guarantees validity.
            unsafe { *fd_out = fd.into_raw_fd() };
            0
        }
        Err(e) => fail(e),
    }
}

/// Fills `*info` from ABI_INFO.
///
/// # Safety
/// `fd` must be an open card fd; `info` a valid pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_card_info(fd: c_int, info: *mut GdrCardInfo) -> c_int {
    if info.is_null() {
        return Error::InvalidArgument("info is NULL".into()).code();
    }
    match borrow(fd).and_then(|d| d.abi_info()) {
        Ok(a) => {
            // SAFETY: checked non-null; the caller guarantees validity.
            unsafe {
                *info = GdrCardInfo {
                    abi_version: a.abi_version,
                    card_index: a.card_index,
                    caps: a.caps,
                    fpga_ram_size: a.fpga_ram_size,
                    design_version: a.design_version,
                    build_hash: a.build_hash,
                }
            };
            0
        }
        Err(e) => fail(e),
    }
}

/// Pins a cudaHostAlloc (flags 0) or cuMemAlloc allocation for DMA and stores its handle in `*handle`.
/// Unpin before freeing it.
///
/// # Safety
/// `fd` must be an open card fd; `handle` a valid pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_pin_cuda(
    fd: c_int,
    va: u64,
    size: u64,
    handle: *mut u32,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { pin_into(handle, || borrow(fd).and_then(|d| d.pin_cuda(va, size))) }
}

/// Pins host memory (a cuMemHostAlloc allocation: Thor, and Orin after CUDA 14) as a surface and stores its
/// handle in `*handle`; it works wherever a gdrpico_pin_cuda handle does. Unpin before freeing it.
///
/// # Safety
/// `fd` must be an open card fd; `handle` a valid pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_pin_host(
    fd: c_int,
    va: u64,
    size: u64,
    handle: *mut u32,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { pin_into(handle, || borrow(fd).and_then(|d| d.pin_host(va, size))) }
}

/// Imports `size` bytes at `offset` of dma-buf `dmabuf_fd` as a surface (the driver's ABI 1.4, CAP_DMABUF); stores
/// its handle in `*handle` and, unless `placement` is NULL, where its bytes lie (GDRPICO_DMABUF_* bits) in
/// `*placement`. `offset` and `size` are whole host pages. The handle works wherever a gdrpico_pin_cuda
/// handle does; `dmabuf_fd` may be closed after.
///
/// # Safety
/// `fd` must be an open card fd; `handle` a valid pointer; `placement` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_import_dmabuf(
    fd: c_int,
    dmabuf_fd: c_int,
    offset: u64,
    size: u64,
    handle: *mut u32,
    placement: *mut u32,
) -> c_int {
    let mut where_ = 0;
    let import = || {
        if dmabuf_fd < 0 {
            return Err(Error::InvalidArgument("dmabuf_fd is negative".into()));
        }
        // SAFETY: a plain number the kernel checks; borrowed for the call only.
        let buf = unsafe { std::os::fd::BorrowedFd::borrow_raw(dmabuf_fd) };
        let d = borrow(fd)?;
        let (h, p) = d.import_dmabuf(buf, offset, size)?;
        where_ = p;
        Ok(h)
    };
    // SAFETY: the caller's contract, passed on.
    let rc = unsafe { pin_into(handle, import) };
    if rc == 0 && !placement.is_null() {
        // SAFETY: non-null, and valid by the caller's contract.
        unsafe { *placement = where_ };
    }
    rc
}

/// Runs a pin and stores its handle in `*handle`.
///
/// # Safety
/// `handle` is null or valid for writing.
unsafe fn pin_into(handle: *mut u32, pin: impl FnOnce() -> Result<CudaHandle, Error>) -> c_int {
    if handle.is_null() {
        return Error::InvalidArgument("handle is NULL".into()).code();
    }
    match pin() {
        Ok(h) => {
            // SAFETY: checked non-null; the caller guarantees validity.
            unsafe { *handle = h.0 };
            0
        }
        Err(e) => fail(e),
    }
}

/// Unpins a handle from `gdrpico_pin_cuda` or `gdrpico_pin_host`.
///
/// # Safety
/// `fd` must be an open card fd.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_unpin_cuda(fd: c_int, handle: u32) -> c_int {
    borrow(fd)
        .and_then(|d| d.unpin_cuda(CudaHandle(handle)))
        .map_or_else(fail, |_| 0)
}

/// src -> FPGA RAM -> dst; src/dst are user pointers or, with the GDRPICO_H2C2H_*_CUDA flags, pin handles.
/// A user pointer must be valid for len bytes: the card reads src and overwrites dst by DMA. The DMA time
/// goes to `*dma_ns` unless it is NULL.
///
/// # Safety
/// `fd` must be an open card fd; user pointers in `src`/`dst` must be valid for `len` bytes (readable and
/// writable respectively) and not used by the caller during the call; `dma_ns` may be NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_h2c2h(
    fd: c_int,
    src: u64,
    dst: u64,
    len: u64,
    flags: u64,
    dma_ns: *mut u64,
) -> c_int {
    // SAFETY: the caller's contract above is `Device::h2c2h_raw`'s.
    match borrow(fd).and_then(|d| unsafe { d.h2c2h_raw(src, dst, len, flags) }) {
        Ok(t) => {
            if !dma_ns.is_null() {
                // SAFETY: non-null; the caller guarantees validity.
                unsafe { *dma_ns = t.dma_time_ns };
            }
            0
        }
        Err(e) => fail(e),
    }
}

/// gdrpico_ring_config policy: the driver waits for the reader; nothing in the ring is lost (a source that
/// cannot wait drops records itself and counts them).
pub const GDRPICO_RING_BACK_PRESSURE: u32 = 0;
/// gdrpico_ring_config policy: the driver never waits and overwrites the oldest slots; the reader counts
/// each one it lost (gdrpico_ring_dropped).
pub const GDRPICO_RING_DROP_OLDEST: u32 = 1;

/// A stream ring's shape (gdrpico_ring_start, the driver's ABI 1.6 and CAP_STREAM).
#[repr(C)]
pub struct GdrRingConfig {
    /// slots in the ring, at least 2
    pub slots: u32,
    /// most slots per chain (one C2H); 0: half the ring
    pub chain_slots: u32,
    /// bytes per slot, a multiple of 8 (whole records)
    pub slot_bytes: u64,
    /// slots the driver fills before it stops by itself; 0: until gdrpico_ring_finish
    pub total: u64,
    /// GDRPICO_RING_BACK_PRESSURE or GDRPICO_RING_DROP_OLDEST
    pub policy: u32,
    /// zero
    pub reserved: u32,
}

/// What a ring did (gdrpico_ring_finish).
#[repr(C)]
pub struct GdrRingSummary {
    /// slots the driver filled
    pub produced: u64,
    /// chains it ran
    pub chains: u64,
    /// times it found the ring full and waited
    pub waits: u64,
    /// slots the reader read whole
    pub read: u64,
    /// slots the reader lost (lapped, or overwritten while read)
    pub dropped: u64,
}

const _: () = assert!(
    std::mem::size_of::<GdrRingConfig>() == 32
        && std::mem::offset_of!(GdrRingConfig, slot_bytes) == 8
        && std::mem::offset_of!(GdrRingConfig, total) == 16
        && std::mem::offset_of!(GdrRingConfig, policy) == 24
        && std::mem::size_of::<GdrRingSummary>() == 40
);

impl GdrRingConfig {
    /// The shape, checked for what only C can get wrong (the ring's own checks follow).
    fn to_rust(&self) -> Result<RingConfig, Error> {
        let policy = match (self.policy, self.reserved) {
            (GDRPICO_RING_BACK_PRESSURE, 0) => RingPolicy::BackPressure,
            (GDRPICO_RING_DROP_OLDEST, 0) => RingPolicy::DropOldest,
            _ => return Err(Error::InvalidArgument("bad policy or reserved".into())),
        };
        let slot_bytes = usize::try_from(self.slot_bytes)
            .map_err(|_| Error::InvalidArgument("slot_bytes too large".into()))?;
        Ok(RingConfig {
            slots: self.slots,
            slot_bytes,
            chain_slots: self.chain_slots,
            policy,
            total: self.total,
        })
    }
}

/// A running stream ring (opaque): from gdrpico_ring_start, ended and freed by gdrpico_ring_finish.
pub struct GdrRing(Ring);

/// Restarts the card's stream source: off, cleared (sequence, clock, counters, FIFO), then on with records
/// of `record_bytes` (a multiple of 8 from 24 to 4096) every `period_ticks` 8 ns ticks (0: whenever the
/// engine asks). The source is the card's, shared by every holder.
///
/// # Safety
/// `fd` must be an open card fd.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_stream_start(
    fd: c_int,
    record_bytes: u32,
    period_ticks: u32,
) -> c_int {
    let set = |enable| StreamOp::Set {
        enable,
        record_bytes,
        period_ticks,
    };
    borrow(fd)
        .and_then(|d| {
            d.stream_control(set(false))?;
            d.stream_control(StreamOp::ClearSource)?;
            d.stream_control(set(true))
        })
        .map_or_else(fail, |_| 0)
}

/// Turns the card's stream source off; unless `overruns` is NULL, stores the records it dropped since it
/// was cleared (a full FIFO) in `*overruns`.
///
/// # Safety
/// `fd` must be an open card fd; `overruns` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_stream_stop(fd: c_int, overruns: *mut u32) -> c_int {
    let stop = |d: ManuallyDrop<Device>| {
        let now = d.stream_control(StreamOp::Query)?;
        d.stream_control(StreamOp::Set {
            enable: false,
            record_bytes: now.record_bytes,
            period_ticks: now.period_ticks,
        })
    };
    match borrow(fd).and_then(stop) {
        Ok(s) => {
            if !overruns.is_null() {
                // SAFETY: non-null, and valid by the caller's contract.
                unsafe { *overruns = s.source_overruns };
            }
            0
        }
        Err(e) => fail(e),
    }
}

/// Starts the driver filling a ring of `*config`'s shape from the card's stream source (on a thread of
/// the library's, through a duplicate of `fd`) and stores it in `*ring`. Read it with gdrpico_ring_next;
/// end it with gdrpico_ring_finish, which also frees it. The ring's memory is the library's.
///
/// # Safety
/// `fd` must be an open card fd; `config` and `ring` valid pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_ring_start(
    fd: c_int,
    config: *const GdrRingConfig,
    ring: *mut *mut GdrRing,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { start_ring(fd, config, ring, |d, c| d.stream_ring(c).map(GdrRing)) }
}

/// Starts a ring of `*config`'s shape with `start` on the card `fd` and stores it, boxed, in `*out`.
///
/// # Safety
/// `fd` must be an open card fd; `config` and `out` NULL (refused) or valid pointers.
unsafe fn start_ring<T>(
    fd: c_int,
    config: *const GdrRingConfig,
    out: *mut *mut T,
    start: impl FnOnce(&Device, RingConfig) -> Result<T, Error>,
) -> c_int {
    if config.is_null() || out.is_null() {
        return Error::InvalidArgument("config or ring is NULL".into()).code();
    }
    // SAFETY: non-null, and valid by the caller's contract.
    let config = match unsafe { &*config }.to_rust() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match borrow(fd).and_then(|d| start(&d, config)) {
        Ok(r) => {
            // SAFETY: non-null, and valid by the caller's contract.
            unsafe { *out = Box::into_raw(Box::new(r)) };
            0
        }
        Err(e) => fail(e),
    }
}

/// Copies the next whole slot into `out` (`len` must be the ring's slot_bytes), waiting up to `timeout_us`
/// microseconds for one; unless `slot` is NULL, stores its number (slots since the start) in `*slot`.
/// Returns 1 with a slot, 0 without (the timeout passed, or the ring ended and every slot was read:
/// gdrpico_ring_finish says how), or a negative code: the driver's error (GDRPICO_E_OS: ENODEV the card
/// went, EINVAL the ring's memory went, EINTR a signal) once every slot before it was read.
///
/// # Safety
/// `ring` from gdrpico_ring_start and not finished; `out` valid for writing `len` bytes; `slot` NULL or
/// valid. One thread at a time per ring.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_ring_next(
    ring: *mut GdrRing,
    out: *mut u8,
    len: usize,
    timeout_us: u32,
    slot: *mut u64,
) -> c_int {
    if ring.is_null() || out.is_null() {
        return Error::InvalidArgument("ring or out is NULL".into()).code();
    }
    // SAFETY: the caller's contract: a live ring used by this thread alone, `out` valid for `len` bytes.
    let (r, out) = unsafe { (&mut (*ring).0, std::slice::from_raw_parts_mut(out, len)) };
    match r.next(out, std::time::Duration::from_micros(timeout_us.into())) {
        Ok(Some(n)) => {
            if !slot.is_null() {
                // SAFETY: non-null, and valid by the caller's contract.
                unsafe { *slot = n };
            }
            1
        }
        Ok(None) => 0,
        Err(e) => fail(e),
    }
}

/// Slots the reader lost so far.
///
/// # Safety
/// `ring` from gdrpico_ring_start and not finished.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_ring_dropped(ring: *const GdrRing) -> u64 {
    // SAFETY: the caller's contract; NULL reads as nothing lost.
    unsafe { ring.as_ref() }.map_or(0, |r| r.0.dropped())
}

/// Stops the driver at its next chain boundary, waits for it, frees the ring and, unless `summary` is
/// NULL, says what it did in `*summary`; the driver's error if it ended with one.
///
/// # Safety
/// `ring` from gdrpico_ring_start, finished only once; `summary` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_ring_finish(
    ring: *mut GdrRing,
    summary: *mut GdrRingSummary,
) -> c_int {
    if ring.is_null() {
        return Error::InvalidArgument("ring is NULL".into()).code();
    }
    // SAFETY: from gdrpico_ring_start (Box::into_raw), finished once: ours again.
    let r = unsafe { Box::from_raw(ring) }.0;
    // SAFETY: the caller's contract.
    unsafe { summarize(r.finish(), summary) }
}

/// Stores `r`'s summary in `*summary` unless it is NULL: 0, or `r`'s error.
///
/// # Safety
/// `summary` NULL or valid for writing.
unsafe fn summarize(r: Result<RingSummary, Error>, summary: *mut GdrRingSummary) -> c_int {
    match r {
        Ok(s) => {
            if !summary.is_null() {
                // SAFETY: non-null, and valid by the caller's contract.
                unsafe {
                    *summary = GdrRingSummary {
                        produced: s.produced,
                        chains: s.chains,
                        waits: s.waits,
                        read: s.read,
                        dropped: s.dropped,
                    }
                };
            }
            0
        }
        Err(e) => fail(e),
    }
}

/// A ring this process fills and the driver empties into the card's stream checker (opaque): from
/// gdrpico_ring_writer_start, ended and freed by gdrpico_ring_writer_finish.
pub struct GdrRingWriter(RingWriter);

/// Starts the driver emptying a ring of `*config`'s shape (GDRPICO_RING_BACK_PRESSURE only) into the card's
/// stream checker (on a thread of the library's, through a duplicate of `fd`) and stores it in `*writer`.
/// Fill it with gdrpico_ring_writer_write; end it with gdrpico_ring_writer_finish, which also frees it.
///
/// # Safety
/// `fd` must be an open card fd; `config` and `writer` valid pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_ring_writer_start(
    fd: c_int,
    config: *const GdrRingConfig,
    writer: *mut *mut GdrRingWriter,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start_ring(fd, config, writer, |d, c| {
            d.stream_ring_writer(c).map(GdrRingWriter)
        })
    }
}

/// Copies `slot` (`len` must be the ring's slot_bytes) into the ring's next slot, waiting up to
/// `timeout_us` microseconds for room. Returns 1 written, 0 no room in time, or a negative code: the
/// driver's error once its call returned (GDRPICO_E_OS: ENODEV the card went, EINTR a signal), or
/// GDRPICO_E_INVALID once the ring has moved its total.
///
/// # Safety
/// `writer` from gdrpico_ring_writer_start and not finished; `slot` valid for reading `len` bytes. One
/// thread at a time per writer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_ring_writer_write(
    writer: *mut GdrRingWriter,
    slot: *const u8,
    len: usize,
    timeout_us: u32,
) -> c_int {
    if writer.is_null() || slot.is_null() {
        return Error::InvalidArgument("writer or slot is NULL".into()).code();
    }
    // SAFETY: the caller's contract: a live writer used by this thread alone, `slot` valid for `len` bytes.
    let (w, slot) = unsafe { (&mut (*writer).0, std::slice::from_raw_parts(slot, len)) };
    match w.write(slot, std::time::Duration::from_micros(timeout_us.into())) {
        Ok(written) => c_int::from(written),
        Err(e) => fail(e),
    }
}

/// Waits up to `timeout_us` microseconds for the driver to move every slot written, stops it, frees the
/// writer and, unless `summary` is NULL, says what it did in `*summary` (`read`: the slots written).
/// GDRPICO_E_TIMEOUT if slots were left unmoved; the driver's error if it ended with one.
///
/// # Safety
/// `writer` from gdrpico_ring_writer_start, finished only once; `summary` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_ring_writer_finish(
    writer: *mut GdrRingWriter,
    timeout_us: u32,
    summary: *mut GdrRingSummary,
) -> c_int {
    if writer.is_null() {
        return Error::InvalidArgument("writer is NULL".into()).code();
    }
    // SAFETY: from gdrpico_ring_writer_start (Box::into_raw), finished once: ours again.
    let w = unsafe { Box::from_raw(writer) }.0;
    let r = w.finish(std::time::Duration::from_micros(timeout_us.into()));
    // SAFETY: the caller's contract.
    unsafe { summarize(r, summary) }
}

/// A ring's control block (`gdrpico_surface_ring_control`): the words the driver and the ring's reader
/// share, each a naturally aligned 64-bit word, counted in slots since the start (slot n at index
/// n % slots). The driver stores `writing` before a chain and `produced` (with release order) after it;
/// the reader loads `produced` with acquire order, reads the slots below it, and with back-pressure stores
/// `consumed` (release) once it is done with them; a reader that copies a slot and then finds `writing`
/// more than a ring ahead of it knows the copy may be torn (drop-oldest).
#[repr(C)]
pub struct GdrRingControl {
    /// driver: slots below it may be being written
    pub writing: u64,
    /// driver: slots below it are whole
    pub produced: u64,
    /// reader: slots it is done with
    pub consumed: u64,
    /// nonzero asks the driver to stop at its next chain
    pub stop: u64,
    /// driver: times it waited for the reader
    pub waits: u64,
}

const _: () = assert!(
    std::mem::size_of::<GdrRingControl>() == std::mem::size_of::<picoevb_abi::RingControl>()
        && std::mem::offset_of!(GdrRingControl, writing)
            == std::mem::offset_of!(picoevb_abi::RingControl, writing)
        && std::mem::offset_of!(GdrRingControl, produced)
            == std::mem::offset_of!(picoevb_abi::RingControl, produced)
        && std::mem::offset_of!(GdrRingControl, consumed)
            == std::mem::offset_of!(picoevb_abi::RingControl, consumed)
        && std::mem::offset_of!(GdrRingControl, stop)
            == std::mem::offset_of!(picoevb_abi::RingControl, stop)
        && std::mem::offset_of!(GdrRingControl, waits)
            == std::mem::offset_of!(picoevb_abi::RingControl, waits)
);

/// A ring the driver fills in a surface (opaque): from gdrpico_surface_ring_start, ended and freed by
/// gdrpico_surface_ring_finish.
pub struct GdrSurfaceRing(SurfaceRing);

/// Starts the driver filling a ring of `*config`'s shape from the card's stream source in the surface
/// `handle` of `fd` (gdrpico_pin_cuda, gdrpico_pin_host, gdrpico_import_dmabuf), from its offset 0, and
/// stores it in `*ring`. Its reader is the caller's (a CUDA kernel), over the control block that
/// gdrpico_surface_ring_control gives. Unpinning the surface or freeing its memory ends the ring. End it with
/// gdrpico_surface_ring_finish, which also frees it.
///
/// # Safety
/// `fd` must be an open card fd; `config` and `ring` valid pointers.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_surface_ring_start(
    fd: c_int,
    handle: u32,
    config: *const GdrRingConfig,
    ring: *mut *mut GdrSurfaceRing,
) -> c_int {
    // SAFETY: the caller's contract.
    unsafe {
        start_ring(fd, config, ring, |d, c| {
            d.stream_ring_on(CudaHandle(handle), c).map(GdrSurfaceRing)
        })
    }
}

/// The ring's control block, at the start of a page of its own that lives until
/// gdrpico_surface_ring_finish: for a GPU reader, map it (cudaHostRegister with cudaHostRegisterMapped, then
/// cudaHostGetDevicePointer) and access its words as volatile.
///
/// # Safety
/// `ring` from gdrpico_surface_ring_start and not finished.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_surface_ring_control(
    ring: *const GdrSurfaceRing,
) -> *mut GdrRingControl {
    // SAFETY: the caller's contract; NULL gives NULL.
    unsafe { ring.as_ref() }.map_or(std::ptr::null_mut(), |r| r.0.control().cast())
}

/// Waits up to `timeout_us` microseconds until the driver has filled more than `seen` slots or its call
/// returned; unless `produced` is NULL, stores the slots filled in `*produced`. Returns 1 if more than
/// `seen`, 0 if not, or a negative code: the driver's error once its call returned.
///
/// # Safety
/// `ring` from gdrpico_surface_ring_start and not finished; `produced` NULL or valid. One thread at a
/// time per ring.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_surface_ring_wait(
    ring: *mut GdrSurfaceRing,
    seen: u64,
    timeout_us: u32,
    produced: *mut u64,
) -> c_int {
    if ring.is_null() {
        return Error::InvalidArgument("ring is NULL".into()).code();
    }
    // SAFETY: the caller's contract: a live ring used by this thread alone.
    let r = unsafe { &mut (*ring).0 };
    match r.wait(seen, std::time::Duration::from_micros(timeout_us.into())) {
        Ok(p) => {
            if !produced.is_null() {
                // SAFETY: non-null, and valid by the caller's contract.
                unsafe { *produced = p };
            }
            c_int::from(p > seen)
        }
        Err(e) => fail(e),
    }
}

/// Stops the driver at its next chain boundary, waits for it, frees the ring and, unless `summary` is
/// NULL, says what it did in `*summary` (`read` and `dropped` are the reader's to count: 0); the
/// driver's error if it ended with one.
///
/// # Safety
/// `ring` from gdrpico_surface_ring_start, finished only once; `summary` NULL or valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gdrpico_surface_ring_finish(
    ring: *mut GdrSurfaceRing,
    summary: *mut GdrRingSummary,
) -> c_int {
    if ring.is_null() {
        return Error::InvalidArgument("ring is NULL".into()).code();
    }
    // SAFETY: from gdrpico_surface_ring_start (Box::into_raw), finished once: ours again.
    let r = unsafe { Box::from_raw(ring) }.0;
    // SAFETY: the caller's contract.
    unsafe { summarize(r.finish(), summary) }
}

/// A static description of a `GDRPICO_E_*` code.
#[unsafe(no_mangle)]
pub extern "C" fn gdrpico_strerror(code: c_int) -> *const c_char {
    let s: &'static [u8] = match code {
        0 => b"success\0",
        GDRPICO_E_NO_AGENT => b"the gdr agent is not running\0",
        GDRPICO_E_BUS => b"D-Bus error\0",
        GDRPICO_E_ACCESS => b"access denied by the gdr agent\0",
        GDRPICO_E_NO_CARD => b"no such card\0",
        GDRPICO_E_NOT_READY => b"card not ready\0",
        GDRPICO_E_AGENT => b"the gdr agent reported an error\0",
        GDRPICO_E_OS => b"system error (see errno)\0",
        GDRPICO_E_INVALID => b"invalid argument\0",
        GDRPICO_E_TIMEOUT => b"the gdr agent did not answer in time\0",
        _ => b"unknown error\0",
    };
    s.as_ptr().cast()
}

impl From<Device> for OwnedFd {
    fn from(d: Device) -> Self {
        d.into_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_header() {
        let header = include_str!("../include/gdrpico.h");
        for (name, e) in [
            ("GDRPICO_E_NO_AGENT", Error::AgentNotRunning),
            ("GDRPICO_E_BUS", Error::Bus(String::new())),
            ("GDRPICO_E_ACCESS", Error::AccessDenied(String::new())),
            ("GDRPICO_E_NO_CARD", Error::NoSuchCard(String::new())),
            ("GDRPICO_E_NOT_READY", Error::NotReady(String::new())),
            (
                "GDRPICO_E_AGENT",
                Error::Agent {
                    name: String::new(),
                    message: String::new(),
                },
            ),
            ("GDRPICO_E_OS", Error::Os { op: "", errno: 0 }),
            ("GDRPICO_E_INVALID", Error::InvalidArgument(String::new())),
            ("GDRPICO_E_TIMEOUT", Error::Timeout(String::new())),
        ] {
            let line = format!("#define {name} {}", e.code());
            assert!(header.contains(&line), "gdrpico.h lacks '{line}'");
        }
        assert_eq!(gdrpico_version(), 1 << 16 | 4);
    }

    #[test]
    fn null_pointers_are_refused() {
        // SAFETY: NULL is exactly what is being tested; nothing is dereferenced.
        assert_eq!(unsafe { gdrpico_open(0, std::ptr::null_mut()) }, -8);
    }

    #[test]
    fn every_symbol_is_prefixed_and_declared() {
        let header = include_str!("../include/gdrpico.h");
        let source = include_str!("capi.rs");
        let exported: Vec<&str> = source
            .lines()
            .filter_map(|l| l.split_once("extern \"C\" fn ").map(|(_, r)| r))
            .filter_map(|r| r.split('(').next())
            .collect();
        assert!(exported.len() >= 6, "{exported:?}");
        for f in exported {
            assert!(f.starts_with("gdrpico_"), "{f} is not prefixed gdrpico_");
            assert!(
                header.contains(&format!("{f}(")),
                "gdrpico.h does not declare {f}"
            );
        }
        for line in header
            .lines()
            .filter(|l| l.starts_with("int ") || l.starts_with("const char"))
        {
            let name = line.split('(').next().unwrap_or("");
            let name = name.rsplit([' ', '*']).next().unwrap_or("");
            assert!(
                name.starts_with("gdrpico_"),
                "unprefixed declaration: {line}"
            );
        }
    }

    #[test]
    fn a_negative_fd_is_an_error_not_an_abort() {
        let mut info = std::mem::MaybeUninit::<GdrCardInfo>::uninit();
        let mut handle = 0u32;
        // SAFETY: valid out-pointers; fd -1 is what is being tested.
        unsafe {
            assert_eq!(gdrpico_card_info(-1, info.as_mut_ptr()), -7);
            assert_eq!(*libc::__errno_location(), libc::EBADF);
            assert_eq!(gdrpico_pin_cuda(-1, 0x1000, 4096, &mut handle), -7);
            assert_eq!(gdrpico_pin_host(-1, 0x1000, 4096, &mut handle), -7);
            assert_eq!(gdrpico_unpin_cuda(-1, 1), -7);
            assert_eq!(gdrpico_h2c2h(-1, 0, 0, 4, 0, std::ptr::null_mut()), -7);
            assert_eq!(gdrpico_stream_start(-1, 256, 0), -7);
            assert_eq!(gdrpico_stream_stop(-1, std::ptr::null_mut()), -7);
            let mut ring = std::ptr::null_mut();
            assert_eq!(gdrpico_ring_start(-1, &ring_config(), &mut ring), -7);
            assert!(ring.is_null());
        }
    }

    fn ring_config() -> GdrRingConfig {
        GdrRingConfig {
            slots: 8,
            chain_slots: 0,
            slot_bytes: 4096,
            total: 0,
            policy: GDRPICO_RING_DROP_OLDEST,
            reserved: 0,
        }
    }

    /// A ring on a file that is not a card: the driver's error reaches the reader and `finish`, which
    /// frees the ring; a bad shape or policy is refused before anything starts.
    #[test]
    fn a_ring_reports_the_drivers_error_and_refuses_bad_shapes() {
        let null = std::fs::File::open("/dev/null").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
        let mut ring = std::ptr::null_mut();
        let mut out = vec![0u8; 4096];
        // SAFETY: valid pointers; `fd` stays open for the test.
        unsafe {
            for bad in [
                GdrRingConfig {
                    policy: 7,
                    ..ring_config()
                },
                GdrRingConfig {
                    reserved: 1,
                    ..ring_config()
                },
                GdrRingConfig {
                    slots: 1,
                    ..ring_config()
                },
                GdrRingConfig {
                    slot_bytes: 12,
                    ..ring_config()
                },
            ] {
                assert_eq!(gdrpico_ring_start(fd, &bad, &mut ring), GDRPICO_E_INVALID);
            }
            assert_eq!(gdrpico_ring_start(fd, &ring_config(), &mut ring), 0);
            let rc = loop {
                match gdrpico_ring_next(
                    ring,
                    out.as_mut_ptr(),
                    out.len(),
                    1000,
                    std::ptr::null_mut(),
                ) {
                    0 => continue,
                    rc => break rc,
                }
            };
            assert_eq!(
                (rc, *libc::__errno_location()),
                (GDRPICO_E_OS, libc::ENOTTY)
            );
            assert_eq!(gdrpico_ring_dropped(ring), 0);
            assert_eq!(
                gdrpico_ring_finish(ring, std::ptr::null_mut()),
                GDRPICO_E_OS
            );
        }
    }

    /// The writer and the surface ring from C, on a file that is not a card: the driver's error (ENOTTY)
    /// reaches them, drop-oldest is refused for the writer, the control block is there until the end.
    #[test]
    fn the_writer_and_the_surface_ring_report_the_drivers_error() {
        let null = std::fs::File::open("/dev/null").unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
        let bp = GdrRingConfig {
            policy: GDRPICO_RING_BACK_PRESSURE,
            ..ring_config()
        };
        let slot = vec![1u8; 4096];
        // SAFETY: valid pointers; `fd` stays open for the test.
        unsafe {
            let mut w = std::ptr::null_mut();
            let drop_oldest = GdrRingConfig {
                policy: GDRPICO_RING_DROP_OLDEST,
                ..bp
            };
            assert_eq!(
                gdrpico_ring_writer_start(fd, &drop_oldest, &mut w),
                GDRPICO_E_INVALID
            );
            assert_eq!(gdrpico_ring_writer_start(fd, &bp, &mut w), 0);
            let rc = loop {
                match gdrpico_ring_writer_write(w, slot.as_ptr(), slot.len(), 1_000_000) {
                    1 => continue,
                    rc => break rc,
                }
            };
            assert_eq!(
                (rc, *libc::__errno_location()),
                (GDRPICO_E_OS, libc::ENOTTY)
            );
            assert_eq!(
                gdrpico_ring_writer_finish(w, 0, std::ptr::null_mut()),
                GDRPICO_E_OS
            );

            let mut r = std::ptr::null_mut();
            assert_eq!(gdrpico_surface_ring_start(fd, 3, &bp, &mut r), 0);
            let c = gdrpico_surface_ring_control(r);
            assert!(!c.is_null() && (c as usize).is_multiple_of(4096));
            let mut produced = 7;
            let rc = loop {
                match gdrpico_surface_ring_wait(r, 0, 1_000_000, &mut produced) {
                    0 => continue,
                    rc => break rc,
                }
            };
            assert_eq!(
                (rc, *libc::__errno_location()),
                (GDRPICO_E_OS, libc::ENOTTY)
            );
            assert_eq!(
                gdrpico_surface_ring_finish(r, std::ptr::null_mut()),
                GDRPICO_E_OS
            );
        }
    }
}
