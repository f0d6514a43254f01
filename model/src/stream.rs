//! The gdr stream block (`picoevb_regs::stream`, `fpga-bitstream/rtl/gdr_stream.v`): a record source the C2H
//! engine reads through the DMA window and a checker the H2C engine writes.
//!
//! Time is passed in by the caller, in nanoseconds: the modeled clock in timing mode (the software clock for
//! register accesses, the engine's modeled time for DMA), the model's wall clock otherwise. So the source
//! produces at its configured rate in whichever time the model keeps, and an overrun counts exactly the
//! records a reader was too late for. Production is computed lazily when the block is next touched, with
//! the records dropped on a full FIFO counted arithmetically, so hours of modeled time cost nothing.
//!
//! Where the RTL and the model differ: the RTL stamps a record in the cycle it enters the FIFO; the model
//! stamps it at the instant it was due. Both give PERIOD-spaced timestamps for a periodic source.

use std::collections::VecDeque;
use std::time::Instant;

use picoevb_regs::stream::{self as regs, TICK_NS};

/// The source: production, FIFO, read-out.
#[derive(Clone, Debug)]
pub struct Source {
    enabled: bool,
    record_bytes: u32,
    period_ticks: u32,
    seq: u32,
    sent: u32,
    overrun: u32,
    /// (sequence, timestamp in ticks) of records produced and not yet started.
    fifo: VecDeque<(u32, u64)>,
    /// The record being read out, and how much of it has gone.
    current: Option<(Vec<u8>, usize)>,
    /// Time zero of the timestamps (reset or CLEAR).
    zero_ns: u64,
    /// When the next record is due (enabled, PERIOD > 0).
    next_due_ns: u64,
}

impl Default for Source {
    fn default() -> Self {
        Self {
            enabled: false,
            record_bytes: regs::RECORD_BYTES_RESET,
            period_ticks: 0,
            seq: 0,
            sent: 0,
            overrun: 0,
            fifo: VecDeque::new(),
            current: None,
            zero_ns: 0,
            next_due_ns: 0,
        }
    }
}

/// What [`Source::fill`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    /// Bytes filled from the front of the buffer.
    pub bytes: usize,
    /// Filled short: no record is ready; the next is due at this time (ns).
    pub wait_until: Option<u64>,
}

impl Source {
    fn period_ns(&self) -> u64 {
        u64::from(self.period_ticks) * TICK_NS
    }

    fn depth() -> usize {
        regs::FIFO_DEPTH as usize
    }

    fn produce(&mut self, at_ns: u64) {
        if self.fifo.len() < Self::depth() {
            let ts = at_ns.saturating_sub(self.zero_ns) / TICK_NS;
            self.fifo.push_back((self.seq, ts));
        } else {
            self.overrun = self.overrun.wrapping_add(1);
        }
        self.seq = self.seq.wrapping_add(1);
    }

    /// Produces every record due up to `now`.
    pub fn advance(&mut self, now: u64) {
        if !self.enabled {
            return;
        }
        if self.period_ticks == 0 {
            // On demand: the FIFO is kept full.
            while self.fifo.len() < Self::depth() {
                self.produce(now);
            }
            return;
        }
        let p = self.period_ns();
        while self.next_due_ns <= now && self.fifo.len() < Self::depth() {
            self.produce(self.next_due_ns);
            self.next_due_ns += p;
        }
        if self.next_due_ns <= now {
            // FIFO full: every record due until `now` is dropped.
            let k = (now - self.next_due_ns) / p + 1;
            self.overrun = self.overrun.wrapping_add(k as u32);
            self.seq = self.seq.wrapping_add(k as u32);
            self.next_due_ns += k * p;
        }
    }

