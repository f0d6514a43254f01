//! The round trip's full-duplex pipeline (kmod/picoevb/duplex.rs): chunk edges, the engine runs and
//! interrupts a request costs (from the model's counters), and faults that hit one engine in the middle
//! of a request: the ioctl fails, both engines are stopped, and the next round trip works.

use picoevb_logic::pipeline::Pipeline;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::{Ctx, Test, TestResult, ensure, h2c2h_check, test};

const PAGE: u64 = 4096;
/// Sizes at the pipeline's edges: one chunk exactly, one byte over it, two balanced chunks (40 KiB goes
/// as 2 x 20 KiB), three chunks and a ragged tail.
const EDGES: [usize; 5] = [32768, 32769, 40960, 98304, 98309];
/// Faults an engine reports in its status; the request must fail with the engine stopped.
const ERRORS: [&str; 4] = ["read_error", "write_error", "bad_magic", "desc_error"];
/// Runs of a 1 MiB round trip before the fault: step 0 is H2C (run 1), each step after runs H2C then C2H,
/// so 3 runs pass and the 4th is step 2's H2C, 4 pass and the 5th is step 2's C2H.
const MID: [(&str, u64); 2] = [("h2c", 3), ("c2h", 4)];

pub fn register(v: &mut Vec<Test>) {
    v.push(test("pipeline::chunk_edges", chunk_edges));
    v.push(test("pipeline::runs_and_interrupts", runs_and_interrupts));
    v.push(test(
        "pipeline::every_run_writes_back",
        every_run_writes_back,
    ));
    for fault in ERRORS {
        for (engine, after) in MID {
            // C2H has no write-error status: the model drops the host writes, the engine reports success.
            let silent = fault == "write_error" && engine == "c2h";
            v.push(test(
                format!("pipeline::{fault}_mid_{engine}"),
                move |ctx| mid_fault(ctx, fault, after, silent),
            ));
        }
    }
    for (engine, after) in MID {
        v.push(test(
            format!("pipeline::corrupt_data_mid_{engine}_detected"),
            move |ctx| mid_fault(ctx, "corrupt_data", after, true),
        ));
        v.push(test(format!("pipeline::hang_mid_{engine}"), move |ctx| {
            mid_fault(ctx, "hang", after, false)
        }));
    }
}

fn chunk_edges(ctx: &mut Ctx) -> TestResult {
    for len in EDGES {
        for (s, d) in [(0, 0), (1, 4095), (4093, 7)] {
            h2c2h_check(ctx.dev, &mut ctx.rng, len, s, d)?;
        }
    }
    Ok(())
}

/// A round trip of `n` chunks is `n` runs per engine (each chunk one chain) and between `n + 1` and `2n`
/// interrupts (one per step when the polled H2C is done by the time C2H's interrupt arrives); chunks of
/// at most `pipeline::POLL_BYTES` are polled, so from 0. Fails on the serial round trip (1 MiB: 16 runs
/// and 32 interrupts) and on a driver that interrupts more than twice per chunk.
fn runs_and_interrupts(ctx: &mut Ctx) -> TestResult {
    for len in [4096usize, 65536, 1 << 20] {
        let plan = Pipeline::new(len as u64, FPGA_RAM_SIZE, PAGE).map_err(|e| format!("{e:?}"))?;
        let n = plan.chunks();
        let (lo, hi) = plan.irq_bounds();
        ctx.rpc.get()?.reset_counters()?;
        let s0 = ctx.rpc.get()?.state()?;
        h2c2h_check(ctx.dev, &mut ctx.rng, len, 0, 0)?;
        let s1 = ctx.rpc.get()?.state()?;
        let (h, c) = (s1.h2c.runs - s0.h2c.runs, s1.c2h.runs - s0.c2h.runs);
        let irqs = s1.irqs() - s0.irqs();
        println!("GUEST PIPELINE {len} bytes: {n} chunks, runs h2c {h} c2h {c}, {irqs} interrupts");
        ensure!(
            h == n && c == n,
            "{len} bytes: {h} H2C and {c} C2H runs, want {n} each"
        );
        ensure!(
            s1.h2c.bytes - s0.h2c.bytes == len as u64 && s1.c2h.bytes - s0.c2h.bytes == len as u64,
            "{len} bytes: the engines moved {} and {}",
            s1.h2c.bytes - s0.h2c.bytes,
            s1.c2h.bytes - s0.c2h.bytes
        );
        ensure!(
            (lo..=hi).contains(&irqs),
            "{len} bytes: {irqs} interrupts, want {lo}..={hi}"
        );
    }
    Ok(())
}

