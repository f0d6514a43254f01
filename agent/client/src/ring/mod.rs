//! Stream rings: the card's stream source into a ring the driver fills on its own (IOC_STREAM_RING, ABI
//! 1.6) and this process reads ([`Ring`]); a ring this process fills and the driver empties into the
//! card's stream checker ([`RingWriter`], `RING_H2C`); and a ring the driver fills in a surface, GPU memory
//! above all, read by the application's own consumer, a CUDA kernel say ([`SurfaceRing`]). One ioctl runs
//! the whole ring on a thread of its own (`driver`), and both sides follow each other through the ring's
//! counters in memory, with no system call per slot or per chain. A side that has caught up sleeps on the
//! ring's eventfd (`RING_EVENTFD`, ABI 1.7), which the driver signals once per chain and at the end; with
//! an older driver it naps instead.
//!
//! The protocol is `picoevb_logic::stream_ring`'s, the one the driver's producer runs: [`Ring`] reads a
//! slot by copying it out and then checking that the driver did not begin overwriting it meanwhile (a
//! seqlock reader); a slot the reader could not keep up with is skipped and counted, never returned torn
//! or twice.

mod driver;
mod surface;
mod writer;

use std::os::fd::OwnedFd;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_logic::stream_ring::Consumer;

use crate::Error;
use driver::{Driver, Memory};

pub use surface::SurfaceRing;
pub use writer::RingWriter;

/// What the driver does when the reader has not released the slot it would fill next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingPolicy {
    /// Wait for the reader: nothing in the ring is lost (a source that cannot wait drops records itself
    /// and counts them: `Stream::source_overruns`).
    BackPressure,
    /// Never wait: overwrite the oldest slots; the reader counts each one it lost ([`Ring::dropped`]).
    DropOldest,
}

/// A ring's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Slots in the ring, at least 2.
    pub slots: u32,
    /// Bytes per slot: a multiple of 8 (whole records, for a reader that checks them).
    pub slot_bytes: usize,
    /// Most slots one chain (one C2H) fills; 0 lets the driver choose (half the ring).
    pub chain_slots: u32,
    pub policy: RingPolicy,
    /// Slots the driver fills before it stops by itself; 0 never (until [`Ring::finish`]).
    pub total: u64,
}

/// What a ring did, from [`Ring::finish`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingSummary {
    /// Slots the driver filled, the chains it ran, and the times it found the ring full.
    pub produced: u64,
    pub chains: u64,
    pub waits: u64,
    /// Slots this reader read whole, and the slots it lost (lapped, or overwritten while it read them).
    pub read: u64,
    pub dropped: u64,
}

/// A running ring: its reader's side. Dropping it stops the driver at its next chain boundary and waits
/// for that (at most one chain, bounded by the driver's engine timeout).
pub struct Ring {
    driver: Driver,
    consumer: Consumer,
    slot_bytes: usize,
    read: u64,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("slot_bytes", &self.slot_bytes)
            .field("read", &self.read)
            .field("dropped", &self.consumer.dropped())
            .finish_non_exhaustive()
    }
}

/// Checks a ring's shape before anything is allocated; the driver checks it again.
fn check(c: &RingConfig) -> Result<usize, Error> {
    let bad = |m: &str| Err(Error::InvalidArgument(m.into()));
    if c.slots < 2 {
        return bad("a ring needs at least 2 slots");
    }
    if c.slot_bytes == 0 || !c.slot_bytes.is_multiple_of(abi::STREAM_ALIGN as usize) {
        return bad("slot_bytes must be a nonzero multiple of 8");
    }
    match (c.slots as usize).checked_mul(c.slot_bytes) {
        Some(len) if len <= 1 << 30 => Ok(len),
        _ => bad("a ring of more than 1 GiB"),
    }
}

/// IOC_STREAM_RING's argument for `config` at `ring` (a user address, or a handle with `RING_CUDA` in
/// `flags`); the driver's thread fills in the control block and the eventfd.
fn ring_arg(config: &RingConfig, ring: u64, flags: u32) -> abi::StreamRing {
    abi::StreamRing {
        ring,
        slot_bytes: config.slot_bytes as u64,
        total: config.total,
        slots: config.slots,
        chain_slots: config.chain_slots,
        flags: flags
            | match config.policy {
                RingPolicy::BackPressure => 0,
                RingPolicy::DropOldest => abi::RING_DROP_OLDEST,
            },
        ..Default::default()
    }
}

