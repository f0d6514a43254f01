//! Surprise removal: the PCI device goes away (sysfs `remove`, as a hot-unplug does) while a DMA runs and
//! files are open. The DMA and every later ioctl on those files fail with ENODEV, the node disappears, and a
//! rescan brings the card back, working. The harness's kernel checks (no splat, no kmemleak report, clean
//! unload) cover the part a test cannot see: nothing mapped or leaked at unbind.
//!
//! Registered last: the shared fd of the suite is dead afterwards.

use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use gdr_model_control::Engine;
use picoevb_regs::pci;

use super::cuda::{flavour, host_twin, pin, surface, surface_to_host};
use super::isolation::own_ram;
use super::regcache::{open_uncached, quiesce, used_once};
use super::{
    Ctx, Needs, Test, TestResult, card_state, ctx_err, ensure, expect_errno, extended, pins_are,
    round_trip, test,
};
use crate::buf::GuardedBuf;
use crate::dev::Device;
use crate::kstat;

pub fn register(v: &mut Vec<Test>) {
    v.push(test("removal::surprise_unplug_mid_dma", surprise_unplug));
    v.push(test("removal::remove_mid_dma_then_rescan", remove_mid_dma));
    v.push(
        test(
            "removal::stream_waiting_on_its_source",
            stream_waiting_on_its_source,
        )
        .needs(Needs::Stream),
    );
    v.push(test("removal::mid_stream_ring", mid_stream_ring).needs(Needs::Stream));
    v.extend(host_twin(
        test("removal::unmaps_an_idle_pinned_surface", |_| Ok(())).needs(Needs::Provider),
        idle_pinned_surface,
    ));
    v.push(test(
        "removal::wedged_engine_keeps_pins_until_unbind",
        wedged_engine,
    ));
    v.push(test(
        "removal::probe_stops_a_left_running_engine",
        probe_stops_left_running_engine,
    ));
    v.push(test("removal::open_races_probe_and_remove", |ctx| {
        open_races_probe(ctx, RACE_ROUNDS)
    }));
    v.push(extended(
        "removal::open_races_probe_and_remove_long",
        |ctx| open_races_probe(ctx, RACE_ROUNDS_EXTENDED),
    ));
    v.push(
        test(
            "removal::probe_after_dma_parms_cleared",
            probe_after_dma_parms_cleared,
        )
        .needs(Needs::Provider),
    );
}

/// The sysfs folders of the cards: the PCI functions with the design's vendor and device IDs. All of them
/// go (the node of a card cannot be told from sysfs), and all come back on the rescan.
pub(super) fn card_sysfs() -> Result<Vec<PathBuf>, String> {
    let hex = |p: &PathBuf, f: &str| {
        fs::read_to_string(p.join(f))
            .ok()
            .and_then(|s| u32::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok())
    };
    let entries =
        fs::read_dir("/sys/bus/pci/devices").map_err(|e| format!("/sys/bus/pci/devices: {e}"))?;
    let cards: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            hex(p, "vendor") == Some(u32::from(pci::VENDOR_ID))
                && hex(p, "device") == Some(u32::from(pci::DEVICE_ID))
        })
        .collect();
    if cards.is_empty() {
        return Err("no PCI device 10de:0001 in sysfs".into());
    }
    Ok(cards)
}

