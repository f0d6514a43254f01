//! The lifecycle of pinned GPU memory: its memory going away under a handle (munmap), files closed with
//! surfaces pinned, processes killed in the middle of DMA, concurrent users, pin/unpin churn; and, last of
//! the whole suite, the kernel's own counters (DMA-API debug, pinned pages) back where they started.
//! The harness adds its checks for the whole boot: no splat (KASAN, lockdep, DMA-API), no kmemleak report.
//!
//! Tests that count pinned pages exactly while their files are open turn those files' registration cache
//! off (host buffers would stay pinned in it) and flush the suite's shared file first; the concurrency test
//! keeps the cache on, it compares counts only after closing its files.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::cuda::{
    Side, cuda, dma_refuses, flavour, h2c2h_sides, host_to_surface, open, pin, pin_range, surface,
    surface_to_host, unpin,
};
use super::regcache::{open_uncached, quiesce};
use super::{
    Ctx, Test, TestResult, ctx_err, ensure, expect_errno, h2c2h_check, pins_are, sanity, test,
};
use crate::buf::compare;
use crate::dev::Device;
use crate::kstat;
use crate::rng::Rng;
use crate::surface::{Flavour, ISOLATION};

const RAM: usize = FPGA_RAM_SIZE as usize;
/// Surfaces a killed child pins.
const CHILD_SURFACES: usize = 8;
/// Size of each of them, and of its H2C2H.
const CHILD_SURFACE: usize = 1 << 20;
/// Threads of the concurrency test; thread t uses file t % 2 and FPGA RAM slice t.
const THREADS: usize = 4;
/// Operation kinds of the concurrency test.
const OPS: [&str; 5] = [
    "host h2c2h",
    "surface h2c2h",
    "surface->fpga->host",
    "host->fpga->surface",
    "pin+dma+unpin",
];
/// CPU page: what FOLL_PIN counts.
const PAGE: usize = 4096;
/// How long the kernel may take to finish deferred unpinning (work items) before counters must be back.
const SETTLE: Duration = Duration::from_secs(5);

pub fn register(v: &mut Vec<Test>) {
    v.push(cuda("lifecycle::munmap_pinned_surface", munmap_pinned));
    v.push(cuda(
        "lifecycle::close_with_pins_and_reopen",
        close_with_pins,
    ));
    v.push(cuda("lifecycle::kill9_mid_dma", |ctx| kill9_loop(ctx, 5)));
    v.push(cuda("lifecycle::kill9_loop_long", |ctx| kill9_loop(ctx, 200)).into_extended());
    v.push(cuda("lifecycle::threads_mixed_dma", |ctx| {
        threads_mixed(ctx, Duration::from_secs(5))
    }));
    v.push(
        cuda("lifecycle::threads_mixed_dma_long", |ctx| {
            threads_mixed(ctx, Duration::from_secs(60))
        })
        .into_extended(),
    );
    v.push(cuda("lifecycle::pin_unpin_churn", |ctx| churn(ctx, 500)));
    v.push(cuda("lifecycle::device_still_works", sanity));
    // Runs with or without a provider: host DMA pins and maps too.
    v.push(test(
        "lifecycle::no_dma_api_errors",
        counters_back_to_baseline,
    ));
}

