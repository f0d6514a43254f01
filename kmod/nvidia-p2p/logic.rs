// SPDX-License-Identifier: GPL-2.0

//! The decisions of gdr_nv_p2p.ko, in plain `core` Rust: the lifecycle state machine of a page table
//! (who runs the client's free callback, exactly once, and who drops the mmu notifier, exactly once),
//! argument checks, and the address arithmetic. Nothing here touches the kernel, so the same file is
//! compiled into the module (included by `gdr_nv_p2p_main.rs`) and unit-tested on the host:
//! `make -C kmod/nvidia-p2p test-logic`.
//!
//! The numeric codes below are an ABI with `internal.h`; `abi_matches` lets the C side check them at load.

/// Linux errno values used here (same on x86_64 and arm64).
pub(crate) const EINVAL: i32 = 22;
/// "I/O error": the DMA layer returned segments that cannot express a GPU page.
pub(crate) const EIO: i32 = 5;

// ---------------------------------------------------------------------------------------------------------
// Lifecycle state machine
// ---------------------------------------------------------------------------------------------------------

/// Who owns the mmu notifier registration.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Notifier {
    /// Registered; nobody has started to drop it.
    Registered,
    /// put_pages owns it and is calling `mmu_notifier_unregister` (synchronous, runs `.release`).
    Unregistering,
    /// Dropped with `mmu_notifier_put` (asynchronous free through SRCU), or about to be.
    Put,
}

/// The client's free callback.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Callback {
    /// Not run yet and still due.
    Pending,
    /// Claimed by one path, which runs it (or has run it).
    Claimed,
    /// Will never run (dGPU put_pages, or the client freed the table before any callback).
    Suppressed,
}

/// The lifecycle state of one page table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct State {
    pub(crate) notifier: Notifier,
    pub(crate) callback: Callback,
}

/// What happened to a page table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Event {
    /// `.invalidate_range_start`: does the range cover the page holding `vaddr`; may the handler sleep.
    Invalidate { covers: bool, blockable: bool },
    /// `.release`: process exit (`exit_mmap`), or our own `mmu_notifier_unregister` from put_pages.
    Release,
    /// put_pages. Jetson: the callback runs (synchronously, from `.release`). dGPU: it does not.
    PutPages { runs_callback: bool },
    /// Jetson free_page_table (a no-op on dGPU).
    FreeTable,
}

/// Work for the caller (the C side) to do after a transition, outside the state lock. A bit set.
pub(crate) mod act {
    /// Return -EAGAIN from a non-blockable invalidation and change nothing.
    pub(crate) const AGAIN: u32 = 1 << 0;
    /// `mmu_notifier_put()`: drop the notifier asynchronously (allowed from inside its own callbacks).
    pub(crate) const PUT_NOTIFIER: u32 = 1 << 1;
    /// `mmu_notifier_unregister()`: drop the notifier synchronously (put_pages only).
    pub(crate) const UNREGISTER: u32 = 1 << 2;
    /// Run the client's free callback now, on this thread.
    pub(crate) const RUN_CALLBACK: u32 = 1 << 3;
    /// Another path owns the end of life: wait until it has finished (unless this thread is that path).
    pub(crate) const WAIT: u32 = 1 << 4;
    /// The C side passed a state or event that does not decode (a bug there); nothing changed.
    pub(crate) const INVALID: u32 = 1 << 31;
}

impl State {
    /// A page table whose notifier has just been registered.
    pub(crate) const INITIAL: State = State {
        notifier: Notifier::Registered,
        callback: Callback::Pending,
    };

