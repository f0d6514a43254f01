// SPDX-License-Identifier: GPL-2.0

//! gdr_nv_p2p: gdr's own provider of NVIDIA's `nvidia_p2p_*` kernel API, for kernels without NVIDIA's module
//! (test VMs, mainline). See docs/nvidia-p2p.md.
//!
//! This crate root holds the module's lifetime and its decisions: the page-table lifecycle state machine
//! and the argument and address arithmetic (`logic.rs`, plain `core` Rust, unit-tested on the host). The
//! exported API itself is in `provider.c` because it fills C structures whose layout NVIDIA's header
//! defines, and every service it needs (GUP pinning, mmu notifiers, sg tables, the DMA API, a misc device
//! with mmap) has no Rust abstraction in Linux 6.18: the C object calls those, and asks the
//! functions of `surface.rs` what to do.

use kernel::prelude::*;

#[allow(dead_code)]
#[path = "logic.rs"]
mod logic;
/// The functions provider.c calls: core-only, shared with the 5.10 build (`kmod/nvidia-p2p-5.10`).
#[allow(unreachable_pub)]
#[path = "surface.rs"]
mod surface;

module! {
    type: GdrNvP2p,
    name: "gdr_nv_p2p",
    authors: ["gdr"],
    description: "gdr: nvidia_p2p API provider (pin_user_pages + DMA API) for kernels without NVIDIA's module",
    license: "GPL",
}

extern "C" {
    fn gdr_p2p_c_init() -> c_int;
    fn gdr_p2p_c_exit();
}

struct GdrNvP2p;

impl kernel::Module for GdrNvP2p {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: called once, at load, before anything else of this module runs.
        kernel::error::to_result(unsafe { gdr_p2p_c_init() })?;
        Ok(GdrNvP2p)
    }
}

impl Drop for GdrNvP2p {
    fn drop(&mut self) {
        // SAFETY: `init` succeeded; called once, at unload. No client holds a page table: a client reaches
        // our functions through symbol_get() references or a link-time dependency, either of which keeps
        // this module loaded, and each registered mmu notifier holds a module reference until its
        // .free_notifier has run.
        unsafe { gdr_p2p_c_exit() };
    }
}
