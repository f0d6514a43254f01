// SPDX-License-Identifier: GPL-2.0

//! The engine protocol for the 5.10 glue: the shared `engine` module (`kmod/logic/src/engine.rs`, the very
//! file the 6.18 module runs) over the kernel services `engine.c` offers (`pevb_plat_*`), exported as
//! `pevb_engine_*`. Kernel build only: the host build of the surface has no C to link against, and the
//! protocol itself is host-tested in `kmod/logic`.

use crate::chain::Chain;
use crate::channel::Regs32;
use crate::engine::{self, Event, Platform, Run, Waited};
use crate::errno::Errno;
use crate::ids;
use crate::pipeline::Wake;
use crate::round_trip::{self, Side, Started};
use crate::segments::{Cursor, Segment};
use crate::xdma::{self, Descriptor, Dir};
use crate::{neg, res};
use core::ffi::{c_int, c_void};

/// Event kinds of `pevb_plat_log` (engine.c words them): what the protocol logs.
pub const PEVB_EV_VANISHED: u32 = 0;
/// `a`: ms.
pub const PEVB_EV_TIMEOUT: u32 = 1;
/// `a`: status.
pub const PEVB_EV_FAILED: u32 = 2;
/// `a`: completed, `b`: descriptors.
pub const PEVB_EV_SHORT: u32 = 3;
pub const PEVB_EV_STILL_BUSY: u32 = 4;
/// `a`: errno.
pub const PEVB_EV_RELEASE_FAILED: u32 = 5;
pub const PEVB_EV_SOURCE_STOPPED: u32 = 6;

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // engine.c and card.c: the kernel services of one engine (`idx` 0: H2C, 1: C2H) of a card.
    fn pevb_plat_rd(card: *mut c_void, off: u32) -> u32;
    fn pevb_plat_wr(card: *mut c_void, off: u32, v: u32);
    fn pevb_card_gone(card: *mut c_void) -> bool;
    fn pevb_card_wedged(card: *mut c_void) -> bool;
    fn pevb_card_close(card: *mut c_void);
    fn pevb_card_wedge(card: *mut c_void);
    fn pevb_plat_gate_enter(card: *mut c_void) -> c_int;
    fn pevb_plat_gate_exit(card: *mut c_void);
    fn pevb_plat_status(card: *mut c_void, idx: u32) -> u32;
    fn pevb_plat_add_status(card: *mut c_void, idx: u32, bits: u32);
    fn pevb_plat_rearm(card: *mut c_void, idx: u32);
    fn pevb_plat_wait(card: *mut c_void, idx: u32, ms: u32) -> c_int;
    fn pevb_plat_now_us() -> u64;
    fn pevb_plat_sleep_us(us: u32);
    fn pevb_plat_log(card: *mut c_void, idx: u32, kind: u32, a: u32, b: u32);
    fn pevb_plat_unblock(card: *mut c_void, idx: u32) -> bool;
    fn pevb_engine_table(
        card: *mut c_void,
        idx: u32,
        descs: *mut *mut Descriptor,
        ndescs: *mut usize,
        base: *mut u64,
    ) -> c_int;
    fn pevb_card_facts(card: *mut c_void) -> *const crate::surface::PevbFacts;
}

/// One engine of a C `struct pevb_card`, as the protocol sees it.
struct CEngine {
    card: *mut c_void,
    idx: u32,
    /// The write-back word (CPU pointer, bus address) in the last slot of the engine's table, while a run
    /// holds the table (`engine_with`); None for a stop.
    wb: Option<(*mut u32, u64)>,
}

/// The DMA BAR (BAR1: the engines and the IRQ block) of a C `struct pevb_card`.
pub(crate) struct DmaBar(pub(crate) *mut c_void);

// Sound for any card the glue passes: a live `struct pevb_card` (the callers hold a reference to it) whose
// DMA BAR is mapped (probe mapped it whole before the card was published, and removal unmaps it only
// after every request ended).
impl Regs32 for DmaBar {
    type Error = Errno;
    fn read32(&self, offset: usize) -> Result<u32, Errno> {
        let off = crate::bar_offset(offset, ids::BAR_DMA_SIZE)?;
        // SAFETY: see above; `off` is an aligned register inside the mapped DMA BAR (bar_offset).
        Ok(unsafe { pevb_plat_rd(self.0, off) })
    }
    fn write32(&self, value: u32, offset: usize) -> Result<(), Errno> {
        let off = crate::bar_offset(offset, ids::BAR_DMA_SIZE)?;
        // SAFETY: as in read32.
        unsafe { pevb_plat_wr(self.0, off, value) };
        Ok(())
    }
}

