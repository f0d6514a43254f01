// The ioctl ABI of /dev/picoevbN. The reference part (numbers 0..6) is binary-compatible with NVIDIA's
// jetson-rdma-picoevb `picoevb-rdma-ioctl.h`; numbers, layouts and flag bits must never change.

/// ioctl type ("magic") byte: 'P'.
pub const IOC_MAGIC: u32 = b'P' as u32;

const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = 8;
const IOC_SIZESHIFT: u32 = 16;
const IOC_DIRSHIFT: u32 = 30;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// Encodes an ioctl number like the kernel's `_IOC` (x86-64 and arm64 share this layout).
pub const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    dir << IOC_DIRSHIFT
        | IOC_MAGIC << IOC_TYPESHIFT
        | nr << IOC_NRSHIFT
        | (size as u32) << IOC_SIZESHIFT
}
const fn iow(nr: u32, size: usize) -> u32 {
    ioc(IOC_WRITE, nr, size)
}
const fn ior(nr: u32, size: usize) -> u32 {
    ioc(IOC_READ, nr, size)
}
const fn iowr(nr: u32, size: usize) -> u32 {
    ioc(IOC_READ | IOC_WRITE, nr, size)
}
/// The number field of an ioctl command.
pub const fn ioc_nr(cmd: u32) -> u32 {
    cmd & 0xff
}
/// The size field of an ioctl command.
pub const fn ioc_size(cmd: u32) -> usize {
    ((cmd >> IOC_SIZESHIFT) & 0x3fff) as usize
}

/// `PICOEVB_IOC_PIN_CUDA` argument.
///
/// Alignment contract (as NVIDIA's reference driver): any `va` and `size` are taken; the driver pins and
/// maps the GPU-page hull around them (4 KiB pages on Jetson, 64 KiB on dGPU nvidia_p2p, whose 560+ drivers
/// refuse lengths that are not whole pages) and DMA through the handle starts at `va`. Two pins whose hulls
/// share a page are one memory mapped twice: the second is EBUSY. A zero, wrapping or too large `size` (above the largest H2C2H) is EINVAL; beyond user space, EFAULT.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinCuda {
    /// In: start of the CUDA allocation (user virtual address).
    pub va: u64,
    /// In: length in bytes.
    pub size: u64,
    /// Out: handle for the DMA ioctls.
    pub handle: u32,
    /// Tail padding of the C struct; ignored.
    pub pad: u32,
}

/// `PICOEVB_IOC_UNPIN_CUDA` argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnpinCuda {
    /// In: a handle from PIN_CUDA.
    pub handle: u32,
}

/// `PICOEVB_IOC_H2C2H_DMA` argument: host/CUDA memory -> FPGA RAM -> host/CUDA memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct H2c2hDma {
    /// In: source user pointer, or CUDA handle with [`H2C2H_SRC_CUDA`].
    pub src: u64,
    /// In: destination user pointer, or CUDA handle with [`H2C2H_DST_CUDA`].
    pub dst: u64,
    /// In: bytes to copy.
    pub len: u64,
    /// In: `H2C2H_*` flags.
    pub flags: u64,
    /// Out: time spent in DMA (pinning and mapping excluded).
    pub dma_time_ns: u64,
}

/// `PICOEVB_IOC_CARD_INFO` argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CardInfo {
    /// Out: bytes of FPGA RAM (64 KiB on the PicoEVB).
    pub fpga_ram_size: u64,
}

/// `PICOEVB_IOC_H2C_DMA` argument: host/CUDA memory -> FPGA RAM.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct H2cDma {
    /// In: source user pointer, or CUDA handle with [`H2C_SRC_CUDA`].
    pub src: u64,
    /// In: destination offset in FPGA RAM.
    pub dst: u64,
    /// In: bytes to copy.
    pub len: u64,
    /// In: `H2C_*` flags.
    pub flags: u64,
    /// Out: time spent in DMA (the card's clock with [`H2C_CARD_TIME`]).
    pub dma_time_ns: u64,
}

