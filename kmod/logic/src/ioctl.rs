//! One ioctl on an open file, decided once for every kernel: which command it is, what is refused before
//! any user memory is touched, which checks the argument passes, which of the glue's services runs it and
//! with the card held or not, what is written back, and what a failed write-back undoes. Each glue supplies
//! only kernel services ([`Services`]: user copies, the card's hold and registers, the file's surfaces,
//! cache and RAM membership); what ABI_INFO answers is composed here from what the card and the build have.

use crate::abi;
use crate::errno::Errno;
use crate::gate;
use crate::stream_ring_run::{self, Memory};
use crate::xdma::Dir;
use crate::{cache_policy, ram_owner, request, stream_ctl};

/// What probe learnt of the card.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The N of `/dev/picoevbN`.
    pub card_index: u32,
    /// Bytes of card RAM.
    pub ram_size: u64,
    /// Its interrupt is an MSI.
    pub msi: bool,
    /// The design has the gdr ID block (the reference design has none).
    pub id_block: bool,
    /// The design has the stream block.
    pub stream: bool,
}

/// The GPU-memory provider a build pins CUDA memory through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// Jetson's nvidia_p2p (`nvidia_p2p_dma_map_pages`).
    Jetson,
    /// A dGPU's nvidia_p2p (`nvidia_p2p_get_pages` on BAR memory).
    Dgpu,
}

/// What the build and the kernel offer beside the card.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// The provider loaded now, if any: PIN_CUDA works.
    pub provider: Option<Provider>,
    /// The registration cache (IOC_REG_CACHE; the kernel has the notifiers it needs).
    pub reg_cache: bool,
    /// Host surfaces (IOC_PIN_HOST): watched pins, like the cache's (none before Linux 5.5).
    pub host_surface: bool,
    /// IOC_IMPORT_DMABUF.
    pub dmabuf: bool,
}

/// What backs a surface PIN_CUDA or PIN_HOST makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// GPU memory through the provider.
    Provider,
    /// Pinned host memory (`cuMemHostAlloc`), no provider.
    Host,
}

