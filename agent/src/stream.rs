//! `gdrctl stream`: the card's stream source into a ring the driver fills on its own (gdr-client's
//! [`Ring`](gdr_client::Ring), IOC_STREAM_RING), read as an application would, with no system call per
//! slot; every record is checked (length, CRC, sequence) and every loss is accounted for: slots the ring
//! dropped, records the source dropped, and sequence numbers never seen, which must be exactly those. The
//! ring may instead lie in a surface ([`Mode::Surface`]: host memory pinned as a surface, read the way a
//! GPU consumer reads one), or run the other way ([`Mode::ToCard`]: records written into a ring the driver
//! empties into the card's checker, whose counters must then show every one good and in sequence). Wall
//! time on this machine; the modeled rate is the performance report's (`bench/perf.sh`).

use std::time::{Duration, Instant};

use gdr_client::{CudaHandle, Device, Error, RingConfig, RingPolicy, StreamOp};
use picoevb_regs::stream as regs;
use serde::Serialize;

/// What to stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Bytes per record (24 to 4096, a multiple of 8).
    pub record_bytes: u32,
    /// 8 ns ticks between records at the source; 0: whenever the engine asks (never a drop).
    pub period_ticks: u32,
    pub slots: u32,
    pub records_per_slot: u32,
    /// Slots per chain; 0 lets the driver choose.
    pub chain_slots: u32,
    /// Slots to read (or write).
    pub total: u64,
    pub policy: RingPolicy,
    pub mode: Mode,
}

/// Where the ring lies and which way it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The source into a ring of gdr-client's own memory, read by [`gdr_client::Ring`].
    Read,
    /// The source into host memory of ours pinned as a surface (PIN_HOST), the driver filling it through
    /// the handle ([`gdr_client::SurfaceRing`]) as it would GPU memory; read slot by slot behind
    /// `produced` and released, as a GPU consumer does. Back-pressure only.
    Surface,
    /// Records of ours into a ring the driver empties into the card's checker
    /// ([`gdr_client::RingWriter`]). Back-pressure only.
    ToCard,
}

/// What a stream did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub records: u64,
    pub bytes: u64,
    pub seconds: f64,
    /// Wall MB/s (10^6 bytes per second) of records read.
    pub mbps: f64,
    /// Records whose length or CRC was wrong.
    pub bad: u64,
    /// Sequence numbers never seen, from 0 to the last record read.
    pub missing: u64,
    /// Slots the ring dropped (drop-oldest, or overwritten while read), and records the source dropped.
    pub ring_drops: u64,
    pub source_drops: u64,
    /// Chains the driver ran, and times it waited for this reader.
    pub chains: u64,
    pub waits: u64,
}

impl Report {
    /// Whether every loss is accounted for: no bad record, and the missing sequence numbers are exactly
    /// the dropped slots' records and the source's drops.
    pub fn consistent(&self, records_per_slot: u32) -> bool {
        self.bad == 0
            && self.missing == self.ring_drops * u64::from(records_per_slot) + self.source_drops
    }
}

/// Checks a plan before anything touches the card.
pub fn check(p: &Plan) -> Result<(), String> {
    if !regs::record_bytes_valid(p.record_bytes) {
        return Err(format!(
            "record size {} is not a multiple of 8 from 24 to 4096",
            p.record_bytes
        ));
    }
    if p.slots < 2 || p.records_per_slot == 0 || p.total == 0 {
        return Err(
            "a ring needs 2 slots or more, a record per slot or more, and a slot to read".into(),
        );
    }
    let slot = u64::from(p.record_bytes) * u64::from(p.records_per_slot);
    if slot * u64::from(p.slots) > 1 << 30 {
        return Err("a ring of more than 1 GiB".into());
    }
    if p.mode != Mode::Read && p.policy != RingPolicy::BackPressure {
        return Err("a ring in a surface or towards the card runs with back-pressure only".into());
    }
    Ok(())
}

