// SPDX-License-Identifier: GPL-2.0

//! The `extern "C"` surface the 5.10 glue calls: ioctl decoding and argument checks, descriptor chains,
//! segment coalescing, engine-status decoding and the register map, each a thin adapter over the shared
//! logic. cbindgen declares them for C in `../logic.h` (`../cbindgen.toml`, checked by `tests/header.rs`);
//! `PEVB_LAYOUT` also lets the glue check at load time that both sides agree on the structs' sizes.

use crate::cache_policy::{Policy, Range};
use crate::ram_owner::{Grant, Member, Op, RamOwner};
use crate::segments::{self, Cursor, Segment};
use crate::surface_life::{Life, View};
use crate::xdma::{self, Descriptor, Dir};
use crate::{
    abi, cache_policy, chain, channel, errno::Errno, ids, neg, pipeline, ram_owner, request, status,
};
use core::ffi::{c_char, c_int, c_void};
use core::mem::size_of;
use core::ptr;

/// What an ioctl command asks for (`pevb_ioctl_op`).
pub const PEVB_OP_LED: c_int = 1;
pub const PEVB_OP_CARD_INFO: c_int = 2;
pub const PEVB_OP_ABI_INFO: c_int = 3;
pub const PEVB_OP_H2C: c_int = 4;
pub const PEVB_OP_C2H: c_int = 5;
pub const PEVB_OP_H2C2H: c_int = 6;
pub const PEVB_OP_PIN_CUDA: c_int = 7;
pub const PEVB_OP_UNPIN_CUDA: c_int = 8;
pub const PEVB_OP_REG_CACHE: c_int = 9;
pub const PEVB_OP_RAM_OWNER: c_int = 10;
pub const PEVB_OP_PIN_HOST: c_int = 11;
pub const PEVB_OP_STREAM: c_int = 12;

/// One side of a transfer: user memory at `addr`, or the CUDA surface `handle`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct PevbSide {
    pub cuda: u32,
    pub handle: u32,
    pub addr: u64,
}

/// A checked request. H2C: `src` and `fpga`; C2H: `dst` and `fpga`; H2C2H: `src` and `dst`; PIN_CUDA:
/// `src.addr` and `len`; UNPIN_CUDA: `value` (the handle); LED: `value`; RAM_OWNER: `value` (`RAM_QUERY`,
/// `RAM_CLAIM` or `RAM_RELEASE`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct PevbReq {
    pub op: u32,
    pub value: u32,
    pub src: PevbSide,
    pub dst: PevbSide,
    pub fpga: u64,
    pub len: u64,
}

/// What the glue knows about a card, for CARD_INFO and ABI_INFO.
#[repr(C)]
pub struct PevbFacts {
    pub card_index: u32,
    pub msi: u32,
    pub id_block: u32,
    pub design_version: u32,
    pub build_hash: u32,
    /// A GPU-memory provider (nvidia_p2p, Jetson flavour) is loaded.
    pub provider: u32,
    /// The registration cache works on this kernel (it has mmu notifiers).
    pub reg_cache: u32,
    /// The ID block says the design has the stream block.
    pub stream: u32,
    pub ram_size: u64,
}

/// Where a built chain starts and what it covers (`chain::Chain`).
#[repr(C)]
pub struct PevbChain {
    pub first: u64,
    pub first_adj: u32,
    pub count: u32,
    pub bytes: u64,
}

/// One chain of a pipeline step (`pipeline::Move`); `len` 0: that engine does not run in the step.
#[repr(C)]
#[derive(Default)]
pub struct PevbMove {
    /// Offset in the source (H2C) or destination (C2H) buffer.
    pub offset: u64,
    pub len: u64,
    /// FPGA RAM address of the half it goes through.
    pub ram: u64,
}

/// What runs at once in a step of the round trip (`pipeline::Step`).
#[repr(C)]
#[derive(Default)]
pub struct PevbStep {
    pub h2c: PevbMove,
    pub c2h: PevbMove,
}

/// Sizes of the structs above and of the shared ones the glue handles, as Rust lays them out.
#[repr(C)]
pub struct PevbLayout {
    pub req: u32,
    pub facts: u32,
    pub chain: u32,
    pub segment: u32,
    pub descriptor: u32,
    pub regs: u32,
    pub step: u32,
    pub range: u32,
    /// `cache_policy::Policy`: C allocates this many bytes, aligned to `policy_align`, and never looks inside.
    pub policy: u32,
    pub policy_align: u32,
    /// `cache_policy::CAPACITY`: the slots of the glue's table of cached pins.
    pub cache_slots: u32,
    /// `struct pevb_ram_owner`.
    pub owner: u32,
    pub owner_align: u32,
    /// `surface_life::Life`: `struct pevb_life`.
    pub life: u32,
    /// `surface_life::View`: `struct pevb_life_view`.
    pub life_view: u32,
}