/// Unmapping a pinned surface kills its handle: DMA and UNPIN are EINVAL, its pages are unpinned. The
/// dead pin no longer blocks its range (new memory at that address pins), and other handles, both files
/// and the device go on working.
fn munmap_pinned(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    quiesce(ctx.dev)?;
    let a = open_uncached(ctx)?;
    let b = open_uncached(ctx)?;
    let mut victim = surface(f, 1 << 20)?;
    let mut keep = surface(f, 1 << 20)?;
    let mut other = surface(f, 1 << 20)?;
    let pages = (victim.len() / PAGE) as i64;
    let p0 = kstat::pinned_pages()?;
    let hv = pin(&a, &victim)?;
    let hk = pin(&a, &keep)?;
    let ho = pin(&b, &other)?;
    pins_are(p0 + 3 * pages, Duration::ZERO, "after pinning 3 surfaces")?;
    surface_to_host(&a, &mut ctx.rng, &mut victim, hv, 4096, 0)?;
    let (va, len) = (victim.va(), victim.len());
    ctx_err("munmap of the pinned surface", victim.unmap())?;
    // The provider may unpin from a work item (it cannot take folio locks inside an invalidation).
    pins_are(p0 + 2 * pages, SETTLE, "after munmap of a pinned surface")?;
    dma_refuses(&a, hv.into(), &format!("handle {hv} of unmapped memory"))?;
    expect_errno(
        &format!("UNPIN_CUDA of handle {hv} of unmapped memory"),
        a.unpin_cuda(hv),
        libc::EINVAL,
    )?;
    // New memory where the victim was (mmap usually reuses the hole): the dead pin must not block it.
    let mut reborn = surface(f, len)?;
    let hr = pin(&b, &reborn).map_err(|e| {
        format!(
            "new surface at {:#x} after munmap of the pinned one at {va:#x}: {e}",
            reborn.va()
        )
    })?;
    surface_to_host(&b, &mut ctx.rng, &mut reborn, hr, 4096, 0)?;
    unpin(&b, hr)?;
    // The other surfaces, on both files, are unaffected.
    surface_to_host(&a, &mut ctx.rng, &mut keep, hk, RAM, 0)?;
    host_to_surface(&a, &mut ctx.rng, &mut keep, hk, RAM, 0)?;
    let len = keep.len();
    let mut host = crate::buf::GuardedBuf::new(len, 7);
    h2c2h_sides(
        &a,
        &mut ctx.rng,
        Side::Gpu(&mut keep, hk),
        Side::Host(&mut host),
        len,
    )?;
    host_to_surface(&b, &mut ctx.rng, &mut other, ho, RAM, 0)?;
    unpin(&a, hk)?;
    unpin(&b, ho)?;
    pins_are(p0, SETTLE, "after unpinning everything")?;
    sanity(ctx)
}

/// Closing a file with surfaces pinned releases them (the memory can be pinned and used again at once),
/// also when some of its handles already died with their memory.
fn close_with_pins(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    quiesce(ctx.dev)?;
    let mut surfaces = (0..4)
        .map(|_| surface(f, 256 << 10))
        .collect::<Result<Vec<_>, _>>()?;
    let pages = (surfaces[0].len() / PAGE) as i64;
    let p0 = kstat::pinned_pages()?;
    {
        let d1 = open_uncached(ctx)?;
        let hs = surfaces
            .iter()
            .map(|s| pin(&d1, s))
            .collect::<Result<Vec<_>, _>>()?;
        pins_are(p0 + 4 * pages, Duration::ZERO, "after pinning 4 surfaces")?;
        surface_to_host(&d1, &mut ctx.rng, &mut surfaces[0], hs[0], 4096, 0)?;
        host_to_surface(&d1, &mut ctx.rng, &mut surfaces[3], hs[3], 4096, 0)?;
        // Closed with all four pinned.
    }
    pins_are(p0, SETTLE, "after closing the file with 4 surfaces pinned")?;
    {
        let d2 = open_uncached(ctx)?;
        let hs = surfaces
            .iter()
            .map(|s| pin(&d2, s))
            .collect::<Result<Vec<_>, _>>()?;
        for (s, &h) in surfaces.iter_mut().zip(&hs) {
            host_to_surface(&d2, &mut ctx.rng, s, h, 8192, 0)?;
        }
        // Two handles die with their memory; the file is closed with two live and two dead ones.
        ctx_err("munmap", surfaces[0].unmap())?;
        ctx_err("munmap", surfaces[1].unmap())?;
        dma_refuses(&d2, hs[0].into(), "handle of unmapped memory")?;
        surface_to_host(&d2, &mut ctx.rng, &mut surfaces[2], hs[2], 4096, 0)?;
        pins_are(
            p0 + 2 * pages,
            SETTLE,
            "after munmap of 2 of 4 pinned surfaces",
        )?;
    }
    pins_are(
        p0,
        SETTLE,
        "after closing the file with 2 live and 2 dead handles",
    )?;
    // The CPU still owns intact memory, and a new file pins it again.
    let d3 = open_uncached(ctx)?;
    for s in &mut surfaces[2..] {
        s.check_guards()?;
        let h = pin(&d3, s)?;
        surface_to_host(&d3, &mut ctx.rng, s, h, RAM, 0)?;
        unpin(&d3, h)?;
    }
    drop(d3);
    sanity(ctx)
}