/// Restarts the card's stream source with the plan's settings, streams `total` slots and turns the source
/// off again (or, [`Mode::ToCard`], clears the checker, writes `total` slots and reads its counters). The
/// stream block is the card's: another holder streaming at the same time takes records.
pub fn run(dev: &Device, p: &Plan) -> Result<Report, Error> {
    check(p).map_err(Error::InvalidArgument)?;
    if p.mode == Mode::ToCard {
        return write(dev, p);
    }
    let set = |enable| StreamOp::Set {
        enable,
        record_bytes: p.record_bytes,
        period_ticks: p.period_ticks,
    };
    dev.stream_control(set(false))?;
    dev.stream_control(StreamOp::ClearSource)?;
    dev.stream_control(set(true))?;
    let r = match p.mode {
        Mode::Surface => read_surface(dev, p),
        _ => read(dev, p),
    };
    let after = dev.stream_control(set(false));
    let mut report = r?;
    report.source_drops = u64::from(after?.source_overruns);
    Ok(report)
}

impl Plan {
    fn slot_bytes(&self) -> usize {
        self.record_bytes as usize * self.records_per_slot as usize
    }

    fn ring(&self) -> RingConfig {
        RingConfig {
            slots: self.slots,
            slot_bytes: self.slot_bytes(),
            chain_slots: self.chain_slots,
            policy: self.policy,
            total: self.total,
        }
    }
}

/// Checks each record of a slot read, counting the sequence numbers it skips.
struct Checker {
    record_bytes: usize,
    /// The source was cleared: its first record is number 0.
    next_seq: u32,
    report: Report,
    started: Instant,
}

impl Checker {
    fn new(p: &Plan) -> Self {
        Checker {
            record_bytes: p.record_bytes as usize,
            next_seq: 0,
            report: Report::default(),
            started: Instant::now(),
        }
    }

    fn slot(&mut self, slot: &[u8]) {
        for rec in slot.chunks(self.record_bytes) {
            match regs::check_record(rec) {
                Ok(r) => {
                    self.report.missing += u64::from(r.seq.wrapping_sub(self.next_seq));
                    self.next_seq = r.seq.wrapping_add(1);
                    self.report.records += 1;
                }
                Err(_) => self.report.bad += 1,
            }
        }
    }

    /// The report, with its time and rate.
    fn done(mut self) -> Report {
        let r = &mut self.report;
        r.seconds = self.started.elapsed().as_secs_f64();
        r.bytes = r.records * self.record_bytes as u64;
        r.mbps = r.bytes as f64 / r.seconds.max(1e-9) / 1e6;
        self.report
    }
}

fn read(dev: &Device, p: &Plan) -> Result<Report, Error> {
    let mut ring = dev.stream_ring(p.ring())?;
    let mut out = vec![0u8; p.slot_bytes()];
    let mut check = Checker::new(p);
    while ring.read() + ring.dropped() < p.total {
        if ring.next(&mut out, Duration::from_secs(10))?.is_none() {
            if ring.ended() {
                break;
            }
            return Err(Error::Timeout("no slot from the ring in 10 s".into()));
        }
        check.slot(&out);
    }
    let mut report = check.done();
    report.ring_drops = ring.dropped();
    let s = ring.finish()?;
    (report.chains, report.waits) = (s.chains, s.waits);
    Ok(report)
}

/// An anonymous mapping of ours, for a ring pinned as a surface.
struct Buffer {
    base: *mut u8,
    len: usize,
}

impl Buffer {
    fn new(len: usize) -> Result<Self, Error> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Os {
                op: "mmap",
                errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
            });
        }
        Ok(Buffer {
            base: p.cast(),
            len,
        })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the surface over it was unpinned (or its ring ended) first.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn read_surface(dev: &Device, p: &Plan) -> Result<Report, Error> {
    let slot_bytes = p.slot_bytes();
    let buf = Buffer::new(p.slots as usize * slot_bytes)?;
    let pinned = dev.pin_host_memory(buf.base as u64, buf.len as u64)?;
    let r = read_pinned(dev, p, &buf, pinned.handle());
    pinned.unpin()?;
    r
}

