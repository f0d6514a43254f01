//! The driver's side of a stream ring (IOC_STREAM_RING), run inside the caller's ioctl, each chain of
//! slots one transfer through the request gate like any other: the driver **fills** the ring from the
//! stream source (C2H, the ring protocol of [`crate::stream_ring`] with the driver as its producer), or
//! with `RING_H2C` **empties** it into the stream checker (H2C, the caller producing). The progress words
//! live in the caller's memory (`abi::RingControl`) and are stored from the ioctl's own thread, so the
//! other side polls them with no system call per slot and no kernel object outlives the call: stop is the
//! control's `stop` word, a signal, the card's removal (a chain fails with ENODEV) or the surface's end
//! (EINVAL); the caller's file stays open while its ioctl runs. Nothing is held between chains: no card
//! hold, no surface use, no lock.
//!
//! Ordering, as the protocol needs it. Filling:
//! - `writing` is stored before the chain's doorbell; the kernel's MMIO write orders earlier stores before
//!   it (arm64 `writel`: `dma_wmb`), so a consumer that sees a byte of the chain sees `writing` too.
//! - `produced` is stored after the chain ended and the device's bytes were handed to the CPU (the
//!   transfer's end), behind a release fence: a consumer that loads it with acquire sees the bytes.
//! - `consumed` (back-pressure) is loaded before the chain that reuses those slots, behind an acquire
//!   fence: the consumer's reads of a slot it released happen before the device overwrites it.
//!
//! Emptying: the caller's `produced` is loaded behind an acquire fence before the chain that reads those
//! slots (its writes of a slot happen before the device reads it; the chain's doorbell comes after the
//! load), and `consumed` is stored behind a release fence once the chain ended (the device read every
//! byte before the caller may write the slots again).
//!
//! Each word is moved by one aligned 64-bit user access ([`Services::load`], [`Services::store`]), never
//! by a byte copy, so the consumer never sees a torn counter.
//!
//! A side that would rather sleep than poll names an eventfd (`RING_EVENTFD`): [`Services::wake`] after
//! every store that lets it go on (`produced` filling, `consumed` emptying) and once when the ring ends,
//! whatever ended it, so a sleeper always learns of the end. Never while the driver only waits: a full
//! (or empty) ring wakes nobody.

use core::sync::atomic::{self, Ordering};

use crate::abi;
use crate::errno::Errno;
use crate::gate;
use crate::request::{self, Host, USER_ADDR_LIMIT};
use crate::stream_ring::{Plan, Policy, Producer};
use crate::xdma::Dir;

/// The first and the longest wait for the other side (a back-pressure consumer, or a producer the driver
/// empties), in µs: short enough that a side that keeps up loses no records in the source's FIFO, long
/// enough that a stalled one costs no CPU.
pub const NAP_MIN_US: u32 = 20;
pub const NAP_MAX_US: u32 = 1000;

/// What the producer runs on: the caller's file, inside its ioctl.
pub trait Services {
    /// Runs one checked transfer through the request gate (the card's hold, the ring's memory and the
    /// engine are taken and let go of inside); its DMA time.
    fn transfer(&mut self, req: &gate::Request) -> Result<u64, Errno>;
    /// One aligned 64-bit load from user address `addr` (EFAULT).
    fn load(&mut self, addr: u64) -> Result<u64, Errno>;
    /// One aligned 64-bit store to user address `addr` (EFAULT).
    fn store(&mut self, addr: u64, v: u64) -> Result<(), Errno>;
    /// A signal is pending for the caller.
    fn interrupted(&self) -> bool;
    /// Sleeps about `us` microseconds, holding nothing.
    fn sleep_us(&mut self, us: u32);
    /// Wakes the other side if it sleeps on the ring's eventfd (none: nothing).
    fn wake(&mut self);
}

/// Where the ring lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// User memory from this address.
    User(u64),
    /// A surface of the caller's file, from its offset 0.
    Surface(u32),
}

/// Which way the ring runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// The driver fills it from the stream source (C2H).
    Fill,
    /// The driver empties it into the stream checker (H2C, `RING_H2C`).
    Empty,
}

/// A checked IOC_STREAM_RING.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    pub way: Way,
    pub memory: Memory,
    /// User address of the `abi::RingControl`.
    pub control: u64,
    pub slot_bytes: u64,
    pub slots: u64,
    /// Most slots per chain (at least 1, at most the ring, at most the longest transfer).
    pub chain: u64,
    /// Slots to fill or empty; `u64::MAX` for "until stopped".
    pub total: u64,
    pub policy: Policy,
    /// The eventfd to signal (`RING_EVENTFD`), a descriptor of the caller's.
    pub eventfd: Option<i32>,
}

impl Ring {
    /// Bytes of the whole ring.
    pub fn bytes(&self) -> u64 {
        self.slots * self.slot_bytes
    }
}

