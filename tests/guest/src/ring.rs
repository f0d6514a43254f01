//! The stream ring (`picoevb_logic::stream_ring`) run through the driver: a producer fills ring slots from
//! the card's stream source, one C2H per chain of slots, and publishes its counters in a control block
//! (`abi::RingControl`); the consumer (the calling thread) polls them with no syscall per slot, copies each
//! slot out, checks every record (CRC, sequence) and counts the sequence numbers it never saw. The producer
//! is the driver's own (IOC_STREAM_RING, one ioctl for the whole ring) or a thread of ours issuing one C2H
//! per chain, over the same control block and consumer; the consumer polls, or (`Setup::wake`, the driver's
//! producer only) sleeps on the ring's eventfd whenever it has caught up. Used by the suite's
//! `stream::ring_*` tests and the performance report.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_logic::stream_ring::{Consumer, Plan, Policy, Producer, SharedControl};
use picoevb_regs::stream as regs;

use crate::dev::{Device, EventFd, Mapping};

/// Who fills the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The driver, inside one IOC_STREAM_RING.
    Driver,
    /// A thread of ours, one IOC_C2H_DMA per chain.
    Thread,
}

/// One run's settings.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub slots: u64,
    /// Bytes per slot: whole records.
    pub slot_bytes: usize,
    pub record_bytes: u32,
    /// 8 ns ticks between the source's records; 0 on demand.
    pub period_ticks: u32,
    pub policy: Policy,
    /// Slots the producer fills in all.
    pub total: u64,
    /// Most slots one chain (one C2H) fills.
    pub chain: u64,
    /// An injected consumer stall: once it has read this many slots the consumer stops until the producer
    /// can go no further (it filled all `total` slots, or found the ring full and waited), then goes on.
    pub stall: Option<u64>,
    pub by: By,
    /// The driver's producer fills the ring through a PIN_HOST surface of it (`RING_CUDA`), not through
    /// its user address.
    pub surface: bool,
    /// The driver's producer signals an eventfd (`RING_EVENTFD`) and the consumer sleeps on it instead of
    /// spinning whenever it has read everything published.
    pub wake: bool,
}

/// What the consumer saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Slots read good.
    pub slots: u64,
    /// Slots the ring dropped (lapped, or overwritten while copied).
    pub ring_drops: u64,
    /// Records read good.
    pub records: u64,
    /// Sequence numbers never seen, from 0 to the last record read.
    pub missing: u64,
    /// Records whose CRC or length was wrong.
    pub bad: u64,
    /// The source's overruns over the run (STREAM QUERY).
    pub source_drops: u64,
    /// Chains the producer ran, and times it found the ring full.
    pub chains: u64,
    pub waits: u64,
    /// With `wake`: the eventfd's counts the consumer read (the driver's signals it slept through).
    pub wakes: u64,
}

/// Runs the ring once on `dev`: the source is restarted first (`Device::stream_restart`) and disabled
/// after.
pub fn run(dev: &Device, s: Setup) -> Result<Seen, String> {
    let io = |what: &str, r: std::io::Result<abi::Stream>| r.map_err(|e| format!("{what}: {e}"));
    io(
        "STREAM restart",
        dev.stream_restart(s.record_bytes, s.period_ticks),
    )?;
    let ring = Mapping::new(
        s.slots as usize * s.slot_bytes,
        libc::PROT_READ | libc::PROT_WRITE,
    )
    .map_err(|e| format!("mmap: {e}"))?;
    let base = ring.addr();
    let control = SharedControl::default();
    let wake = match (s.wake, s.by) {
        (false, _) => None,
        (true, By::Driver) => Some(EventFd::new().map_err(|e| format!("eventfd: {e}"))?),
        (true, By::Thread) => return Err("only the driver's producer signals an eventfd".into()),
    };
    let mut seen = Seen::default();
    let result = std::thread::scope(|scope| {
        let producer = scope.spawn(|| match s.by {
            By::Driver => by_driver(dev, &s, base, &control, wake.as_ref()),
            By::Thread => by_thread(dev, &s, base, &control),
        });
        let r = consume(&s, base, &control, &producer, wake.as_ref(), &mut seen);
        control.stop.store(1, Ordering::Relaxed);
        let (chains, waits) = producer
            .join()
            .map_err(|_| "the producer panicked".to_string())??;
        seen.chains = chains;
        seen.waits = waits;
        r
    });
    let after = io(
        "STREAM SET (off)",
        dev.stream(abi::STREAM_SET, false, s.record_bytes, s.period_ticks),
    )?;
    seen.source_drops = u64::from(after.source_overruns);
    drop(ring);
    result.map(|()| seen)
}