/// The consumer a GPU kernel would be: waits for `produced`, reads each slot below it (back-pressure: the
/// driver never writes a slot before it is released, so no slot is read torn), then releases it.
fn read_pinned(dev: &Device, p: &Plan, buf: &Buffer, h: CudaHandle) -> Result<Report, Error> {
    let slot_bytes = p.slot_bytes();
    let mut ring = dev.stream_ring_on(h, p.ring())?;
    let mut out = vec![0u8; slot_bytes];
    let mut check = Checker::new(p);
    let mut n = 0;
    while n < p.total {
        let produced = ring.wait(n, Duration::from_secs(10))?;
        if produced == n {
            if ring.ended() {
                break;
            }
            return Err(Error::Timeout(
                "no slot in the surface's ring in 10 s".into(),
            ));
        }
        while n < produced {
            let at = (n % u64::from(p.slots)) as usize * slot_bytes;
            for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
                // SAFETY: inside our live mapping (the slot index is below `slots`); the device wrote it
                // before `produced` was published (acquired by `wait`) and writes it again only after it
                // is released below; read volatile, never through a reference.
                let w = unsafe { buf.base.add(at + 8 * i).cast::<u64>().read_volatile() };
                chunk.copy_from_slice(&w.to_ne_bytes());
            }
            check.slot(&out);
            n += 1;
            ring.release(n);
        }
    }
    let mut report = check.done();
    let s = ring.finish()?;
    (report.chains, report.waits) = (s.chains, s.waits);
    Ok(report)
}

/// Clears the checker, writes `total` slots of records numbered from 0 into a ring the driver empties into
/// it, then reads its counters: `records` are the good records it counted, `bad` its CRC and length
/// errors, `missing` the sequence numbers it found skipped; written whole and in order, every one is good.
fn write(dev: &Device, p: &Plan) -> Result<Report, Error> {
    dev.stream_control(StreamOp::ClearSink)?;
    let mut ring = dev.stream_ring_writer(p.ring())?;
    let mut slot = vec![0u8; p.slot_bytes()];
    let per = p.records_per_slot;
    let started = Instant::now();
    for n in 0..p.total {
        for (i, rec) in slot.chunks_mut(p.record_bytes as usize).enumerate() {
            regs::write_record(rec, (n * u64::from(per)) as u32 + i as u32, n);
        }
        if !ring.write(&slot, Duration::from_secs(10))? {
            return Err(Error::Timeout(format!(
                "no room in the ring for 10 s at slot {n}"
            )));
        }
    }
    let s = ring.finish(Duration::from_secs(10))?;
    let seconds = started.elapsed().as_secs_f64();
    let sink = dev.stream_control(StreamOp::Query)?;
    let records = u64::from(sink.sink_good);
    let bytes = records * u64::from(p.record_bytes);
    Ok(Report {
        records,
        bytes,
        seconds,
        mbps: bytes as f64 / seconds.max(1e-9) / 1e6,
        bad: u64::from(sink.sink_crc_errors) + u64::from(sink.sink_bad_length),
        missing: u64::from(sink.sink_lost) + (p.total * u64::from(per)).saturating_sub(records),
        ring_drops: 0,
        source_drops: 0,
        chains: s.chains,
        waits: s.waits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            record_bytes: 4096,
            period_ticks: 0,
            slots: 64,
            records_per_slot: 1,
            chain_slots: 16,
            total: 1024,
            policy: RingPolicy::BackPressure,
            mode: Mode::Read,
        }
    }

    #[test]
    fn plans_are_checked_before_the_card_is_touched() {
        assert!(check(&plan()).is_ok());
        for bad in [
            Plan {
                record_bytes: 20,
                ..plan()
            },
            Plan {
                record_bytes: 4100,
                ..plan()
            },
            Plan { slots: 1, ..plan() },
            Plan {
                records_per_slot: 0,
                ..plan()
            },
            Plan { total: 0, ..plan() },
            Plan {
                slots: 1 << 20,
                ..plan()
            },
            Plan {
                mode: Mode::Surface,
                policy: RingPolicy::DropOldest,
                ..plan()
            },
            Plan {
                mode: Mode::ToCard,
                policy: RingPolicy::DropOldest,
                ..plan()
            },
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_loss_must_be_accounted_for() {
        let r = Report {
            missing: 2 * 4 + 3,
            ring_drops: 2,
            source_drops: 3,
            ..Report::default()
        };
        assert!(r.consistent(4));
        assert!(!r.consistent(1), "a gap the drops do not explain");
        assert!(!Report { bad: 1, ..r }.consistent(4));
    }
}