#[no_mangle]
pub static PEVB_LAYOUT: PevbLayout = PevbLayout {
    req: size_of::<PevbReq>() as u32,
    facts: size_of::<PevbFacts>() as u32,
    chain: size_of::<PevbChain>() as u32,
    segment: size_of::<Segment>() as u32,
    descriptor: PEVB_DESC_SIZE as u32,
    regs: size_of::<PevbRegs>() as u32,
    step: size_of::<PevbStep>() as u32,
    range: size_of::<PevbRange>() as u32,
    policy: size_of::<cache_policy::Policy>() as u32,
    policy_align: core::mem::align_of::<cache_policy::Policy>() as u32,
    cache_slots: cache_policy::CAPACITY as u32,
    owner: size_of::<PevbRamOwner>() as u32,
    owner_align: core::mem::align_of::<PevbRamOwner>() as u32,
    life: size_of::<Life>() as u32,
    life_view: size_of::<View>() as u32,
};

/// The ioctl's operation, or -ENOTTY: decided before any user memory is touched.
#[no_mangle]
pub extern "C" fn pevb_ioctl_op(cmd: u32) -> c_int {
    match cmd {
        abi::IOC_LED => PEVB_OP_LED,
        abi::IOC_CARD_INFO => PEVB_OP_CARD_INFO,
        abi::IOC_ABI_INFO => PEVB_OP_ABI_INFO,
        abi::IOC_H2C_DMA => PEVB_OP_H2C,
        abi::IOC_C2H_DMA => PEVB_OP_C2H,
        abi::IOC_H2C2H_DMA => PEVB_OP_H2C2H,
        abi::IOC_PIN_CUDA => PEVB_OP_PIN_CUDA,
        abi::IOC_UNPIN_CUDA => PEVB_OP_UNPIN_CUDA,
        abi::IOC_REG_CACHE => PEVB_OP_REG_CACHE,
        abi::IOC_RAM_OWNER => PEVB_OP_RAM_OWNER,
        abi::IOC_PIN_HOST => PEVB_OP_PIN_HOST,
        abi::IOC_STREAM => PEVB_OP_STREAM,
        _ => neg(Errno::ENOTTY),
    }
}

