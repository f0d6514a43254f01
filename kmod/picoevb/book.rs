// SPDX-License-Identifier: GPL-2.0

//! A card's books of what it keeps mapped beyond one request: the GPU surfaces, the open files' registration
//! caches, the host pins of requests a wedged engine may still write (the quarantine), and the pin lock
//! that orders PIN_CUDA against the cache. Removal empties them.
//!
//! Surfaces and caches reach their book only through the traits they declare (`cuda::SurfaceBook`,
//! `regcache::PinBook`), so neither imports the card or this file.
//!
//! Lists that a provider's free callback takes (it may run from reclaim, on the thread of any allocation)
//! never grow under their lock: see `locked_with_room`.

use crate::cache_policy::{Op, Range};
use crate::cuda::{Detached, Surface, SurfaceBook};
use crate::regcache::{HostPin, PinBook, RegCache};
use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    device::Device,
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex, MutexGuard},
};

#[pin_data]
pub(crate) struct Book {
    /// GPU surfaces mapped for this device, to unmap at removal.
    #[pin]
    surfaces: Mutex<KVec<Arc<Surface>>>,
    /// Free callbacks removal waits for now, for the debugfs `state`.
    callbacks_awaited: AtomicU32,
    /// Serialises PIN_CUDA's overlap check with the pin it allows, and a cache's pin with both.
    #[pin]
    pin_lock: Mutex<()>,
    /// The open files' registration caches, to empty at removal.
    #[pin]
    caches: Mutex<KVec<Arc<RegCache>>>,
    /// Host pins of requests whose engine could not be shown idle: kept until unbind (`Port::wedge`).
    #[pin]
    quarantine: Mutex<Quarantine>,
}

