//! A stream ring the driver fills from the card's stream source (IOC_STREAM_RING, ABI 1.6) and this
//! process reads: one ioctl runs the whole ring on a thread of its own, and the reader polls the ring's
//! counters in memory, with no system call per slot or per chain. A reader that has caught up sleeps on
//! the ring's eventfd (`RING_EVENTFD`, ABI 1.7), which the driver signals once per chain and at the end;
//! with an older driver it naps instead.
//!
//! The protocol is `picoevb_logic::stream_ring`'s, the one the driver's producer runs: a slot is read by
//! copying it out and then checking that the driver did not begin overwriting it meanwhile (a seqlock
//! reader); a slot the reader could not keep up with is skipped and counted, never returned torn or twice.
//!
//! Soundness: the slots and the counters live in memory this module owns (an anonymous mapping and a
//! heap block) that the producer thread shares through an `Arc`, so they stay valid for as long as the
//! driver may write them (the ioctl runs on that thread and returns before the thread drops its share),
//! even if a [`Ring`] is leaked. The device writes the slots behind Rust's back: they are only ever read
//! through raw pointers with volatile loads, never through a reference.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_logic::stream_ring::{Consumer, SharedControl};

use crate::Error;

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

/// The ring's slots (an anonymous mapping, page-aligned) and its counters.
struct Memory {
    base: *mut u8,
    len: usize,
    control: SharedControl,
    /// Set by the producer thread once its ioctl returned, before it signals the eventfd: a reader woken
    /// by that signal finds the ring ended even while the thread is still returning.
    ended: AtomicBool,
}

// SAFETY: the mapping belongs to this struct alone; every access to it goes through raw pointers (volatile
// loads in `Ring::try_next`, the device's DMA), never through a reference, and the counters are atomics.
unsafe impl Send for Memory {}
// SAFETY: as above: shared access is only volatile reads of the mapping and atomic operations.
unsafe impl Sync for Memory {}

impl Memory {
    fn new(len: usize) -> Result<Self, Error> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap"));
        }
        Ok(Memory {
            base: p.cast(),
            len,
            control: SharedControl::default(),
            ended: AtomicBool::new(false),
        })
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the last share is dropped only after the producer's ioctl returned, so
        // neither the driver nor the device writes it any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A running ring: its reader's side. Dropping it stops the driver at its next chain boundary and waits
/// for that (at most one chain, bounded by the driver's engine timeout).
pub struct Ring {
    mem: Arc<Memory>,
    producer: Option<JoinHandle<Result<abi::StreamRing, Error>>>,
    /// The producer's result once joined.
    ended: Option<Result<abi::StreamRing, Error>>,
    consumer: Consumer,
    slot_bytes: usize,
    read: u64,
    /// The ring's eventfd (non-blocking), if the driver signals one. Closed only after the producer
    /// thread was joined (`Drop` joins first), so its number is never reused under the ioctl.
    wake: Option<Arc<OwnedFd>>,
}

