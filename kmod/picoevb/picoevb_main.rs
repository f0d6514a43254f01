// SPDX-License-Identifier: GPL-2.0

//! picoevb: PCI driver for the PicoEVB FPGA card (Xilinx XDMA + 64 KiB BRAM + LEDs), part of gdr.
//!
//! Binds the design's identity (10de:0001, subsystem 10de:0001), maps both BARs, takes MSI (INTx as
//! fallback), and exposes `/dev/picoevbN` with the reference driver's ioctl ABI. Each DMA request becomes one
//! XDMA descriptor chain with one interrupt; every wait has a timeout.
//!
//! The driver's logic lives in plain `core` Rust shared with the host (`kmod/logic`, `crates/*`), included
//! below by path and unit-tested there; the files in this folder are only the kernel glue.

// `try_pin_init!` expands recursively per field; `Card` has more fields than the default limit allows.
#![recursion_limit = "256"]

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::{
    c_str,
    device::Core,
    dma::{Device as _, DmaMask},
    irq,
    miscdevice::{MiscDeviceOptions, MiscDeviceRegistration},
    pci,
    prelude::*,
    str::CStr,
    sync::Arc,
};

// ---- Shared definitions and logic, the very files the host crates compile ----
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/picoevb-abi/src/abi.rs"]
mod abi;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/admission.rs"]
mod admission;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/cache_policy.rs"]
mod cache_policy;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/cache_table.rs"]
mod cache_table;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/chain.rs"]
mod chain;
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/picoevb-regs/src/channel.rs"]
mod channel;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/engine.rs"]
mod engine_logic;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/errno.rs"]
mod errno;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/gate.rs"]
mod gate;
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/picoevb-regs/src/gpio.rs"]
mod gpio;
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/picoevb-regs/src/idblock.rs"]
mod idblock;
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/picoevb-regs/src/pci.rs"]
mod ids;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/interrupt.rs"]
mod interrupt;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/ioctl.rs"]
mod ioctl;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/pipeline.rs"]
mod pipeline;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/probe.rs"]
mod probe;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/ram_owner.rs"]
mod ram_owner;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/removal.rs"]
mod removal;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/request.rs"]
mod request;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/round_trip.rs"]
mod round_trip;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/segments.rs"]
mod segments;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/status.rs"]
mod status;
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/picoevb-regs/src/stream.rs"]
mod stream;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/stream_ctl.rs"]
mod stream_ctl;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/stream_ring.rs"]
mod stream_ring;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/stream_ring_run.rs"]
mod stream_ring_run;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/surface_life.rs"]
mod surface_life;
#[allow(dead_code, unreachable_pub)]
#[path = "../logic/src/surface_pin.rs"]
mod surface_pin;
#[allow(dead_code, unreachable_pub)]
#[path = "../../crates/picoevb-regs/src/xdma.rs"]
mod xdma;

// ---- Kernel glue ----
mod book;
mod card;
mod cuda;
mod done;
mod duplex;
mod engine;
mod errors;
mod ffi;
mod file;
mod killable;
mod node;
mod pin;
mod port;
mod ram;
mod regcache;
mod ring_wake;

use card::Card;
use file::PicoevbFile;

#[cfg(target_endian = "big")]
compile_error!("XDMA descriptors are little-endian and are written in native byte order");

/// Size of the field that `_f` borrows, for [`plain_bytes!`]; the bound makes each field's type one for
/// which every bit pattern is valid and which has no uninitialised bytes. Used only inside anonymous
/// consts, which the dead-code lint does not see into.
#[allow(dead_code)]
const fn field_size<T, F: kernel::transmute::FromBytes + kernel::transmute::AsBytes>(
    _f: fn(&T) -> &F,
) -> usize {
    core::mem::size_of::<F>()
}

/// `AsBytes` and `FromBytes` for structs the device reads (the ioctl arguments move as bytes through
/// `ioctl.rs`, field by field, and need neither). Checked at compile time, for each: the field list is complete (an exhaustive pattern), every field's type is itself
/// `FromBytes + AsBytes` (integers and arrays of them), and the fields' sizes add up to the struct's, so
/// there is no padding.
macro_rules! plain_bytes {
    ($($t:path { $($f:ident),+ $(,)? })+) => {$(
        const _: () = {
            #[allow(dead_code)]
            fn exhaustive(x: &$t) {
                let $t { $($f: _),+ } = x;
            }
            assert!(core::mem::size_of::<$t>() == 0 $(+ field_size::<$t, _>(|x| &x.$f))+);
        };
        // SAFETY: checked above: no padding (no uninitialised byte to read) and only fields for which
        // every bit pattern is valid, so any byte string of the struct's size is a valid value.
        unsafe impl kernel::transmute::AsBytes for $t {}
        // SAFETY: as above.
        unsafe impl kernel::transmute::FromBytes for $t {}
    )+};
}

