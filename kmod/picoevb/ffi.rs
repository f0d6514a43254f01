// SPDX-License-Identifier: GPL-2.0

//! Declarations of the C helpers in `helpers.c`, `cpin.c`, `node.c`, `pin.c`, `prefault.c`, `ring_wake.c`
//! and `p2p.c`.

use kernel::bindings;
use kernel::ffi::{c_int, c_long, c_uint, c_void};

/// Opaque pinned-and-mapped user buffer owned by the C side (`pin.c`).
#[repr(C)]
pub(crate) struct PevbPin {
    _opaque: [u8; 0],
}

/// Opaque cached pin (pinned, mapped, watched by an mmu notifier) owned by the C side.
#[repr(C)]
pub(crate) struct PevbCpin {
    _opaque: [u8; 0],
}

/// Opaque work item owned by the C side.
#[repr(C)]
pub(crate) struct PevbWork {
    _opaque: [u8; 0],
}

/// Opaque character device of one card, owned by `node.c`.
#[repr(C)]
pub(crate) struct PevbNode {
    _opaque: [u8; 0],
}

/// Opaque pinned GPU-memory surface owned by `p2p.c`.
#[repr(C)]
pub(crate) struct PevbP2p {
    _opaque: [u8; 0],
}

// `struct device` holds lockdep's zero-sized `lockdep_map` in some configs, which trips `improper_ctypes`.
#[allow(improper_ctypes)]
extern "C" {
    pub(crate) fn pevb_pin_user(
        dev: *mut bindings::device,
        uaddr: u64,
        len: u64,
        to_device: bool,
        out: *mut *mut PevbPin,
    ) -> c_int;
    pub(crate) fn pevb_pin_segments(
        p: *mut PevbPin,
        n: *mut usize,
    ) -> *const crate::segments::Segment;
    pub(crate) fn pevb_unpin_user(p: *mut PevbPin);
    pub(crate) fn pevb_pin_quarantined(p: *mut PevbPin);
    pub(crate) fn pevb_irq_vectors_alloc(pdev: *mut bindings::pci_dev) -> c_int;
    pub(crate) fn pevb_irq_vectors_free(pdev: *mut bindings::pci_dev);
    pub(crate) fn pevb_dma_setup(pdev: *mut bindings::pci_dev, max_seg: c_uint);
    pub(crate) fn pevb_file_hold_module(file: *mut bindings::file) -> c_int;
    pub(crate) fn pevb_disable_device(pdev: *mut bindings::pci_dev);
    pub(crate) fn pevb_clear_master(pdev: *mut bindings::pci_dev);
    pub(crate) fn pevb_completion_reinit(c: *mut bindings::completion);
    pub(crate) fn pevb_completion_complete(c: *mut bindings::completion);
    pub(crate) fn pevb_completion_wait_ms(c: *mut bindings::completion, ms: c_uint) -> c_long;
    pub(crate) fn pevb_mutex_init(m: *mut bindings::mutex, class: c_uint);
    pub(crate) fn pevb_mutex_lock_killable(m: *mut bindings::mutex) -> c_int;
    pub(crate) fn pevb_mutex_lock(m: *mut bindings::mutex);
    pub(crate) fn pevb_current_mm() -> usize;
    pub(crate) fn pevb_work_new(
        f: Option<unsafe extern "C" fn(*mut c_void)>,
        data: *mut c_void,
    ) -> *mut PevbWork;
    pub(crate) fn pevb_work_free(w: *mut PevbWork);
    pub(crate) fn pevb_work_drain(w: *mut PevbWork);
    pub(crate) fn pevb_work_wait_pages(w: *mut PevbWork, frames: *const u64, n: core::ffi::c_ulong);
    pub(crate) fn pevb_cpin_supported() -> bool;
    pub(crate) fn pevb_cpin_new(
        dev: *mut bindings::device,
        uaddr: u64,
        len: u64,
        sweep: *mut PevbWork,
        out: *mut *mut PevbCpin,
    ) -> c_int;
    pub(crate) fn pevb_cpin_stale(p: *mut PevbCpin) -> bool;
    pub(crate) fn pevb_cpin_pin(p: *mut PevbCpin) -> *mut PevbPin;
    pub(crate) fn pevb_cpin_sync(
        p: *mut PevbCpin,
        offset: u64,
        len: u64,
        to_device: bool,
        for_device: bool,
    );
    pub(crate) fn pevb_p2p_sync(
        p: *mut PevbP2p,
        at: u64,
        len: u64,
        to_device: bool,
        for_device: bool,
    );
    pub(crate) fn pevb_cpin_release_later(p: *mut PevbCpin, dirty: bool);
    pub(crate) fn pevb_cpin_npages(p: *mut PevbCpin) -> core::ffi::c_ulong;
    pub(crate) fn pevb_cpin_pfn(p: *mut PevbCpin, i: core::ffi::c_ulong) -> u64;
    pub(crate) fn pevb_user_pfns(
        uaddr: u64,
        len: u64,
        out: *mut u64,
        n: core::ffi::c_ulong,
    ) -> c_int;
    pub(crate) fn pevb_user_prefault(uaddr: u64, len: u64, write: bool) -> c_int;
    pub(crate) fn pevb_user_load_u64(uaddr: u64, v: *mut u64) -> c_int;
    pub(crate) fn pevb_user_store_u64(uaddr: u64, v: u64) -> c_int;

    // ring_wake.c: a stream ring's eventfd.
    pub(crate) fn pevb_eventfd_get(fd: c_int, ctx: *mut *mut bindings::eventfd_ctx) -> c_int;
    pub(crate) fn pevb_eventfd_signal(ctx: *mut bindings::eventfd_ctx);
    pub(crate) fn pevb_eventfd_put(ctx: *mut bindings::eventfd_ctx);

    // node.c: the cards' character devices.
    pub(crate) fn pevb_nodes_init() -> c_int;
    pub(crate) fn pevb_nodes_exit();
    pub(crate) fn pevb_node_add(
        parent: *mut bindings::device,
        index: c_uint,
        fops: *const bindings::file_operations,
        private: *mut c_void,
        out: *mut *mut PevbNode,
    ) -> c_int;
    pub(crate) fn pevb_node_del(n: *mut PevbNode);

    // p2p.c: the nvidia_p2p API, resolved at run time.
    pub(crate) fn pevb_p2p_init() -> c_int;
    pub(crate) fn pevb_p2p_exit();
    pub(crate) fn pevb_p2p_get() -> c_int;
    pub(crate) fn pevb_p2p_put();
    pub(crate) fn pevb_p2p_pin(
        dev: *mut bindings::device,
        va: u64,
        len: u64,
        free_cb: Option<unsafe extern "C" fn(*mut c_void)>,
        data: *mut c_void,
        out: *mut *mut PevbP2p,
    ) -> c_int;
    pub(crate) fn pevb_p2p_pin_host(
        dev: *mut bindings::device,
        va: u64,
        len: u64,
        free_cb: Option<unsafe extern "C" fn(*mut c_void)>,
        data: *mut c_void,
        out: *mut *mut PevbP2p,
    ) -> c_int;
    pub(crate) fn pevb_p2p_dmabuf_supported() -> bool;
    pub(crate) fn pevb_p2p_import_dmabuf(
        dev: *mut bindings::device,
        fd: c_int,
        offset: u64,
        len: u64,
        free_cb: Option<unsafe extern "C" fn(*mut c_void)>,
        data: *mut c_void,
        out: *mut *mut PevbP2p,
        placement: *mut u32,
    ) -> c_int;
    pub(crate) fn pevb_p2p_segments(
        p: *mut PevbP2p,
        n: *mut u32,
    ) -> *const crate::segments::Segment;
    pub(crate) fn pevb_p2p_use_acquire();
    pub(crate) fn pevb_p2p_use_release();
    pub(crate) fn pevb_p2p_uses_awaited();
    pub(crate) fn pevb_p2p_unpin(p: *mut PevbP2p);
    pub(crate) fn pevb_p2p_free_from_callback(p: *mut PevbP2p);
    pub(crate) fn pevb_p2p_unmap_device(p: *mut PevbP2p) -> bool;
}

/// The C `struct device *` of a Rust device.
pub(crate) fn raw_dev<Ctx: kernel::device::DeviceContext>(
    dev: &kernel::device::Device<Ctx>,
) -> *mut bindings::device {
    // `device::Device::as_raw()` is crate-private in 6.18; the type is `#[repr(transparent)]` over
    // `Opaque<bindings::device>`, so the cast yields the C pointer.
    core::ptr::from_ref(dev)
        .cast::<bindings::device>()
        .cast_mut()
}

/// The C `struct pci_dev *` of a Rust PCI device.
pub(crate) fn raw_pdev<Ctx: kernel::device::DeviceContext>(
    pdev: &kernel::pci::Device<Ctx>,
) -> *mut bindings::pci_dev {
    // As for `raw_dev`: `pci::Device` is `#[repr(transparent)]` over `Opaque<bindings::pci_dev>`.
    core::ptr::from_ref(pdev)
        .cast::<bindings::pci_dev>()
        .cast_mut()
}
