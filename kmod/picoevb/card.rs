// SPDX-License-Identifier: GPL-2.0

//! One PicoEVB card: its BARs, its two engines, the interrupt handler and the transfers the ioctls ask for.

use crate::abi;
use crate::book::Book;
use crate::channel::{IrqRegs, Regs32};
use crate::duplex::Engines;
use crate::engine::Engine;
use crate::gpio::Leds;
use crate::idblock::{self, IdBlock};
use crate::ids;
use crate::port::{Active, Port, UserBar};
use crate::ram::{Ram, RamUse};
use crate::ram_owner::{Member, Op};
use crate::segments::{Cursor, Segment};
use crate::xdma::{self, Dir};
use crate::{ioctl, probe, stream_ctl};
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::{
    c_str, debugfs,
    device::{Bound, Device},
    irq::{self, IrqReturn},
    pci,
    prelude::*,
    revocable::RevocableGuard,
    sync::{Arc, Mutex},
    time::{Instant, Monotonic},
};

/// What the driver learned about the card at probe.
#[derive(Clone, Copy)]
pub(crate) struct Identity {
    /// The gdr ID block was found (else: NVIDIA's reference bitstream).
    pub(crate) id_block: bool,
    pub(crate) design_version: u32,
    pub(crate) build_hash: u32,
    /// The ID block says the design has the stream block.
    pub(crate) stream: bool,
}

#[pin_data]
pub(crate) struct Card {
    /// The DMA registers and the gate: all the engines see of the card.
    #[pin]
    port: Port,
    #[pin]
    pub(crate) h2c: Engine,
    #[pin]
    pub(crate) c2h: Engine,
    pub(crate) index: u32,
    /// What the card keeps mapped beyond one request: surfaces, caches, quarantined pins.
    book: Arc<Book>,
    /// What probe found as ABI capability bits (MSI, ID block, stream block), set once (`set_identity`).
    caps: AtomicU64,
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
            port <- Port::new(
                pdev,
                pdev.iomap_region_sized::<{ ids::BAR_DMA_SIZE }>(ids::BAR_DMA, c_str!("picoevb")),
                pdev.iomap_region_sized::<{ ids::BAR_USER_SIZE }>(ids::BAR_USER, c_str!("picoevb")),
            ),
            h2c <- Engine::new(dev, Dir::H2c)?,
            c2h <- Engine::new(dev, Dir::C2h)?,
            index,
            book: Book::new()?,
            caps: AtomicU64::new(0),
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

    /// What probe learnt of the card (`set_identity`), for the ioctls.
    pub(crate) fn facts(&self) -> ioctl::Facts {
        let caps = self.caps.load(Ordering::Acquire);
        ioctl::Facts {
            card_index: self.index,
            ram_size: self.ram.size(),
            msi: caps & abi::CAP_MSI != 0,
            id_block: caps & abi::CAP_ID_BLOCK != 0,
            stream: caps & abi::CAP_STREAM != 0,
        }
    }

    /// IOC_STREAM on the card's stream block; the caller holds the gate and checked the design has one.
    pub(crate) fn stream_control(&self, op: stream_ctl::Op) -> Result<abi::Stream> {
        stream_ctl::control(&*self.user_regs()?, op).map_err(|e| match e {
            stream_ctl::Refused::Invalid => EINVAL,
            stream_ctl::Refused::Access(e) => e,
        })
    }

    /// The XDMA config block's identifier, read now (all ones: the card does not answer); the caller holds
    /// the gate.
    pub(crate) fn config_id(&self) -> Result<u32> {
        self.port
            .regs()?
            .read32(xdma::block(xdma::TARGET_CONFIG, 0))
    }

    /// Whether the card left the bus, as opposed to answering badly.
    pub(crate) fn vanished(&self) -> bool {
        self.port.vanished()
    }

    /// The ID block read now (design version, build hash), None if it does not answer as one; the caller
    /// holds the gate.
    pub(crate) fn identity(&self) -> Result<Option<(u32, u32)>> {
        Ok(IdBlock::new(&*self.user_regs()?)
            .identity()?
            .map(|i| (i.design_version, i.build_hash)))
    }

    /// The books of what the card keeps mapped beyond one request (`book.rs`).
    pub(crate) fn book(&self) -> &Arc<Book> {
        &self.book
    }