    /// Reads the next bytes of the record stream at time `now` into `buf` (the C2H engine in the window).
    pub fn fill(&mut self, now: u64, buf: &mut [u8]) -> Fill {
        self.advance(now);
        let mut done = 0;
        while done < buf.len() {
            if let Some((rec, off)) = &mut self.current {
                let n = (rec.len() - *off).min(buf.len() - done);
                buf[done..done + n].copy_from_slice(&rec[*off..*off + n]);
                *off += n;
                done += n;
                if *off == rec.len() {
                    self.current = None;
                    self.sent = self.sent.wrapping_add(1);
                }
            } else if let Some((seq, ts)) = self.fifo.pop_front() {
                let mut rec = vec![0; self.record_bytes as usize];
                regs::write_record(&mut rec, seq, ts);
                self.current = Some((rec, 0));
                self.advance(now); // on demand: refill the slot just freed
            } else if !self.enabled {
                buf[done..].fill(0);
                done = buf.len();
            } else {
                return Fill {
                    bytes: done,
                    wait_until: Some(self.next_due_ns),
                };
            }
        }
        Fill {
            bytes: done,
            wait_until: None,
        }
    }

    fn write_ctrl(&mut self, v: u32, now: u64) {
        self.advance(now);
        if v & regs::SRC_CLEAR != 0 {
            self.seq = 0;
            self.sent = 0;
            self.overrun = 0;
            self.fifo.clear();
            self.zero_ns = now;
            self.next_due_ns = now + self.period_ns();
        }
        let on = v & regs::SRC_ENABLE != 0;
        if on && !self.enabled {
            self.next_due_ns = now + self.period_ns();
        }
        self.enabled = on;
        self.advance(now);
    }

    fn write_period(&mut self, v: u32, now: u64) {
        self.advance(now);
        self.period_ticks = v;
        self.next_due_ns = now + self.period_ns();
        self.advance(now);
    }

    /// The counters.
    pub fn status(&self) -> regs::SourceStatus {
        regs::SourceStatus {
            seq: self.seq,
            sent: self.sent,
            overrun: self.overrun,
        }
    }
}

/// The checker: parses the bytes the H2C engine writes into the window.
#[derive(Clone, Debug, Default)]
pub struct Sink {
    status: regs::SinkStatus,
    /// Bytes of an unfinished 64-bit beat.
    partial: Vec<u8>,
    /// The record being checked: its beats so far, its length.
    record: Vec<u8>,
    len: usize,
}

impl Sink {
    /// Takes `data` as the next bytes of the stream.
    pub fn write(&mut self, data: &[u8]) {
        for &b in data {
            self.partial.push(b);
            if self.partial.len() == 8 {
                let beat = std::mem::take(&mut self.partial);
                self.beat(&beat);
            }
        }
    }

    fn beat(&mut self, beat: &[u8]) {
        let s = &mut self.status;
        if self.record.is_empty() {
            let len = u32::from_le_bytes(beat[4..8].try_into().expect("4 bytes"));
            if !regs::record_bytes_valid(len) {
                s.bad_length = s.bad_length.wrapping_add(1);
                return;
            }
            self.len = len as usize;
        }
        self.record.extend_from_slice(beat);
        if self.record.len() < self.len {
            return;
        }
        match regs::check_record(&self.record) {
            Ok(r) => {
                s.good = s.good.wrapping_add(1);
                if r.seq != s.expect {
                    s.gaps = s.gaps.wrapping_add(1);
                    s.lost = s.lost.wrapping_add(r.seq.wrapping_sub(s.expect));
                }
                s.expect = r.seq.wrapping_add(1);
            }
            Err(_) => {
                s.crc_errors = s.crc_errors.wrapping_add(1);
                s.expect = s.expect.wrapping_add(1);
            }
        }
        self.record.clear();
    }

    /// The counters.
    pub fn status(&self) -> regs::SinkStatus {
        self.status
    }
}

/// The block: registers, source, checker.
#[derive(Clone, Debug)]
pub struct StreamBlock {
    /// The source.
    pub source: Source,
    /// The checker.
    pub sink: Sink,
    epoch: Instant,
}

impl Default for StreamBlock {
    fn default() -> Self {
        Self {
            source: Source::default(),
            sink: Sink::default(),
            epoch: Instant::now(),
        }
    }
}

