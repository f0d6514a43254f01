//! `gdr-selftest --gpu-ring [MiB]`: a CUDA kernel consuming a stream ring while it is filled, on a real GPU
//! without a card (issue 22). The ring and its control block (`picoevb_abi::RingControl`) lie in pinned
//! host memory, as a gdr-client `SurfaceRing` on PIN_HOST memory does; a CPU thread plays the driver's
//! producer with the driver's own schedule (`picoevb_logic::stream_ring::Producer`, back-pressure): it
//! publishes `writing`, writes the chain's records as the card's source does
//! (`picoevb_regs::stream::write_record`) and publishes `produced`. `ptx/ring.ptx` runs as one persistent
//! block: it waits for `produced`, checks every new slot (length, CRC-32C, end marker, payload, sequence)
//! and releases them through `consumed`, which the producer waits for when the ring is full.
//!
//! Proves, on the GPU: the protocol's consumer half (acquire of `produced`, release of `consumed`, the
//! slots read after the one and before the other) with every record whole and in sequence; the checker
//! finding planted faults exactly in a live ring; and the rate a GPU consumer sustains beside a producer
//! faster than the PicoEVB's link. Not proved: the card writing the slots (the bench's suite does that
//! with the driver's producer, and docs/bring-up.md lists what only a Jetson shows).

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use cudarc::driver::{result, sys};
use picoevb_logic::stream_ring::{Plan, Policy, Producer, SharedControl};
use picoevb_regs::stream;

use super::gpu::{Gpu, GpuError, HostBuf, cu, unavailable};
use super::gpustream::Verdict;

/// The kernel, as text (see the file's header).
pub const PTX: &str = include_str!("../../ptx/ring.ptx");

/// PCIe Gen2 x1 after 8b/10b, one direction: what a PicoEVB can stream at most.
const LINK_MBPS: f64 = 500.0;
/// 8 MiB of 4 KiB records: each thread checks one slot of a round, its loads crossing PCIe one after the
/// other, so the rate comes from many slots in flight.
const SLOTS: u32 = 2048;
/// Slots per chain (half the ring, as `bench/stream-soak.sh` runs the driver's).
const CHAIN: u64 = 1024;
const BLOCK: u32 = 1024;
/// Sequence number of slot 0: it wraps inside the run.
const FIRST: u32 = 0xffff_ff00;

/// One run's faults, planted by the producer in the records it writes.
#[derive(Clone, Copy)]
struct Faults {
    /// Slot counters of a flipped payload byte, a broken end marker and a wrong length; from `gap` on,
    /// sequence numbers three higher (three lost).
    payload: u64,
    marker: u64,
    length: u64,
    gap: u64,
}

impl Faults {
    fn for_run(total: u64) -> Self {
        Faults {
            payload: total / 4,
            marker: total / 3,
            gap: total / 2,
            length: total - 1,
        }
    }

    fn verdict(&self) -> Verdict {
        Verdict {
            bad: 2,
            bad_length: 1,
            gaps: 1,
            lost: 3,
            first_bad: Some(self.payload as u32),
        }
    }

    /// Record `c` as the producer writes it into `slot`.
    fn write(this: Option<&Self>, slot: &mut [u8], c: u64) {
        let skip = this.map_or(0, |f| if c >= f.gap { 3 } else { 0 });
        stream::write_record(slot, FIRST.wrapping_add((c + skip) as u32), c);
        let Some(f) = this else { return };
        let len = slot.len();
        if c == f.payload {
            slot[24] ^= 0x10;
        }
        if c == f.marker {
            slot[len - 1] ^= 0x01;
        }
        if c == f.length {
            slot[4..8].copy_from_slice(&(len as u32 + 8).to_le_bytes());
        }
    }
}

/// How the ring is filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Feed {
    /// By the producer while the kernel consumes.
    Live,
    /// Whole (`total` at most the ring) and published before the kernel starts: the consumer's own rate.
    Prefilled,
    /// Live, the consumer stalling [`STALL_NS`] before each round's checks: the ring fills, the producer
    /// waits, and a consumer that released slots before checking them would find them overwritten.
    Stalled,
}

/// The stalled consumer's pause per round.
const STALL_NS: u32 = 1_000_000;

