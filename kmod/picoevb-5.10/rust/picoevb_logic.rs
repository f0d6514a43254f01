// SPDX-License-Identifier: GPL-2.0

//! The Rust half of the Linux 5.10 picoevb.ko (Jetson AGX Xavier, L4T R35): the driver's logic, the very
//! files the 6.18 module compiles (`kmod/picoevb/picoevb_main.rs` includes the same list by path), built
//! freestanding for the kernel's target (5.10 has no Rust support, so no `kernel` crate) and exported to the
//! C glue as a small `extern "C"` surface, declared for C in `../logic.h`. Everything here is plain `core`:
//! no allocation, no floating point, no kernel symbol but the panic hook.

#![no_std]
#![allow(internal_features)]

use core::ffi::{c_char, c_int};

// ---- Shared definitions and logic, the very files the 6.18 module and the host crates compile ----
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../../crates/picoevb-abi/src/abi.rs"]
mod abi;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/admission.rs"]
mod admission;
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/cache_policy.rs"]
mod cache_policy;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/cache_table.rs"]
mod cache_table;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/chain.rs"]
mod chain;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../../crates/picoevb-regs/src/channel.rs"]
mod channel;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/engine.rs"]
mod engine;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/errno.rs"]
mod errno;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/gate.rs"]
mod gate;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../../crates/picoevb-regs/src/gpio.rs"]
mod gpio;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../../crates/picoevb-regs/src/idblock.rs"]
mod idblock;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../../crates/picoevb-regs/src/pci.rs"]
mod ids;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/interrupt.rs"]
mod interrupt;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/ioctl.rs"]
mod ioctl;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/pipeline.rs"]
mod pipeline;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/probe.rs"]
mod probe;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/ram_owner.rs"]
mod ram_owner;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/removal.rs"]
mod removal;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/request.rs"]
mod request;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/round_trip.rs"]
mod round_trip;
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/segments.rs"]
mod segments;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/status.rs"]
mod status;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../../crates/picoevb-regs/src/stream.rs"]
mod stream;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/stream_ctl.rs"]
mod stream_ctl;
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/stream_ring.rs"]
mod stream_ring;
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/stream_ring_run.rs"]
mod stream_ring_run;
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/surface_life.rs"]
mod surface_life;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../logic/src/surface_pin.rs"]
mod surface_pin;
/// cbindgen:ignore
#[allow(dead_code, unreachable_pub)]
#[path = "../../../crates/picoevb-regs/src/xdma.rs"]
mod xdma;

mod cache_glue;
mod card_glue;
mod engine_glue;
mod gate_glue;
mod ioctl_glue;
mod life_glue;
mod pin_glue;
mod surface;
mod user_glue;

#[cfg(target_endian = "big")]
compile_error!("XDMA descriptors are little-endian and are written in native byte order");

/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    /// `main.c`: logs the location and ends in the kernel's BUG(); never returns.
    fn pevb_rust_panic(file: *const c_char, file_len: usize, line: u32) -> !;
}

/// A Rust panic (a failed overflow check, an out-of-bounds index: a bug) is the kernel's BUG(): the task
/// that hit it is killed with an oops and a backtrace, as for a C BUG_ON. Only the location is reported, so
/// no formatting code runs in the failing context. `panic = abort`: nothing unwinds through C frames.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let (file, line) = info.location().map_or(("?", 0), |l| (l.file(), l.line()));
    // SAFETY: `file` is valid for `file.len()` bytes; the hook does not return.
    unsafe { pevb_rust_panic(file.as_ptr().cast(), file.len(), line) }
}

/// Negative errno, the kernel's convention, of a logic error.
fn neg(e: errno::Errno) -> c_int {
    -e.0
}

/// A C service's answer (0 or more, or a negative errno) as the logic's result.
fn res(rc: c_int) -> Result<(), errno::Errno> {
    if rc < 0 {
        Err(errno::Errno(-rc))
    } else {
        Ok(())
    }
}

/// `offset` as the C register accessors take it, if a 32-bit register there lies inside a BAR of
/// `bar_size` bytes. Probe (`main.c`) refuses a card whose BARs are shorter than the design's
/// (`ids::BAR_DMA_SIZE`, `ids::BAR_USER_SIZE`) and maps them whole, so such an offset is mapped.
fn bar_offset(offset: usize, bar_size: usize) -> Result<u32, errno::Errno> {
    match offset.checked_add(4) {
        Some(end) if end <= bar_size && offset % 4 == 0 => Ok(offset as u32),
        _ => Err(errno::Errno::EINVAL),
    }
}
