//! Where one GPU surface is in its life, and who frees it: the surface lifecycle both kernels' glue runs
//! (6.18 `kmod/picoevb/cuda.rs`, 5.10 `kmod/picoevb-5.10/cuda.c`).
//!
//! A surface is pinned by PIN_CUDA and ends in exactly one free, after both of these are over:
//! - the provider's free callback, which comes exactly once: from UNPIN or close (synchronously, inside the
//!   shim's unpin), or on its own when the memory goes away (munmap, cudaFreeHost, process exit);
//! - an unpin, if one started. It must not start once the callback has (the shim forbids it). Once it
//!   starts no new DMA may use the surface, and it waits for the DMAs using it (`idle`) before the shim's
//!   unpin, which drops the device's mapping: a DMA of another thread of the file may still run on it.
//!
//! The callback first marks the surface dead (no new DMA may use it) and waits for the DMAs using it to
//! finish; each is bounded by the engine timeout and holds no lock the callback needs, so the wait is
//! bounded too. Whichever of callback and unpin ends second frees. Card removal drops the DMA mapping of
//! a live surface while holding it like a DMA (so the callback cannot free the pin under the unmap), and
//! waits for the free of one whose callback has begun (its free unmaps).
//!
//! `Life` is plain data: the glue keeps it under a spinlock of its surface. The sequences that step it
//! ([`callback`], [`unpin`], [`end_use`], [`detach`], [`await_free`]) are written here once over the
//! [`Surface`] services: one `Life` call per step under that lock, and the pins, unmaps, frees and waits
//! the answers ask for without it.

use crate::errno::Errno;

/// One surface's lifecycle state. `repr(C)` and two words: the 5.10 glue stores it as `struct pevb_life`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Life {
    /// DMAs using the surface now (and removal's unmap, held like one).
    users: u32,
    /// `DEAD`, `UNPINNING`, ...
    flags: u32,
}

/// The callback has begun: no new DMA, no new unpin.
const DEAD: u32 = 1 << 0;
/// An unpin started.
const UNPINNING: u32 = 1 << 1;
/// That unpin is over.
const UNPIN_DONE: u32 = 1 << 2;
/// The callback is over except for the free.
const CALLBACK_DONE: u32 = 1 << 3;
/// The card is gone: the DMA mapping was dropped at removal.
const DETACHED: u32 = 1 << 4;
/// The pin is freed (and so unmapped).
const FREED: u32 = 1 << 5;

/// What card removal must do for a surface (`Life::detach`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Detach {
    /// Nothing: the mapping was dropped before.
    Done = 0,
    /// Drop the DMA mapping now, then `end_use`: the surface is held like a DMA meanwhile.
    Unmap = 1,
    /// The callback has begun and its free unmaps: wait until `is_freed`.
    AwaitFree = 2,
}

/// The surface's state as the debugfs `state` file shows it. `repr(C)`: the 5.10 glue reads it as
/// `struct pevb_life_view`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub users: u32,
    pub dead: bool,
    pub unpinning: bool,
    pub detached: bool,
    pub freed: bool,
}

impl Life {
    pub const fn new() -> Self {
        Self { users: 0, flags: 0 }
    }

    fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// A DMA takes a use: EINVAL once the memory is going away or an unpin started, ENODEV once the card
    /// is gone.
    pub fn begin_use(&mut self) -> Result<(), Errno> {
        if self.has(DEAD) || self.has(UNPINNING) {
            return Err(Errno::EINVAL);
        }
        if self.has(DETACHED) {
            return Err(Errno::ENODEV);
        }
        self.users += 1;
        Ok(())
    }

    /// A use (a DMA's or removal's unmap) ends. True: wake the callback and the unpin, which wait for the
    /// last one.
    pub fn end_use(&mut self) -> bool {
        self.users -= 1;
        self.users == 0 && (self.has(DEAD) || self.has(UNPINNING))
    }

    /// The callback begins: no new use or unpin from now on. It then waits until `idle`.
    pub fn begin_callback(&mut self) {
        self.flags |= DEAD;
    }

    /// No use is left (what the callback waits for).
    pub fn idle(&self) -> bool {
        self.users == 0
    }

    /// The callback's wait is over (`idle`). True: the callback frees (no unpin started, or it is over).
    pub fn end_callback(&mut self) -> bool {
        self.flags |= CALLBACK_DONE;
        !self.has(UNPINNING) || self.has(UNPIN_DONE)
    }

    /// UNPIN or close wants to end the pin. False: nothing to do (the memory is going away, or another
    /// unpin started); true: no new use from now on; wait until `idle`, then unpin through the shim (it
    /// unmaps), then `end_unpin`.
    pub fn begin_unpin(&mut self) -> bool {
        if self.has(DEAD) || self.has(UNPINNING) {
            return false;
        }
        self.flags |= UNPINNING;
        true
    }

