//! What every ring of this crate shares: the memory the driver and this process share (the control block
//! in a page of its own, then the slots, if the ring lies in this process's memory), and the driver's side
//! (IOC_STREAM_RING) running on a thread of its own, with the ring's eventfd.
//!
//! Soundness: the memory is an anonymous mapping the thread shares through an `Arc`, so it stays valid for
//! as long as the driver may write it (the ioctl runs on that thread and returns before the thread drops
//! its share), even if the ring is leaked. The device reads and writes it behind Rust's back: the slots
//! are only ever accessed through raw pointers, and the control block's words are atomics.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use picoevb_abi as abi;
use picoevb_logic::stream_ring::SharedControl;

use crate::Error;

/// The control block's page, then `len` bytes of slots (none for a ring in a surface).
pub(super) struct Memory {
    base: *mut u8,
    page: usize,
    len: usize,
    /// Set by the driver's thread once its ioctl returned, before it signals the eventfd: a waiter woken
    /// by that signal finds the ring ended even while the thread is still returning.
    ended: AtomicBool,
}

// SAFETY: the mapping belongs to this struct alone; the slots are accessed only through raw pointers (and
// the device's DMA), never through a reference, and the control block's words are atomics.
unsafe impl Send for Memory {}
// SAFETY: as above.
unsafe impl Sync for Memory {}

impl Memory {
    /// A zeroed control block in a page of its own, followed by `len` bytes of slots.
    pub(super) fn new(len: usize) -> Result<Self, Error> {
        // SAFETY: a plain query.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap"));
        }
        Ok(Memory {
            base: p.cast(),
            page,
            len,
            ended: AtomicBool::new(false),
        })
    }

    /// The control block: the first bytes of the mapping (page-aligned, zeroed by mmap).
    pub(super) fn control(&self) -> &SharedControl {
        // SAFETY: the mapping is live for `&self`, page-aligned (more than the atomics need) and larger
        // than the block; `SharedControl` is `repr(C)` atomics, valid for any bits, so zeroes are its
        // default and the driver's whole-word stores are ordinary atomic modifications.
        unsafe { &*self.base.cast::<SharedControl>() }
    }

    /// The first slot's address (the mapping's second page).
    pub(super) fn slots(&self) -> *mut u8 {
        // SAFETY: `page` bytes into the mapping, which is `page + len` long.
        unsafe { self.base.add(self.page) }
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // SAFETY: our own mapping; the last share is dropped only after the driver's ioctl returned, so
        // neither the driver nor the device touches it any more.
        unsafe { libc::munmap(self.base.cast(), self.page + self.len) };
    }
}

