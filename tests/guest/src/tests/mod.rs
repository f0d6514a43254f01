//! The test registry, the context tests run in, and helpers shared by the topic modules.

mod basic;
mod card_clock;
mod cards;
mod cuda;
mod dma;
mod dmabuf;
mod errors;
mod failslab;
mod faults;
mod hardening;
mod host_surface;
mod iommu;
mod isolation;
mod lifecycle;
mod overlap;
mod pipeline;
mod regcache;
mod removal;
mod removal_callback;
mod stall;
mod stream;

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::buf::{GuardedBuf, compare};
use crate::dev::Device;
use crate::kstat::{self, KernelCounters};
use crate::rng::Rng;
use crate::rpc::Rpc;
use crate::surface::Flavour;

pub use dma::round_trip;

pub type TestResult = Result<(), String>;

/// Fails the test with a formatted reason unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}
pub(crate) use ensure;

/// The model control connection, opened on first use so tests without RPC run without a harness.
pub struct RpcSlot {
    path: String,
    conn: Option<Result<Rpc, String>>,
}

impl RpcSlot {
    pub fn new(path: &str) -> Self {
        RpcSlot {
            path: path.to_string(),
            conn: None,
        }
    }

    pub fn get(&mut self) -> Result<&mut Rpc, String> {
        let path = &self.path;
        self.conn
            .get_or_insert_with(|| Rpc::open(path))
            .as_mut()
            .map_err(|e| e.clone())
    }
}

/// What a test gets: the shared device fd, its own RNG (seeded from the run seed and its name), RPC, and the
/// kernel counters read before the first test.
pub struct Ctx<'a> {
    pub dev: &'a Device,
    pub dev_path: &'a str,
    pub rng: Rng,
    pub rpc: &'a mut RpcSlot,
    pub baseline: &'a Result<KernelCounters, String>,
}

/// What a test needs from the loaded modules; the runner skips it (a `skipped` line, counted apart) when the
/// need is not met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    /// ABI_INFO announces a CUDA capability (a GPU-memory provider is loaded).
    Provider,
    /// ABI_INFO announces no CUDA capability.
    NoProvider,
    /// A second card, /dev/picoevb1 (the harness's --cards 2).
    SecondCard,
    /// ABI_INFO announces the registration cache (`CAP_REG_CACHE`, ABI 1.1); older drivers have none.
    RegCache,
    /// The Jetson provider and the registration cache: GPU memory is host memory, so one range can be both
    /// a surface and a host buffer.
    JetsonRegCache,
    /// The Jetson provider: GPU memory is host memory, in the process's address space (mmu notifiers).
    JetsonProvider,
    /// The Jetson provider, and process_mrelease(2) (Linux 5.15+: the OOM reaper's walk on demand; Xavier's 5.10 has none).
    JetsonReaper,
    /// An IOMMU translates the card's DMA (the card has an iommu_group).
    Iommu,
    /// ABI_INFO announces the card RAM's ownership (`CAP_RAM_OWNER`, ABI 1.2).
    RamOwner,
    /// The registration cache, and ext4 and loop devices in the kernel: a file system that writes back,
    /// on a file.
    RegCacheWritebackFs,
    /// The Jetson provider, and userfaultfd(2) (CONFIG_USERFAULTFD; the bench's arm64 kernels have none).
    JetsonUserfaultfd,
    /// ABI_INFO announces host surfaces (`CAP_HOST_SURFACE`, ABI 1.3: PIN_HOST).
    HostSurface,
    /// Fault injection in the kernel: one thread's N-th allocation can be failed (failslab, fail-nth).
    FailNth,
    /// ABI_INFO announces dma-buf import (`CAP_DMABUF`, ABI 1.4) and the kernel has udmabuf.
    DmaBuf,
    /// dma-buf import and the bench's exporter module (kmod/bench-exporter), which moves buffers.
    DmaBufExporter,
    /// ABI_INFO announces the stream block (`CAP_STREAM`, ABI 1.5): the gdr design.
    Stream,
    /// The stream block and host surfaces: a ring in pinned host memory (PIN_HOST; none on Linux 4.x).
    StreamHostRing,
}

