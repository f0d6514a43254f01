// SPDX-License-Identifier: GPL-2.0

//! The registration cache of one open file ("lazy unpinning"): host buffers stay pinned and DMA-mapped
//! between requests. What hits and what is evicted is `cache_policy`'s business; this file holds the pins.
//!
//! A cached buffer is pinned writable, mapped bidirectionally and watched by an mmu interval notifier
//! (`helpers.c`). When its memory changes the notifier marks it stale and queues `sweep`, which drops it;
//! a stale buffer never serves a request (checked under the table lock at every hit). Requests hold their
//! buffer by reference, so dropping it from the table (sweep, eviction, flush, removal) never unpins under
//! a running DMA: the last holder unpins. Pinning happens outside the table lock (it may fault pages in
//! for a long time), under the card's pin lock (PIN_CUDA evicts cached buffers under it); the notifier
//! takes no lock of ours.

use crate::abi;
use crate::cache_policy::{share_page_frames, Lookup, Op, Policy, Range, Removal, CAPACITY};
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
        // The last holder may be a request thread, which must not remove the notifier (helpers.c, struct
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

impl Table {
    fn remove(&mut self, slot: usize, why: Removal) {
        self.policy.remove(slot, why);
        self.pins[slot] = None;
    }

    fn clear(&mut self) {
        let Table { policy, pins, .. } = self;
        policy.flush(|slot| pins[slot] = None);
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
    let mut t = table.lock();
    for slot in 0..CAPACITY {
        if t.pins[slot].as_ref().is_some_and(|p| p.stale()) {
            t.remove(slot, Removal::Invalidated);
        }
    }
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
                closed: false,
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
        let work = this.work.load(Ordering::Acquire);
        if !work.is_null() {
            if let Some(u) = this.cached(this, book, dev, r, to_device, work)? {
                return Ok(HostPin::Cached(u));
            }
        }
        let once = UserPin::new(dev, addr, len, to_device)?;
        this.table.lock().policy.note_uncached();
        Ok(HostPin::Once(once))
    }

    /// The cached way of `get`; `None`: pin for once only.
    fn cached(
        &self,
        this: &Arc<Self>,
        book: &dyn PinBook,
        dev: &Device,
        r: Range,
        to_device: bool,
        work: *mut ffi::PevbWork,
    ) -> Result<Option<CacheUse>> {
        let want = {
            let mut t = self.table.lock();
            loop {
                if t.closed {
                    return Ok(None);
                }
                match t.policy.lookup(r) {
                    Lookup::Hit { slot, offset } => match t.pins[slot].clone() {
                        Some(p) if !p.stale() => {
                            t.policy.hit(slot);
                            drop(t);
                            return CacheUse::new(p, offset, r.len, to_device).map(Some);
                        }
                        _ => t.remove(slot, Removal::Invalidated),
                    },
                    Lookup::Miss => {
                        let want = t.policy.merged(r);
                        // A buffer is cached only on its second use (`cache_policy`): the first
                        // is the uncached path, with no registration and no eviction.
                        if !t.policy.admit(r) {
                            return Ok(None);
                        }
                        break want;
                    }
                    Lookup::Bypass => return Ok(None),
                }
            }
        };
        // Memory pinned as a GPU surface keeps that one mapping: the DMA API does not support a second,
        // long-lived one. Checked, pinned and cached under the lock PIN_CUDA takes to evict cached buffers.
        let _pins = book.lock_pins();
        let page = PAGE_SIZE as u64;
        let end = (want.addr + want.len).div_ceil(page) * page;
        let first = want.addr & !(page - 1);
        if book.overlaps(want.mm, first, end) {
            return Ok(None);
        }
        // One long-lived mapping per page and card, whatever address or file maps the page: pages a
        // surface or another cached buffer holds (an alias of the memory) are pinned for the request only.
        // Looked up before pinning, so such a request never makes a long-lived pin it cannot keep.
        // Memory that is not all writable struct pages (no frames: read-only, a device's BAR) cannot be a
        // long-lived writable pin: not tried, as on 5.10.
        let Ok(frames) = user_frames(first, end) else {
            return Ok(None);
        };
        if frames.is_empty() {
            return Ok(None);
        }
        if book.frames_in_use(&frames, self, want) {
            return Ok(None);
        }
        // Not cacheable: read-only memory the device only reads, memory that kept changing, a file mapping
        // that needs writeback (FOLL_LONGTERM refuses it). The one-off pin then serves it, or gives the
        // request's real error (a bad address).
        let Ok(pin) = CachedPin::new(dev, want.addr, want.len, this, work) else {
            return Ok(None);
        };
        // The pages pinned are not those looked up when the memory was remapped meanwhile: then this pin
        // serves the request only if its pages are held elsewhere.
        let shared = *pin.frames != *frames && book.frames_in_use(&pin.frames, self, want);
        let mut t = self.table.lock();
        if shared {
            t.policy.note_uncached();
        } else if !t.closed {
            while let Some(v) = t.policy.make_room(want) {
                t.remove(v, Removal::Evicted);
            }
            if let Some(slot) = t.policy.insert(want) {
                t.pins[slot] = Some(pin.clone());
            }
        }
        drop(t);
        CacheUse::new(pin, r.addr - want.addr, r.len, to_device).map(Some)
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
        let mut t = self.table.lock();
        while let Some(slot) = t.policy.sharing(r) {
            t.remove(slot, Removal::Evicted);
        }
        for slot in 0..CAPACITY {
            if t.pins[slot]
                .as_ref()
                .is_some_and(|p| share_page_frames(&p.frames, frames))
            {
                t.remove(slot, Removal::Evicted);
            }
        }
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
        let t = self.table.lock();
        (0..CAPACITY).any(|slot| {
            t.pins[slot].as_ref().is_some_and(|p| {
                !(mine && t.policy.slot_shares_page(slot, replacing))
                    && share_page_frames(&p.frames, frames)
            })
        })
    }

    /// IOC_REG_CACHE: does `op`, returns the cache's state.
    pub(crate) fn control(&self, op: Op) -> abi::RegCache {
        let mut t = self.table.lock();
        let Table { policy, pins, .. } = &mut *t;
        policy.control(op, |slot| pins[slot] = None)
    }

    /// Close or card removal: drops (unmaps and, unless a request still holds it, unpins) every buffer and
    /// caches nothing more.
    pub(crate) fn close(&self) {
        {
            let mut t = self.table.lock();
            t.closed = true;
            t.clear();
        }
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
