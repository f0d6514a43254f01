//! One live DMA mapping per page when a GPU surface is mapped. The provider maps a surface without
//! `DMA_ATTR_SKIP_CPU_SYNC` (NVIDIA's does too), so DMA-API debug reports any other live mapping of the same
//! memory that the device may write: "cacheline tracking EEXIST, overlapping mappings aren't supported"
//! (issue 24, defect 0: the ioctl fuzzer hit it from `pevb_p2p_pin`). PIN_CUDA must therefore wait for
//! mappings of its pages that are on their way out: a host buffer the registration cache already dropped
//! but whose release is not over, and an earlier surface of the same pages whose free callback has begun
//! but not yet unmapped it.
//!
//! Both windows are held open with the bench provider's `hold_callback_unmap`: a forked child unmaps a
//! pinned surface, and its free callback stops inside the DMA unmap, so an invalidation stays in progress
//! in the child's address space. That holds the surface itself (still mapped, already dead), and it holds
//! the release of any buffer cached in that address space (`mmu_interval_notifier_remove` waits for an
//! invalidation in progress there). The parent, in its own address space, then pins the same (shared)
//! memory. The hold is let go a moment later by a thread of the parent, so a PIN_CUDA that waits returns.
//!
//! DMA-API debug also supports at most seven overlapping mappings of one cache line that the device may write
//! (one more is a `WARNING`, "exceeded 7 overlapping mappings of cacheline"): requests that wait for a busy
//! engine must not each hold a mapping of the same page (defect 11).

use std::io::{self, Read};
use std::os::fd::FromRawFd;
use std::thread;
use std::time::{Duration, Instant};

use super::cuda::{pin, surface};
use super::regcache::{open_uncached, quiesce, used_once};
use super::removal::wait_for;
use super::removal_callback::{Hold, dma_api_errors, held};
use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, test};
use crate::dev::Device;
use crate::surface::Flavour;

pub fn register(v: &mut Vec<Test>) {
    v.push(
        test(
            "overlap::pin_cuda_waits_for_a_dropped_cached_buffer",
            dropped_cached_buffer,
        )
        .needs(Needs::JetsonRegCache),
    );
    v.push(
        test("overlap::pin_cuda_waits_for_a_dying_surface", dying_surface)
            .needs(Needs::JetsonProvider),
    );
    v.push(test(
        "overlap::c2h_threads_into_one_page_stay_bounded",
        c2h_threads_one_page,
    ));
}

/// Bytes of the shared memory both processes use (a few pages, each the start of a DMA-debug entry).
const LEN: usize = 4 * 4096;
/// How long the provider holds the child's callback once the parent pins.
const HOLD_FOR: Duration = Duration::from_millis(1000);
/// How long the child may take to get its callback held.
const SETTLE: Duration = Duration::from_secs(10);

/// Anonymous memory mapped shared, so a forked child and the parent see the same pages.
struct Shared {
    addr: *mut libc::c_void,
    mapped: bool,
}

impl Shared {
    fn new() -> Result<Self, String> {
        // SAFETY: a fresh mapping at an address the kernel picks; no existing memory is affected.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        ensure!(
            addr != libc::MAP_FAILED,
            "mmap {LEN} shared bytes: {}",
            io::Error::last_os_error()
        );
        Ok(Shared { addr, mapped: true })
    }

    fn va(&self) -> u64 {
        self.addr as u64
    }

    fn fill(&mut self, seed: u8) {
        // SAFETY: `LEN` bytes mapped writable while `mapped`; `&mut self` means no other reference.
        let s = unsafe { std::slice::from_raw_parts_mut(self.addr.cast::<u8>(), LEN) };
        for (i, b) in s.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(13) ^ seed;
        }
    }

    fn as_slice(&self) -> &[u8] {
        assert!(self.mapped);
        // SAFETY: `LEN` bytes mapped readable while `mapped`.
        unsafe { std::slice::from_raw_parts(self.addr.cast::<u8>(), LEN) }
    }

    fn unmap(&mut self) -> io::Result<()> {
        self.mapped = false;
        // SAFETY: our own mapping; `&mut self` means no reference points into it.
        if unsafe { libc::munmap(self.addr, LEN) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.mapped {
            let _ = self.unmap();
        }
    }
}

