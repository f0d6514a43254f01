//! The stream block through the driver (`IOC_STREAM`, `C2H_SRC_STREAM`, `H2C_DST_STREAM`, ABI 1.5): records
//! from the card's source arrive whole, CRC-checked and in sequence in host memory; the same bytes written
//! to the checker count as good; a full source drops the newest records and counts each, exactly; a stream
//! transfer does not touch the card RAM, so another holder owning the RAM does not stop it; bad arguments
//! are refused with nothing changed.

use picoevb_abi as abi;
use picoevb_regs::stream::{self as regs, RecordError};

use super::isolation::{Child, OWNER_EXITS, give_back, spawn_owner};
use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, test};
use crate::dev::Device;

pub fn register(v: &mut Vec<Test>) {
    for (name, run) in [
        (
            "stream::records_arrive_whole_and_in_sequence",
            records_arrive_whole_and_in_sequence as fn(&mut Ctx) -> TestResult,
        ),
        (
            "stream::the_checker_counts_good_and_corrupt_records",
            the_checker_counts_good_and_corrupt_records,
        ),
        (
            "stream::a_full_source_drops_the_newest_and_counts_each",
            a_full_source_drops_the_newest_and_counts_each,
        ),
        (
            "stream::another_holder_of_the_ram_does_not_stop_it",
            another_holder_of_the_ram_does_not_stop_it,
        ),
        (
            "stream::bad_arguments_change_nothing",
            bad_arguments_change_nothing,
        ),
        (
            "stream::ring_drop_oldest_counts_every_lost_record",
            ring_drop_oldest_counts_every_lost_record,
        ),
        (
            "stream::ring_back_pressure_loses_nothing",
            ring_back_pressure_loses_nothing,
        ),
        (
            "stream::a_killed_reader_of_a_slow_source_leaves_the_card_working",
            a_killed_reader_of_a_slow_source_leaves_the_card_working,
        ),
    ] {
        v.push(test(name, run).needs(Needs::Stream));
    }
}

const RECORD: u32 = 256;

/// The source on demand (period 0: a record whenever the engine asks, never a drop), cleared, enabled.
fn on_demand(dev: &Device, record_bytes: u32) -> TestResult {
    let s = ctx_err(
        "STREAM restart (on demand)",
        dev.stream_restart(record_bytes, 0),
    )?;
    // On demand, the source fills its FIFO at once: `source_seq` is already past it.
    ensure!(
        (s.enable, s.record_bytes, s.period_ticks, s.source_sent) == (1, record_bytes, 0, 0),
        "the block after SET: {s:?}"
    );
    Ok(())
}

fn off(dev: &Device) -> TestResult {
    ctx_err(
        "STREAM SET (off)",
        dev.stream(abi::STREAM_SET, false, RECORD, 0),
    )
    .map(|_| ())
}

/// Checks `buf` as whole records of `len` bytes: their sequence numbers.
fn records(buf: &[u8], len: u32) -> Result<Vec<u32>, String> {
    buf.chunks(len as usize)
        .enumerate()
        .map(|(i, r)| {
            regs::check_record(r)
                .map(|rec| rec.seq)
                .map_err(|e| match e {
                    RecordError::Length(l) => format!("record {i}: length {l}"),
                    RecordError::Crc => format!("record {i}: CRC or end marker wrong"),
                })
        })
        .collect()
}

/// 64 records of 256 bytes in one C2H (16 KiB, polled), then 16 in one of 4 KiB: each whole, CRC-checked, in
/// sequence across the two requests; the source counts 80 sent and no overrun. Fails if the driver reads
/// card RAM instead of the window (no valid record), or splits a request into windows that restart the
/// address (records cut).
fn records_arrive_whole_and_in_sequence(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    on_demand(dev, RECORD)?;
    let mut a = vec![0u8; 64 * RECORD as usize];
    let mut b = vec![0u8; 16 * RECORD as usize];
    ctx_err("C2H from the stream (16 KiB)", dev.c2h_stream(&mut a))?;
    ctx_err("C2H from the stream (4 KiB)", dev.c2h_stream(&mut b))?;
    let mut seqs = records(&a, RECORD)?;
    seqs.extend(records(&b, RECORD)?);
    ensure!(
        seqs.iter().copied().eq(0..80),
        "sequence numbers {:?}...",
        &seqs[..seqs.len().min(12)]
    );
    let s = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    off(dev)?;
    ensure!(
        (s.source_sent, s.source_overruns) == (80, 0),
        "source counters after 80 records: {s:?}"
    );
    Ok(())
}