    /// One transition: the new state and the actions (`act::*`) the caller must perform.
    pub(crate) fn step(self, ev: Event) -> (State, u32) {
        use Callback::*;
        use Notifier::*;
        let st = |notifier, callback| State { notifier, callback };
        match ev {
            // An invalidation that misses the first page changes nothing (NVIDIA's rule).
            Event::Invalidate { covers: false, .. } => (self, 0),
            Event::Invalidate {
                covers: true,
                blockable,
            } => match (self.notifier, self.callback) {
                // The callback sleeps (mutexes, DMA quiescing): not from the OOM reaper's non-blockable
                // walk. Returning -EAGAIN makes the reaper leave this mm to exit_mmap.
                (Registered, Pending) if !blockable => (self, act::AGAIN),
                (Registered, Pending) => (st(Put, Claimed), act::PUT_NOTIFIER | act::RUN_CALLBACK),
                // put_pages already owns the end of life, or the callback was claimed or suppressed.
                _ => (self, 0),
            },
            Event::Release => match (self.notifier, self.callback) {
                // exit_mmap: run the callback and drop the notifier (else the mm would be leaked: nobody
                // may call put_pages after the callback).
                (Registered, Pending) => (st(Put, Claimed), act::PUT_NOTIFIER | act::RUN_CALLBACK),
                // Our own unregister from a Jetson put_pages (or exit_mmap racing with it): run it here,
                // once; whichever of the two `.release` calls comes first wins.
                (Unregistering, Pending) => (st(Unregistering, Claimed), act::RUN_CALLBACK),
                _ => (self, 0),
            },
            Event::PutPages { runs_callback } => match (self.notifier, self.callback) {
                (Registered, Pending) => {
                    let cb = if runs_callback { Pending } else { Suppressed };
                    (st(Unregistering, cb), act::UNREGISTER)
                }
                // The callback was claimed by an invalidation or by exit, or another put_pages is running:
                // put_pages returns once that path has finished, and runs nothing itself.
                (Put, Claimed) | (Unregistering, _) | (Registered, _) => (self, act::WAIT),
                // The table was detached without a callback: nothing left to do.
                (Put, _) => (self, 0),
            },
            Event::FreeTable => match (self.notifier, self.callback) {
                // Freed before any callback and without put_pages: detach silently, so that no callback
                // ever reaches the client with a freed table.
                (Registered, Pending) => (st(Put, Suppressed), act::PUT_NOTIFIER),
                _ => (self, 0),
            },
        }
    }

    /// A DMA mapping may still be created: the callback has not been claimed and nobody is tearing down.
    pub(crate) fn may_map(self) -> bool {
        self.notifier == Notifier::Registered && self.callback == Callback::Pending
    }

    /// Encoding for the C side: notifier in bits 3..0, callback in bits 7..4.
    pub(crate) fn to_raw(self) -> u32 {
        let n = match self.notifier {
            Notifier::Registered => 0,
            Notifier::Unregistering => 1,
            Notifier::Put => 2,
        };
        let c = match self.callback {
            Callback::Pending => 0,
            Callback::Claimed => 1,
            Callback::Suppressed => 2,
        };
        n | (c << 4)
    }

    /// Decoding; `None` for a value `to_raw` never produces.
    pub(crate) fn from_raw(raw: u32) -> Option<State> {
        let notifier = match raw & 0xf {
            0 => Notifier::Registered,
            1 => Notifier::Unregistering,
            2 => Notifier::Put,
            _ => return None,
        };
        let callback = match (raw >> 4) & 0xf {
            0 => Callback::Pending,
            1 => Callback::Claimed,
            2 => Callback::Suppressed,
            _ => return None,
        };
        if raw >> 8 != 0 {
            return None;
        }
        Some(State { notifier, callback })
    }
}

/// Event codes of the C side (`GDR_EV_*` in internal.h).
pub(crate) mod ev {
    /// Mask of the event kind.
    pub(crate) const KIND: u32 = 0xff;
    /// `.invalidate_range_start`; with the two flags below.
    pub(crate) const INVALIDATE: u32 = 1;
    /// `.release`.
    pub(crate) const RELEASE: u32 = 2;
    /// Jetson put_pages.
    pub(crate) const PUT_JETSON: u32 = 3;
    /// dGPU put_pages.
    pub(crate) const PUT_DGPU: u32 = 4;
    /// Jetson free_page_table.
    pub(crate) const FREE_TABLE: u32 = 5;
    /// Flag: the invalidated range covers the page holding vaddr.
    pub(crate) const COVERS: u32 = 1 << 8;
    /// Flag: the invalidation may sleep.
    pub(crate) const BLOCKABLE: u32 = 1 << 9;
}