/// `PICOEVB_IOC_C2H_DMA` argument: FPGA RAM -> host/CUDA memory. Note `dst` comes first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct C2hDma {
    /// In: destination user pointer, or CUDA handle with [`C2H_DST_CUDA`].
    pub dst: u64,
    /// In: source offset in FPGA RAM.
    pub src: u64,
    /// In: bytes to copy.
    pub len: u64,
    /// In: `C2H_*` flags.
    pub flags: u64,
    /// Out: time spent in DMA (the card's clock with [`C2H_CARD_TIME`]).
    pub dma_time_ns: u64,
}

/// Set the LEDs: the argument is the value itself (not a pointer), written to the GPIO data register.
/// LEDs are active-low: 0 lights all three, 7 turns them off.
pub const IOC_LED: u32 = iow(0, 4);
/// Pin a CUDA allocation; returns a handle.
pub const IOC_PIN_CUDA: u32 = iowr(1, core::mem::size_of::<PinCuda>());
/// Unpin a CUDA handle.
pub const IOC_UNPIN_CUDA: u32 = iow(2, core::mem::size_of::<UnpinCuda>());
/// Host -> FPGA -> host copy.
pub const IOC_H2C2H_DMA: u32 = iowr(3, core::mem::size_of::<H2c2hDma>());
/// Card information.
pub const IOC_CARD_INFO: u32 = ior(4, core::mem::size_of::<CardInfo>());
/// Host -> FPGA RAM.
pub const IOC_H2C_DMA: u32 = iowr(5, core::mem::size_of::<H2cDma>());
/// FPGA RAM -> host.
pub const IOC_C2H_DMA: u32 = iowr(6, core::mem::size_of::<C2hDma>());

/// H2C2H: `src` is a CUDA handle.
pub const H2C2H_SRC_CUDA: u64 = 1 << 0;
/// H2C2H: `dst` is a CUDA handle.
pub const H2C2H_DST_CUDA: u64 = 1 << 1;
/// H2C: `src` is a CUDA handle.
pub const H2C_SRC_CUDA: u64 = 1 << 0;
/// C2H: `dst` is a CUDA handle.
pub const C2H_DST_CUDA: u64 = 1 << 0;
/// H2C (gdr, only with [`CAP_STREAM`]): the bytes go to the card's stream checker instead of card RAM;
/// `dst` must be 0 and `len` a multiple of [`STREAM_ALIGN`].
pub const H2C_DST_STREAM: u64 = 1 << 1;
/// C2H (gdr, only with [`CAP_STREAM`]): the bytes are the next of the card's stream source (whole records
/// while `len` is a multiple of the record size) instead of card RAM; `src` must be 0 and `len` a multiple
/// of [`STREAM_ALIGN`]. With no record ready the engine waits for the source, so ask for no more than it
/// produces within the request's timeout (2 s plus 1 ms per 4 KiB); a disabled source reads as zeros.
pub const C2H_SRC_STREAM: u64 = 1 << 1;
/// H2C (gdr 1.8): `dma_time_ns` is the engine's run time by the card's own clock (the XDMA performance
/// monitor: from Run to the last descriptor, summed over the request's chains) instead of the kernel's
/// clock around the request. Costs two register reads per chain; not for the round trip.
pub const H2C_CARD_TIME: u64 = 1 << 2;
/// C2H (gdr 1.8): as [`H2C_CARD_TIME`].
pub const C2H_CARD_TIME: u64 = 1 << 2;
/// Valid H2C2H flag bits; any other bit is EINVAL.
pub const H2C2H_FLAGS: u64 = H2C2H_SRC_CUDA | H2C2H_DST_CUDA;
/// Valid H2C flag bits.
pub const H2C_FLAGS: u64 = H2C_SRC_CUDA | H2C_DST_STREAM | H2C_CARD_TIME;
/// Valid C2H flag bits.
pub const C2H_FLAGS: u64 = C2H_DST_CUDA | C2H_SRC_STREAM | C2H_CARD_TIME;
/// A stream transfer's length is a multiple of this: one 64-bit AXI beat.
pub const STREAM_ALIGN: u64 = 8;