impl Book {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                surfaces <- new_mutex!(KVec::new()),
                callbacks_awaited: AtomicU32::new(0),
                pin_lock <- new_mutex!(()),
                caches <- new_mutex!(KVec::new()),
                quarantine <- new_mutex!(Quarantine {
                    pins: KVec::new(),
                    reserved: 0,
                }),
            }),
            GFP_KERNEL,
        )
    }

    /// Room in the quarantine for `n` host pins of a request, taken before it pins anything: keeping a
    /// pin must not need an allocation that can fail, since a pin can be neither forgotten (a cached
    /// pin's mmu notifier has its ops in module text, which rmmod would free) nor unpinned while a wedged
    /// engine may still write it.
    pub(crate) fn quarantine_room(&self, n: usize) -> Result<QuarantineRoom<'_>> {
        let mut q = locked_with_room(
            &self.quarantine,
            |q| &mut q.pins,
            |q| q.pins.len() + q.reserved + n,
        )?;
        q.reserved += n;
        Ok(QuarantineRoom { book: self, n })
    }

    /// Keeps a request's host pin until unbind, in a slot of its `room`: its engine was not shown idle.
    /// `dev` names the card in the journal.
    pub(crate) fn quarantine(&self, dev: &Device, room: &mut QuarantineRoom<'_>, mut pin: HostPin) {
        if let HostPin::Once(p) = &mut pin {
            p.quarantined();
        }
        let mut q = self.quarantine.lock();
        if room.n > 0 {
            room.n -= 1;
            q.reserved -= 1;
        }
        // `pins` has room for `len + reserved` (`quarantine_room`), and this pin's slot was in `reserved`.
        if let Err(e) = q.pins.push_within_capacity(pin) {
            drop(q);
            // Only a request that kept more pins than it took room for gets here. Bus mastering is off
            // (`Port::wedge`): unpinning is the lesser harm than forgetting a pin whose notifier outlives
            // us.
            dev_err!(dev, "quarantine full: unpinning a wedged request's pages\n");
            drop(e);
        }
    }

    /// Records an open file's registration cache.
    pub(crate) fn add_cache(&self, c: Arc<RegCache>) -> Result {
        self.caches.lock().push(c, GFP_KERNEL)?;
        Ok(())
    }

    /// Forgets a closed file's registration cache.
    pub(crate) fn drop_cache(&self, c: &RegCache) {
        self.caches.lock().retain(|x| !core::ptr::eq(&**x, c));
    }

    /// Card removal, once no request is left and bus mastering is off or the engines are stopped
    /// (`kmod/logic/src/removal.rs` orders the three calls): lets go of the quarantined pins.
    pub(crate) fn release_quarantine(&self) {
        let quarantined = core::mem::take(&mut self.quarantine.lock().pins);
        drop(quarantined);
    }

    /// Removal: unmaps every surface from the device (waiting for a free callback that has begun); their
    /// pins stay until UNPIN, close or munmap.
    pub(crate) fn detach_surfaces(&self) {
        // Unmapped outside the lock: a surface's free callback takes it too.
        let surfaces = core::mem::take(&mut *self.surfaces.lock());
        for s in surfaces.iter() {
            if let Detached::CallbackRunning = s.detach() {
                // It waits only for DMA uses, and removal has waited for every request already.
                self.callbacks_awaited.fetch_add(1, Ordering::Relaxed);
                s.wait_freed();
                self.callbacks_awaited.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Removal: empties every open file's registration cache.
    pub(crate) fn close_caches(&self) {
        for c in self.caches.lock().iter() {
            c.close();
        }
    }

    /// The book's lines of the card's debugfs `state` (bring-up, bench): what it holds for DMA and why
    /// removal may wait.
    pub(crate) fn write_state(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        {
            let surfaces = self.surfaces.lock();
            writeln!(f, "surfaces {}", surfaces.len())?;
            for s in surfaces.iter() {
                s.describe(f)?;
            }
        }
        writeln!(
            f,
            "callbacks_awaited {}",
            self.callbacks_awaited.load(Ordering::Relaxed)
        )?;
        let (files, buffers) = {
            let caches = self.caches.lock();
            let buffers: u32 = caches.iter().map(|c| c.control(Op::Query).entries).sum();
            (caches.len(), buffers)
        };
        writeln!(f, "caches {files} cached_buffers {buffers}")?;
        writeln!(f, "quarantined_pins {}", self.quarantine.lock().pins.len())
    }

    fn overlaps(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool {
        self.surfaces
            .lock()
            .iter()
            .any(|s| s.overlaps(mm, first, end, frames))
    }
}

impl SurfaceBook for Book {
    fn add_surface(&self, s: Arc<Surface>) -> Result {
        let mut list = locked_with_room(&self.surfaces, |v| v, |v| v.len() + 1)?;
        list.push_within_capacity(s).map_err(|_| ENOMEM)
    }

    fn drop_surface(&self, s: &Surface) {
        self.surfaces.lock().retain(|x| !core::ptr::eq(&**x, s));
    }

    fn lock_pins(&self) -> MutexGuard<'_, ()> {
        self.pin_lock.lock()
    }

    fn overlaps(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool {
        Book::overlaps(self, mm, first, end, frames)
    }

    fn dying_surface(
        &self,
        mm: usize,
        first: u64,
        end: u64,
        frames: &[u64],
    ) -> Option<Arc<Surface>> {
        self.surfaces
            .lock()
            .iter()
            .find(|s| s.dying(mm, first, end, frames))
            .cloned()
    }

    fn evict_cached(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> Result {
        let mut caches = KVec::new();
        for c in self.caches.lock().iter() {
            c.evict_pages(mm, first, end, frames);
            caches.push(c.clone(), GFP_KERNEL)?;
        }
        // Outside the list's lock: a closing file takes it to forget its cache.
        for c in caches.iter() {
            c.wait_released(frames);
        }
        Ok(())
    }
}

impl PinBook for Book {
    fn lock_pins(&self) -> MutexGuard<'_, ()> {
        self.pin_lock.lock()
    }

    fn overlaps(&self, mm: usize, first: u64, end: u64) -> bool {
        Book::overlaps(self, mm, first, end, &[])
    }

    fn frames_in_use(&self, frames: &[u64], own: &RegCache, replacing: Range) -> bool {
        self.surfaces.lock().iter().any(|s| s.holds_frames(frames))
            || self
                .caches
                .lock()
                .iter()
                .any(|c| c.holds_frames(frames, own, replacing))
    }
}

/// Host pins kept until unbind, and the slots running requests have taken for theirs.
struct Quarantine {
    pins: KVec<HostPin>,
    /// Slots of `pins`' capacity promised to `QuarantineRoom`s.
    reserved: usize,
}

/// A request's slots in the quarantine (`Book::quarantine_room`), given back when it ends.
pub(crate) struct QuarantineRoom<'a> {
    book: &'a Book,
    n: usize,
}

impl Drop for QuarantineRoom<'_> {
    fn drop(&mut self) {
        self.book.quarantine.lock().reserved -= self.n;
    }
}

/// `m` locked, with capacity in its vector `vec` for `want` items (both read under the lock). The vector
/// grows by an allocation made without the lock, since that allocation may enter reclaim, which may run
/// code that takes the lock (a provider's free callback).
fn locked_with_room<S, T>(
    m: &Mutex<S>,
    vec: fn(&mut S) -> &mut KVec<T>,
    want: impl Fn(&S) -> usize,
) -> Result<MutexGuard<'_, S>> {
    loop {
        let need = {
            let mut g = m.lock();
            let w = want(&g);
            if vec(&mut g).capacity() >= w {
                return Ok(g);
            }
            w
        };
        let mut grown = KVec::with_capacity(need, GFP_KERNEL)?;
        let mut g = m.lock();
        let w = want(&g);
        let cur = vec(&mut g);
        if cur.capacity() >= w {
            return Ok(g);
        }
        if grown.capacity() < w {
            // It grew meanwhile: allocate again, without the lock.
            continue;
        }
        for x in cur.drain_all() {
            // Cannot fail: `grown` has room for `w` items, at least as many as `cur` holds.
            let _ = grown.push_within_capacity(x);
        }
        *cur = grown;
        return Ok(g);
    }
}
