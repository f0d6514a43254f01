// SPDX-License-Identifier: GPL-2.0

//! The registration cache of one open file ("lazy unpinning"): host buffers stay pinned and DMA-mapped
//! between requests. What hits and what is evicted is `cache_policy`'s business, and what the cache does
//! with its pins (a hit, a miss, an eviction, a sweep, close) is `cache_table`'s, shared with the 5.10
//! module; this file holds the pins and gives `cache_table` its kernel services.
//!
//! A cached buffer is pinned writable, mapped bidirectionally and watched by an mmu interval notifier
//! (`cpin.c`, shared with the 5.10 module). When its memory changes the notifier marks it stale and
//! queues `sweep`, which drops it; a stale buffer never serves a request (checked under the table lock
//! at every hit). Requests hold their buffer by reference, so dropping it from the table (sweep,
//! eviction, flush, removal) never unpins under a running DMA: the last holder unpins. Pinning happens outside the table lock (it may fault pages in
//! for a long time), under the card's pin lock (PIN_CUDA evicts cached buffers under it); the notifier
//! takes no lock of ours.

use crate::abi;
use crate::cache_policy::{share_page_frames, Op, Policy, Range, CAPACITY};
use crate::cache_table::{self, Held, Services};
use crate::ffi;
use crate::pin::{pin_segments, user_frames, Frames, UserPin};
use crate::segments::{self, Segment};
use core::ffi::c_void;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::{
    device::Device,
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::{Arc, Mutex, MutexGuard},
};

/// What a cache needs of the books its card keeps (`book.rs`): declared here, so that a cache never
/// reaches back into its owner.
pub(crate) trait PinBook {
    /// The lock PIN_CUDA holds while it checks for overlaps, evicts cached buffers and pins a surface.
    fn lock_pins(&self) -> MutexGuard<'_, ()>;
    /// Whether a live GPU surface covers pages `[first, end)` of address space `mm`.
    fn overlaps(&self, mm: usize, first: u64, end: u64) -> bool;
    /// Whether a live surface or a buffer cached by any file of the card holds any of pages `frames`, not
    /// counting the buffers of `own` that `replacing` takes the place of.
    fn frames_in_use(&self, frames: &[u64], own: &RegCache, replacing: Range) -> bool;
}

/// A cached buffer's pin; unpinned when its last holder (the table or a request) drops it.
pub(crate) struct CachedPin {
    raw: *mut ffi::PevbCpin,
    /// Keeps the cache, and so the work item that releases this pin, alive: a pin quarantined on a wedged
    /// card (`Book::quarantine`) may outlive its file.
    _cache: Arc<RegCache>,
    /// The pages pinned.
    frames: Frames,
    /// The device wrote it: its pages are dirtied when unpinned.
    written: AtomicBool,
}

// SAFETY: the C object is only read (sg_table, sequence) and synced concurrently, which the DMA API allows
// from any thread; it is released once, by `drop`.
unsafe impl Send for CachedPin {}
// SAFETY: as above.
unsafe impl Sync for CachedPin {}

impl CachedPin {
    fn new(
        dev: &Device,
        addr: u64,
        len: u64,
        cache: &Arc<RegCache>,
        sweep: *mut ffi::PevbWork,
    ) -> Result<Arc<Self>> {
        let mut raw = core::ptr::null_mut();
        // SAFETY: `dev` is a live device; `sweep` is `cache`'s work item, freed only when the cache is
        // dropped, which the pin prevents (`_cache`); `raw` is a valid out-pointer.
        kernel::error::to_result(unsafe {
            ffi::pevb_cpin_new(ffi::raw_dev(dev), addr, len, sweep, &mut raw)
        })?;
        let mut pin = CachedPin {
            raw,
            _cache: cache.clone(),
            frames: KVVec::new(),
            written: AtomicBool::new(false),
        };
        // SAFETY: `raw` is a live cached pin (released by `pin`'s drop, also on error here); the pin's page
        // array does not change while it lives.
        let n = unsafe { ffi::pevb_cpin_npages(raw) };
        for i in 0..n {
            // SAFETY: as above; `i` is below the page count.
            pin.frames
                .push(unsafe { ffi::pevb_cpin_pfn(raw, i) }, GFP_KERNEL)?;
        }
        pin.frames.sort_unstable();
        Ok(Arc::new(pin, GFP_KERNEL)?)
    }