/// The `T` the glue copied from user memory into `buf` (`len` bytes, the command's size field).
///
/// # Safety
/// `buf` is valid for reading `len` bytes.
pub(crate) unsafe fn read_arg<T: Copy>(buf: *const c_void, len: usize) -> Result<T, Errno> {
    if buf.is_null() || len != size_of::<T>() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: `buf` holds `size_of::<T>()` bytes (checked above, caller's contract); the ABI structs are
    // plain integers, valid for any bits; the copy is unaligned-safe.
    Ok(unsafe { ptr::read_unaligned(buf.cast::<T>()) })
}

/// Writes `v` into the glue's copy-out buffer.
///
/// # Safety
/// `buf` is valid for writing `len` bytes.
pub(crate) unsafe fn put<T: Copy>(buf: *mut c_void, len: usize, v: T) -> c_int {
    if buf.is_null() || len != size_of::<T>() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: as in `read_arg`, for writing.
    unsafe { ptr::write_unaligned(buf.cast::<T>(), v) };
    0
}

fn side(h: request::Host) -> PevbSide {
    match h {
        request::Host::User(addr) => PevbSide {
            cuda: 0,
            handle: 0,
            addr,
        },
        request::Host::Cuda(handle) => PevbSide {
            cuda: 1,
            handle,
            addr: 0,
        },
    }
}

fn one_way(op: c_int, x: request::OneWay) -> PevbReq {
    let mut r = PevbReq {
        op: op as u32,
        fpga: x.fpga,
        len: x.len,
        ..PevbReq::default()
    };
    if op == PEVB_OP_H2C {
        r.src = side(x.host);
    } else {
        r.dst = side(x.host);
    }
    r
}

/// Checks the arguments of operation `op` on the card `facts` describes: `arg` is the ioctl's argument,
/// `buf`/`len` the bytes copied in from it (if the command writes). Fills `out`; returns 0 or a negative
/// errno.
///
/// # Safety
/// `buf` is valid for `len` bytes (or null with `len` 0); `facts` is valid for reading; `out` is valid for
/// writing.
#[no_mangle]
pub unsafe extern "C" fn pevb_ioctl_check(
    op: c_int,
    arg: usize,
    buf: *const c_void,
    len: usize,
    facts: *const PevbFacts,
    out: *mut PevbReq,
) -> c_int {
    // SAFETY: the caller's contract.
    let f = unsafe { &*facts };
    let card = request::Card {
        ram: f.ram_size,
        stream: f.stream != 0,
    };
    // SAFETY: the caller's contract, for every `read_arg` call below.
    let r = unsafe {
        match op {
            PEVB_OP_LED => request::led_value(arg).map(|value| PevbReq {
                op: op as u32,
                value,
                ..PevbReq::default()
            }),
            PEVB_OP_H2C => read_arg::<abi::H2cDma>(buf, len)
                .and_then(|a| request::h2c(&a, &card))
                .map(|x| one_way(op, x)),
            PEVB_OP_C2H => read_arg::<abi::C2hDma>(buf, len)
                .and_then(|a| request::c2h(&a, &card))
                .map(|x| one_way(op, x)),
            PEVB_OP_H2C2H => read_arg::<abi::H2c2hDma>(buf, len)
                .and_then(|a| request::h2c2h(&a))
                .map(|x| PevbReq {
                    op: op as u32,
                    src: side(x.src),
                    dst: side(x.dst),
                    len: x.len,
                    ..PevbReq::default()
                }),
            PEVB_OP_PIN_CUDA | PEVB_OP_PIN_HOST => read_arg::<abi::PinCuda>(buf, len)
                .and_then(|a| request::pin_cuda(&a))
                .map(|(va, size)| PevbReq {
                    op: op as u32,
                    src: PevbSide {
                        addr: va,
                        ..PevbSide::default()
                    },
                    len: size,
                    ..PevbReq::default()
                }),
            PEVB_OP_UNPIN_CUDA => read_arg::<abi::UnpinCuda>(buf, len).map(|a| PevbReq {
                op: op as u32,
                value: a.handle,
                ..PevbReq::default()
            }),
            PEVB_OP_REG_CACHE => read_arg::<abi::RegCache>(buf, len)
                .and_then(|a| cache_policy::parse(&a))
                .map(|_| PevbReq {
                    op: op as u32,
                    ..PevbReq::default()
                }),
            PEVB_OP_RAM_OWNER => read_arg::<abi::RamOwner>(buf, len)
                .and_then(|a| ram_owner::parse(&a))
                .map(|o| PevbReq {
                    op: op as u32,
                    value: match o {
                        Op::Query => abi::RAM_QUERY,
                        Op::Claim => abi::RAM_CLAIM,
                        Op::Release => abi::RAM_RELEASE,
                    },
                    ..PevbReq::default()
                }),
            // Checked here, before the card is held; `pevb_user_stream` parses it again to run it.
            PEVB_OP_STREAM if !card.stream => Err(Errno::EOPNOTSUPP),
            PEVB_OP_STREAM => read_arg::<abi::Stream>(buf, len)
                .and_then(|a| crate::stream_ctl::parse(&a))
                .map(|_| PevbReq {
                    op: op as u32,
                    ..PevbReq::default()
                }),
            PEVB_OP_CARD_INFO | PEVB_OP_ABI_INFO => Ok(PevbReq {
                op: op as u32,
                ..PevbReq::default()
            }),
            _ => Err(Errno::ENOTTY),
        }
    };
    match r {
        Ok(req) => {
            // SAFETY: caller's contract.
            unsafe { out.write(req) };
            0
        }
        Err(e) => neg(e),
    }
}

/// Writes a finished request's results into the copy-out buffer: the DMA time of a transfer, the handle of
/// a PIN_CUDA, the state after a RAM_OWNER (in `handle`).
///
/// # Safety
/// `buf` is valid for reading and writing `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn pevb_ioctl_done(
    op: c_int,
    buf: *mut c_void,
    len: usize,
    dma_time_ns: u64,
    handle: u32,
) -> c_int {
    // SAFETY: caller's contract, for every `read_arg`/`put` below.
    unsafe {
        match op {
            PEVB_OP_H2C => match read_arg::<abi::H2cDma>(buf, len) {
                Ok(a) => put(buf, len, abi::H2cDma { dma_time_ns, ..a }),
                Err(e) => neg(e),
            },
            PEVB_OP_C2H => match read_arg::<abi::C2hDma>(buf, len) {
                Ok(a) => put(buf, len, abi::C2hDma { dma_time_ns, ..a }),
                Err(e) => neg(e),
            },
            PEVB_OP_H2C2H => match read_arg::<abi::H2c2hDma>(buf, len) {
                Ok(a) => put(buf, len, abi::H2c2hDma { dma_time_ns, ..a }),
                Err(e) => neg(e),
            },
            PEVB_OP_PIN_CUDA | PEVB_OP_PIN_HOST => match read_arg::<abi::PinCuda>(buf, len) {
                Ok(a) => put(buf, len, abi::PinCuda { handle, ..a }),
                Err(e) => neg(e),
            },
            PEVB_OP_RAM_OWNER => match read_arg::<abi::RamOwner>(buf, len) {
                Ok(a) => put(buf, len, abi::RamOwner { state: handle, ..a }),
                Err(e) => neg(e),
            },
            _ => neg(Errno::EINVAL),
        }
    }
}

