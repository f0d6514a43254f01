//! What users do that a happy path never does, each a defect the driver once had (issue 8): unloading the
//! modules with files open, a huge PIN_CUDA, and a munmap that takes a surface and a cached host buffer
//! while a request holds both.

use std::ffi::CString;
use std::io;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::cuda::{cuda, flavour, host_twin, open, pin_range, surface};
use super::isolation::own_ram;
use super::regcache::{open_uncached, quiesce, used_once};
use super::{
    Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, kernel_version, sanity, test,
};
use crate::dev::{Device, Mapping};
use crate::rpc::{ModelState, Rpc};

const RAM: usize = FPGA_RAM_SIZE as usize;
/// The driver's largest PIN_CUDA (`kmod/logic` MAX_PIN_CUDA_LEN: an H2C2H's most).
const MAX_PIN_CUDA_LEN: u64 = 256 << 20;
/// How long a request may take before the test calls it hung (the engine timeout is 2 s).
const HUNG: Duration = Duration::from_secs(30);

pub fn register(v: &mut Vec<Test>) {
    v.push(test(
        "hardening::rmmod_with_open_file",
        rmmod_with_open_file,
    ));
    v.push(test(
        "hardening::misc_node_is_roots_and_holds_the_module",
        misc_node,
    ));
    v.push(cuda(
        "hardening::rmmod_provider_with_pin",
        rmmod_provider_with_pin,
    ));
    v.push(cuda("hardening::huge_pin_cuda", huge_pin_cuda));
    v.push(test("hardening::memlock_charged", memlock_charged).needs(Needs::RegCache));
    v.push(
        test(
            "hardening::c2h_keeps_a_neighbours_writes",
            c2h_keeps_neighbour,
        )
        .needs(Needs::RegCache),
    );
    v.push(test(
        "hardening::dma_with_a_file_mapping",
        dma_with_file_mapping,
    ));
    // With PIN_HOST too (`host_surface::`): its notifier plays the provider's callback.
    v.extend(host_twin(
        test(
            "hardening::munmap_surface_and_cached_buffer_mid_dma",
            |_| Ok(()),
        )
        .needs(Needs::JetsonRegCache),
        munmap_mid_dma,
    ));
    v.extend(host_twin(
        test("hardening::munmap_waits_for_surface_dma", |_| Ok(())).needs(Needs::JetsonProvider),
        munmap_waits_for_dma,
    ));
    v.extend(host_twin(
        test("hardening::unpin_waits_for_a_running_dma", |_| Ok(())).needs(Needs::JetsonProvider),
        unpin_waits_for_dma,
    ));
}