impl StreamBlock {
    /// The clock outside timing mode: ns since the block was created.
    pub fn wall_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64
    }

    /// Reads the register at `offset` (within the block's window) at time `now`.
    pub fn read(&mut self, offset: usize, now: u64) -> u32 {
        self.source.advance(now);
        let (src, sink) = (self.source.status(), self.sink.status());
        match regs::decode(offset) {
            regs::REG_SRC_CTRL => u32::from(self.source.enabled),
            regs::REG_SRC_RECORD_BYTES => self.source.record_bytes,
            regs::REG_SRC_PERIOD => self.source.period_ticks,
            regs::REG_SRC_SEQ => src.seq,
            regs::REG_SRC_SENT => src.sent,
            regs::REG_SRC_OVERRUN => src.overrun,
            regs::REG_SRC_DEPTH => regs::FIFO_DEPTH,
            regs::REG_SINK_GOOD => sink.good,
            regs::REG_SINK_GAPS => sink.gaps,
            regs::REG_SINK_LOST => sink.lost,
            regs::REG_SINK_CRC_ERRORS => sink.crc_errors,
            regs::REG_SINK_BAD_LENGTH => sink.bad_length,
            regs::REG_SINK_EXPECT => sink.expect,
            _ => 0,
        }
    }

    /// Writes the register at `offset` at time `now`.
    pub fn write(&mut self, offset: usize, v: u32, now: u64) {
        match regs::decode(offset) {
            regs::REG_SRC_CTRL => self.source.write_ctrl(v, now),
            regs::REG_SRC_RECORD_BYTES if regs::record_bytes_valid(v) => {
                self.source.record_bytes = v;
            }
            regs::REG_SRC_PERIOD => self.source.write_period(v, now),
            regs::REG_SINK_CTRL if v & regs::SINK_CLEAR != 0 => self.sink = Sink::default(),
            _ => {}
        }
    }

    /// Back to reset values (the wall clock keeps running).
    pub fn reset(&mut self) {
        self.source = Source::default();
        self.sink = Sink::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regs::{REG_SINK_CTRL, REG_SRC_CTRL, REG_SRC_PERIOD, REG_SRC_RECORD_BYTES};

    const LEN: usize = 64;

    fn block(period: u32) -> StreamBlock {
        let mut b = StreamBlock::default();
        b.write(REG_SRC_RECORD_BYTES, LEN as u32, 0);
        b.write(REG_SRC_PERIOD, period, 0);
        b.write(REG_SRC_CTRL, regs::SRC_ENABLE, 0);
        b
    }

    /// Reads `n` records at `now`, which must all be ready.
    fn read(b: &mut StreamBlock, n: usize, now: u64) -> Vec<u8> {
        let mut buf = vec![0; n * LEN];
        assert_eq!(b.source.fill(now, &mut buf).wait_until, None);
        buf
    }

    fn seqs(buf: &[u8]) -> Vec<u32> {
        buf.chunks(LEN)
            .map(|r| regs::check_record(r).expect("a good record").seq)
            .collect()
    }

    #[test]
    fn on_demand_stream_is_good_and_checks_clean() {
        let mut b = block(0);
        let mut data = Vec::new();
        // Odd piece sizes: records straddle reads.
        for (i, piece) in [40usize, 8, 200, 264, 256].iter().enumerate() {
            let mut buf = vec![0; *piece];
            assert_eq!(b.source.fill(i as u64 * 100, &mut buf).bytes, *piece);
            data.extend(buf);
        }
        assert_eq!(seqs(&data), (0..12).collect::<Vec<_>>());
        assert_eq!(b.read(regs::REG_SRC_SENT, 1000), 12);
        assert_eq!(b.read(regs::REG_SRC_OVERRUN, 1000), 0);
        for piece in data.chunks(24) {
            b.sink.write(piece);
        }
        let s = b.sink.status();
        assert_eq!(
            (s.good, s.gaps, s.lost, s.crc_errors, s.expect),
            (12, 0, 0, 0, 12)
        );
    }

    #[test]
    fn planted_crc_error_and_skipped_sequence() {
        let mut b = block(0);
        let mut data = read(&mut b, 12, 0);
        data[3 * LEN + 20] ^= 0x10;
        b.sink.write(&data);
        let s = b.sink.status();
        assert_eq!(
            (s.good, s.crc_errors, s.gaps),
            (11, 1, 0),
            "CRC error: {s:?}"
        );

        b.write(REG_SINK_CTRL, regs::SINK_CLEAR, 0);
        data[3 * LEN + 20] ^= 0x10;
        b.sink.write(&data[..5 * LEN]);
        b.sink.write(&data[6 * LEN..]);
        let s = b.sink.status();
        assert_eq!(
            (s.good, s.gaps, s.lost, s.crc_errors),
            (11, 1, 1, 0),
            "gap: {s:?}"
        );
    }

    #[test]
    fn bad_length_header_is_counted_and_skipped() {
        let mut b = block(0);
        let data = read(&mut b, 2, 0);
        b.sink.write(&[0xff; 8]);
        b.sink.write(&data);
        let s = b.sink.status();
        assert_eq!((s.bad_length, s.good, s.gaps), (1, 2, 0));
    }

    #[test]
    fn produces_at_the_period_and_overrun_is_exactly_what_the_reader_missed() {
        let period = 125; // 1 µs
        let mut b = block(period);
        let p = u64::from(period) * TICK_NS;
        // Nobody reads for 100 µs: 100 records due, 8 kept.
        let now = 100 * p;
        assert_eq!(b.read(regs::REG_SRC_SEQ, now), 100);
        assert_eq!(b.read(regs::REG_SRC_OVERRUN, now), 92);
        let first = read(&mut b, 8, now);
        let recs: Vec<_> = first
            .chunks(LEN)
            .map(|r| regs::check_record(r).unwrap())
            .collect();
        assert_eq!(
            recs.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        for w in recs.windows(2) {
            assert_eq!(
                w[1].timestamp - w[0].timestamp,
                u64::from(period),
                "one period apart"
            );
        }
        // The FIFO is empty now: a read waits for the record due at 101 periods.
        let mut one = vec![0; LEN];
        assert_eq!(
            b.source.fill(now, &mut one),
            Fill {
                bytes: 0,
                wait_until: Some(101 * p)
            }
        );
        assert_eq!(b.source.fill(101 * p, &mut one).bytes, LEN);
        assert_eq!(seqs(&one), [100]);
        // The checker's lost numbers are the overrun counter.
        b.sink.write(&first);
        b.sink.write(&one);
        assert_eq!(b.sink.status().lost, b.read(regs::REG_SRC_OVERRUN, 101 * p));
        assert_eq!(b.sink.status().gaps, 1);
    }

    #[test]
    fn a_reader_keeping_up_never_overruns_over_ten_modeled_minutes() {
        let period = 1_250_000; // 10 ms
        let p = u64::from(period) * TICK_NS;
        let mut b = block(period);
        let mut now = 0;
        let mut buf = vec![0; 4 * LEN];
        // Reads the 4 records due every 4 periods, for 600 s of modeled time.
        let rounds = 600_000_000_000 / (4 * p);
        for _ in 0..rounds {
            now += 4 * p;
            let f = b.source.fill(now, &mut buf);
            assert_eq!(f.bytes, buf.len());
            b.sink.write(&buf);
        }
        assert_eq!(b.read(regs::REG_SRC_OVERRUN, now), 0);
        let s = b.sink.status();
        assert_eq!((s.good as u64, s.gaps, s.crc_errors), (rounds * 4, 0, 0));
    }

    #[test]
    fn long_stall_is_counted_without_walking_every_record() {
        let mut b = block(1);
        let day = 86_400_000_000_000u64;
        assert_eq!(
            b.read(regs::REG_SRC_OVERRUN, day),
            (day / TICK_NS - regs::FIFO_DEPTH as u64) as u32
        );
    }

    #[test]
    fn disabled_reads_zeros_and_clear_restarts() {
        let mut b = StreamBlock::default();
        let mut buf = vec![0xaa; 32];
        assert_eq!(b.source.fill(0, &mut buf).bytes, 32);
        assert!(buf.iter().all(|&x| x == 0));
        let mut b = block(0);
        read(&mut b, 3, 0);
        b.write(REG_SRC_CTRL, regs::SRC_CLEAR | regs::SRC_ENABLE, 10);
        assert_eq!(seqs(&read(&mut b, 1, 10)), [0]);
        // Invalid lengths are ignored.
        b.write(REG_SRC_RECORD_BYTES, 100, 10);
        assert_eq!(b.read(REG_SRC_RECORD_BYTES, 10), LEN as u32);
    }
}