/// What the source gave, written to the checker in one H2C: every record good, no gap; then a copy with one
/// byte flipped in the third record: one CRC error, the others good. Fails if H2C_DST_STREAM lands in the
/// card RAM (the checker counts nothing).
fn the_checker_counts_good_and_corrupt_records(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    on_demand(dev, RECORD)?;
    let mut recs = vec![0u8; 32 * RECORD as usize];
    ctx_err("C2H from the stream", dev.c2h_stream(&mut recs))?;
    ctx_err("H2C into the checker", dev.h2c_stream(&recs))?;
    let s = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    ensure!(
        (
            s.sink_good,
            s.sink_gaps,
            s.sink_crc_errors,
            s.sink_bad_length,
            s.sink_expect
        ) == (32, 0, 0, 0, 32),
        "checker after 32 good records: {s:?}"
    );
    let mut more = vec![0u8; 4 * RECORD as usize];
    ctx_err("C2H from the stream", dev.c2h_stream(&mut more))?;
    more[2 * RECORD as usize + 40] ^= 0x10;
    ctx_err("H2C into the checker", dev.h2c_stream(&more))?;
    let s = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    off(dev)?;
    ensure!(
        (s.sink_good, s.sink_crc_errors, s.sink_gaps) == (35, 1, 0),
        "checker after 3 good and 1 corrupt record: {s:?}"
    );
    Ok(())
}

/// A source producing every 10 us with nobody reading fills its 8-record FIFO and then drops: after 20 ms
/// it is disabled, and the records still read are the 8 oldest (0..7, whole), the next sequence number is
/// exactly 8 plus the overruns counted, and a read past the FIFO gets zeros at once (a stopped source never
/// hangs an engine). Fails if the driver's window reads skip or repeat records, or the counter is not exact.
fn a_full_source_drops_the_newest_and_counts_each(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    ctx_err(
        "STREAM restart (every 10 us)",
        dev.stream_restart(RECORD, 1250),
    )?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    let s = ctx_err(
        "STREAM SET (off)",
        dev.stream(abi::STREAM_SET, false, RECORD, 1250),
    )?;
    ensure!(
        s.source_depth == regs::FIFO_DEPTH,
        "FIFO depth {}",
        s.source_depth
    );
    ensure!(
        s.source_overruns > 0,
        "no overrun in 20 ms at one record per 10 us: {s:?}"
    );
    ensure!(
        s.source_seq == regs::FIFO_DEPTH + s.source_overruns,
        "next sequence {} is not the FIFO's {} records plus {} overruns",
        s.source_seq,
        regs::FIFO_DEPTH,
        s.source_overruns
    );
    let mut fifo = vec![0u8; regs::FIFO_DEPTH as usize * RECORD as usize];
    ctx_err("C2H of the FIFO", dev.c2h_stream(&mut fifo))?;
    let seqs = records(&fifo, RECORD)?;
    ensure!(
        seqs.iter().copied().eq(0..regs::FIFO_DEPTH),
        "the FIFO held {seqs:?}, not the oldest records"
    );
    let mut past = vec![0xa5u8; RECORD as usize];
    ctx_err(
        "C2H past the FIFO of a stopped source",
        dev.c2h_stream(&mut past),
    )?;
    ensure!(past.iter().all(|&b| b == 0), "a stopped source gave data");
    Ok(())
}