    /// Bus segments of the whole buffer, built when it was pinned.
    fn segs(&self) -> &[Segment] {
        // SAFETY: `self.raw` is live until `drop`, and so is its pin, mapped until the release that drop
        // hands it to.
        unsafe { pin_segments(ffi::pevb_cpin_pin(self.raw)) }
    }

    fn stale(&self) -> bool {
        // SAFETY: `self.raw` is live until `drop`.
        unsafe { ffi::pevb_cpin_stale(self.raw) }
    }
}

impl Drop for CachedPin {
    fn drop(&mut self) {
        // The last holder may be a request thread, which must not remove the notifier (cpin.c, struct
        // pevb_work): the cache's work item releases it.
        // SAFETY: `self.raw` came from `pevb_cpin_new` and is handed over exactly once, here; its work item
        // is alive: `_cache` is dropped after this, and only the cache's drop frees the work item.
        unsafe { ffi::pevb_cpin_release_later(self.raw, self.written.load(Ordering::Relaxed)) };
    }
}

/// A request's window `[offset, offset + len)` of a cached buffer. That window (only) is handed to the
/// device when it is taken and back to the CPU when it is dropped after a C2H (`pevb_cpin_sync` says why).
pub(crate) struct CacheUse {
    pin: Arc<CachedPin>,
    offset: u64,
    len: u64,
    to_device: bool,
    /// The window's bus segments, built when taken: a request borrows them while it may hold a surface
    /// use, under which nothing may allocate (`cuda::InUse`).
    segs: KVec<Segment>,
}

impl CacheUse {
    fn new(pin: Arc<CachedPin>, offset: u64, len: u64, to_device: bool) -> Result<Self> {
        let mut segs = KVec::new();
        let window = segments::window(pin.segs(), offset, len).map_err(crate::errors::kerr)?;
        for s in window {
            segs.push(s, GFP_KERNEL)?;
        }
        if !to_device {
            pin.written.store(true, Ordering::Relaxed);
        }
        // SAFETY: the pin is live (we hold it); the window lies inside it (checked by `window` above).
        unsafe { ffi::pevb_cpin_sync(pin.raw, offset, len, to_device, true) };
        Ok(Self {
            pin,
            offset,
            len,
            to_device,
            segs,
        })
    }
}

impl Drop for CacheUse {
    fn drop(&mut self) {
        if !self.to_device {
            // SAFETY: as in `new`.
            unsafe { ffi::pevb_cpin_sync(self.pin.raw, self.offset, self.len, false, false) };
        }
    }
}

/// Host memory held for one request.
pub(crate) enum HostPin {
    Cached(CacheUse),
    Once(UserPin),
}

impl HostPin {
    /// The request's bus segments.
    pub(crate) fn segments(&self) -> &[Segment] {
        match self {
            HostPin::Cached(u) => &u.segs,
            HostPin::Once(p) => p.segments(),
        }
    }
}

struct Table {
    policy: Policy,
    pins: [Option<Arc<CachedPin>>; CAPACITY],
    /// Close or card removal: nothing is cached any more.
    closed: bool,
}

impl cache_table::Table for Table {
    type Pin = Arc<CachedPin>;
    fn policy(&mut self) -> &mut Policy {
        &mut self.policy
    }
    fn closed(&self) -> bool {
        self.closed
    }
    fn close(&mut self) {
        self.closed = true;
    }
    fn fresh(&self, slot: usize) -> Option<Arc<CachedPin>> {
        self.pins[slot].clone().filter(|p| !p.stale())
    }
    fn stale(&self, slot: usize) -> bool {
        self.pins[slot].as_ref().is_some_and(|p| p.stale())
    }
    fn holds_frames(&self, slot: usize, frames: &[u64]) -> bool {
        self.pins[slot]
            .as_ref()
            .is_some_and(|p| share_page_frames(&p.frames, frames))
    }
    fn keep(&mut self, slot: usize, pin: &Arc<CachedPin>) {
        self.pins[slot] = Some(pin.clone());
    }
    /// The pin's last holder hands it to the cache's work item (`CachedPin::drop`): never released here.
    fn drop_pin(&mut self, slot: usize) {
        self.pins[slot] = None;
    }
}