/// Fills CARD_INFO or ABI_INFO's answer from what the glue knows about the card.
///
/// # Safety
/// `buf` is valid for writing `len` bytes; `facts` is valid for reading.
#[no_mangle]
pub unsafe extern "C" fn pevb_ioctl_info(
    op: c_int,
    buf: *mut c_void,
    len: usize,
    facts: *const PevbFacts,
) -> c_int {
    // SAFETY: caller's contract.
    let f = unsafe { &*facts };
    match op {
        // SAFETY: caller's contract.
        PEVB_OP_CARD_INFO => unsafe {
            put(
                buf,
                len,
                abi::CardInfo {
                    fpga_ram_size: f.ram_size,
                },
            )
        },
        PEVB_OP_ABI_INFO => {
            let mut caps = 0;
            if f.msi != 0 {
                caps |= abi::CAP_MSI;
            }
            if f.provider != 0 {
                caps |= abi::CAP_CUDA_JETSON;
            }
            if f.reg_cache != 0 {
                caps |= abi::CAP_REG_CACHE;
            }
            if f.stream != 0 {
                caps |= abi::CAP_STREAM;
            }
            // ram.c enforces ram_owner on every kernel this module builds for; host surfaces need only the
            // mmu notifiers p2p.c needs anyway.
            caps |= abi::CAP_RAM_OWNER | abi::CAP_HOST_SURFACE;
            let (design_version, build_hash) = if f.id_block != 0 {
                caps |= abi::CAP_ID_BLOCK;
                (f.design_version, f.build_hash)
            } else {
                (0, 0)
            };
            let info = abi::AbiInfo {
                abi_version: abi::ABI_VERSION,
                card_index: f.card_index,
                caps,
                fpga_ram_size: f.ram_size,
                design_version,
                build_hash,
                reserved: [0; 4],
            };
            // SAFETY: caller's contract.
            unsafe { put(buf, len, info) }
        }
        _ => neg(Errno::EINVAL),
    }
}

/// Merges bus-contiguous neighbours of `segs[..n]` in place; returns how many remain.
///
/// # Safety
/// `segs` is valid for reading and writing `n` segments.
#[no_mangle]
pub unsafe extern "C" fn pevb_segments_coalesce(segs: *mut Segment, n: usize) -> usize {
    if segs.is_null() || n == 0 {
        return 0;
    }
    // SAFETY: caller's contract.
    segments::coalesce(unsafe { core::slice::from_raw_parts_mut(segs, n) })
}

/// Step `s` of the full-duplex round trip of `len` bytes through `ram` bytes of card RAM in `align`-byte
/// chunks (`pipeline::Pipeline`): 0 and `*out`, 1 when `s` is past the last step, or a negative errno.
///
/// # Safety
/// `out` is valid for writing.
#[no_mangle]
pub unsafe extern "C" fn pevb_pipeline_step(
    len: u64,
    ram: u64,
    align: u64,
    s: u64,
    out: *mut PevbStep,
) -> c_int {
    let plan = match pipeline::Pipeline::new(len, ram, align) {
        Ok(p) => p,
        Err(e) => return neg(e),
    };
    if s >= plan.steps() {
        return 1;
    }
    let mv = |m: Option<pipeline::Move>| {
        m.map_or(PevbMove::default(), |m| PevbMove {
            offset: m.offset,
            len: m.len,
            ram: m.ram_addr,
        })
    };
    let step = plan.step(s);
    // SAFETY: caller's contract.
    unsafe {
        out.write(PevbStep {
            h2c: mv(step.h2c),
            c2h: mv(step.c2h),
        })
    };
    0
}

