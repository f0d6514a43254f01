//! Card removal racing a GPU surface's free callback: a callback that has begun must be over (its DMA
//! unmap done) before removal returns, since a device keeps no DMA mapping past unbind.
//!
//! The race is made deterministic with the bench provider's `hold_callback_unmap`: the callback stops inside
//! its unmap until the test lets it go. The surface belongs to a forked child, so its munmap (whose
//! invalidation runs the callback) is in an address space where no buffer of any file is cached: removal
//! drops cached buffers, and removing their mmu notifiers waits for an invalidation in progress in their
//! address space, which would serialise removal behind the held callback and hide the race.
//!
//! Registered with the removal tests (last): the suite's shared fd is dead afterwards.

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::cuda::{pin, surface};
use super::removal::{card_sysfs, remove_all, rescan_and_use, wait_for};
use super::{Ctx, Needs, Test, TestResult, card_state, ensure, test};
use crate::dev::Device;
use crate::kstat;
use crate::surface::Flavour;

pub fn register(v: &mut Vec<Test>) {
    v.push(
        test(
            "removal::waits_for_a_started_callback",
            waits_for_started_callback,
        )
        .needs(Needs::JetsonProvider),
    );
}

const HOLD: &str = "/sys/module/gdr_nv_p2p/parameters/hold_callback_unmap";
const HELD: &str = "/sys/module/gdr_nv_p2p/parameters/held_unmaps";
/// How long removal may take to reach its wait for the held callback.
const WATCH_FOR: Duration = Duration::from_secs(30);

/// The provider's hold, released when this value goes (also when the test bails out).
pub(super) struct Hold;

impl Hold {
    pub(super) fn on() -> Result<Self, String> {
        fs::write(HOLD, "Y").map_err(|e| format!("{HOLD}: {e}"))?;
        Ok(Hold)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = fs::write(HOLD, "N");
    }
}

pub(super) fn held() -> Result<u64, String> {
    kstat::read_u64(HELD)
}

/// Watches removal until it either returns (`done`: an error, the callback is still held) or waits for the
/// held callback (the card's debugfs `state` says `callbacks_awaited 1`): how long that took. A positive
/// sign of the wait, so the test does not depend on how long removal takes (about 2 s on the bench).
fn watch_removal(done: &AtomicBool, state: &str) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut last = String::new();
    loop {
        if done.load(Ordering::Acquire) {
            return Err(format!(
                "card removal returned after {} ms while a started free callback was still unmapping its surface",
                t0.elapsed().as_millis()
            ));
        }
        last = fs::read_to_string(state).unwrap_or(last);
        if last.lines().any(|l| l == "callbacks_awaited 1") {
            return Ok(t0.elapsed());
        }
        ensure!(
            t0.elapsed() < WATCH_FOR,
            "card removal neither returned nor waited for the callback within {WATCH_FOR:?}; {state}: {}",
            last.replace('\n', " | ")
        );
        thread::sleep(Duration::from_millis(10));
    }
}

pub(super) fn dma_api_errors() -> Result<u64, String> {
    kstat::read_u64(&format!("{}/error_count", kstat::DMA_API_DIR))
}

/// The child: pins a surface on a file of its own and unmaps it. Its exit status says where it failed.
fn child(dev_path: &str) -> i32 {
    let Ok(dev) = Device::open(dev_path) else {
        return 2;
    };
    let Ok(mut s) = surface(Flavour::Jetson, 65536) else {
        return 3;
    };
    if pin(&dev, &s).is_err() {
        return 4;
    }
    // Blocks while the provider holds the callback's unmap.
    if s.unmap().is_err() {
        return 5;
    }
    0
}

/// A child's surface is being freed (its munmap runs the free callback, which the provider holds inside
/// the DMA unmap) when the card is removed. Removal must wait for that unmap: the card's debugfs `state`
/// shows it waiting, and it returns once the hold is released; DMA-API debug counts no error at unbind. Fails
/// on a driver whose removal skips a surface whose callback has begun: removal returns while the callback
/// is held, and DMA-API debug reports "device driver has pending DMA allocations while released from
/// device" (a splat for the harness).
fn waits_for_started_callback(ctx: &mut Ctx) -> TestResult {
    let sysfs = card_sysfs()?;
    let dev_path = ctx.dev_path.to_string();
    let state = card_state(&dev_path)?;
    let errors = dma_api_errors()?;
    let hold = Hold::on()?;
    // SAFETY: the suite is single-threaded here (no test leaves threads behind), so the child may run
    // ordinary Rust; it never returns into the suite: it ends in _exit.
    let pid = unsafe { libc::fork() };
    ensure!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let rc = child(&dev_path);
        // SAFETY: ends the child without running the parent's destructors or atexit handlers.
        unsafe { libc::_exit(rc) };
    }
    let reap = || {
        let mut st = 0;
        // SAFETY: waits for our own child; `st` is a valid out pointer.
        let r = unsafe { libc::waitpid(pid, &mut st, 0) };
        ensure!(r == pid, "waitpid: {}", std::io::Error::last_os_error());
        ensure!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "child (open 2, surface 3, PIN_CUDA 4, munmap 5) ended with status {st:#x}"
        );
        Ok(())
    };
    let held_now = wait_for("the callback's unmap held", Duration::from_secs(10), || {
        held().is_ok_and(|n| n == 1)
    });
    if let Err(e) = held_now {
        drop(hold);
        return reap().and(Err(e));
    }
    let done = AtomicBool::new(false);
    let (seen, took) = thread::scope(|sc| {
        let remover = sc.spawn(|| {
            let t0 = Instant::now();
            let r = remove_all(&sysfs);
            done.store(true, Ordering::Release);
            r.map(|()| t0.elapsed())
        });
        let seen = watch_removal(&done, &state);
        drop(hold);
        let took = remover
            .join()
            .map_err(|_| "removal thread panicked".to_string())
            .and_then(|r| r);
        (seen, took)
    });
    reap()?;
    let took = took?;
    let waited = seen?;
    println!(
        "GUEST REMOVAL with a held callback: waited for it after {} ms, returned {} ms after it began",
        waited.as_millis(),
        took.as_millis()
    );
    let now = dma_api_errors()?;
    ensure!(
        now == errors,
        "DMA-API debug counted {} errors at unbind",
        now - errors
    );
    wait_for("/dev node removed", Duration::from_secs(5), || {
        fs::metadata(&dev_path).is_err()
    })?;
    rescan_and_use(ctx, &dev_path)
}