/// A fresh non-blocking eventfd.
fn eventfd() -> Result<OwnedFd, Error> {
    // SAFETY: creates a descriptor, owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(Error::last_os("eventfd"));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds 1 to eventfd `fd`'s count (the producer thread, at the ring's end).
fn signal(fd: &OwnedFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one`; a full count (EAGAIN) already wakes every reader.
    unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

/// Sleeps until eventfd `fd` has a count or `timeout` passes, then resets the count.
fn sleep_on(fd: &OwnedFd, timeout: Duration) -> Result<(), Error> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Rounded up: a sub-millisecond rest of the timeout still sleeps.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one pollfd of ours.
    if unsafe { libc::poll(&mut p, 1, ms) } < 0 {
        let e = Error::last_os("poll the ring's eventfd");
        return if e.errno() == Some(libc::EINTR) {
            Ok(())
        } else {
            Err(e)
        };
    }
    let mut count = 0u64;
    // SAFETY: reads 8 bytes into `count`; EAGAIN (no count) is fine.
    unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
    Ok(())
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

impl Ring {
    /// Starts the driver filling a ring of `config`'s shape from the stream source of the card `fd` is
    /// open on (a duplicate of it, owned by the producer thread). The source's settings are the caller's
    /// (`Device::stream_control`). With `wake` (a driver of ABI 1.7 or later) the reader sleeps on the
    /// ring's eventfd once it has caught up.
    pub(crate) fn start(fd: OwnedFd, config: RingConfig, wake: bool) -> Result<Ring, Error> {
        let len = check(&config)?;
        let mem = Arc::new(Memory::new(len)?);
        let shared = mem.clone();
        let wake = if wake {
            Some(Arc::new(eventfd()?))
        } else {
            None
        };
        let thread_wake = wake.clone();
        let mut arg = abi::StreamRing {
            ring: mem.base as u64,
            control: std::ptr::from_ref(&mem.control) as u64,
            slot_bytes: config.slot_bytes as u64,
            total: config.total,
            slots: config.slots,
            chain_slots: config.chain_slots,
            flags: match config.policy {
                RingPolicy::BackPressure => 0,
                RingPolicy::DropOldest => abi::RING_DROP_OLDEST,
            } | if wake.is_some() { abi::RING_EVENTFD } else { 0 },
            eventfd: wake.as_ref().map_or(0, |w| w.as_raw_fd()),
            ..Default::default()
        };
        let producer = std::thread::Builder::new()
            .name("gdr-ring".into())
            .spawn(move || {
                // SAFETY: IOC_STREAM_RING with its own argument struct; the ring and the control block it
                // names are `shared`'s, which this thread keeps until the call has returned.
                let rc = unsafe {
                    libc::ioctl(
                        fd.as_raw_fd(),
                        abi::IOC_STREAM_RING as _,
                        &mut arg as *mut abi::StreamRing,
                    )
                };
                let r = if rc < 0 {
                    Err(Error::last_os("STREAM_RING"))
                } else {
                    Ok(arg)
                };
                shared.ended.store(true, Ordering::Release);
                if let Some(w) = &thread_wake {
                    signal(w);
                }
                drop(shared);
                r
            })
            .map_err(|e| Error::Os {
                op: "spawn the ring's thread",
                errno: e.raw_os_error().unwrap_or(0),
            })?;
        Ok(Ring {
            mem,
            producer: Some(producer),
            ended: None,
            consumer: Consumer::new(u64::from(config.slots)),
            slot_bytes: config.slot_bytes,
            read: 0,
            wake,
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
        let c = &self.mem.control;
        loop {
            // Checked before `produced` is loaded: once the producer has ended, this load sees its last
            // slot.
            let finished = self.mem.ended.load(Ordering::Acquire)
                || self.producer.as_ref().is_none_or(|t| t.is_finished());
            let Some(slot) = self.consumer.next(c.produced.load(Ordering::Acquire)) else {
                if finished {
                    self.join();
                    if let Some(Err(e)) = &self.ended {
                        return Err(e.clone());
                    }
                }
                return Ok(None);
            };
            let at = slot.index as usize * self.slot_bytes;
            for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
                // SAFETY: the slot lies inside the live mapping (index < slots, slot_bytes a multiple of
                // 8, the mapping page-aligned); the device may be writing it, so it is read volatile,
                // never through a reference, and a torn copy is discarded below.
                let w = unsafe { self.mem.base.add(at + 8 * i).cast::<u64>().read_volatile() };
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
        let mut spins = 0u32;
        loop {
            if let Some(n) = self.try_next(out)? {
                return Ok(Some(n));
            }
            let now = Instant::now();
            if self.ended.is_some() || now >= deadline {
                return Ok(None);
            }
            // No lost wake-up: the driver signals after it publishes, so a chain `try_next` missed left
            // a count behind, and the poll returns at once.
            if let Some(w) = &self.wake {
                sleep_on(w, deadline - now)?;
                continue;
            }
            spins += 1;
            if spins < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// Whether the reader sleeps on the ring's eventfd (the driver has ABI 1.7).
    pub fn sleeps(&self) -> bool {
        self.wake.is_some()
    }

    /// Whether the driver's producer has returned (its `total` filled, stopped, or failed).
    pub fn ended(&self) -> bool {
        self.ended.is_some()
    }

    /// Stops the driver at its next chain boundary, waits for it, and says what the ring did; the driver's
    /// error if it ended with one.
    pub fn finish(mut self) -> Result<RingSummary, Error> {
        self.stop_and_join();
        let a = self.ended.take().expect("joined")?;
        Ok(RingSummary {
            produced: a.produced,
            chains: a.chains,
            waits: a.waits,
            read: self.read,
            dropped: self.consumer.dropped(),
        })
    }

    fn stop_and_join(&mut self) {
        self.mem.control.stop.store(1, Ordering::Release);
        self.join();
    }

    fn join(&mut self) {
        if let Some(t) = self.producer.take() {
            self.ended = Some(t.join().unwrap_or_else(|_| {
                Err(Error::InvalidArgument("the ring's thread panicked".into()))
            }));
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        self.stop_and_join();
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