pub(super) fn wait_for(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
) -> TestResult {
    let t0 = Instant::now();
    while !cond() {
        ensure!(t0.elapsed() < timeout, "{what}: not within {timeout:?}");
        thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

fn is_enodev(r: &io::Result<impl Sized>) -> bool {
    matches!(r, Err(e) if e.raw_os_error() == Some(libc::ENODEV))
}

/// The model drops off the bus in the middle of a DMA (reads all ones, never completes): the DMA ends with
/// ENODEV within the engine timeout, not a hang and not ETIMEDOUT, and every later ioctl fails at once.
/// Then the card is plugged back in, removed and rescanned (what pciehp does on re-insertion), and works.
fn surprise_unplug(ctx: &mut Ctx) -> TestResult {
    let dev_path = ctx.dev_path.to_string();
    let busy = Device::open(&dev_path).map_err(|e| format!("open {dev_path}: {e}"))?;
    let cache = ctx_err("ABI_INFO", busy.has_reg_cache())?;
    let mut src = vec![0u8; 1 << 20];
    ctx.rng.fill(&mut src);
    // Slow transfers, so the unplug lands while one is in flight.
    ctx.rpc.get()?.inject_slow(0, 50)?;
    let rpc = ctx.rpc.get()?;
    let outcome = thread::scope(|s| {
        let worker = s.spawn(|| {
            let mut dst = vec![0u8; 1 << 20];
            loop {
                let t0 = Instant::now();
                if let Err(e) = busy.h2c2h(&src, &mut dst) {
                    return (e, t0.elapsed());
                }
            }
        });
        thread::sleep(Duration::from_millis(400));
        let unplugged = rpc.plug(false);
        let r = worker.join().map_err(|_| "DMA thread panicked".to_string());
        unplugged.and(r)
    });
    let (err, took) = outcome?;
    ctx.rpc.get()?.clear()?;
    ensure!(
        err.raw_os_error() == Some(libc::ENODEV),
        "the DMA in flight at the unplug failed with {err}, want ENODEV"
    );
    ensure!(
        took < Duration::from_secs(30),
        "the failing DMA took {took:?}"
    );
    refuses_everything(&busy, cache, "after unplug")?;
    drop(busy);

    ctx.rpc.get()?.plug(true)?;
    remove_all(&card_sysfs()?)?;
    wait_for("/dev node removed", Duration::from_secs(5), || {
        fs::metadata(&dev_path).is_err()
    })?;
    rescan_and_use(ctx, &dev_path)
}

fn remove_mid_dma(ctx: &mut Ctx) -> TestResult {
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let busy = Device::open(&dev_path).map_err(|e| format!("open {dev_path}: {e}"))?;
    // A buffer this file has cached when the card goes: unbind must drop its mapping too (DMA-API debug
    // reports a mapping left behind at unbind, which the harness's splat check catches).
    let kept = GuardedBuf::new(8192, 1);
    let cache = ctx_err("ABI_INFO", busy.has_reg_cache())?;
    if cache {
        used_once(&busy, kept.as_slice(), "a buffer to cache")?;
        ctx_err("H2C of a buffer to cache", busy.h2c(kept.as_slice(), 0))?;
        let st = ctx_err("REG_CACHE QUERY", busy.reg_cache_query())?;
        ensure!(st.entries >= 1, "nothing cached before the removal: {st:?}");
    }
    let stop = AtomicBool::new(false);
    let mut src = vec![0u8; 4 << 20];
    ctx.rng.fill(&mut src);

    // One thread loops 4 MiB round trips until the card goes away under it.
    let outcome = thread::scope(|s| {
        let worker = s.spawn(|| {
            let mut dst = vec![0u8; 4 << 20];
            let mut done = 0u32;
            loop {
                let r = busy.h2c2h(&src, &mut dst);
                match r {
                    Ok(_) if !stop.load(Ordering::Relaxed) => done += 1,
                    Ok(_) => {
                        return Err(format!("DMA kept succeeding after removal ({done} before)"));
                    }
                    Err(e) => return Ok((done, e)),
                }
            }
        });
        thread::sleep(Duration::from_millis(300));
        let removed = remove_all(&sysfs);
        stop.store(true, Ordering::Relaxed);
        let r = worker
            .join()
            .map_err(|_| "DMA thread panicked".to_string())?;
        removed?;
        r
    })?;
    let (before, err) = outcome;
    ensure!(
        err.raw_os_error() == Some(libc::ENODEV),
        "the DMA running at removal failed with {err} (after {before} good ones), want ENODEV"
    );

    refuses_everything(&busy, cache, "after removal")?;
    wait_for("/dev node removed", Duration::from_secs(5), || {
        fs::metadata(&dev_path).is_err()
    })?;
    drop(busy);

    // The card comes back on a rescan and works.
    rescan_and_use(ctx, &dev_path)
}

/// The card goes while a C2H waits on the stream source (one record every 10 ms, 64 asked for): the engine
/// is stopped mid-wait, the request fails with ENODEV well before the source would have produced its
/// records, and the card comes back on a rescan, its source stopped again. Fails if removal waited for the
/// source (the request would end after about 640 ms, successfully) or the stopped engine wedged the card
/// (EIO, a "still busy" line), and on any splat or leak the harness sees.
fn stream_waiting_on_its_source(ctx: &mut Ctx) -> TestResult {
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let busy = Device::open(&dev_path).map_err(|e| format!("open {dev_path}: {e}"))?;
    ctx_err(
        "STREAM restart (every 10 ms)",
        busy.stream_restart(256, 1_250_000),
    )?;
    let started = Instant::now();
    let outcome = thread::scope(|s| {
        let worker = s.spawn(|| {
            let mut recs = vec![0u8; 64 * 256];
            busy.c2h_stream(&mut recs).map(|_| started.elapsed())
        });
        thread::sleep(Duration::from_millis(100));
        let removed = remove_all(&sysfs);
        let r = worker
            .join()
            .map_err(|_| "stream thread panicked".to_string())?;
        removed?;
        Ok::<_, String>(r)
    })?;
    match outcome {
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
        Err(e) => {
            return Err(format!(
                "the waiting stream C2H failed with {e}, want ENODEV"
            ));
        }
        Ok(t) => {
            return Err(format!(
                "the stream C2H succeeded after {t:?} despite the removal"
            ));
        }
    }
    back_with_its_source_off(ctx, busy, &dev_path)
}

/// The card goes while the driver fills a stream ring (drop-oldest, until stopped, nobody consuming): the
/// ring's call ends with ENODEV (the chain in flight is stopped, the next one finds the card gone), its
/// counters as last published (`writing` at most one chain ahead of `produced`), and the card comes back
/// on a rescan. Fails if removal waited for the ring to end (the test would time out: nothing stops it)
/// or the ring went on after it, and on any splat or leak the harness sees.
fn mid_stream_ring(ctx: &mut Ctx) -> TestResult {
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let busy = Device::open(&dev_path).map_err(|e| format!("open {dev_path}: {e}"))?;
    ctx_err("STREAM restart (on demand)", busy.stream_restart(256, 0))?;
    let ring = ctx_err(
        "mmap",
        crate::dev::Mapping::new(8 * 4096, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    super::stream::quiet_sigusr1()?;
    let control = picoevb_logic::stream_ring::SharedControl::default();
    let me = AtomicU64::new(0);
    let addr = ring.addr();
    let outcome = thread::scope(|s| {
        let worker = super::stream::endless_ring(s, &busy, addr, 0, &control, &me);
        // Without progress the ring is ended (stop word, SIGUSR1) and the test fails.
        let going = super::stream::produced(&control, &me, 32);
        let removed = if going.is_ok() {
            remove_all(&sysfs)
        } else {
            Ok(())
        };
        let r = worker
            .join()
            .map_err(|_| "ring thread panicked".to_string())?;
        going?;
        removed?;
        Ok::<_, String>(r)
    })?;
    match outcome {
        Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
        Err(e) => return Err(format!("the ring failed with {e}, want ENODEV")),
        Ok(a) => return Err(format!("the ring succeeded despite the removal: {a:?}")),
    }
    let (w, p) = (
        control.writing.load(Ordering::Acquire),
        control.produced.load(Ordering::Acquire),
    );
    ensure!(
        p <= w && w <= p + 2,
        "counters after the removal: writing {w}, produced {p}"
    );
    back_with_its_source_off(ctx, busy, &dev_path)
}

/// After a removal that ended a stream: the node goes, `busy` (the file that streamed) is closed, and the
/// card comes back on a rescan, works, and gets its source turned off (the model keeps it across the rescan).
fn back_with_its_source_off(ctx: &mut Ctx, busy: Device, dev_path: &str) -> TestResult {
    wait_for("/dev node removed", Duration::from_secs(5), || {
        fs::metadata(dev_path).is_err()
    })?;
    drop(busy);
    rescan_and_use(ctx, dev_path)?;
    let again = ctx_err("open after rescan", Device::open(dev_path))?;
    ctx_err(
        "STREAM SET (off) after rescan",
        again.stream(picoevb_abi::STREAM_SET, false, 256, 0),
    )
    .map(|_| ())
}

/// A GPU surface pinned and idle when the card goes (a DMA from it has finished, none runs, its memory stays,
/// so no free callback): removal drops the surface's DMA mapping, as it must drop every mapping of the device
/// before unbind, and keeps the pin; the DMA on it then fails with ENODEV, and close releases the pin. Wants
/// no DMA-API debug error and the FOLL_PIN count back where it was after close. Fails on a removal that skips
/// an idle surface (DMA-API debug at unbind: "device driver has pending DMA allocations while released from
/// device", counted in error_count and a splat for the harness), and on a close that forgets a detached
/// surface's pin (the pages stay pinned).
fn idle_pinned_surface(ctx: &mut Ctx) -> TestResult {
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let state = card_state(&dev_path)?;
    // Cached buffers of the shared file are released by removal too; none may blur the pin counts.
    quiesce(ctx.dev)?;
    let before = kstat::read()?;
    let dev = open_uncached(ctx)?;
    let mut s = surface(flavour(&dev)?, 65536)?;
    let h = pin(&dev, &s)?;
    surface_to_host(&dev, &mut ctx.rng, &mut s, h, 4096, 0)?;
    let pinned = kstat::pinned_pages()?;
    let st = fs::read_to_string(&state).map_err(|e| format!("read {state}: {e}"))?;
    let surfaces: Vec<&str> = st.lines().filter(|l| l.starts_with("surface ")).collect();
    ensure!(
        matches!(&surfaces[..], [l] if l.ends_with(" users 0 dead 0 unpinning 0 detached 0 freed 0")),
        "want the one pinned surface listed idle in {state}: {}",
        st.replace('\n', " | ")
    );

    let after = removed_without_dma_errors(&sysfs, &dev_path, &before, "the idle surface")?;
    ensure!(
        after.pinned_pages == pinned,
        "removal changed the FOLL_PIN count from {pinned} to {}: the pin must stay until close",
        after.pinned_pages
    );
    expect_errno(
        "H2C from the surface after removal",
        dev.h2c_cuda(h.into(), 0, 4096),
        libc::ENODEV,
    )?;
    drop(dev);
    pins_are(before.pinned_pages, Duration::from_secs(5), "after close")?;
    // Its memory goes only now: no pin is left for a callback to free.
    ctx_err("munmap of the surface", s.unmap())?;
    rescan_and_use(ctx, &dev_path)
}

/// An engine that stays busy after the driver stopped it (the model's `stuck` fault) wedges the card: the
/// DMA fails with EIO, every later request with EIO at once, and the DMA's pages stay pinned, even after
/// close, until unbind (the device might still write them); bus mastering goes off, which ends the model's
/// transfer. Remove and rescan bring the card back. Fails on a driver that unpins when stop fails (the
/// pinned-page count drops back at once) or that lets the next request start on the busy engine.
fn wedged_engine(ctx: &mut Ctx) -> TestResult {
    quiesce(ctx.dev)?;
    let dev = open_uncached(ctx)?;
    own_ram(&dev)?;
    let base = kstat::pinned_pages()?;
    let src = GuardedBuf::new(65536, 0);
    let addr = src.as_slice().as_ptr() as u64;
    let pages = ((addr + 65536).div_ceil(4096) - addr / 4096) as i64;
    ctx.rpc.get()?.inject("stuck", 1)?;
    let r = dev.h2c(src.as_slice(), 0);
    ctx.rpc.get()?.clear()?;
    expect_errno("H2C on an engine that will not stop", r, libc::EIO)?;
    wedged_until_unbind(ctx, dev, base, pages)
}

/// After a request on an engine that would not stop: the card is wedged (EIO at once), the request's
/// `pages` stay pinned above `base`, even after close, until unbind releases them all; a rescan brings the
/// card back.
pub(super) fn wedged_until_unbind(ctx: &mut Ctx, dev: Device, base: i64, pages: i64) -> TestResult {
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    pins_are(base + pages, Duration::ZERO, "after the wedge")?;
    expect_errno(
        "C2H on the wedged card",
        dev.c2h(&mut [0u8; 4096], 0),
        libc::EIO,
    )?;
    drop(dev);
    pins_are(base + pages, Duration::ZERO, "after closing the file")?;
    remove_all(&sysfs)?;
    wait_for("/dev node removed", Duration::from_secs(5), || {
        fs::metadata(&dev_path).is_err()
    })?;
    pins_are(base, Duration::from_secs(5), "after unbind")?;
    rescan_and_use(ctx, &dev_path)
}

/// The bench provider's control that clears an unbound device's `dma_parms`.
const CLEAR_DMA_PARMS: &str = "/sys/module/gdr_nv_p2p/parameters/clear_dma_parms";

/// Another driver was bound to the card before and cleared its `dev.dma_parms` on remove (NVIDIA's reference
/// driver does): unbind picoevb, clear them (the bench provider stands in for that driver), bind picoevb
/// again. Probe must not warn (the harness counts a WARNING as a splat) and the card must work. Fails on a
/// driver that calls dma_set_max_seg_size without dma_parms (WARN_ON_ONCE in dma_set_max_seg_size).
fn probe_after_dma_parms_cleared(ctx: &mut Ctx) -> TestResult {
    let dev_path = ctx.dev_path.to_string();
    rebind_all(|cards| {
        cards.iter().try_for_each(|bdf| {
            fs::write(CLEAR_DMA_PARMS, bdf).map_err(|e| format!("{CLEAR_DMA_PARMS} <- {bdf}: {e}"))
        })
    })?;
    rescan_and_use(ctx, &dev_path)
}

/// NVIDIA's reference driver never stops its engines on remove: unbound mid-transfer, it leaves an engine
/// running, and the PCI core turns bus mastering off, so the engine holds its next descriptor fetch (the
/// model does so, as PCIe requires). The next probe must stop both engines before it enables bus mastering;
/// otherwise the engine goes on with the unbound driver's chain, in memory that belongs to somebody else by
/// now. Here: a round trip leaves the SGDMA registers pointing at picoevb's own chain, which unbind frees;
/// while no driver is bound the model sets H2C's Run again (`leave_running`, card 0), and picoevb binds.
/// Wants the engine held until probe (else the setup proves nothing), no descriptor fetched by it
/// (`stray_dma` unchanged), no engine still waiting for the bus, and a working card; the harness wants 0 splats.
/// Fails on a probe that enables bus mastering before it quiesces the engines: the held engine fetches the
/// freed chain as soon as bus mastering is on (stray_dma 1).
fn probe_stops_left_running_engine(ctx: &mut Ctx) -> TestResult {
    let dev_path = ctx.dev_path.to_string();
    {
        let dev = open_uncached(ctx)?;
        round_trip(&dev, &mut ctx.rng, 4096, 0, 0, 0)?;
    }
    let before = ctx.rpc.get()?.state()?;
    rebind_all(|_| {
        let rpc = ctx.rpc.get()?;
        rpc.leave_running(Engine::H2c)?;
        let s = rpc.state()?;
        ensure!(
            s.bus_waits == [Engine::H2c]
                && s.h2c.errors == before.h2c.errors
                && s.stray_dma == before.stray_dma,
            "the left-running H2C engine is not held while bus mastering is off: waiting for the bus {:?}, \
             {} new errors, {} stray descriptor fetches",
            s.bus_waits,
            s.h2c.errors - before.h2c.errors,
            s.stray_dma - before.stray_dma
        );
        Ok(())
    })?;
    wait_for("/dev node back after bind", Duration::from_secs(10), || {
        fs::metadata(&dev_path).is_ok()
    })?;
    let s = ctx.rpc.get()?.state()?;
    ensure!(
        s.stray_dma == before.stray_dma && s.bus_waits.is_empty(),
        "after probe: the engine left running fetched {} descriptor(s) of the unbound driver's chain \
         (bus mastering on before the engines were stopped); still waiting for the bus: {:?}",
        s.stray_dma - before.stray_dma,
        s.bus_waits
    );
    let again = ctx_err("open after bind", Device::open(&dev_path))?;
    round_trip(&again, &mut ctx.rng, 65536, 0, 1, 2).map(|_| ())
}

/// Unbinds picoevb from every card, runs `unbound` with their PCI addresses while no driver holds them,
/// and binds picoevb again.
fn rebind_all(unbound: impl FnOnce(&[String]) -> TestResult) -> TestResult {
    const DRIVER: &str = "/sys/bus/pci/drivers/picoevb";
    let write = |f: &str, v: &str| fs::write(f, v).map_err(|e| format!("{f} <- {v}: {e}"));
    let cards = card_sysfs()?
        .iter()
        .map(|card| {
            card.file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string)
                .ok_or_else(|| format!("{}: no PCI address", card.display()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for bdf in &cards {
        write(&format!("{DRIVER}/unbind"), bdf)?;
    }
    let r = unbound(&cards);
    for bdf in &cards {
        write(&format!("{DRIVER}/bind"), bdf)?;
    }
    r
}

/// Every ioctl on a file opened before the card went fails with ENODEV, at once: LED, CARD_INFO, a C2H and,
/// where the driver has a registration cache (`cache`, asked before: ABI_INFO fails now too), REG_CACHE.
fn refuses_everything(busy: &Device, cache: bool, when: &str) -> TestResult {
    let t0 = Instant::now();
    let r = busy.set_leds(0);
    ensure!(is_enodev(&r), "LED {when}: {r:?}");
    let r = busy.card_info();
    ensure!(is_enodev(&r), "CARD_INFO {when}: {r:?}");
    let mut small = GuardedBuf::new(4096, 0);
    let r = busy.c2h(small.as_mut_slice(), 0);
    ensure!(is_enodev(&r), "C2H {when}: {r:?}");
    if cache {
        let r = busy.reg_cache_query();
        ensure!(is_enodev(&r), "REG_CACHE {when}: {r:?}");
    }
    ensure!(
        t0.elapsed() < Duration::from_secs(1),
        "ioctls {when} took {:?}",
        t0.elapsed()
    );
    Ok(())
}

/// Remove/rescan rounds in `open_races_probe`: CI's, and the extended run's. A round costs about 12 s of
/// TCG time (the spinning openers compete with the rescan), and 12 rounds were half of a whole x86_64
/// boot's test time.
const RACE_ROUNDS: u32 = 4;
const RACE_ROUNDS_EXTENDED: u32 = 24;
/// Threads opening the node meanwhile.
const RACE_OPENERS: usize = 4;

/// Threads open the node in a tight loop while the card is removed and rescanned, again and again: an
/// opener blocked on the node as soon as probe creates it enters the driver's open the moment the
/// registration is published, so an open that ran before probe had written the card would use memory
/// that is not a card yet (before the fix: a KASAN report from `PicoevbFile::open`, usually on the
/// previous card, freed). Every open that succeeds must give a working file of card 0 or one that fails
/// with ENODEV (its card went away since), and the openers must have got in during the rounds.
fn open_races_probe(ctx: &mut Ctx, race_rounds: u32) -> TestResult {
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let stop = AtomicBool::new(false);
    let opened = AtomicU64::new(0);
    let rounds = thread::scope(|s| {
        let openers: Vec<_> = (0..RACE_OPENERS)
            .map(|_| {
                s.spawn(|| -> TestResult {
                    while !stop.load(Ordering::Relaxed) {
                        let f = match Device::open(&dev_path) {
                            Ok(f) => f,
                            Err(e)
                                if matches!(
                                    e.raw_os_error(),
                                    Some(libc::ENOENT | libc::ENODEV | libc::ENXIO)
                                ) =>
                            {
                                thread::yield_now();
                                continue;
                            }
                            Err(e) => return Err(format!("open {dev_path}: {e}")),
                        };
                        opened.fetch_add(1, Ordering::Relaxed);
                        match f.abi_info() {
                            Ok(i) => ensure!(
                                i.abi_version == picoevb_abi::ABI_VERSION && i.card_index == 0,
                                "a file opened during remove/rescan reads ABI_INFO {i:?}"
                            ),
                            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {}
                            Err(e) => {
                                return Err(format!("ABI_INFO on a file opened meanwhile: {e}"));
                            }
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        let rounds = (|| -> Result<u64, String> {
            let mut during = 0;
            for round in 0..race_rounds {
                let before = opened.load(Ordering::Relaxed);
                remove_all(&sysfs)?;
                wait_for("/dev node removed", Duration::from_secs(10), || {
                    fs::metadata(&dev_path).is_err()
                })?;
                fs::write("/sys/bus/pci/rescan", "1")
                    .map_err(|e| format!("rescan {round}: {e}"))?;
                wait_for("/dev node back", Duration::from_secs(10), || {
                    fs::metadata(&dev_path).is_ok()
                })?;
                // Let the openers in on the new card before the next removal.
                wait_for("an open of the new card", Duration::from_secs(10), || {
                    opened.load(Ordering::Relaxed) > before
                })?;
                during += 1;
            }
            Ok(during)
        })();
        stop.store(true, Ordering::Relaxed);
        let results: Vec<TestResult> = openers
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err("opener panicked".into())))
            .collect();
        super::first_failure(&results)?;
        rounds
    })?;
    ensure!(
        rounds == u64::from(race_rounds),
        "{rounds} of {race_rounds} rounds"
    );
    rescan_and_use(ctx, &dev_path)
}

/// Removes every card (`remove_all`), waits for `dev_path` to go and checks that DMA-API debug counted no
/// error at unbind since `before` (a mapping of `what` left behind); returns the counters after.
pub(super) fn removed_without_dma_errors(
    sysfs: &[PathBuf],
    dev_path: &str,
    before: &kstat::KernelCounters,
    what: &str,
) -> Result<kstat::KernelCounters, String> {
    remove_all(sysfs)?;
    wait_for("/dev node removed", Duration::from_secs(5), || {
        fs::metadata(dev_path).is_err()
    })?;
    let after = kstat::read()?;
    ensure!(
        after.dma_errors == before.dma_errors,
        "DMA-API debug counted {} errors at unbind (a mapping of {what} left behind?)",
        after.dma_errors - before.dma_errors
    );
    Ok(after)
}

/// Takes every card off the bus, as a hot-unplug does.
pub(super) fn remove_all(cards: &[PathBuf]) -> TestResult {
    cards.iter().try_for_each(|d| {
        fs::write(d.join("remove"), "1").map_err(|e| format!("remove {}: {e}", d.display()))
    })
}

/// Rescans the bus and checks that the card is back at `dev_path` and moves data.
pub(super) fn rescan_and_use(ctx: &mut Ctx, dev_path: &str) -> TestResult {
    fs::write("/sys/bus/pci/rescan", "1").map_err(|e| format!("rescan: {e}"))?;
    wait_for(
        "/dev node back after rescan",
        Duration::from_secs(10),
        || fs::metadata(dev_path).is_ok(),
    )?;
    let again = ctx_err("open after rescan", Device::open(dev_path))?;
    round_trip(&again, &mut ctx.rng, 65536, 0, 1, 2).map(|_| ())
}
