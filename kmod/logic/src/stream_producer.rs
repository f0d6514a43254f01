//! The driver's own stream-ring producer (IOC_STREAM_RING): the ring protocol of [`crate::stream_ring`]
//! run inside the caller's ioctl, one C2H from the stream source per chain of slots, each chain through
//! the request gate like any transfer. The progress words live in the caller's memory (`abi::RingControl`)
//! and are stored from the ioctl's own thread, so the consumer polls them with no system call per slot
//! and no kernel object outlives the call: stop is the control's `stop` word, a signal, the card's
//! removal (a chain fails with ENODEV) or the surface's end (EINVAL); the caller's file stays open while
//! its ioctl runs. Nothing is held between chains: no card hold, no surface use, no lock.
//!
//! Ordering, as the protocol needs it:
//! - `writing` is stored before the chain's doorbell; the kernel's MMIO write orders earlier stores before
//!   it (arm64 `writel`: `dma_wmb`), so a consumer that sees a byte of the chain sees `writing` too.
//! - `produced` is stored after the chain ended and the device's bytes were handed to the CPU (the
//!   transfer's end), behind a release fence: a consumer that loads it with acquire sees the bytes.
//! - `consumed` (back-pressure) is loaded before the chain that reuses those slots, behind an acquire
//!   fence: the consumer's reads of a slot it released happen before the device overwrites it.
//!
//! Each word is moved by one aligned 64-bit user access ([`Services::load`], [`Services::store`]), never
//! by a byte copy, so the consumer never sees a torn counter.

use core::sync::atomic::{self, Ordering};

use crate::abi;
use crate::errno::Errno;
use crate::gate;
use crate::request::{self, Host, USER_ADDR_LIMIT};
use crate::stream_ring::{Plan, Policy, Producer};
use crate::xdma::Dir;

/// The first and the longest wait for a back-pressure consumer, in µs: short enough that a consumer
/// that keeps up loses no records in the source's FIFO, long enough that a stalled one costs no CPU.
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
}

/// Where the ring lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// User memory from this address.
    User(u64),
    /// A surface of the caller's file, from its offset 0.
    Surface(u32),
}

/// A checked IOC_STREAM_RING.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ring {
    pub memory: Memory,
    /// User address of the `abi::RingControl`.
    pub control: u64,
    pub slot_bytes: u64,
    pub slots: u64,
    /// Most slots per chain (at least 1, at most the ring, at most the longest transfer).
    pub chain: u64,
    /// Slots to fill; `u64::MAX` for "until stopped".
    pub total: u64,
    pub policy: Policy,
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
    if a.flags & !abi::RING_FLAGS != 0 || a.pad != 0 || a.reserved != [0; 2] {
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
    })
}

/// The C2H request that fills `count` slots from slot counter `first`.
fn chain(r: &Ring, first: u64, count: u64, card: &request::Card) -> Result<gate::Request, Errno> {
    let at = (first % r.slots) * r.slot_bytes;
    let (dst, flags, surface_at) = match r.memory {
        Memory::User(base) => (base + at, 0, 0),
        Memory::Surface(handle) => (u64::from(handle), abi::C2H_DST_CUDA, at),
    };
    let a = abi::C2hDma {
        dst,
        src: 0,
        len: count * r.slot_bytes,
        flags: flags | abi::C2H_SRC_STREAM,
        dma_time_ns: 0,
    };
    let x = request::c2h(&a, card)?;
    debug_assert!(matches!(
        (x.host, r.memory),
        (Host::User(_), Memory::User(_)) | (Host::Cuda(_), Memory::Surface(_))
    ));
    Ok(gate::Request {
        surface_at,
        ..gate::Request::one_way(Dir::C2h, &x)
    })
}

/// Runs ring `r` on a card that has the stream block (`card`) until it is done, stopped, interrupted or
/// a chain fails.
pub fn run(s: &mut impl Services, r: &Ring, card: &request::Card) -> Result<Outcome, Errno> {
    let mut p = Producer::new(r.slots, r.policy).ok_or(Errno::EINVAL)?;
    let mut out = Outcome::default();
    for word in [WRITING, PRODUCED, WAITS] {
        s.store(r.control + word, 0)?;
    }
    let (mut nap, mut waiting) = (NAP_MIN_US, false);
    while out.produced < r.total {
        if s.load(r.control + STOP)? != 0 {
            break;
        }
        if s.interrupted() {
            return Err(Errno::EINTR);
        }
        let consumed = match r.policy {
            Policy::BackPressure => s.load(r.control + CONSUMED)?,
            Policy::DropOldest => 0,
        };
        atomic::fence(Ordering::Acquire);
        match p.plan(consumed, r.chain.min(r.total - out.produced)) {
            Plan::Wait => {
                if !waiting {
                    waiting = true;
                    out.waits += 1;
                    s.store(r.control + WAITS, out.waits)?;
                }
                s.sleep_us(nap);
                nap = (nap * 2).min(NAP_MAX_US);
            }
            Plan::Fill { first, count } => {
                (nap, waiting) = (NAP_MIN_US, false);
                let req = chain(r, first, count, card)?;
                s.store(r.control + WRITING, first + count)?;
                s.transfer(&req)?;
                atomic::fence(Ordering::Release);
                out.produced = p.filled(count);
                s.store(r.control + PRODUCED, out.produced)?;
                out.chains += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "stream_producer_tests.rs"]
mod tests;
