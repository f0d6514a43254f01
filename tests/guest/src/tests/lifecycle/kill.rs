//! Processes killed in the middle of DMA.

use super::*;

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
    /// Reaps it (as `reap_killed`, 30 s) and checks that SIGKILL is what ended it; otherwise the failure
    /// carries the error the child recorded in `sh`.
    fn reap_sigkilled(&mut self, what: &str, sh: &Shared) -> TestResult {
        let st = self
            .reap_killed(Duration::from_secs(30))
            .map_err(|e| format!("{what}: {e}"))?;
        ensure!(
            libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGKILL,
            "{what}: child {} instead of SIGKILL: {}",
            describe_status(st),
            sh.error()
        );
        Ok(())
    }

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

/// Forks a child that pins CHILD_SURFACES surfaces (on `inherited`, or on a file of its own) and copies
/// between them; returns once it is inside a DMA ioctl, after at least one finished.
fn fork_busy(
    ctx: &mut Ctx,
    f: Flavour,
    inherited: Option<&Device>,
    what: &str,
) -> Result<(Child, SharedPage), String> {
    let page = SharedPage::new()?;
    let sh = page.get();
    let seed = ctx.rng.next_u64();
    // The child's DMA through a file this process has not used is another holder's (isolation).
    crate::tests::isolation::let_another_process_in(ctx.dev)?;
    // SAFETY: the suite is single-threaded here (no test leaves threads behind), so the child may run
    // ordinary Rust; it never returns into the suite: it ends in _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let r = panic::catch_unwind(AssertUnwindSafe(|| {
            let own;
            let dev = match inherited {
                Some(d) => d,
                None => {
                    own = open_uncached(ctx)?;
                    &own
                }
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
    Ok((child, page))
}

/// The bench provider's switch that makes it call back from non-blockable invalidations, as NVIDIA's
/// Tegra module does; set for the life of this value.
struct NvidiaNonblock;

const NONBLOCK: &str = "/sys/module/gdr_nv_p2p/parameters/nonblock_callbacks";

impl NvidiaNonblock {
    fn on() -> Result<Self, String> {
        std::fs::write(NONBLOCK, "Y").map_err(|e| format!("{NONBLOCK}: {e}"))?;
        Ok(NvidiaNonblock)
    }
}

impl Drop for NvidiaNonblock {
    fn drop(&mut self) {
        let _ = std::fs::write(NONBLOCK, "N");
    }
}

/// `n` times: a child busy with DMA on its pinned surfaces is SIGKILLed and at once reaped with
/// process_mrelease(2), the OOM reaper's non-blockable walk of its memory, while the provider behaves like
/// NVIDIA's (it would call the driver back from that walk; the driver's callback sleeps). The driver must
/// refuse the walk on its pinned ranges (EAGAIN: the kernel leaves the memory to exit_mmap), and the
/// harness sees no "sleeping function called from invalid context". A refusal must be seen at least once:
/// a reap that comes after the child's own exit_mmap finds nothing to refuse.
pub(super) fn reaper_mid_dma(ctx: &mut Ctx, n: usize) -> TestResult {
    let f = flavour(ctx.dev)?;
    quiesce(ctx.dev)?;
    let p0 = kstat::pinned_pages()?;
    let _nvidia = NvidiaNonblock::on()?;
    let (mut refused, mut reaped, mut late) = (0, 0, 0);
    for it in 0..n {
        let what = format!("iteration {it}");
        let (mut child, page) = fork_busy(ctx, f, None, &what)?;
        // SAFETY: plain syscalls on our own, not yet reaped, child; the pidfd is closed below.
        let r = unsafe {
            let fd = libc::syscall(libc::SYS_pidfd_open, child.pid, 0) as libc::c_int;
            ensure!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
            let k = libc::syscall(libc::SYS_pidfd_send_signal, fd, libc::SIGKILL, 0usize, 0);
            let r = if k == 0 {
                Ok(libc::syscall(libc::SYS_process_mrelease, fd, 0))
            } else {
                Err(std::io::Error::last_os_error())
            };
            let e = std::io::Error::last_os_error();
            libc::close(fd);
            r.map(|r| (r, e))
        };
        let (r, e) = r.map_err(|e| format!("{what}: pidfd_send_signal: {e}"))?;
        match (r, e.raw_os_error()) {
            (0, _) => reaped += 1,
            (_, Some(libc::EAGAIN)) => refused += 1,
            // The child's exit_mmap got there first.
            (_, Some(libc::ESRCH | libc::EINVAL)) => late += 1,
            _ => return Err(format!("{what}: process_mrelease: {e}")),
        }
        child.reap_sigkilled(&what, page.get())?;
        pins_are(p0, SETTLE, &format!("{what}: after the child was reaped"))?;
    }
    println!("GUEST REAPER {n} children: {refused} reaps refused, {reaped} done, {late} too late");
    ensure!(
        refused >= 1,
        "process_mrelease never refused ({reaped} reaped, {late} too late): the pinned ranges were reaped \
         (the driver's callback ran from a non-blockable invalidation) or the test never hit a live mm"
    );
    sanity(ctx)
}

/// `n` times: fork a child that pins 8 surfaces and runs DMA between them, wait until it is inside a DMA
/// ioctl, SIGKILL it. Odd iterations pin on a file the parent opened before fork (the file outlives the
/// child: its handles must be dead afterwards), even ones on the child's own. Afterwards the device, the
/// file and GPU memory all still work.
pub(super) fn kill9_loop(ctx: &mut Ctx, n: usize) -> TestResult {
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
        let delay = Duration::from_micros(ctx.rng.next_u64() % 2000);
        let (mut child, page) = fork_busy(ctx, f, inherit.then_some(&shared_dev), &what)?;
        let sh = page.get();
        thread::sleep(delay);
        child.kill()?;
        child.reap_sigkilled(&what, sh)?;
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