/// Another process owns the card RAM (it wrote it and waits): this process's RAM transfers fail with EBUSY,
/// but its stream transfers run, since they never touch the RAM, and the owner's bytes stay intact. Fails
/// if the driver applies the RAM's owner rule to the stream window.
fn another_holder_of_the_ram_does_not_stop_it(ctx: &mut Ctx) -> TestResult {
    give_back(ctx.dev)?;
    let mut mine = vec![0u8; 8192];
    ctx.rng.fill(&mut mine);
    let mut child = spawn_owner(ctx.dev_path, &mine)?;
    let checks = child.wait_ready().and_then(|()| {
        let mut ram = vec![0u8; 4096];
        expect_errno(
            "C2H of the owner's RAM",
            ctx.dev.c2h(&mut ram, 0),
            libc::EBUSY,
        )?;
        on_demand(ctx.dev, RECORD)?;
        let mut recs = vec![0u8; 16 * RECORD as usize];
        ctx_err("C2H from the stream", ctx.dev.c2h_stream(&mut recs))?;
        ctx_err("H2C into the checker", ctx.dev.h2c_stream(&recs))?;
        let seqs = records(&recs, RECORD)?;
        ensure!(seqs.iter().copied().eq(0..16), "sequence {seqs:?}");
        off(ctx.dev)
    });
    let code = child.reap()?;
    checks?;
    ensure!(
        code == 0,
        "the RAM's owner exited with {code} ({OWNER_EXITS})"
    );
    Ok(())
}

/// Lengths that are not whole beats, an offset with the stream flag, a record size the block cannot take,
/// a record size change under a running source, an unknown op and nonzero reserved words: each EINVAL,
/// and the block's settings afterwards are what they were.
fn bad_arguments_change_nothing(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    on_demand(dev, 512)?;
    let before = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    let mut buf = vec![0u8; 4096];
    let mut a = abi::C2hDma {
        dst: buf.as_mut_ptr() as u64,
        src: 0,
        len: 4092,
        flags: abi::C2H_SRC_STREAM,
        ..Default::default()
    };
    // SAFETY: `buf` holds 4096 bytes, more than any of these requests asks for.
    let r = unsafe { dev.c2h_raw(&mut a) };
    expect_errno("C2H stream of 4092 bytes", r, libc::EINVAL)?;
    a.len = 4096;
    a.src = 64;
    // SAFETY: as above.
    let r = unsafe { dev.c2h_raw(&mut a) };
    expect_errno("C2H stream at offset 64", r, libc::EINVAL)?;
    let mut h = abi::H2cDma {
        src: buf.as_ptr() as u64,
        dst: 0,
        len: 12,
        flags: abi::H2C_DST_STREAM,
        ..Default::default()
    };
    // SAFETY: H2C only reads `buf`.
    let r = unsafe { dev.h2c_raw(&mut h) };
    expect_errno("H2C stream of 12 bytes", r, libc::EINVAL)?;
    for (what, op, enable, bytes) in [
        ("a 100-byte record", abi::STREAM_SET, 1, 100),
        (
            "a record size change while running",
            abi::STREAM_SET,
            1,
            256,
        ),
        ("enable 2", abi::STREAM_SET, 2, 512),
        ("op 9", 9, 0, 512),
    ] {
        let mut s = abi::Stream {
            op,
            enable,
            record_bytes: bytes,
            ..Default::default()
        };
        expect_errno(
            &format!("STREAM with {what}"),
            dev.stream_raw(&mut s),
            libc::EINVAL,
        )?;
    }
    let mut s = abi::Stream {
        reserved: [0, 1],
        ..Default::default()
    };
    expect_errno(
        "STREAM with reserved words",
        dev.stream_raw(&mut s),
        libc::EINVAL,
    )?;
    let after = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    off(dev)?;
    ensure!(
        (
            after.enable,
            after.record_bytes,
            after.period_ticks,
            after.source_seq
        ) == (
            before.enable,
            before.record_bytes,
            before.period_ticks,
            before.source_seq
        ),
        "the block changed: {before:?} -> {after:?}"
    );
    Ok(())
}

