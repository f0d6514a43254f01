// SPDX-License-Identifier: GPL-2.0

//! The `extern "C"` adapters provider.c calls (not exported from the module): each decodes C arguments and
//! asks `logic.rs`. Plain `core`, so the same file serves the 6.18 module (`gdr_nv_p2p_main.rs`) and the
//! Linux 5.10 build (`kmod/nvidia-p2p-5.10`), which has no `kernel` crate.

use crate::logic;
use core::ffi::c_int;

/// Checks that the C side's copies of the state, event and action codes match `logic.rs`.
#[no_mangle]
pub extern "C" fn gdr_p2p_rs_abi_matches(
    initial: u32,
    events: &[u32; 7],
    actions: &[u32; 6],
) -> bool {
    use logic::{act, ev};
    initial == logic::State::INITIAL.to_raw()
        && *events
            == [
                ev::INVALIDATE,
                ev::RELEASE,
                ev::PUT_JETSON,
                ev::PUT_DGPU,
                ev::FREE_TABLE,
                ev::COVERS,
                ev::BLOCKABLE,
            ]
        && *actions
            == [
                act::AGAIN,
                act::PUT_NOTIFIER,
                act::UNREGISTER,
                act::RUN_CALLBACK,
                act::WAIT,
                act::INVALID,
            ]
}

/// One state-machine transition (see `logic::State::step`): `(new_state << 32) | actions`.
#[no_mangle]
pub extern "C" fn gdr_p2p_rs_step(state: u32, event: u32) -> u64 {
    logic::step_raw(state, event)
}

/// Whether a DMA mapping may be created in `state`.
#[no_mangle]
pub extern "C" fn gdr_p2p_rs_may_map(state: u32) -> bool {
    logic::State::from_raw(state).is_some_and(|s| s.may_map())
}

/// Whether the invalidated range `[start, end)` covers `vaddr`.
#[no_mangle]
pub extern "C" fn gdr_p2p_rs_covers(start: u64, end: u64, vaddr: u64) -> bool {
    logic::covers(start, end, vaddr)
}

/// Jetson get_pages span: 0 and `*first`, `*npages`, or -EINVAL.
///
/// # Safety
///
/// `first` and `npages` are valid for writes.
#[no_mangle]
pub unsafe extern "C" fn gdr_p2p_rs_jetson_span(
    vaddr: u64,
    size: u64,
    page_shift: u32,
    first: *mut u64,
    npages: *mut u32,
) -> c_int {
    match logic::jetson_span(vaddr, size, page_shift) {
        Ok((f, n)) => {
            // SAFETY: the caller guarantees both pointers are writable.
            unsafe {
                first.write(f);
                npages.write(n);
            }
            0
        }
        Err(e) => -e,
    }
}

/// dGPU get_pages span: 0 and `*npages`, `*ngpu`, or -EINVAL.
///
/// # Safety
///
/// `npages` and `ngpu` are valid for writes.
#[no_mangle]
pub unsafe extern "C" fn gdr_p2p_rs_gpu_span(
    va: u64,
    len: u64,
    page_shift: u32,
    gpu_shift: u32,
    npages: *mut u32,
    ngpu: *mut u32,
) -> c_int {
    match logic::gpu_span(va, len, page_shift, gpu_shift) {
        Ok((n, g)) => {
            // SAFETY: the caller guarantees both pointers are writable.
            unsafe {
                npages.write(n);
                ngpu.write(g);
            }
            0
        }
        Err(e) => -e,
    }
}

/// Groups `n` pages (physical addresses `phys[0..n]`) into DMA segments; see `logic::plan_segments`.
///
/// # Safety
///
/// `phys` is valid for `n` reads, `first` and `count` for `n` reads and writes (initialised, aligned);
/// none overlap.
#[no_mangle]
pub unsafe extern "C" fn gdr_p2p_rs_plan_segments(
    phys: *const u64,
    n: usize,
    page_shift: u32,
    max_seg: u64,
    boundary_mask: u64,
    first: *mut u32,
    count: *mut u32,
) -> usize {
    if n == 0 {
        return 0;
    }
    // SAFETY: the caller guarantees the lengths and that the buffers do not overlap.
    let (phys, first, count) = unsafe {
        (
            core::slice::from_raw_parts(phys, n),
            core::slice::from_raw_parts_mut(first, n),
            core::slice::from_raw_parts_mut(count, n),
        )
    };
    logic::plan_segments(phys, page_shift, max_seg, boundary_mask, first, count)
}

/// dGPU: -1 if every GPU page of `phys[0..n]` is an aligned contiguous block, else the first bad index.
///
/// # Safety
///
/// `phys` is valid for `n` reads.
#[no_mangle]
pub unsafe extern "C" fn gdr_p2p_rs_check_gpu_pages(
    phys: *const u64,
    n: usize,
    page_shift: u32,
    gpu_shift: u32,
) -> isize {
    if n == 0 {
        return -1;
    }
    // SAFETY: the caller guarantees `n` readable elements.
    let phys = unsafe { core::slice::from_raw_parts(phys, n) };
    match logic::check_gpu_pages(phys, page_shift, gpu_shift) {
        Ok(()) => -1,
        Err(k) => k as isize,
    }
}

/// dGPU: bus address of each of `ngpu` GPU pages from `nseg` DMA segments: 0 or -EIO.
///
/// # Safety
///
/// `seg_addr` and `seg_len` are valid for `nseg` reads, `out` for `ngpu` reads and writes (initialised,
/// aligned); `out` overlaps neither.
#[no_mangle]
pub unsafe extern "C" fn gdr_p2p_rs_gpu_bus_addrs(
    seg_addr: *const u64,
    seg_len: *const u64,
    nseg: usize,
    gpu_shift: u32,
    out: *mut u64,
    ngpu: usize,
) -> c_int {
    if ngpu == 0 {
        return 0;
    }
    if nseg == 0 {
        return -logic::EIO;
    }
    // SAFETY: the caller guarantees the lengths and that `out` overlaps neither input.
    let (a, l, o) = unsafe {
        (
            core::slice::from_raw_parts(seg_addr, nseg),
            core::slice::from_raw_parts(seg_len, nseg),
            core::slice::from_raw_parts_mut(out, ngpu),
        )
    };
    match logic::gpu_bus_addrs(a, l, gpu_shift, o) {
        Ok(()) => 0,
        Err(e) => -e,
    }
}
