// SPDX-License-Identifier: GPL-2.0

//! One PicoEVB card: its BARs, its two engines, the interrupt handler and the transfers the ioctls ask for.

use crate::abi;
use crate::cache_policy::Range;
use crate::cuda::Surface;
use crate::engine::Engine;
use crate::regcache::{HostPin, RegCache};
use crate::segments::{Cursor, Segment};
use crate::xdma::{self, Dir};
use crate::{gpio, idblock, ids};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::{
    c_str,
    device::{Bound, Device},
    devres::Devres,
    irq::{self, IrqReturn},
    new_condvar, new_mutex, new_spinlock, pci,
    prelude::*,
    revocable::RevocableGuard,
    sync::{aref::ARef, lock::spinlock::SpinLockGuard, Arc, CondVar, Mutex, SpinLock},
    time::{Delta, Instant, Monotonic},
};

pub(crate) type UserBar = pci::Bar<{ ids::BAR_USER_SIZE }>;
pub(crate) type DmaBar = pci::Bar<{ ids::BAR_DMA_SIZE }>;

/// What the driver learned about the card at probe.
#[derive(Clone, Copy)]
pub(crate) struct Identity {
    /// The gdr ID block was found (else: NVIDIA's reference bitstream).
    pub(crate) id_block: bool,
    pub(crate) design_version: u32,
    pub(crate) build_hash: u32,
}

#[derive(Default)]
pub(crate) struct Gate {
    active: u32,
    gone: bool,
    /// An engine could not be shown idle: no chain starts again until unbind (see `wedge`).
    wedged: bool,
}

/// A request's hold on the device: removal waits for it.
pub(crate) struct Active<'a> {
    card: &'a Card,
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        let mut g = self.card.gate.lock();
        g.active -= 1;
        if g.active == 0 && g.gone {
            self.card.drained.notify_all();
        }
    }
}

#[pin_data]
pub(crate) struct Card {
    #[pin]
    bar_user: Devres<UserBar>,
    #[pin]
    bar_dma: Devres<DmaBar>,
    #[pin]
    pub(crate) h2c: Engine,
    #[pin]
    pub(crate) c2h: Engine,
    pdev: ARef<pci::Device>,
    pub(crate) index: u32,
    pub(crate) ram_size: u64,
    /// Requests using the device now, and whether it is gone (see `begin`, `remove`).
    #[pin]
    gate: SpinLock<Gate>,
    #[pin]
    drained: CondVar,
    /// GPU surfaces mapped for this device, to unmap at removal.
    #[pin]
    surfaces: Mutex<KVec<Arc<Surface>>>,
    /// Serialises PIN_CUDA's overlap check with the pin it allows.
    #[pin]
    pin_lock: Mutex<()>,
    /// The open files' registration caches, to empty at removal.
    #[pin]
    caches: Mutex<KVec<Arc<RegCache>>>,
    /// Host pins of requests whose engine could not be shown idle: kept until unbind (see `wedge`).
    #[pin]
    quarantine: Mutex<KVec<HostPin>>,
    /// ABI capability bits and ID block values, set once at probe (see `set_identity`).
    caps: AtomicU64,
    design_version: AtomicU32,
    build_hash: AtomicU32,
}

