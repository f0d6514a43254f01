// SPDX-License-Identifier: GPL-2.0

//! Ordinary user memory pinned and DMA-mapped for one request (`pin.c`, shared with the 5.10 build).

use crate::ffi;
use crate::segments::{self, Segment};
use kernel::{device::Device, prelude::*};

/// Sorted page frame numbers: the pages behind a mapping, on which the overlap rules key.
pub(crate) type Frames = KVVec<u64>;

/// A pinned, DMA-mapped user buffer; unmapped and unpinned (dirtied if the device wrote it) on drop.
pub(crate) struct UserPin {
    raw: *mut ffi::PevbPin,
}

// SAFETY: the C object is owned by this value alone and only released (by `drop`) through it. Its release
// (`pevb_unpin_user`: dma_sync_sgtable_for_cpu, dma_unmap_sgtable, unpin_user_pages_dirty_lock, kfree)
// works on the pages and the device, not on the pinning task, so any thread may do it: a pin quarantined
// by a wedged card is released by the unbinding thread.
unsafe impl Send for UserPin {}

impl UserPin {
    /// Pins `len` bytes at user address `addr` for DMA by `dev`. `to_device`: the device only reads them.
    pub(crate) fn new(dev: &Device, addr: u64, len: u64, to_device: bool) -> Result<Self> {
        let mut raw = core::ptr::null_mut();
        // SAFETY: `dev` is a live device we hold a reference to; `raw` is a valid out-pointer. The helper
        // checks the range and returns an error for unmapped or (when writable is needed) read-only memory.
        kernel::error::to_result(unsafe {
            ffi::pevb_pin_user(ffi::raw_dev(dev), addr, len, to_device, &mut raw)
        })?;
        Ok(Self { raw })
    }

    /// The buffer's bus segments in order, bus-contiguous neighbours merged: built when pinned, so a
    /// request borrows them while it may hold a surface use, under which nothing may allocate.
    pub(crate) fn segments(&self) -> &[Segment] {
        // SAFETY: `self.raw` is a live pin, unmapped only by `drop`, which needs `&mut self`.
        unsafe { pin_segments(self.raw) }
    }

    /// Kept until unbind (its card is wedged): gives back its share of the one-off pins the device may
    /// write at once (`pin.c`), so it does not hold up other cards' requests.
    pub(crate) fn quarantined(&mut self) {
        // SAFETY: `self.raw` is a live pin, owned by `self`.
        unsafe { ffi::pevb_pin_quarantined(self.raw) };
    }
}

impl Drop for UserPin {
    fn drop(&mut self) {
        // SAFETY: `self.raw` came from `pevb_pin_user` and is released exactly once, here.
        unsafe { ffi::pevb_unpin_user(self.raw) };
    }
}

/// Faults `[addr, addr + len)` of the caller's memory in (writable if `write` and the memory allows it)
/// before the request takes the card's pin lock or its hold on the device, so a fault that never resolves
/// (userfaultfd, FUSE) stalls this caller alone (`pevb_user_prefault`). EINTR on a fatal signal; any other
/// failure is left to the pin that follows.
pub(crate) fn prefault(addr: u64, len: u64, write: bool) -> Result {
    // SAFETY: plain call; the helper checks the range and takes no reference past the call.
    kernel::error::to_result(unsafe { ffi::pevb_user_prefault(addr, len, write) })
}

/// The pages `[first, end)` (page-aligned) of the caller's memory maps now, sorted; empty where they are
/// not all writable struct pages (read-only memory, a dGPU's BAR: such memory is judged by address only).
pub(crate) fn user_frames(first: u64, end: u64) -> Result<Frames> {
    let n = ((end - first) / kernel::page::PAGE_SIZE as u64) as usize;
    let mut f = Frames::from_elem(0, n, GFP_KERNEL)?;
    // SAFETY: `f` has room for exactly `n` entries, the pages of `[first, end)` (page-aligned).
    if unsafe { ffi::pevb_user_pfns(first, end - first, f.as_mut_ptr(), n as _) } != 0 {
        return Ok(Frames::new());
    }
    f.sort_unstable();
    Ok(f)
}

/// The bus segments `pin.c` built for pin `p`, in order, bus-contiguous neighbours merged.
///
/// # Safety
/// `p` is a live pin that stays mapped for the returned lifetime.
pub(crate) unsafe fn pin_segments<'a>(p: *mut ffi::PevbPin) -> &'a [Segment] {
    let mut n = 0usize;
    // SAFETY: the caller's contract: `p` is live.
    let segs = unsafe { ffi::pevb_pin_segments(p, &mut n) };
    if n == 0 {
        return &[];
    }
    // SAFETY: `pin.c` allocated `segs` for at least `n` segments of `struct pevb_seg`, whose layout is
    // `Segment`'s (`repr(C)`, two u64), wrote them before the pin was returned and frees them only when the
    // pin is unmapped, which the caller's contract puts after `'a`.
    unsafe { core::slice::from_raw_parts(segs, n) }
}

/// `pin.c` coalesces the segments it builds with the shared logic's rule.
///
/// # Safety
/// `segs` is valid for reading and writing `n` segments.
#[no_mangle]
pub(crate) unsafe extern "C" fn pevb_segments_coalesce(segs: *mut Segment, n: usize) -> usize {
    if segs.is_null() || n == 0 {
        return 0;
    }
    // SAFETY: the caller's contract.
    segments::coalesce(unsafe { core::slice::from_raw_parts_mut(segs, n) })
}
