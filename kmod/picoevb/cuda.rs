// SPDX-License-Identifier: GPL-2.0

//! GPU memory ("CUDA surfaces") pinned through the nvidia_p2p API (`p2p.c`), or host memory pinned as a
//! surface (PIN_HOST, `p2p.c`'s pinned host memory, where no provider exists), per open file.
//!
//! A surface's lifecycle (its uses, the provider's free callback, the unpin, removal's unmap, and who
//! frees), its state and its sequences, is `kmod/logic/src/surface_life.rs`, which the 5.10 glue runs
//! too: this file gives it the surface's services (its `Life` under a spinlock, the shim's unpin, unmap
//! and free, a wait on `idle`). No lock is held across those waits, and each is bounded by the engine
//! timeout of the DMAs it waits for.

use crate::cache_policy::share_page_frames;
use crate::errno::Errno;
use crate::errors::{errno, kerr};
use crate::ffi;
use crate::pin::{user_frames, Frames};
use crate::port::Active;
use crate::segments::Segment;
use crate::surface_life::{self, Life, Until};
use crate::surface_pin;
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

/// What backs a surface: the GPU provider's pin, the caller's host memory pinned by the shim itself, or
/// another driver's dma-buf. One contract (`p2p.c`), so the rest of this file never asks which.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backing {
    /// PIN_CUDA: nvidia_p2p.
    Provider,
    /// PIN_HOST: `cuMemHostAlloc` memory, pinned long-term under an mmu interval notifier.
    Host,
    /// IMPORT_DMABUF: dma-buf `fd`, from the window's offset (the `va` of the others). It has no user
    /// address or pages the driver may look at, so it never overlaps another surface or pin by them.
    DmaBuf { fd: i32 },
}

/// What `Surface::detach` found.
pub(crate) enum Detached {
    /// The DMA mapping is dropped (now or before).
    Unmapped,
    /// The free callback has begun: its free unmaps, after the DMAs using the surface (`wait_freed`).
    CallbackRunning,
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
    /// Where the surface is in its life (`surface_life.rs`).
    #[pin]
    state: SpinLock<Life>,
    #[pin]
    idle: CondVar,
}

/// A DMA's hold on a surface: the callback waits for it. Nothing is allocated while one is held: reclaim
/// may run the surface's free callback on the holding thread, which would wait for this very use (so the
/// segments are the shim's, built at PIN_CUDA, and only borrowed here).
pub(crate) struct InUse {
    s: Arc<Surface>,
    /// The bytes (offset, length) the request hands to the device and, after a C2H (`!to_device`), back
    /// to the CPU.
    synced: (u64, u64),
    to_device: bool,
}

impl Drop for InUse {
    fn drop(&mut self) {
        if !self.to_device {
            let (at, len) = self.synced;
            let p = self.s.p.load(Ordering::Acquire);
            // SAFETY: the pin is live: we still hold our use, the callback waits for it.
            unsafe { ffi::pevb_p2p_sync(p, at, len, false, false) };
        }
        self.s.end_use();
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
}

impl Surface {
    /// UNPIN or close (`surface_life::unpin`).
    fn unpin(&self) {
        surface_life::unpin(self);
    }

    /// A use (a DMA's) ends (`surface_life::end_use`).
    fn end_use(&self) {
        surface_life::end_use(self);
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
        self.covers(mm, first, end, frames) && self.state.lock().live()
    }