/// How an H2C run of `h2c` bytes and a C2H run of `c2h` bytes started together (0: that engine does not
/// run) learn they ended (`pipeline::wakes`): bit 0 set if H2C is polled, bit 1 if C2H is; a clear bit
/// means its interrupt is armed.
#[no_mangle]
pub extern "C" fn pevb_pipeline_polled(h2c: u64, c2h: u64) -> u32 {
    let (h, c) = pipeline::wakes(h2c, c2h);
    u32::from(h == pipeline::Wake::Poll) | (u32::from(c == pipeline::Wake::Poll) << 1)
}

/// Whether a status read says the run is over (`channel::Status::ended`): idle, or an error bit.
#[no_mangle]
pub extern "C" fn pevb_status_ended(st: u32) -> bool {
    channel::Status(st).ended()
}

/// Whether the sorted page-frame lists `a[..na]` and `b[..nb]` share a frame (the overlap rule of GPU
/// surfaces: one memory pinned under two addresses is one surface). Either may be empty.
///
/// # Safety
/// `a` is valid for reading `na` frames and `b` for `nb` (either may be null when its length is 0).
#[no_mangle]
pub unsafe extern "C" fn pevb_share_page_frames(
    a: *const u64,
    na: usize,
    b: *const u64,
    nb: usize,
) -> bool {
    if a.is_null() || b.is_null() || na == 0 || nb == 0 {
        return false;
    }
    // SAFETY: caller's contract.
    let (a, b) = unsafe {
        (
            core::slice::from_raw_parts(a, na),
            core::slice::from_raw_parts(b, nb),
        )
    };
    cache_policy::share_page_frames(a, b)
}

/// Builds one chain into `descs[..ndescs]` (at bus address `base`) for up to `len` bytes of the host buffer
/// `segs[..nsegs]` from its byte `host_off`, and FPGA RAM from `fpga`. `out.bytes` says how far it got (the
/// table may fill first). Returns 0 or a negative errno.
///
/// # Safety
/// `segs` is valid for reading `nsegs` segments, `descs` for writing `ndescs` descriptors (not read by the
/// device meanwhile), `out` for writing.
#[no_mangle]
pub unsafe extern "C" fn pevb_chain_build(
    c2h: bool,
    segs: *const Segment,
    nsegs: usize,
    host_off: u64,
    fpga: u64,
    len: u64,
    descs: *mut Descriptor,
    ndescs: usize,
    base: u64,
    out: *mut PevbChain,
) -> c_int {
    if segs.is_null() || descs.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: caller's contract.
    let (segs, descs) = unsafe {
        (
            core::slice::from_raw_parts(segs, nsegs),
            core::slice::from_raw_parts_mut(descs, ndescs),
        )
    };
    let mut cur = Cursor::new(segs);
    if let Err(e) = cur.skip(host_off) {
        return neg(e);
    }
    let dir = if c2h { Dir::C2h } else { Dir::H2c };
    match chain::build(dir, &mut cur, len, fpga, xdma::DESC_LEN_MAX, descs, base) {
        Ok(c) => {
            // SAFETY: caller's contract.
            unsafe {
                out.write(PevbChain {
                    first: c.first,
                    first_adj: c.first_adj,
                    count: c.count as u32,
                    bytes: c.bytes,
                })
            };
            0
        }
        Err(e) => neg(e),
    }
}

/// 0 if an engine's status word says its chain ended cleanly, else a negative errno.
#[no_mangle]
pub extern "C" fn pevb_status_outcome(st: u32) -> c_int {
    match status::outcome(st) {
        Ok(()) => 0,
        Err(e) => neg(e),
    }
}

/// A short name of the first error bit of `st` (not NUL-terminated: `*len` bytes).
///
/// # Safety
/// `len` is valid for writing.
#[no_mangle]
pub unsafe extern "C" fn pevb_status_describe(st: u32, len: *mut usize) -> *const c_char {
    let s = status::describe(st);
    // SAFETY: caller's contract.
    unsafe { len.write(s.len()) };
    s.as_ptr().cast()
}

/// Whether the identifier register `id` of XDMA block `target` is an XDMA's.
#[no_mangle]
pub extern "C" fn pevb_identifier_ok(id: u32, target: u32) -> bool {
    xdma::identifier_matches(id, target as usize)
}