impl RingSummary {
    fn of(a: &abi::StreamRing, read: u64, dropped: u64) -> Self {
        RingSummary {
            produced: a.produced,
            chains: a.chains,
            waits: a.waits,
            read,
            dropped,
        }
    }
}

impl Ring {
    /// Starts the driver filling a ring of `config`'s shape from the stream source of the card `fd` is
    /// open on (a duplicate of it, owned by the driver's thread). The source's settings are the caller's
    /// (`Device::stream_control`). With `wake` (a driver of ABI 1.7 or later) the reader sleeps on the
    /// ring's eventfd once it has caught up.
    pub(crate) fn start(fd: OwnedFd, config: RingConfig, wake: bool) -> Result<Ring, Error> {
        let len = check(&config)?;
        let mem = Memory::new(len)?;
        let arg = ring_arg(&config, mem.slots() as u64, 0);
        let driver = Driver::start(fd, arg, mem, wake)?;
        Ok(Ring {
            driver,
            consumer: Consumer::new(u64::from(config.slots)),
            slot_bytes: config.slot_bytes,
            read: 0,
        })
    }

    /// Bytes per slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Slots lost so far (lapped by a drop-oldest driver, or overwritten while being read).
    pub fn dropped(&self) -> u64 {
        self.consumer.dropped()
    }

    /// Slots read whole so far.
    pub fn read(&self) -> u64 {
        self.read
    }

    /// Copies the next whole slot into `out` (exactly `slot_bytes` long) and returns its number (slots
    /// since the start). `Ok(None)`: no slot is ready now, or the ring has ended and every slot was read;
    /// then [`Ring::ended`] says which. A driver that ended with an error (ENODEV: the card went; EINVAL:
    /// the ring's memory went; EINTR) is that error, once every slot before it was read.
    pub fn try_next(&mut self, out: &mut [u8]) -> Result<Option<u64>, Error> {
        if out.len() != self.slot_bytes {
            return Err(Error::InvalidArgument(format!(
                "a slot is {} bytes, not {}",
                self.slot_bytes,
                out.len()
            )));
        }
        let c = self.driver.mem().control();
        loop {
            // Checked before `produced` is loaded: once the driver has ended, this load sees its last
            // slot.
            let finished = self.driver.ended();
            let Some(slot) = self.consumer.next(c.produced.load(Ordering::Acquire)) else {
                if finished {
                    self.driver.join()?;
                }
                return Ok(None);
            };
            let at = slot.index as usize * self.slot_bytes;
            for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
                // SAFETY: the slot lies inside the live mapping (index < slots, slot_bytes a multiple of
                // 8, the slots page-aligned); the device may be writing it, so it is read volatile, never
                // through a reference, and a torn copy is discarded below.
                let w = unsafe {
                    self.driver
                        .mem()
                        .slots()
                        .add(at + 8 * i)
                        .cast::<u64>()
                        .read_volatile()
                };
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
            // The copy's loads before the load of `writing` (a seqlock reader's fence): a copy that saw
            // bytes of a chain sees that chain's `writing`, which the driver stored before starting it.
            fence(Ordering::Acquire);
            let (good, released) = self.consumer.done(slot, c.writing.load(Ordering::Relaxed));
            c.consumed.store(released, Ordering::Release);
            if good {
                self.read += 1;
                return Ok(Some(slot.n));
            }
        }
    }