// ---- processes killed mid-DMA ----

/// One page of MAP_SHARED memory the parent and a forked child both see.
#[repr(C)]
struct Shared {
    /// Set by the child once its surfaces are pinned.
    ready: AtomicU32,
    /// DMA ioctls the child entered and returned from: started > done means it died inside one.
    started: AtomicU64,
    done: AtomicU64,
    handles: [AtomicU32; CHILD_SURFACES],
    /// The child's error, if it stopped on its own.
    err_len: AtomicU32,
    err: [AtomicU32; 128],
}

struct SharedPage {
    p: *mut Shared,
}

impl SharedPage {
    fn new() -> Result<Self, String> {
        // SAFETY: a fresh anonymous shared mapping; zeroed, which is a valid `Shared` (all atomics).
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                std::mem::size_of::<Shared>(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!("mmap shared: {}", std::io::Error::last_os_error()));
        }
        Ok(SharedPage { p: p.cast() })
    }

    fn get(&self) -> &Shared {
        // SAFETY: mapped for our lifetime; only atomics inside, so shared access from both processes is fine.
        unsafe { &*self.p }
    }
}

impl Drop for SharedPage {
    fn drop(&mut self) {
        // SAFETY: our mapping; no reference into it outlives `self`.
        unsafe { libc::munmap(self.p.cast(), std::mem::size_of::<Shared>()) };
    }
}

impl Shared {
    fn set_error(&self, msg: &str) {
        let b = msg.as_bytes();
        let n = b.len().min(self.err.len() * 4);
        for (i, w) in b[..n].chunks(4).enumerate() {
            let mut x = [0u8; 4];
            x[..w.len()].copy_from_slice(w);
            self.err[i].store(u32::from_le_bytes(x), Ordering::Relaxed);
        }
        self.err_len.store(n as u32, Ordering::Release);
    }

    fn error(&self) -> String {
        let n = self.err_len.load(Ordering::Acquire) as usize;
        let bytes: Vec<u8> = self
            .err
            .iter()
            .flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes())
            .take(n)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The child: pins CHILD_SURFACES surfaces on `dev`, says so, then copies between them until killed.
/// Returns only on an error (or after a minute without being killed).
fn child_work(dev: &Device, f: Flavour, seed: u64, sh: &Shared) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let mut surfaces = (0..CHILD_SURFACES)
        .map(|_| surface(f, CHILD_SURFACE))
        .collect::<Result<Vec<_>, _>>()?;
    let mut handles = Vec::new();
    for (i, s) in surfaces.iter_mut().enumerate() {
        s.fill_random(&mut rng);
        let h = pin(dev, s)?;
        sh.handles[i].store(h, Ordering::Relaxed);
        handles.push(u64::from(h));
    }
    sh.ready.store(1, Ordering::Release);
    let give_up = Instant::now() + Duration::from_secs(60);
    for i in 0usize.. {
        if Instant::now() > give_up {
            return Err("never killed".into());
        }
        let (a, b) = (2 * (i % 4), 2 * (i % 4) + 1);
        surfaces[a].fill_random(&mut rng);
        sh.started.fetch_add(1, Ordering::SeqCst);
        let r = if i % 3 == 2 {
            // One way through FPGA RAM, both ends on surfaces.
            dev.h2c_cuda(handles[a], 0, RAM as u64).and_then(|_| {
                // SAFETY: the destination is a pinned surface; no reference into it is live.
                unsafe { dev.c2h_cuda(handles[b], 0, RAM as u64) }
            })
        } else {
            // SAFETY: both sides are pinned surfaces; no reference into them is live.
            unsafe {
                dev.h2c2h_any(
                    handles[a],
                    handles[b],
                    CHILD_SURFACE as u64,
                    abi::H2C2H_FLAGS,
                )
            }
        };
        sh.done.fetch_add(1, Ordering::SeqCst);
        ctx_err(&format!("child DMA #{i}"), r)?;
        let len = if i % 3 == 2 { RAM } else { CHILD_SURFACE };
        compare(
            &format!("child DMA #{i}"),
            &surfaces[a].as_slice()[..len],
            &surfaces[b].as_slice()[..len],
        )?;
    }
    unreachable!()
}

