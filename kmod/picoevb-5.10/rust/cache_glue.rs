// SPDX-License-Identifier: GPL-2.0

//! The registration cache's sequences for the 5.10 glue: the shared `cache_table` (`kmod/logic/src/
//! cache_table.rs`, the very file the 6.18 module runs) over the table, pin and card services
//! `regcache.c` defines (`pevb_ct_*`, `pevb_cbuf_*`, `pevb_cache_call_*`), exported as `pevb_cache_*`.
//! Kernel build only, as `gate_glue.rs`: the sequences are host-tested in `kmod/logic`.

use crate::cache_policy::{self, Policy, Range};
use crate::cache_table::{self, Held, Services};
use crate::pin_glue::Frames;
use crate::res;
use crate::surface::PevbRange;
use core::ffi::{c_int, c_void};

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // regcache.c. `c` is a `struct pevb_cache`, `p` a `struct pevb_cbuf`, `call` the `struct
    // pevb_cache_call` of one request's pin.
    fn pevb_ct_lock(c: *mut c_void);
    fn pevb_ct_unlock(c: *mut c_void);
    fn pevb_ct_policy(c: *mut c_void) -> *mut c_void;
    fn pevb_ct_closed(c: *mut c_void) -> bool;
    fn pevb_ct_close(c: *mut c_void);
    fn pevb_ct_slot(c: *mut c_void, slot: u32) -> *mut c_void;
    fn pevb_ct_set(c: *mut c_void, slot: u32, p: *mut c_void);
    fn pevb_cbuf_stale(p: *mut c_void) -> bool;
    fn pevb_cbuf_get(p: *mut c_void);
    fn pevb_cbuf_put(p: *mut c_void);
    fn pevb_cbuf_frames(p: *mut c_void, n: *mut usize) -> *const u64;
    fn pevb_cache_call_cache(call: *mut c_void) -> *mut c_void;
    fn pevb_cache_call_pin_lock(call: *mut c_void);
    fn pevb_cache_call_pin_unlock(call: *mut c_void);
    fn pevb_cache_call_overlaps(call: *mut c_void, mm: u64, first: u64, end: u64) -> bool;
    fn pevb_cache_call_frames(first: u64, end: u64, out: *mut Frames) -> c_int;
    fn pevb_cache_call_in_use(
        call: *mut c_void,
        frames: *const u64,
        n: usize,
        replacing: *const PevbRange,
    ) -> bool;
    fn pevb_cache_call_pin(call: *mut c_void, want: *const PevbRange) -> *mut c_void;
    fn pevb_cache_call_once(call: *mut c_void) -> c_int;
    fn pevb_cache_call_use(call: *mut c_void, p: *mut c_void, offset: u64) -> c_int;
}

/// A reference to a `struct pevb_cbuf`, let go of when dropped.
pub struct CBuf(*mut c_void);

impl CBuf {
    /// Hands the reference over to C.
    fn into_raw(self) -> *mut c_void {
        core::mem::ManuallyDrop::new(self).0
    }

    fn frames(&self) -> &[u64] {
        let mut n = 0;
        // SAFETY: a pin we hold a reference to; its page array is `n` long and fixed while the pin lives.
        unsafe { slice(pevb_cbuf_frames(self.0, &mut n), n) }
    }
}

impl Drop for CBuf {
    fn drop(&mut self) {
        // SAFETY: our reference, given back once. A request thread never releases: the last put hands
        // the pin to its cache's work item (regcache.c).
        unsafe { pevb_cbuf_put(self.0) };
    }
}

/// A `struct pevb_cache`'s table, reached only under its lock.
pub struct CTable(*mut c_void);