    /// Whether this surface covers any of those pages and its free callback has begun but the pin is not
    /// freed yet: its DMA mapping may still be live (the callback unmaps once the DMAs using it are over).
    pub(crate) fn dying(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool {
        self.covers(mm, first, end, frames) && self.state.lock().dying()
    }

    /// Waits until the pin is freed, and so unmapped (`surface_life::await_free`).
    pub(crate) fn wait_freed(&self) {
        surface_life::await_free(self);
    }

    /// Whether this live surface holds any of pages `frames`.
    pub(crate) fn holds_frames(&self, frames: &[u64]) -> bool {
        share_page_frames(&self.frames, frames) && self.state.lock().live()
    }

    /// One line of the card's debugfs `state`: the range and where the surface is in its lifecycle.
    pub(crate) fn describe(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let u = self.state.lock().view();
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

    /// Card removal (`surface_life::detach`): drops the DMA mapping and refuses DMA from now on; the pin
    /// stays until UNPIN, close or the memory going away.
    pub(crate) fn detach(&self) -> Detached {
        if surface_life::detach(self) {
            Detached::CallbackRunning
        } else {
            Detached::Unmapped
        }
    }
}

/// The kernel services of the lifecycle's sequences (`kmod/logic/src/surface_life.rs`).
impl surface_life::Surface for Surface {
    fn locked<R>(&self, f: impl FnOnce(&mut Life) -> R) -> R {
        f(&mut self.state.lock())
    }
    fn wait(&self, u: Until) {
        let mut g = self.state.lock();
        while !g.reached(u) {
            self.idle.wait(&mut g);
        }
    }
    fn wake(&self) {
        self.idle.notify_all();
    }
    fn unpin_pin(&self) {
        // SAFETY: the pin is live and cannot be freed before `end_unpin` (the callback leaves the free to
        // the unpin that began first); this is the only unpin (`begin_unpin`). A callback that began
        // meanwhile does not free it either, and the shim then skips the provider's put (p2p.c's contract).
        unsafe { ffi::pevb_p2p_unpin(self.p.load(Ordering::Acquire)) };
    }
    fn unmap_device(&self) -> bool {
        // SAFETY: the pin is live: `Life::detach` took a use, and the callback waits for it before freeing
        // the pin.
        unsafe { ffi::pevb_p2p_unmap_device(self.p.load(Ordering::Acquire)) }
    }
    fn free_pin(&self) {
        // SAFETY: called exactly once per pin, after the callback and any unpin are over.
        unsafe { ffi::pevb_p2p_free_from_callback(self.p.load(Ordering::Acquire)) };
        self.book.drop_surface(self);
    }
    fn uses_awaited(&self) {
        // SAFETY: plain lockdep annotation: the callback waits for every use (see `InUse`).
        unsafe { ffi::pevb_p2p_uses_awaited() };
    }
}

/// The provider's free callback for a surface (`surface_life::callback`).
unsafe extern "C" fn surface_gone(data: *mut c_void) {
    // SAFETY: `data` is the reference `pin` leaked for this callback, which runs exactly once per pin.
    let s: Arc<Surface> = unsafe { Arc::from_raw(data.cast::<Surface>()) };
    surface_life::callback(&*s);
}

/// Pins `len` bytes of GPU (or, for `Backing::Host`, host) memory at `va` (in address space `mm`, pages
/// `frames`) for DMA by `dev`, in its card's `book`.
fn pin(
    book: &Arc<dyn SurfaceBook>,
    dev: &Device,
    backing: Backing,
    mm: usize,
    va: u64,
    len: u64,
    frames: Frames,
) -> Result<(Arc<Surface>, u32)> {
    let pages = page_range(backing, va, len);
    let s = Arc::pin_init(
        pin_init!(Surface {
            p: AtomicPtr::new(core::ptr::null_mut()),
            len,
            book: book.clone(),
            mm,
            pages,
            frames,
            state <- new_spinlock!(Life::new()),
            idle <- new_condvar!(),
        }),
        GFP_KERNEL,
    )?;
    // Recorded before the pin exists: its callback may run (and forget it) as soon as the pin does.
    book.add_surface(s.clone())?;
    let data = Arc::into_raw(s.clone()).cast_mut().cast::<c_void>();
    let mut placement = 0u32;
    let (dev, cb, out) = (ffi::raw_dev(dev), Some(surface_gone as _), s.p.as_ptr());
    // SAFETY: `dev` is a live device; `data` stays valid until the callback reclaims it; the out-pointers
    // are the surface's own slot, which outlives the pin, and a local. All three keep `p2p.c`'s contract.
    let rc = unsafe {
        match backing {
            Backing::Provider => ffi::pevb_p2p_pin(dev, va, len, cb, data, out),
            Backing::Host => ffi::pevb_p2p_pin_host(dev, va, len, cb, data, out),
            Backing::DmaBuf { fd } => {
                ffi::pevb_p2p_import_dmabuf(dev, fd, va, len, cb, data, out, &mut placement)
            }
        }
    };
    if rc != 0 {
        // SAFETY: a failed pin never calls the callback: take back its reference.
        drop(unsafe { Arc::from_raw(data.cast::<Surface>()) });
        book.drop_surface(&s);
        return Err(Error::from_errno(rc));
    }
    Ok((s, placement))
}

/// The GPU pages a pin covers: 4 KiB on Jetson (pinned system memory), 64 KiB on dGPU.
const GPU_PAGE: u64 = if cfg!(gdr_p2p_dgpu) {
    64 << 10
} else {
    4 << 10
};

/// The page-aligned range around `[va, va + len)`: what the provider (GPU pages) or the shim (host pages)
/// really pins and maps.
fn page_range(backing: Backing, va: u64, len: u64) -> (u64, u64) {
    let page = match backing {
        Backing::Provider => GPU_PAGE,
        Backing::Host => kernel::page::PAGE_SIZE as u64,
        Backing::DmaBuf { .. } => return (0, 0),
    };
    (va & !(page - 1), (va + len).div_ceil(page) * page)
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

/// One PIN_CUDA call: the kernel services of the shared sequence (`kmod/logic/src/surface_pin.rs`) for the
/// GPU-page range `[first, end)` around `[va, va + len)` of address space `mm`.
struct PinCall<'a> {
    surfaces: &'a Surfaces,
    book: &'a Arc<dyn SurfaceBook>,
    dev: &'a Device,
    backing: Backing,
    mm: usize,
    va: u64,
    len: u64,
    first: u64,
    end: u64,
    /// The card's pin lock, while held.
    pins: Option<MutexGuard<'a, ()>>,
}

impl surface_pin::Services for PinCall<'_> {
    type Frames = Frames;
    type Surface = Arc<Surface>;
    fn lock(&mut self) {
        let book: &Arc<dyn SurfaceBook> = self.book;
        self.pins = Some(book.lock_pins());
    }
    fn unlock(&mut self) {
        self.pins = None;
    }
    /// By the pages, not only the address: one memory mapped at two addresses is one surface.
    fn frames(&mut self) -> Result<Frames, Errno> {
        user_frames(self.first, self.end).map_err(errno)
    }
    fn overlaps(&mut self, frames: &Frames) -> bool {
        self.book.overlaps(self.mm, self.first, self.end, frames)
    }
    fn dying(&mut self, frames: &Frames) -> Option<Arc<Surface>> {
        self.book
            .dying_surface(self.mm, self.first, self.end, frames)
    }
    fn wait_freed(&mut self, dying: Arc<Surface>) {
        dying.wait_freed();
    }
    fn evict_cached(&mut self, frames: &Frames) -> Result<(), Errno> {
        self.book
            .evict_cached(self.mm, self.first, self.end, frames)
            .map_err(errno)
    }
    fn pin(&mut self, frames: Frames) -> Result<Arc<Surface>, Errno> {
        pin(
            self.book,
            self.dev,
            self.backing,
            self.mm,
            self.va,
            self.len,
            frames,
        )
        .map(|(s, _)| s)
        .map_err(errno)
    }
    fn same_frames(&mut self, s: &Arc<Surface>) -> bool {
        s.frames.is_empty() || user_frames(self.first, self.end).is_ok_and(|f| *f == *s.frames)
    }
    fn unpin(&mut self, s: Arc<Surface>) {
        s.unpin();
    }
    fn publish(&mut self, s: Arc<Surface>) -> Result<u32, (Errno, Arc<Surface>)> {
        self.surfaces.publish(s)
    }
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

    /// PIN_CUDA (`Backing::Provider`) or PIN_HOST (`Backing::Host`), on the card whose books are `book` and
    /// device `dev`, which the caller holds (`active`: removal must wait for the mapping and then find the
    /// surface to unmap): returns the new handle.
    /// The caller faulted the range in before it took the device (`pin::prefault`): the page lookups and
    /// the provider's pin below run under the card's pin lock and the hold removal drains, where a fault
    /// that never resolves (userfaultfd, FUSE) would stall every PIN_CUDA of the card and its removal.
    pub(crate) fn pin(
        &self,
        book: &Arc<dyn SurfaceBook>,
        dev: &Device,
        _active: &Active<'_>,
        backing: Backing,
        va: u64,
        len: u64,
    ) -> Result<u32> {
        if backing == Backing::Host {
            return self.pin_with(book, dev, backing, va, len);
        }
        // SAFETY: plain call; balanced by the put below.
        kernel::error::to_result(unsafe { ffi::pevb_p2p_get() })
            .map_err(|_| kerr(Errno::EOPNOTSUPP))?;
        let r = self.pin_with(book, dev, backing, va, len);
        // SAFETY: the get above succeeded; a pin holds the provider on its own.
        unsafe { ffi::pevb_p2p_put() };
        r
    }

    /// The shared sequence (`surface_pin.rs`) over this call's services.
    fn pin_with(
        &self,
        book: &Arc<dyn SurfaceBook>,
        dev: &Device,
        backing: Backing,
        va: u64,
        len: u64,
    ) -> Result<u32> {
        let (first, end) = page_range(backing, va, len);
        let mut call = PinCall {
            surfaces: self,
            book,
            dev,
            backing,
            // SAFETY: plain read of the caller's mm pointer, used only as an identity.
            mm: unsafe { ffi::pevb_current_mm() },
            va,
            len,
            first,
            end,
            pins: None,
        };
        surface_pin::pin(&mut call).map_err(kerr)
    }

    /// IMPORT_DMABUF: `len` bytes at `offset` of dma-buf `fd`, mapped for `dev` (held by the caller, as for
    /// `pin`). Returns the new handle and where the bytes lie (`abi::DMABUF_*`). No user pages are read, so
    /// nothing runs under the card's pin lock and no fault can stall it.
    pub(crate) fn import(
        &self,
        book: &Arc<dyn SurfaceBook>,
        dev: &Device,
        _active: &Active<'_>,
        fd: i32,
        offset: u64,
        len: u64,
    ) -> Result<(u32, u32)> {
        // SAFETY: a plain query of the C build.
        if !unsafe { ffi::pevb_p2p_dmabuf_supported() } {
            return Err(kerr(Errno::EOPNOTSUPP));
        }
        let (s, placement) = pin(
            book,
            dev,
            Backing::DmaBuf { fd },
            0,
            offset,
            len,
            Frames::new(),
        )?;
        match self.publish(s) {
            Ok(h) => Ok((h, placement)),
            Err((e, s)) => {
                s.unpin();
                Err(kerr(e))
            }
        }
    }

    /// Publishes a new surface under a handle: small non-negative ints, never reused while in the table.
    fn publish(&self, s: Arc<Surface>) -> Result<u32, (Errno, Arc<Surface>)> {
        // The table's node is allocated before its lock: a request holding a use of another surface may
        // wait for that lock (`enter`), and reclaim inside the allocation could run that surface's free
        // callback here, which waits for the use.
        let node = match RBTreeNodeReservation::new(GFP_KERNEL) {
            Ok(n) => n,
            Err(e) => return Err((errno(e.into()), s)),
        };
        let mut t = self.table.lock();
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
        let gone = !s.state.lock().live();
        s.unpin();
        if gone {
            Err(EINVAL)
        } else {
            Ok(())
        }
    }

    /// The bytes the surface behind `handle` can move (`enter`'s bound). EINVAL if the handle is unknown
    /// or its memory is gone.
    pub(crate) fn surface_len(&self, handle: u32) -> Result<u64> {
        let s = self.table.lock().tree.get(&handle).cloned().ok_or(EINVAL)?;
        let live = s.state.lock().live();
        if live {
            Ok(s.len)
        } else {
            Err(EINVAL)
        }
    }

    /// Takes a use of `len` bytes at offset `at` of the surface behind `handle` for a DMA, and hands them
    /// to the device now (and back to the CPU when the use ends, after a C2H: `to_device` false). EINVAL
    /// if the handle is unknown, its memory is gone or the bytes lie beyond the pin.
    pub(crate) fn enter(&self, handle: u32, at: u64, len: u64, to_device: bool) -> Result<InUse> {
        let s = self.table.lock().tree.get(&handle).cloned().ok_or(EINVAL)?;
        if at.checked_add(len).is_none_or(|end| end > s.len) {
            return Err(EINVAL);
        }
        s.state.lock().begin_use().map_err(kerr)?;
        // SAFETY: plain lockdep annotation, released by `InUse`'s drop.
        unsafe { ffi::pevb_p2p_use_acquire() };
        let p = s.p.load(Ordering::Acquire);
        // SAFETY: the pin is live (we hold a use, the callback frees it only after the last use); the
        // window is within the pinned length, checked above.
        unsafe { ffi::pevb_p2p_sync(p, at, len, to_device, true) };
        Ok(InUse {
            s,
            synced: (at, len),
            to_device,
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
