// SPDX-License-Identifier: GPL-2.0

//! Ordinary user memory pinned and DMA-mapped for one request.

use crate::ffi;
use crate::segments::{self, Segment};
use kernel::{bindings, device::Device, prelude::*, scatterlist::SGTable};

/// Sorted page frame numbers: the pages behind a mapping, on which the overlap rules key.
pub(crate) type Frames = KVVec<u64>;

/// A pinned, DMA-mapped user buffer; unmapped and unpinned (dirtied if the device wrote it) on drop.
pub(crate) struct UserPin {
    raw: *mut ffi::PevbPin,
    /// Its bus segments, built when pinned: a request borrows them while it may hold a surface use.
    segs: KVec<Segment>,
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
        let mut pin = Self {
            raw,
            segs: KVec::new(),
        };
        // SAFETY: `raw` is a live pin (released by `pin`'s drop, also on error here); its sg_table stays
        // mapped until then.
        pin.segs = unsafe { mapped_segments(ffi::pevb_pin_sgt(raw)) }?;
        Ok(pin)
    }

    /// The buffer's bus segments in order, bus-contiguous neighbours merged.
    pub(crate) fn segments(&self) -> &[Segment] {
        &self.segs
    }

    /// Kept until unbind (its card is wedged): gives back its share of the one-off pins the device may
    /// write at once (`helpers.c`), so it does not hold up other cards' requests.
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

/// The bus segments of a DMA-mapped sg_table, in order, bus-contiguous neighbours merged.
///
/// # Safety
/// `sgt` is a valid sg_table, DMA-mapped, and stays so for the duration of the call.
pub(crate) unsafe fn mapped_segments(sgt: *mut bindings::sg_table) -> Result<KVec<Segment>> {
    // SAFETY: the caller's contract.
    let sgt = unsafe { SGTable::from_raw(sgt) };
    let mut segs = KVec::new();
    for e in sgt.iter() {
        segs.push(
            Segment {
                addr: e.dma_address(),
                len: e.dma_len() as u64,
            },
            GFP_KERNEL,
        )?;
    }
    let n = segments::coalesce(&mut segs);
    segs.truncate(n);
    Ok(segs)
}