/// The reference ABI's values, as printed by its header on x86-64 and arm64. Checked at compile time.
const _: () = {
    assert!(IOC_LED == 0x4004_5000);
    assert!(IOC_PIN_CUDA == 0xc018_5001);
    assert!(IOC_UNPIN_CUDA == 0x4004_5002);
    assert!(IOC_H2C2H_DMA == 0xc028_5003);
    assert!(IOC_CARD_INFO == 0x8008_5004);
    assert!(IOC_H2C_DMA == 0xc028_5005);
    assert!(IOC_C2H_DMA == 0xc028_5006);
    assert!(core::mem::size_of::<PinCuda>() == 24);
    assert!(core::mem::size_of::<H2c2hDma>() == 40);
    assert!(core::mem::size_of::<C2hDma>() == 40);
};

// ---- gdr extensions (numbers from 0x40 up; the reference part above never changes) ----
//
// Versioning: user space calls IOC_ABI_INFO first. A driver without it (the reference) answers ENOTTY or
// EINVAL: use only the reference ioctls then. `abi_version` major changes only if an extension changes
// incompatibly; a minor bump adds ioctls or `caps` bits. Structs only grow at the end, into `reserved`.

/// ABI version this header describes: major [31:16], minor [15:0]. 1.1 added IOC_REG_CACHE, 1.2
/// IOC_RAM_OWNER (and the card RAM's ownership rules behind it), 1.3 IOC_PIN_HOST, 1.4 IOC_IMPORT_DMABUF,
/// 1.5 IOC_STREAM and the `*_STREAM` transfer flags, 1.6 IOC_STREAM_RING, 1.7 its [`RING_EVENTFD`], 1.8
/// [`H2C_CARD_TIME`] and [`C2H_CARD_TIME`].
pub const ABI_VERSION: u32 = 1 << 16 | 8;
/// The minor version (of major 1) from which IOC_STREAM_RING takes [`RING_EVENTFD`].
pub const ABI_EVENTFD_MINOR: u32 = 7;
/// The minor version (of major 1) from which one-way requests take [`H2C_CARD_TIME`] / [`C2H_CARD_TIME`].
pub const ABI_CARD_TIME_MINOR: u32 = 8;
/// Major part of an ABI version.
pub const fn abi_major(v: u32) -> u32 {
    v >> 16
}

/// Capability: PIN_CUDA works through the Jetson nvidia_p2p API.
pub const CAP_CUDA_JETSON: u64 = 1 << 0;
/// Capability: PIN_CUDA works through the dGPU nvidia_p2p API.
pub const CAP_CUDA_DGPU: u64 = 1 << 1;
/// Capability: the card has the gdr ID block; `design_version` and `build_hash` are valid.
pub const CAP_ID_BLOCK: u64 = 1 << 2;
/// Capability: the card interrupts by MSI (else INTx).
pub const CAP_MSI: u64 = 1 << 3;
/// Capability: pinned host buffers are cached between requests (registration cache, IOC_REG_CACHE).
pub const CAP_REG_CACHE: u64 = 1 << 4;
/// Capability: the card RAM has one owner at a time and is scrubbed between owners (IOC_RAM_OWNER).
pub const CAP_RAM_OWNER: u64 = 1 << 5;
/// Capability: IOC_PIN_HOST pins host memory (`cuMemHostAlloc`) as a surface; no GPU provider needed.
pub const CAP_HOST_SURFACE: u64 = 1 << 6;
/// Capability: IOC_IMPORT_DMABUF imports another driver's dma-buf as a surface.
pub const CAP_DMABUF: u64 = 1 << 7;
/// Capability: the card's design has the stream block (its ID block says so): IOC_STREAM and the
/// `H2C_DST_STREAM`/`C2H_SRC_STREAM` transfers.
pub const CAP_STREAM: u64 = 1 << 8;

/// `PICOEVB_IOC_ABI_INFO` argument.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AbiInfo {
    /// Out: [`ABI_VERSION`] of the driver.
    pub abi_version: u32,
    /// Out: index N of /dev/picoevbN.
    pub card_index: u32,
    /// Out: `CAP_*` bits.
    pub caps: u64,
    /// Out: bytes of FPGA RAM.
    pub fpga_ram_size: u64,
    /// Out: design version from the ID block (see `picoevb_regs::idblock::version`), 0 without one.
    pub design_version: u32,
    /// Out: build hash from the ID block, 0 without one.
    pub build_hash: u32,
    /// Reserved, zero.
    pub reserved: [u64; 4],
}