/// Whether PCI IDs are the PicoEVB design's (10de:0001 is also NVIDIA's HTG-K800 design, which this driver
/// does not support: the subsystem tells them apart).
#[no_mangle]
pub extern "C" fn pevb_ids_ok(vendor: u16, device: u16, subvendor: u16, subdevice: u16) -> bool {
    vendor == ids::VENDOR_ID
        && device == ids::DEVICE_ID
        && subvendor == ids::SUBSYSTEM_VENDOR_ID
        && subdevice == ids::SUBSYSTEM_ID_PICOEVB
}

/// Per-engine register offsets and bits (`Dir`'s methods).
#[repr(C)]
pub struct PevbEngineRegs {
    pub channel: u32,
    pub sgdma: u32,
    pub irq_bit: u32,
    pub halt_bit: u32,
}

const fn engine_regs(d: Dir) -> PevbEngineRegs {
    PevbEngineRegs {
        channel: d.channel_base() as u32,
        sgdma: d.sgdma_base() as u32,
        irq_bit: d.irq_bit(),
        halt_bit: d.sgdma_common_bit(),
    }
}

/// The register map the glue drives, from the one definition in `crates/picoevb-regs`: the C side names
/// no offset or bit of its own.
#[repr(C)]
pub struct PevbRegs {
    pub bar_user: u32,
    pub bar_user_size: u32,
    pub bar_dma: u32,
    pub bar_dma_size: u32,
    pub ram_size: u64,
    /// XDMA block offsets of the six targets probe checks, in this order: H2C, C2H, IRQ, config, H2C
    /// SGDMA, C2H SGDMA; `targets` holds their target numbers.
    pub blocks: [u32; 6],
    pub targets: [u32; 6],
    pub engine: [PevbEngineRegs; 2],
    pub ch_control: u32,
    pub ch_control_w1c: u32,
    pub ch_status: u32,
    pub ch_status_rc: u32,
    pub ch_completed: u32,
    pub ch_int_mask: u32,
    pub sg_desc_lo: u32,
    pub sg_desc_hi: u32,
    pub sg_desc_adj: u32,
    pub sgc_halt_w1s: u32,
    pub sgc_halt_w1c: u32,
    pub irq_chan_en_w1s: u32,
    pub irq_chan_en_w1c: u32,
    pub irq_user_en_w1c: u32,
    pub irq_chan_vec: u32,
    pub irq_chan_req: u32,
    pub ctrl_run: u32,
    /// Control word that starts a chain: Run plus logging of every status bit.
    pub ctrl_start: u32,
    /// Interrupt sources a chain reports: its end and every error.
    pub int_mask: u32,
    pub stat_busy: u32,
    pub desc_len_max: u32,
    pub desc_size: u32,
}

const TARGETS: [usize; 6] = [
    xdma::TARGET_H2C,
    xdma::TARGET_C2H,
    xdma::TARGET_IRQ,
    xdma::TARGET_CONFIG,
    xdma::TARGET_H2C_SGDMA,
    xdma::TARGET_C2H_SGDMA,
];

#[no_mangle]
pub static PEVB_REGS: PevbRegs = PevbRegs {
    bar_user: ids::BAR_USER,
    bar_user_size: ids::BAR_USER_SIZE as u32,
    bar_dma: ids::BAR_DMA,
    bar_dma_size: ids::BAR_DMA_SIZE as u32,
    ram_size: ids::FPGA_RAM_SIZE,
    blocks: [
        xdma::block(TARGETS[0], 0) as u32,
        xdma::block(TARGETS[1], 0) as u32,
        xdma::block(TARGETS[2], 0) as u32,
        xdma::block(TARGETS[3], 0) as u32,
        xdma::block(TARGETS[4], 0) as u32,
        xdma::block(TARGETS[5], 0) as u32,
    ],
    targets: [
        TARGETS[0] as u32,
        TARGETS[1] as u32,
        TARGETS[2] as u32,
        TARGETS[3] as u32,
        TARGETS[4] as u32,
        TARGETS[5] as u32,
    ],
    engine: [engine_regs(Dir::H2c), engine_regs(Dir::C2h)],
    ch_control: xdma::CH_CONTROL as u32,
    ch_control_w1c: xdma::CH_CONTROL_W1C as u32,
    ch_status: xdma::CH_STATUS as u32,
    ch_status_rc: xdma::CH_STATUS_RC as u32,
    ch_completed: xdma::CH_COMPLETED_COUNT as u32,
    ch_int_mask: xdma::CH_INT_MASK as u32,
    sg_desc_lo: xdma::SG_DESC_LO as u32,
    sg_desc_hi: xdma::SG_DESC_HI as u32,
    sg_desc_adj: xdma::SG_DESC_ADJ as u32,
    sgc_halt_w1s: (xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1S) as u32,
    sgc_halt_w1c: (xdma::SGDMA_COMMON + xdma::SGC_DESC_CTRL_W1C) as u32,
    irq_chan_en_w1s: (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1S) as u32,
    irq_chan_en_w1c: (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C) as u32,
    irq_user_en_w1c: (xdma::IRQ_BLOCK + xdma::IRQ_USER_EN_W1C) as u32,
    irq_chan_vec: (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_VEC) as u32,
    irq_chan_req: (xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ) as u32,
    ctrl_run: xdma::CTRL_RUN,
    ctrl_start: xdma::CTRL_RUN | xdma::CTRL_IE_ALL,
    int_mask: xdma::STAT_DESC_STOPPED | xdma::STAT_DESC_COMPLETED | xdma::STAT_ERRORS,
    stat_busy: xdma::STAT_BUSY,
    desc_len_max: xdma::DESC_LEN_MAX,
    desc_size: xdma::DESC_SIZE as u32,
};