/// A fresh non-blocking eventfd.
fn eventfd() -> Result<OwnedFd, Error> {
    // SAFETY: creates a descriptor, owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(Error::last_os("eventfd"));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds 1 to eventfd `fd`'s count (the driver's thread, at the ring's end).
fn signal(fd: &OwnedFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one`; a full count (EAGAIN) already wakes every waiter.
    unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

/// Sleeps until eventfd `fd` has a count or `timeout` passes, then resets the count.
fn sleep_on(fd: &OwnedFd, timeout: Duration) -> Result<(), Error> {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Rounded up: a sub-millisecond rest of the timeout still sleeps.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: one pollfd of ours.
    if unsafe { libc::poll(&mut p, 1, ms) } < 0 {
        let e = Error::last_os("poll the ring's eventfd");
        return if e.errno() == Some(libc::EINTR) {
            Ok(())
        } else {
            Err(e)
        };
    }
    let mut count = 0u64;
    // SAFETY: reads 8 bytes into `count`; EAGAIN (no count) is fine.
    unsafe { libc::read(fd.as_raw_fd(), (&raw mut count).cast(), 8) };
    Ok(())
}

/// The driver's side of a ring: one IOC_STREAM_RING on a thread of its own. Dropping it stops the driver
/// at its next chain boundary and waits for it (at most one chain, bounded by the driver's engine timeout).
pub(super) struct Driver {
    mem: Arc<Memory>,
    thread: Option<JoinHandle<Result<abi::StreamRing, Error>>>,
    /// The driver's result once joined.
    result: Option<Result<abi::StreamRing, Error>>,
    /// The ring's eventfd (non-blocking), if the driver signals one. Closed only after the thread was
    /// joined (`Drop` joins first), so its number is never reused under the ioctl.
    wake: Option<Arc<OwnedFd>>,
    spins: u32,
}

impl Driver {
    /// Starts `arg` (its `control`, `eventfd` and `RING_EVENTFD` are filled in here) on a duplicate `fd`
    /// of the card, over `mem`'s control block, which it shares with its thread from here on
    /// ([`Driver::mem`]). With `wake` (a driver of ABI 1.7 or later) the driver signals an eventfd that
    /// [`Driver::sleep`] sleeps on.
    pub(super) fn start(
        fd: OwnedFd,
        mut arg: abi::StreamRing,
        mem: Memory,
        wake: bool,
    ) -> Result<Driver, Error> {
        let mem = Arc::new(mem);
        let wake = if wake {
            Some(Arc::new(eventfd()?))
        } else {
            None
        };
        arg.control = std::ptr::from_ref(mem.control()) as u64;
        if let Some(w) = &wake {
            arg.flags |= abi::RING_EVENTFD;
            arg.eventfd = w.as_raw_fd();
        }
        let (shared, thread_wake) = (mem.clone(), wake.clone());
        let thread = std::thread::Builder::new()
            .name("gdr-ring".into())
            .spawn(move || {
                // SAFETY: IOC_STREAM_RING with its own argument struct; the ring and the control block it
                // names are `shared`'s (or a surface, which the driver checks), kept until it returned.
                let rc = unsafe {
                    libc::ioctl(
                        fd.as_raw_fd(),
                        abi::IOC_STREAM_RING as _,
                        &mut arg as *mut abi::StreamRing,
                    )
                };
                let r = if rc < 0 {
                    Err(Error::last_os("STREAM_RING"))
                } else {
                    Ok(arg)
                };
                shared.ended.store(true, Ordering::Release);
                if let Some(w) = &thread_wake {
                    signal(w);
                }
                drop(shared);
                r
            })
            .map_err(|e| Error::Os {
                op: "spawn the ring's thread",
                errno: e.raw_os_error().unwrap_or(0),
            })?;
        Ok(Driver {
            mem,
            thread: Some(thread),
            result: None,
            wake,
            spins: 0,
        })
    }

    /// The ring's memory: its control block and slots.
    pub(super) fn mem(&self) -> &Memory {
        &self.mem
    }

    /// Whether the driver's call has returned. Once true, the control block holds its last words.
    pub(super) fn ended(&self) -> bool {
        self.mem.ended.load(Ordering::Acquire)
            || self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Joins the thread once the call returned (waiting for it to return, a moment); the driver's error,
    /// if it ended with one.
    pub(super) fn join(&mut self) -> Result<(), Error> {
        if let Some(t) = self.thread.take() {
            self.result = Some(t.join().unwrap_or_else(|_| {
                Err(Error::InvalidArgument("the ring's thread panicked".into()))
            }));
        }
        match &self.result {
            Some(Err(e)) => Err(e.clone()),
            _ => Ok(()),
        }
    }

    /// Whether [`Driver::join`] joined the thread.
    pub(super) fn joined(&self) -> bool {
        self.result.is_some()
    }

    /// Whether a waiter sleeps on the ring's eventfd (the driver has ABI 1.7).
    pub(super) fn sleeps(&self) -> bool {
        self.wake.is_some()
    }

    /// Waits for the driver's next publication or end, at most `timeout`: asleep on the eventfd, or (an
    /// older driver) spinning briefly, then napping 50 µs. No lost wake-up: the driver signals after it
    /// publishes, so a publication the caller missed left a count behind, and the poll returns at once.
    pub(super) fn sleep(&mut self, timeout: Duration) -> Result<(), Error> {
        if let Some(w) = &self.wake {
            return sleep_on(w, timeout);
        }
        self.spins = self.spins.saturating_add(1);
        if self.spins < 1000 {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(50).min(timeout));
        }
        Ok(())
    }

    /// Sets the stop word, waits for the driver, and says what it did.
    pub(super) fn finish(&mut self) -> Result<abi::StreamRing, Error> {
        self.mem.control().stop.store(1, Ordering::Release);
        self.join()?;
        self.result
            .clone()
            .unwrap_or_else(|| Err(Error::InvalidArgument("the ring never ran".into())))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.mem.control().stop.store(1, Ordering::Release);
        let _ = self.join();
    }
}