/// Driver ABI version, capabilities and card identity.
pub const IOC_ABI_INFO: u32 = ior(0x40, core::mem::size_of::<AbiInfo>());

const _: () = {
    assert!(core::mem::size_of::<AbiInfo>() == 64);
    assert!(IOC_ABI_INFO == 0x8040_5040);
};

/// [`RegCache::op`]: only read the settings and counters.
pub const REG_CACHE_QUERY: u32 = 0;
/// [`RegCache::op`]: set `max_entries` and `max_bytes` (evicting down to them), then read.
pub const REG_CACHE_SET_LIMITS: u32 = 1;
/// [`RegCache::op`]: drop every cached buffer of this file (unpinning it), then read.
pub const REG_CACHE_FLUSH: u32 = 2;

/// `PICOEVB_IOC_REG_CACHE` argument: the registration cache of one open file. Host buffers used by H2C,
/// C2H and H2C2H stay pinned and DMA-mapped after the request, so using them again costs no pinning or
/// mapping; a cached buffer is dropped when its memory changes (munmap, mremap, madvise, fork's
/// copy-on-write, exit), when the least recently used must make room, when a new buffer shares a page with
/// it (the new one covers both), when PIN_CUDA pins its memory, on FLUSH and on close.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegCache {
    /// In: `REG_CACHE_*`.
    pub op: u32,
    /// In (SET_LIMITS): most buffers cached, at most `capacity`; 0 turns the cache off. Out: the limit.
    pub max_entries: u32,
    /// In (SET_LIMITS): most bytes cached; a larger buffer is never cached. Out: the limit.
    pub max_bytes: u64,
    /// Out: buffers cached now.
    pub entries: u32,
    /// Out: the largest `max_entries` this driver accepts.
    pub capacity: u32,
    /// Out: bytes cached now.
    pub bytes: u64,
    /// Out: requests served by a cached buffer, since open.
    pub hits: u64,
    /// Out: requests that pinned a buffer and cached it.
    pub misses: u64,
    /// Out: buffers dropped to make room (least recently used first) or by a lower limit.
    pub evictions: u64,
    /// Out: buffers dropped because their memory changed.
    pub invalidations: u64,
    /// Out: requests pinned for once only: cache off, buffer over `max_bytes`, memory the device may not
    /// write (a read-only mapping, for H2C), memory pinned as a GPU surface (PIN_CUDA), or memory that kept
    /// changing while it was pinned.
    pub uncached: u64,
    /// Reserved: zero in, zero out.
    pub reserved: [u64; 4],
}

/// Query or tune this file's registration cache (only with [`CAP_REG_CACHE`]).
pub const IOC_REG_CACHE: u32 = iowr(0x41, core::mem::size_of::<RegCache>());

const _: () = {
    assert!(core::mem::size_of::<RegCache>() == 104);
    assert!(IOC_REG_CACHE == 0xc068_5041);
};

/// [`RamOwner::op`]: only read `state`.
pub const RAM_QUERY: u32 = 0;
/// [`RamOwner::op`]: take the card RAM now, or fail with EBUSY if another holder has it (never waits).
pub const RAM_CLAIM: u32 = 1;
/// [`RamOwner::op`]: give it back (EBUSY while a request of the owner is in flight or if it is another
/// holder's); the next owner finds it zeroed.
pub const RAM_RELEASE: u32 = 2;
/// [`RamOwner::state`]: nobody owns the card RAM.
pub const RAM_FREE: u32 = 0;
/// [`RamOwner::state`]: the caller's (this file, or the process that claimed it) owns it.
pub const RAM_MINE: u32 = 1;
/// [`RamOwner::state`]: another holder owns it: H2C, C2H and H2C2H fail with EBUSY.
pub const RAM_OTHER: u32 = 2;

/// `PICOEVB_IOC_RAM_OWNER` argument: the card RAM's ownership. The first H2C, C2H or H2C2H through a file
/// takes the RAM when it is free, and so does CLAIM; while one holder (the files of the process that took
/// it, and any process using one of those files) owns it, every other holder's transfers and CLAIM fail with
/// EBUSY. It is free again when the owner's last file closes or on RELEASE, and it is zeroed before the
/// next owner's first use. A single holder using only the reference ioctls never notices.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RamOwner {
    /// In: `RAM_QUERY`, `RAM_CLAIM` or `RAM_RELEASE`.
    pub op: u32,
    /// Out: `RAM_FREE`, `RAM_MINE` or `RAM_OTHER`, after the operation.
    pub state: u32,
    /// Reserved: zero in, zero out.
    pub reserved: [u64; 3],
}

