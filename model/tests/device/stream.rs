//! The stream block through the device's registers and engines, as a driver uses it: the source read by the
//! C2H engine from the DMA window, the checker written by the H2C engine, functional and timing mode.

use picoevb_model::timing::Params;
use picoevb_model::{Design, DeviceOptions};
use picoevb_regs::channel::Regs32;
use picoevb_regs::stream::{self, SinkStatus, SourceConfig, Stream, WINDOW_AXI_ADDR};
use picoevb_regs::xdma::{self, Dir};

use crate::common::*;

const LEN: u32 = 64;

/// BAR0 of the rig as the typed register API sees it.
struct Bar0<'a>(&'a Rig);

impl Regs32 for Bar0<'_> {
    type Error = ();
    fn read32(&self, offset: usize) -> Result<u32, ()> {
        Ok(self.0.bar0(offset))
    }
    fn write32(&self, value: u32, offset: usize) -> Result<(), ()> {
        self.0.set_bar0(offset, value);
        Ok(())
    }
}

fn start_source(r: &Rig, period_ticks: u32) {
    let bar = Bar0(r);
    let s = Stream::new(&bar);
    s.configure_source(SourceConfig {
        record_bytes: LEN,
        period_ticks,
    })
    .unwrap();
    s.clear_sink().unwrap();
    s.enable_source(true).unwrap();
}

/// C2H of `n` records from the window into DST; returns them.
fn c2h(r: &Rig, n: u32) -> Vec<u8> {
    let status = r.single(Dir::C2h, WINDOW_AXI_ADDR, DST, n * LEN);
    r.stop(Dir::C2h);
    assert_eq!(status & xdma::STAT_ERRORS, 0, "C2H status {status:#x}");
    r.peek(DST, (n * LEN) as usize)
}

fn records(data: &[u8]) -> Vec<stream::Record> {
    data.chunks(LEN as usize)
        .map(|c| stream::check_record(c).expect("a good record"))
        .collect()
}

fn sink(r: &Rig) -> SinkStatus {
    Stream::new(&Bar0(r)).sink_status().unwrap()
}

/// H2C of `data` from SRC into the checker.
fn h2c(r: &Rig, data: &[u8]) {
    r.poke(SRC, data);
    let status = r.single(
        Dir::H2c,
        SRC,
        WINDOW_AXI_ADDR + 0x1234_0000,
        data.len() as u32,
    );
    r.stop(Dir::H2c);
    assert_eq!(status & xdma::STAT_ERRORS, 0, "H2C status {status:#x}");
}

#[test]
fn c2h_reads_records_and_h2c_feeds_the_checker() {
    let r = Rig::new();
    start_source(&r, 0);
    let data = c2h(&r, 32);
    let seqs: Vec<u32> = records(&data).iter().map(|x| x.seq).collect();
    assert_eq!(seqs, (0..32).collect::<Vec<_>>());
    h2c(&r, &data);
    let s = sink(&r);
    assert_eq!((s.good, s.gaps, s.crc_errors, s.expect), (32, 0, 0, 32));
    // A planted error and a skipped record, through the engine.
    Stream::new(&Bar0(&r)).clear_sink().unwrap();
    let mut bad = data.clone();
    bad[2 * LEN as usize + 30] ^= 1;
    bad.drain(5 * LEN as usize..6 * LEN as usize);
    h2c(&r, &bad);
    let s = sink(&r);
    assert_eq!(
        (s.good, s.crc_errors, s.gaps, s.lost),
        (30, 1, 1, 1),
        "{s:?}"
    );
    // The BRAM below the window is untouched by either.
    assert_eq!(r.dev.peek_bram(0, 16), vec![0; 16]);
}

#[test]
fn the_reference_design_has_no_stream_block() {
    let r = Rig::with(DeviceOptions {
        design: Design::Reference,
        ..DeviceOptions::default()
    });
    assert_ne!(
        r.bar0(stream::BASE + stream::REG_SRC_DEPTH),
        stream::FIFO_DEPTH
    );
    // The window address aliases into the BRAM there (only bits [15:0] decoded).
    r.poke(SRC, &[0x5a; 64]);
    r.single(Dir::H2c, SRC, WINDOW_AXI_ADDR, 64);
    r.stop(Dir::H2c);
    assert_eq!(r.dev.peek_bram(0, 64), vec![0x5a; 64]);
}

#[test]
fn timing_mode_produces_in_modeled_time_and_counts_what_the_reader_missed() {
    let r = Rig::with(DeviceOptions {
        timing: Some(Params::default()),
        ..DeviceOptions::default()
    });
    let period = 125; // 1 µs at 8 ns a tick
    let p_ns = 1000;
    start_source(&r, period);
    // Read 16 records at once: the FIFO is empty at enable, so the run waits for each in modeled time.
    let data = c2h(&r, 16);
    let recs = records(&data);
    assert_eq!(
        recs.iter().map(|x| x.seq).collect::<Vec<_>>(),
        (0..16).collect::<Vec<_>>()
    );
    for w in recs.windows(2) {
        assert_eq!(w[1].timestamp - w[0].timestamp, u64::from(period));
    }
    let bar = Bar0(&r);
    let st = Stream::new(&bar);
    assert_eq!(
        st.source_status().unwrap().overrun,
        0,
        "a reader that waits misses nothing"
    );
    let clock = |r: &Rig| r.dev.timing_reply().clock_ns;
    let busy = r.dev.timing_reply().c2h.busy_ns;
    assert!(
        busy >= 15 * p_ns,
        "the run waited for the records: busy {busy} ns"
    );

    // Now the driver looks away for 100 µs of modeled time (100 register reads of 1 µs each).
    let before = clock(&r);
    for _ in 0..100 {
        r.bar0(0);
    }
    assert!(clock(&r) - before >= 100 * p_ns);
    let s = st.source_status().unwrap();
    assert!(s.overrun >= 90, "{s:?}");
    // What it reads next: the 8 records the FIFO kept, then the first one produced after the stall.
    let data2 = c2h(&r, 9);
    let overrun = st.source_status().unwrap().overrun;
    let mut all = data.clone();
    all.extend(&data2);
    h2c(&r, &all);
    let s = sink(&r);
    assert_eq!((s.good, s.gaps, s.crc_errors), (25, 1, 0), "{s:?}");
    assert_eq!(
        s.lost, overrun,
        "the checker's missing numbers are exactly the overrun count"
    );
}

#[test]
fn an_on_demand_source_runs_at_link_rate_in_timing_mode() {
    let timed = || {
        Rig::with(DeviceOptions {
            timing: Some(Params::default()),
            ..DeviceOptions::default()
        })
    };
    let busy = |r: &Rig| r.dev.timing_reply().c2h.busy_ns;
    let from_bram = timed();
    from_bram.single(Dir::C2h, 0, DST, 65536);
    let from_window = timed();
    start_source(&from_window, 0);
    let data = c2h(&from_window, 65536 / LEN);
    assert_eq!(records(&data).len(), 1024);
    assert_eq!(
        busy(&from_window),
        busy(&from_bram),
        "PERIOD 0 never makes the engine wait"
    );
}