// The calls below are sound for any `card` the glue passes: a live `struct pevb_card` (the callers hold a
// reference to it) and `idx` 0 or 1 (checked in `engine()`).
impl Regs32 for CEngine {
    type Error = Errno;
    fn read32(&self, offset: usize) -> Result<u32, Errno> {
        DmaBar(self.card).read32(offset)
    }
    fn write32(&self, value: u32, offset: usize) -> Result<(), Errno> {
        DmaBar(self.card).write32(value, offset)
    }
}

impl Platform for CEngine {
    fn dir(&self) -> Dir {
        if self.idx == 0 {
            Dir::H2c
        } else {
            Dir::C2h
        }
    }
    fn gone(&self) -> bool {
        // SAFETY: see the impl of Regs32.
        unsafe { pevb_card_gone(self.card) }
    }
    fn wedged(&self) -> bool {
        // SAFETY: as above.
        unsafe { pevb_card_wedged(self.card) }
    }
    fn vanished(&self) -> bool {
        vanished(self.card)
    }
    fn wedge(&self) {
        // SAFETY: as above.
        unsafe { pevb_card_wedge(self.card) }
    }
    fn gated(&self, program: &mut dyn FnMut() -> Result<(), Errno>) -> Result<(), Errno> {
        // SAFETY: as above; on 0 the gate is held until `pevb_plat_gate_exit`.
        let r = unsafe { pevb_plat_gate_enter(self.card) };
        if r != 0 {
            return Err(Errno(-r));
        }
        let ret = program();
        // SAFETY: the gate was entered above.
        unsafe { pevb_plat_gate_exit(self.card) };
        ret
    }
    fn status(&self) -> u32 {
        // SAFETY: see the impl of Regs32.
        unsafe { pevb_plat_status(self.card, self.idx) }
    }
    fn add_status(&self, bits: u32) {
        // SAFETY: as above.
        unsafe { pevb_plat_add_status(self.card, self.idx, bits) }
    }
    fn rearm(&self) {
        // SAFETY: as above.
        unsafe { pevb_plat_rearm(self.card, self.idx) }
    }
    fn wait(&self, ms: u32) -> Waited {
        // SAFETY: as above.
        match unsafe { pevb_plat_wait(self.card, self.idx, ms) } {
            n if n > 0 => Waited::Completed,
            0 => Waited::TimedOut,
            _ => Waited::Killed,
        }
    }
    fn writeback_addr(&self) -> Option<u64> {
        self.wb.map(|w| w.1)
    }
    fn writeback(&self) -> u32 {
        // SAFETY: the word lies in the engine's coherent table (`engine_with`), which the caller holds
        // (its engine lock and a run) while this exists; 4-byte aligned; the engine writes it, hence
        // volatile.
        self.wb
            .map_or(0, |w| unsafe { core::ptr::read_volatile(w.0) })
    }
    fn clear_writeback(&self) {
        if let Some(w) = self.wb {
            // SAFETY: as in `writeback`; no run of this engine is going, so only this thread touches it,
            // and the MMIO write that sets Run orders it before the engine's own write.
            unsafe { core::ptr::write_volatile(w.0, 0) };
        }
    }
    fn now_us(&self) -> u64 {
        // SAFETY: no argument.
        unsafe { pevb_plat_now_us() }
    }
    fn sleep_us(&self, us: u32) {
        // SAFETY: no argument.
        unsafe { pevb_plat_sleep_us(us) }
    }
    fn unblock(&self) -> bool {
        // SAFETY: see the impl of Regs32.
        unsafe { pevb_plat_unblock(self.card, self.idx) }
    }
    fn log(&self, event: Event) {
        let (kind, a, b) = match event {
            Event::Vanished => (PEVB_EV_VANISHED, 0, 0),
            Event::Timeout { ms } => (PEVB_EV_TIMEOUT, ms, 0),
            Event::Failed { status } => (PEVB_EV_FAILED, status, 0),
            Event::Short { completed, count } => (PEVB_EV_SHORT, completed, count),
            Event::StillBusy => (PEVB_EV_STILL_BUSY, 0, 0),
            Event::SourceStopped => (PEVB_EV_SOURCE_STOPPED, 0, 0),
            Event::ReleaseFailed(e) => (PEVB_EV_RELEASE_FAILED, e.0 as u32, 0),
        };
        // SAFETY: see the impl of Regs32.
        unsafe { pevb_plat_log(self.card, self.idx, kind, a, b) }
    }
}

