// SPDX-License-Identifier: GPL-2.0

//! One PicoEVB card: its BARs, its two engines, the interrupt handler and the transfers the ioctls ask for.

use crate::abi;
use crate::book::Book;
use crate::channel::{Channel, IrqRegs, Regs32};
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
use crate::{request, stream_ctl};
use core::fmt;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
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

    /// The card RAM's size in bytes.
    pub(crate) fn ram_size(&self) -> u64 {
        self.ram.size()
    }

    /// What a one-way transfer is checked against (`request::h2c`, `request::c2h`).
    pub(crate) fn limits(&self) -> request::Card {
        request::Card {
            ram: self.ram.size(),
            stream: self.caps.load(Ordering::Acquire) & abi::CAP_STREAM != 0,
        }
    }

    /// IOC_STREAM on the card's stream block (EOPNOTSUPP without one).
    pub(crate) fn stream_control(&self, op: stream_ctl::Op) -> Result<abi::Stream> {
        if !self.limits().stream {
            return Err(crate::errors::kerr(crate::errno::Errno::EOPNOTSUPP));
        }
        let _active = self.begin()?;
        stream_ctl::control(&*self.user_regs()?, op).map_err(|e| match e {
            stream_ctl::Refused::Invalid => EINVAL,
            stream_ctl::Refused::Access(e) => e,
        })
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
        self.port.close();
        if self.quiesce().is_err() {
            // Tables and pages are released below: the device must not master the bus any more.
            self.port.wedge();
        }
        self.h2c.wake();
        self.c2h.wake();
        self.port.drain();
        // Quarantined pins (`wedge`) included: the engines were stopped again above, or bus mastering is off.
        self.book.release();
        self.h2c.release_table();
        self.c2h.release_table();
        self.ram.release_zeros();
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
        self.one_way(Dir::H2c, &mut Cursor::new(segs), 0, len)
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
        if id.stream {
            caps |= abi::CAP_STREAM;
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
            fpga_ram_size: self.ram.size(),
            design_version,
            build_hash,
            reserved: [0; 4],
        })
    }

    pub(crate) fn set_leds(&self, value: u32) -> Result {
        Leds::new(&*self.user_regs()?).set(value)
    }

    /// H2C or C2H between host memory (`host`) and FPGA RAM. Returns the DMA time in ns.
    pub(crate) fn one_way(
        &self,
        dir: Dir,
        host: &mut Cursor<'_>,
        fpga: u64,
        len: u64,
    ) -> Result<u64> {
        let engine = self.engine(dir);
        let mut table = engine.lock()?;
        let t0 = Instant::<Monotonic>::now();
        engine.transfer(&self.port, &mut table, host, fpga, len)?;
        Ok(t0.elapsed().as_nanos() as u64)
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
