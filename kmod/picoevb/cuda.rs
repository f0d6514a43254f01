// SPDX-License-Identifier: GPL-2.0

//! GPU memory ("CUDA surfaces") pinned through the nvidia_p2p API (`p2p.c`), per open file.
//!
//! Lifecycle of a surface. It is pinned by PIN_CUDA and ends in exactly one free (`free_from_callback`),
//! after both of these are over:
//! - the provider's free callback, which comes exactly once: from UNPIN or close (synchronously, inside
//!   `pevb_p2p_unpin`), or on its own when the memory goes away (munmap, cudaFreeHost, process exit);
//! - an unpin, if one started (it must not start once the callback has: the shim forbids it).
//!
//! The callback first marks the surface dead (no new DMA may use it) and waits for the DMAs using it to
//! finish; DMA waits are bounded by the engine timeout, and no lock is held across them, so the wait is
//! bounded too. Whichever of callback and unpin finishes second does the free.

use crate::cache_policy::share_page_frames;
use crate::errno::Errno;
use crate::errors::kerr;
use crate::ffi;
use crate::pin::{user_frames, Frames};
use crate::port::Active;
use crate::segments::Segment;
use core::ffi::c_void;
use core::fmt;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::{
    device::Device,
    new_condvar, new_mutex, new_spinlock,
    prelude::*,
    rbtree::{RBTree, RBTreeNodeReservation},
    sync::{Arc, CondVar, Mutex, MutexGuard, SpinLock},
};