/// A forked child that says once when it is ready (one byte on a pipe) and may wait for the parent's go
/// (one byte on another).
struct Child {
    pid: libc::pid_t,
    ready: std::fs::File,
    go: std::fs::File,
}

/// What the child's body may do to synchronise with the parent.
struct Sync {
    ready: libc::c_int,
    go: libc::c_int,
}

impl Sync {
    /// Tells the parent the child is ready.
    fn ready(&self) {
        // SAFETY: writes one byte from a valid buffer to our pipe's write end.
        let _ = unsafe { libc::write(self.ready, [1u8].as_ptr().cast(), 1) };
    }

    /// Waits for the parent's go (or its end).
    fn wait_go(&self) {
        let mut b = 0u8;
        // SAFETY: reads at most one byte into a valid buffer from our pipe's read end.
        let _ = unsafe { libc::read(self.go, (&raw mut b).cast(), 1) };
    }
}

fn pipe() -> Result<[libc::c_int; 2], String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    ensure!(rc == 0, "pipe: {}", io::Error::last_os_error());
    Ok(fds)
}

impl Child {
    /// Forks; the child runs `body`, which may signal readiness and wait for a go, and exits with its status.
    fn spawn(body: impl FnOnce(&Sync) -> i32) -> Result<Self, String> {
        let (ready, go) = (pipe()?, pipe()?);
        // SAFETY: the suite is single-threaded here (no test leaves threads behind), so the child may run
        // ordinary Rust; it never returns into the suite: it ends in _exit.
        let pid = unsafe { libc::fork() };
        ensure!(pid >= 0, "fork: {}", io::Error::last_os_error());
        if pid == 0 {
            let rc = body(&Sync {
                ready: ready[1],
                go: go[0],
            });
            // SAFETY: ends the child without running the parent's destructors or atexit handlers.
            unsafe { libc::_exit(rc) };
        }
        // SAFETY: these ends are the child's now; the other two are ours alone from here on, each owned by
        // the File made of it.
        let (ready, go) = unsafe {
            libc::close(ready[1]);
            libc::close(go[0]);
            (
                std::fs::File::from_raw_fd(ready[0]),
                std::fs::File::from_raw_fd(go[1]),
            )
        };
        Ok(Child { pid, ready, go })
    }

    /// Lets the child go on.
    fn go(&mut self) -> TestResult {
        use std::io::Write;
        self.go
            .write_all(&[1])
            .map_err(|e| format!("telling the child to go on: {e}"))
    }

    /// Waits for the child's signal; an exit before it is an error with the child's status.
    fn wait_ready(&mut self) -> TestResult {
        let mut b = [0u8; 1];
        match self.ready.read(&mut b) {
            Ok(1) => Ok(()),
            r => Err(format!(
                "the child ended before it was ready ({r:?}): {}",
                self.reap().err().unwrap_or_else(|| "exit status 0".into())
            )),
        }
    }

    /// Waits for the child's end; its exit status must be 0 (`what` names the others).
    fn reap(&mut self) -> TestResult {
        // A child still waiting for its go (the test bailed out) must not be waited for forever.
        let _ = self.go();
        let mut st = 0;
        // SAFETY: waits for our own child; `st` is a valid out pointer.
        let r = unsafe { libc::waitpid(self.pid, &mut st, 0) };
        ensure!(r == self.pid, "waitpid: {}", io::Error::last_os_error());
        ensure!(
            libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
            "child ended with status {st:#x} (exit code: the step that failed)"
        );
        Ok(())
    }
}

/// Pins `mem` through `dev` while the provider holds the child's callback, lets the hold go `HOLD_FOR`
/// later from another thread, reaps the child; then checks that DMA-API debug counted no error (an
/// overlapping mapping) and that the pin succeeded. Returns how long PIN_CUDA took.
fn pin_while_held(
    dev: &Device,
    mem: &Shared,
    hold: Hold,
    child: &mut Child,
    errors: u64,
) -> Result<Duration, String> {
    let (r, took) = thread::scope(|sc| {
        let releaser = sc.spawn(move || {
            thread::sleep(HOLD_FOR);
            drop(hold);
        });
        let t0 = Instant::now();
        let r = dev.pin_cuda(mem.va(), LEN as u64);
        let took = t0.elapsed();
        let _ = releaser.join();
        (r, took)
    });
    let reaped = child.reap();
    let now = dma_api_errors()?;
    if let Ok(h) = &r {
        ctx_err("UNPIN_CUDA", dev.unpin_cuda(*h))?;
    }
    println!(
        "GUEST OVERLAP PIN_CUDA while a mapping of its pages was on its way out: {:?} after {} ms, DMA-API errors {errors} -> {now}",
        r.as_ref().map_err(|e| e.raw_os_error()),
        took.as_millis()
    );
    ensure!(
        now == errors,
        "DMA-API debug counted {} error(s) while PIN_CUDA mapped memory whose other mapping was still live \
         (PIN_CUDA returned after {} ms; the kernel log says \"cacheline tracking EEXIST\")",
        now - errors,
        took.as_millis()
    );
    ctx_err("PIN_CUDA once the other mapping was gone", r)?;
    reaped?;
    Ok(took)
}

