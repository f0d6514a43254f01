//! The driver's timing by the card's clock (`H2C_CARD_TIME`, `C2H_CARD_TIME`, ABI 1.8): with the model in
//! timing mode (switched on over its control channel for this test only), a timed request's `dma_time_ns`
//! is the engine's modeled busy time, which the model's counters report, so the driver-timed MB/s agree
//! with the model's. Fails if the driver times with the kernel's clock (TCG's wall time, nothing like the
//! modeled one) or arms the monitor after Run (an earlier run's cycles leak in). The sum over a request's
//! chains is host-tested (`engine_tests.rs`): here each request was one chain on both kernels.

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;
use picoevb_regs::xdma::Dir;

use super::{Ctx, Test, TestResult, ctx_err, ensure, test};
use crate::dev::{Device, Mapping};
use crate::rpc::Rpc;

pub fn register(v: &mut Vec<Test>) {
    v.push(test(
        "card_clock::driver_time_is_the_engines_busy_time",
        driver_time_is_the_engines_busy_time,
    ));
}

const RW: libc::c_int = libc::PROT_READ | libc::PROT_WRITE;

/// One timed request: H2C of `buf` to card RAM, C2H of card RAM into it, or (`stream`) C2H of the stream
/// source into it; the driver's `dma_time_ns`.
fn timed(dev: &Device, dir: Dir, buf: &mut Mapping, stream: bool) -> std::io::Result<u64> {
    let len = buf.len() as u64;
    match dir {
        Dir::H2c => {
            let mut a = abi::H2cDma {
                src: buf.addr(),
                len,
                flags: abi::H2C_CARD_TIME,
                ..Default::default()
            };
            // SAFETY: the device reads `len` bytes of our live mapping, mutably borrowed for the call.
            unsafe { dev.h2c_raw(&mut a) }.map(|()| a.dma_time_ns)
        }
        Dir::C2h => {
            let mut a = abi::C2hDma {
                dst: buf.addr(),
                len,
                flags: abi::C2H_CARD_TIME | if stream { abi::C2H_SRC_STREAM } else { 0 },
                ..Default::default()
            };
            // SAFETY: the device writes `len` bytes of our live mapping, mutably borrowed for the call; no
            // reference points into it.
            unsafe { dev.c2h_raw(&mut a) }.map(|()| a.dma_time_ns)
        }
    }
}

/// Four timed requests each: H2C and C2H of the whole card RAM, and with the stream block a 1 MiB C2H
/// from the source (as many chains as its pages need). For each, the driver's summed `dma_time_ns` against the engine's
/// busy time in the model's counters over the same requests: within 8 ns per run (the monitor counts
/// whole 8 ns cycles), so far inside 2 %.
fn driver_time_is_the_engines_busy_time(ctx: &mut Ctx) -> TestResult {
    let dev = ctx.dev;
    let stream = ctx_err("ABI_INFO", dev.abi_info())?.caps & abi::CAP_STREAM != 0;
    let rpc = ctx.rpc.get()?;
    let was_on = rpc.timing()?.enabled;
    if !was_on {
        rpc.timing_on()?;
    }
    let r = compare(dev, rpc, stream);
    if !was_on {
        rpc.timing_off()?;
    }
    r
}

fn compare(dev: &Device, rpc: &mut Rpc, stream: bool) -> TestResult {
    let ram = FPGA_RAM_SIZE as usize;
    let mut cases = vec![(Dir::H2c, ram, false), (Dir::C2h, ram, false)];
    if stream {
        ctx_err("STREAM restart", dev.stream_restart(4096, 0))?;
        cases.push((Dir::C2h, 1 << 20, true));
    }
    for (dir, len, from_source) in cases {
        let mut buf = ctx_err("mmap", Mapping::new(len, RW))?;
        // Untimed first: the buffer is pinned and cached before the timed ones.
        ctx_err("warm-up", timed(dev, dir, &mut buf, from_source))?;
        let before = rpc.timing()?;
        let mut driver_ns = 0;
        for _ in 0..4 {
            driver_ns += ctx_err("timed request", timed(dev, dir, &mut buf, from_source))?;
        }
        let after = rpc.timing()?;
        let (e0, e1) = match dir {
            Dir::H2c => (before.h2c, after.h2c),
            Dir::C2h => (before.c2h, after.c2h),
        };
        let (busy, runs) = (e1.busy_ns - e0.busy_ns, e1.runs - e0.runs);
        let what = format!(
            "{dir:?} {len} bytes{}",
            if from_source { " from the source" } else { "" }
        );
        ensure!(
            runs >= 4 && busy > 0,
            "{what}: {runs} runs, {busy} ns busy in the model's counters"
        );
        ensure!(
            driver_ns <= busy && busy - driver_ns < 8 * runs,
            "{what}: the driver timed {driver_ns} ns, the model's engine was busy {busy} ns over {runs} runs"
        );
        let mbps = |ns: u64| (4 * len) as f64 * 1000.0 / ns as f64;
        println!(
            "GUEST CARD CLOCK {what}: driver {:.1} MB/s, model {:.1} MB/s, {runs} runs",
            mbps(driver_ns),
            mbps(busy)
        );
    }
    if stream {
        ctx_err(
            "STREAM SET (off)",
            dev.stream(abi::STREAM_SET, false, 4096, 0),
        )?;
    }
    Ok(())
}