/// What surfaces need of the books their card keeps (`book.rs`): declared here, so that a surface never
/// reaches back into its owner.
pub(crate) trait SurfaceBook: Send + Sync {
    /// Records a surface about to be pinned (the caller holds the device).
    fn add_surface(&self, s: Arc<Surface>) -> Result;
    /// Forgets a surface that has been freed.
    fn drop_surface(&self, s: &Surface);
    /// Locks out other PIN_CUDA calls, and cache pins, on this card while one checks for overlaps and pins.
    fn lock_pins(&self) -> MutexGuard<'_, ()>;
    /// Whether a live surface covers pages `[first, end)` of address space `mm` or any of pages `frames`.
    fn overlaps(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool;
    /// A surface on those pages whose free callback has begun and whose pin is not freed yet (still mapped,
    /// maybe).
    fn dying_surface(
        &self,
        mm: usize,
        first: u64,
        end: u64,
        frames: &[u64],
    ) -> Option<Arc<Surface>>;
    /// Drops every file's cached host buffers on those pages (under the pin lock, before the surface is
    /// mapped) and returns once none is mapped any more (except those a running request holds), those
    /// dropped earlier whose release is still going on included.
    fn evict_cached(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> Result;
}

/// What `Surface::detach` found.
pub(crate) enum Detached {
    /// The DMA mapping is dropped (now or before).
    Unmapped,
    /// The free callback has begun: its free unmaps, after the DMAs using the surface (`wait_freed`).
    CallbackRunning,
}

#[derive(Clone, Copy, Default)]
struct Use {
    /// DMAs using the surface now.
    users: u32,
    /// The callback has begun: no new DMA, no new unpin.
    dead: bool,
    /// An unpin started (and, with `unpin_done`, finished).
    unpinning: bool,
    unpin_done: bool,
    /// The callback is over except for the free.
    callback_done: bool,
    /// The card is gone: the DMA mapping was dropped at removal.
    detached: bool,
    /// The pin is freed (and so unmapped).
    freed: bool,
}

#[pin_data]
pub(crate) struct Surface {
    /// The shim's pin; stored by `pevb_p2p_pin` before the callback can run.
    p: AtomicPtr<ffi::PevbP2p>,
    /// Bytes pinned, from the user's `va`.
    len: u64,
    /// The books of the card the surface is mapped for; they forget the surface when it is freed.
    book: Arc<dyn SurfaceBook>,
    /// Address space and page range pinned, and the pages behind them (empty where they have no struct
    /// page: a dGPU's BAR), for the overlap checks.
    mm: usize,
    pages: (u64, u64),
    frames: Frames,
    #[pin]
    state: SpinLock<Use>,
    #[pin]
    idle: CondVar,
}

/// A DMA's hold on a surface: the callback waits for it. Nothing is allocated while one is held: reclaim
/// may run the surface's free callback on the holding thread, which would wait for this very use (so the
/// segments are the shim's, built at PIN_CUDA, and only borrowed here).
pub(crate) struct InUse {
    s: Arc<Surface>,
    /// Bytes the request hands to the device and, after a C2H (`!to_device`), back to the CPU.
    synced: u64,
    to_device: bool,
}

impl Drop for InUse {
    fn drop(&mut self) {
        if self.synced > 0 && !self.to_device {
            // SAFETY: the pin is live: we still hold our use, the callback waits for it.
            unsafe {
                ffi::pevb_p2p_sync(self.s.p.load(Ordering::Acquire), self.synced, false, false)
            };
        }
        {
            let mut g = self.s.state.lock();
            g.users -= 1;
            if g.users == 0 && g.dead {
                self.s.idle.notify_all();
            }
        }
        // SAFETY: plain lockdep annotation, paired with the acquire in `Surfaces::enter`.
        unsafe { ffi::pevb_p2p_use_release() };
    }
}

impl InUse {
    /// The surface's bus segments (head offset applied, trimmed to the pinned length, bus-contiguous
    /// neighbours merged), built by the shim at PIN_CUDA and borrowed for as long as this use lasts.
    pub(crate) fn segments(&self) -> &[Segment] {
        let mut n = 0u32;
        // SAFETY: the pin is live: we hold a use, and the callback frees the pin only after the last use.
        let p = unsafe { ffi::pevb_p2p_segments(self.s.p.load(Ordering::Acquire), &mut n) };
        // SAFETY: the shim's array holds `n` segments of `Segment`'s `repr(C)` layout (two u64, as its
        // `struct pevb_p2p_seg`), non-null (allocated for at least one), written before the pin went live
        // and never changed until the pin is freed, which waits for this use: `&self` bounds the borrow.
        unsafe { core::slice::from_raw_parts(p, n as usize) }
    }

    pub(crate) fn len(&self) -> u64 {
        self.s.len
    }

    /// Hands the request's `len` bytes to the device now (and back to the CPU when the use ends, after a
    /// C2H: `to_device` false).
    pub(crate) fn sync_for_device(&mut self, len: u64, to_device: bool) {
        let len = len.min(self.s.len);
        // SAFETY: the pin is live (we hold a use); `len` is within the pinned length.
        unsafe { ffi::pevb_p2p_sync(self.s.p.load(Ordering::Acquire), len, to_device, true) };
        self.synced = len;
        self.to_device = to_device;
    }
}

impl Surface {
    /// UNPIN or close: ends the pin unless its memory already went away.
    fn unpin(&self) {
        {
            let mut g = self.state.lock();
            if g.dead || g.unpinning {
                return;
            }
            g.unpinning = true;
        }
        // SAFETY: the pin is live and cannot be freed before `unpin_done` (see `surface_gone`); this is the
        // only unpin (the flag above), and the callback had not begun when it was set.
        unsafe { ffi::pevb_p2p_unpin(self.p.load(Ordering::Acquire)) };
        let free = {
            let mut g = self.state.lock();
            g.unpin_done = true;
            g.callback_done
        };
        if free {
            self.free();
        }
    }

    fn free(&self) {
        // SAFETY: called exactly once per pin, after the callback and any unpin are over.
        unsafe { ffi::pevb_p2p_free_from_callback(self.p.load(Ordering::Acquire)) };
        self.book.drop_surface(self);
        self.state.lock().freed = true;
        self.idle.notify_all();
    }

    /// Whether this surface covers any of pages `[first, end)` of address space `mm` or any of pages
    /// `frames` (the same memory under another address).
    fn covers(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool {
        (self.mm == mm && self.pages.0 < end && first < self.pages.1)
            || share_page_frames(&self.frames, frames)
    }

    /// Whether this live surface covers any of pages `[first, end)` of address space `mm` or any of pages
    /// `frames`.
    pub(crate) fn overlaps(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool {
        self.covers(mm, first, end, frames) && !self.state.lock().dead
    }

    /// Whether this surface covers any of those pages and its free callback has begun but the pin is not
    /// freed yet: its DMA mapping may still be live (the callback unmaps once the DMAs using it are over).
    pub(crate) fn dying(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool {
        self.covers(mm, first, end, frames) && {
            let g = self.state.lock();
            g.dead && !g.freed
        }
    }

    /// Waits until the pin is freed, and so unmapped. Bounded like the callback: it waits only for the
    /// DMAs using the surface.
    pub(crate) fn wait_freed(&self) {
        let mut g = self.state.lock();
        while !g.freed {
            self.idle.wait(&mut g);
        }
    }

    /// Whether this live surface holds any of pages `frames`.
    pub(crate) fn holds_frames(&self, frames: &[u64]) -> bool {
        share_page_frames(&self.frames, frames) && !self.state.lock().dead
    }

    /// One line of the card's debugfs `state`: the range and where the surface is in its lifecycle.
    pub(crate) fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = *self.state.lock();
        writeln!(
            f,
            "surface {:#x}-{:#x} len {} users {} dead {} unpinning {} detached {} freed {}",
            self.pages.0,
            self.pages.1,
            self.len,
            u.users,
            u8::from(u.dead),
            u8::from(u.unpinning),
            u8::from(u.detached),
            u8::from(u.freed)
        )
    }

    /// Card removal: drops the DMA mapping (the device must not keep mappings past unbind) and refuses DMA
    /// from now on. The pin itself stays until UNPIN, close or the memory going away.
    pub(crate) fn detach(&self) -> Detached {
        {
            let mut g = self.state.lock();
            if g.dead {
                return Detached::CallbackRunning;
            }
            if g.detached {
                return Detached::Unmapped;
            }
            g.detached = true;
            // Held like a DMA, so the callback cannot free the pin under us.
            g.users += 1;
        }
        // SAFETY: the pin is live (the callback waits for our use before freeing it).
        unsafe { ffi::pevb_p2p_unmap_device(self.p.load(Ordering::Acquire)) };
        let mut g = self.state.lock();
        g.users -= 1;
        if g.users == 0 && g.dead {
            self.idle.notify_all();
        }
        Detached::Unmapped
    }
}

/// The provider's free callback for a surface.
unsafe extern "C" fn surface_gone(data: *mut c_void) {
    // SAFETY: `data` is the reference `pin` leaked for this callback, which runs exactly once per pin.
    let s: Arc<Surface> = unsafe { Arc::from_raw(data.cast::<Surface>()) };
    // SAFETY: plain lockdep annotation: this callback waits for every use (see `InUse`).
    unsafe { ffi::pevb_p2p_uses_awaited() };
    let free = {
        let mut g = s.state.lock();
        g.dead = true;
        while g.users > 0 {
            s.idle.wait(&mut g);
        }
        g.callback_done = true;
        !g.unpinning || g.unpin_done
    };
    if free {
        s.free();
    }
}

/// Pins `len` bytes of GPU memory at `va` (in address space `mm`, pages `frames`) for DMA by `dev`, in its
/// card's `book`.
fn pin(
    book: &Arc<dyn SurfaceBook>,
    dev: &Device,
    mm: usize,
    va: u64,
    len: u64,
    frames: Frames,
) -> Result<Arc<Surface>> {
    let pages = page_range(va, len);
    let s = Arc::pin_init(
        pin_init!(Surface {
            p: AtomicPtr::new(core::ptr::null_mut()),
            len,
            book: book.clone(),
            mm,
            pages,
            frames,
            state <- new_spinlock!(Use::default()),
            idle <- new_condvar!(),
        }),
        GFP_KERNEL,
    )?;
    // Recorded before the pin exists: its callback may run (and forget it) as soon as the pin does.
    book.add_surface(s.clone())?;
    let data = Arc::into_raw(s.clone()).cast_mut().cast::<c_void>();
    // SAFETY: `dev` is a live device; `data` stays valid until the callback reclaims it; the out-pointer is
    // the surface's own slot, which outlives the pin.
    let rc = unsafe {
        ffi::pevb_p2p_pin(
            ffi::raw_dev(dev),
            va,
            len,
            Some(surface_gone),
            data,
            s.p.as_ptr(),
        )
    };
    if rc != 0 {
        // SAFETY: a failed pin never calls the callback: take back its reference.
        drop(unsafe { Arc::from_raw(data.cast::<Surface>()) });
        book.drop_surface(&s);
        return Err(Error::from_errno(rc));
    }
    Ok(s)
}

/// The GPU pages a pin covers: 4 KiB on Jetson (pinned system memory), 64 KiB on dGPU.
const GPU_PAGE: u64 = if cfg!(gdr_p2p_dgpu) {
    64 << 10
} else {
    4 << 10
};

/// The GPU-page-aligned range around `[va, va + len)`: what the provider really pins and maps.
fn page_range(va: u64, len: u64) -> (u64, u64) {
    (
        va & !(GPU_PAGE - 1),
        (va + len).div_ceil(GPU_PAGE) * GPU_PAGE,
    )
}

/// Whether a GPU-memory provider is loaded now.
pub(crate) fn provider_available() -> bool {
    // SAFETY: plain calls into the shim; the reference is dropped at once.
    unsafe {
        if ffi::pevb_p2p_get() != 0 {
            return false;
        }
        ffi::pevb_p2p_put();
    }
    true
}

struct Table {
    tree: RBTree<u32, Arc<Surface>>,
    next: u32,
}

/// The surfaces of one open file, by handle.
#[pin_data]
pub(crate) struct Surfaces {
    #[pin]
    table: Mutex<Table>,
}

impl Surfaces {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            table <- new_mutex!(Table { tree: RBTree::new(), next: 0 }),
        })
    }

    /// PIN_CUDA, on the card whose books are `book` and device `dev`, which the caller holds (`active`:
    /// removal must wait for the mapping and then find the surface to unmap): returns the new handle.
    /// The caller faulted the range in before it took the device (`pin::prefault`): the page lookups and
    /// the provider's pin below run under the card's pin lock and the hold removal drains, where a fault
    /// that never resolves (userfaultfd, FUSE) would stall every PIN_CUDA of the card and its removal.
    pub(crate) fn pin(
        &self,
        book: &Arc<dyn SurfaceBook>,
        dev: &Device,
        _active: &Active<'_>,
        va: u64,
        len: u64,
    ) -> Result<u32> {
        // SAFETY: plain call; balanced by the put below.
        kernel::error::to_result(unsafe { ffi::pevb_p2p_get() })
            .map_err(|_| kerr(Errno::EOPNOTSUPP))?;
        // SAFETY: plain read of the caller's mm pointer, used only as an identity.
        let mm = unsafe { ffi::pevb_current_mm() };
        let (first, end) = page_range(va, len);
        let pinned = loop {
            // The DMA API does not support overlapping mappings of the same memory (on a non-coherent SoC
            // the cache maintenance of one would undo the other's): a range is pinned once per card and the
            // handle reused. Checked and pinned under one lock so two callers cannot both pass.
            let pins = book.lock_pins();
            // By the pages, not only the address: one memory mapped at two addresses is one surface.
            let frames = match user_frames(first, end) {
                Ok(f) => f,
                Err(e) => break Err(e),
            };
            if book.overlaps(mm, first, end, &frames) {
                break Err(EBUSY);
            }
            // A surface of these pages whose memory went away (its callback has begun: munmap, exit, in
            // this or another process) may still be mapped until the DMAs using it are over: wait for its
            // free, without the lock (its callback takes none of ours), then check again.
            if let Some(s) = book.dying_surface(mm, first, end, &frames) {
                drop(pins);
                s.wait_freed();
                continue;
            }
            // Host buffers cached on these pages would be a second long-lived mapping of the memory.
            break book
                .evict_cached(mm, first, end, &frames)
                .and_then(|()| pin(book, dev, mm, va, len, frames));
        };
        // SAFETY: the get above succeeded; a pin holds the provider on its own.
        unsafe { ffi::pevb_p2p_put() };
        let s = pinned?;
        // The pages read before pinning must be the ones pinned: a remap in between (not seen by the
        // provider, whose pin came after it) would leave the checks keyed on other pages.
        let same = user_frames(first, end).is_ok_and(|f| *f == *s.frames);
        if !s.frames.is_empty() && !same {
            s.unpin();
            return Err(EAGAIN);
        }
        // The table's node is allocated before its lock: a request holding a use of another surface may
        // wait for that lock (`enter`), and reclaim inside the allocation could run that surface's free
        // callback here, which waits for the use.
        let node = match RBTreeNodeReservation::new(GFP_KERNEL) {
            Ok(n) => n,
            Err(e) => {
                s.unpin();
                return Err(e);
            }
        };
        let mut t = self.table.lock();
        // Handles are small non-negative ints, never reused while in the table.
        let mut h = t.next;
        while t.tree.get(&h).is_some() {
            h = (h + 1) & i32::MAX as u32;
        }
        t.next = (h + 1) & i32::MAX as u32;
        // `h` is free: nothing is replaced.
        let _ = t.tree.insert(node.into_node(h, s));
        Ok(h)
    }

    /// UNPIN_CUDA. EINVAL if the handle is unknown or its memory already went away.
    pub(crate) fn unpin(&self, handle: u32) -> Result {
        let s = self.table.lock().tree.remove(&handle).ok_or(EINVAL)?;
        let gone = s.state.lock().dead;
        s.unpin();
        if gone {
            Err(EINVAL)
        } else {
            Ok(())
        }
    }

    /// Takes a use of the surface behind `handle` for a DMA: EINVAL if the handle is unknown or its
    /// memory is gone.
    pub(crate) fn enter(&self, handle: u32) -> Result<InUse> {
        let s = self.table.lock().tree.get(&handle).cloned().ok_or(EINVAL)?;
        {
            let mut g = s.state.lock();
            if g.dead {
                return Err(EINVAL);
            }
            if g.detached {
                return Err(ENODEV);
            }
            g.users += 1;
        }
        // SAFETY: plain lockdep annotation, released by `InUse`'s drop.
        unsafe { ffi::pevb_p2p_use_acquire() };
        Ok(InUse {
            s,
            synced: 0,
            to_device: true,
        })
    }

    /// Close: unpins everything.
    pub(crate) fn unpin_all(&self) {
        loop {
            let next = {
                let mut t = self.table.lock();
                let key = t.tree.iter().next().map(|(k, _)| *k);
                key.and_then(|k| t.tree.remove(&k))
            };
            match next {
                Some(s) => s.unpin(),
                None => break,
            }
        }
    }
}
