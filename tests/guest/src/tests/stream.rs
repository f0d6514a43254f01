//! The stream block through the driver (`IOC_STREAM`, `C2H_SRC_STREAM`, `H2C_DST_STREAM`, ABI 1.5): records
//! from the card's source arrive whole, CRC-checked and in sequence in host memory; the same bytes written
//! to the checker count as good; a full source drops the newest records and counts each, exactly; a stream
//! transfer does not touch the card RAM, so another holder owning the RAM does not stop it; bad arguments
//! are refused with nothing changed.

use picoevb_abi as abi;
use picoevb_regs::stream::{self as regs, RecordError};

use std::sync::atomic::Ordering;
use std::time::Duration;

use picoevb_logic::stream_ring::{Policy, SharedControl};

use super::isolation::{Child, OWNER_EXITS, give_back, spawn_owner};
use super::removal::wait_for;
use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, test};
use crate::dev::{Device, EventFd, Mapping};
use crate::ring::{By, Setup};

pub fn register(v: &mut Vec<Test>) {
    // The ring in a PIN_HOST surface of the checker's and the surface's end need host surfaces too.
    for (name, run, needs) in [
        (
            "stream::records_arrive_whole_and_in_sequence",
            records_arrive_whole_and_in_sequence as fn(&mut Ctx) -> TestResult,
            Needs::Stream,
        ),
        (
            "stream::the_checker_counts_good_and_corrupt_records",
            the_checker_counts_good_and_corrupt_records,
            Needs::Stream,
        ),
        (
            "stream::a_full_source_drops_the_newest_and_counts_each",
            a_full_source_drops_the_newest_and_counts_each,
            Needs::Stream,
        ),
        (
            "stream::another_holder_of_the_ram_does_not_stop_it",
            another_holder_of_the_ram_does_not_stop_it,
            Needs::Stream,
        ),
        (
            "stream::bad_arguments_change_nothing",
            bad_arguments_change_nothing,
            Needs::Stream,
        ),
        (
            "stream::ring_drop_oldest_counts_every_lost_record",
            ring_drop_oldest_counts_every_lost_record,
            Needs::Stream,
        ),
        (
            "stream::ring_back_pressure_loses_nothing",
            ring_back_pressure_loses_nothing,
            Needs::Stream,
        ),
        (
            "stream::ring_into_the_checker_counts_every_record",
            ring_into_the_checker_counts_every_record,
            Needs::StreamHostRing,
        ),
        (
            "stream::ring_stops_on_its_stop_word_and_on_a_signal",
            ring_stops_on_its_stop_word_and_on_a_signal,
            Needs::Stream,
        ),
        (
            "stream::ring_bad_arguments_change_nothing",
            ring_bad_arguments_change_nothing,
            Needs::Stream,
        ),
        (
            "stream::ring_wakes_its_sleeper_after_each_chain_and_at_its_end",
            ring_wakes_its_sleeper_after_each_chain_and_at_its_end,
            Needs::Stream,
        ),
        (
            "stream::ring_on_a_surface_ends_with_the_surface",
            ring_on_a_surface_ends_with_the_surface,
            Needs::StreamHostRing,
        ),
        (
            "stream::a_killed_reader_of_a_slow_source_leaves_the_card_working",
            a_killed_reader_of_a_slow_source_leaves_the_card_working,
            Needs::Stream,
        ),
    ] {
        v.push(test(name, run).needs(needs));
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

/// The producers the ring tests run: the driver's on the ring's user address (its consumer sleeping on the
/// ring's eventfd whenever it caught up), the driver's on a PIN_HOST surface of it, and a thread of ours
/// (one C2H per chain); the last two with a consumer that polls.
const PRODUCERS: [(By, bool); 3] = [(By::Driver, false), (By::Driver, true), (By::Thread, false)];

/// `PRODUCERS` that `dev` can run: the surface one only where host surfaces exist (not on Linux 4.x).
fn producers(dev: &Device) -> Vec<(By, bool)> {
    let host = Needs::HostSurface.unmet(dev).is_none();
    PRODUCERS.into_iter().filter(|&(_, s)| host || !s).collect()
}

fn ring_setup(policy: Policy, by: By, surface: bool) -> Setup {
    Setup {
        slots: 8,
        slot_bytes: 4096,
        record_bytes: RECORD,
        period_ticks: 0,
        policy,
        total: 256,
        chain: 4,
        stall: Some(16),
        by,
        surface,
        wake: by == By::Driver && !surface,
    }
}

/// A sleeping consumer's wake-ups: at least one, at most one per chain and one for the ring's end.
fn wakes_bounded(seen: &crate::ring::Seen, by: By, surface: bool) -> TestResult {
    if by == By::Driver && !surface {
        ensure!(
            (1..=seen.chains + 1).contains(&seen.wakes),
            "{} wake-ups for {} chains: {seen:?}",
            seen.wakes,
            seen.chains
        );
    }
    Ok(())
}

/// A ring of 8 slots of 16 records (4 KiB), drop-oldest, 256 slots in chains of 4 through the driver; the
/// consumer stalls after 16 slots until the producer has filled all 256. Whatever the interleaving before
/// the stall: every record read is whole, every slot is read or counted as dropped, the sequence numbers
/// missing between the first and last record read are exactly the dropped slots' records, and the stall
/// cost at least 256 - 16 - 8 slots. For each producer (`PRODUCERS`). Fails if a lapped or overwritten
/// slot were read as good (a CRC error or a sequence jump the counter does not explain), a drop went
/// uncounted, or the driver's producer published `produced` before a chain's bytes or `writing` after.
fn ring_drop_oldest_counts_every_lost_record(ctx: &mut Ctx) -> TestResult {
    for (by, surface) in producers(ctx.dev) {
        let seen = crate::ring::run(ctx.dev, ring_setup(Policy::DropOldest, by, surface))
            .map_err(|e| format!("{by:?} (surface {surface}): {e}"))?;
        let per = 4096 / u64::from(RECORD);
        let at = format!("{by:?} (surface {surface}): {seen:?}");
        ensure!(seen.bad == 0, "{} bad records: {at}", seen.bad);
        ensure!(
            seen.slots + seen.ring_drops == 256,
            "slots unaccounted for: {at}"
        );
        ensure!(seen.records == seen.slots * per, "records: {at}");
        ensure!(
            seen.missing == seen.ring_drops * per + seen.source_drops,
            "missing sequence numbers are not the drops: {at}"
        );
        ensure!(seen.ring_drops >= 232, "the stall lost too little: {at}");
        ensure!(seen.waits == 0, "drop-oldest waited: {at}");
        wakes_bounded(&seen, by, surface)?;
    }
    Ok(())
}

/// The same ring with back-pressure: the producer waits while the consumer stalls, and nothing is lost (the
/// source on demand never overruns). For each producer. Fails if the producer overwrote an unread slot.
fn ring_back_pressure_loses_nothing(ctx: &mut Ctx) -> TestResult {
    for (by, surface) in producers(ctx.dev) {
        let seen = crate::ring::run(ctx.dev, ring_setup(Policy::BackPressure, by, surface))
            .map_err(|e| format!("{by:?} (surface {surface}): {e}"))?;
        let at = format!("{by:?} (surface {surface}): {seen:?}");
        ensure!(
            (
                seen.bad,
                seen.ring_drops,
                seen.missing,
                seen.source_drops,
                seen.slots
            ) == (0, 0, 0, 0, 256),
            "back-pressure lost data: {at}"
        );
        ensure!(
            seen.waits > 0,
            "the producer never waited for the stalled consumer: {at}"
        );
        wakes_bounded(&seen, by, surface)?;
    }
    Ok(())
}

/// The driver empties a ring of 8 slots of 16 records into the checker (`RING_H2C`, one ioctl for 256
/// slots, chains of up to 4) while this thread writes the records slot by slot and publishes `produced`,
/// waiting for the driver's `consumed` before it writes a slot again; on the ring's user address and on a
/// PIN_HOST surface of it; the first 16 slots come slowly. The checker then counts 4096 good records in
/// sequence: no gap, no CRC error. Fails if the driver read a slot before it was published (seen: a driver
/// ignoring `produced` fails it with gaps at the checker) or after it was written again (a CRC error or a
/// gap).
fn ring_into_the_checker_counts_every_record(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    let (slots, per, total) = (8u64, 4096 / RECORD as usize, 256u64);
    for surface in [false, true] {
        on_demand(dev, RECORD)?;
        let mut ring = ctx_err(
            "mmap",
            Mapping::new(slots as usize * 4096, libc::PROT_READ | libc::PROT_WRITE),
        )?;
        let handle = if surface {
            Some(ctx_err(
                "PIN_HOST",
                dev.pin_host(ring.addr(), slots * 4096),
            )?)
        } else {
            None
        };
        let control = SharedControl::default();
        let addr = ring.addr();
        let r = std::thread::scope(|scope| {
            let driver = scope.spawn(|| {
                let mut a = abi::StreamRing {
                    ring: handle.map_or(addr, u64::from),
                    control: std::ptr::from_ref(&control) as u64,
                    slot_bytes: 4096,
                    total,
                    slots: slots as u32,
                    chain_slots: 4,
                    flags: abi::RING_H2C | if surface { abi::RING_CUDA } else { 0 },
                    ..Default::default()
                };
                // SAFETY: the ring and the control block outlive this scope; the caller writes a slot only
                // while the driver is done with it (the protocol under test), through a slice of the
                // mapping, never while a chain reads it.
                unsafe { dev.stream_ring_raw(&mut a) }.map(|()| a)
            });
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            let mut wrote = Ok(());
            for n in 0..total {
                while n >= control.consumed.load(Ordering::Acquire) + slots {
                    if driver.is_finished() || std::time::Instant::now() > deadline {
                        wrote = Err(format!("slot {n}: the driver stopped taking slots"));
                        break;
                    }
                    std::hint::spin_loop();
                }
                if wrote.is_err() {
                    break;
                }
                // The first slots come slowly: a driver that read slots not yet published would move
                // the fresh mapping's zeros (bad lengths at the checker).
                if n < 16 {
                    std::thread::sleep(Duration::from_micros(500));
                }
                write_slot(&mut ring, slots, n);
                control.produced.store(n + 1, Ordering::Release);
            }
            if wrote.is_err() {
                control.stop.store(1, Ordering::Release);
            }
            let a = driver
                .join()
                .map_err(|_| "ring thread panicked".to_string())?;
            wrote?;
            Ok::<_, String>(a)
        })?;
        let a = ctx_err("STREAM_RING into the checker", r)?;
        if let Some(h) = handle {
            ctx_err("UNPIN", dev.unpin_cuda(h))?;
        }
        let s = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
        let want = total * per as u64;
        ensure!(
            (a.produced, control.consumed.load(Ordering::Acquire)) == (total, total)
                && a.chains >= total / 4,
            "surface {surface}: the ring after {total} slots: {a:?}"
        );
        ensure!(
            (
                u64::from(s.sink_good),
                s.sink_gaps,
                s.sink_crc_errors,
                s.sink_bad_length,
                u64::from(s.sink_expect)
            ) == (want, 0, 0, 0, want),
            "surface {surface}: the checker after {want} records: {s:?}"
        );
    }
    off(dev)
}

/// Writes slot `n` of a ring of `slots` 4 KiB slots in `ring`: its 16 records, numbered from `16 n`.
fn write_slot(ring: &mut Mapping, slots: u64, n: u64) {
    let per = 4096 / RECORD as usize;
    let at = (n % slots) as usize * 4096;
    for (i, rec) in ring.as_mut_slice()[at..at + 4096]
        .chunks_mut(RECORD as usize)
        .enumerate()
    {
        regs::write_record(rec, (n as usize * per + i) as u32, n);
    }
}

/// The driver's ring of 8 slots over `ring` (a user address, or a handle with `RING_CUDA` in `flags`),
/// drop-oldest, until stopped, run on a thread of `scope`; `control` as the driver fills it. The thread
/// stores its `pthread_self` in `me` before the call.
pub(super) fn endless_ring<'s>(
    scope: &'s std::thread::Scope<'s, '_>,
    dev: &'s Device,
    ring: u64,
    flags: u32,
    control: &'s SharedControl,
    me: &'s std::sync::atomic::AtomicU64,
) -> std::thread::ScopedJoinHandle<'s, std::io::Result<abi::StreamRing>> {
    scope.spawn(move || {
        // SAFETY: a plain query of this thread's id.
        me.store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
        let mut a = abi::StreamRing {
            ring,
            control: std::ptr::from_ref(control) as u64,
            slot_bytes: 4096,
            slots: 8,
            chain_slots: 2,
            flags: flags | abi::RING_DROP_OLDEST,
            ..Default::default()
        };
        // SAFETY: the ring and `control` outlive the scope this thread runs in; both are read only
        // through atomics (or not at all).
        unsafe { dev.stream_ring_raw(&mut a) }.map(|()| a)
    })
}