/// The kernel services one ioctl of one open file runs on. A service never takes the card's hold itself:
/// [`run`] brackets the calls that need it with [`Services::begin`] and [`Services::end`].
pub trait Services {
    /// The card was hot-removed: the file may only let go of what it holds.
    fn gone(&self) -> bool;
    /// Copies `buf.len()` bytes from user address `arg` (EFAULT).
    fn copy_in(&mut self, arg: usize, buf: &mut [u8]) -> Result<(), Errno>;
    /// Copies `buf` to user address `arg` (EFAULT).
    fn copy_out(&mut self, arg: usize, buf: &[u8]) -> Result<(), Errno>;
    /// Holds the card against removal (ENODEV once it is gone); paired with [`Services::end`].
    fn begin(&mut self) -> Result<(), Errno>;
    /// Lets go of the hold `begin` took.
    fn end(&mut self);
    /// What probe learnt of the card.
    fn facts(&self) -> Facts;
    /// What the build and kernel offer now. Asked only by the commands that depend on it: finding the
    /// provider takes and drops a reference to it, which the transfer path must not pay.
    fn features(&self) -> Features;
    /// Faults in the user range, holding nothing (see `gate::Services::prefault`).
    fn prefault(&mut self, addr: u64, len: u64, device_writes: bool) -> Result<(), Errno>;
    /// Held: the XDMA config block's identifier register, read now (all ones: the card does not answer).
    fn config_id(&mut self) -> Result<u32, Errno>;
    /// Whether the card left the bus (surprise removal), as opposed to answering badly.
    fn vanished(&self) -> bool;
    /// Held: the ID block read now (design version, build hash), None if it does not answer as one.
    fn identity(&mut self) -> Result<Option<(u32, u32)>, Errno>;
    /// Held: writes the LEDs' GPIO register.
    fn set_leds(&mut self, value: u32) -> Result<(), Errno>;
    /// Runs a checked transfer through the request gate; the DMA time in ns.
    fn transfer(&mut self, req: &gate::Request) -> Result<u64, Errno>;
    /// Held: pins `len` bytes at `va` as a surface of this file; its handle.
    fn pin(&mut self, backing: Backing, va: u64, len: u64) -> Result<u32, Errno>;
    /// Held: imports the window of dma-buf `fd` as a surface; its handle and placement bits.
    fn import_dmabuf(&mut self, fd: i32, offset: u64, len: u64) -> Result<(u32, u32), Errno>;
    /// Unpins surface `handle` of this file (EINVAL: unknown, or its memory already went away).
    fn unpin(&mut self, handle: u32) -> Result<(), Errno>;
    /// Runs a registration-cache operation on this file's cache; its state after.
    fn reg_cache(&mut self, op: cache_policy::Op) -> abi::RegCache;
    /// Held: runs a stream-block operation; the block's state after.
    fn stream(&mut self, op: stream_ctl::Op) -> Result<abi::Stream, Errno>;
    /// Runs a RAM-ownership operation for this file (held for a claim, whose scrub uses the engine); the
    /// state the caller sees after.
    fn ram_owner(&mut self, op: ram_owner::Op) -> Result<u32, Errno>;
    /// The bytes surface `handle` of this file can move (EINVAL: unknown, or its memory went away).
    fn surface_len(&mut self, handle: u32) -> Result<u64, Errno>;
    /// One aligned 64-bit load from user address `addr` (`get_user`; EFAULT).
    fn load_user(&mut self, addr: u64) -> Result<u64, Errno>;
    /// One aligned 64-bit store to user address `addr` (`put_user`; EFAULT).
    fn store_user(&mut self, addr: u64, v: u64) -> Result<(), Errno>;
    /// A signal is pending for the caller.
    fn interrupted(&self) -> bool;
    /// Sleeps about `us` microseconds (the caller holds nothing).
    fn sleep_us(&mut self, us: u32);
    /// An eventfd the caller names.
    type Eventfd: Eventfd;
    /// The caller's eventfd `fd`, held until the value drops (EBADF: no such descriptor; EINVAL: not an
    /// eventfd).
    fn eventfd(&mut self, fd: i32) -> Result<Self::Eventfd, Errno>;
}

/// A held eventfd; dropping it lets go of it.
pub trait Eventfd {
    /// Adds 1 to its count, waking its readers.
    fn signal(&self);
}

/// The services a stream ring runs on (`stream_ring_run`): the ioctl's own, and the ring's eventfd.
struct OnRing<'a, S: Services> {
    s: &'a mut S,
    eventfd: Option<S::Eventfd>,
}

impl<S: Services> stream_ring_run::Services for OnRing<'_, S> {
    fn transfer(&mut self, req: &gate::Request) -> Result<u64, Errno> {
        self.s.transfer(req)
    }
    fn load(&mut self, addr: u64) -> Result<u64, Errno> {
        self.s.load_user(addr)
    }
    fn store(&mut self, addr: u64, v: u64) -> Result<(), Errno> {
        self.s.store_user(addr, v)
    }
    fn interrupted(&self) -> bool {
        self.s.interrupted()
    }
    fn sleep_us(&mut self, us: u32) {
        self.s.sleep_us(us)
    }
    fn wake(&mut self) {
        if let Some(e) = &self.eventfd {
            e.signal();
        }
    }
}