/// Query, claim or release the card RAM (only with [`CAP_RAM_OWNER`]).
pub const IOC_RAM_OWNER: u32 = iowr(0x42, core::mem::size_of::<RamOwner>());

const _: () = {
    assert!(core::mem::size_of::<RamOwner>() == 32);
    assert!(IOC_RAM_OWNER == 0xc020_5042);
};

/// Pin host memory as a surface (only with [`CAP_HOST_SURFACE`]): what Jetson Thor, and Orin after CUDA 14,
/// use for GPU data, since NVIDIA's nvidia_p2p API ends there (`cuMemHostAlloc` memory, which the GPU
/// reads and writes over its own path). Same argument as PIN_CUDA ([`PinCuda`]); the handle shares PIN_CUDA's
/// handles: UNPIN_CUDA ends it, and the DMA ioctls take it with their `*_CUDA` flags.
///
/// The memory must be private anonymous or shmem memory the caller can write (a shared file mapping that
/// needs writeback is EOPNOTSUPP, read-only memory EFAULT). Any `va` and `size`, as PIN_CUDA; the host-page
/// hull is pinned long-term and counts against `RLIMIT_MEMLOCK` (ENOMEM beyond it, without
/// `CAP_IPC_LOCK`). It lives until UNPIN_CUDA, close, or the memory going away: munmap, exit or a remap
/// ends it as the GPU provider's free callback would (DMAs in flight finish first, later ones are EINVAL),
/// while mprotect and fork leave it alone. Hulls that share a page with another surface or pin: EBUSY.
pub const IOC_PIN_HOST: u32 = iowr(0x43, core::mem::size_of::<PinCuda>());

const _: () = assert!(IOC_PIN_HOST == 0xc018_5043);

/// [`ImportDmabuf::placement`]: some of the bytes lie in system memory.
pub const DMABUF_SYSTEM: u32 = 1 << 0;
/// [`ImportDmabuf::placement`]: some of the bytes lie in another device's memory (a peer's BAR, e.g. a
/// dGPU's). Neither bit: the kernel cannot tell where an address the exporter gave lies.
pub const DMABUF_PEER: u32 = 1 << 1;

/// `PICOEVB_IOC_IMPORT_DMABUF` argument.
///
/// Alignment contract: `offset` and `size` are whole host pages (`sysconf(_SC_PAGESIZE)`), inside the
/// buffer; anything else is EINVAL, with a line in the kernel log.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportDmabuf {
    /// In: the dma-buf's file descriptor. The import holds the buffer itself: the fd may be closed after.
    pub fd: i32,
    /// In: zero.
    pub flags: u32,
    /// In: where the window starts in the buffer, in bytes.
    pub offset: u64,
    /// In: the window's length in bytes, at most the largest H2C2H.
    pub size: u64,
    /// Out: handle for the DMA ioctls, as PIN_CUDA's.
    pub handle: u32,
    /// Out: `DMABUF_*` bits: where the window's bytes lie.
    pub placement: u32,
    /// Reserved: zero in, zero out.
    pub reserved: [u64; 2],
}

/// Import a window of a dma-buf as a surface (only with [`CAP_DMABUF`]): a dGPU's memory exported by
/// NVIDIA's open kernel modules (`cuMemGetHandleForAddressRange`), a memfd through udmabuf, a heap's
/// buffer. The handle shares PIN_CUDA's handles: UNPIN_CUDA ends it, and the DMA ioctls take it with their
/// `*_CUDA` flags. The exporter moving or revoking the buffer ends it as the GPU provider's free callback
/// would (DMAs in flight finish first, later ones are EINVAL); a new import maps it where it is then.
/// EBADF for no fd, EINVAL for one that is no dma-buf, EAGAIN if the buffer moved during the import.
pub const IOC_IMPORT_DMABUF: u32 = iowr(0x44, core::mem::size_of::<ImportDmabuf>());