fn open(ctx: &Ctx) -> Result<Device, String> {
    ctx_err(
        &format!("open {}", ctx.dev_path),
        Device::open(ctx.dev_path),
    )
}

/// A host buffer cached in a child's address space is dropped (FLUSH) while an invalidation is in progress
/// there, so its release (which removes its mmu notifier first) waits and the buffer stays mapped. The
/// parent's PIN_CUDA of the same memory finds nothing in any cache: it must wait for that release before
/// the provider maps. Fails on f807e61, whose PIN_CUDA waited only for the buffers it evicted itself:
/// PIN_CUDA returns at once and DMA-API debug counts an overlapping mapping (the fuzzer's race, where the
/// buffer had been dropped by an eviction, FLUSH or SET_LIMITS moments before and the work item that
/// releases it had not run yet).
fn dropped_cached_buffer(ctx: &mut Ctx) -> TestResult {
    quiesce(ctx.dev)?;
    let errors = dma_api_errors()?;
    let cached = open(ctx)?;
    let pinning = open(ctx)?;
    let mut mem = Shared::new()?;
    mem.fill(0x3c);
    // The child's DMA through `cached`, unused here, is another holder's (isolation).
    super::isolation::let_another_process_in(ctx.dev)?;
    let hold = Hold::on()?;
    let mut child = Child::spawn(|sync| {
        // Cached through `cached`, in the child's address space (a buffer's second use registers it).
        if used_once(&cached, mem.as_slice(), "child").is_err() {
            return 2;
        }
        if cached.h2c(mem.as_slice(), 0).is_err() {
            return 3;
        }
        let Ok(mut s) = surface(Flavour::Jetson, 65536) else {
            return 4;
        };
        if pin(&cached, &s).is_err() {
            return 5;
        }
        sync.ready();
        // Blocks while the provider holds the callback's unmap: an invalidation in progress here.
        if s.unmap().is_err() {
            return 6;
        }
        0
    })?;
    let setup = child
        .wait_ready()
        .and_then(|()| {
            wait_for("the child's callback held", SETTLE, || {
                held().is_ok_and(|n| n == 1)
            })
        })
        .and_then(|()| {
            let st = ctx_err("REG_CACHE QUERY", cached.reg_cache_query())?;
            ensure!(
                st.entries == 1 && st.bytes == LEN as u64,
                "the child's buffer is not cached: {} entries, {} bytes",
                st.entries,
                st.bytes
            );
            // Dropped now; its release waits for the child's invalidation, so it stays mapped.
            let st = ctx_err("REG_CACHE FLUSH", cached.reg_cache_flush())?;
            ensure!(st.entries == 0, "FLUSH left {} entries", st.entries);
            Ok(())
        });
    if let Err(e) = setup {
        drop(hold);
        return child.reap().and(Err(e));
    }
    let took = pin_while_held(&pinning, &mem, hold, &mut child, errors)?;
    ensure!(
        took >= HOLD_FOR / 2,
        "PIN_CUDA returned after {} ms without an error counted, before the hold ended: nothing was held?",
        took.as_millis()
    );
    Ok(())
}