/// The driver's producer: one IOC_STREAM_RING until `total` slots or the consumer's stop.
fn by_driver(
    dev: &Device,
    s: &Setup,
    base: u64,
    control: &SharedControl,
    wake: Option<&EventFd>,
) -> Result<(u64, u64), String> {
    let bytes = s.slots * s.slot_bytes as u64;
    let handle = if s.surface {
        Some(
            dev.pin_host(base, bytes)
                .map_err(|e| format!("PIN_HOST of the ring: {e}"))?,
        )
    } else {
        None
    };
    let mut a = ring_arg(s, handle.map_or(base, u64::from), control);
    if handle.is_some() {
        a.flags |= abi::RING_CUDA;
    }
    if let Some(e) = wake {
        a.flags |= abi::RING_EVENTFD;
        a.eventfd = e.raw();
    }
    // SAFETY: the ring mapping and `control` outlive the call (the caller's scope joins this thread
    // before either goes); both are read only through raw pointers and atomics.
    let r = unsafe { dev.stream_ring_raw(&mut a) }.map_err(|e| format!("STREAM_RING: {e}"));
    if let Some(h) = handle {
        dev.unpin_cuda(h)
            .map_err(|e| format!("UNPIN of the ring: {e}"))?;
    }
    r.map(|()| (a.chains, a.waits))
}

/// IOC_STREAM_RING's argument for `s` on `ring` (a user address; the caller sets `RING_CUDA` for a handle).
pub fn ring_arg(s: &Setup, ring: u64, control: &SharedControl) -> abi::StreamRing {
    abi::StreamRing {
        ring,
        control: std::ptr::from_ref(control) as u64,
        slot_bytes: s.slot_bytes as u64,
        total: s.total,
        slots: s.slots as u32,
        chain_slots: s.chain as u32,
        flags: match s.policy {
            Policy::DropOldest => abi::RING_DROP_OLDEST,
            Policy::BackPressure => 0,
        },
        ..Default::default()
    }
}

/// Our own producer thread: one C2H per chain.
fn by_thread(dev: &Device, s: &Setup, base: u64, c: &SharedControl) -> Result<(u64, u64), String> {
    let mut p = Producer::new(s.slots, s.policy).ok_or("a ring needs 2 slots")?;
    let (mut chains, mut waits) = (0, 0);
    while p.produced() < s.total && c.stop.load(Ordering::Relaxed) == 0 {
        match p.plan(
            c.consumed.load(Ordering::Acquire),
            s.chain.min(s.total - p.produced()),
        ) {
            Plan::Wait => {
                waits += 1;
                c.waits.store(waits, Ordering::Release);
                std::thread::sleep(Duration::from_micros(50));
            }
            Plan::Fill { first, count } => {
                c.writing.store(first + count, Ordering::Release);
                let at = base + (first % s.slots) * s.slot_bytes as u64;
                let mut a = abi::C2hDma {
                    dst: at,
                    src: 0,
                    len: count * s.slot_bytes as u64,
                    flags: abi::C2H_SRC_STREAM,
                    ..Default::default()
                };
                // SAFETY: the slots lie inside the ring, which outlives this thread; no Rust reference
                // points into it (the consumer reads it through raw pointers only).
                unsafe { dev.c2h_raw(&mut a) }
                    .map_err(|e| format!("C2H of slots {first}+{count}: {e}"))?;
                c.produced.store(p.filled(count), Ordering::Release);
                chains += 1;
            }
        }
    }
    Ok((chains, waits))
}

