// SPDX-License-Identifier: GPL-2.0

//! One PicoEVB card: its BARs, its two engines, the interrupt handler and the transfers the ioctls ask for.

use crate::abi;
use crate::cache_policy::Range;
use crate::channel::{Channel, IrqRegs, Regs32};
use crate::cuda::Surface;
use crate::duplex::Engines;
use crate::engine::Engine;
use crate::gpio::Leds;
use crate::idblock::IdBlock;
use crate::ids;
use crate::port::{Active, Port, UserBar};
use crate::ram::{Ram, RamUse};
use crate::ram_owner::{Member, Op};
use crate::regcache::{HostPin, RegCache};
use crate::segments::{Cursor, Segment};
use crate::xdma::{self, Dir};
use core::fmt;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::{
    c_str, debugfs,
    device::{Bound, Device},
    devres::Devres,
    irq::{self, IrqReturn},
    new_mutex, pci,
    prelude::*,
    revocable::RevocableGuard,
    sync::{Arc, Mutex, MutexGuard},
    time::{Instant, Monotonic},
};

/// What the driver learned about the card at probe.
#[derive(Clone, Copy)]
pub(crate) struct Identity {
    /// The gdr ID block was found (else: NVIDIA's reference bitstream).
    pub(crate) id_block: bool,
    pub(crate) design_version: u32,
    pub(crate) build_hash: u32,
}

#[pin_data]
pub(crate) struct Card {
    #[pin]
    bar_user: Devres<UserBar>,
    /// The DMA registers and the gate: all the engines see of the card.
    #[pin]
    port: Port,
    #[pin]
    pub(crate) h2c: Engine,
    #[pin]
    pub(crate) c2h: Engine,
    pub(crate) index: u32,
    pub(crate) ram_size: u64,
    /// GPU surfaces mapped for this device, to unmap at removal.
    #[pin]
    surfaces: Mutex<KVec<Arc<Surface>>>,
    /// Free callbacks removal waits for now (`Surface::detach`), for the debugfs `state`.
    callbacks_awaited: AtomicU32,
    /// Serialises PIN_CUDA's overlap check with the pin it allows.
    #[pin]
    pin_lock: Mutex<()>,
    /// The open files' registration caches, to empty at removal.
    #[pin]
    caches: Mutex<KVec<Arc<RegCache>>>,
    /// Host pins of requests whose engine could not be shown idle: kept until unbind (see `wedge`).
    #[pin]
    quarantine: Mutex<Quarantine>,
    /// ABI capability bits and ID block values, set once at probe (see `set_identity`).
    caps: AtomicU64,
    design_version: AtomicU32,
    build_hash: AtomicU32,
    /// Who owns the card RAM (`ram.rs`).
    #[pin]
    ram: Ram,
}