const _: () = {
    assert!(core::mem::size_of::<ImportDmabuf>() == 48);
    assert!(IOC_IMPORT_DMABUF == 0xc030_5044);
};

/// [`Stream::op`]: only read the settings and counters.
pub const STREAM_QUERY: u32 = 0;
/// [`Stream::op`]: set the source's `enable`, `record_bytes` and `period_ticks` (the record size only
/// while it is disabled, or in the same call that disables it), then read.
pub const STREAM_SET: u32 = 1;
/// [`Stream::op`]: the source's sequence, timestamp clock, counters and FIFO back to 0, then read.
pub const STREAM_CLEAR_SOURCE: u32 = 2;
/// [`Stream::op`]: the checker's counters and expected sequence back to 0, then read.
pub const STREAM_CLEAR_SINK: u32 = 3;

/// `PICOEVB_IOC_STREAM` argument: the card's stream block (`picoevb_regs::stream`), a record source the
/// C2H engine reads (`C2H_SRC_STREAM`) and a checker the H2C engine writes (`H2C_DST_STREAM`). The block is
/// the card's, shared by every holder: whoever reads the source takes the next records.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    /// In: `STREAM_QUERY`, `STREAM_SET`, `STREAM_CLEAR_SOURCE` or `STREAM_CLEAR_SINK`.
    pub op: u32,
    /// In (SET), out: 1 the source produces records, 0 it does not.
    pub enable: u32,
    /// In (SET), out: bytes per record, a multiple of 8 from 24 to 4096.
    pub record_bytes: u32,
    /// In (SET), out: 8 ns ticks between two records; 0 produces one whenever the engine asks (never drops).
    pub period_ticks: u32,
    /// Out: the sequence number of the next record the source produces.
    pub source_seq: u32,
    /// Out: records read out whole.
    pub source_sent: u32,
    /// Out: records dropped because the source's FIFO was full (their sequence numbers are used up).
    pub source_overruns: u32,
    /// Out: records the source's FIFO holds.
    pub source_depth: u32,
    /// Out: records the checker found whole, with a good CRC.
    pub sink_good: u32,
    /// Out: good records whose sequence number was not the one expected.
    pub sink_gaps: u32,
    /// Out: sequence numbers skipped, over every gap.
    pub sink_lost: u32,
    /// Out: records whose CRC or end marker was wrong.
    pub sink_crc_errors: u32,
    /// Out: record headers with an impossible length.
    pub sink_bad_length: u32,
    /// Out: the sequence number the checker expects next.
    pub sink_expect: u32,
    /// Reserved: zero in, zero out.
    pub reserved: [u64; 2],
}

/// Control and read the stream block (only with [`CAP_STREAM`]; EOPNOTSUPP without). An invalid `op`,
/// `enable` other than 0 or 1, an invalid record size, a record size change while the source stays
/// enabled, or nonzero `reserved` is EINVAL, with nothing changed.
pub const IOC_STREAM: u32 = iowr(0x45, core::mem::size_of::<Stream>());

const _: () = {
    assert!(core::mem::size_of::<Stream>() == 72);
    assert!(IOC_STREAM == 0xc048_5045);
};

/// [`StreamRing::flags`]: `ring` is the handle of a surface of this file (PIN_CUDA, PIN_HOST,
/// IMPORT_DMABUF) whose bytes from offset 0 hold the ring; without it `ring` is a user pointer.
pub const RING_CUDA: u32 = 1 << 0;
/// [`StreamRing::flags`]: never wait for the consumer; overwrite the oldest slots (the consumer counts them
/// as dropped, `picoevb_logic::stream_ring::Consumer`). Without it the driver waits for the consumer to
/// release a slot (back-pressure: the source then drops records itself and counts them, `source_overruns`).
pub const RING_DROP_OLDEST: u32 = 1 << 1;
/// [`StreamRing::flags`]: the driver empties the ring into the stream checker (H2C) instead of filling it
/// from the source: the caller writes whole slots and stores `produced` (with release order) after each;
/// the driver moves them in chains and stores `consumed` once a chain's bytes were read, and the caller
/// waits for it before it writes a slot again. Not with [`RING_DROP_OLDEST`].
pub const RING_H2C: u32 = 1 << 2;
/// [`StreamRing::flags`] (gdr 1.7): `eventfd` is an eventfd the driver signals (adds 1 to) each time it
/// publishes progress, after the store (`produced` filling, `consumed` emptying), and once more when the
/// ring ends, however it ends: the other side may sleep on it (read, poll, epoll) instead of polling the
/// counters. Held from the call's start to its end; a bad descriptor is EBADF, one that is not an eventfd
/// EINVAL, before anything is written.
pub const RING_EVENTFD: u32 = 1 << 3;
/// Every [`StreamRing::flags`] bit.
pub const RING_FLAGS: u32 = RING_CUDA | RING_DROP_OLDEST | RING_H2C | RING_EVENTFD;