/// Decodes a C event code.
pub(crate) fn event_from_raw(raw: u32) -> Option<Event> {
    Some(match raw & ev::KIND {
        ev::INVALIDATE => Event::Invalidate {
            covers: raw & ev::COVERS != 0,
            blockable: raw & ev::BLOCKABLE != 0,
        },
        ev::RELEASE => Event::Release,
        ev::PUT_JETSON => Event::PutPages {
            runs_callback: true,
        },
        ev::PUT_DGPU => Event::PutPages {
            runs_callback: false,
        },
        ev::FREE_TABLE => Event::FreeTable,
        _ => return None,
    })
}

/// The transition for raw C values: `(new_state << 32) | actions`. An undecodable input is a bug on the C
/// side; it changes nothing and asks for nothing (and the C side WARNs on `act::INVALID`).
pub(crate) fn step_raw(state: u32, event: u32) -> u64 {
    match (State::from_raw(state), event_from_raw(event)) {
        (Some(s), Some(e)) => {
            let (n, a) = s.step(e);
            (u64::from(n.to_raw()) << 32) | u64::from(a)
        }
        _ => (u64::from(state) << 32) | u64::from(act::INVALID),
    }
}

// ---------------------------------------------------------------------------------------------------------
// Address arithmetic
// ---------------------------------------------------------------------------------------------------------

/// Does the invalidated range `[start, end)` cover the page table's `vaddr`? (NVIDIA tests
/// `vaddr >= start && vaddr <= end`; `end` is exclusive, so an invalidation ending exactly at `vaddr` fired
/// there too. Here it does not.)
pub(crate) fn covers(start: u64, end: u64, vaddr: u64) -> bool {
    start <= vaddr && vaddr < end
}

/// Jetson get_pages: the pages to pin for `(vaddr, size)`, as NVIDIA computes them: `size >> PAGE_SHIFT`
/// pages (rounded down; 0 or more than `i32::MAX` is -EINVAL) from `vaddr & PAGE_MASK`.
/// Returns `(first, npages)`.
pub(crate) fn jetson_span(vaddr: u64, size: u64, page_shift: u32) -> Result<(u64, u32), i32> {
    let page = 1u64 << page_shift;
    let npages = size >> page_shift;
    if npages == 0 || npages > i32::MAX as u64 {
        return Err(EINVAL);
    }
    let first = vaddr & !(page - 1);
    match first.checked_add(npages << page_shift) {
        Some(_) => Ok((first, npages as u32)),
        None => Err(EINVAL),
    }
}

/// dGPU get_pages: `va` aligned to the GPU page, `len` a non-zero multiple of it. Returns
/// `(npages, ngpu)`: CPU pages to pin and GPU pages.
pub(crate) fn gpu_span(
    va: u64,
    len: u64,
    page_shift: u32,
    gpu_shift: u32,
) -> Result<(u32, u32), i32> {
    let gpu = 1u64 << gpu_shift;
    if len == 0 || va & (gpu - 1) != 0 || len & (gpu - 1) != 0 || va.checked_add(len).is_none() {
        return Err(EINVAL);
    }
    let npages = len >> page_shift;
    if npages > i32::MAX as u64 {
        return Err(EINVAL);
    }
    Ok((npages as u32, (len >> gpu_shift) as u32))
}