plain_bytes! {
    xdma::Descriptor { control, len, src_lo, src_hi, dst_lo, dst_hi, next_lo, next_hi }
}

/// Card names (`/dev/picoevbN`, its debugfs folder).
const NAMES: [&CStr; 8] = [
    c_str!("picoevb0"),
    c_str!("picoevb1"),
    c_str!("picoevb2"),
    c_str!("picoevb3"),
    c_str!("picoevb4"),
    c_str!("picoevb5"),
    c_str!("picoevb6"),
    c_str!("picoevb7"),
];

/// The misc devices' names (`node.rs` says why each card has one); the misc layer keeps a pointer to the
/// name, so they are static.
const MISC_NAMES: [&CStr; 8] = [
    c_str!("picoevb-misc0"),
    c_str!("picoevb-misc1"),
    c_str!("picoevb-misc2"),
    c_str!("picoevb-misc3"),
    c_str!("picoevb-misc4"),
    c_str!("picoevb-misc5"),
    c_str!("picoevb-misc6"),
    c_str!("picoevb-misc7"),
];

/// Which `/dev/picoevbN` numbers are in use.
static SLOTS: AtomicU32 = AtomicU32::new(0);

/// A card number, free again on drop.
struct Slot(u32);

impl Slot {
    fn take() -> Result<Self> {
        let mut cur = SLOTS.load(Ordering::Relaxed);
        loop {
            let free = (!cur).trailing_zeros();
            if free as usize >= NAMES.len() {
                return Err(EBUSY);
            }
            match SLOTS.compare_exchange(cur, cur | 1 << free, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(Self(free)),
                Err(now) => cur = now,
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        SLOTS.fetch_and(!(1 << self.0), Ordering::AcqRel);
    }
}

/// The device's IRQ vectors (MSI or INTx), freed after the handler is gone.
struct IrqVectors {
    pdev: kernel::sync::aref::ARef<pci::Device>,
}

impl Drop for IrqVectors {
    fn drop(&mut self) {
        // SAFETY: allocated in probe for this device; the IRQ registration was dropped before this field.
        unsafe { ffi::pevb_irq_vectors_free(ffi::raw_pdev(&self.pdev)) };
    }
}

/// Disables the PCI device when the driver lets go of it (6.18's `enable_device_mem` is not managed).
struct Enabled {
    pdev: kernel::sync::aref::ARef<pci::Device>,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        // SAFETY: the device was enabled in probe by this driver and nothing of ours uses it any more.
        unsafe { ffi::pevb_disable_device(ffi::raw_pdev(&self.pdev)) };
    }
}

/// Driver data of one bound card. Fields drop in declaration order: the device nodes go first (no new
/// opens; `/dev/picoevbN` before the misc device it opens into), then the interrupt, then the vectors and
/// the device itself.
#[pin_data]
pub(crate) struct PicoevbDriver {
    /// Set once the driver data is in place (probe's end): it opens into `misc`.
    node: Option<node::Node>,
    #[pin]
    misc: MiscDeviceRegistration<PicoevbFile>,
    #[pin]
    irq: irq::Registration<Arc<Card>>,
    card: Arc<Card>,
    #[pin]
    _state: kernel::debugfs::File<Arc<Card>>,
    _vectors: IrqVectors,
    _slot: Slot,
    _enabled: Enabled,
}

kernel::pci_device_table!(
    PCI_TABLE,
    MODULE_PCI_TABLE,
    <PicoevbDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::NVIDIA, ids::DEVICE_ID as u32),
        ()
    )]
);