/// Joins the ring thread `t` once it ended by itself (within 10 s of what should end it); otherwise ends it
/// (the stop word and SIGUSR1, `quiet_sigusr1`) and fails, so a driver that ignores what should end a
/// ring fails the test instead of hanging it.
fn join_ring(
    t: std::thread::ScopedJoinHandle<'_, std::io::Result<abi::StreamRing>>,
    control: &SharedControl,
    me: &std::sync::atomic::AtomicU64,
    what: &str,
) -> Result<std::io::Result<abi::StreamRing>, String> {
    let ended = wait_for(what, Duration::from_secs(10), || t.is_finished());
    if ended.is_err() {
        control.stop.store(1, Ordering::Release);
        // SAFETY: the thread stored its id before its ioctl published progress, and lives until joined.
        unsafe { libc::pthread_kill(me.load(Ordering::Acquire) as libc::pthread_t, libc::SIGUSR1) };
    }
    let r = t.join().map_err(|_| "ring thread panicked".to_string())?;
    ended.map(|()| r)
}

extern "C" fn nothing(_: libc::c_int) {}

/// SIGUSR1 does nothing but interrupt: a handler without SA_RESTART, so a ring's ioctl returns EINTR.
pub(super) fn quiet_sigusr1() -> TestResult {
    // SAFETY: installs a handler that does nothing; the struct is fully initialised (zeroed, then set).
    let rc = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut())
    };
    ensure!(rc == 0, "sigaction: {}", std::io::Error::last_os_error());
    Ok(())
}