fn consume(
    s: &Setup,
    base: u64,
    sh: &SharedControl,
    producer: &std::thread::ScopedJoinHandle<'_, Result<(u64, u64), String>>,
    wake: Option<&EventFd>,
    seen: &mut Seen,
) -> Result<(), String> {
    let mut c = Consumer::new(s.slots);
    let mut copy = vec![0u64; s.slot_bytes / 8];
    // The source was cleared before it was enabled: its first record is number 0, so a slot lapped before
    // the first read counts as missing too.
    let mut next_seq: u32 = 0;
    // How long the consumer waits for the producer's next slot: 600 s from the last slot read (a long soak
    // runs for hours).
    let mut deadline = Instant::now() + Duration::from_secs(600);
    let mut stall = s.stall;
    while c.consumed() < s.total {
        if stall.is_some_and(|after| seen.slots >= after) {
            while !producer.is_finished() && sh.waits.load(Ordering::Acquire) == 0 {
                if Instant::now() > deadline {
                    return Err("the producer neither finished nor waited in 600 s".into());
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            stall = None;
        }
        let Some(slot) = c.next(sh.produced.load(Ordering::Acquire)) else {
            if producer.is_finished() && c.next(sh.produced.load(Ordering::Acquire)).is_none() {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("no slot for 600 s at {}", c.consumed()));
            }
            match wake {
                // Sleeps until the driver's next publication (or its end): a source on demand never
                // pauses for seconds, so 10 s without a signal is one the driver never sent.
                Some(e) => match e.wait(Duration::from_secs(10)) {
                    Ok(Some(n)) => seen.wakes += n,
                    Ok(None) if producer.is_finished() => {}
                    Ok(None) => {
                        return Err(format!(
                            "asleep on the ring's eventfd for 10 s at slot {} (produced {})",
                            c.consumed(),
                            sh.produced.load(Ordering::Acquire)
                        ));
                    }
                    Err(err) => return Err(format!("the ring's eventfd: {err}")),
                },
                None => std::hint::spin_loop(),
            }
            continue;
        };
        let src = (base + slot.index * s.slot_bytes as u64) as *const u64;
        for (i, w) in copy.iter_mut().enumerate() {
            // SAFETY: the slot lies inside the live ring mapping; the device may be writing it (then the
            // copy is discarded below), so it is read volatile and never through a reference.
            *w = unsafe { src.add(i).read_volatile() };
        }
        // The copy's loads before the load of `writing` (a seqlock reader's fence): if the copy saw a chain's
        // bytes, it sees that chain's `writing`, stored before the chain was started.
        std::sync::atomic::fence(Ordering::Acquire);
        let (good, released) = c.done(slot, sh.writing.load(Ordering::Relaxed));
        sh.consumed.store(released, Ordering::Release);
        if !good {
            continue;
        }
        seen.slots += 1;
        if seen.slots.is_multiple_of(4096) {
            deadline = Instant::now() + Duration::from_secs(600);
        }
        // SAFETY: a u64 slice viewed as its bytes.
        let bytes = unsafe { std::slice::from_raw_parts(copy.as_ptr().cast::<u8>(), s.slot_bytes) };
        for r in bytes.chunks(s.record_bytes as usize) {
            match regs::check_record(r) {
                Ok(rec) => {
                    seen.missing += u64::from(rec.seq.wrapping_sub(next_seq));
                    next_seq = rec.seq.wrapping_add(1);
                    seen.records += 1;
                }
                Err(_) => seen.bad += 1,
            }
        }
    }
    seen.ring_drops = c.dropped();
    Ok(())
}