/// Waits (up to `HUNG`) until the model's state says the slowed `engine` has started its run.
pub(super) fn started(
    rpc: &mut Rpc,
    engine: &str,
    run: impl Fn(&ModelState) -> bool,
) -> TestResult {
    let until = Instant::now() + HUNG;
    while !run(&rpc.state()?) {
        ensure!(Instant::now() < until, "the {engine} never started");
        thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// `delete_module(name, O_NONBLOCK)`, what `rmmod` does.
fn delete_module(name: &str) -> io::Result<()> {
    let c = CString::new(name).expect("module name without NUL");
    // SAFETY: a NUL-terminated name and a flags word; the syscall reads nothing else.
    let rc = unsafe { libc::syscall(libc::SYS_delete_module, c.as_ptr(), libc::O_NONBLOCK) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// rmmod with `/dev/picoevb0` open must fail (the kernel says EWOULDBLOCK, i.e. EAGAIN, for a module in
/// use): a module that unloads under an open file runs freed text at its close. Fails on a driver whose
/// files take no module reference: the unload succeeds (and the suite's shared fd then crashes at close).
fn rmmod_with_open_file(ctx: &mut Ctx) -> TestResult {
    expect_errno(
        "rmmod picoevb with /dev/picoevb0 open",
        delete_module("picoevb"),
        libc::EAGAIN,
    )?;
    sanity(ctx)
}

/// 6.18's kernel crate builds Rust file operations only for a misc device, so each card keeps one,
/// `/dev/picoevb-miscN`, beside its own node (`kmod/picoevb/node.rs`); the C glue (5.10, 4.x) has none. That second
/// way in must open card N, be root's alone (mode 0600: the agent's sandbox does not admit it), and hold
/// the module while open like the first: its operations have no owner, so `helpers.c`'s
/// `pevb_file_hold_module` takes the reference (the suite's own file, opened through the node, holds the
/// module anyway, so the test reads the module's reference count). Fails if that open no longer takes a
/// reference or its close leaks one, or on a 6.18 build without the node.
fn misc_node(ctx: &mut Ctx) -> TestResult {
    use std::os::unix::fs::PermissionsExt;
    let misc = "/dev/picoevb-misc0";
    if kernel_version()?.0 < 6 {
        ensure!(
            !std::path::Path::new(misc).exists(),
            "the C glue's build registers {misc}"
        );
        return sanity(ctx);
    }
    let mode = std::fs::metadata(misc)
        .map_err(|e| format!("{misc}: {e}"))?
        .permissions()
        .mode();
    ensure!(mode & 0o077 == 0, "{misc} has mode {:o}", mode & 0o7777);
    let refs = || -> Result<u64, String> {
        let s = std::fs::read_to_string("/sys/module/picoevb/refcnt")
            .map_err(|e| format!("picoevb refcnt: {e}"))?;
        s.trim()
            .parse()
            .map_err(|e| format!("picoevb refcnt {s:?}: {e}"))
    };
    let before = refs()?;
    let dev = Device::open(misc).map_err(|e| format!("open {misc}: {e}"))?;
    let info = ctx_err("ABI_INFO through the misc node", dev.abi_info())?;
    ensure!(
        info.card_index == 0,
        "{misc} opens card {}",
        info.card_index
    );
    let open = refs()?;
    drop(dev);
    let after = refs()?;
    ensure!(
        open == before + 1 && after == before,
        "picoevb's reference count: {before} before opening {misc}, {open} while open, {after} after"
    );
    sanity(ctx)
}

/// The provider cannot go while a surface it pinned is live, nor picoevb while that surface's free
/// callback may still come.
fn rmmod_provider_with_pin(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let s = surface(f, RAM)?;
    let h = pin_range(&dev, s.va(), s.len())?;
    expect_errno(
        "rmmod gdr_nv_p2p with a surface pinned",
        delete_module("gdr_nv_p2p"),
        libc::EAGAIN,
    )?;
    expect_errno(
        "rmmod picoevb with a surface pinned",
        delete_module("picoevb"),
        libc::EAGAIN,
    )?;
    super::cuda::unpin(&dev, h)
}

/// A PIN_CUDA larger than any request could use is EINVAL before anything is allocated. Fails on a driver
/// that passes the size on: `1 << 40` then reaches the provider's page-array allocation (ENOMEM and a
/// kvmalloc WARNING, which the harness counts as a splat).
fn huge_pin_cuda(ctx: &mut Ctx) -> TestResult {
    let f = flavour(ctx.dev)?;
    let dev = open(ctx)?;
    let s = surface(f, RAM)?;
    for size in [MAX_PIN_CUDA_LEN + 1, 1 << 40, u64::MAX >> 17] {
        expect_errno(
            &format!("PIN_CUDA of {size:#x} bytes"),
            dev.pin_cuda(s.va(), size),
            libc::EINVAL,
        )?;
    }
    sanity(ctx)
}

/// One munmap takes a GPU surface (Jetson: host memory) and a cached host buffer while an H2C2H from that
/// surface into that buffer runs. The provider's callback waits for the request's use of the surface; the
/// sweep drops the buffer from the cache, so the request holds its last reference. A driver that drops the
/// buffer first (removing its mmu notifier, which waits for the invalidation in progress) deadlocks with the
/// callback: both the request and the munmap hang. Here both must return.
fn munmap_mid_dma(ctx: &mut Ctx) -> TestResult {
    let dev = open(ctx)?;
    let m = ctx_err(
        "mmap",
        Mapping::new(2 * RAM, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let (gpu, host) = (m.addr(), m.addr() + RAM as u64);
    let h = u64::from(pin_range(&dev, gpu, RAM)?);
    let flags = abi::H2C2H_SRC_CUDA;
    used_once(&dev, &m.as_slice()[RAM..], "the host side")?;
    // SAFETY: `host` is our mapping, no Rust reference into it is live.
    ctx_err("H2C2H surface -> host, caching the host side", unsafe {
        dev.h2c2h_any(h, host, RAM as u64, flags)
    })?;
    ensure!(
        ctx_err("REG_CACHE QUERY", dev.reg_cache_query())?.entries == 1,
        "the host side was not cached"
    );
    let rpc = ctx.rpc.get()?;
    let runs = rpc.state()?.h2c.runs;
    rpc.inject_slow(1, 1500)?;

    let (tx, rx) = mpsc::channel();
    let dma_tx = tx.clone();
    let dev = std::sync::Arc::new(dev);
    let d = dev.clone();
    thread::spawn(move || {
        // SAFETY: as above; the mapping is unmapped under the call on purpose, the driver holds the pages.
        let r = unsafe { d.h2c2h_any(h, host, RAM as u64, flags) };
        let _ = dma_tx.send(("dma", r.map(|_| ())));
    });
    // The slow transfer has started: the request holds the surface and the cached buffer.
    started(rpc, "H2C", |m| m.h2c.runs != runs)?;
    let (addr, len) = (m.addr() as usize, m.len());
    std::mem::forget(m);
    thread::spawn(move || {
        // SAFETY: our own mapping (forgotten above, so unmapped once); no Rust reference points into it.
        let rc = unsafe { libc::munmap(addr as *mut libc::c_void, len) };
        let r = if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        };
        let _ = tx.send(("munmap", r));
    });
    for _ in 0..2 {
        let (what, r) = rx.recv_timeout(HUNG).map_err(|_| {
            format!(
                "the H2C2H or the munmap hung for {HUNG:?}: request and surface callback deadlocked"
            )
        })?;
        match (what, r) {
            ("munmap", r) => ctx_err("munmap", r)?,
            // The DMA may also see the surface die first: EINVAL, never a hang.
            (_, Ok(())) => {}
            (_, Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => {}
            (_, r) => ctx_err("H2C2H during the munmap", r)?,
        }
    }
    ctx.rpc.get()?.clear()?;
    expect_errno(
        "DMA with the unmapped surface's handle",
        dev.h2c_cuda(h, 0, 4096),
        libc::EINVAL,
    )?;
    sanity(ctx)
}

/// The surface's free callback (run by a munmap) waits for the DMA using the surface: a munmap begun while
/// a slowed H2C from the surface runs returns only after that H2C (slowed by `SLOW`) ended. Fails on a
/// driver whose callback frees the pin at once (the munmap returns in milliseconds while the engine still
/// reads the pages), which no other test without the registration cache sees.
fn munmap_waits_for_dma(ctx: &mut Ctx) -> TestResult {
    let SlowedH2c { dev, m, h, dma } = slowed_h2c(ctx)?;
    let (addr, len) = (m.addr() as usize, m.len());
    std::mem::forget(m);
    let t0 = Instant::now();
    // SAFETY: our own mapping (forgotten above, so unmapped once); no Rust reference points into it.
    let rc = unsafe { libc::munmap(addr as *mut libc::c_void, len) };
    let took = t0.elapsed();
    ensure!(rc == 0, "munmap: {}", io::Error::last_os_error());
    let r = dma.join().map_err(|_| "DMA thread panicked".to_string())?;
    ctx.rpc.get()?.clear()?;
    ctx_err("H2C from the surface during the munmap", r)?;
    ensure!(
        took >= Duration::from_millis(SLOW / 2),
        "munmap returned after {took:?} while an H2C slowed by {SLOW} ms still used the surface: the free \
         callback did not wait for the DMA"
    );
    expect_errno(
        "DMA with the unmapped surface's handle",
        dev.h2c_cuda(h.into(), 0, 4096),
        libc::EINVAL,
    )?;
    sanity(ctx)
}

/// UNPIN of a surface that another thread of the file is running a DMA through (a slowed H2C from it)
/// returns only after that DMA ended, which succeeds; the handle is then gone. Fails behind an IOMMU (the
/// arm64 rows) on a driver whose unpin drops the device's mapping under the running DMA: the engine faults
/// and the H2C is EIO. Without an IOMMU such a driver passes: the unmap changes nothing the engine sees
/// (under swiotlb it would read a freed bounce slot, which no check here sees).
fn unpin_waits_for_dma(ctx: &mut Ctx) -> TestResult {
    let SlowedH2c { dev, m, h, dma } = slowed_h2c(ctx)?;
    let t0 = Instant::now();
    let unpinned = dev.unpin_cuda(h);
    let took = t0.elapsed();
    let r = dma.join().map_err(|_| "DMA thread panicked".to_string())?;
    ctx.rpc.get()?.clear()?;
    ctx_err("UNPIN during the H2C", unpinned)?;
    ctx_err("H2C from the surface during the UNPIN", r)?;
    ensure!(
        took >= Duration::from_millis(SLOW / 2),
        "UNPIN returned after {took:?} while an H2C slowed by {SLOW} ms still used the surface: the \
         mapping went under a running DMA"
    );
    expect_errno(
        "DMA with the unpinned handle",
        dev.h2c_cuda(h.into(), 0, 4096),
        libc::EINVAL,
    )?;
    drop(m);
    sanity(ctx)
}

/// How long the model slows the H2C of `slowed_h2c`.
pub(super) const SLOW: u64 = 1500;

/// An H2C from a surface, slowed by `SLOW` ms and running on another thread.
struct SlowedH2c {
    dev: std::sync::Arc<Device>,
    /// The surface's memory: `RAM` bytes of anonymous memory.
    m: Mapping,
    h: u32,
    dma: thread::JoinHandle<io::Result<u64>>,
}

/// Pins a fresh mapping as a surface on a fresh file (PIN_CUDA or PIN_HOST, the running test's kind) and
/// starts a slowed H2C from it; returns once the engine runs it. The card RAM is claimed first: its scrub
/// is an H2C run of its own, which the start check would otherwise take for the request's.
fn slowed_h2c(ctx: &mut Ctx) -> Result<SlowedH2c, String> {
    let dev = std::sync::Arc::new(open(ctx)?);
    let m = ctx_err(
        "mmap",
        Mapping::new(RAM, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    let h = pin_range(&dev, m.addr(), RAM)?;
    own_ram(&dev)?;
    let rpc = ctx.rpc.get()?;
    let runs = rpc.state()?.h2c.runs;
    rpc.inject_slow(1, SLOW)?;
    let d = dev.clone();
    let dma = thread::spawn(move || d.h2c_cuda(h.into(), 0, RAM as u64));
    started(rpc, "H2C", |m| m.h2c.runs != runs)?;
    Ok(SlowedH2c { dev, m, h, dma })
}

/// `VmPin` of /proc/self/status in bytes: the pages charged to this process's `RLIMIT_MEMLOCK` as pinned.
pub(super) fn vm_pin() -> Result<i64, String> {
    let st = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("status: {e}"))?;
    st.lines()
        .find_map(|l| l.strip_prefix("VmPin:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .map(|kb| kb << 10)
        .ok_or_else(|| "no VmPin line in /proc/self/status".to_string())
}

/// Drops CAP_IPC_LOCK from the calling thread's effective set (capabilities are per thread), so
/// `RLIMIT_MEMLOCK` applies to it.
pub(super) fn drop_ipc_lock() -> io::Result<()> {
    const CAP_IPC_LOCK: u32 = 14;
    let mut hdr = [0x2008_0522u32, 0]; // _LINUX_CAPABILITY_VERSION_3, this thread
    let mut data = [0u32; 6]; // two {effective, permitted, inheritable}
    // SAFETY: the header and a two-element data array of the v3 layout, both ours.
    if unsafe { libc::syscall(libc::SYS_capget, hdr.as_mut_ptr(), data.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    data[0] &= !(1 << CAP_IPC_LOCK);
    // SAFETY: as above.
    if unsafe { libc::syscall(libc::SYS_capset, hdr.as_mut_ptr(), data.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub(super) fn set_memlock(bytes: u64) -> io::Result<libc::rlimit> {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let new = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: old.rlim_max,
    };
    // SAFETY: plain in-pointer.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &new) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(old)
}

/// Buffers the registration cache keeps pinned are charged to the process's `RLIMIT_MEMLOCK` (VmPin), as
/// RDMA charges its long-term pins: one that would go over the limit is pinned for its request only. Fails
/// on a driver that charges nothing (VmPin stays 0, the big buffer is cached).
fn memlock_charged(ctx: &mut Ctx) -> TestResult {
    const LIMIT: i64 = 256 << 10;
    quiesce(ctx.dev)?;
    let path = ctx.dev_path.to_string();
    let base = vm_pin()?;
    let old = ctx_err(
        "setrlimit(RLIMIT_MEMLOCK)",
        set_memlock((base + LIMIT) as u64),
    )?;
    let r = thread::spawn(move || -> TestResult {
        ctx_err("capset without CAP_IPC_LOCK", drop_ipc_lock())?;
        let dev = ctx_err("open", Device::open(&path))?;
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        let small = ctx_err("mmap", Mapping::new(RAM, rw))?;
        used_once(&dev, small.as_slice(), "64 KiB")?;
        ctx_err("H2C of 64 KiB", dev.h2c(small.as_slice(), 0))?;
        let pinned = vm_pin()? - base;
        ensure!(
            pinned == RAM as i64,
            "a cached 64 KiB buffer: VmPin grew by {pinned} bytes, want {RAM}"
        );
        let src = ctx_err("mmap", Mapping::new(1 << 20, rw))?;
        let mut dst = ctx_err("mmap", Mapping::new(1 << 20, rw))?;
        for i in 0..2 {
            ctx_err(
                &format!("H2C2H of 1 MiB, over RLIMIT_MEMLOCK, #{i}"),
                dev.h2c2h(src.as_slice(), dst.as_mut_slice()),
            )?;
        }
        let st = ctx_err("REG_CACHE QUERY", dev.reg_cache_query())?;
        let pinned = vm_pin()? - base;
        ensure!(
            pinned == RAM as i64 && st.entries == 1,
            "after H2C2H over the limit: VmPin grew by {pinned} bytes, want {RAM}; cache {st:?}"
        );
        ctx_err("REG_CACHE FLUSH", dev.reg_cache_flush())?;
        let until = Instant::now() + Duration::from_secs(5);
        while vm_pin()? != base {
            ensure!(
                Instant::now() < until,
                "VmPin {} bytes after FLUSH, want {base}",
                vm_pin()?
            );
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    })
    .join()
    .map_err(|_| "memlock thread panicked".to_string());
    ctx_err("restore RLIMIT_MEMLOCK", set_memlock(old.rlim_cur))?;
    r??;
    sanity(ctx)
}

/// Two buffers that share a page are cached as one (merged). A C2H into the first, while the CPU writes the
/// second, must leave the second as the CPU wrote it: only the request's bytes are handed back to the CPU.
/// Fails under swiotlb=force on a driver that syncs the whole cached buffer (the bounce copy of the second
/// buffer, taken before the DMA, is copied back over the CPU's writes).
fn c2h_keeps_neighbour(ctx: &mut Ctx) -> TestResult {
    const HALF: usize = 2048;
    let dev = open(ctx)?;
    let mut m = ctx_err(
        "mmap",
        Mapping::new(4096, libc::PROT_READ | libc::PROT_WRITE),
    )?;
    ctx.rng.fill(m.as_mut_slice());
    let (a, b) = (m.addr(), m.addr() + HALF as u64);
    used_once(&dev, m.as_slice(), "the page")?;
    ctx_err("H2C of the first half", dev.h2c_at(a, HALF as u64, 0))?;
    ctx_err(
        "H2C of the second half",
        dev.h2c_at(b, HALF as u64, HALF as u64),
    )?;
    let st = ctx_err("REG_CACHE QUERY", dev.reg_cache_query())?;
    ensure!(
        st.entries == 1 && st.bytes == 4096,
        "the two halves were not merged into one cached buffer: {st:?}"
    );
    let mut want_a = vec![0u8; HALF];
    ctx.rng.fill(&mut want_a);
    let verify = super::regcache::open_uncached(ctx)?;
    ctx_err("H2C of the data for the first half", verify.h2c(&want_a, 0))?;
    let rpc = ctx.rpc.get()?;
    let runs = rpc.state()?.c2h.runs;
    rpc.inject_slow(1, 1000)?;
    let dev = std::sync::Arc::new(dev);
    let d = dev.clone();
    let c2h = thread::spawn(move || {
        // SAFETY: `a` is the first half of our mapping; no Rust reference into it is live meanwhile.
        unsafe { d.c2h_at(a, HALF as u64, 0) }
    });
    started(rpc, "C2H", |m| m.c2h.runs != runs)?;
    let mut want_b = vec![0u8; HALF];
    ctx.rng.fill(&mut want_b);
    // SAFETY: the second half of our mapping, which the DMA does not touch.
    unsafe { std::ptr::copy_nonoverlapping(want_b.as_ptr(), b as *mut u8, HALF) };
    let r = c2h.join().map_err(|_| "C2H thread panicked".to_string())?;
    ctx.rpc.get()?.clear()?;
    ctx_err("C2H into the first half", r)?;
    crate::buf::compare(
        "the first half after the C2H",
        &want_a,
        &m.as_slice()[..HALF],
    )?;
    crate::buf::compare(
        "the second half, written by the CPU during the C2H",
        &want_b,
        &m.as_slice()[HALF..],
    )
}

/// A writable MAP_SHARED mapping of a file on ramfs: its pages need dirty tracking (page_mkwrite), which
/// the kernel refuses to long-term pins (FOLL_LONGTERM), as on every writeback filesystem (ext4 and the
/// like). Unmounted, unmapped and removed on drop.
struct FileMapping {
    dir: CString,
    fd: libc::c_int,
    addr: *mut libc::c_void,
    len: usize,
}

impl FileMapping {
    fn new(len: usize) -> Result<Self, String> {
        let os = |what: &str| format!("{what}: {}", io::Error::last_os_error());
        let dir = CString::new("/tmp/gdr-ramfs").expect("no NUL");
        let file = CString::new("/tmp/gdr-ramfs/f").expect("no NUL");
        let fstype = CString::new("ramfs").expect("no NUL");
        // SAFETY: plain syscalls on NUL-terminated paths; the mapping is ours until drop.
        unsafe {
            if libc::mkdir(dir.as_ptr(), 0o700) != 0 && *libc::__errno_location() != libc::EEXIST {
                return Err(os("mkdir /tmp/gdr-ramfs"));
            }
            if libc::mount(
                fstype.as_ptr(),
                dir.as_ptr(),
                fstype.as_ptr(),
                0,
                std::ptr::null(),
            ) != 0
            {
                return Err(os("mount ramfs"));
            }
            let mut m = FileMapping {
                dir,
                fd: -1,
                addr: libc::MAP_FAILED,
                len,
            };
            m.fd = libc::open(file.as_ptr(), libc::O_RDWR | libc::O_CREAT, 0o600);
            if m.fd < 0 {
                return Err(os("open a ramfs file"));
            }
            if libc::ftruncate(m.fd, len as libc::off_t) != 0 {
                return Err(os("ftruncate"));
            }
            m.addr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                m.fd,
                0,
            );
            if m.addr == libc::MAP_FAILED {
                return Err(os("mmap MAP_SHARED"));
            }
            Ok(m)
        }
    }

    fn addr(&self) -> u64 {
        self.addr as u64
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes mapped readable and writable for our lifetime, borrowed through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.addr.cast(), self.len) }
    }
}

impl Drop for FileMapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, file and mount; no reference into the mapping outlives `self`.
        unsafe {
            if self.addr != libc::MAP_FAILED {
                libc::munmap(self.addr, self.len);
            }
            if self.fd >= 0 {
                libc::close(self.fd);
            }
            libc::umount2(self.dir.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// H2C from and C2H into a file's MAP_SHARED mapping, through a file with the registration cache off
/// (pinned for the request only) and one with it on (a long-term pin is refused; the request must fall
/// back to a pin of its own). Every byte checked. Fails on a driver whose one-off pins ask for
/// FOLL_LONGTERM (EFAULT), as mmap'ed files on Jetson's ext4 would see.
fn dma_with_file_mapping(ctx: &mut Ctx) -> TestResult {
    const LEN: usize = 65536;
    quiesce(ctx.dev)?;
    let uncached = open_uncached(ctx)?;
    let mut file = FileMapping::new(LEN)?;
    for (name, dev) in [("uncached", &uncached), ("cached", ctx.dev)] {
        let mut src = vec![0u8; LEN];
        ctx.rng.fill(&mut src);
        file.bytes().copy_from_slice(&src);
        ctx_err(
            &format!("H2C from the file mapping ({name})"),
            dev.h2c_at(file.addr(), LEN as u64, 0),
        )?;
        file.bytes().fill(0);
        // SAFETY: the destination is our mapping; no reference into it is live during the call.
        let r = unsafe { dev.c2h_at(file.addr(), LEN as u64, 0) };
        ctx_err(&format!("C2H into the file mapping ({name})"), r)?;
        crate::buf::compare(
            &format!("file mapping round trip ({name})"),
            file.bytes(),
            &src,
        )?;
    }
    quiesce(ctx.dev)?;
    drop(file);
    sanity(ctx)
}
