// SPDX-License-Identifier: GPL-2.0

//! The Rust half of the Linux 5.10 gdr_nv_p2p.ko: the provider's decisions (`logic.rs`) and the adapters
//! provider.c calls (`surface.rs`), the very files the 6.18 module compiles (`gdr_nv_p2p_main.rs`), built
//! freestanding by `../picoevb-5.10/rust.mk`. Plain `core`: no allocation, no floating point.

#![no_std]

use core::ffi::c_char;

#[allow(dead_code)]
#[path = "../../nvidia-p2p/logic.rs"]
mod logic;
#[allow(unreachable_pub)]
#[path = "../../nvidia-p2p/surface.rs"]
mod surface;

extern "C" {
    /// `main.c`: logs the location and ends in the kernel's BUG(); never returns.
    fn gdr_p2p_rust_panic(file: *const c_char, file_len: usize, line: u32) -> !;
}

/// A Rust panic (a failed overflow check, an out-of-bounds index: a bug) is the kernel's BUG(), as in
/// picoevb's 5.10 build; only the location is reported. `panic = abort`: nothing unwinds through C.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let (file, line) = info.location().map_or(("?", 0), |l| (l.file(), l.line()));
    // SAFETY: `file` is valid for `file.len()` bytes; the hook does not return.
    unsafe { gdr_p2p_rust_panic(file.as_ptr().cast(), file.len(), line) }
}