/// A ring of 8 slots of 16 records (4 KiB), drop-oldest, 256 slots in chains of 4 through the driver; the
/// consumer stalls after 16 slots until the producer has filled all 256. Whatever the interleaving before
/// the stall: every record read is whole, every slot is read or counted as dropped, the sequence numbers
/// missing between the first and last record read are exactly the dropped slots' records, and the stall
/// cost at least 256 - 16 - 8 slots. Fails if a lapped or overwritten slot were read as good (a CRC error
/// or a sequence jump the counter does not explain) or a drop went uncounted.
fn ring_drop_oldest_counts_every_lost_record(ctx: &mut Ctx) -> TestResult {
    let s = crate::ring::Setup {
        slots: 8,
        slot_bytes: 4096,
        record_bytes: RECORD,
        period_ticks: 0,
        policy: picoevb_logic::stream_ring::Policy::DropOldest,
        total: 256,
        chain: 4,
        stall: Some(16),
    };
    let seen = crate::ring::run(ctx.dev, s)?;
    let per = 4096 / u64::from(RECORD);
    ensure!(seen.bad == 0, "{} bad records: {seen:?}", seen.bad);
    ensure!(
        seen.slots + seen.ring_drops == 256,
        "slots unaccounted for: {seen:?}"
    );
    ensure!(seen.records == seen.slots * per, "records: {seen:?}");
    ensure!(
        seen.missing == seen.ring_drops * per + seen.source_drops,
        "missing sequence numbers are not the drops: {seen:?}"
    );
    ensure!(
        seen.ring_drops >= 232,
        "the stall lost too little: {seen:?}"
    );
    Ok(())
}

/// The same ring with back-pressure: the producer waits while the consumer stalls, and nothing is lost (the
/// source on demand never overruns). Fails if the producer overwrote an unread slot.
fn ring_back_pressure_loses_nothing(ctx: &mut Ctx) -> TestResult {
    let s = crate::ring::Setup {
        slots: 8,
        slot_bytes: 4096,
        record_bytes: RECORD,
        period_ticks: 0,
        policy: picoevb_logic::stream_ring::Policy::BackPressure,
        total: 256,
        chain: 4,
        stall: Some(16),
    };
    let seen = crate::ring::run(ctx.dev, s)?;
    ensure!(
        (
            seen.bad,
            seen.ring_drops,
            seen.missing,
            seen.source_drops,
            seen.slots
        ) == (0, 0, 0, 0, 256),
        "back-pressure lost data: {seen:?}"
    );
    ensure!(
        seen.waits > 0,
        "the producer never waited for the stalled consumer: {seen:?}"
    );
    Ok(())
}

/// A process blocked in a C2H on a slow source (one record every 200 ms, 8 asked for: one descriptor) is
/// killed once it is inside the ioctl: the engine cannot stop inside the read (the next record is due
/// after the stop's 100 ms), so the driver disables the source (the read then ends with zeros) and the card
/// works on: the source reads disabled and a round trip through the card RAM succeeds. Fails on a driver
/// that only clears Run and waits: the engine stays busy past the stop's timeout and the card is wedged
/// (EIO) until unbind.
fn a_killed_reader_of_a_slow_source_leaves_the_card_working(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    ctx_err(
        "STREAM restart (every 200 ms)",
        dev.stream_restart(RECORD, 25_000_000),
    )?;
    let path = ctx.dev_path.to_string();
    let mut child = Child::spawn(|sync| {
        let Ok(d) = Device::open(&path) else { return 2 };
        let mut recs = vec![0u8; 8 * RECORD as usize];
        sync.ready();
        let _ = d.c2h_stream(&mut recs);
        3
    })?;
    child.wait_ready()?;
    // Killed only once it sleeps in the ioctl (the kernel's view of the task, not a guess at timing).
    let in_ioctl = super::removal::wait_for(
        "the reader in its ioctl",
        std::time::Duration::from_secs(10),
        || {
            std::fs::read_to_string(format!("/proc/{}/syscall", child.pid()))
                .is_ok_and(|s| s.split(' ').next() == Some(&libc::SYS_ioctl.to_string()))
        },
    );
    child.kill()?;
    in_ioctl?;
    let s = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    ensure!(
        s.enable == 0,
        "the source still runs after its reader was killed: {s:?}"
    );
    let src = vec![0x3cu8; 4096];
    let mut dst = vec![0u8; 4096];
    ctx_err("H2C2H after the kill", dev.h2c2h(&src, &mut dst))?;
    ensure!(
        dst == src,
        "the round trip after the kill moved wrong bytes"
    );
    off(dev)
}