fn engine(card: *mut c_void, idx: u32) -> CEngine {
    // An index other than 0 or 1 is a glue bug: a BUG() (panic), never another engine's registers.
    assert!(idx < 2 && !card.is_null());
    CEngine {
        card,
        idx,
        wb: None,
    }
}

/// Engine `idx` with the write-back word in the last of the `ndescs` slots of its table `descs` at bus
/// address `base` (`engine::writeback_offset`); EINVAL for a table too small to hold a chain and the word.
///
/// # Safety
/// `descs` is the engine's table, valid for `ndescs` descriptors, held by the caller while the result is
/// used.
unsafe fn engine_with(
    card: *mut c_void,
    idx: u32,
    descs: *mut Descriptor,
    ndescs: usize,
    base: u64,
) -> Result<CEngine, Errno> {
    if ndescs < 2 || descs.is_null() {
        return Err(Errno::EINVAL);
    }
    let at = engine::writeback_offset(ndescs);
    Ok(CEngine {
        // In bounds: `at` is inside the last of the `ndescs` slots.
        wb: Some((
            descs.cast::<u8>().wrapping_add(at).cast::<u32>(),
            base + at as u64,
        )),
        ..engine(card, idx)
    })
}

/// Builds a chain into the table `descs[..ndescs]` (at bus address `base`; its last slot left to the
/// write-back word) from the host buffer `segs[..nsegs]` at byte `host_off`.
///
/// # Safety
/// `segs` valid for reading `nsegs` segments, `descs` for writing `ndescs` descriptors the engine does not
/// read now.
unsafe fn build(
    dir: Dir,
    segs: *const Segment,
    nsegs: usize,
    host_off: u64,
    fpga: u64,
    len: u64,
    descs: *mut Descriptor,
    ndescs: usize,
    base: u64,
) -> Result<Chain, Errno> {
    if segs.is_null() || descs.is_null() || ndescs < 2 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: caller's contract. The last slot is the write-back word's, never a descriptor's.
    let (segs, descs) = unsafe {
        (
            core::slice::from_raw_parts(segs, nsegs),
            core::slice::from_raw_parts_mut(descs, engine::chain_slots(ndescs)),
        )
    };
    let mut cur = Cursor::new(segs);
    cur.skip(host_off)?;
    crate::chain::build(dir, &mut cur, len, fpga, xdma::DESC_LEN_MAX, descs, base)
}

/// One engine's side of a round trip (`round_trip::run`): its descriptor table and the host buffer.
struct CSide {
    card: *mut c_void,
    idx: u32,
    segs: *const Segment,
    nsegs: usize,
    /// Where the request's window starts in `segs`.
    at: u64,
    descs: *mut Descriptor,
    ndescs: usize,
    base: u64,
}

/// A chain `CSide::start` started, with the engine it runs on.
struct CStarted {
    p: CEngine,
    run: Run,
}

impl Side for CSide {
    type Run<'a> = CStarted;
    fn start(&mut self, host_off: u64, ram: u64, len: u64, wake: Wake) -> Result<CStarted, Errno> {
        let s = &*self;
        // SAFETY: `pevb_round_trip`'s contract: the table is the engine's, held by the caller under the
        // engine lock, and every earlier chain of this side ended before the next is built.
        let p = unsafe { engine_with(s.card, s.idx, s.descs, s.ndescs, s.base) }?;
        let dir = p.dir();
        // SAFETY: as above; `segs` is valid for `nsegs` segments.
        let run = Run::start(&p, wake, false, || unsafe {
            build(
                dir,
                s.segs,
                s.nsegs,
                s.at + host_off,
                ram,
                len,
                s.descs,
                s.ndescs,
                s.base,
            )
        })?;
        Ok(CStarted { p, run })
    }
}

impl Started for CStarted {
    fn wait(&mut self) {
        self.run.wait(&self.p);
    }
    fn finish(self) -> Result<u64, Errno> {
        self.run.finish(&self.p)
    }
    fn cancel(self) {
        // Wedges the card if the engine cannot be stopped; the error that ended the request is reported.
        let _ = self.run.cancel(&self.p);
    }
}