/// ABI_INFO's answer for a card with `facts` whose ID block, read now, says `id` (design version, build
/// hash; None without one) on a build with `features`.
pub fn abi_info(facts: &Facts, id: Option<(u32, u32)>, features: &Features) -> abi::AbiInfo {
    // Every build enforces the RAM's ownership.
    let mut caps = abi::CAP_RAM_OWNER;
    for (on, cap) in [
        (features.host_surface, abi::CAP_HOST_SURFACE),
        (facts.msi, abi::CAP_MSI),
        (id.is_some(), abi::CAP_ID_BLOCK),
        (facts.stream, abi::CAP_STREAM),
        (features.reg_cache, abi::CAP_REG_CACHE),
        (features.dmabuf, abi::CAP_DMABUF),
        (
            features.provider == Some(Provider::Jetson),
            abi::CAP_CUDA_JETSON,
        ),
        (
            features.provider == Some(Provider::Dgpu),
            abi::CAP_CUDA_DGPU,
        ),
    ] {
        if on {
            caps |= cap;
        }
    }
    let (design_version, build_hash) = id.unwrap_or((0, 0));
    abi::AbiInfo {
        abi_version: abi::ABI_VERSION,
        card_index: facts.card_index,
        caps,
        fpga_ram_size: facts.ram_size,
        design_version,
        build_hash,
        reserved: [0; 4],
    }
}

/// Runs ioctl `cmd` with argument `arg` on the file `s` serves.
pub fn run(s: &mut impl Services, cmd: u32, arg: usize) -> Result<(), Errno> {
    // After hot removal a file only lets go of what it holds.
    if s.gone() && cmd != abi::IOC_UNPIN_CUDA {
        return Err(Errno::ENODEV);
    }
    let facts = s.facts();
    match cmd {
        abi::IOC_LED => {
            let value = request::led_value(arg)?;
            held(s, |s| s.set_leds(value))
        }
        abi::IOC_CARD_INFO => write(
            s,
            arg,
            &abi::CardInfo {
                fpga_ram_size: facts.ram_size,
            },
        ),
        abi::IOC_ABI_INFO => {
            let id = held(s, |s| live_identity(s, &facts))?;
            let features = s.features();
            write(s, arg, &abi_info(&facts, id, &features))
        }
        abi::IOC_H2C_DMA => {
            let mut a: abi::H2cDma = read(s, arg)?;
            let x = request::h2c(&a, &limits(&facts))?;
            a.dma_time_ns = s.transfer(&gate::Request::one_way(Dir::H2c, &x))?;
            write(s, arg, &a)
        }
        abi::IOC_C2H_DMA => {
            let mut a: abi::C2hDma = read(s, arg)?;
            let x = request::c2h(&a, &limits(&facts))?;
            a.dma_time_ns = s.transfer(&gate::Request::one_way(Dir::C2h, &x))?;
            write(s, arg, &a)
        }
        abi::IOC_H2C2H_DMA => {
            let mut a: abi::H2c2hDma = read(s, arg)?;
            let x = request::h2c2h(&a)?;
            a.dma_time_ns = s.transfer(&gate::Request::round_trip(&x))?;
            write(s, arg, &a)
        }
        abi::IOC_PIN_HOST if !s.features().host_surface => Err(Errno::EOPNOTSUPP),
        abi::IOC_PIN_CUDA | abi::IOC_PIN_HOST => {
            let backing = if cmd == abi::IOC_PIN_HOST {
                Backing::Host
            } else {
                Backing::Provider
            };
            let mut a: abi::PinCuda = read(s, arg)?;
            let (va, len) = request::pin_cuda(&a)?;
            // Faulted in first, holding nothing: the pin runs under the card's pin lock and the hold
            // removal drains, where a fault that never resolves (userfaultfd, FUSE) would stall every
            // PIN_CUDA of the card and its removal. Only a surface of system memory has struct pages to
            // fault in; on a dGPU's BAR it does nothing.
            s.prefault(va, len, true)?;
            a.handle = held(s, |s| s.pin(backing, va, len))?;
            write_or_unpin(s, arg, &a, a.handle)
        }
        abi::IOC_IMPORT_DMABUF if !s.features().dmabuf => Err(Errno::ENOTTY),
        abi::IOC_IMPORT_DMABUF => {
            let mut a: abi::ImportDmabuf = read(s, arg)?;
            let (fd, offset, len) = request::import_dmabuf(&a)?;
            (a.handle, a.placement) = held(s, |s| s.import_dmabuf(fd, offset, len))?;
            write_or_unpin(s, arg, &a, a.handle)
        }
        abi::IOC_UNPIN_CUDA => {
            let a: abi::UnpinCuda = read(s, arg)?;
            s.unpin(a.handle)
        }
        abi::IOC_REG_CACHE if !s.features().reg_cache => Err(Errno::ENOTTY),
        abi::IOC_REG_CACHE => {
            let a: abi::RegCache = read(s, arg)?;
            let op = cache_policy::parse(&a)?;
            let answer = s.reg_cache(op);
            write(s, arg, &answer)
        }
        // Refused before the argument is read: the design has no stream block to run it on.
        abi::IOC_STREAM if !facts.stream => Err(Errno::EOPNOTSUPP),
        abi::IOC_STREAM => {
            let a: abi::Stream = read(s, arg)?;
            let op = stream_ctl::parse(&a)?;
            let answer = held(s, |s| s.stream(op))?;
            write(s, arg, &answer)
        }
        // As STREAM: no block, nothing read. The ring runs inside this call, holding nothing between its
        // chains (`stream_ring_run`).
        abi::IOC_STREAM_RING if !facts.stream => Err(Errno::EOPNOTSUPP),
        abi::IOC_STREAM_RING => {
            let mut a: abi::StreamRing = read(s, arg)?;
            let ring = stream_ring_run::check(&a)?;
            if let Memory::Surface(handle) = ring.memory {
                if s.surface_len(handle)? < ring.bytes() {
                    return Err(Errno::EINVAL);
                }
            }
            let eventfd = ring.eventfd.map(|fd| s.eventfd(fd)).transpose()?;
            let out = stream_ring_run::run(&mut OnRing { s, eventfd }, &ring, &limits(&facts))?;
            (a.produced, a.chains, a.waits) = (out.produced, out.chains, out.waits);
            write(s, arg, &a)
        }
        abi::IOC_RAM_OWNER => {
            let mut a: abi::RamOwner = read(s, arg)?;
            let op = ram_owner::parse(&a)?;
            a.state = match op {
                ram_owner::Op::Claim => held(s, |s| s.ram_owner(op))?,
                ram_owner::Op::Query | ram_owner::Op::Release => s.ram_owner(op)?,
            };
            write(s, arg, &a)
        }
        _ => Err(Errno::ENOTTY),
    }
}