/// Groups pinned pages (by physical address, `phys[i]`, pages of `1 << page_shift` bytes) into DMA
/// segments: runs of physically contiguous pages, each at most `max_seg` bytes (at least one page) and
/// never crossing a `boundary_mask` boundary (the device's `dma_get_seg_boundary`). Writes
/// `(first page index, page count)` pairs into `first` and `count` (room for one per page) and returns how
/// many segments there are. (Shifts and masks rather than `/` and `%`: no division-by-zero paths.)
pub(crate) fn plan_segments(
    phys: &[u64],
    page_shift: u32,
    max_seg: u64,
    boundary_mask: u64,
    first: &mut [u32],
    count: &mut [u32],
) -> usize {
    let page = 1u64 << (page_shift & 63);
    let max_seg = if max_seg < page {
        page
    } else {
        max_seg & !(page - 1)
    };
    let mut n = 0usize;
    let mut seg_start = 0u64;
    let mut seg_len = 0u64;
    for (i, &p) in phys.iter().enumerate() {
        let joins = n > 0
            && seg_start.wrapping_add(seg_len) == p
            && seg_len.saturating_add(page) <= max_seg
            && (seg_start ^ p.wrapping_add(page - 1)) & !boundary_mask == 0;
        if joins && n <= count.len() {
            seg_len += page;
            count[n - 1] += 1;
        } else if n < first.len() && n < count.len() {
            first[n] = i as u32;
            count[n] = 1;
            n += 1;
            seg_start = p;
            seg_len = page;
        } else {
            break; // no room: cannot happen with one slot per page
        }
    }
    n
}

/// dGPU: every GPU page (`1 << gpu_shift` bytes) must be one naturally aligned, physically contiguous
/// block of pinned pages (`1 << page_shift` bytes each), which is what a GPU page is: its
/// `physical_address` stands for all of it. Returns the index of the first GPU page that is not.
pub(crate) fn check_gpu_pages(phys: &[u64], page_shift: u32, gpu_shift: u32) -> Result<(), usize> {
    if page_shift > gpu_shift || gpu_shift >= 32 {
        return Err(0);
    }
    let per = 1usize << (gpu_shift - page_shift);
    let gpu_mask = (1u64 << gpu_shift) - 1;
    if phys.len() & (per - 1) != 0 {
        return Err(0);
    }
    for (k, chunk) in phys.chunks(per).enumerate() {
        let base = chunk[0];
        if base & gpu_mask != 0 {
            return Err(k);
        }
        for (j, &p) in chunk.iter().enumerate() {
            if p != base.wrapping_add((j as u64) << page_shift) {
                return Err(k);
            }
        }
    }
    Ok(())
}