/// Copies `len` bytes from `src[..nsrc]` (from byte `src_at`) through the card RAM to `dst[..ndst]` (from
/// byte `dst_at`) as `kmod/logic/src/round_trip.rs` runs it: 0 or a negative errno.
///
/// # Safety
/// `card` is a live `struct pevb_card` whose DMA BAR is mapped and both of whose engine locks the caller
/// holds (H2C first); `src` and `dst` are valid for reading their segments, which stay mapped for the
/// call.
#[no_mangle]
pub unsafe extern "C" fn pevb_round_trip(
    card: *mut c_void,
    src: *const Segment,
    nsrc: usize,
    src_at: u64,
    dst: *const Segment,
    ndst: usize,
    dst_at: u64,
    len: u64,
) -> c_int {
    let side = |idx: u32, segs, nsegs, at| -> Result<CSide, Errno> {
        let (mut descs, mut ndescs, mut base) = (core::ptr::null_mut(), 0, 0);
        // SAFETY: caller's contract (the engine lock held).
        res(unsafe { pevb_engine_table(card, idx, &mut descs, &mut ndescs, &mut base) })?;
        Ok(CSide {
            card,
            idx,
            segs,
            nsegs,
            at,
            descs,
            ndescs,
            base,
        })
    };
    // SAFETY: caller's contract; probe wrote the facts before it published the card.
    let ram = unsafe { (*pevb_card_facts(card)).ram_size };
    let r = side(0, src, nsrc, src_at)
        .and_then(|h| Ok((h, side(1, dst, ndst, dst_at)?)))
        .and_then(|(mut h, mut c)| round_trip::run(&mut h, &mut c, len, ram));
    match r {
        Ok(()) => 0,
        Err(e) => neg(e),
    }
}

/// Whether the card left the bus (`probe::left_bus`); marks it gone if so.
pub(crate) fn vanished(card: *mut c_void) -> bool {
    let all_ones = || crate::probe::identifiers_all_ones(&DmaBar(card));
    // SAFETY: a plain sleep; the callers are requests, in process context, holding no spinlock.
    let gone = crate::probe::left_bus(all_ones, |ms| unsafe { pevb_plat_sleep_us(ms * 1000) });
    if gone {
        // SAFETY: the glue passes live cards (see `DmaBar`).
        unsafe { pevb_card_close(card) };
    }
    gone
}

/// Stops engine `idx` (PG195's stop); whether it was shown idle.
///
/// # Safety
/// `card` is a live `struct pevb_card` whose DMA BAR is mapped.
#[no_mangle]
pub unsafe extern "C" fn pevb_engine_stop(card: *mut c_void, idx: u32) -> bool {
    engine::stop(&engine(card, idx))
}

/// Moves `len` bytes between `segs` (from byte `host_off`) and FPGA RAM at `fpga` on engine `idx`, as few
/// chains as the table allows, each waited for (polled if small, else by interrupt) and ended before the
/// next. With `card_time`, stores the engine's run time by the card's clock in `*card_ns` (else 0), unless
/// it is NULL.
///
/// # Safety
/// `card` is a live `struct pevb_card` whose engine `idx` lock the caller holds; `segs` is valid for
/// reading `nsegs` segments, `descs` for writing `ndescs` descriptors (the engine's table, not read by the
/// engine now: every earlier run ended); `card_ns` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pevb_engine_transfer(
    card: *mut c_void,
    idx: u32,
    segs: *const Segment,
    nsegs: usize,
    host_off: u64,
    fpga: u64,
    len: u64,
    descs: *mut Descriptor,
    ndescs: usize,
    base: u64,
    card_time: bool,
    card_ns: *mut u64,
) -> c_int {
    // SAFETY: caller's contract (the table, held under the engine lock for the whole transfer).
    let p = match unsafe { engine_with(card, idx, descs, ndescs, base) } {
        Ok(p) => p,
        Err(e) => return neg(e),
    };
    let dir = p.dir();
    // SAFETY: caller's contract, for every chain: each earlier one ended before the next is built.
    let r = engine::transfer(&p, len, card_time, |done| unsafe {
        build(
            dir,
            segs,
            nsegs,
            host_off + done,
            fpga + done,
            len - done,
            descs,
            ndescs,
            base,
        )
    });
    match r {
        Ok(ns) => {
            if !card_ns.is_null() {
                // SAFETY: caller's contract: NULL or writable.
                unsafe { *card_ns = ns };
            }
            0
        }
        Err(e) => neg(e),
    }
}
