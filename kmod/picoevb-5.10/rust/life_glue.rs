// SPDX-License-Identifier: GPL-2.0

//! A GPU surface's lifecycle for the 5.10 glue: `surface_life::Life`, the 6.18 module's, kept by `cuda.c`
//! in a `struct pevb_life` under the surface's spinlock and stepped through `pevb_life_*`. `cuda.c` does
//! what each answer asks (unpin, unmap, free, wake, wait) without the lock. Kernel build only, as
//! `engine_glue.rs`.

use crate::surface_life::{Detach, Life, View};
use core::ffi::c_int;

/// The lifecycle at `l`.
///
/// # Safety
/// `l` points to a `struct pevb_life` initialised by `pevb_life_init` (layout checked at probe:
/// `PEVB_LAYOUT.life`), and the caller holds its surface's spinlock, so nothing else uses it.
unsafe fn life<'a>(l: *mut Life) -> &'a mut Life {
    // SAFETY: caller's contract.
    unsafe { &mut *l }
}

/// `Life::new`.
///
/// # Safety
/// `l` is valid for writing a `struct pevb_life`.
#[no_mangle]
pub unsafe extern "C" fn pevb_life_init(l: *mut Life) {
    // SAFETY: caller's contract.
    unsafe { l.write(Life::new()) };
}

/// `Life::begin_use`: 0, -EINVAL (the memory is going away) or -ENODEV (the card is gone).
///
/// # Safety
/// As `life`.
#[no_mangle]
pub unsafe extern "C" fn pevb_life_begin_use(l: *mut Life) -> c_int {
    // SAFETY: caller's contract.
    unsafe { life(l) }
        .begin_use()
        .map_or_else(crate::neg, |()| 0)
}

// The steps of `pevb_life_step`: the `Life` methods that take nothing and answer a `bool` (or nothing:
// false).

/// `Life::end_use`: true: wake the callback.
pub const PEVB_LIFE_END_USE: u32 = 0;
/// `Life::begin_callback`.
pub const PEVB_LIFE_BEGIN_CALLBACK: u32 = 1;
/// `Life::idle`: what the callback waits for.
pub const PEVB_LIFE_IDLE: u32 = 2;
/// `Life::end_callback`: true: the callback frees.
pub const PEVB_LIFE_END_CALLBACK: u32 = 3;
/// `Life::begin_unpin`: true: unpin through the shim.
pub const PEVB_LIFE_BEGIN_UNPIN: u32 = 4;
/// `Life::end_unpin`: true: the unpin frees.
pub const PEVB_LIFE_END_UNPIN: u32 = 5;
/// `Life::set_freed`.
pub const PEVB_LIFE_SET_FREED: u32 = 6;
/// `Life::is_freed`.
pub const PEVB_LIFE_IS_FREED: u32 = 7;
/// `Life::live`.
pub const PEVB_LIFE_LIVE: u32 = 8;
/// `Life::dying`.
pub const PEVB_LIFE_DYING: u32 = 9;

/// Takes the lifecycle step `step` (`PEVB_LIFE_*`) and answers it. One entry point, not one per step:
/// cbindgen declares it for C, as it could not a macro's functions.
///
/// # Safety
/// As `life`.
#[no_mangle]
pub unsafe extern "C" fn pevb_life_step(l: *mut Life, step: u32) -> bool {
    // SAFETY: caller's contract.
    let l = unsafe { life(l) };
    match step {
        PEVB_LIFE_END_USE => l.end_use(),
        PEVB_LIFE_BEGIN_CALLBACK => {
            l.begin_callback();
            false
        }
        PEVB_LIFE_IDLE => l.idle(),
        PEVB_LIFE_END_CALLBACK => l.end_callback(),
        PEVB_LIFE_BEGIN_UNPIN => l.begin_unpin(),
        PEVB_LIFE_END_UNPIN => l.end_unpin(),
        PEVB_LIFE_SET_FREED => {
            l.set_freed();
            false
        }
        PEVB_LIFE_IS_FREED => l.is_freed(),
        PEVB_LIFE_LIVE => l.live(),
        PEVB_LIFE_DYING => l.dying(),
        // Only the glue's own constants come here: another is a glue bug, a BUG() as any panic.
        _ => panic!("unknown surface lifecycle step"),
    }
}

/// What removal does with a surface (`pevb_life_detach`): unmapped before; unmap now, held like a DMA,
/// then `PEVB_LIFE_END_USE`; or the callback has begun: wait for its free, which unmaps.
pub const PEVB_DETACH_DONE: u32 = 0;
pub const PEVB_DETACH_UNMAP: u32 = 1;
pub const PEVB_DETACH_AWAIT_FREE: u32 = 2;

/// `Life::detach`: `PEVB_DETACH_*`.
///
/// # Safety
/// As `life`.
#[no_mangle]
pub unsafe extern "C" fn pevb_life_detach(l: *mut Life) -> u32 {
    // SAFETY: caller's contract.
    match unsafe { life(l) }.detach() {
        Detach::Done => PEVB_DETACH_DONE,
        Detach::Unmap => PEVB_DETACH_UNMAP,
        Detach::AwaitFree => PEVB_DETACH_AWAIT_FREE,
    }
}

/// `Life::view` into `out`.
///
/// # Safety
/// As `life`; `out` is valid for writing a `struct pevb_life_view`.
#[no_mangle]
pub unsafe extern "C" fn pevb_life_view(l: *mut Life, out: *mut View) {
    // SAFETY: caller's contract.
    let v = unsafe { life(l) }.view();
    // SAFETY: caller's contract.
    unsafe { out.write(v) };
}
