//! Host memory pinned as a surface (PIN_HOST, ABI 1.3): what Thor, and Orin after CUDA 14, use instead of
//! nvidia_p2p. Most of its tests are the GPU-memory tests run with PIN_HOST (`cuda::both`, `host_twin`:
//! DMA both ways, bad arguments, handles, overlaps, munmap mid-DMA, removal). These are the rules only a
//! pin the driver takes itself has: the capability, the `RLIMIT_MEMLOCK` charge, which changes of the
//! mapping end the surface (munmap, the process's exit) and which leave it alone (mprotect, fork).

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::cuda::{dma_refuses, open, surface, surface_to_host, unpin};
use super::hardening::{drop_ipc_lock, set_memlock, vm_pin};
use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, kernel_version, test};
use crate::dev::{Device, Mapping};
use crate::surface::Flavour;

const LEN: usize = 256 << 10;
const RAM: usize = FPGA_RAM_SIZE as usize;

pub fn register(v: &mut Vec<Test>) {
    // Always runs: a driver that lost the capability would otherwise turn every host_surface test into a
    // skip.
    v.push(test("host_surface::announced", announced));
    v.push(host("host_surface::memlock_charged", memlock_charged));
    v.push(host(
        "host_surface::mprotect_and_fork_leave_it",
        mprotect_and_fork,
    ));
    v.push(host(
        "host_surface::exit_of_its_process_ends_it",
        exit_ends_it,
    ));
}

fn host(name: &str, run: impl Fn(&mut Ctx) -> TestResult + 'static) -> Test {
    test(name, run).needs(Needs::HostSurface)
}

/// ABI_INFO says 1.3 or later and `CAP_HOST_SURFACE` on Linux 5.10 and later (a host surface is a watched
/// pin, under the mmu interval notifier of 5.5), and no `CAP_HOST_SURFACE` on 4.x, where PIN_HOST answers
/// EOPNOTSUPP. Fails on a 5.10+ driver without PIN_HOST, or a 4.x one that announces it.
fn announced(ctx: &mut Ctx) -> TestResult {
    let info = ctx_err("ABI_INFO", ctx.dev.abi_info())?;
    if kernel_version()?.0 < 5 {
        ensure!(
            info.caps & abi::CAP_HOST_SURFACE == 0,
            "ABI_INFO caps {:#x} announce host surfaces on Linux 4.x",
            info.caps
        );
        return expect_errno(
            "PIN_HOST on Linux 4.x",
            ctx.dev.pin_host(0x1000_0000, 4096),
            libc::EOPNOTSUPP,
        );
    }
    ensure!(
        info.abi_version >= (1 << 16 | 3) && info.caps & abi::CAP_HOST_SURFACE != 0,
        "ABI_INFO {:#x} caps {:#x}: want 1.3+ with CAP_HOST_SURFACE",
        info.abi_version,
        info.caps
    );
    Ok(())
}

/// A host surface counts against `RLIMIT_MEMLOCK` (VmPin) from PIN_HOST until UNPIN, as long-term pins do
/// (RDMA's umem, the registration cache); one beyond the limit is ENOMEM and pins nothing. Fails on a
/// driver that charges nothing (VmPin unchanged; the pin over the limit succeeds) or forgets to uncharge.
fn memlock_charged(ctx: &mut Ctx) -> TestResult {
    let path = ctx.dev_path.to_string();
    let base = vm_pin()?;
    let old = ctx_err(
        "setrlimit(RLIMIT_MEMLOCK)",
        set_memlock((base + LEN as i64 + (64 << 10)) as u64),
    )?;
    let r = thread::spawn(move || -> TestResult {
        ctx_err("capset without CAP_IPC_LOCK", drop_ipc_lock())?;
        let dev = ctx_err("open", Device::open(&path))?;
        ctx_err("REG_CACHE off", dev.reg_cache_disable())?;
        // Not `surface()`: its memory is mlocked, which the limit would refuse.
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let a = ctx_err("mmap", Mapping::new(LEN, rw))?;
        let b = ctx_err("mmap", Mapping::new(LEN, rw))?;
        let h = ctx_err("PIN_HOST", dev.pin_host(a.addr(), LEN as u64))?;
        let pinned = vm_pin()? - base;
        ensure!(
            pinned == LEN as i64,
            "a {LEN}-byte host surface: VmPin grew by {pinned} bytes"
        );
        expect_errno(
            "PIN_HOST beyond RLIMIT_MEMLOCK",
            dev.pin_host(b.addr(), LEN as u64),
            libc::ENOMEM,
        )?;
        ensure!(
            vm_pin()? - base == LEN as i64,
            "the refused PIN_HOST left VmPin at {}",
            vm_pin()? - base
        );
        unpin(&dev, h)?;
        ensure!(
            vm_pin()? == base,
            "VmPin {} after UNPIN, want {base}",
            vm_pin()?
        );
        Ok(())
    })
    .join()
    .map_err(|_| "memlock thread panicked".to_string());
    ctx_err("restore RLIMIT_MEMLOCK", set_memlock(old.rlim_cur))?;
    r?
}