/// One request's view of its file's cache and card: the services `cache_table` runs over.
struct OnCard<'a> {
    cache: &'a Arc<RegCache>,
    book: &'a dyn PinBook,
    dev: &'a Device,
}

impl Services for OnCard<'_> {
    type Pin = Arc<CachedPin>;
    type Table = Table;
    type Frames = Frames;
    fn with_table<R>(&self, f: impl FnOnce(&mut Table) -> R) -> R {
        f(&mut self.cache.table.lock())
    }
    fn with_pin_lock<R>(&self, f: impl FnOnce() -> R) -> R {
        let _pins = self.book.lock_pins();
        f()
    }
    fn overlaps_surface(&self, mm: usize, first: u64, end: u64) -> bool {
        self.book.overlaps(mm, first, end)
    }
    fn frames(&self, first: u64, end: u64) -> Option<Frames> {
        user_frames(first, end).ok()
    }
    fn frames_in_use(&self, frames: &[u64], replacing: Range) -> bool {
        self.book.frames_in_use(frames, self.cache, replacing)
    }
    fn pin(&self, want: Range) -> Option<Arc<CachedPin>> {
        let work = self.cache.work.load(Ordering::Acquire);
        if work.is_null() {
            return None;
        }
        CachedPin::new(self.dev, want.addr, want.len, self.cache, work).ok()
    }
    fn pin_frames<'a>(&self, pin: &'a Arc<CachedPin>) -> &'a [u64] {
        &pin.frames
    }
}

/// The cache of one open file.
#[pin_data(PinnedDrop)]
pub(crate) struct RegCache {
    /// In an allocation of its own: `sweep` borrows it while the cache's drop holds `&mut RegCache`
    /// (waiting for `sweep`), and that exclusive borrow covers only the box's pointer, not the table.
    table: Pin<KBox<Mutex<Table>>>,
    /// Runs `sweep` once a notifier fired; null where the kernel has no mmu notifiers (nothing is cached).
    work: AtomicPtr<ffi::PevbWork>,
}

/// Queued by a cached pin's notifier: drops the stale buffers.
unsafe extern "C" fn sweep(data: *mut c_void) {
    // SAFETY: `data` is the table of the cache that owns this work item (`RegCache::new`). The cache's
    // drop frees the work item, waiting for this call, before the table's box is freed (fields drop after
    // `PinnedDrop::drop`); the table is only ever borrowed shared, so this borrow aliases no `&mut`.
    let table = unsafe { &*data.cast::<Mutex<Table>>() };
    cache_table::sweep(&mut *table.lock());
}

/// Whether this kernel can cache pins (it has mmu notifiers).
pub(crate) fn supported() -> bool {
    // SAFETY: plain call.
    unsafe { ffi::pevb_cpin_supported() }
}

impl RegCache {
    pub(crate) fn new() -> Result<Arc<Self>> {
        let table = KBox::pin_init(
            new_mutex!(Table {
                policy: Policy::new(PAGE_SIZE as u64),
                pins: [const { None }; CAPACITY],
                // A kernel without mmu notifiers caches nothing.
                closed: !supported(),
            }),
            GFP_KERNEL,
        )?;
        let cache = Arc::pin_init(
            pin_init!(RegCache {
                table,
                work: AtomicPtr::new(core::ptr::null_mut()),
            }),
            GFP_KERNEL,
        )?;
        if supported() {
            let data = core::ptr::from_ref::<Mutex<Table>>(&cache.table)
                .cast_mut()
                .cast::<c_void>();
            // SAFETY: `data` outlives the work item: the cache's drop frees the item before its table.
            let w = unsafe { ffi::pevb_work_new(Some(sweep), data) };
            if w.is_null() {
                return Err(ENOMEM);
            }
            cache.work.store(w, Ordering::Release);
        }
        Ok(cache)
    }