impl Needs {
    /// Why a test with this need cannot run on `dev`, or `None` if it can. If ABI_INFO itself fails the test
    /// runs (and fails on its own): a broken ioctl must never turn into a skip.
    pub fn unmet(self, dev: &Device) -> Option<String> {
        if self == Needs::Nothing {
            return None;
        }
        if self == Needs::Iommu {
            return iommu::unmet();
        }
        if self == Needs::JetsonUserfaultfd && !has_userfaultfd() {
            return Some("no userfaultfd(2) in this kernel (CONFIG_USERFAULTFD)".into());
        }
        if self == Needs::RegCacheWritebackFs {
            let fss = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
            let ext4 = fss
                .lines()
                .any(|l| l.split_whitespace().last() == Some("ext4"));
            let loops = std::path::Path::new("/dev/loop-control").exists();
            if !(ext4 && loops) {
                return Some(format!(
                    "no ext4 ({ext4}) or no loop devices ({loops}) in this kernel"
                ));
            }
            return Needs::RegCache.unmet(dev);
        }
        if self == Needs::FailNth {
            return failslab::unmet();
        }
        if self == Needs::SecondCard {
            return (!std::path::Path::new(cards::SECOND).exists())
                .then(|| format!("no {}: one card only", cards::SECOND));
        }
        if self == Needs::JetsonReaper && !has_process_mrelease() {
            return Some("no process_mrelease(2) in this kernel (Linux 5.15+)".into());
        }
        let info = dev.abi_info().ok()?;
        let caps = info.caps;
        if self == Needs::RamOwner {
            return (caps & picoevb_abi::CAP_RAM_OWNER == 0).then(|| {
                format!(
                    "no RAM ownership: ABI_INFO caps {caps:#x} lack CAP_RAM_OWNER (abi_version {:#x})",
                    info.abi_version
                )
            });
        }
        if self == Needs::DmaBufExporter {
            return dmabuf::exporter_unmet().or_else(|| Needs::DmaBuf.unmet(dev));
        }
        if self == Needs::DmaBuf {
            if !std::path::Path::new("/dev/udmabuf").exists() {
                return Some("no /dev/udmabuf in this kernel (CONFIG_UDMABUF)".into());
            }
            return (caps & picoevb_abi::CAP_DMABUF == 0).then(|| {
                format!(
                    "no dma-buf import: ABI_INFO caps {caps:#x} lack CAP_DMABUF (abi_version {:#x})",
                    info.abi_version
                )
            });
        }
        if self == Needs::StreamHostRing {
            return Needs::Stream
                .unmet(dev)
                .or_else(|| Needs::HostSurface.unmet(dev));
        }
        if self == Needs::Stream {
            return (caps & picoevb_abi::CAP_STREAM == 0).then(|| {
                format!(
                    "no stream block: ABI_INFO caps {caps:#x} lack CAP_STREAM (abi_version {:#x})",
                    info.abi_version
                )
            });
        }
        if self == Needs::HostSurface {
            return (caps & picoevb_abi::CAP_HOST_SURFACE == 0).then(|| {
                format!(
                    "no host surfaces: ABI_INFO caps {caps:#x} lack CAP_HOST_SURFACE (abi_version {:#x})",
                    info.abi_version
                )
            });
        }
        if self == Needs::RegCache {
            return (caps & picoevb_abi::CAP_REG_CACHE == 0).then(|| {
                format!(
                    "no registration cache: ABI_INFO caps {caps:#x} lack CAP_REG_CACHE (abi_version {:#x})",
                    info.abi_version
                )
            });
        }
        match (self, Flavour::from_caps(caps)) {
            (Needs::JetsonProvider | Needs::JetsonReaper | Needs::JetsonUserfaultfd, f)
                if f != Some(Flavour::Jetson) =>
            {
                Some(format!(
                    "no Jetson GPU-memory provider (ABI_INFO caps {caps:#x})"
                ))
            }
            (Needs::JetsonRegCache, f) if f != Some(Flavour::Jetson) => Some(format!(
                "no Jetson GPU-memory provider (ABI_INFO caps {caps:#x}): only there is GPU memory host memory"
            )),
            (Needs::JetsonRegCache, _) if caps & picoevb_abi::CAP_REG_CACHE == 0 => Some(format!(
                "no registration cache: ABI_INFO caps {caps:#x} lack CAP_REG_CACHE"
            )),
            (Needs::Provider, None) => Some(format!(
                "no GPU-memory provider: ABI_INFO caps {caps:#x} have no CUDA bit"
            )),
            (Needs::NoProvider, Some(f)) => Some(format!(
                "a GPU-memory provider is loaded ({} flavour)",
                f.name()
            )),
            _ => None,
        }
    }
}