impl Card {
    pub(crate) fn new(
        pdev: &pci::Device<kernel::device::Core>,
        index: u32,
    ) -> Result<impl PinInit<Self, Error> + '_> {
        let dev: &Device<Bound> = pdev.as_ref();
        Ok(try_pin_init!(Self {
            bar_user <- pdev.iomap_region_sized::<{ ids::BAR_USER_SIZE }>(ids::BAR_USER, c_str!("picoevb")),
            bar_dma <- pdev.iomap_region_sized::<{ ids::BAR_DMA_SIZE }>(ids::BAR_DMA, c_str!("picoevb")),
            h2c <- Engine::new(dev, Dir::H2c)?,
            c2h <- Engine::new(dev, Dir::C2h)?,
            pdev: pdev.into(),
            index,
            ram_size: ids::FPGA_RAM_SIZE,
            gate <- new_spinlock!(Gate::default()),
            drained <- new_condvar!(),
            surfaces <- new_mutex!(KVec::new()),
            pin_lock <- new_mutex!(()),
            caches <- new_mutex!(KVec::new()),
            quarantine <- new_mutex!(KVec::new()),
            caps: AtomicU64::new(0),
            design_version: AtomicU32::new(0),
            build_hash: AtomicU32::new(0),
        }))
    }

    /// Enters a request that uses the device (registers, DMA mappings): ENODEV once it is gone.
    pub(crate) fn begin(&self) -> Result<Active<'_>> {
        let mut g = self.gate.lock();
        if g.gone {
            return Err(ENODEV);
        }
        if g.wedged {
            return Err(EIO);
        }
        g.active += 1;
        Ok(Active { card: self })
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.gate.lock().gone
    }

    /// Whether the card has vanished from the bus: a read of an identifier register completes with all
    /// ones. Marks the card gone, so every later request fails with ENODEV at once; unbind (hot-unplug,
    /// PCI remove) still releases what the card holds.
    pub(crate) fn vanished(&self) -> bool {
        // One all-ones read may be a glitch: every identifier must read so, again after a pause.
        let all_ones = || match self.dma_regs() {
            Ok(r) => [xdma::TARGET_H2C, xdma::TARGET_C2H, xdma::TARGET_CONFIG]
                .iter()
                .all(|&t| r.try_read32(xdma::block(t, 0)) == Ok(u32::MAX)),
            Err(_) => true,
        };
        let gone = all_ones() && {
            kernel::time::delay::fsleep(Delta::from_millis(10));
            all_ones()
        };
        if gone {
            self.gate.lock().gone = true;
        }
        gone
    }

    /// Held while an engine is started: removal sets `gone` under the same lock and then stops the
    /// engines, so an engine is either started before removal stops it, or not started at all.
    pub(crate) fn start_guard(&self) -> Result<SpinLockGuard<'_, Gate>> {
        let g = self.gate.lock();
        if g.gone {
            return Err(ENODEV);
        }
        if g.wedged {
            return Err(EIO);
        }
        Ok(g)
    }

    /// An engine could not be shown idle after a run: it may still read descriptors and move data. No chain
    /// starts again, bus mastering goes off (a PCIe function may then issue no memory request), and the
    /// requests keep their pages pinned (`quarantine`) until unbind. Every later request fails with EIO.
    pub(crate) fn wedge(&self) {
        self.gate.lock().wedged = true;
        // SAFETY: `pdev` is bound to us: a request holds `Active` (unbind waits for it) or unbind itself
        // calls this, before its devres and the driver's `Enabled` are released.
        unsafe { crate::ffi::pevb_clear_master(crate::ffi::raw_pdev(&self.pdev)) };
        dev_err!(
            self.dev(),
            "card wedged until unbind: bus mastering off, the DMA's pages stay pinned\n"
        );
    }

    pub(crate) fn is_wedged(&self) -> bool {
        self.gate.lock().wedged
    }

    /// Keeps a request's host pins until unbind: its engine was not shown idle (see `wedge`).
    pub(crate) fn quarantine(&self, pin: HostPin) {
        let mut q = self.quarantine.lock();
        let kept = match q.reserve(1, GFP_KERNEL) {
            Ok(()) => q.push_within_capacity(pin).map_err(|e| e.0),
            Err(_) => Err(pin),
        };
        if let Err(pin) = kept {
            // Losing track of it is safer than unpinning memory the device may still write.
            core::mem::forget(pin);
        }
    }

    /// Records a GPU surface mapped for this device (the caller holds an `Active`).
    pub(crate) fn add_surface(&self, s: Arc<Surface>) -> Result {
        self.surfaces.lock().push(s, GFP_KERNEL)?;
        Ok(())
    }

    /// Locks out other PIN_CUDA calls on this card while one checks for overlaps and pins.
    pub(crate) fn lock_pins(&self) -> kernel::sync::MutexGuard<'_, ()> {
        self.pin_lock.lock()
    }

    /// Whether a live surface covers pages `[first, end)` of address space `mm` or any of pages `frames`.
    pub(crate) fn overlaps(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> bool {
        self.surfaces
            .lock()
            .iter()
            .any(|s| s.overlaps(mm, first, end, frames))
    }

    /// Whether a live surface or a buffer cached by any file of this card holds any of pages `frames`
    /// (under the pin lock), not counting the buffers of `own` that `replacing` takes the place of.
    pub(crate) fn frames_in_use(&self, frames: &[u64], own: &RegCache, replacing: Range) -> bool {
        self.surfaces.lock().iter().any(|s| s.holds_frames(frames))
            || self
                .caches
                .lock()
                .iter()
                .any(|c| c.holds_frames(frames, own, replacing))
    }

    /// Records an open file's registration cache.
    pub(crate) fn add_cache(&self, c: Arc<RegCache>) -> Result {
        self.caches.lock().push(c, GFP_KERNEL)?;
        Ok(())
    }

    /// Drops every file's cached host buffers on pages `[first, end)` of address space `mm` or on pages
    /// `frames` (PIN_CUDA, under the pin lock, before the surface is mapped).
    /// Returns once the dropped buffers are unmapped (except those a running request holds).
    pub(crate) fn evict_cached(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> Result {
        let mut dropped = KVec::new();
        for c in self.caches.lock().iter() {
            if c.evict_pages(mm, first, end, frames) {
                dropped.push(c.clone(), GFP_KERNEL)?;
            }
        }
        // Outside the list's lock: a closing file takes it to forget its cache.
        for c in dropped.iter() {
            c.wait_released();
        }
        Ok(())
    }

    /// Forgets a closed file's registration cache.
    pub(crate) fn drop_cache(&self, c: &RegCache) {
        self.caches.lock().retain(|x| !core::ptr::eq(&**x, c));
    }

    /// Forgets a surface that has been freed.
    pub(crate) fn drop_surface(&self, s: &Surface) {
        self.surfaces.lock().retain(|x| !core::ptr::eq(&**x, s));
    }

    /// Hot removal or unbind, while the BARs are still mapped: new requests fail with ENODEV, the engines
    /// stop, waiting requests wake with ENODEV, and once none is left, everything this device had mapped
    /// for DMA (descriptor tables, GPU surfaces, cached host buffers) is released. Open files stay valid and fail with ENODEV.
    pub(crate) fn remove(&self) {
        self.gate.lock().gone = true;
        if self.quiesce().is_err() {
            // Tables and pages are released below: the device must not master the bus any more.
            self.wedge();
        }
        self.h2c.wake();
        self.c2h.wake();
        {
            let mut g = self.gate.lock();
            while g.active > 0 {
                self.drained.wait(&mut g);
            }
        }
        // Quarantined pins (`wedge`): the engines were stopped again above and bus mastering is off.
        drop(core::mem::take(&mut *self.quarantine.lock()));
        self.h2c.release_table();
        self.c2h.release_table();
        // Unmap outside the lock: a surface's free callback takes it too.
        let surfaces = core::mem::take(&mut *self.surfaces.lock());
        for s in surfaces.iter() {
            s.detach();
        }
        for c in self.caches.lock().iter() {
            c.close();
        }
    }

    pub(crate) fn dev(&self) -> &Device {
        self.pdev.as_ref()
    }

    /// The XDMA registers, or ENODEV once the device is gone. Holds an RCU read lock: do not sleep with it.
    pub(crate) fn dma_regs(&self) -> Result<RevocableGuard<'_, DmaBar>> {
        self.bar_dma.try_access().ok_or(ENODEV)
    }

    fn user_regs(&self) -> Result<RevocableGuard<'_, UserBar>> {
        self.bar_user.try_access().ok_or(ENODEV)
    }

    fn engine(&self, dir: Dir) -> &Engine {
        match dir {
            Dir::H2c => &self.h2c,
            Dir::C2h => &self.c2h,
        }
    }

    /// Checks the XDMA identifiers (a card that is not the design we know must not be driven) and reads the
    /// gdr ID block if the bitstream has one.
    pub(crate) fn identify(&self) -> Result<Identity> {
        let r = self.dma_regs()?;
        for (target, name) in [
            (xdma::TARGET_H2C, "H2C0"),
            (xdma::TARGET_C2H, "C2H0"),
            (xdma::TARGET_IRQ, "IRQ"),
            (xdma::TARGET_CONFIG, "config"),
            (xdma::TARGET_H2C_SGDMA, "H2C0 SGDMA"),
            (xdma::TARGET_C2H_SGDMA, "C2H0 SGDMA"),
        ] {
            let id = r.try_read32(xdma::block(target, 0))?;
            if !xdma::identifier_matches(id, target) {
                dev_err!(
                    self.dev(),
                    "XDMA {} block identifier {:#010x} is not an XDMA's\n",
                    name,
                    id
                );
                return Err(ENODEV);
            }
        }
        drop(r);
        let u = self.user_regs()?;
        let reg = |off: usize| u.try_read32(idblock::BASE + off);
        if reg(idblock::REG_MAGIC)? != idblock::MAGIC {
            return Ok(Identity {
                id_block: false,
                design_version: 0,
                build_hash: 0,
            });
        }
        Ok(Identity {
            id_block: true,
            design_version: reg(idblock::REG_DESIGN_VERSION)?,
            build_hash: reg(idblock::REG_BUILD_HASH)?,
        })
    }

    /// Puts both engines and the IRQ block into a known idle state (a previous driver may have left them
    /// running) and routes both channels to vector 0: the design has one MSI vector.
    pub(crate) fn quiesce(&self) -> Result {
        for e in [&self.h2c, &self.c2h] {
            if !e.stop(self) {
                return Err(EIO);
            }
        }
        let r = self.dma_regs()?;
        r.try_write32(u32::MAX, xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C)?;
        r.try_write32(u32::MAX, xdma::IRQ_BLOCK + xdma::IRQ_USER_EN_W1C)?;
        r.try_write32(0, xdma::IRQ_BLOCK + xdma::IRQ_CHAN_VEC)?;
        Ok(())
    }

    /// Records what probe found, for IOC_ABI_INFO.
    pub(crate) fn set_identity(&self, id: &Identity, msi: bool) {
        let mut caps = if msi { abi::CAP_MSI } else { 0 };
        if id.id_block {
            caps |= abi::CAP_ID_BLOCK;
            self.design_version
                .store(id.design_version, Ordering::Relaxed);
            self.build_hash.store(id.build_hash, Ordering::Relaxed);
        }
        self.caps.store(caps, Ordering::Release);
    }

    pub(crate) fn abi_info(&self) -> abi::AbiInfo {
        abi::AbiInfo {
            abi_version: abi::ABI_VERSION,
            card_index: self.index,
            caps: self.caps.load(Ordering::Acquire),
            fpga_ram_size: self.ram_size,
            design_version: self.design_version.load(Ordering::Relaxed),
            build_hash: self.build_hash.load(Ordering::Relaxed),
            reserved: [0; 4],
        }
    }

    pub(crate) fn set_leds(&self, value: u32) -> Result {
        let r = self.user_regs()?;
        r.try_write32(value, gpio::GPIO_DATA)?;
        // Read back: MMIO writes are posted, and the caller may look at the LEDs as soon as we return.
        r.try_read32(gpio::GPIO_DATA)?;
        Ok(())
    }

    /// H2C or C2H between host memory (`segs`) and FPGA RAM. Returns the DMA time in ns.
    pub(crate) fn one_way(&self, dir: Dir, segs: &[Segment], fpga: u64, len: u64) -> Result<u64> {
        let engine = self.engine(dir);
        let mut table = engine.lock();
        let t0 = Instant::<Monotonic>::now();
        engine.transfer(self, &mut table, &mut Cursor::new(segs), fpga, len)?;
        Ok(t0.elapsed().as_nanos() as u64)
    }

    /// Host memory -> FPGA RAM -> host memory, in RAM-sized windows. Returns the DMA time in ns.
    pub(crate) fn round_trip(&self, src: &[Segment], dst: &[Segment], len: u64) -> Result<u64> {
        let (mut src_cur, mut dst_cur) = (Cursor::new(src), Cursor::new(dst));
        // Both engines, always H2C first: the lock order every path uses.
        let mut h2c_table = self.h2c.lock();
        let mut c2h_table = self.c2h.lock();
        let t0 = Instant::<Monotonic>::now();
        let mut done = 0;
        while done < len {
            let n = (len - done).min(self.ram_size);
            self.h2c
                .transfer(self, &mut h2c_table, &mut src_cur, 0, n)?;
            self.c2h
                .transfer(self, &mut c2h_table, &mut dst_cur, 0, n)?;
            done += n;
        }
        Ok(t0.elapsed().as_nanos() as u64)
    }
}

impl irq::Handler for Card {
    /// Finds which engine finished (the line may be shared, the one MSI vector serves both engines), reads
    /// its status (read-to-clear, which also drops a level INTx) and wakes the waiter.
    fn handle(&self, dev: &Device<Bound>) -> IrqReturn {
        let Ok(r) = self.bar_dma.access(dev) else {
            return IrqReturn::None;
        };
        // All ones: the card is gone (a shared INTx line may still be someone else's).
        let req = match r.try_read32(xdma::IRQ_BLOCK + xdma::IRQ_CHAN_REQ) {
            Ok(req) if req != u32::MAX => req,
            _ => return IrqReturn::None,
        };
        let mut handled = IrqReturn::None;
        for e in [&self.h2c, &self.c2h] {
            let bit = e.dir.irq_bit();
            if req & bit == 0 {
                continue;
            }
            let status = r
                .try_read32(e.dir.channel_base() + xdma::CH_STATUS_RC)
                .unwrap_or(0);
            // Off until the next run arms it again, so a stuck source cannot storm.
            let _ = r.try_write32(bit, xdma::IRQ_BLOCK + xdma::IRQ_CHAN_EN_W1C);
            e.signal(status);
            handled = IrqReturn::Handled;
        }
        handled
    }
}