/// A child pins shared memory as a surface and unmaps it; its free callback is held inside the DMA unmap,
/// so the surface is dead (its memory went away) but still mapped. The parent's PIN_CUDA of the same pages
/// (EBUSY while the child's surface was live) must wait until that surface is freed. Fails on f807e61, which
/// counted only live surfaces as holding their pages: PIN_CUDA returns at once and DMA-API debug counts an
/// overlapping mapping.
fn dying_surface(ctx: &mut Ctx) -> TestResult {
    let errors = dma_api_errors()?;
    let theirs = open(ctx)?;
    let mine = open(ctx)?;
    let mut mem = Shared::new()?;
    mem.fill(0xa5);
    let hold = Hold::on()?;
    let mut child = Child::spawn(|sync| {
        if theirs.pin_cuda(mem.va(), LEN as u64).is_err() {
            return 2;
        }
        sync.ready();
        // Not before the parent has seen the surface live.
        sync.wait_go();
        // Blocks while the provider holds the callback's unmap.
        if mem.unmap().is_err() {
            return 3;
        }
        0
    })?;
    let setup = child.wait_ready().and_then(|()| {
        expect_errno(
            "PIN_CUDA of memory another process has pinned on the card",
            mine.pin_cuda(mem.va(), LEN as u64),
            libc::EBUSY,
        )?;
        child.go()?;
        wait_for("the child's callback held", SETTLE, || {
            held().is_ok_and(|n| n == 1)
        })
    });
    if let Err(e) = setup {
        drop(hold);
        return child.reap().and(Err(e));
    }
    let took = pin_while_held(&mine, &mem, hold, &mut child, errors)?;
    ensure!(
        took >= HOLD_FOR / 2,
        "PIN_CUDA returned after {} ms without an error counted, before the hold ended: nothing was held?",
        took.as_millis()
    );
    Ok(())
}

/// Kernel log records from now on (`/dev/kmsg` read from its end): what a test provoked.
struct Kmsg(std::fs::File);

impl Kmsg {
    fn from_now() -> Result<Self, String> {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
            .map_err(|e| format!("open /dev/kmsg: {e}"))?;
        f.seek(SeekFrom::End(0))
            .map_err(|e| format!("seek /dev/kmsg to its end: {e}"))?;
        Ok(Kmsg(f))
    }

    /// The first record since `from_now` that contains `needle`.
    fn find(&mut self, needle: &str) -> Option<String> {
        let mut rec = vec![0u8; 8192];
        loop {
            match self.0.read(&mut rec) {
                Ok(n) if n > 0 => {
                    let line = String::from_utf8_lossy(&rec[..n]);
                    if line.contains(needle) {
                        return Some(line.trim_end().to_string());
                    }
                }
                // EPIPE: records were overwritten meanwhile; the next read goes on after them.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
                _ => return None,
            }
        }
    }
}

/// Threads that C2H into one page at once; with the cache off each request pins that page for itself.
const C2H_THREADS: usize = 10;
/// How long the first of them holds the engine (the model's `slow` fault), while the others queue; below
/// the driver's 2 s timeout.
const SLOW_MS: u64 = 1200;

/// Ten threads C2H into the same page with the cache off while the first holds the engine (slow): the
/// others queue for the engine. DMA-API debug must not see more than seven overlapping mappings of the
/// page's first cache line. Fails on f807e61, which pinned and mapped each request before it queued for
/// the engine: ten live FROM_DEVICE mappings of one cache line, and the kernel log says "exceeded 7
/// overlapping mappings of cacheline" (a WARNING, once per boot).
fn c2h_threads_one_page(ctx: &mut Ctx) -> TestResult {
    let dev = open_uncached(ctx)?;
    let page = ctx_err(
        "mmap a page",
        crate::dev::Mapping::new(4096, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let mut kmsg = Kmsg::from_now()?;
    ctx.rpc.get()?.clear()?;
    ctx.rpc.get()?.inject_slow(1, SLOW_MS)?;
    let addr = page.addr();
    let results: Vec<io::Result<u64>> = thread::scope(|sc| {
        let hs: Vec<_> = (0..C2H_THREADS)
            .map(|_| {
                let dev = &dev;
                // SAFETY: no Rust reference into the page is live while the threads run.
                sc.spawn(move || unsafe { dev.c2h_at(addr, 4096, 0) })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io::Error::other("panicked")))
            })
            .collect()
    });
    let cleared = ctx.rpc.get().and_then(|rpc| rpc.clear());
    for (i, r) in results.iter().enumerate() {
        if let Err(e) = r {
            return Err(format!("C2H of thread {i}: {e}"));
        }
    }
    cleared?;
    if let Some(line) = kmsg.find("overlapping mappings of cacheline") {
        return Err(format!(
            "{C2H_THREADS} C2H requests into one page overlapped too much: the kernel log says {line:?}"
        ));
    }
    Ok(())
}
