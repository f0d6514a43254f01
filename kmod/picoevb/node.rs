// SPDX-License-Identifier: GPL-2.0

//! `/dev/picoevbN`, the driver's own character devices (`node.c`): major `picoevb`, so a sandbox admits
//! exactly the cards (`DeviceAllow=char-picoevb`), never every misc device.
//!
//! 6.18's kernel crate builds a Rust file type's operations only for a misc device, so each card keeps one,
//! root's `/dev/picoevb-miscN`, and its node opens into the same registration as misc_open() would.

use crate::ffi;
use crate::file::PicoevbFile;
use kernel::{miscdevice::MiscDeviceRegistration, prelude::*};

/// The cards' region of minors and their class, from module init to module exit.
pub(crate) struct Nodes(());

impl Nodes {
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: called once, at module init, before the PCI driver registers.
        kernel::error::to_result(unsafe { ffi::pevb_nodes_init() })?;
        Ok(Nodes(()))
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        // SAFETY: `new` succeeded, and the PCI driver was unregistered before (the module's field order),
        // which dropped every card's `Node`.
        unsafe { ffi::pevb_nodes_exit() };
    }
}

/// One card's `/dev/picoevbN`. Dropping it shuts the node's door: no open enters the card through it after
/// the drop returns.
pub(crate) struct Node(*mut ffi::PevbNode);

// SAFETY: `node.c` may be called on any thread; the pointer is only handed back to `pevb_node_del`, once.
unsafe impl Send for Node {}
// SAFETY: `Node` has no `&self` method.
unsafe impl Sync for Node {}

impl Node {
    /// Creates `/dev/picoevb<index>` under `parent`, opening into `misc`.
    ///
    /// # Safety
    ///
    /// `misc` stays registered until after the returned `Node` is dropped.
    pub(crate) unsafe fn add(
        parent: &kernel::device::Device,
        index: u32,
        misc: &MiscDeviceRegistration<PicoevbFile>,
    ) -> Result<Self> {
        let raw = misc.as_raw();
        let mut n = core::ptr::null_mut();
        // SAFETY: `raw` is a registered miscdevice, so misc_register() has read its `fops`, which
        // `MiscDeviceOptions::into_raw` set to the Rust file operations (a `'static` table). An open through
        // the node runs them as misc_open() does: `private_data` is the registration and `pevb_node_lock`
        // is held around `->open`; the caller keeps the registration alive until `pevb_node_del`, which
        // takes that lock first.
        kernel::error::to_result(unsafe {
            ffi::pevb_node_add(ffi::raw_dev(parent), index, (*raw).fops, raw.cast(), &mut n)
        })?;
        Ok(Node(n))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: `add` succeeded, and this is the only drop.
        unsafe { ffi::pevb_node_del(self.0) };
    }
}