/// The ring and its control block, host and device views, and the producer's threads.
struct RingMemory<'a> {
    ring_h: &'a HostBuf,
    ring: sys::CUdeviceptr,
    ctl_h: &'a SharedControl,
    ctl: sys::CUdeviceptr,
    writers: usize,
}

struct Consumer {
    f: sys::CUfunction,
    out: sys::CUdeviceptr,
    stream: sys::CUstream,
}

/// What one run measured.
struct Run {
    verdict: Verdict,
    seconds: f64,
    /// Times the producer found the ring full (the GPU behind).
    waits: u64,
}

impl Consumer {
    fn load(g: &Gpu) -> Result<Self, GpuError> {
        let f = g.load_function(PTX, "gdr_ring_consume")?;
        // SAFETY: a plain 24-byte device allocation, freed with the process.
        let out = cu("cuMemAlloc", unsafe { result::malloc_sync(24) })?;
        let stream = cu(
            "cuStreamCreate",
            result::stream::create(result::stream::StreamKind::NonBlocking),
        )?;
        Ok(Self { f, out, stream })
    }

    /// Streams `total` slots of `len` bytes through `m`'s ring, fed as `feed` says, the producer planting
    /// `faults`.
    fn run(
        &self,
        m: &RingMemory,
        len: u32,
        total: u64,
        faults: Option<&Faults>,
        feed: Feed,
    ) -> Result<Run, GpuError> {
        let (ring_h, ring, ctl_h, ctl, writers) = (m.ring_h, m.ring, m.ctl_h, m.ctl, m.writers);
        assert!(feed != Feed::Prefilled || total <= u64::from(SLOTS));
        for w in [
            &ctl_h.writing,
            &ctl_h.produced,
            &ctl_h.consumed,
            &ctl_h.stop,
            &ctl_h.waits,
        ] {
            w.store(0, Ordering::SeqCst);
        }
        let init = [0u32, 0, 0, 0, u32::MAX, 0];
        // SAFETY: `self.out` holds 24 bytes.
        cu("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(self.out, &init)
        })?;
        let mut stall = match feed {
            Feed::Stalled => STALL_NS,
            _ => 0,
        };
        let (mut r, mut c, mut s, mut l, mut t, mut f, mut o) =
            (ring, ctl, SLOTS, len, total, FIRST, self.out);
        let mut params: [*mut std::ffi::c_void; 8] = [
            (&mut r as *mut u64).cast(),
            (&mut c as *mut u64).cast(),
            (&mut s as *mut u32).cast(),
            (&mut l as *mut u32).cast(),
            (&mut t as *mut u64).cast(),
            (&mut f as *mut u32).cast(),
            (&mut stall as *mut u32).cast(),
            (&mut o as *mut u64).cast(),
        ];
        if feed == Feed::Prefilled {
            // SAFETY: the whole live ring; no kernel runs yet.
            let whole = unsafe {
                std::slice::from_raw_parts_mut(
                    ring_h.ptr.cast::<u8>(),
                    total as usize * len as usize,
                )
            };
            write_chain(whole, len as usize, 0, faults, writers);
            ctl_h.writing.store(total, Ordering::Release);
            ctl_h.produced.store(total, Ordering::Release);
        }
        let start = Instant::now();
        // SAFETY: the parameters match gdr_ring_consume's and are copied by the call; `ring` holds SLOTS
        // slots of `len` bytes and `ctl` a RingControl, both live until the stream is synchronized below.
        cu("cuLaunchKernel", unsafe {
            result::launch_kernel(
                self.f,
                (1, 1, 1),
                (BLOCK, 1, 1),
                0,
                self.stream,
                &mut params,
            )
        })?;
        let produced = match feed {
            Feed::Prefilled => Ok(0),
            _ => produce(m, len, total, faults),
        };
        // SAFETY: `self.stream` is live. Whatever the producer did, the kernel ends: it returns after 2 s
        // without progress.
        cu("cuStreamSynchronize", unsafe {
            result::stream::synchronize(self.stream)
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let waits = produced?;
        let mut out = [0u32; 6];
        // SAFETY: as above.
        cu("cuMemcpyDtoH", unsafe {
            result::memcpy_dtoh_sync(&mut out, self.out)
        })?;
        if out[5] != 0 {
            return Err(GpuError::Check(
                "the consumer saw no new slot for 2 s".into(),
            ));
        }
        let consumed = ctl_h.consumed.load(Ordering::Acquire);
        if consumed != total {
            return Err(GpuError::Check(format!(
                "the consumer released {consumed} slots of {total}"
            )));
        }
        Ok(Run {
            verdict: Verdict::from_words(out.first_chunk().expect("six words")),
            seconds,
            waits,
        })
    }
}

/// Records `first..` into `chain` (whole slots of `len` bytes), split between `writers` threads: one CPU
/// core writes records (CRC by table) more slowly than the link, which would hide the consumer's rate.
fn write_chain(chain: &mut [u8], len: usize, first: u64, faults: Option<&Faults>, writers: usize) {
    let per = chain.len().div_ceil(len).div_ceil(writers.max(1)) * len;
    std::thread::scope(|s| {
        for (i, part) in chain.chunks_mut(per).enumerate() {
            s.spawn(move || {
                let base = first + (i * per / len) as u64;
                for (k, slot) in part.chunks_exact_mut(len).enumerate() {
                    Faults::write(faults, slot, base + k as u64);
                }
            });
        }
    });
}

/// The driver's side, on this CPU: `total` slots in chains of at most [`CHAIN`], back-pressure, each
/// chain written by `m.writers` threads. Returns the times it waited for the consumer.
fn produce(m: &RingMemory, len: u32, total: u64, faults: Option<&Faults>) -> Result<u64, GpuError> {
    let (ring, ctl) = (m.ring_h, m.ctl_h);
    let mut p = Producer::new(u64::from(SLOTS), Policy::BackPressure).expect("2 slots or more");
    let mut waits = 0;
    let mut waiting: Option<Instant> = None;
    while p.produced() < total {
        let left = total - p.produced();
        match p.plan(ctl.consumed.load(Ordering::Acquire), CHAIN.min(left)) {
            Plan::Wait => {
                let since = *waiting.get_or_insert_with(|| {
                    waits += 1;
                    Instant::now()
                });
                if since.elapsed() > Duration::from_secs(5) {
                    return Err(GpuError::Check(format!(
                        "the consumer released nothing for 5 s at slot {}",
                        p.produced()
                    )));
                }
                std::hint::spin_loop();
            }
            Plan::Fill { first, count } => {
                ctl.writing.store(first + count, Ordering::Release);
                // SAFETY: the chain's slots (`first % SLOTS` up, never wrapping) lie inside the live ring
                // allocation; the consumer released them (the plan's room) and reads them again only
                // after `produced` passes them, stored below once every writer has returned.
                let chain = unsafe {
                    let at = (first % u64::from(SLOTS)) as usize * len as usize;
                    std::slice::from_raw_parts_mut(
                        ring.ptr.cast::<u8>().add(at),
                        count as usize * len as usize,
                    )
                };
                write_chain(chain, len as usize, first, faults, m.writers);
                ctl.produced.store(p.filled(count), Ordering::Release);
                waiting = None;
            }
        }
    }
    Ok(waits)
}

/// Runs the consumer over `mib` MiB of 4 KiB records (and a planted-fault run of 256-byte ones); returns
/// the report text.
pub fn run(mib: usize) -> Result<String, GpuError> {
    if let Some(why) = unavailable() {
        return Err(why.into());
    }
    let g = Gpu::new()?;
    let consumer = Consumer::load(&g)?;
    let len = stream::RECORD_BYTES_MAX;
    let ring_h = g.alloc_host(SLOTS as usize * len as usize / 4)?;
    let ring = g.device_ptr(&ring_h)?;
    // The control block in a page of its own, as SurfaceRing keeps it.
    let ctl_buf = g.alloc_host(1024)?;
    let ctl = g.device_ptr(&ctl_buf)?;
    // SAFETY: the buffer is page-aligned (cuMemHostAlloc), holds 4 KiB >= a SharedControl and lives to
    // the end of this function; this process and the GPU touch its words only as atomics / volatile.
    let ctl_h = unsafe { &*ctl_buf.ptr.cast::<SharedControl>() };
    let writers = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 8));
    let mem = RingMemory {
        ring_h: &ring_h,
        ring,
        ctl_h,
        ctl,
        writers,
    };
    let mut r = String::new();
    let _ = writeln!(
        r,
        "GPU ring consumer: {} (PTX from ptx/ring.ptx, one block of {BLOCK} threads), a ring of {SLOTS} \
         slots in pinned host memory, a CPU producer in chains of up to {CHAIN}",
        g.name
    );

    // The producer alone, into the same memory with nobody consuming: the rate it can offer.
    let alone = Instant::now();
    let n_alone = (256u64 << 20) / u64::from(len);
    // SAFETY: the whole live ring; no kernel runs.
    let whole = unsafe {
        std::slice::from_raw_parts_mut(ring_h.ptr.cast::<u8>(), SLOTS as usize * len as usize)
    };
    let mut c = 0;
    while c < n_alone {
        let count = CHAIN.min(n_alone - c);
        let at = (c % u64::from(SLOTS)) as usize * len as usize;
        write_chain(
            &mut whole[at..][..count as usize * len as usize],
            len as usize,
            c,
            None,
            writers,
        );
        c += count;
    }
    let alone_mbps = (n_alone * u64::from(len)) as f64 / alone.elapsed().as_secs_f64() / 1e6;

    // The consumer alone: a full ring published at once, five times.
    let mut fed = f64::MAX;
    for _ in 0..5 {
        let run = consumer.run(&mem, len, u64::from(SLOTS), None, Feed::Prefilled)?;
        fed = fed.min(run.seconds);
    }
    let fed_mbps = f64::from(SLOTS) * f64::from(len) / fed / 1e6;

    let total = ((mib as u64) << 20) / u64::from(len);
    let clean = consumer.run(&mem, len, total, None, Feed::Live)?;
    if clean.verdict != Verdict::CLEAN {
        return Err(GpuError::Check(format!(
            "a clean ring was judged {:?}",
            clean.verdict
        )));
    }
    let mbps = (total * u64::from(len)) as f64 / clean.seconds / 1e6;
    let _ = writeln!(
        r,
        "  {len} B records, a full ring published at once: {SLOTS} slots checked in {:.3} ms = {fed_mbps:.0} MB/s \
         = {:.1}x the link (best of 5)\n  \
         {len} B records: {total} slots in {:.3} s = {mbps:.0} MB/s = {:.1}x the link ({LINK_MBPS:.0} MB/s); \
         the producer ({writers} threads) alone writes {alone_mbps:.0} MB/s and found the ring full {} times; every record whole \
         and in sequence",
        fed * 1e3,
        fed_mbps / LINK_MBPS,
        clean.seconds,
        mbps / LINK_MBPS,
        clean.waits,
    );

    let stalled_total = (64u64 << 20) / u64::from(len);
    let stalled = consumer.run(&mem, len, stalled_total, None, Feed::Stalled)?;
    if stalled.verdict != Verdict::CLEAN || stalled.waits == 0 {
        return Err(GpuError::Check(format!(
            "a consumer stalled {} us per round: judged {:?}, the producer waited {} times",
            STALL_NS / 1000,
            stalled.verdict,
            stalled.waits
        )));
    }
    let _ = writeln!(
        r,
        "  {len} B records, the consumer stalled {} us before each round's checks: {stalled_total} slots, the \
         producer found the ring full {} times; every record whole and in sequence",
        STALL_NS / 1000,
        stalled.waits
    );

    let small = 256u32;
    let n = 64 * u64::from(SLOTS);
    let faults = Faults::for_run(n);
    let planted = consumer.run(&mem, small, n, Some(&faults), Feed::Live)?;
    if planted.verdict != faults.verdict() {
        return Err(GpuError::Check(format!(
            "planted faults judged {:?}, want {:?}",
            planted.verdict,
            faults.verdict()
        )));
    }
    let _ = writeln!(
        r,
        "  {small} B records, {n} slots with faults planted by the producer: found exactly: {:?}",
        planted.verdict
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::super::gpustream::tests::judge;
    use super::*;

    /// The faults the producer plants are the ones `verdict` announces (host-side, as the kernel judges),
    /// and a run without them is clean.
    #[test]
    fn planted_faults_are_what_the_verdict_says() {
        let (len, n) = (256u32, 1024u64);
        let f = Faults::for_run(n);
        for (faults, want) in [(None, Verdict::CLEAN), (Some(&f), f.verdict())] {
            let mut ring = vec![0u8; n as usize * len as usize];
            write_chain(&mut ring, len as usize, 0, faults, 3);
            assert_eq!(judge(&ring, len, FIRST), want);
        }
    }
}