/// The running kernel's (major, minor) version, from /proc/sys/kernel/osrelease.
pub fn kernel_version() -> Result<(u32, u32), String> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_err(|e| format!("osrelease: {e}"))?;
    let mut v = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    Ok((v.next().unwrap_or(0), v.next().unwrap_or(0)))
}

/// Whether the kernel has userfaultfd(2): without it ENOSYS.
fn has_userfaultfd() -> bool {
    // SAFETY: a plain syscall; a descriptor it returns is closed at once.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) };
    if fd >= 0 {
        // SAFETY: our own new descriptor.
        unsafe { libc::close(fd as i32) };
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS)
}

/// Whether the kernel has process_mrelease(2): on a bad pidfd it answers EBADF, without it ENOSYS.
fn has_process_mrelease() -> bool {
    // SAFETY: a plain syscall on an invalid descriptor; it touches no memory.
    let r = unsafe { libc::syscall(libc::SYS_process_mrelease, -1, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS)
}

/// The first real failure among threads' results, not the "stopped by another thread" ones it caused.
pub fn first_failure<T>(results: &[Result<T, String>]) -> TestResult {
    let mut errs: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    errs.sort_by_key(|e| e.contains("stopped by another"));
    match errs.first() {
        Some(e) => Err((*e).clone()),
        None => Ok(()),
    }
}

pub struct Test {
    pub name: String,
    /// Slow or timeout-dependent tests, run only with `--extended`.
    pub extended: bool,
    pub needs: Needs,
    pub run: Box<dyn Fn(&mut Ctx) -> TestResult>,
}

fn test(name: impl Into<String>, run: impl Fn(&mut Ctx) -> TestResult + 'static) -> Test {
    Test {
        name: name.into(),
        extended: false,
        needs: Needs::Nothing,
        run: Box::new(run),
    }
}

fn extended(name: impl Into<String>, run: impl Fn(&mut Ctx) -> TestResult + 'static) -> Test {
    Test {
        extended: true,
        ..test(name, run)
    }
}

impl Test {
    /// The same test, skipped unless `needs` is met.
    fn needs(self, needs: Needs) -> Test {
        Test { needs, ..self }
    }

    /// The same test, run only with `--extended`.
    fn into_extended(self) -> Test {
        Test {
            extended: true,
            ..self
        }
    }
}

/// Every test, in run order: plain device access first, so a broken DMA path does not hide simpler failures.
/// `lifecycle` ends with `lifecycle::no_dma_api_errors`, which compares kernel counters with the ones read
/// before the first test: everything before it must have released its memory by then.
pub fn all() -> Vec<Test> {
    let mut v = Vec::new();
    basic::register(&mut v);
    dma::register(&mut v);
    card_clock::register(&mut v);
    errors::register(&mut v);
    // Its tests open their own files; they flush the shared one first, so its cached buffers do not move
    // the pinned-page counts they compare.
    regcache::register(&mut v);
    faults::register(&mut v);
    pipeline::register(&mut v);
    iommu::register(&mut v);
    cards::register(&mut v);
    cuda::register(&mut v);
    host_surface::register(&mut v);
    dmabuf::register(&mut v);
    // Before lifecycle's counter checks: they pin memory whose other mappings are on their way out.
    overlap::register(&mut v);
    // Each gives the shared file's RAM back and runs the other holder in a child process.
    isolation::register(&mut v);
    // On the shared file, before removal; the source is left off.
    stream::register(&mut v);
    hardening::register(&mut v);
    lifecycle::register(&mut v);
    // Last: it removes the card (and brings it back), which kills the suite's shared fd.
    removal::register(&mut v);
    dmabuf::register_removal(&mut v);
    removal_callback::register(&mut v);
    stall::register(&mut v);
    failslab::register(&mut v);
    v
}

/// Short name of an errno, for messages.
pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EAGAIN => "EAGAIN",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::ENOMEM => "ENOMEM",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::ENOTTY => "ENOTTY",
        libc::ERANGE => "ERANGE",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::E2BIG => "E2BIG",
        _ => return format!("errno {e}"),
    };
    name.to_string()
}

