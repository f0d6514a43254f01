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

/// One `pevb_life_*` function per `Life` step that takes nothing and answers a `bool` or nothing.
macro_rules! steps {
    ($($c:ident => $m:ident -> $t:ty;)*) => {$(
        #[doc = concat!("`Life::", stringify!($m), "`.")]
        ///
        /// # Safety
        /// As `life`.
        #[no_mangle]
        pub unsafe extern "C" fn $c(l: *mut Life) -> $t {
            // SAFETY: caller's contract.
            unsafe { life(l) }.$m()
        }
    )*};
}

steps! {
    pevb_life_end_use => end_use -> bool;
    pevb_life_begin_callback => begin_callback -> ();
    pevb_life_idle => idle -> bool;
    pevb_life_end_callback => end_callback -> bool;
    pevb_life_begin_unpin => begin_unpin -> bool;
    pevb_life_end_unpin => end_unpin -> bool;
    pevb_life_set_freed => set_freed -> ();
    pevb_life_is_freed => is_freed -> bool;
    pevb_life_live => live -> bool;
    pevb_life_dying => dying -> bool;
}

/// `Life::detach`, as `enum pevb_detach` (logic.h).
///
/// # Safety
/// As `life`.
#[no_mangle]
pub unsafe extern "C" fn pevb_life_detach(l: *mut Life) -> u32 {
    // SAFETY: caller's contract.
    unsafe { life(l) }.detach() as u32
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

// `enum pevb_detach` in logic.h.
const _: () =
    assert!(Detach::Done as u32 == 0 && Detach::Unmap as u32 == 1 && Detach::AwaitFree as u32 == 2);