/// Waits until the driver's ring published `n` slots; if it does not, ends it (the stop word and SIGUSR1)
/// so that the scope's join does not wait for ever.
pub(super) fn produced(
    control: &SharedControl,
    me: &std::sync::atomic::AtomicU64,
    n: u64,
) -> TestResult {
    wait_for("ring progress", Duration::from_secs(30), || {
        control.produced.load(Ordering::Acquire) >= n
    })
    .inspect_err(|_| {
        control.stop.store(1, Ordering::Release);
        let id = me.load(Ordering::Acquire);
        if id != 0 {
            // SAFETY: the thread stored its id first and lives until the scope joins it.
            unsafe { libc::pthread_kill(id as libc::pthread_t, libc::SIGUSR1) };
        }
    })
}

/// A ring the driver runs until stopped (drop-oldest, nobody consuming) ends at a chain boundary when the
/// consumer sets `stop`: the call succeeds with `produced` as last published and `writing` equal to it
/// (no chain left half-announced). A second ring ends with EINTR when a signal (a handler without
/// SA_RESTART) reaches its thread, and the card goes on working. Fails if the driver ignored the stop word
/// (the test would time out) or the signal (ditto), or returned something else.
fn ring_stops_on_its_stop_word_and_on_a_signal(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    quiet_sigusr1()?;
    on_demand(dev, RECORD)?;
    let ring = ctx_err(
        "mmap",
        Mapping::new(8 * 4096, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let addr = ring.addr();
    let me = std::sync::atomic::AtomicU64::new(0);
    let control = SharedControl::default();
    let a = std::thread::scope(|scope| {
        let t = endless_ring(scope, dev, addr, 0, &control, &me);
        produced(&control, &me, 64)?;
        control.stop.store(1, Ordering::Release);
        let a = join_ring(t, &control, &me, "the ring to end on its stop word")?;
        ctx_err("STREAM_RING stopped by its stop word", a)
    })?;
    let (w, p) = (
        control.writing.load(Ordering::Acquire),
        control.produced.load(Ordering::Acquire),
    );
    ensure!(
        a.produced == p && w == p && p >= 64 && a.chains == p / 2 && a.waits == 0,
        "after the stop: {a:?}, writing {w}, produced {p}"
    );

    let control = SharedControl::default();
    let r = std::thread::scope(|scope| {
        let t = endless_ring(scope, dev, addr, 0, &control, &me);
        produced(&control, &me, 16)?;
        // SAFETY: the thread stored its id before its ioctl published progress, and lives until joined.
        unsafe { libc::pthread_kill(me.load(Ordering::Acquire) as libc::pthread_t, libc::SIGUSR1) };
        join_ring(t, &control, &me, "the ring to end on a signal")
    })?;
    expect_errno("STREAM_RING interrupted by a signal", r, libc::EINTR)?;
    let src = vec![0x5au8; 4096];
    let mut dst = vec![0u8; 4096];
    ctx_err("H2C2H after the rings", dev.h2c2h(&src, &mut dst))?;
    ensure!(
        dst == src,
        "the round trip after the rings moved wrong bytes"
    );
    off(dev)
}

/// IOC_STREAM_RING's refusals: each bad argument gets its errno before anything runs: the control block
/// keeps what it held (the driver resets its words only for a ring that starts) and the source gave no
/// record. Fails on a check missing or done after the ring started (the control words would read 0, the
/// source's sequence would move).
fn ring_bad_arguments_change_nothing(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    on_demand(dev, RECORD)?;
    let ring = ctx_err(
        "mmap",
        Mapping::new(8 * 4096, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let control = SharedControl::default();
    let good = abi::StreamRing {
        ring: ring.addr(),
        control: std::ptr::from_ref(&control) as u64,
        slot_bytes: 4096,
        total: 8,
        slots: 8,
        ..Default::default()
    };
    let before = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    let not_eventfd = ctx_err("open /dev/null", std::fs::File::open("/dev/null"))?;
    let cases: [(&str, abi::StreamRing, i32); 13] = [
        (
            "unknown flag",
            abi::StreamRing {
                flags: 1 << 5,
                ..good
            },
            libc::EINVAL,
        ),
        (
            "an eventfd without RING_EVENTFD",
            abi::StreamRing { eventfd: 1, ..good },
            libc::EINVAL,
        ),
        (
            "RING_EVENTFD on no descriptor",
            abi::StreamRing {
                flags: abi::RING_EVENTFD,
                eventfd: -1,
                ..good
            },
            libc::EBADF,
        ),
        (
            "RING_EVENTFD on a descriptor that is not an eventfd",
            abi::StreamRing {
                flags: abi::RING_EVENTFD,
                eventfd: std::os::fd::AsRawFd::as_raw_fd(&not_eventfd),
                ..good
            },
            libc::EINVAL,
        ),
        (
            "reserved",
            abi::StreamRing {
                reserved: [0, 1],
                ..good
            },
            libc::EINVAL,
        ),
        (
            "one slot",
            abi::StreamRing { slots: 1, ..good },
            libc::EINVAL,
        ),
        (
            "slot not in beats",
            abi::StreamRing {
                slot_bytes: 4092,
                ..good
            },
            libc::EINVAL,
        ),
        (
            "misaligned control",
            abi::StreamRing {
                control: good.control + 4,
                ..good
            },
            libc::EINVAL,
        ),
        (
            "control inside the ring",
            abi::StreamRing {
                control: ring.addr() + 4096,
                ..good
            },
            libc::EINVAL,
        ),
        (
            "ring beyond user space",
            abi::StreamRing {
                ring: u64::MAX - 4096,
                ..good
            },
            libc::EFAULT,
        ),
        (
            "control beyond user space",
            abi::StreamRing {
                control: 1 << 60,
                ..good
            },
            libc::EFAULT,
        ),
        (
            "unknown surface",
            abi::StreamRing {
                ring: 12345,
                flags: abi::RING_CUDA,
                ..good
            },
            libc::EINVAL,
        ),
        (
            "surface handle out of range",
            abi::StreamRing {
                ring: 1 << 40,
                flags: abi::RING_CUDA,
                ..good
            },
            libc::EINVAL,
        ),
    ];
    for (what, mut a, errno) in cases {
        for (i, w) in [&control.writing, &control.produced, &control.waits]
            .iter()
            .enumerate()
        {
            w.store(7 + i as u64, Ordering::Relaxed);
        }
        // SAFETY: the ring and the control block are live and read only through atomics.
        let r = unsafe { dev.stream_ring_raw(&mut a) };
        expect_errno(what, r, errno)?;
        let words = [&control.writing, &control.produced, &control.waits]
            .map(|w| w.load(Ordering::Relaxed));
        ensure!(
            words == [7, 8, 9],
            "{what}: the control block changed: {words:?}"
        );
    }
    let after = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    ensure!(
        after.source_sent == before.source_sent,
        "a refused ring read records: {before:?} -> {after:?}"
    );
    // A surface smaller than the ring (where host surfaces exist: not on Linux 4.x).
    if Needs::HostSurface.unmet(dev).is_none() {
        let handle = ctx_err("PIN_HOST", dev.pin_host(ring.addr(), 4 * 4096))?;
        let mut a = abi::StreamRing {
            ring: handle.into(),
            flags: abi::RING_CUDA,
            ..good
        };
        // SAFETY: as above.
        let r = unsafe { dev.stream_ring_raw(&mut a) };
        ctx_err("UNPIN", dev.unpin_cuda(handle))?;
        expect_errno("a ring larger than its surface", r, libc::EINVAL)?;
    }
    // The good argument runs.
    let mut a = good;
    // SAFETY: as above.
    ctx_err("STREAM_RING", unsafe { dev.stream_ring_raw(&mut a) })?;
    ensure!((a.produced, a.chains) == (8, 2), "the good ring: {a:?}");
    off(dev)
}

/// A sleeper on a ring's eventfd (`RING_EVENTFD`) is woken once per chain, never while the driver only
/// waits, and once more when the ring ends. Filling: a back-pressure ring of 8 slots in chains of 4 that
/// nobody consumes fills up in two chains, whose two signals arrive; then the driver waits for room and
/// 300 ms pass with no signal; the stop word ends the ring and its end's signal wakes the sleeper.
/// Emptying (`RING_H2C`, 4 slots, 12 in all, chains of up to 2): this thread writes slots, sleeping on the
/// eventfd whenever the ring is full, and the signals it reads total the chains plus the end. Fails if
/// the driver signalled before its store (the sleeper would find nothing and sleep through the last
/// chain), never at the end (the 10 s wait for it fails), on its naps (the quiet 300 ms), or not at all.
fn ring_wakes_its_sleeper_after_each_chain_and_at_its_end(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    on_demand(dev, RECORD)?;
    let mut ring = ctx_err(
        "mmap",
        Mapping::new(8 * 4096, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let addr = ring.addr();
    let wake = ctx_err("eventfd", EventFd::new())?;
    let control = SharedControl::default();
    let ring_arg = |flags: u32, slots: u32, total: u64, chain_slots: u32| abi::StreamRing {
        ring: addr,
        control: std::ptr::from_ref(&control) as u64,
        slot_bytes: 4096,
        total,
        slots,
        chain_slots,
        flags: flags | abi::RING_EVENTFD,
        eventfd: wake.raw(),
        ..Default::default()
    };
    let ten_s = Duration::from_secs(10);
    let filled = std::thread::scope(|scope| {
        let t = scope.spawn(|| {
            let mut a = ring_arg(0, 8, 0, 4);
            // SAFETY: the ring and the control block outlive this scope and are read only through
            // atomics (or not at all).
            unsafe { dev.stream_ring_raw(&mut a) }.map(|()| a)
        });
        let r = (|| {
            let mut signals = 0;
            while signals < 2 {
                match wake.wait(ten_s) {
                    Ok(Some(n)) => signals += n,
                    other => {
                        return Err(format!("after {signals} of 2 chains' signals: {other:?}"));
                    }
                }
            }
            let p = control.produced.load(Ordering::Acquire);
            ensure!(
                signals == 2 && p == 8,
                "{signals} signals and {p} slots for two chains"
            );
            wait_for("the driver to wait for room", ten_s, || {
                control.waits.load(Ordering::Acquire) > 0
            })?;
            let quiet = wake.wait(Duration::from_millis(300));
            ensure!(
                matches!(quiet, Ok(None)),
                "a signal while the driver only waited: {quiet:?}"
            );
            Ok(())
        })();
        control.stop.store(1, Ordering::Release);
        let end = wake.wait(ten_s);
        let a = t.join().map_err(|_| "ring thread panicked".to_string())?;
        r?;
        ensure!(
            matches!(end, Ok(Some(1))),
            "the ring's end did not wake its sleeper: {end:?}"
        );
        ctx_err("STREAM_RING stopped", a)
    })?;
    ensure!(
        (filled.produced, filled.chains) == (8, 2) && filled.waits >= 1,
        "the filled ring: {filled:?}"
    );

    let per = 4096 / RECORD as usize;
    let (slots, total) = (4u64, 12u64);
    for w in [
        &control.writing,
        &control.produced,
        &control.consumed,
        &control.stop,
    ] {
        w.store(0, Ordering::Relaxed);
    }
    let emptied = std::thread::scope(|scope| {
        let t = scope.spawn(|| {
            let mut a = ring_arg(abi::RING_H2C, slots as u32, total, 2);
            // SAFETY: as above; this thread writes a slot only once the driver released it (`consumed`).
            unsafe { dev.stream_ring_raw(&mut a) }.map(|()| a)
        });
        let mut signals = 0;
        let r = (|| {
            for n in 0..total {
                while n >= control.consumed.load(Ordering::Acquire) + slots {
                    match wake.wait(ten_s) {
                        Ok(Some(k)) => signals += k,
                        other => return Err(format!("asleep for room for slot {n}: {other:?}")),
                    }
                }
                write_slot(&mut ring, slots, n);
                control.produced.store(n + 1, Ordering::Release);
            }
            Ok(())
        })();
        if r.is_err() {
            control.stop.store(1, Ordering::Release);
        }
        let a = t.join().map_err(|_| "ring thread panicked".to_string())?;
        r?;
        let a = ctx_err("STREAM_RING into the checker", a)?;
        // The rest: signals not yet read, the end's among them.
        while let Ok(Some(k)) = wake.wait(Duration::ZERO) {
            signals += k;
        }
        ensure!(
            a.produced == total && signals == a.chains + 1,
            "{signals} signals for {} chains and the end: {a:?}",
            a.chains
        );
        Ok::<_, String>(a)
    })?;
    let s = ctx_err("STREAM QUERY", dev.stream(abi::STREAM_QUERY, false, 0, 0))?;
    let want = total * per as u64;
    ensure!(
        (u64::from(s.sink_good), s.sink_gaps, s.sink_crc_errors) == (want, 0, 0),
        "the checker after the sleeping producer's {want} records: {s:?} ({emptied:?})"
    );
    off(dev)
}

/// A ring the driver fills through a PIN_HOST surface ends when the surface does, mid-ring: once when
/// another thread unpins the handle (the unpin waits for the chain in flight; the next chain finds the
/// handle gone), once when the process unmaps the memory (the surface's free callback waits for the chain
/// in flight). Both end with EINVAL, and the card works on. Fails if the driver kept a surface use
/// between chains (the unpin or the munmap would never return: the test times out) or ran a chain on
/// freed memory (a splat, a DMA-API error the harness counts).
fn ring_on_a_surface_ends_with_the_surface(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    quiet_sigusr1()?;
    on_demand(dev, RECORD)?;
    for by_munmap in [false, true] {
        let how = if by_munmap { "munmap" } else { "UNPIN" };
        let ring = ctx_err(
            "mmap",
            Mapping::new(8 * 4096, libc::PROT_READ | libc::PROT_WRITE),
        )?;
        let handle = ctx_err("PIN_HOST", dev.pin_host(ring.addr(), 8 * 4096))?;
        let control = SharedControl::default();
        let me = std::sync::atomic::AtomicU64::new(0);
        let mut ring = Some(ring);
        let r = std::thread::scope(|scope| {
            let t = endless_ring(scope, dev, handle.into(), abi::RING_CUDA, &control, &me);
            produced(&control, &me, 32)?;
            if by_munmap {
                drop(ring.take());
            } else {
                if let Err(e) = dev.unpin_cuda(handle) {
                    control.stop.store(1, Ordering::Release);
                    return Err(format!("UNPIN mid-ring: {e}"));
                }
            }
            join_ring(t, &control, &me, &format!("the ring to end after {how}"))
        })?;
        expect_errno(&format!("STREAM_RING after {how}"), r, libc::EINVAL)?;
        if by_munmap {
            // The handle is still the file's; its memory is gone.
            expect_errno("UNPIN after munmap", dev.unpin_cuda(handle), libc::EINVAL)?;
        }
    }
    let src = vec![0xa5u8; 4096];
    let mut dst = vec![0u8; 4096];
    ctx_err("H2C2H after the rings", dev.h2c2h(&src, &mut dst))?;
    ensure!(
        dst == src,
        "the round trip after the rings moved wrong bytes"
    );
    off(dev)
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