/// dGPU: the bus address of each GPU page (`1 << gpu_shift` bytes) from the DMA segments of its mapping
/// (`seg_addr[i]`, `seg_len[i]`, in order, covering the pages back to back). Each GPU page must lie inside
/// one segment, since the dGPU API gives one address per page; -EIO otherwise (or if the segments are too
/// short).
pub(crate) fn gpu_bus_addrs(
    seg_addr: &[u64],
    seg_len: &[u64],
    gpu_shift: u32,
    out: &mut [u64],
) -> Result<(), i32> {
    if gpu_shift >= 32 || seg_addr.len() != seg_len.len() {
        return Err(EIO);
    }
    let gpu = 1u64 << gpu_shift;
    let mut s = 0usize; // current segment
    let mut s_off = 0u64; // byte offset of segment s within the mapping
    for (k, o) in out.iter_mut().enumerate() {
        let off = (k as u64) << gpu_shift;
        while s < seg_len.len() && off >= s_off.saturating_add(seg_len[s]) {
            s_off = s_off.saturating_add(seg_len[s]);
            s += 1;
        }
        if s >= seg_len.len() || off.saturating_add(gpu) > s_off.saturating_add(seg_len[s]) {
            return Err(EIO);
        }
        *o = seg_addr[s].wrapping_add(off - s_off);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Host unit tests
// ---------------------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    const INV: Event = Event::Invalidate {
        covers: true,
        blockable: true,
    };
    const PUT_J: Event = Event::PutPages {
        runs_callback: true,
    };
    const PUT_D: Event = Event::PutPages {
        runs_callback: false,
    };

    fn run(evs: &[Event]) -> (State, [u32; 8]) {
        let mut s = State::INITIAL;
        let mut acts = [0u32; 8];
        for (i, e) in evs.iter().enumerate() {
            let (n, a) = s.step(*e);
            s = n;
            acts[i] = a;
        }
        (s, acts)
    }

    fn callbacks(acts: &[u32]) -> usize {
        acts.iter().filter(|a| *a & act::RUN_CALLBACK != 0).count()
    }

    fn notifier_drops(acts: &[u32]) -> usize {
        acts.iter()
            .filter(|a| *a & (act::PUT_NOTIFIER | act::UNREGISTER) != 0)
            .count()
    }

    #[test]
    fn jetson_put_pages_runs_callback_from_release() {
        let (_, a) = run(&[PUT_J, Event::Release, Event::FreeTable]);
        assert_eq!(a[0], act::UNREGISTER);
        assert_eq!(a[1], act::RUN_CALLBACK);
        assert_eq!(a[2], 0);
    }

    #[test]
    fn invalidation_then_put_pages_waits_and_runs_nothing() {
        let (_, a) = run(&[INV, Event::FreeTable, PUT_J]);
        assert_eq!(a[0], act::PUT_NOTIFIER | act::RUN_CALLBACK);
        assert_eq!(a[2], act::WAIT);
        assert_eq!(callbacks(&a), 1);
        assert_eq!(notifier_drops(&a), 1);
    }

    #[test]
    fn exit_release_drops_notifier() {
        let (_, a) = run(&[Event::Release, PUT_J, Event::Release]);
        assert_eq!(a[0], act::PUT_NOTIFIER | act::RUN_CALLBACK);
        assert_eq!(callbacks(&a), 1);
        assert_eq!(notifier_drops(&a), 1);
    }

    #[test]
    fn exit_racing_put_pages_runs_callback_once() {
        // put_pages claims, exit_mmap's release comes first, then unregister's own release.
        let (_, a) = run(&[PUT_J, Event::Release, Event::Release, INV]);
        assert_eq!(callbacks(&a), 1);
        assert_eq!(notifier_drops(&a), 1);
    }

    #[test]
    fn non_blockable_invalidation_is_retried() {
        let (s, a) = run(&[Event::Invalidate {
            covers: true,
            blockable: false,
        }]);
        assert_eq!(a[0], act::AGAIN);
        assert_eq!(s, State::INITIAL);
    }

    #[test]
    fn invalidation_missing_first_page_is_ignored() {
        let (s, a) = run(&[Event::Invalidate {
            covers: false,
            blockable: true,
        }]);
        assert_eq!(a[0], 0);
        assert_eq!(s, State::INITIAL);
    }

    #[test]
    fn dgpu_put_pages_suppresses_callback() {
        let (s, a) = run(&[PUT_D, Event::Release, INV]);
        assert_eq!(a[0], act::UNREGISTER);
        assert_eq!(callbacks(&a), 0);
        assert_eq!(s.callback, Callback::Suppressed);
    }

    #[test]
    fn free_table_first_detaches() {
        let (s, a) = run(&[Event::FreeTable, INV, Event::Release, PUT_J]);
        assert_eq!(a[0], act::PUT_NOTIFIER);
        assert_eq!(callbacks(&a), 0);
        assert_eq!(notifier_drops(&a), 1);
        assert_eq!(a[3], 0);
        assert!(!s.may_map());
    }

    #[test]
    fn every_sequence_runs_callback_at_most_once_and_drops_notifier_once() {
        let all = [
            INV,
            Event::Invalidate {
                covers: true,
                blockable: false,
            },
            Event::Invalidate {
                covers: false,
                blockable: true,
            },
            Event::Release,
            PUT_J,
            PUT_D,
            Event::FreeTable,
        ];
        // Every sequence of 4 events.
        for i in 0..all.len().pow(4) {
            let mut evs = [INV; 4];
            let mut x = i;
            for e in evs.iter_mut() {
                *e = all[x % all.len()];
                x /= all.len();
            }
            let (s, a) = run(&evs);
            assert!(callbacks(&a) <= 1, "{evs:?}");
            assert!(notifier_drops(&a) <= 1, "{evs:?}");
            // Raw round trip.
            assert_eq!(State::from_raw(s.to_raw()), Some(s));
        }
    }

    #[test]
    fn raw_codes() {
        let r = step_raw(
            State::INITIAL.to_raw(),
            ev::INVALIDATE | ev::COVERS | ev::BLOCKABLE,
        );
        assert_eq!(r as u32, act::PUT_NOTIFIER | act::RUN_CALLBACK);
        let r = step_raw(0xff, ev::RELEASE);
        assert_eq!(r as u32, act::INVALID);
        assert_eq!((r >> 32) as u32, 0xff);
        assert_eq!(step_raw(0, 77) as u32, act::INVALID);
    }

    #[test]
    fn spans() {
        assert_eq!(jetson_span(0x1000, 0x3000, 12), Ok((0x1000, 3)));
        assert_eq!(jetson_span(0x1234, 0x3fff, 12), Ok((0x1000, 3)));
        assert_eq!(jetson_span(0x1000, 0xfff, 12), Err(EINVAL));
        assert_eq!(jetson_span(!0xfff, 0x2000, 12), Err(EINVAL));
        assert_eq!(gpu_span(0x10000, 0x20000, 12, 16), Ok((32, 2)));
        assert_eq!(gpu_span(0x11000, 0x20000, 12, 16), Err(EINVAL));
        assert_eq!(gpu_span(0x10000, 0x21000, 12, 16), Err(EINVAL));
        assert_eq!(gpu_span(0x10000, 0, 12, 16), Err(EINVAL));
        assert!(covers(0x1000, 0x2000, 0x1000));
        assert!(covers(0x1000, 0x2000, 0x1fff));
        assert!(!covers(0x1000, 0x2000, 0x2000));
    }

    #[test]
    fn segments_merge_split_on_gap_max_and_boundary() {
        let phys = [
            0x1000,
            0x2000,
            0x3000,
            0x9000,
            0xa000,
            0xfffff000,
            0x1_0000_0000,
        ];
        let (mut f, mut c) = ([0u32; 7], [0u32; 7]);
        let n = plan_segments(&phys, 12, 0x10000, 0xffff_ffff, &mut f, &mut c);
        assert_eq!(n, 3 + 1);
        assert_eq!((&f[..n], &c[..n]), (&[0, 3, 5, 6][..], &[3, 2, 1, 1][..]));
        // max_seg of two pages
        let n = plan_segments(&phys[..3], 12, 0x2000, u64::MAX, &mut f, &mut c);
        assert_eq!((&f[..n], &c[..n]), (&[0, 2][..], &[2, 1][..]));
        // max_seg below a page still makes progress
        let n = plan_segments(&phys[..3], 12, 0, u64::MAX, &mut f, &mut c);
        assert_eq!(n, 3);
    }

    #[test]
    fn gpu_pages_contiguity() {
        let good: [u64; 32] = core::array::from_fn(|i| 0x20000 + i as u64 * 0x1000);
        assert_eq!(check_gpu_pages(&good, 12, 16), Ok(()));
        let mut bad = good;
        bad[20] = 0x90000;
        assert_eq!(check_gpu_pages(&bad, 12, 16), Err(1));
        let unaligned: [u64; 16] = core::array::from_fn(|i| 0x21000 + i as u64 * 0x1000);
        assert_eq!(check_gpu_pages(&unaligned, 12, 16), Err(0));
    }

    #[test]
    fn gpu_addresses_from_segments() {
        let mut out = [0u64; 3];
        // One merged segment (IOMMU), then a split one.
        assert_eq!(gpu_bus_addrs(&[0x100000], &[0x30000], 16, &mut out), Ok(()));
        assert_eq!(out, [0x100000, 0x110000, 0x120000]);
        assert_eq!(
            gpu_bus_addrs(&[0x500000, 0x200000], &[0x10000, 0x20000], 16, &mut out),
            Ok(())
        );
        assert_eq!(out, [0x500000, 0x200000, 0x210000]);
        // A GPU page split across segments, or segments too short.
        assert_eq!(
            gpu_bus_addrs(&[0x0, 0x900000], &[0x18000, 0x18000], 16, &mut out),
            Err(EIO)
        );
        assert_eq!(gpu_bus_addrs(&[0x0], &[0x20000], 16, &mut out), Err(EIO));
    }
}