    /// The shim's unpin returned. True: the unpin frees (the callback is over already).
    pub fn end_unpin(&mut self) -> bool {
        self.flags |= UNPIN_DONE;
        self.has(CALLBACK_DONE)
    }

    /// The one free is done: wake those waiting for it.
    pub fn set_freed(&mut self) {
        self.flags |= FREED;
    }

    pub fn is_freed(&self) -> bool {
        self.has(FREED)
    }

    /// Whether the callback has not begun: the surface counts for the overlap checks.
    pub fn live(&self) -> bool {
        !self.has(DEAD)
    }

    /// The callback has begun and the pin is not freed yet: its DMA mapping may still be live.
    pub fn dying(&self) -> bool {
        self.has(DEAD) && !self.has(FREED)
    }

    /// Card removal: what to do about this surface's DMA mapping (the device must not keep one past
    /// unbind). DMA is refused from now on; the pin itself stays until UNPIN, close or the memory going
    /// away.
    pub fn detach(&mut self) -> Detach {
        if self.has(DEAD) {
            return Detach::AwaitFree;
        }
        if self.has(DETACHED) {
            return Detach::Done;
        }
        self.flags |= DETACHED;
        self.users += 1;
        Detach::Unmap
    }

    pub fn view(&self) -> View {
        View {
            users: self.users,
            dead: self.has(DEAD),
            unpinning: self.has(UNPINNING),
            detached: self.has(DETACHED),
            freed: self.has(FREED),
        }
    }
}

/// What a wait waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// No use is left.
    Idle,
    /// The pin is freed.
    Freed,
}

impl Life {
    /// Whether the wait for `u` is over.
    pub fn reached(&self, u: Until) -> bool {
        match u {
            Until::Idle => self.idle(),
            Until::Freed => self.is_freed(),
        }
    }
}

/// The kernel services of one surface.
pub trait Surface {
    /// Runs `f` on the surface's `Life` under its spinlock.
    fn locked<R>(&self, f: impl FnOnce(&mut Life) -> R) -> R;
    /// Sleeps, not holding the lock, until `Life::reached(u)`, checked under it; woken by [`Surface::wake`].
    /// By hand, so lockdep cannot see it: bounded because every use is a DMA bounded by the engine
    /// timeout that holds no lock the waiter holds.
    fn wait(&self, u: Until);
    /// Wakes every waiter.
    fn wake(&self);
    /// The shim's unpin of the live pin (it drops the device's mapping; the provider's callback may run
    /// inside it).
    fn unpin_pin(&self);
    /// Drops the device's mapping of the live pin. False: a dma-buf's move began meanwhile, and its
    /// callback unmaps.
    fn unmap_device(&self) -> bool;
    /// Frees the pin (once, after the callback and any unpin are over) and makes the card forget the
    /// surface.
    fn free_pin(&self);
    /// Lockdep's note that the calling callback waits for every use (`pevb_p2p_uses_awaited`).
    fn uses_awaited(&self);
}

/// A use (a DMA's, or removal's unmap) ends; the last one after the callback or an unpin began wakes them.
pub fn end_use(s: &impl Surface) {
    if s.locked(Life::end_use) {
        s.wake();
    }
}

/// The one free, by whichever of callback and unpin ends second.
fn free(s: &impl Surface) {
    s.free_pin();
    s.locked(Life::set_freed);
    s.wake();
}

/// The provider's free callback: no new use, wait for those running, then free unless an unpin is still
/// going on (it frees when it ends).
pub fn callback(s: &impl Surface) {
    s.uses_awaited();
    s.locked(Life::begin_callback);
    s.wait(Until::Idle);
    if s.locked(Life::end_callback) {
        free(s);
    }
}

/// UNPIN or close: ends the pin unless its memory already went away. Waits first for the DMAs using the
/// surface (another thread of the file may run one through the handle): the shim's unpin drops the
/// device's mapping. The pin cannot be freed before `end_unpin`, and this is its only unpin.
pub fn unpin(s: &impl Surface) {
    if !s.locked(Life::begin_unpin) {
        return;
    }
    s.wait(Until::Idle);
    s.unpin_pin();
    if s.locked(Life::end_unpin) {
        free(s);
    }
}

/// Card removal: drops the DMA mapping now and refuses DMA from here on; the pin stays until UNPIN, close
/// or the memory going away. True: the callback has begun and its free unmaps: the caller waits for it
/// ([`await_free`]), so nothing stays mapped past unbind.
pub fn detach(s: &impl Surface) -> bool {
    match s.locked(Life::detach) {
        Detach::Done => false,
        Detach::AwaitFree => true,
        Detach::Unmap => {
            // Held like a DMA (`Life::detach`), so the callback cannot free the pin under the unmap.
            let unmapped = s.unmap_device();
            end_use(s);
            !unmapped
        }
    }
}

/// Waits until the pin is freed, and so unmapped.
pub fn await_free(s: &impl Surface) {
    s.wait(Until::Freed);
}

#[cfg(test)]
#[path = "surface_life_tests.rs"]
mod tests;