    /// Pins `[addr, addr + len)` of the caller's memory for one request on device `dev`, whose card keeps
    /// `book`: a cached buffer when one serves it or it can be cached, else a pin for this request only.
    /// `to_device`: the device only reads it.
    pub(crate) fn get(
        this: &Arc<Self>,
        book: &dyn PinBook,
        dev: &Device,
        addr: u64,
        len: u64,
        to_device: bool,
    ) -> Result<HostPin> {
        let r = Range {
            // SAFETY: plain read of the caller's mm pointer, used only as an identity.
            mm: unsafe { ffi::pevb_current_mm() },
            addr,
            len,
        };
        let on = OnCard {
            cache: this,
            book,
            dev,
        };
        match cache_table::get(&on, r, || UserPin::new(dev, addr, len, to_device))? {
            Held::Cached { pin, offset } => {
                CacheUse::new(pin, offset, len, to_device).map(HostPin::Cached)
            }
            Held::Once(p) => Ok(HostPin::Once(p)),
        }
    }

    /// PIN_CUDA of `[first, end)` in address space `mm`, pages `frames` (under the card's pin lock): drops
    /// the cached buffers on those pages, whatever address they were cached under, so the surface's mapping
    /// is the only long-lived one of that memory.
    pub(crate) fn evict_pages(&self, mm: usize, first: u64, end: u64, frames: &[u64]) {
        let r = Range {
            mm,
            addr: first,
            len: end - first,
        };
        cache_table::evict(&mut *self.table.lock(), r, frames);
    }

    /// Waits until no buffer this cache dropped, now or earlier (an eviction, FLUSH, SET_LIMITS, a sweep,
    /// close), is still mapped on pages `frames`, unless a request still holds it (it is unmapped after that
    /// request). PIN_CUDA calls it before the provider maps those pages: the provider's mapping must not
    /// overlap a live one, and a dropped buffer stays mapped until its release is over, which waits for an
    /// invalidation in progress in its address space. This thread releases nothing; it waits at most for
    /// such an invalidation (`mmu_interval_notifier_remove`), whose provider callback waits only for
    /// requests that hold a surface, and those wait for nothing PIN_CUDA holds.
    pub(crate) fn wait_released(&self, frames: &[u64]) {
        // SAFETY: `work` is null or our live work item (freed only by the cache's drop, which our caller's
        // reference to the cache prevents); `frames` is sorted and readable for its length.
        unsafe {
            ffi::pevb_work_wait_pages(
                self.work.load(Ordering::Acquire),
                frames.as_ptr(),
                frames.len() as _,
            )
        };
    }

    /// Whether a buffer cached here holds any of pages `frames`, not counting (if this is `own`, the cache
    /// asking) the buffers that `replacing` takes the place of.
    pub(crate) fn holds_frames(&self, frames: &[u64], own: &RegCache, replacing: Range) -> bool {
        let mine = core::ptr::eq(self, own);
        cache_table::holds_frames(&mut *self.table.lock(), frames, mine, replacing)
    }

    /// IOC_REG_CACHE: does `op`, returns the cache's state.
    pub(crate) fn control(&self, op: Op) -> abi::RegCache {
        cache_table::control(&mut *self.table.lock(), op)
    }

    /// Close or card removal: drops (unmaps and, unless a request still holds it, unpins) every buffer and
    /// caches nothing more.
    pub(crate) fn close(&self) {
        cache_table::close(&mut *self.table.lock());
        // Release (close) and unbind call this, never a request: the dropped buffers are unmapped by the
        // time it returns, so nothing stays mapped past unbind.
        // SAFETY: `work` is null or our live work item (freed only by the cache's drop).
        unsafe { ffi::pevb_work_drain(self.work.load(Ordering::Acquire)) };
    }
}

#[pinned_drop]
impl PinnedDrop for RegCache {
    fn drop(self: Pin<&mut Self>) {
        let w = self.work.swap(core::ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: `w` is null or our work item. Every cached pin holds the cache (`CachedPin::_cache`), so
        // none is alive now; a request holds the file, which holds the cache. Pins already handed to `w`
        // may still have notifiers that queue it: `pevb_work_free` releases them before it cancels and
        // frees `w`. Nor does the work item run this drop: it only drops pins the table held, and the table
        // is emptied (`close`) before the file lets go of the cache.
        unsafe { ffi::pevb_work_free(w) };
    }
}