// ---- The registration cache (`cache_policy`; `cache_glue.rs` runs its sequences): C keeps the policy ----

/// A host range as C passes it (`cache_policy::Range`; `mm` is an identity, never dereferenced).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct PevbRange {
    pub mm: u64,
    pub addr: u64,
    pub len: u64,
}

impl PevbRange {
    /// As the logic takes it.
    pub(crate) fn get(self) -> Range {
        Range {
            mm: self.mm as usize,
            addr: self.addr,
            len: self.len,
        }
    }
}

/// Bytes of an XDMA descriptor (`xdma::Descriptor`); C only sizes its tables with it.
pub const PEVB_DESC_SIZE: usize = 32;
const _: () = assert!(size_of::<Descriptor>() == PEVB_DESC_SIZE);

/// The policy at `p`.
///
/// # Safety
/// `p` was initialised by `pevb_policy_init`, is aligned to `PEVB_LAYOUT.policy_align`, and nothing else
/// uses it meanwhile (the glue holds its table lock).
unsafe fn policy<'a>(p: *mut Policy) -> &'a mut Policy {
    // SAFETY: caller's contract.
    unsafe { &mut *p }
}

/// Makes `p` an empty cache with the default limits, for `page`-byte pages (a power of two).
///
/// # Safety
/// `p` is valid for writing `PEVB_LAYOUT.policy` bytes and aligned to `PEVB_LAYOUT.policy_align`. The
/// policy owns nothing: C frees the bytes without a destructor.
#[no_mangle]
pub unsafe extern "C" fn pevb_policy_init(p: *mut Policy, page: u64) {
    // SAFETY: caller's contract.
    unsafe { p.write(Policy::new(page)) };
}

/// Buffers cached now (the debugfs state file).
///
/// # Safety
/// As for `policy`.
#[no_mangle]
pub unsafe extern "C" fn pevb_policy_entries(p: *mut Policy) -> u32 {
    // SAFETY: caller's contract.
    unsafe { policy(p) }.entries()
}

/// The segments of bytes `[offset, offset + len)` of the buffer `segs[..n]` (`segments::window`) into
/// `out[..nout]`: how many, or a negative errno (-EINVAL past the buffer, or where `out` is short).
///
/// # Safety
/// `segs` is valid for reading `n` segments, `out` for writing `nout`.
#[no_mangle]
pub unsafe extern "C" fn pevb_segments_window(
    segs: *const Segment,
    n: usize,
    offset: u64,
    len: u64,
    out: *mut Segment,
    nout: usize,
) -> isize {
    if segs.is_null() || out.is_null() {
        return neg(Errno::EINVAL) as isize;
    }
    // SAFETY: caller's contract.
    let (segs, out) = unsafe {
        (
            core::slice::from_raw_parts(segs, n),
            core::slice::from_raw_parts_mut(out, nout),
        )
    };
    let w = match segments::window(segs, offset, len) {
        Ok(w) => w,
        Err(e) => return neg(e) as isize,
    };
    let mut k = 0;
    for s in w {
        let Some(slot) = out.get_mut(k) else {
            return neg(Errno::EINVAL) as isize;
        };
        *slot = s;
        k += 1;
    }
    k as isize
}

// ---- The card RAM's ownership (`ram_owner`); every call under the card's `ram_lock` (ram.c) ----

/// What `pevb_ram_begin`/`pevb_ram_claim` answer besides a negative errno.
pub const PEVB_RAM_GO: c_int = 0;
pub const PEVB_RAM_SCRUB_FIRST: c_int = 1;