/// Checks that `res` failed with errno `want`.
pub fn expect_errno<T>(what: &str, res: io::Result<T>, want: i32) -> TestResult {
    match res {
        Ok(_) => Err(format!("{what}: succeeded, expected {}", errno_name(want))),
        Err(e) if e.raw_os_error() == Some(want) => Ok(()),
        Err(e) => Err(format!(
            "{what}: failed with {} ({e}), expected {}",
            e.raw_os_error().map_or("no errno".into(), errno_name),
            errno_name(want)
        )),
    }
}

/// Wraps an ioctl error with what was being done.
pub fn ctx_err<T>(what: &str, res: io::Result<T>) -> Result<T, String> {
    res.map_err(|e| {
        format!(
            "{what}: {} ({e})",
            e.raw_os_error().map_or("no errno".into(), errno_name)
        )
    })
}

/// H2C2H of `len` random bytes between guarded buffers at the given page offsets; every byte and the guards
/// around the destination are checked.
pub fn h2c2h_check(
    dev: &Device,
    rng: &mut Rng,
    len: usize,
    src_mis: usize,
    dst_mis: usize,
) -> Result<u64, String> {
    let mut src = GuardedBuf::new(len, src_mis);
    let mut dst = GuardedBuf::new(len, dst_mis);
    rng.fill(src.as_mut_slice());
    // Prefill with the complement so every destination byte must change.
    for (d, s) in dst.as_mut_slice().iter_mut().zip(src.as_slice()) {
        *d = !s;
    }
    let what = format!("h2c2h {len} bytes (src +{src_mis}, dst +{dst_mis})");
    let ns = ctx_err(&what, dev.h2c2h(src.as_slice(), dst.as_mut_slice()))?;
    compare(&what, src.as_slice(), dst.as_slice())?;
    dst.check_guards()
        .map_err(|e| format!("{what}: destination {e}"))?;
    src.check_guards()
        .map_err(|e| format!("{what}: source {e}"))?;
    ensure!(ns > 0, "{what}: dma_time_ns is 0");
    Ok(ns)
}

/// Checks that exactly `want` pages are held by FOLL_PIN system-wide, giving the kernel up to `settle` to
/// get there (the tests here are the only pinners while they run).
pub fn pins_are(want: i64, settle: Duration, when: &str) -> TestResult {
    let until = Instant::now() + settle;
    loop {
        let now = kstat::pinned_pages()?;
        if now == want {
            return Ok(());
        }
        if Instant::now() >= until {
            return Err(format!(
                "{when}: {now} pages held by FOLL_PIN, expected {want}{}",
                if settle.is_zero() {
                    String::new()
                } else {
                    format!(" (waited {} ms)", settle.as_millis())
                }
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// The card's debugfs `state` file (`/sys/kernel/debug/<node>/state`): what the driver holds for DMA.
pub fn card_state(dev_path: &str) -> Result<String, String> {
    let node = dev_path
        .rsplit('/')
        .next()
        .ok_or_else(|| format!("{dev_path}: no node name"))?;
    Ok(format!("/sys/kernel/debug/{node}/state"))
}

/// A small known-good H2C/C2H round trip: proves the device still works after a bad call or a fault.
pub fn sanity(ctx: &mut Ctx) -> TestResult {
    round_trip(ctx.dev, &mut ctx.rng, 4096, 0, 0, 0)
        .map(|_| ())
        .map_err(|e| format!("device wedged afterwards: {e}"))
}

#[cfg(test)]
mod registry {
    use super::*;

    #[test]
    fn names_are_unique() {
        let all = all();
        let mut names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate test names");
    }

    #[test]
    fn first_failure_skips_the_knock_on_ones() {
        let r: Vec<Result<u8, String>> = vec![
            Ok(1),
            Err("thread 0: stopped by another thread".into()),
            Err("thread 2: bytes differ".into()),
        ];
        assert_eq!(first_failure(&r), Err("thread 2: bytes differ".into()));
        assert_eq!(first_failure(&r[..1]), Ok(()));
        assert!(first_failure(&r[..2]).is_err());
    }
}