impl Card {
    pub(crate) fn new(
        pdev: &pci::Device<kernel::device::Core>,
        index: u32,
    ) -> Result<impl PinInit<Self, Error> + '_> {
        let dev: &Device<Bound> = pdev.as_ref();
        Ok(try_pin_init!(Self {
            bar_user <- pdev.iomap_region_sized::<{ ids::BAR_USER_SIZE }>(ids::BAR_USER, c_str!("picoevb")),
            port <- Port::new(
                pdev,
                pdev.iomap_region_sized::<{ ids::BAR_DMA_SIZE }>(ids::BAR_DMA, c_str!("picoevb")),
            ),
            h2c <- Engine::new(dev, Dir::H2c)?,
            c2h <- Engine::new(dev, Dir::C2h)?,
            index,
            ram_size: ids::FPGA_RAM_SIZE,
            surfaces <- new_mutex!(KVec::new()),
            callbacks_awaited: AtomicU32::new(0),
            pin_lock <- new_mutex!(()),
            caches <- new_mutex!(KVec::new()),
            quarantine <- new_mutex!(Quarantine {
                pins: KVec::new(),
                reserved: 0,
            }),
            caps: AtomicU64::new(0),
            design_version: AtomicU32::new(0),
            build_hash: AtomicU32::new(0),
            ram <- Ram::new(dev, ids::FPGA_RAM_SIZE)?,
        }))
    }

    /// Enters a request that uses the device (registers, DMA mappings): ENODEV once it is gone.
    pub(crate) fn begin(&self) -> Result<Active<'_>> {
        self.port.begin()
    }

    pub(crate) fn is_gone(&self) -> bool {
        self.port.is_gone()
    }

    pub(crate) fn is_wedged(&self) -> bool {
        self.port.is_wedged()
    }

    /// Room in the quarantine for `n` host pins of a request, taken before it pins anything: keeping a
    /// pin must not need an allocation that can fail, since a pin can be neither forgotten (a cached
    /// pin's mmu notifier has its ops in module text, which rmmod would free) nor unpinned while a wedged
    /// engine may still write it.
    pub(crate) fn quarantine_room(&self, n: usize) -> Result<QuarantineRoom<'_>> {
        let mut q = locked_with_room(
            &self.quarantine,
            |q| &mut q.pins,
            |q| q.pins.len() + q.reserved + n,
        )?;
        q.reserved += n;
        Ok(QuarantineRoom { card: self, n })
    }

    /// Keeps a request's host pin until unbind, in a slot of its `room`: its engine was not shown idle
    /// (see `wedge`).
    pub(crate) fn quarantine(&self, room: &mut QuarantineRoom<'_>, mut pin: HostPin) {
        if let HostPin::Once(p) = &mut pin {
            p.quarantined();
        }
        let mut q = self.quarantine.lock();
        if room.n > 0 {
            room.n -= 1;
            q.reserved -= 1;
        }
        // `pins` has room for `len + reserved` (`quarantine_room`), and this pin's slot was in `reserved`.
        if let Err(e) = q.pins.push_within_capacity(pin) {
            drop(q);
            // Only a request that kept more pins than it took room for gets here. Bus mastering is off
            // (`wedge`): unpinning is the lesser harm than forgetting a pin whose notifier outlives us.
            dev_err!(
                self.dev(),
                "quarantine full: unpinning a wedged request's pages\n"
            );
            drop(e);
        }
    }

    /// Records a GPU surface mapped for this device (the caller holds an `Active`). The list grows
    /// outside its lock: the surface's free callback takes it, and reclaim may run that callback on
    /// this very thread from inside an allocation (`docs/nvidia-p2p.md`).
    pub(crate) fn add_surface(&self, s: Arc<Surface>) -> Result {
        let mut list = locked_with_room(&self.surfaces, |v| v, |v| v.len() + 1)?;
        list.push_within_capacity(s).map_err(|_| ENOMEM)
    }

    /// Counts removal's wait for a surface's free callback while the returned value lives.
    pub(crate) fn await_callback(&self) -> Awaited<'_> {
        self.callbacks_awaited.fetch_add(1, Ordering::Relaxed);
        Awaited(&self.callbacks_awaited)
    }

    /// The debugfs `state` file (bring-up, bench): what this card holds for DMA and why removal may wait.
    pub(crate) fn write_state(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "gone {}", u8::from(self.is_gone()))?;
        writeln!(f, "wedged {}", u8::from(self.is_wedged()))?;
        {
            let surfaces = self.surfaces.lock();
            writeln!(f, "surfaces {}", surfaces.len())?;
            for s in surfaces.iter() {
                s.describe(f)?;
            }
        }
        writeln!(
            f,
            "callbacks_awaited {}",
            self.callbacks_awaited.load(Ordering::Relaxed)
        )?;
        let (files, buffers) = {
            let caches = self.caches.lock();
            let buffers: u32 = caches
                .iter()
                .map(|c| c.control(crate::cache_policy::Op::Query).entries)
                .sum();
            (caches.len(), buffers)
        };
        writeln!(f, "caches {files} cached_buffers {buffers}")?;
        writeln!(f, "quarantined_pins {}", self.quarantine.lock().pins.len())
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

    /// A surface on pages `[first, end)` of address space `mm` or on pages `frames` whose free callback has
    /// begun and whose pin is not freed yet (still mapped, maybe).
    pub(crate) fn dying_surface(
        &self,
        mm: usize,
        first: u64,
        end: u64,
        frames: &[u64],
    ) -> Option<Arc<Surface>> {
        self.surfaces
            .lock()
            .iter()
            .find(|s| s.dying(mm, first, end, frames))
            .cloned()
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
    /// Returns once no buffer on `frames` is mapped any more (except those a running request holds): those
    /// dropped here and those dropped earlier whose release is still going on, in every file's cache.
    pub(crate) fn evict_cached(&self, mm: usize, first: u64, end: u64, frames: &[u64]) -> Result {
        let mut caches = KVec::new();
        for c in self.caches.lock().iter() {
            c.evict_pages(mm, first, end, frames);
            caches.push(c.clone(), GFP_KERNEL)?;
        }
        // Outside the list's lock: a closing file takes it to forget its cache.
        for c in caches.iter() {
            c.wait_released(frames);
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
        self.port.close();
        if self.quiesce().is_err() {
            // Tables and pages are released below: the device must not master the bus any more.
            self.port.wedge();
        }
        self.h2c.wake();
        self.c2h.wake();
        self.port.drain();
        // Quarantined pins (`wedge`): the engines were stopped again above and bus mastering is off.
        let quarantined = core::mem::take(&mut self.quarantine.lock().pins);
        drop(quarantined);
        self.h2c.release_table();
        self.c2h.release_table();
        self.ram.release_zeros();
        // Unmap outside the lock: a surface's free callback takes it too.
        let surfaces = core::mem::take(&mut *self.surfaces.lock());
        for s in surfaces.iter() {
            s.detach();
        }
        for c in self.caches.lock().iter() {
            c.close();
        }
    }

    /// Admits a transfer through the file whose membership is `member` to the card RAM (`Ram::begin`);
    /// the caller holds the gate (`begin`).
    pub(crate) fn ram_begin(&self, member: &Mutex<Member>) -> Result<RamUse<'_>> {
        self.ram.begin(member, &|segs, len| self.scrub(segs, len))
    }

    /// IOC_RAM_OWNER (`Ram::control`); a claim may scrub, so it holds the gate.
    pub(crate) fn ram_control(&self, member: &Mutex<Member>, op: Op) -> Result<u32> {
        let _active = match op {
            Op::Claim => Some(self.begin()?),
            Op::Query | Op::Release => None,
        };
        self.ram
            .control(member, op, &|segs, len| self.scrub(segs, len))
    }

    /// The file closes: the RAM is free once its owner's last file is closed.
    pub(crate) fn ram_close(&self, member: &Mutex<Member>) {
        self.ram.close(member);
    }

    /// The scrub's H2C of zeros (`ram.rs`).
    fn scrub(&self, segs: &[Segment], len: u64) -> Result {
        self.one_way(Dir::H2c, segs, 0, len).map(|_| ())
    }

    pub(crate) fn dev(&self) -> &Device {
        self.port.dev()
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
        let r = self.port.regs()?;
        for (target, name) in [
            (xdma::TARGET_H2C, "H2C0"),
            (xdma::TARGET_C2H, "C2H0"),
            (xdma::TARGET_IRQ, "IRQ"),
            (xdma::TARGET_CONFIG, "config"),
            (xdma::TARGET_H2C_SGDMA, "H2C0 SGDMA"),
            (xdma::TARGET_C2H_SGDMA, "C2H0 SGDMA"),
        ] {
            let id = r.read32(xdma::block(target, 0))?;
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
        let id = IdBlock::new(&*self.user_regs()?).identity()?;
        Ok(Identity {
            id_block: id.is_some(),
            design_version: id.map_or(0, |i| i.design_version),
            build_hash: id.map_or(0, |i| i.build_hash),
        })
    }

    /// Puts both engines and the IRQ block into a known idle state (a previous driver may have left them
    /// running) and routes both channels to vector 0: the design has one MSI vector.
    pub(crate) fn quiesce(&self) -> Result {
        for e in [&self.h2c, &self.c2h] {
            if !e.stop(&self.port) {
                return Err(EIO);
            }
        }
        IrqRegs::new(&*self.port.regs()?).reset()
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

    /// IOC_ABI_INFO, read from the card now: its health check (the agent's) must see a card that stopped
    /// answering. A config block that reads all ones fails with ENODEV (gone, confirmed by `vanished`) or
    /// EIO; a gdr design's ID block is read again, so one that changed or vanished shows.
    pub(crate) fn abi_info(&self) -> Result<abi::AbiInfo> {
        let _active = self.begin()?;
        let config = self
            .port
            .regs()?
            .read32(xdma::block(xdma::TARGET_CONFIG, 0))?;
        if config == u32::MAX {
            return Err(if self.port.vanished() { ENODEV } else { EIO });
        }
        let caps = self.caps.load(Ordering::Acquire);
        let (mut design_version, mut build_hash) = (0, 0);
        if caps & abi::CAP_ID_BLOCK != 0 {
            let id = IdBlock::new(&*self.user_regs()?).identity()?.ok_or(EIO)?;
            (design_version, build_hash) = (id.design_version, id.build_hash);
        }
        Ok(abi::AbiInfo {
            abi_version: abi::ABI_VERSION,
            card_index: self.index,
            caps,
            fpga_ram_size: self.ram_size,
            design_version,
            build_hash,
            reserved: [0; 4],
        })
    }

    pub(crate) fn set_leds(&self, value: u32) -> Result {
        Leds::new(&*self.user_regs()?).set(value)
    }

    /// H2C or C2H between host memory (`segs`) and FPGA RAM. Returns the DMA time in ns.
    pub(crate) fn one_way(&self, dir: Dir, segs: &[Segment], fpga: u64, len: u64) -> Result<u64> {
        let engine = self.engine(dir);
        let mut table = engine.lock()?;
        let t0 = Instant::<Monotonic>::now();
        engine.transfer(&self.port, &mut table, &mut Cursor::new(segs), fpga, len)?;
        Ok(t0.elapsed().as_nanos() as u64)
    }

    /// Host memory -> FPGA RAM -> host memory, as a full-duplex pipeline (`duplex.rs`). Returns the DMA
    /// time in ns.
    pub(crate) fn round_trip(&self, src: &[Segment], dst: &[Segment], len: u64) -> Result<u64> {
        let (mut src_cur, mut dst_cur) = (Cursor::new(src), Cursor::new(dst));
        // Both engines, always H2C first: the lock order every path uses.
        let mut h2c_table = self.h2c.lock()?;
        let mut c2h_table = self.c2h.lock()?;
        let t0 = Instant::<Monotonic>::now();
        crate::duplex::round_trip(
            Engines {
                h2c: &self.h2c,
                c2h: &self.c2h,
                port: &self.port,
                ram_size: self.ram_size,
            },
            &mut h2c_table,
            &mut c2h_table,
            &mut src_cur,
            &mut dst_cur,
            len,
        )?;
        Ok(t0.elapsed().as_nanos() as u64)
    }
}

/// The card's debugfs `state` file in `dir` (`/sys/kernel/debug/<node>/state`), there while the returned
/// file lives: see `Card::write_state`.
pub(crate) fn state_file<'a>(
    dir: &'a debugfs::Dir,
    card: &Arc<Card>,
) -> impl PinInit<debugfs::File<Arc<Card>>, Error> + 'a {
    dir.read_callback_file(
        c_str!("state"),
        Ok::<_, Error>(card.clone()),
        &|c: &Arc<Card>, f| c.write_state(f),
    )
}