    /// [`Ring::try_next`], waiting up to `timeout` for a slot: asleep on the ring's eventfd until the
    /// driver's next chain or the ring's end (with an older driver: spinning briefly, then napping 50 µs at
    /// a time). `Ok(None)` at the timeout or once the ring has ended.
    pub fn next(&mut self, out: &mut [u8], timeout: Duration) -> Result<Option<u64>, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(n) = self.try_next(out)? {
                return Ok(Some(n));
            }
            let now = Instant::now();
            if self.ended() || now >= deadline {
                return Ok(None);
            }
            self.driver.sleep(deadline - now)?;
        }
    }

    /// Whether the reader sleeps on the ring's eventfd (the driver has ABI 1.7).
    pub fn sleeps(&self) -> bool {
        self.driver.sleeps()
    }

    /// Whether the driver's call has returned (its `total` filled, stopped, or failed) and every slot it
    /// published was read (or counted as dropped).
    pub fn ended(&self) -> bool {
        self.driver.joined()
    }

    /// Stops the driver at its next chain boundary, waits for it, and says what the ring did; the driver's
    /// error if it ended with one.
    pub fn finish(mut self) -> Result<RingSummary, Error> {
        let a = self.driver.finish()?;
        Ok(RingSummary::of(&a, self.read, self.consumer.dropped()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> RingConfig {
        RingConfig {
            slots: 8,
            slot_bytes: 4096,
            chain_slots: 0,
            policy: RingPolicy::DropOldest,
            total: 0,
        }
    }

    #[test]
    fn bad_shapes_are_refused_before_anything_starts() {
        for (c, what) in [
            (
                RingConfig {
                    slots: 1,
                    ..config()
                },
                "2 slots",
            ),
            (
                RingConfig {
                    slot_bytes: 0,
                    ..config()
                },
                "multiple of 8",
            ),
            (
                RingConfig {
                    slot_bytes: 12,
                    ..config()
                },
                "multiple of 8",
            ),
            (
                RingConfig {
                    slots: u32::MAX,
                    ..config()
                },
                "1 GiB",
            ),
        ] {
            match check(&c) {
                Err(Error::InvalidArgument(m)) => assert!(m.contains(what), "{m}"),
                other => panic!("{c:?}: {other:?}"),
            }
        }
        assert_eq!(check(&config()).unwrap(), 8 * 4096);
    }

    /// On a file that is not a card the ioctl fails: the reader gets the error once the (empty) ring
    /// ended, and `finish` returns it too; nothing hangs.
    #[test]
    fn a_driver_error_reaches_the_reader() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let mut ring = Ring::start(f.into(), config(), false).unwrap();
        let mut out = vec![0u8; 4096];
        let e = loop {
            match ring.try_next(&mut out) {
                Err(e) => break e,
                Ok(None) => std::thread::yield_now(),
                Ok(Some(n)) => panic!("slot {n} from /dev/null"),
            }
        };
        assert_eq!(e.errno(), Some(libc::ENOTTY), "{e}");
        assert!(ring.ended());
        assert!(ring.try_next(&mut [0u8; 8]).is_err(), "wrong length");
        assert_eq!(ring.finish().unwrap_err().errno(), Some(libc::ENOTTY));
    }

    /// The writer and the surface ring on a file that is not a card: the driver's error reaches them
    /// (after the writes the ring had room for), and nothing hangs; the writer refuses drop-oldest and a
    /// slot of the wrong size before anything runs.
    #[test]
    fn a_writer_and_a_surface_ring_get_the_drivers_error() {
        let null = || std::fs::File::open("/dev/null").unwrap().into();
        let bp = RingConfig {
            policy: RingPolicy::BackPressure,
            ..config()
        };
        let e = RingWriter::start(null(), config(), true).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let mut w = RingWriter::start(null(), bp, true).unwrap();
        assert!(w.try_write(&[0u8; 8]).is_err(), "wrong length");
        let slot = vec![7u8; 4096];
        let e = loop {
            match w.write(&slot, Duration::from_secs(20)) {
                Err(e) => break e,
                Ok(true) => {}
                Ok(false) => panic!("20 s without room or an end"),
            }
        };
        assert_eq!(e.errno(), Some(libc::ENOTTY), "{e}");
        assert_eq!(
            w.finish(Duration::ZERO).unwrap_err().errno(),
            Some(libc::ENOTTY)
        );

        let mut s = SurfaceRing::start(null(), crate::CudaHandle(1), bp, true).unwrap();
        let t = Instant::now();
        let e = s.wait(0, Duration::from_secs(20)).unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENOTTY), "{e}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "woken only by the timeout"
        );
        assert!(s.ended());
        assert_eq!(s.finish().unwrap_err().errno(), Some(libc::ENOTTY));
    }

    /// A reader asleep on the ring's eventfd learns of the ring's end from the producer thread (here the
    /// ioctl fails at once): `next` returns the error long before its timeout. Seen failing with the
    /// thread's signal removed (3 runs of 3: the reader slept the whole 20 s; a thread that ends before
    /// the reader's first look would pass either way).
    #[test]
    fn a_sleeping_reader_wakes_at_the_end() {
        let f = std::fs::File::open("/dev/null").unwrap();
        let mut ring = Ring::start(f.into(), config(), true).unwrap();
        assert!(ring.sleeps());
        let mut out = vec![0u8; 4096];
        let t = Instant::now();
        let e = match ring.next(&mut out, Duration::from_secs(20)) {
            Err(e) => e,
            Ok(None) => panic!("woken only by the timeout"),
            Ok(Some(n)) => panic!("slot {n} from /dev/null"),
        };
        assert_eq!(e.errno(), Some(libc::ENOTTY), "{e}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "woken only by the timeout"
        );
    }
}