/// Kills and reaps the child if the parent bails out early.
struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

impl Child {
    /// waitpid; `nohang`: `None` while it runs.
    fn wait(&mut self, nohang: bool) -> Result<Option<libc::c_int>, String> {
        let mut status = 0;
        // SAFETY: waits for our own child; `status` is a valid out pointer.
        let r = unsafe {
            libc::waitpid(
                self.pid,
                &mut status,
                if nohang { libc::WNOHANG } else { 0 },
            )
        };
        match r {
            0 => Ok(None),
            r if r == self.pid => {
                self.reaped = true;
                Ok(Some(status))
            }
            _ => Err(format!("waitpid: {}", std::io::Error::last_os_error())),
        }
    }

    fn kill(&self) -> Result<(), String> {
        // SAFETY: signals our own, not yet reaped, child.
        if unsafe { libc::kill(self.pid, libc::SIGKILL) } != 0 {
            return Err(format!("kill: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

impl Child {
    /// Reaps it after a SIGKILL, giving it `limit`: a child that does not die is stuck in the kernel, and
    /// the failure says where (`/proc/PID/stack`, `wchan`, state).
    fn reap_killed(&mut self, limit: Duration) -> Result<libc::c_int, String> {
        let until = Instant::now() + limit;
        loop {
            if let Some(st) = self.wait(true)? {
                return Ok(st);
            }
            if Instant::now() > until {
                let pid = self.pid;
                let read = |f: &str| {
                    std::fs::read_to_string(format!("/proc/{pid}/{f}"))
                        .unwrap_or_else(|e| format!("({e})"))
                };
                let state = read("status")
                    .lines()
                    .find(|l| l.starts_with("State:"))
                    .unwrap_or_default()
                    .to_string();
                return Err(format!(
                    "child {pid} still alive {} s after SIGKILL ({state}, wchan {}): stack: {}",
                    limit.as_secs(),
                    read("wchan"),
                    read("stack").replace('\n', " | ")
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.kill();
            // Bounded: a child stuck in the kernel must not hang the whole suite.
            let _ = self.reap_killed(Duration::from_secs(10));
        }
    }
}

fn describe_status(st: libc::c_int) -> String {
    if libc::WIFSIGNALED(st) {
        format!("killed by signal {}", libc::WTERMSIG(st))
    } else if libc::WIFEXITED(st) {
        format!("exited with {}", libc::WEXITSTATUS(st))
    } else {
        format!("status {st:#x}")
    }
}

/// `n` times: fork a child that pins 8 surfaces and runs DMA between them, wait until it is inside a DMA
/// ioctl, SIGKILL it. Odd iterations pin on a file the parent opened before fork (the file outlives the
/// child: its handles must be dead afterwards), even ones on the child's own. Afterwards the device, the
/// file and GPU memory all still work.
fn kill9_loop(ctx: &mut Ctx, n: usize) -> TestResult {
    let f = flavour(ctx.dev)?;
    let mut mid_dma = 0;
    quiesce(ctx.dev)?;
    let p0 = kstat::pinned_pages()?;
    for it in 0..n {
        let inherit = it % 2 == 1;
        let what = format!(
            "iteration {it} ({} file)",
            if inherit { "inherited" } else { "own" }
        );
        let shared_dev = open_uncached(ctx)?;
        let page = SharedPage::new()?;
        let sh = page.get();
        let seed = ctx.rng.next_u64();
        let delay = Duration::from_micros(ctx.rng.next_u64() % 2000);
        // SAFETY: the suite is single-threaded here (no test leaves threads behind), so the child may run
        // ordinary Rust; it never returns into the suite: it ends in _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(format!("fork: {}", std::io::Error::last_os_error()));
        }
        if pid == 0 {
            let r = panic::catch_unwind(AssertUnwindSafe(|| {
                let own;
                let dev = if inherit {
                    &shared_dev
                } else {
                    own = open_uncached(ctx)?;
                    &own
                };
                child_work(dev, f, seed, sh)
            }));
            let msg = match r {
                Ok(Ok(())) => String::new(),
                Ok(Err(e)) => e,
                Err(_) => "child panicked".into(),
            };
            sh.set_error(&msg);
            // SAFETY: ends the child without running the parent's destructors or atexit handlers.
            unsafe { libc::_exit(3) };
        }
        let mut child = Child { pid, reaped: false };
        // Wait until it is ready and inside a DMA ioctl, after at least one finished.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.wait(true)? {
                return Err(format!(
                    "{what}: child {} before being killed: {}",
                    describe_status(st),
                    sh.error()
                ));
            }
            let (s, d) = (
                sh.started.load(Ordering::SeqCst),
                sh.done.load(Ordering::SeqCst),
            );
            if sh.ready.load(Ordering::Acquire) == 1 && d >= 1 && s > d {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "{what}: child not busy after 60 s (ready {}, DMAs {d})",
                sh.ready.load(Ordering::Acquire)
            );
            thread::sleep(Duration::from_micros(200));
        }
        thread::sleep(delay);
        child.kill()?;
        let st = child
            .reap_killed(Duration::from_secs(30))
            .map_err(|e| format!("{what}: {e}"))?;
        ensure!(
            libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGKILL,
            "{what}: child {} instead of SIGKILL: {}",
            describe_status(st),
            sh.error()
        );
        if sh.started.load(Ordering::SeqCst) > sh.done.load(Ordering::SeqCst) {
            mid_dma += 1;
        }
        if inherit {
            // The child's memory is gone: its handles on the surviving file are dead.
            for h in &sh.handles {
                let h = h.load(Ordering::Relaxed);
                dead_handle(&shared_dev, h).map_err(|e| format!("{what}: {e}"))?;
            }
        }
        // Everything the child pinned is released: by its exit (its memory) or its file's release.
        pins_are(p0, SETTLE, &format!("{what}: after the child was killed"))?;
        // The file (inherited or not) still pins and moves data.
        let mut s = surface(f, f.granule())?;
        let h = pin(&shared_dev, &s)?;
        surface_to_host(&shared_dev, &mut ctx.rng, &mut s, h, 4096, 0)
            .map_err(|e| format!("{what}: after the kill: {e}"))?;
        unpin(&shared_dev, h)?;
        if n > 5 && (it + 1) % 25 == 0 {
            println!("GUEST KILL9 {} of {n} children killed so far", it + 1);
        }
    }
    println!("GUEST KILL9 {n} children killed, {mid_dma} of them inside a DMA ioctl");
    ensure!(
        mid_dma >= 1,
        "no child was inside a DMA ioctl when killed (0 of {n}): the test did not test that"
    );
    sanity(ctx)
}

/// A handle whose memory went away with its process: every DMA and UNPIN refuses it. Process exit tears
/// the address space down before the parent's waitpid returns, but a driver may finish the removal from a
/// work item: allow it a moment.
fn dead_handle(dev: &Device, h: u32) -> TestResult {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        let r =
            dma_refuses(dev, h.into(), &format!("handle {h} of a killed child")).and_then(|()| {
                expect_errno(
                    &format!("UNPIN_CUDA {h} of a killed child"),
                    dev.unpin_cuda(h),
                    libc::EINVAL,
                )
            });
        if r.is_ok() || Instant::now() > until {
            return r;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

// ---- concurrency ----

/// Lets several users of one kind into FPGA RAM at once, never two kinds: an H2C2H bounces through FPGA
/// RAM from offset 0 and would overwrite a separate H2C + C2H pair's data between its two ioctls (the
/// pairs use disjoint slices, so they may overlap each other). Waiters of the other kind hold new entries
/// back, so neither kind starves.
#[derive(Default)]
struct Phase {
    s: Mutex<PhaseState>,
    cv: Condvar,
}

#[derive(Default)]
struct PhaseState {
    kind: usize,
    active: usize,
    waiting: [usize; 2],
}

const PAIRS: usize = 0;
const ROUND_TRIPS: usize = 1;

struct PhaseGuard<'a>(&'a Phase);

impl Phase {
    fn enter(&self, kind: usize) -> PhaseGuard<'_> {
        let mut s = self.s.lock().unwrap_or_else(|e| e.into_inner());
        s.waiting[kind] += 1;
        while s.active > 0 && (s.kind != kind || s.waiting[1 - kind] > 0) {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.waiting[kind] -= 1;
        s.kind = kind;
        s.active += 1;
        PhaseGuard(self)
    }
}

impl Drop for PhaseGuard<'_> {
    fn drop(&mut self) {
        let mut s = self.0.s.lock().unwrap_or_else(|e| e.into_inner());
        s.active -= 1;
        if s.active == 0 {
            self.0.cv.notify_all();
        }
    }
}

/// One thread of `threads_mixed`: random operations (the first five cover every kind) until `until`,
/// every byte checked. Returns how many of each kind it did.
fn worker(
    t: usize,
    dev: &Device,
    f: Flavour,
    seed: u64,
    until: Instant,
    stop: &AtomicBool,
    phase: &Phase,
) -> Result<[u64; 5], String> {
    let mut rng = Rng::new(seed);
    let slice = RAM / THREADS;
    let off = (t * slice) as u64;
    // Small enough that TCG gets through many operations in a few seconds, big enough for several
    // FPGA RAM windows per H2C2H.
    let mut a = surface(f, 192 << 10)?;
    let mut b = surface(f, 192 << 10)?;
    let ha = pin(dev, &a)?;
    let hb = pin(dev, &b)?;
    let mut counts = [0u64; 5];
    let mut n = 0u64;
    while (n < 5 || Instant::now() < until) && !stop.load(Ordering::Relaxed) {
        let op = if n < 5 {
            n as usize
        } else {
            (rng.next_u64() % 5) as usize
        };
        let small = 1 + (rng.next_u64() as usize) % slice;
        let big = 1 + (rng.next_u64() as usize) % a.len();
        let r = match op {
            0 => {
                let (m1, m2) = (
                    (rng.next_u64() % 4096) as usize,
                    (rng.next_u64() % 4096) as usize,
                );
                let _g = phase.enter(ROUND_TRIPS);
                h2c2h_check(dev, &mut rng, big, m1, m2).map(|_| ())
            }
            1 => {
                let _g = phase.enter(ROUND_TRIPS);
                let (src, dst) = if rng.next_u64().is_multiple_of(2) {
                    (Side::Gpu(&mut a, ha), Side::Gpu(&mut b, hb))
                } else {
                    (Side::Gpu(&mut b, hb), Side::Gpu(&mut a, ha))
                };
                h2c2h_sides(dev, &mut rng, src, dst, big).map(|_| ())
            }
            2 => {
                let _g = phase.enter(PAIRS);
                surface_to_host(dev, &mut rng, &mut a, ha, small, off)
            }
            3 => {
                let _g = phase.enter(PAIRS);
                host_to_surface(dev, &mut rng, &mut b, hb, small, off)
            }
            _ => pin_dma_unpin(dev, f, &mut rng, small, off, phase),
        };
        if let Err(e) = r {
            stop.store(true, Ordering::Relaxed);
            return Err(format!("thread {t}, operation #{n} ({}): {e}", OPS[op]));
        }
        counts[op] += 1;
        n += 1;
    }
    if stop.load(Ordering::Relaxed) {
        return Err(format!("thread {t}: stopped by another thread's failure"));
    }
    unpin(dev, ha)?;
    unpin(dev, hb)?;
    Ok(counts)
}

/// A fresh surface pinned, one transfer from it, unpinned: pinning runs concurrently with other threads' DMA.
fn pin_dma_unpin(
    dev: &Device,
    f: Flavour,
    rng: &mut Rng,
    len: usize,
    off: u64,
    phase: &Phase,
) -> TestResult {
    let mut s = surface(f, f.granule())?;
    let h = pin(dev, &s)?;
    {
        let _g = phase.enter(PAIRS);
        let len = len.min(s.len());
        surface_to_host(dev, rng, &mut s, h, len, off)?;
    }
    unpin(dev, h)
}

/// THREADS threads on two files, for `secs`: host H2C2H, surface H2C2H, surface <-> FPGA <-> host pairs
/// and pin/DMA/unpin of fresh surfaces, all at once, every byte checked.
fn threads_mixed(ctx: &mut Ctx, dur: Duration) -> TestResult {
    let f = flavour(ctx.dev)?;
    quiesce(ctx.dev)?;
    // Registration cache on (host H2C2H buffers come and go from the heap): counted after close only.
    let p0 = kstat::pinned_pages()?;
    let fds = [open(ctx)?, open(ctx)?];
    let stop = AtomicBool::new(false);
    let phase = Phase::default();
    let until = Instant::now() + dur;
    let seeds: Vec<u64> = (0..THREADS).map(|_| ctx.rng.next_u64()).collect();
    let results: Vec<Result<[u64; 5], String>> = thread::scope(|sc| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (dev, seed, stop, phase) = (&fds[t % 2], seeds[t], &stop, &phase);
                sc.spawn(move || worker(t, dev, f, seed, until, stop, phase))
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(t, h)| {
                h.join().unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(format!("thread {t} panicked: {msg}"))
                })
            })
            .collect()
    });
    super::first_failure(&results)?;
    let mut total = [0u64; 5];
    for (t, r) in results.iter().enumerate() {
        let c = r.as_ref().expect("errors returned above");
        ensure!(c.iter().all(|&k| k > 0), "thread {t} did not mix: {c:?}");
        for (s, k) in total.iter_mut().zip(c) {
            *s += k;
        }
    }
    let line: Vec<String> = OPS
        .iter()
        .zip(total)
        .map(|(n, k)| format!("{n} {k}"))
        .collect();
    println!(
        "GUEST THREADS {THREADS} threads, 2 files, {} s: {}",
        dur.as_secs(),
        line.join(", ")
    );
    drop(fds);
    pins_are(
        p0,
        SETTLE,
        "after all threads unpinned and the files closed",
    )?;
    sanity(ctx)
}

/// `pins` PIN_CUDAs with UNPINs interleaved (up to 16 live) over 24 slots of one surface, each in its own
/// 64 KiB window: live handles are always distinct, pinning a live slot again is EBUSY, every UNPIN
/// succeeds once, a sample of handles moves their own slot's bytes, unpinned ones are refused afterwards,
/// and the pinned-page count comes back.
fn churn(ctx: &mut Ctx, pins: usize) -> TestResult {
    const SLOTS: usize = 24;
    let f = flavour(ctx.dev)?;
    let g = f.granule();
    quiesce(ctx.dev)?;
    let dev = open_uncached(ctx)?;
    let mut s = surface(f, SLOTS * ISOLATION)?;
    s.fill_random(&mut ctx.rng);
    let p0 = kstat::pinned_pages()?;
    let mut live: Vec<(u32, usize)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let (mut pinned, mut unpinned, mut max_live, mut busy) = (0usize, 0usize, 0usize, 0usize);
    while pinned < pins {
        let r = ctx.rng.next_u64();
        if live.len() < 16 && (live.is_empty() || r.is_multiple_of(2)) {
            let free: Vec<usize> = (0..SLOTS)
                .filter(|k| live.iter().all(|&(_, j)| j != *k))
                .collect();
            let k = free[(r >> 8) as usize % free.len()];
            let h = pin_range(&dev, s.va() + (k * ISOLATION) as u64, g)?;
            if let Some((_, j)) = live.iter().find(|(x, _)| *x == h) {
                return Err(format!(
                    "PIN_CUDA #{pinned} returned handle {h}, still pinned (slot {j})"
                ));
            }
            live.push((h, k));
            seen.insert(h);
            pinned += 1;
            max_live = max_live.max(live.len());
            if pinned.is_multiple_of(10) {
                let (_, j) = live[(r >> 16) as usize % live.len()];
                expect_errno(
                    &format!("PIN_CUDA of slot {j}, pinned"),
                    dev.pin_cuda(s.va() + (j * ISOLATION) as u64, g as u64),
                    libc::EBUSY,
                )?;
                busy += 1;
            }
            if pinned.is_multiple_of(50) {
                let (h, j) = live[(r >> 24) as usize % live.len()];
                let len = g.min(RAM);
                ctx_err(
                    &format!("H2C from slot {j}"),
                    dev.h2c_cuda(h.into(), 0, len as u64),
                )?;
                let mut host = crate::buf::GuardedBuf::new(len, 0);
                ctx_err("C2H", dev.c2h(host.as_mut_slice(), 0))?;
                let at = j * ISOLATION;
                compare(
                    &format!("after {pinned} pins, slot {j} (handle {h})"),
                    &s.as_slice()[at..at + len],
                    host.as_slice(),
                )?;
            }
        } else {
            let (h, _) = live.swap_remove((r >> 8) as usize % live.len());
            unpin(&dev, h)?;
            unpinned += 1;
            if unpinned.is_multiple_of(25) {
                expect_errno(
                    &format!("UNPIN_CUDA {h} again"),
                    dev.unpin_cuda(h),
                    libc::EINVAL,
                )?;
            }
        }
    }
    for (h, _) in live.drain(..) {
        unpin(&dev, h)?;
        dma_refuses(&dev, h.into(), &format!("unpinned handle {h}"))?;
    }
    pins_are(p0, SETTLE, "after the last UNPIN_CUDA")?;
    println!(
        "GUEST CHURN {pinned} pins, {unpinned} early unpins, {busy} overlapping pins refused, at most \
         {max_live} live, {} distinct handle values",
        seen.len()
    );
    sanity(ctx)
}

// ---- kernel counters ----

/// Last test of the suite: DMA-API debug found no error during the whole run, and once every test has
/// released its memory the DMA-debug entries in use and the FOLL_PIN pages held are what they were before
/// the first test. Unpinning may finish in a work item: the counters get a few seconds to settle.
fn counters_back_to_baseline(ctx: &mut Ctx) -> TestResult {
    let base = ctx
        .baseline
        .as_ref()
        .map_err(|e| format!("no baseline from before the first test: {e}"))?;
    // The shared file's cached buffers are the one thing that may stay pinned while a file is open.
    quiesce(ctx.dev)?;
    let until = Instant::now() + SETTLE;
    let now = loop {
        let now = kstat::read()?;
        let settled = now.dma_entries == base.dma_entries && now.pinned_pages == base.pinned_pages;
        if settled || Instant::now() > until {
            break now;
        }
        thread::sleep(Duration::from_millis(50));
    };
    println!("GUEST COUNTERS before the first test: {}", base.describe());
    println!("GUEST COUNTERS now: {}", now.describe());
    ensure!(
        now.dma_errors == 0,
        "dma-api error_count is {} (before the first test: {}): the kernel log has the details",
        now.dma_errors,
        base.dma_errors
    );
    ensure!(
        now.dma_entries == base.dma_entries,
        "{} DMA-debug entries in use, {} before the first test: DMA mappings leaked (or freed twice)",
        now.dma_entries,
        base.dma_entries
    );
    ensure!(
        now.pinned_pages == base.pinned_pages,
        "{} pages held by FOLL_PIN, {} before the first test: pins leaked (or released twice)",
        now.pinned_pages,
        base.pinned_pages
    );
    Ok(())
}