/// The words a ring's producer and consumer share, in the caller's memory at [`StreamRing::control`]
/// (8-byte aligned, outside the ring). Counters are in slots since the start and never wrap; slot `n` lives
/// at index `n % slots`. The driver stores each of its words whole (one aligned 64-bit store, the one that
/// publishes slots with release order) and never writes the caller's: filling a ring, the driver is the
/// producer (`writing`, `produced`, `waits`); emptying one ([`RING_H2C`]), the consumer (`writing`,
/// `consumed`, `waits`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingControl {
    /// Driver: stored before a chain starts: the DMA may be writing (or, emptying, reading) slots below it.
    pub writing: u64,
    /// Producer: slots below it are whole.
    pub produced: u64,
    /// Consumer: slots it released (read or dropped); read by a back-pressure producer.
    pub consumed: u64,
    /// Caller: nonzero asks the driver to stop at the next chain boundary.
    pub stop: u64,
    /// Driver: times it waited for the caller (a full ring it fills, an empty ring it empties).
    pub waits: u64,
}

/// `PICOEVB_IOC_STREAM_RING` argument (gdr 1.6, with [`CAP_STREAM`]): the driver fills a ring of `slots`
/// slots from the stream source, one C2H per chain of slots (or with [`RING_H2C`] empties it into the
/// stream checker, one H2C per chain), publishing its progress in the [`RingControl`] at `control`, with
/// no system call per slot. The call returns once `total` slots are moved (0: never), the control's `stop`
/// is set (0 either way), a signal arrives (EINTR), or a chain fails (its errno: ENODEV once the card is
/// removed, EINVAL once the ring's surface is gone).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamRing {
    /// In: the ring's first byte (a user pointer), or with [`RING_CUDA`] a surface handle.
    pub ring: u64,
    /// In: user pointer to the [`RingControl`].
    pub control: u64,
    /// In: bytes per slot, a multiple of [`STREAM_ALIGN`] (whole records, for a checking consumer).
    pub slot_bytes: u64,
    /// In: slots to move before returning; 0 until stopped.
    pub total: u64,
    /// In: slots in the ring, at least 2.
    pub slots: u32,
    /// In: most slots one chain fills; 0: up to half the ring.
    pub chain_slots: u32,
    /// In: `RING_*` flags.
    pub flags: u32,
    /// In: with [`RING_EVENTFD`], the eventfd the driver signals (a file descriptor); zero without.
    pub eventfd: i32,
    /// Out (on success): slots filled (or emptied).
    pub produced: u64,
    /// Out (on success): chains run.
    pub chains: u64,
    /// Out (on success): times the driver waited for the caller.
    pub waits: u64,
    /// Reserved: zero in, zero out.
    pub reserved: [u64; 2],
}

/// Runs a stream ring (only with [`CAP_STREAM`]; EOPNOTSUPP without). Bad flags, sizes or counts,
/// a ring that does not fit, a control block that is misaligned or inside a host ring, a nonzero `eventfd`
/// without [`RING_EVENTFD`] or nonzero `reserved`: EINVAL, nothing written; a ring or control block beyond user space: EFAULT.
pub const IOC_STREAM_RING: u32 = iowr(0x46, core::mem::size_of::<StreamRing>());

const _: () = {
    assert!(core::mem::size_of::<RingControl>() == 40);
    assert!(core::mem::size_of::<StreamRing>() == 88);
    assert!(IOC_STREAM_RING == 0xc058_5046);
};