    /// The debugfs `state` file (bring-up, bench): what this card holds for DMA and why removal may wait.
    pub(crate) fn write_state(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "gone {}", u8::from(self.is_gone()))?;
        writeln!(f, "wedged {}", u8::from(self.is_wedged()))?;
        self.book.write_state(f)
    }

    /// Hot removal or unbind, while the BARs are still mapped: new requests fail with ENODEV, the engines
    /// stop, waiting requests wake with ENODEV, and once none is left, everything this device had mapped
    /// for DMA (descriptor tables, GPU surfaces, cached host buffers) is released. Open files stay valid and fail with ENODEV.
    pub(crate) fn remove(&self) {
        crate::removal::remove(&mut Removal(self));
    }

    /// Admits a transfer through the file whose membership is `member` to the card RAM (`Ram::begin`);
    /// the caller holds the gate (`begin`).
    pub(crate) fn ram_begin(&self, member: &Mutex<Member>) -> Result<RamUse<'_>> {
        self.ram.begin(member, &|segs, len| self.scrub(segs, len))
    }

    /// IOC_RAM_OWNER (`Ram::control`); the caller holds the gate for a claim, which may scrub.
    pub(crate) fn ram_control(&self, member: &Mutex<Member>, op: Op) -> Result<u32> {
        self.ram
            .control(member, op, &|segs, len| self.scrub(segs, len))
    }

    /// The file closes: the RAM is free once its owner's last file is closed.
    pub(crate) fn ram_close(&self, member: &Mutex<Member>) {
        self.ram.close(member);
    }

    /// The scrub's H2C of zeros (`ram.rs`).
    fn scrub(&self, segs: &[Segment], len: u64) -> Result {
        self.one_way(Dir::H2c, &mut Cursor::new(segs), 0, len, false)
            .map(|_| ())
    }

    pub(crate) fn dev(&self) -> &Device {
        self.port.dev()
    }

    fn user_regs(&self) -> Result<RevocableGuard<'_, UserBar>> {
        self.port.user_regs()
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
        probe::identify(&*self.port.regs()?).map_err(|e| self.refused(e))?;
        let id = IdBlock::new(&*self.user_regs()?).identity()?;
        let stream = id.is_some_and(|i| i.caps & idblock::CAP_STREAM != 0);
        // Known before `quiesce`: an engine a previous driver left reading the stream window may need the
        // source stopped to stop itself.
        self.port.set_stream(stream);
        Ok(Identity {
            id_block: id.is_some(),
            design_version: id.map_or(0, |i| i.design_version),
            build_hash: id.map_or(0, |i| i.build_hash),
            stream,
        })
    }

    /// Puts both engines and the IRQ block into a known idle state (a previous driver may have left them
    /// running) and routes both channels to vector 0: the design has one MSI vector.
    pub(crate) fn quiesce(&self) -> Result {
        probe::quiesce(
            |d| self.engine(d).stop(&self.port),
            || IrqRegs::new(&*self.port.regs()?).reset(),
        )
        .map_err(|e| self.refused(e))
    }

    /// Probe's refusal as the kernel's error, logged.
    fn refused(&self, e: probe::Refused<Error>) -> Error {
        match e {
            probe::Refused::Foreign { name, id } => {
                dev_err!(
                    self.dev(),
                    "XDMA {} block identifier {:#010x} is not an XDMA's\n",
                    name,
                    id
                );
                ENODEV
            }
            probe::Refused::Access(e) => e,
            probe::Refused::Busy => EIO,
        }
    }

    /// Records what probe found, for the ioctls (`facts`).
    pub(crate) fn set_identity(&self, id: &Identity, msi: bool) {
        let mut caps = if msi { abi::CAP_MSI } else { 0 };
        if id.id_block {
            caps |= abi::CAP_ID_BLOCK;
        }
        if id.stream {
            caps |= abi::CAP_STREAM;
        }
        self.caps.store(caps, Ordering::Release);
    }

    pub(crate) fn set_leds(&self, value: u32) -> Result {
        Leds::new(&*self.user_regs()?).set(value)
    }

    /// H2C or C2H between host memory (`host`) and FPGA RAM. Returns the DMA time in ns: the engine's by
    /// the card's clock with `card_time`, else the kernel's clock around the chains.
    pub(crate) fn one_way(
        &self,
        dir: Dir,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
        card_time: bool,
    ) -> Result<u64> {
        let engine = self.engine(dir);
        let mut table = engine.lock()?;
        let t0 = Instant::<Monotonic>::now();
        let card_ns = engine.transfer(&self.port, &mut table, host, fpga, len, card_time)?;
        Ok(if card_time {
            card_ns
        } else {
            t0.elapsed().as_nanos() as u64
        })
    }

    /// Host memory -> FPGA RAM -> host memory, as a full-duplex pipeline (`duplex.rs`). Returns the DMA
    /// time in ns.
    pub(crate) fn round_trip(
        &self,
        src: &mut Cursor<'_>,
        dst: &mut Cursor<'_>,
        len: u64,
    ) -> Result<u64> {
        // Both engines, always H2C first: the lock order every path uses.
        let mut h2c_table = self.h2c.lock()?;
        let mut c2h_table = self.c2h.lock()?;
        let t0 = Instant::<Monotonic>::now();
        crate::duplex::round_trip(
            Engines {
                h2c: &self.h2c,
                c2h: &self.c2h,
                port: &self.port,
                ram_size: self.ram.size(),
            },
            &mut h2c_table,
            &mut c2h_table,
            src,
            dst,
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

impl irq::Handler for Card {
    /// Which engines finished, their statuses and their requests turned off (`kmod/logic/src/interrupt.rs`);
    /// wakes their waiters.
    fn handle(&self, dev: &Device<Bound>) -> IrqReturn {
        let Ok(r) = self.port.bar().access(dev) else {
            return IrqReturn::None;
        };
        let Some(raised) = crate::interrupt::service(r) else {
            return IrqReturn::None;
        };
        for (e, status) in [&self.h2c, &self.c2h].into_iter().zip(raised) {
            if let Some(status) = status {
                e.signal(status);
            }
        }
        IrqReturn::Handled
    }
}

/// The kernel services of one removal (`kmod/logic/src/removal.rs` decides their order).
struct Removal<'a>(&'a Card);

impl crate::removal::Services for Removal<'_> {
    fn close(&mut self) {
        self.0.port.close();
    }
    fn quiesce(&mut self) -> bool {
        self.0.quiesce().is_ok()
    }
    fn wedge(&mut self) {
        self.0.port.wedge();
    }
    fn wake_waiters(&mut self) {
        self.0.h2c.wake();
        self.0.c2h.wake();
    }
    fn drain(&mut self) {
        self.0.port.drain();
    }
    fn release_quarantine(&mut self) {
        self.0.book.release_quarantine();
    }
    fn detach_surfaces(&mut self) {
        self.0.book.detach_surfaces();
    }
    fn close_caches(&mut self) {
        self.0.book.close_caches();
    }
    fn release_tables(&mut self) {
        self.0.h2c.release_table();
        self.0.c2h.release_table();
        self.0.ram.release_zeros();
    }
}