/// The card RAM's ownership as C stores it (`struct pevb_ram_owner`): a `ram_owner::RamOwner` in words C
/// never reads.
#[repr(C)]
pub struct PevbRamOwner {
    opaque: [u64; PEVB_RAM_OWNER_WORDS],
}

/// Words of `PevbRamOwner`.
pub const PEVB_RAM_OWNER_WORDS: usize = 4;
const _: () = assert!(
    size_of::<RamOwner>() <= size_of::<PevbRamOwner>()
        && core::mem::align_of::<RamOwner>() <= core::mem::align_of::<PevbRamOwner>()
);

fn grant(g: Result<Grant, Errno>) -> c_int {
    match g {
        Ok(Grant::Go) => PEVB_RAM_GO,
        Ok(Grant::ScrubFirst) => PEVB_RAM_SCRUB_FIRST,
        Err(e) => neg(e),
    }
}

/// The ownership at `o` and the membership at `m`.
///
/// # Safety
/// `o` was initialised by `pevb_ram_init`; `m` is a file's `u64` membership (zero when opened); the glue
/// holds the card's `ram_lock`, so nothing else uses them.
unsafe fn owner<'a>(o: *mut PevbRamOwner, m: *mut u64) -> (&'a mut RamOwner, &'a mut Member) {
    // SAFETY: caller's contract; `Member` is a transparent `u64`, for which every value is valid.
    unsafe { (owner_only(o), &mut *m.cast::<Member>()) }
}

/// The ownership at `o`.
///
/// # Safety
/// As for `owner`.
unsafe fn owner_only<'a>(o: *mut PevbRamOwner) -> &'a mut RamOwner {
    // SAFETY: caller's contract; the storage fits a `RamOwner` (asserted above).
    unsafe { &mut *o.cast::<RamOwner>() }
}

/// Makes `o` free and dirty (`RamOwner::new`).
///
/// # Safety
/// `o` is valid for writing.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_init(o: *mut PevbRamOwner) {
    // SAFETY: caller's contract; the storage fits a `RamOwner` (asserted above).
    unsafe { o.cast::<RamOwner>().write(RamOwner::new()) };
}

/// `RamOwner::begin` by process `pid`: `PEVB_RAM_GO`, `PEVB_RAM_SCRUB_FIRST` or -EBUSY.
///
/// # Safety
/// As `owner`.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_begin(o: *mut PevbRamOwner, m: *mut u64, pid: u32) -> c_int {
    // SAFETY: caller's contract.
    let (o, m) = unsafe { owner(o, m) };
    grant(o.begin(m, pid))
}

/// `RamOwner::end`.
///
/// # Safety
/// As `owner`.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_end(o: *mut PevbRamOwner) {
    // SAFETY: caller's contract.
    unsafe { owner_only(o) }.end();
}

/// `RamOwner::claim`: as `pevb_ram_begin`, without a request to end.
///
/// # Safety
/// As `owner`.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_claim(o: *mut PevbRamOwner, m: *mut u64, pid: u32) -> c_int {
    // SAFETY: caller's contract.
    let (o, m) = unsafe { owner(o, m) };
    grant(o.claim(m, pid))
}

/// `RamOwner::scrubbed`.
///
/// # Safety
/// As `owner`.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_scrubbed(o: *mut PevbRamOwner, ok: bool) {
    // SAFETY: caller's contract.
    unsafe { owner_only(o) }.scrubbed(ok);
}

/// `RamOwner::release`: 0 or -EBUSY.
///
/// # Safety
/// As `owner`.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_release(o: *mut PevbRamOwner, m: *mut u64, pid: u32) -> c_int {
    // SAFETY: caller's contract.
    let (o, m) = unsafe { owner(o, m) };
    o.release(m, pid).map_or_else(neg, |()| 0)
}

/// `RamOwner::close`.
///
/// # Safety
/// As `owner`.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_close(o: *mut PevbRamOwner, m: *mut u64) {
    // SAFETY: caller's contract.
    let (o, m) = unsafe { owner(o, m) };
    o.close(m);
}

/// `RamOwner::state`: `RAM_FREE`, `RAM_MINE` or `RAM_OTHER`.
///
/// # Safety
/// As `owner`.
#[no_mangle]
pub unsafe extern "C" fn pevb_ram_state(o: *mut PevbRamOwner, m: *mut u64, pid: u32) -> u32 {
    // SAFETY: caller's contract.
    let (o, m) = unsafe { owner(o, m) };
    o.state(m, pid)
}