/// Host pins kept until unbind, and the slots running requests have taken for theirs.
struct Quarantine {
    pins: KVec<HostPin>,
    /// Slots of `pins`' capacity promised to `QuarantineRoom`s.
    reserved: usize,
}

/// A request's slots in the quarantine (`Card::quarantine_room`), given back when it ends.
pub(crate) struct QuarantineRoom<'a> {
    card: &'a Card,
    n: usize,
}

impl Drop for QuarantineRoom<'_> {
    fn drop(&mut self) {
        self.card.quarantine.lock().reserved -= self.n;
    }
}

/// `m` locked, with capacity in its vector `vec` for `want` items (both read under the lock). The vector
/// grows by an allocation made without the lock, since that allocation may enter reclaim, which may run
/// code that takes the lock (a provider's free callback).
fn locked_with_room<S, T>(
    m: &Mutex<S>,
    vec: fn(&mut S) -> &mut KVec<T>,
    want: impl Fn(&S) -> usize,
) -> Result<MutexGuard<'_, S>> {
    loop {
        let need = {
            let mut g = m.lock();
            let w = want(&g);
            if vec(&mut g).capacity() >= w {
                return Ok(g);
            }
            w
        };
        let mut grown = KVec::with_capacity(need, GFP_KERNEL)?;
        let mut g = m.lock();
        let w = want(&g);
        let cur = vec(&mut g);
        if cur.capacity() >= w {
            return Ok(g);
        }
        if grown.capacity() < w {
            // It grew meanwhile: allocate again, without the lock.
            continue;
        }
        for x in cur.drain_all() {
            // Cannot fail: `grown` has room for `w` items, at least as many as `cur` holds.
            let _ = grown.push_within_capacity(x);
        }
        *cur = grown;
        return Ok(g);
    }
}