/// mprotect (read-only, then back) and fork (which write-protects a private mapping for copy-on-write)
/// change the mapping's protections, never its pages: the surface lives through both, and DMA through it
/// still moves the right bytes. Fails on a driver that ends a host surface on every invalidation of its
/// range (EINVAL after the mprotect).
///
/// Before Linux 5.17 (Xavier's 5.10) the mprotect does replace the page: making the mlocked private page
/// writable again faults it in for writing, and a pinned anonymous page is copied then (GUP against
/// copy-on-write; 5.17's PageAnonExclusive ended that). The address no longer maps the pinned page, so there
/// the surface must end: a driver that missed the replacement would DMA into a page nobody sees.
fn mprotect_and_fork(ctx: &mut Ctx) -> TestResult {
    let dev = open(ctx)?;
    let mut s = surface(Flavour::Jetson, LEN)?;
    let mut h = ctx_err("PIN_HOST", dev.pin_host(s.va(), LEN as u64))?;
    ctx_err("mprotect read-only", s.protect(libc::PROT_READ))?;
    ctx_err(
        "mprotect read-write",
        s.protect(libc::PROT_READ | libc::PROT_WRITE),
    )?;
    if pins_survive_cow()? {
        surface_to_host(&dev, &mut ctx.rng, &mut s, h, 4096, 0)?;
    } else {
        dma_refuses(&dev, h.into(), "a surface whose pages mprotect replaced")?;
        expect_errno(
            "UNPIN of the replaced surface",
            dev.unpin_cuda(h),
            libc::EINVAL,
        )?;
        h = ctx_err("PIN_HOST again", dev.pin_host(s.va(), LEN as u64))?;
    }
    // SAFETY: the child only calls _exit (async-signal-safe), whatever the parent's threads hold.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: the forked child ends at once.
        unsafe { libc::_exit(0) };
    }
    ensure!(pid > 0, "fork: {}", io::Error::last_os_error());
    let mut status = 0;
    // SAFETY: our own child; plain out-pointer.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    ensure!(waited == pid, "waitpid: {}", io::Error::last_os_error());
    surface_to_host(&dev, &mut ctx.rng, &mut s, h, RAM, 0)?;
    unpin(&dev, h)
}

/// Whether this kernel keeps a pinned anonymous page mapped through a copy-on-write fault (5.17+).
fn pins_survive_cow() -> Result<bool, String> {
    Ok(kernel_version()? >= (5, 17))
}

/// A process pins its memory on a file it shares with its parent, then exits: its address space goes
/// (exit_mmap unmaps everything), and with it the surface, as the provider's free callback would end a GPU
/// surface. The parent's DMA through the handle is then EINVAL, and so is UNPIN (the memory already went
/// away). Fails on a driver whose surface outlives its memory (the DMA succeeds on freed pages).
fn exit_ends_it(ctx: &mut Ctx) -> TestResult {
    let dev = open(ctx)?;
    let mut fds = [0; 2];
    // SAFETY: plain out-array of two descriptors.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    ensure!(rc == 0, "pipe: {}", io::Error::last_os_error());
    let fd = dev.raw_fd();
    // SAFETY: the child makes only raw system calls (mmap, ioctl, write, _exit), which are safe after fork
    // in a threaded process; it touches no lock the parent's threads may hold.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; everything here is the child's own memory.
        unsafe {
            let rw = libc::PROT_READ | libc::PROT_WRITE;
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
            let m = libc::mmap(core::ptr::null_mut(), LEN, rw, flags, -1, 0);
            let mut a = abi::PinCuda {
                va: m as u64,
                size: LEN as u64,
                ..Default::default()
            };
            let ok = m != libc::MAP_FAILED
                && libc::ioctl(fd, abi::IOC_PIN_HOST as _, &mut a as *mut abi::PinCuda) == 0;
            let reply: i64 = if ok { i64::from(a.handle) } else { -1 };
            libc::write(fds[1], (&reply as *const i64).cast(), 8);
            libc::_exit(0);
        }
    }
    ensure!(pid > 0, "fork: {}", io::Error::last_os_error());
    let mut reply = -1i64;
    // SAFETY: eight bytes into our own i64; then our own descriptors and child.
    let (n, waited) = unsafe {
        let n = libc::read(fds[0], (&mut reply as *mut i64).cast(), 8);
        libc::close(fds[0]);
        libc::close(fds[1]);
        let mut status = 0;
        (n, libc::waitpid(pid, &mut status, 0))
    };
    ensure!(
        n == 8 && reply >= 0,
        "the child's PIN_HOST failed (reply {reply}, {n} bytes)"
    );
    ensure!(waited == pid, "waitpid: {}", io::Error::last_os_error());
    let h = reply as u32;
    // The child has exited: its exit_mmap ran the notifier before waitpid returned.
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match dev.h2c_cuda(h.into(), 0, 4096) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
            r => {
                ensure!(
                    Instant::now() < until,
                    "H2C from the exited process's surface: {r:?}, want EINVAL"
                );
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
    dma_refuses(&dev, h.into(), "the exited process's surface")?;
    expect_errno(
        "UNPIN of the exited process's surface",
        dev.unpin_cuda(h),
        libc::EINVAL,
    )
}
