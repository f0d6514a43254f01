//! A fault that never resolves (a userfaultfd range nobody serves; a hung FUSE server alike) stalls the
//! request that touches it, and nothing else: another file's DMA and PIN_CUDA complete, and PCI removal
//! completes. Then the test resolves the fault (closing the userfaultfd wakes it and unregisters the range)
//! and the stuck request ends. Fails on a driver that faults user pages in while it holds the card's pin
//! lock (PIN_CUDA) or the request's hold on the device that removal drains.
//!
//! Registered after `removal`: these tests remove the card too (and rescan it).

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use super::cuda::{pin, surface, unpin};
use super::removal::{card_sysfs, remove_all, rescan_and_use};
use super::{Ctx, Needs, Test, TestResult, ctx_err, test};
use crate::buf::GuardedBuf;
use crate::dev::Device;
use crate::surface::Flavour;

pub fn register(v: &mut Vec<Test>) {
    v.push(
        test(
            "stall::userfault_in_pin_cuda_stalls_only_its_caller",
            |ctx| stuck_caller(ctx, Stuck::PinCuda),
        )
        .needs(Needs::JetsonUserfaultfd),
    );
    v.push(
        test("stall::userfault_in_dma_stalls_only_its_caller", |ctx| {
            stuck_caller(ctx, Stuck::H2c)
        })
        .needs(Needs::JetsonUserfaultfd),
    );
}

/// What the stuck thread does with the range nobody serves.
#[derive(Clone, Copy, Debug)]
enum Stuck {
    PinCuda,
    H2c,
}

const LEN: usize = 64 << 10;

/// `LEN` bytes of fresh anonymous memory, never touched, registered with a new userfaultfd for missing
/// pages: the first access waits until the descriptor serves it or is closed.
struct Unserved {
    uffd: Option<OwnedFd>,
    addr: *mut libc::c_void,
}

// SAFETY: the mapping is only ever reached by address (the kernel touches it); the fd is an owned file.
unsafe impl Send for Unserved {}

impl Unserved {
    fn new() -> Result<Self, String> {
        const UFFDIO_API: libc::c_ulong = 0xc018_aa3f; // _IOWR(0xaa, 0x3f, struct uffdio_api)
        const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00; // _IOWR(0xaa, 0x00, struct uffdio_register)
        const UFFD_API: u64 = 0xaa;
        const MODE_MISSING: u64 = 1;
        // SAFETY: plain syscall; the result is a new descriptor we own, or -1.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "userfaultfd(2): {} (the bench kernel needs CONFIG_USERFAULTFD)",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` is a new descriptor nobody else owns.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let mut api = [UFFD_API, 0, 0];
        // SAFETY: `api` is a struct uffdio_api (api, features, ioctls), ours.
        if unsafe { libc::ioctl(fd as i32, UFFDIO_API, api.as_mut_ptr()) } != 0 {
            return Err(format!("UFFDIO_API: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: a fresh anonymous mapping, not populated: no page is present until the fault.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        let me = Unserved {
            uffd: Some(uffd),
            addr,
        };
        let mut reg = [addr as u64, LEN as u64, MODE_MISSING, 0];
        // SAFETY: `reg` is a struct uffdio_register (start, len, mode, ioctls), ours.
        if unsafe { libc::ioctl(fd as i32, UFFDIO_REGISTER, reg.as_mut_ptr()) } != 0 {
            return Err(format!(
                "UFFDIO_REGISTER: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(me)
    }

    fn va(&self) -> u64 {
        self.addr as u64
    }

    /// Closes the userfaultfd: its waiting faults wake and retry as ordinary faults.
    fn resolve(&mut self) {
        self.uffd = None;
    }
}

impl Drop for Unserved {
    fn drop(&mut self) {
        self.uffd = None;
        // SAFETY: our own mapping of `LEN` bytes; nothing refers to it any more.
        unsafe { libc::munmap(self.addr, LEN) };
    }
}

/// Runs `f` on a thread; its result comes back on the returned receiver.
fn spawn<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> (mpsc::Receiver<T>, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let h = thread::spawn(move || {
        let _ = tx.send(f());
    });
    (rx, h)
}

/// Another open file's C2H and PIN_CUDA, while the stuck request waits.
fn other_file(path: &str) -> TestResult {
    let dev = ctx_err("open a second file", Device::open(path))?;
    let mut buf = GuardedBuf::new(4096, 0);
    ctx_err("C2H of another file", dev.c2h(buf.as_mut_slice(), 0))?;
    let s = surface(Flavour::Jetson, LEN)?;
    let h = pin(&dev, &s)?;
    unpin(&dev, h)
}

fn stuck_caller(ctx: &mut Ctx, what: Stuck) -> TestResult {
    let path = ctx.dev_path.to_string();
    let sysfs = card_sysfs()?;
    let mut range = Unserved::new()?;
    let va = range.va();
    let stuck_dev = ctx_err("open the stuck file", Device::open(&path))?;
    let (stuck_rx, stuck_h) = spawn(move || match what {
        Stuck::PinCuda => stuck_dev.pin_cuda(va, LEN as u64).map(|_| ()),
        Stuck::H2c => stuck_dev.h2c_at(va, LEN as u64, 0).map(|_| ()),
    });
    thread::sleep(Duration::from_millis(300));
    let early = stuck_rx.try_recv().ok();

    let mut failures = Vec::new();
    if let Some(r) = &early {
        failures.push(format!(
            "{what:?} on a userfaultfd range nobody serves returned at once ({r:?}): the range did not stall it"
        ));
    }
    let p = path.clone();
    let (other_rx, other_h) = spawn(move || other_file(&p));
    match other_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(r) => {
            if let Err(e) = r {
                failures.push(format!("another file while {what:?} stalled: {e}"));
            }
        }
        Err(RecvTimeoutError::Timeout) => failures.push(format!(
            "another file's C2H + PIN_CUDA did not complete within 5 s while {what:?} waited on a userfaultfd range"
        )),
        Err(e) => failures.push(format!("another file: {e}")),
    }
    let (remove_rx, remove_h) = spawn(move || remove_all(&sysfs));
    match remove_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(r) => {
            if let Err(e) = r {
                failures.push(e);
            }
        }
        Err(RecvTimeoutError::Timeout) => failures.push(format!(
            "PCI removal did not complete within 10 s while {what:?} waited on a userfaultfd range"
        )),
        Err(e) => failures.push(format!("removal: {e}")),
    }

    // Unstick everything, whatever happened above, before judging.
    range.resolve();
    let stuck = early
        .map(Ok)
        .unwrap_or_else(|| stuck_rx.recv_timeout(Duration::from_secs(30)));
    let _ = other_rx.recv();
    let _ = remove_rx.recv();
    let _ = (other_h.join(), remove_h.join());
    match stuck {
        Ok(_) => {
            let _ = stuck_h.join();
        }
        Err(_) => failures.push(format!(
            "{what:?} still stuck 30 s after its userfaultfd was closed"
        )),
    }
    drop(range);
    if let Some(f) = failures.first() {
        // The card may still be removed: bring it back for the tests after this one.
        let _ = rescan_and_use(ctx, &path);
        return Err(f.clone());
    }
    rescan_and_use(ctx, &path)
}