/// What a ring did, written back on success.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Slots filled, or emptied into the checker.
    pub produced: u64,
    pub chains: u64,
    pub waits: u64,
}

/// Offsets of the driver's and the consumer's words in `abi::RingControl`.
const WRITING: u64 = core::mem::offset_of!(abi::RingControl, writing) as u64;
const PRODUCED: u64 = core::mem::offset_of!(abi::RingControl, produced) as u64;
const CONSUMED: u64 = core::mem::offset_of!(abi::RingControl, consumed) as u64;
const STOP: u64 = core::mem::offset_of!(abi::RingControl, stop) as u64;
const WAITS: u64 = core::mem::offset_of!(abi::RingControl, waits) as u64;
const CONTROL_BYTES: u64 = size_of::<abi::RingControl>() as u64;

/// Checks IOC_STREAM_RING's argument; nothing is touched before it passes. A surface ring's size is
/// checked against the surface by [`run`]'s caller, which knows it.
pub fn check(a: &abi::StreamRing) -> Result<Ring, Errno> {
    if a.flags & !abi::RING_FLAGS != 0 || a.reserved != [0; 2] {
        return Err(Errno::EINVAL);
    }
    let eventfd = if a.flags & abi::RING_EVENTFD != 0 {
        Some(a.eventfd)
    } else if a.eventfd != 0 {
        return Err(Errno::EINVAL);
    } else {
        None
    };
    let way = if a.flags & abi::RING_H2C != 0 {
        Way::Empty
    } else {
        Way::Fill
    };
    // Emptying always waits for the caller's slots: there is nothing older to drop.
    if way == Way::Empty && a.flags & abi::RING_DROP_OLDEST != 0 {
        return Err(Errno::EINVAL);
    }
    let (slots, slot_bytes) = (u64::from(a.slots), a.slot_bytes);
    if slots < 2 || slot_bytes == 0 || slot_bytes % abi::STREAM_ALIGN != 0 {
        return Err(Errno::EINVAL);
    }
    if slot_bytes > request::MAX_H2C2H_LEN {
        return Err(Errno::EINVAL);
    }
    let bytes = slots.checked_mul(slot_bytes).ok_or(Errno::EINVAL)?;
    let memory = if a.flags & abi::RING_CUDA != 0 {
        let handle = u32::try_from(a.ring)
            .ok()
            .filter(|h| *h <= i32::MAX as u32)
            .ok_or(Errno::EINVAL)?;
        Memory::Surface(handle)
    } else {
        match a.ring.checked_add(bytes) {
            Some(end) if end <= USER_ADDR_LIMIT => Memory::User(a.ring),
            _ => return Err(Errno::EFAULT),
        }
    };
    if a.control % 8 != 0 {
        return Err(Errno::EINVAL);
    }
    if a.control > USER_ADDR_LIMIT - CONTROL_BYTES {
        return Err(Errno::EFAULT);
    }
    // The device would overwrite the counters it is publishing.
    if let Memory::User(ring) = memory {
        if a.control < ring + bytes && ring < a.control + CONTROL_BYTES {
            return Err(Errno::EINVAL);
        }
    }
    let most = match a.chain_slots {
        0 => slots / 2,
        n => u64::from(n),
    };
    let chain = most
        .min(slots)
        .min(request::MAX_H2C2H_LEN / slot_bytes)
        .max(1);
    Ok(Ring {
        way,
        memory,
        control: a.control,
        slot_bytes,
        slots,
        chain,
        total: if a.total == 0 { u64::MAX } else { a.total },
        policy: if a.flags & abi::RING_DROP_OLDEST != 0 {
            Policy::DropOldest
        } else {
            Policy::BackPressure
        },
        eventfd,
    })
}

/// The transfer that fills (C2H from the source) or empties (H2C into the checker) `count` slots from
/// slot counter `first`.
fn chain(r: &Ring, first: u64, count: u64, card: &request::Card) -> Result<gate::Request, Errno> {
    let at = (first % r.slots) * r.slot_bytes;
    let (host, cuda, surface_at) = match r.memory {
        Memory::User(base) => (base + at, false, 0),
        Memory::Surface(handle) => (u64::from(handle), true, at),
    };
    let len = count * r.slot_bytes;
    let (dir, x) = match r.way {
        Way::Fill => {
            let a = abi::C2hDma {
                dst: host,
                src: 0,
                len,
                flags: if cuda { abi::C2H_DST_CUDA } else { 0 } | abi::C2H_SRC_STREAM,
                dma_time_ns: 0,
            };
            (Dir::C2h, request::c2h(&a, card)?)
        }
        Way::Empty => {
            let a = abi::H2cDma {
                src: host,
                dst: 0,
                len,
                flags: if cuda { abi::H2C_SRC_CUDA } else { 0 } | abi::H2C_DST_STREAM,
                dma_time_ns: 0,
            };
            (Dir::H2c, request::h2c(&a, card)?)
        }
    };
    debug_assert!(matches!(
        (x.host, r.memory),
        (Host::User(_), Memory::User(_)) | (Host::Cuda(_), Memory::Surface(_))
    ));
    Ok(gate::Request {
        surface_at,
        ..gate::Request::one_way(dir, &x)
    })
}