// Every call below passes a live cache whose lock this thread holds (`with_table`, `locked`), slots below
// `CAPACITY`, and pins as the table holds them.
impl cache_table::Table for CTable {
    type Pin = CBuf;
    fn policy(&mut self) -> &mut Policy {
        // SAFETY: see above; the policy was initialised when the cache was made (`pevb_policy_init`) and
        // only its lock's holder uses it.
        unsafe { &mut *pevb_ct_policy(self.0).cast::<Policy>() }
    }
    fn closed(&self) -> bool {
        // SAFETY: see above.
        unsafe { pevb_ct_closed(self.0) }
    }
    fn close(&mut self) {
        // SAFETY: see above.
        unsafe { pevb_ct_close(self.0) }
    }
    fn fresh(&self, slot: usize) -> Option<CBuf> {
        // SAFETY: see above; the table's reference keeps the pin alive while we take ours.
        unsafe {
            let p = pevb_ct_slot(self.0, slot as u32);
            if p.is_null() || pevb_cbuf_stale(p) {
                return None;
            }
            pevb_cbuf_get(p);
            Some(CBuf(p))
        }
    }
    fn stale(&self, slot: usize) -> bool {
        // SAFETY: see above.
        unsafe {
            let p = pevb_ct_slot(self.0, slot as u32);
            !p.is_null() && pevb_cbuf_stale(p)
        }
    }
    fn holds_frames(&self, slot: usize, frames: &[u64]) -> bool {
        // SAFETY: see above.
        let p = unsafe { pevb_ct_slot(self.0, slot as u32) };
        if p.is_null() {
            return false;
        }
        // Borrowed, not ours: the table's reference keeps it alive under the lock.
        let p = core::mem::ManuallyDrop::new(CBuf(p));
        cache_policy::share_page_frames(p.frames(), frames)
    }
    fn keep(&mut self, slot: usize, pin: &CBuf) {
        // SAFETY: see above; the slot's new reference is taken here.
        unsafe {
            pevb_cbuf_get(pin.0);
            pevb_ct_set(self.0, slot as u32, pin.0);
        }
    }
    fn drop_pin(&mut self, slot: usize) {
        // SAFETY: see above; the slot's reference moves into `CBuf`, dropped (put) after the slot is
        // cleared.
        let p = unsafe { pevb_ct_slot(self.0, slot as u32) };
        if !p.is_null() {
            // SAFETY: as above.
            unsafe { pevb_ct_set(self.0, slot as u32, core::ptr::null_mut()) };
            drop(CBuf(p));
        }
    }
}

/// Runs `f` on cache `c`'s table under its lock.
///
/// # Safety
/// `c` is a live `struct pevb_cache` whose lock this thread does not hold.
unsafe fn locked<R>(c: *mut c_void, f: impl FnOnce(&mut CTable) -> R) -> R {
    // SAFETY: caller's contract.
    unsafe { pevb_ct_lock(c) };
    let r = f(&mut CTable(c));
    // SAFETY: locked above.
    unsafe { pevb_ct_unlock(c) };
    r
}

/// One request's pin on its file's cache and card (`struct pevb_cache_call`).
struct Call {
    call: *mut c_void,
    cache: *mut c_void,
}

fn range(r: Range) -> PevbRange {
    PevbRange {
        mm: r.mm as u64,
        addr: r.addr,
        len: r.len,
    }
}

// Every call below passes the live `struct pevb_cache_call` that `pevb_cache_get`'s caller owns for the
// whole call, and its cache.
impl Services for Call {
    type Pin = CBuf;
    type Table = CTable;
    type Frames = Frames;
    fn with_table<R>(&self, f: impl FnOnce(&mut CTable) -> R) -> R {
        // SAFETY: see above; `cache_table` never nests the table lock.
        unsafe { locked(self.cache, f) }
    }
    fn with_pin_lock<R>(&self, f: impl FnOnce() -> R) -> R {
        // SAFETY: see above; `cache_table` takes the pin lock outside every table lock, once.
        unsafe { pevb_cache_call_pin_lock(self.call) };
        let r = f();
        // SAFETY: locked above.
        unsafe { pevb_cache_call_pin_unlock(self.call) };
        r
    }
    fn overlaps_surface(&self, mm: usize, first: u64, end: u64) -> bool {
        // SAFETY: see above; under the pin lock.
        unsafe { pevb_cache_call_overlaps(self.call, mm as u64, first, end) }
    }
    fn frames(&self, first: u64, end: u64) -> Option<Frames> {
        let mut f = Frames::empty();
        // SAFETY: on failure `f` stays empty, which its drop accepts.
        res(unsafe { pevb_cache_call_frames(first, end, &mut f) }).ok()?;
        Some(f)
    }
    fn frames_in_use(&self, frames: &[u64], replacing: Range) -> bool {
        let r = range(replacing);
        // SAFETY: see above; under the pin lock, no table lock held; `frames` sorted, `r` a local.
        unsafe { pevb_cache_call_in_use(self.call, frames.as_ptr(), frames.len(), &r) }
    }
    fn pin(&self, want: Range) -> Option<CBuf> {
        let r = range(want);
        // SAFETY: see above; a non-null answer is a new pin with one reference, ours.
        let p = unsafe { pevb_cache_call_pin(self.call, &r) };
        // Never a `CBuf` of null: dropping it would put a null pin (`then_some(CBuf(p))` would).
        if p.is_null() {
            None
        } else {
            Some(CBuf(p))
        }
    }
    fn pin_frames<'a>(&self, pin: &'a CBuf) -> &'a [u64] {
        pin.frames()
    }
}