/// What a one-way transfer is checked against.
fn limits(facts: &Facts) -> request::Card {
    request::Card {
        ram: facts.ram_size,
        stream: facts.stream,
    }
}

/// Runs `f` with the card held.
fn held<S: Services, R>(s: &mut S, f: impl FnOnce(&mut S) -> Result<R, Errno>) -> Result<R, Errno> {
    s.begin()?;
    let r = f(s);
    s.end();
    r
}

/// ABI_INFO reads the card now, so a health check sees a card that stopped answering: a config block
/// reading all ones is ENODEV (gone, confirmed) or EIO; an ID block that probe found and that no longer
/// answers as one is EIO (this is not the card probe found).
fn live_identity(s: &mut impl Services, facts: &Facts) -> Result<Option<(u32, u32)>, Errno> {
    if s.config_id()? == u32::MAX {
        return Err(if s.vanished() {
            Errno::ENODEV
        } else {
            Errno::EIO
        });
    }
    if !facts.id_block {
        return Ok(None);
    }
    s.identity()?.map(Some).ok_or(Errno::EIO)
}

/// Writes a surface's argument back; if that faults, the caller never learns the handle, so nothing may
/// stay pinned under it.
fn write_or_unpin<T: Arg>(
    s: &mut impl Services,
    arg: usize,
    v: &T,
    handle: u32,
) -> Result<(), Errno> {
    write(s, arg, v).inspect_err(|_| {
        let _ = s.unpin(handle);
    })
}