/// Removal's wait for one free callback, counted in `Card::callbacks_awaited` while it lasts.
pub(crate) struct Awaited<'a>(&'a AtomicU32);

impl Drop for Awaited<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl irq::Handler for Card {
    /// Finds which engine finished (the line may be shared, the one MSI vector serves both engines), reads
    /// its status (read-to-clear, which also drops a level INTx) and wakes the waiter.
    fn handle(&self, dev: &Device<Bound>) -> IrqReturn {
        let Ok(r) = self.port.bar().access(dev) else {
            return IrqReturn::None;
        };
        // All ones: the card is gone (a shared INTx line may still be someone else's).
        let req = match IrqRegs::new(r).channel_requests() {
            Ok(req) if req != u32::MAX => req,
            _ => return IrqReturn::None,
        };
        let mut handled = IrqReturn::None;
        for e in [&self.h2c, &self.c2h] {
            if req & e.dir.irq_bit() == 0 {
                continue;
            }
            let ch = Channel::new(r, e.dir);
            // A failed read leaves no stop bit: the waiter reports the run as not ended cleanly.
            let status = ch.take_status().unwrap_or_default();
            // Off until the next run arms it again, so a stuck source cannot storm. Should this write
            // fail, the device is unmapped and raises nothing more.
            let _ = ch.irq_enable(false);
            e.signal(status.0);
            handled = IrqReturn::Handled;
        }
        handled
    }
}
