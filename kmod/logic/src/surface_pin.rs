//! PIN_CUDA's sequence, once for both kernels: how a GPU surface comes to be pinned for a card and
//! published under a handle (6.18 `kmod/picoevb/cuda.rs`, 5.10 `kmod/picoevb-5.10/cuda.c` through
//! `rust/pin_glue.rs`). The glue supplies the services; the caller has faulted the range in and holds
//! the device (removal waits for the pin and then finds the surface to unmap).
//!
//! 1. Under the card's pin lock, so two callers cannot both pass: read the pages behind the range, refuse
//!    with EBUSY if a live surface covers its addresses or any of those pages (the DMA API does not
//!    support overlapping mappings of one memory: one long-lived mapping per page and card).
//! 2. A surface of those pages whose free callback has begun may still be mapped until the DMAs using it
//!    end: let go of the lock, wait for its free (its callback takes none of our locks), start again.
//! 3. Evict the host buffers cached on those pages (a second long-lived mapping) and wait until they are
//!    unmapped, then pin; let go of the lock.
//! 4. The pages read before pinning must be the ones pinned: a remap in between would leave the checks
//!    keyed on other pages. If they differ, unpin and fail with EAGAIN.
//! 5. Publish the surface under a new handle; if that fails, unpin.

use crate::errno::Errno;

/// What PIN_CUDA needs of the kernel, for one call.
pub trait Services {
    /// The pages behind the range (empty where they are not writable struct pages: a dGPU's BAR).
    type Frames;
    /// A pinned surface, or a reference to a dying one.
    type Surface;
    /// Takes the card's pin lock.
    fn lock(&mut self);
    /// Lets go of it.
    fn unlock(&mut self);
    /// The pages behind the range now.
    fn frames(&mut self) -> Result<Self::Frames, Errno>;
    /// Whether a live surface covers the range or any of `frames`.
    fn overlaps(&mut self, frames: &Self::Frames) -> bool;
    /// A surface on the range or on `frames` whose callback has begun and whose pin is not freed yet.
    fn dying(&mut self, frames: &Self::Frames) -> Option<Self::Surface>;
    /// Waits, holding nothing, until that surface's pin is freed (and so unmapped).
    fn wait_freed(&mut self, dying: Self::Surface);
    /// Drops every file's cached buffers on the range or on `frames` and waits until they are unmapped.
    fn evict_cached(&mut self, frames: &Self::Frames) -> Result<(), Errno>;
    /// Pins the range through the provider, recording the surface on the card.
    fn pin(&mut self, frames: Self::Frames) -> Result<Self::Surface, Errno>;
    /// Whether the pages behind the range are still those `s` was checked with (true where it has none).
    fn same_frames(&mut self, s: &Self::Surface) -> bool;
    /// Ends a pin this call made.
    fn unpin(&mut self, s: Self::Surface);
    /// Publishes `s` in the file's table: its handle, or the error and the surface back.
    fn publish(&mut self, s: Self::Surface) -> Result<u32, (Errno, Self::Surface)>;
}

/// Runs PIN_CUDA's sequence (module comment): the new handle.
pub fn pin<S: Services>(svc: &mut S) -> Result<u32, Errno> {
    let pinned = loop {
        svc.lock();
        let frames = match svc.frames() {
            Ok(f) => f,
            Err(e) => break Err(e),
        };
        if svc.overlaps(&frames) {
            break Err(Errno::EBUSY);
        }
        if let Some(d) = svc.dying(&frames) {
            drop(frames);
            svc.unlock();
            svc.wait_freed(d);
            continue;
        }
        break svc.evict_cached(&frames).and_then(|()| svc.pin(frames));
    };
    svc.unlock();
    let s = pinned?;
    if !svc.same_frames(&s) {
        svc.unpin(s);
        return Err(Errno::EAGAIN);
    }
    svc.publish(s).map_err(|(e, s)| {
        svc.unpin(s);
        e
    })
}

#[cfg(test)]
#[path = "surface_pin_tests.rs"]
mod tests;
