//! Runs the registered tests and prints one result line each, then the summary line the harness parses.

use std::cell::RefCell;
use std::io::Write;
use std::panic::{self, AssertUnwindSafe};
use std::time::{Duration, Instant};

use crate::dev::Device;
use crate::kstat;
use crate::rng::Rng;
use crate::tests::{self, Ctx, Needs, RpcSlot};

pub struct Options {
    pub seed: u64,
    pub filter: Option<String>,
    pub extended: bool,
    pub list: bool,
    pub dev_path: String,
    pub rpc_path: String,
}

thread_local! {
    /// Message and location of the last panic, captured by the hook so a panicking test becomes a FAILED line.
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Prints the summary line and returns the process exit code. Skipped tests are neither passed nor failed.
pub fn summary(passed: usize, failed: usize, skipped: usize) -> i32 {
    println!("GUEST RESULT: {passed} passed, {failed} failed, {skipped} skipped");
    i32::from(failed != 0)
}

/// The line of a test that did not run: `TEST <name> ... skipped (<why>)`.
pub fn report_skip(name: &str, why: &str) {
    println!("TEST {name} ... skipped ({})", why.replace('\n', " | "));
    let _ = std::io::stdout().flush();
}

/// One result line; flushed at once so the harness sees progress live.
pub fn report(name: &str, r: &Result<(), String>) {
    match r {
        Ok(()) => println!("TEST {name} ... ok"),
        // The reason must stay on one line for the harness's parser.
        Err(e) => println!("TEST {name} ... FAILED: {}", e.replace('\n', " | ")),
    }
    let _ = std::io::stdout().flush();
}

/// A result line with the test's guest wall time, `[<seconds> s]` at its end: what CI's time budget is
/// spent on (TCG seconds, comparable only within one boot).
pub fn report_timed(name: &str, r: &Result<(), String>, took: Duration) {
    let t = took.as_secs_f64();
    match r {
        Ok(()) => println!("TEST {name} ... ok [{t:.1} s]"),
        Err(e) => println!(
            "TEST {name} ... FAILED: {} [{t:.1} s]",
            e.replace('\n', " | ")
        ),
    }
    let _ = std::io::stdout().flush();
}

pub fn run(opts: &Options) -> i32 {
    let selected: Vec<_> = tests::all()
        .into_iter()
        // A comma-separated list of substrings: a test runs if its name contains any of them.
        .filter(|t| {
            opts.filter
                .as_deref()
                .is_none_or(|f| f.split(',').any(|part| t.name.contains(part)))
        })
        .filter(|t| opts.extended || !t.extended)
        .collect();
    if opts.list {
        for t in &selected {
            let needs = match t.needs {
                Needs::Nothing => "",
                Needs::Provider => " (needs a GPU-memory provider)",
                Needs::NoProvider => " (needs no GPU-memory provider)",
                Needs::SecondCard => " (needs a second card)",
                Needs::RegCache => " (needs the registration cache)",
                Needs::JetsonRegCache => " (needs the Jetson provider and the registration cache)",
                Needs::JetsonProvider => " (needs the Jetson provider)",
                Needs::JetsonReaper => " (needs the Jetson provider and process_mrelease)",
                Needs::Iommu => " (needs an IOMMU)",
                Needs::RamOwner => " (needs the RAM ownership, ABI 1.2)",
                Needs::RegCacheWritebackFs => {
                    " (needs the registration cache, ext4 and loop devices)"
                }
                Needs::JetsonUserfaultfd => " (needs the Jetson provider and userfaultfd)",
                Needs::HostSurface => " (needs host surfaces)",
                Needs::DmaBuf => " (needs dma-buf import and udmabuf)",
                Needs::DmaBufExporter => " (needs dma-buf import and the bench exporter)",
                Needs::Stream => " (needs the stream block, ABI 1.5)",
                Needs::StreamHostRing => " (needs the stream block and host surfaces)",
                Needs::FailNth => " (needs fault injection and no virtio-iommu)",
            };
            let ext = if t.extended { " (extended)" } else { "" };
            println!("{}{ext}{needs}", t.name);
        }
        return 0;
    }
    println!("GUEST SEED {}", opts.seed);
    let dev = match Device::open(&opts.dev_path) {
        Ok(d) => d,
        Err(e) => {
            report(
                "basic::open_device",
                &Err(format!("open {}: {e}", opts.dev_path)),
            );
            return summary(0, 1, 0);
        }
    };
    // Before any test: `lifecycle::kernel_counters_back_to_baseline` compares the end state with this.
    let baseline = kstat::read();
    match &baseline {
        Ok(k) => println!("GUEST BASELINE {}", k.describe()),
        Err(e) => println!("GUEST BASELINE unavailable: {e}"),
    }
    let mut rpc = RpcSlot::new(&opts.rpc_path);
    panic::set_hook(Box::new(|info| {
        PANIC.with(|p| *p.borrow_mut() = Some(info.to_string()))
    }));
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for t in &selected {
        // Asked on a fresh fd: the suite's own goes stale (ENODEV) once a removal test has unplugged the
        // card, and a failing ABI_INFO makes every need count as met.
        let unmet = {
            let fresh = Device::open(&opts.dev_path).ok();
            t.needs.unmet(fresh.as_ref().unwrap_or(&dev))
        };
        if let Some(why) = unmet {
            skipped += 1;
            report_skip(&t.name, &why);
            continue;
        }
        let mut ctx = Ctx {
            dev: &dev,
            dev_path: &opts.dev_path,
            rng: Rng::for_test(opts.seed, &t.name),
            rpc: &mut rpc,
            baseline: &baseline,
        };
        let started = Instant::now();
        let r = panic::catch_unwind(AssertUnwindSafe(|| (t.run)(&mut ctx))).unwrap_or_else(|_| {
            let msg = PANIC
                .with(|p| p.borrow_mut().take())
                .unwrap_or_else(|| "unknown".into());
            Err(format!("panicked: {msg}"))
        });
        if r.is_ok() {
            passed += 1
        } else {
            failed += 1
        }
        report_timed(&t.name, &r, started.elapsed());
    }
    let _ = panic::take_hook();
    summary(passed, failed, skipped)
}