/// Runs ring `r` on a card that has the stream block (`card`) until it is done, stopped, interrupted or
/// a chain fails; then wakes a sleeper, which finds the ring's end.
pub fn run(s: &mut impl Services, r: &Ring, card: &request::Card) -> Result<Outcome, Errno> {
    let out = match r.way {
        Way::Fill => fill(s, r, card),
        Way::Empty => empty(s, r, card),
    };
    s.wake();
    out
}

/// Stop asked for (Ok(true)) or a signal pending (EINTR): checked at every chain boundary and nap.
fn should_stop(s: &mut impl Services, r: &Ring) -> Result<bool, Errno> {
    if s.load(r.control + STOP)? != 0 {
        return Ok(true);
    }
    if s.interrupted() {
        return Err(Errno::EINTR);
    }
    Ok(false)
}

/// The back-pressure waits: an episode counted once, naps doubling from the shortest to the longest.
struct Naps {
    us: u32,
    waiting: bool,
}

impl Naps {
    fn new() -> Self {
        Naps {
            us: NAP_MIN_US,
            waiting: false,
        }
    }

    /// One nap; a new episode is counted in `out.waits` and published first.
    fn nap(&mut self, s: &mut impl Services, r: &Ring, out: &mut Outcome) -> Result<(), Errno> {
        if !self.waiting {
            self.waiting = true;
            out.waits += 1;
            s.store(r.control + WAITS, out.waits)?;
        }
        s.sleep_us(self.us);
        self.us = (self.us * 2).min(NAP_MAX_US);
        Ok(())
    }

    fn end(&mut self) {
        *self = Naps::new();
    }
}

/// The driver fills the ring from the stream source: the `stream_ring` producer.
fn fill(s: &mut impl Services, r: &Ring, card: &request::Card) -> Result<Outcome, Errno> {
    let mut p = Producer::new(r.slots, r.policy).ok_or(Errno::EINVAL)?;
    let mut out = Outcome::default();
    for word in [WRITING, PRODUCED, WAITS] {
        s.store(r.control + word, 0)?;
    }
    let mut naps = Naps::new();
    while out.produced < r.total {
        if should_stop(s, r)? {
            break;
        }
        let consumed = match r.policy {
            Policy::BackPressure => s.load(r.control + CONSUMED)?,
            Policy::DropOldest => 0,
        };
        atomic::fence(Ordering::Acquire);
        match p.plan(consumed, r.chain.min(r.total - out.produced)) {
            Plan::Wait => naps.nap(s, r, &mut out)?,
            Plan::Fill { first, count } => {
                naps.end();
                let req = chain(r, first, count, card)?;
                s.store(r.control + WRITING, first + count)?;
                s.transfer(&req)?;
                atomic::fence(Ordering::Release);
                out.produced = p.filled(count);
                s.store(r.control + PRODUCED, out.produced)?;
                s.wake();
                out.chains += 1;
            }
        }
    }
    Ok(out)
}

/// The driver empties the ring into the stream checker: the caller produces (`produced`, its slots
/// written before it stores it with release), the driver consumes whole slots in chains and publishes
/// `consumed`, which the caller waits on before it writes a slot again. `writing` says up to where the
/// chain in flight reads. A `produced` more than a ring ahead is taken as a ring ahead: the driver never
/// reads a slot twice in one chain.
fn empty(s: &mut impl Services, r: &Ring, card: &request::Card) -> Result<Outcome, Errno> {
    let mut out = Outcome::default();
    for word in [WRITING, CONSUMED, WAITS] {
        s.store(r.control + word, 0)?;
    }
    let mut naps = Naps::new();
    while out.produced < r.total {
        if should_stop(s, r)? {
            break;
        }
        let produced = s.load(r.control + PRODUCED)?;
        atomic::fence(Ordering::Acquire);
        let first = out.produced;
        let ready = produced.saturating_sub(first).min(r.slots);
        if ready == 0 {
            naps.nap(s, r, &mut out)?;
            continue;
        }
        naps.end();
        let count = ready
            .min(r.chain)
            .min(r.slots - first % r.slots)
            .min(r.total - first);
        let req = chain(r, first, count, card)?;
        s.store(r.control + WRITING, first + count)?;
        s.transfer(&req)?;
        atomic::fence(Ordering::Release);
        out.produced = first + count;
        s.store(r.control + CONSUMED, out.produced)?;
        s.wake();
        out.chains += 1;
    }
    Ok(out)
}

#[cfg(test)]
#[path = "stream_ring_run_tests.rs"]
mod tests;