/// Every engine run, one-way or in a round trip, polled or interrupted, has the engine write back its
/// completed count (the driver's latency fast path, `kmod/logic/src/engine.rs`) into host memory the
/// device may write: one write-back per run, none dropped as unmapped. Fails on a driver that leaves
/// poll mode off (no write-backs) or points the engine at an address it did not map (dropped writes).
fn every_run_writes_back(ctx: &mut Ctx) -> TestResult {
    let s0 = ctx.rpc.get()?.state()?;
    for len in [64usize, 4096, 16384, 65536] {
        let mut buf = vec![0u8; len];
        ctx.rng.fill(&mut buf);
        ctx.dev
            .h2c(&buf, 0)
            .map_err(|e| format!("h2c {len}: {e}"))?;
        ctx.dev
            .c2h(&mut buf, 0)
            .map_err(|e| format!("c2h {len}: {e}"))?;
        h2c2h_check(ctx.dev, &mut ctx.rng, len, 0, 0)?;
    }
    let s1 = ctx.rpc.get()?.state()?;
    for (name, a, b) in [("h2c", &s0.h2c, &s1.h2c), ("c2h", &s0.c2h, &s1.c2h)] {
        let (runs, wbs) = (b.runs - a.runs, b.writebacks - a.writebacks);
        println!("GUEST WRITEBACK {name}: {runs} runs, {wbs} write-backs");
        ensure!(
            runs > 0 && wbs == runs,
            "{name}: {wbs} write-backs for {runs} runs, want one each"
        );
    }
    ensure!(
        s1.dropped_writes == s0.dropped_writes,
        "{} device writes dropped as unmapped",
        s1.dropped_writes - s0.dropped_writes
    );
    Ok(())
}

/// `fault` hits the run after `after` runs of a 1 MiB round trip. The ioctl fails (or, for a fault the
/// engine cannot see, `silent`: the bytes differ), the engine after the faulty one never ran to the end of the request, and the next
/// round trip works. Fails if the driver returns success over an engine error, or leaves an engine
/// running or its status stale (the next request fails or moves wrong bytes).
fn mid_fault(ctx: &mut Ctx, fault: &str, after: u64, silent: bool) -> TestResult {
    let len = 1 << 20;
    ctx.rpc.get()?.clear()?;
    ctx.rpc.get()?.reset_counters()?;
    ctx.rpc.get()?.inject_after(fault, after, 1)?;
    let r = h2c2h_check(ctx.dev, &mut ctx.rng, len, 0, 1);
    let st = ctx.rpc.get()?.state()?;
    ctx.rpc.get()?.clear()?;
    ensure!(
        st.pending_faults.is_empty(),
        "{fault} after {after} runs never applied: {} H2C and {} C2H runs",
        st.h2c.runs,
        st.c2h.runs
    );
    match (&r, silent) {
        (Ok(_), _) => return Err(format!("{fault} after {after} runs: round trip succeeded")),
        (Err(e), true) => ensure!(e.contains("differ"), "{fault}: {e}"),
        (Err(e), false) => ensure!(!e.contains("differ"), "{fault}: {e}"),
    }
    // The request stopped where the fault hit: nowhere near the 64 runs of a whole 1 MiB.
    if !silent {
        let runs = st.h2c.runs + st.c2h.runs;
        ensure!(
            runs <= after + 2,
            "{fault} after {after} runs: the engines ran {runs} times, the request went on"
        );
    }
    // Both engines work again, at once, for a whole pipelined request.
    h2c2h_check(ctx.dev, &mut ctx.rng, len, 3, 0)
        .map(|_| ())
        .map_err(|e| format!("after {fault} mid-pipeline: {e}"))
}
