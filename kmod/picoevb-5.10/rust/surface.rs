// SPDX-License-Identifier: GPL-2.0

//! The `extern "C"` surface the 5.10 glue calls: ioctl decoding and argument checks, descriptor chains,
//! segment coalescing, engine-status decoding and the register map, each a thin adapter over the shared
//! logic. cbindgen declares them for C in `../logic.h` (`../cbindgen.toml`, checked by `tests/header.rs`);
//! `PEVB_LAYOUT` also lets the glue check at load time that both sides agree on the structs' sizes.

use crate::cache_policy::{Policy, Range};
use crate::ram_owner::{Grant, Member, RamOwner};
use crate::segments::{self, Segment};
use crate::surface_life::{Life, View};
use crate::xdma::{self, Descriptor};
use crate::{cache_policy, errno::Errno, ids, neg, status};
use core::ffi::{c_char, c_int};
use core::mem::size_of;

/// What probe learnt of a card (`ioctl::Facts`; the ID block's values for probe's log line).
#[repr(C)]
pub struct PevbFacts {
    pub card_index: u32,
    pub msi: u32,
    pub id_block: u32,
    pub design_version: u32,
    pub build_hash: u32,
    /// The ID block says the design has the stream block.
    pub stream: u32,
    pub ram_size: u64,
}

/// Sizes of the structs above and of the shared ones the glue handles, as Rust lays them out.
#[repr(C)]
pub struct PevbLayout {
    pub facts: u32,
    pub segment: u32,
    pub descriptor: u32,
    pub regs: u32,
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
    facts: size_of::<PevbFacts>() as u32,
    segment: size_of::<Segment>() as u32,
    descriptor: PEVB_DESC_SIZE as u32,
    regs: size_of::<PevbRegs>() as u32,
    range: size_of::<PevbRange>() as u32,
    policy: size_of::<cache_policy::Policy>() as u32,
    policy_align: core::mem::align_of::<cache_policy::Policy>() as u32,
    cache_slots: cache_policy::CAPACITY as u32,
    owner: size_of::<PevbRamOwner>() as u32,
    owner_align: core::mem::align_of::<PevbRamOwner>() as u32,
    life: size_of::<Life>() as u32,
    life_view: size_of::<View>() as u32,
};

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

/// Whether PCI IDs are the PicoEVB design's (10de:0001 is also NVIDIA's HTG-K800 design, which this driver
/// does not support: the subsystem tells them apart).
#[no_mangle]
pub extern "C" fn pevb_ids_ok(vendor: u16, device: u16, subvendor: u16, subdevice: u16) -> bool {
    vendor == ids::VENDOR_ID
        && device == ids::DEVICE_ID
        && subvendor == ids::SUBSYSTEM_VENDOR_ID
        && subdevice == ids::SUBSYSTEM_ID_PICOEVB
}

/// What probe needs of the register map, from the one definition in `crates/picoevb-regs`: which BARs
/// to map and how long they must be, the card RAM's size and the longest descriptor. The C side names no
/// offset or bit at all: every register access is the shared logic's.
#[repr(C)]
pub struct PevbRegs {
    pub bar_user: u32,
    pub bar_user_size: u32,
    pub bar_dma: u32,
    pub bar_dma_size: u32,
    pub ram_size: u64,
    pub desc_len_max: u32,
}

#[no_mangle]
pub static PEVB_REGS: PevbRegs = PevbRegs {
    bar_user: ids::BAR_USER,
    bar_user_size: ids::BAR_USER_SIZE as u32,
    bar_dma: ids::BAR_DMA,
    bar_dma_size: ids::BAR_DMA_SIZE as u32,
    ram_size: ids::FPGA_RAM_SIZE,
    desc_len_max: xdma::DESC_LEN_MAX,
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
