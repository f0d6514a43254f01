// SPDX-License-Identifier: GPL-2.0

//! A GPU surface's lifecycle for the 5.10 glue: `surface_life::Life`, the 6.18 module's, kept by `cuda.c`
//! in a `struct pevb_life` under the surface's spinlock, and its sequences (callback, unpin, a use's end,
//! removal's detach), run over the surface services `cuda.c` offers (`pevb_surf_*`), exported as
//! `pevb_surface_*`. Kernel build only, as `engine_glue.rs`.

use crate::surface_life::{self, Life, Surface, Until, View};
use core::ffi::{c_int, c_void};

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

/// What `pevb_life_is` asks: `Life::live` (the surface counts for the overlap checks).
pub const PEVB_LIFE_LIVE: u32 = 0;
/// `Life::dying`: the callback has begun and the pin is not freed yet.
pub const PEVB_LIFE_DYING: u32 = 1;
/// `Life::reached(Until::Idle)`: no use is left (what the callback and an unpin wait for).
pub const PEVB_LIFE_IDLE: u32 = 2;
/// `Life::reached(Until::Freed)`: the pin is freed (what removal and PIN_CUDA wait for).
pub const PEVB_LIFE_FREED: u32 = 3;

/// A query of the lifecycle (`PEVB_LIFE_*`), also what `cuda.c`'s `wait_event` checks.
///
/// # Safety
/// As `life`.
#[no_mangle]
pub unsafe extern "C" fn pevb_life_is(l: *mut Life, what: u32) -> bool {
    // SAFETY: caller's contract.
    let l = unsafe { life(l) };
    match what {
        PEVB_LIFE_LIVE => l.live(),
        PEVB_LIFE_DYING => l.dying(),
        PEVB_LIFE_IDLE => l.reached(Until::Idle),
        PEVB_LIFE_FREED => l.reached(Until::Freed),
        // Only the glue's own constants come here: another is a glue bug, a BUG() as any panic.
        _ => panic!("unknown surface lifecycle query"),
    }
}

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // cuda.c: one surface `s` (a `struct pevb_surface`) as `surface_life::Surface` needs it; `what` is
    // `PEVB_LIFE_IDLE` or `PEVB_LIFE_FREED`.
    fn pevb_surf_life_lock(s: *mut c_void) -> *mut Life;
    fn pevb_surf_life_unlock(s: *mut c_void);
    fn pevb_surf_wait(s: *mut c_void, what: u32);
    fn pevb_surf_wake(s: *mut c_void);
    fn pevb_surf_unpin_pin(s: *mut c_void);
    fn pevb_surf_unmap(s: *mut c_void) -> bool;
    fn pevb_surf_free_pin(s: *mut c_void);
    fn pevb_p2p_uses_awaited();
}

/// A `struct pevb_surface` that the caller holds a reference to.
struct CSurface(*mut c_void);

// Every call is sound for the surfaces `cuda.c` passes to the `pevb_surface_*` functions below: live (the
// caller holds a reference), with a pin the shim made. Each service's own conditions (the pin live, one
// unpin, one free) are the lifecycle's: `surface_life`'s sequences call them only where it says so.
impl Surface for CSurface {
    fn locked<R>(&self, f: impl FnOnce(&mut Life) -> R) -> R {
        // SAFETY: see above; the lock is held until the unlock below, so `l` is ours meanwhile.
        let l = unsafe { &mut *pevb_surf_life_lock(self.0) };
        let r = f(l);
        // SAFETY: locked above.
        unsafe { pevb_surf_life_unlock(self.0) };
        r
    }
    fn wait(&self, u: Until) {
        let what = match u {
            Until::Idle => PEVB_LIFE_IDLE,
            Until::Freed => PEVB_LIFE_FREED,
        };
        // SAFETY: see above.
        unsafe { pevb_surf_wait(self.0, what) }
    }
    fn wake(&self) {
        // SAFETY: see above.
        unsafe { pevb_surf_wake(self.0) }
    }
    fn unpin_pin(&self) {
        // SAFETY: see above.
        unsafe { pevb_surf_unpin_pin(self.0) }
    }
    fn unmap_device(&self) -> bool {
        // SAFETY: see above.
        unsafe { pevb_surf_unmap(self.0) }
    }
    fn free_pin(&self) {
        // SAFETY: see above.
        unsafe { pevb_surf_free_pin(self.0) }
    }
    fn uses_awaited(&self) {
        // SAFETY: a plain lockdep annotation.
        unsafe { pevb_p2p_uses_awaited() }
    }
}

/// The provider's free callback (`surface_life::callback`).
///
/// # Safety
/// `s` is a live `struct pevb_surface` the caller holds a reference to, in its provider's free callback.
#[no_mangle]
pub unsafe extern "C" fn pevb_surface_callback(s: *mut c_void) {
    surface_life::callback(&CSurface(s));
}

/// UNPIN or close (`surface_life::unpin`).
///
/// # Safety
/// `s` is a live `struct pevb_surface` the caller holds a reference to.
#[no_mangle]
pub unsafe extern "C" fn pevb_surface_unpin(s: *mut c_void) {
    surface_life::unpin(&CSurface(s));
}

/// A DMA's use ends (`surface_life::end_use`).
///
/// # Safety
/// As `pevb_surface_unpin`; the caller held a use.
#[no_mangle]
pub unsafe extern "C" fn pevb_surface_end_use(s: *mut c_void) {
    surface_life::end_use(&CSurface(s));
}

/// Card removal (`surface_life::detach`): true if the caller must wait for the free
/// (`pevb_surface_await_free`).
///
/// # Safety
/// As `pevb_surface_unpin`.
#[no_mangle]
pub unsafe extern "C" fn pevb_surface_detach(s: *mut c_void) -> bool {
    surface_life::detach(&CSurface(s))
}

/// Waits until the pin is freed (`surface_life::await_free`).
///
/// # Safety
/// As `pevb_surface_unpin`.
#[no_mangle]
pub unsafe extern "C" fn pevb_surface_await_free(s: *mut c_void) {
    surface_life::await_free(&CSurface(s));
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
