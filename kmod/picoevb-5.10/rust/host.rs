//! Host build of the 5.10 module's `extern "C"` surface for `cargo test`: the very `surface.rs` the kernel
//! build compiles, over the same shared logic (here through the host crates instead of `#[path]`).

use picoevb_logic::{cache_policy, errno, ram_owner, segments, status, surface_life, xdma};
use picoevb_regs::pci as ids;

/// As in `picoevb_logic.rs`: the kernel's negative-errno convention.
fn neg(e: errno::Errno) -> core::ffi::c_int {
    -e.0
}

#[allow(dead_code)]
#[path = "surface.rs"]
mod surface;

#[cfg(test)]
#[path = "host_tests.rs"]
mod tests;