/// Pins the request range of `call` (regcache.c's `pevb_cache_get`): a use of a cached buffer or a pin
/// for this request only, in the call; 0 or a negative errno.
///
/// # Safety
/// `call` is a live `struct pevb_cache_call` whose cache and card are live, and whose caller holds no
/// table lock and not the card's pin lock; `r` is the request's range in the caller's address space.
#[no_mangle]
pub unsafe extern "C" fn pevb_cache_pin(call: *mut c_void, r: *const PevbRange) -> c_int {
    // SAFETY: caller's contract.
    let (cache, r) = unsafe { (pevb_cache_call_cache(call), (*r).get()) };
    let s = Call { call, cache };
    // SAFETY: caller's contract; the once pin lands in the call.
    let once = || res(unsafe { pevb_cache_call_once(call) });
    match cache_table::get(&s, r, once) {
        // SAFETY: caller's contract; the use takes over our reference, also on failure.
        Ok(Held::Cached { pin, offset }) => unsafe {
            pevb_cache_call_use(call, pin.into_raw(), offset)
        },
        Ok(Held::Once(())) => 0,
        Err(e) => crate::neg(e),
    }
}

/// The work item's sweep of cache `c`: drops its buffers whose memory changed.
///
/// # Safety
/// As for `locked`.
#[no_mangle]
pub unsafe extern "C" fn pevb_cache_sweep(c: *mut c_void) {
    // SAFETY: caller's contract.
    unsafe { locked(c, cache_table::sweep) }
}

/// PIN_CUDA of pages `*r`, frames `frames[..n]` (sorted): drops cache `c`'s buffers on them.
///
/// # Safety
/// As for `locked`; `r` is readable, `frames` readable for `n` values.
#[no_mangle]
pub unsafe extern "C" fn pevb_cache_evict(
    c: *mut c_void,
    r: *const PevbRange,
    frames: *const u64,
    n: usize,
) {
    // SAFETY: caller's contract.
    let (r, frames) = unsafe { ((*r).get(), slice(frames, n)) };
    // SAFETY: caller's contract.
    unsafe { locked(c, |t| cache_table::evict(t, r, frames)) }
}

/// Whether a buffer of cache `c` holds any of pages `frames[..n]`, not counting, when `own`, the buffers
/// `*replacing` takes the place of.
///
/// # Safety
/// As for `pevb_cache_evict`.
#[no_mangle]
pub unsafe extern "C" fn pevb_cache_holds(
    c: *mut c_void,
    frames: *const u64,
    n: usize,
    own: bool,
    replacing: *const PevbRange,
) -> bool {
    // SAFETY: caller's contract.
    let (r, frames) = unsafe { ((*replacing).get(), slice(frames, n)) };
    // SAFETY: caller's contract.
    unsafe { locked(c, |t| cache_table::holds_frames(t, frames, own, r)) }
}

/// REG_CACHE: does `op` on cache `c`; its state after.
///
/// # Safety
/// As for `locked`.
pub(crate) unsafe fn control(c: *mut c_void, op: cache_policy::Op) -> crate::abi::RegCache {
    // SAFETY: caller's contract.
    unsafe { locked(c, |t| cache_table::control(t, op)) }
}

/// Close or card removal: drops every buffer of cache `c`, which caches nothing more.
///
/// # Safety
/// As for `locked`.
#[no_mangle]
pub unsafe extern "C" fn pevb_cache_shut(c: *mut c_void) {
    // SAFETY: caller's contract.
    unsafe { locked(c, cache_table::close) }
}

/// `frames[..n]` (an empty slice for a null pointer).
///
/// # Safety
/// `frames` is null or readable for `n` values that outlive the slice.
unsafe fn slice<'a>(frames: *const u64, n: usize) -> &'a [u64] {
    if frames.is_null() || n == 0 {
        return &[];
    }
    // SAFETY: caller's contract.
    unsafe { core::slice::from_raw_parts(frames, n) }
}