impl pci::Driver for PicoevbDriver {
    type IdInfo = ();
    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe(pdev: &pci::Device<Core>, _info: &Self::IdInfo) -> Result<Pin<KBox<Self>>> {
        if pdev.subsystem_vendor_id() != ids::SUBSYSTEM_VENDOR_ID
            || pdev.subsystem_device_id() != ids::SUBSYSTEM_ID_PICOEVB
        {
            // 10de:0001 is also NVIDIA's HTG-K800 design (2 GiB DDR4), which this driver does not support.
            return Err(ENODEV);
        }
        pdev.enable_device_mem()?;
        let enabled = Enabled { pdev: pdev.into() };
        // SAFETY: probe runs before the device node exists and before anything of ours allocates or maps
        // for this device, so no DMA allocation or mapping runs concurrently.
        unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<64>())? };
        // SAFETY: `pdev` is bound to us (probe) and nothing maps for it yet. Segments up to a descriptor's
        // length keep chains short.
        unsafe { ffi::pevb_dma_setup(ffi::raw_pdev(pdev), (xdma::DESC_LEN_MAX & !0xfff) as u32) };

        let slot = Slot::take()?;
        let card = Arc::pin_init(Card::new(pdev, slot.0)?, GFP_KERNEL)?;
        let id = card.identify()?;
        // A previous driver (or a kexec'd kernel) may have left an engine running: stop both before the card
        // may master the bus, so nothing it had queued reaches memory we no longer own.
        card.quiesce()?;
        pdev.set_master();

        // SAFETY: `pdev` is bound and has no vectors yet.
        let msi = unsafe { ffi::pevb_irq_vectors_alloc(ffi::raw_pdev(pdev)) };
        kernel::error::to_result(msi)?;
        let vectors = IrqVectors { pdev: pdev.into() };
        card.set_identity(&id, msi == 1);

        let handler = card.clone();
        let index = slot.0;
        let name = NAMES[index as usize];
        let debug = kernel::debugfs::Dir::new(name);
        let mut drv = KBox::pin_init(
            // Fields are initialised in the order written here (not declared): the misc device last, so
            // an open() finds every other field, `card` above all, written (`PicoevbFile::open`).
            try_pin_init!(Self {
                node: None,
                irq <- pdev.request_irq(0, irq::Flags::SHARED, c_str!("picoevb"), Ok::<_, Error>(handler))?,
                _state <- card::state_file(&debug, &card),
                card,
                _vectors: vectors,
                _slot: slot,
                _enabled: enabled,
                misc <- MiscDeviceRegistration::register(MiscDeviceOptions {
                    name: MISC_NAMES[index as usize],
                }),
            }),
            GFP_KERNEL,
        )?;
        // SAFETY: `misc` is registered and is this driver data's, which drops `node` before it.
        let node = unsafe { node::Node::add(pdev.as_ref(), index, &drv.misc)? };
        *drv.as_mut().project().node = Some(node);
        if id.id_block {
            let (maj, min, patch) = idblock::version_parts(id.design_version);
            dev_info!(
                pdev.as_ref(),
                "/dev/{}: gdr design {}.{}.{} (build {:08x}), {} interrupts, {} KiB FPGA RAM\n",
                name.to_str().unwrap_or("picoevb"),
                maj,
                min,
                patch,
                id.build_hash,
                if msi == 1 { "MSI" } else { "INTx" },
                ids::FPGA_RAM_SIZE / 1024
            );
        } else {
            dev_info!(
                pdev.as_ref(),
                "/dev/{}: reference design (no gdr ID block), {} interrupts\n",
                name.to_str().unwrap_or("picoevb"),
                if msi == 1 { "MSI" } else { "INTx" }
            );
        }
        Ok(drv)
    }

    fn unbind(pdev: &pci::Device<Core>, this: Pin<&Self>) {
        this.card.remove();
        dev_info!(pdev.as_ref(), "removed; open files now fail with ENODEV\n");
    }
}

/// The module: the shim's queue of deferred GPU-pin frees, the cards' device numbers, then the PCI driver.
/// Fields drop in order, so the driver is unregistered first (every card's node is gone), and the queue
/// (which may still run the tail of a free whose pin's module reference is already gone) is drained last.
#[pin_data]
struct PicoevbModule {
    #[pin]
    _driver: kernel::driver::Registration<pci::Adapter<PicoevbDriver>>,
    _nodes: node::Nodes,
    _p2p: P2pQueue,
}

/// `p2p.c`'s work queue, from module init to module exit.
struct P2pQueue;

impl P2pQueue {
    fn new() -> Result<Self> {
        // SAFETY: called once, at module init, before any pin exists.
        kernel::error::to_result(unsafe { ffi::pevb_p2p_init() })?;
        Ok(P2pQueue)
    }
}

impl Drop for P2pQueue {
    fn drop(&mut self) {
        // SAFETY: `new` succeeded. At module exit no pin is left (each holds the module), so nothing
        // queues work any more; the driver's unbind is over (field order).
        unsafe { ffi::pevb_p2p_exit() };
    }
}

impl kernel::InPlaceModule for PicoevbModule {
    fn init(module: &'static kernel::ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            _p2p: P2pQueue::new()?,
            _nodes: node::Nodes::new()?,
            _driver <- kernel::driver::Registration::new(c_str!("picoevb"), module),
        })
    }
}

kernel::prelude::module! {
    type: PicoevbModule,
    name: "picoevb",
    authors: ["gdr developers"],
    description: "PicoEVB FPGA card: XDMA scatter-gather DMA between user memory and FPGA RAM",
    license: "GPL",
}