/// Room for the largest argument (REG_CACHE's 104 bytes).
const ARG_MAX: usize = 128;

fn read<T: Arg>(s: &mut impl Services, arg: usize) -> Result<T, Errno> {
    let mut buf = [0u8; ARG_MAX];
    let bytes = &mut buf[..size_of::<T>()];
    s.copy_in(arg, bytes)?;
    Ok(T::decode(bytes))
}

fn write<T: Arg>(s: &mut impl Services, arg: usize, v: &T) -> Result<(), Errno> {
    let mut buf = [0u8; ARG_MAX];
    let bytes = &mut buf[..size_of::<T>()];
    v.encode(bytes);
    s.copy_out(arg, bytes)
}

/// An ioctl argument, moved to and from user memory as the bytes C lays out: each field at its
/// `offset_of!`, in native byte order. No `unsafe`: a struct is built field by field (the literal names
/// every field, so a new one fails to compile until it is listed), and padding stays zero.
trait Arg: Sized {
    fn decode(b: &[u8]) -> Self;
    fn encode(&self, b: &mut [u8]);
}

/// A field type of an argument.
trait Field: Sized {
    fn get(b: &[u8], at: usize) -> Self;
    fn put(&self, b: &mut [u8], at: usize);
}

macro_rules! int_fields {
    ($($t:ty)+) => {$(
        impl Field for $t {
            fn get(b: &[u8], at: usize) -> Self {
                let mut v = [0u8; size_of::<$t>()];
                v.copy_from_slice(&b[at..at + size_of::<$t>()]);
                <$t>::from_ne_bytes(v)
            }
            fn put(&self, b: &mut [u8], at: usize) {
                b[at..at + size_of::<$t>()].copy_from_slice(&self.to_ne_bytes());
            }
        }
    )+};
}
int_fields!(u32 i32 u64);

impl<const N: usize> Field for [u64; N] {
    fn get(b: &[u8], at: usize) -> Self {
        core::array::from_fn(|i| u64::get(b, at + 8 * i))
    }
    fn put(&self, b: &mut [u8], at: usize) {
        for (i, v) in self.iter().enumerate() {
            v.put(b, at + 8 * i);
        }
    }
}

macro_rules! args {
    ($($t:ident { $($f:ident),+ $(,)? })+) => {$(
        const _: () = assert!(size_of::<abi::$t>() <= ARG_MAX);
        impl Arg for abi::$t {
            fn decode(b: &[u8]) -> Self {
                abi::$t { $($f: Field::get(b, core::mem::offset_of!(abi::$t, $f))),+ }
            }
            fn encode(&self, b: &mut [u8]) {
                $(self.$f.put(b, core::mem::offset_of!(abi::$t, $f));)+
            }
        }
    )+};
}

args! {
    H2cDma { src, dst, len, flags, dma_time_ns }
    C2hDma { dst, src, len, flags, dma_time_ns }
    H2c2hDma { src, dst, len, flags, dma_time_ns }
    CardInfo { fpga_ram_size }
    PinCuda { va, size, handle, pad }
    UnpinCuda { handle }
    AbiInfo { abi_version, card_index, caps, fpga_ram_size, design_version, build_hash, reserved }
    RegCache {
        op, max_entries, max_bytes, entries, capacity, bytes, hits, misses, evictions, invalidations, uncached,
        reserved
    }
    RamOwner { op, state, reserved }
    ImportDmabuf { fd, flags, offset, size, handle, placement, reserved }
    Stream {
        op, enable, record_bytes, period_ticks, source_seq, source_sent, source_overruns, source_depth,
        sink_good, sink_gaps, sink_lost, sink_crc_errors, sink_bad_length, sink_expect, reserved
    }
    StreamRing {
        ring, control, slot_bytes, total, slots, chain_slots, flags, eventfd, produced, chains, waits, reserved
    }
}

#[cfg(test)]
#[path = "ioctl_tests.rs"]
mod tests;
