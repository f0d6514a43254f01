//! `gdrctl stream`: the card's stream source into a ring the driver fills on its own (gdr-client's
//! [`Ring`], IOC_STREAM_RING), read as an application would, with no system call per slot; every record
//! is checked (length, CRC, sequence) and every loss is accounted for: slots the ring dropped, records the
//! source dropped, and sequence numbers never seen, which must be exactly those. Wall time on this
//! machine; the modeled rate is the performance report's (`bench/perf.sh`).

use std::time::{Duration, Instant};

use gdr_client::{Device, Error, RingConfig, RingPolicy, StreamOp};
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
    /// Slots to read.
    pub total: u64,
    pub policy: RingPolicy,
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
    Ok(())
}

/// Restarts the card's stream source with the plan's settings, streams `total` slots and turns the source
/// off again. The stream block is the card's: another holder streaming at the same time takes records.
pub fn run(dev: &Device, p: &Plan) -> Result<Report, Error> {
    check(p).map_err(Error::InvalidArgument)?;
    let set = |enable| StreamOp::Set {
        enable,
        record_bytes: p.record_bytes,
        period_ticks: p.period_ticks,
    };
    dev.stream_control(set(false))?;
    dev.stream_control(StreamOp::ClearSource)?;
    dev.stream_control(set(true))?;
    let r = read(dev, p);
    let after = dev.stream_control(set(false));
    let mut report = r?;
    report.source_drops = u64::from(after?.source_overruns);
    Ok(report)
}

fn read(dev: &Device, p: &Plan) -> Result<Report, Error> {
    let slot_bytes = p.record_bytes as usize * p.records_per_slot as usize;
    let mut ring = dev.stream_ring(RingConfig {
        slots: p.slots,
        slot_bytes,
        chain_slots: p.chain_slots,
        policy: p.policy,
        total: p.total,
    })?;
    let mut out = vec![0u8; slot_bytes];
    let mut report = Report::default();
    // The source was cleared: its first record is number 0.
    let mut next_seq: u32 = 0;
    let started = Instant::now();
    while ring.read() + ring.dropped() < p.total {
        if ring.next(&mut out, Duration::from_secs(10))?.is_none() {
            if ring.ended() {
                break;
            }
            return Err(Error::Timeout("no slot from the ring in 10 s".into()));
        }
        for rec in out.chunks(p.record_bytes as usize) {
            match regs::check_record(rec) {
                Ok(r) => {
                    report.missing += u64::from(r.seq.wrapping_sub(next_seq));
                    next_seq = r.seq.wrapping_add(1);
                    report.records += 1;
                }
                Err(_) => report.bad += 1,
            }
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    report.bytes = report.records * u64::from(p.record_bytes);
    report.mbps = report.bytes as f64 / report.seconds.max(1e-9) / 1e6;
    report.ring_drops = ring.dropped();
    let s = ring.finish()?;
    (report.chains, report.waits) = (s.chains, s.waits);
    Ok(report)
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
