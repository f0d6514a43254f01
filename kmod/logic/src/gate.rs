//! The request gate: the order in which one DMA request (H2C, C2H, H2C2H) takes what it needs and lets
//! it go again. Both kernels' glues run every transfer through [`run`] and supply only the kernel
//! services ([`Services`]); the order is decided here, once.
//!
//! 1. User memory is faulted in before the request holds the device (unbind drains that hold) or any
//!    card lock: a fault may sleep in I/O or reclaim for as long as it needs.
//! 2. The device hold, the card RAM's use (its owner rules), the room to quarantine every host pin (so a
//!    wedged card's pins can never be forgotten for want of memory later).
//! 3. Every host side is pinned before any GPU surface is entered: pinning may wait on a provider
//!    callback (reclaim, a folio lock) that itself waits for the surface's uses to end.
//! 4. The engines run.
//! 5. Surface uses end before host pins are let go: a provider callback may wait for the use while it
//!    holds a folio lock that unpinning dirty pages takes. A host pin the engine may still touch (the
//!    request ran, failed, and the card is wedged: its engine was not shown idle) is quarantined until
//!    unbind, never unpinned; a surface use still ends, since its callback must not wait for unbind and
//!    bus mastering is off.
//! 6. The room, the RAM use, the device hold, in reverse.
//!
//! Steps 3 to 5 run once per window of at most [`WINDOW`] bytes of the request, in order, so a request
//! never holds more than a window of host memory pinned per side, however long it is (the round trip
//! takes up to 256 MiB); nothing is charged to `RLIMIT_MEMLOCK` for these transient pins, as for
//! `O_DIRECT` I/O, because the window bounds them. A window that fails ends the request.

use crate::errno::Errno;
use crate::request::{Host, OneWay, RoundTrip};
use crate::xdma::Dir;

/// The most bytes of a request steps 3 to 5 hold at once: a multiple of the page size and of any card
/// RAM, so a window's pipeline plans whole chunks; large enough that a window's pin and its pipeline's
/// fill and drain cost little beside the DMA (4 MiB is about 10 ms at Gen2 x1).
pub const WINDOW: u64 = 4 << 20;

/// A side of a request: the memory the device reads (`Src`) or writes (`Dst`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Read by the device (H2C's host memory, H2C2H's source).
    Src,
    /// Written by the device (C2H's host memory, H2C2H's destination).
    Dst,
}

impl Side {
    /// Whether data moves to the device through this side.
    pub fn to_device(self) -> bool {
        self == Side::Src
    }

    /// The side in host or GPU memory of a one-way transfer on engine `dir`.
    pub fn of(dir: Dir) -> Self {
        match dir {
            Dir::H2c => Side::Src,
            Dir::C2h => Side::Dst,
        }
    }
}

/// What the engines do once every side is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// One engine between the side and card address `fpga`: an offset in card RAM, or the stream window.
    OneWay {
        /// The engine.
        dir: Dir,
        /// Card (AXI) address.
        fpga: u64,
        /// The DMA time is the engine's, by the card's clock (`engine::transfer`).
        card_time: bool,
    },
    /// Source -> card RAM -> destination, both engines.
    RoundTrip,
}

/// A checked transfer, as the gate takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    /// The memory the device reads, if the request has such a side in host or GPU memory.
    pub src: Option<Host>,
    /// The memory the device writes.
    pub dst: Option<Host>,
    /// Bytes.
    pub len: u64,
    /// The engines' part.
    pub work: Work,
    /// Where the request starts in every GPU surface it names: 0 but for a stream ring's chain (the
    /// ABI's transfers start at the surface's `va`).
    pub surface_at: u64,
}

impl Request {
    /// An H2C (host -> card RAM) or C2H (card RAM -> host) transfer.
    pub fn one_way(dir: Dir, x: &OneWay) -> Self {
        let (src, dst) = match Side::of(dir) {
            Side::Src => (Some(x.host), None),
            Side::Dst => (None, Some(x.host)),
        };
        Request {
            src,
            dst,
            len: x.len,
            work: Work::OneWay {
                dir,
                fpga: x.fpga,
                card_time: x.card_time,
            },
            surface_at: 0,
        }
    }

    /// An H2C2H round trip.
    pub fn round_trip(x: &RoundTrip) -> Self {
        Request {
            src: Some(x.src),
            dst: Some(x.dst),
            len: x.len,
            work: Work::RoundTrip,
            surface_at: 0,
        }
    }

    /// Whether the engines touch the card RAM, whose owner rule then applies: every request but a one-way
    /// transfer with the stream block (a source or checker every holder shares, no holder's data).
    pub fn uses_ram(&self) -> bool {
        match self.work {
            Work::OneWay { fpga, .. } => !crate::stream::in_window(fpga),
            Work::RoundTrip => true,
        }
    }

    fn sides(&self) -> impl Iterator<Item = (Side, Host)> {
        [(Side::Src, self.src), (Side::Dst, self.dst)]
            .into_iter()
            .filter_map(|(side, host)| host.map(|h| (side, h)))
    }

    fn user_sides(&self) -> impl Iterator<Item = (Side, u64)> {
        self.sides().filter_map(|(side, h)| match h {
            Host::User(addr) => Some((side, addr)),
            Host::Cuda(_) => None,
        })
    }

    fn gpu_sides(&self) -> impl Iterator<Item = (Side, u32)> {
        self.sides().filter_map(|(side, h)| match h {
            Host::Cuda(handle) => Some((side, handle)),
            Host::User(_) => None,
        })
    }
}

/// The kernel services one request needs. Each `take` the gate makes that succeeds is matched by exactly
/// one `let go` in the order the module comment gives; a failed `take` holds nothing.
pub trait Services {
    /// Faults in `len` bytes of user memory at `addr`, for writing if the device writes there.
    fn prefault(&mut self, addr: u64, len: u64, device_writes: bool) -> Result<(), Errno>;
    /// Holds the device for the request (fails once removal began).
    fn begin(&mut self) -> Result<(), Errno>;
    /// Lets go of [`Services::begin`]'s hold.
    fn end(&mut self);
    /// Uses the card RAM under its owner rules.
    fn ram_begin(&mut self) -> Result<(), Errno>;
    /// Ends [`Services::ram_begin`]'s use.
    fn ram_end(&mut self);
    /// Reserves what quarantining `pins` host pins would need.
    fn reserve_quarantine(&mut self, pins: usize) -> Result<(), Errno>;
    /// Gives back [`Services::reserve_quarantine`]'s reservation (or what quarantine left of it).
    fn unreserve_quarantine(&mut self);
    /// Pins `len` bytes of user memory at `addr` (or uses a cached pin of them) for `side`.
    fn pin_user(&mut self, side: Side, addr: u64, len: u64) -> Result<(), Errno>;
    /// Lets go of `side`'s host pin: the device is done with it.
    fn unpin_user(&mut self, side: Side);
    /// Keeps `side`'s host pin until unbind: the device may still touch it.
    fn quarantine(&mut self, side: Side);
    /// Enters `len` bytes at offset `at` of the GPU surface `handle` for `side` (a use its free callback
    /// waits for), handing them to the device.
    fn enter_surface(&mut self, side: Side, handle: u32, at: u64, len: u64) -> Result<(), Errno>;
    /// Ends `side`'s surface use.
    fn exit_surface(&mut self, side: Side);
    /// Runs the engines over `len` bytes of the held sides: from the start of a host pin (which holds just
    /// this window), from offset `at` of a surface (`enter_surface`'s `at`). Returns the DMA time in nanoseconds.
    fn run(&mut self, work: Work, at: u64, len: u64) -> Result<u64, Errno>;
    /// Whether an engine of the card could not be shown idle.
    fn wedged(&self) -> bool;
}

/// Runs one transfer through the gate; returns the DMA time in nanoseconds.
pub fn run<S: Services + ?Sized>(s: &mut S, req: &Request) -> Result<u64, Errno> {
    for (side, addr) in req.user_sides() {
        s.prefault(addr, req.len, !side.to_device())?;
    }
    s.begin()?;
    let r = in_ram(s, req);
    s.end();
    r
}

fn in_ram<S: Services + ?Sized>(s: &mut S, req: &Request) -> Result<u64, Errno> {
    if !req.uses_ram() {
        return reserved(s, req);
    }
    s.ram_begin()?;
    let r = reserved(s, req);
    s.ram_end();
    r
}

fn reserved<S: Services + ?Sized>(s: &mut S, req: &Request) -> Result<u64, Errno> {
    s.reserve_quarantine(req.user_sides().count())?;
    let r = windows(s, req);
    s.unreserve_quarantine();
    r
}

/// Steps 3 to 5 for each window in turn; the DMA time of them all.
fn windows<S: Services + ?Sized>(s: &mut S, req: &Request) -> Result<u64, Errno> {
    let (mut at, mut ns) = (0, 0);
    while at < req.len {
        let len = WINDOW.min(req.len - at);
        ns += held(s, req, at, len)?;
        at += len;
    }
    Ok(ns)
}

/// What the gate holds: which sides (indexed `Side as usize`; a side's kind is the request's), and
/// whether the engines ran.
#[derive(Clone, Copy, Default)]
struct Holds {
    taken: [bool; 2],
    ran: bool,
}

/// One window: `len` bytes at offset `at` of the request.
fn held<S: Services + ?Sized>(s: &mut S, req: &Request, at: u64, len: u64) -> Result<u64, Errno> {
    let mut h = Holds::default();
    let r = take_and_run(s, req, at, len, &mut h);
    for (side, _) in req.gpu_sides() {
        if h.taken[side as usize] {
            s.exit_surface(side);
        }
    }
    // Asked only if the window ran: a card another request wedged meanwhile never saw these pages.
    let keep = h.ran && r.is_err() && s.wedged();
    for (side, _) in req.user_sides() {
        if h.taken[side as usize] {
            if keep {
                s.quarantine(side);
            } else {
                s.unpin_user(side);
            }
        }
    }
    r
}

fn take_and_run<S: Services + ?Sized>(
    s: &mut S,
    req: &Request,
    at: u64,
    len: u64,
    h: &mut Holds,
) -> Result<u64, Errno> {
    for (side, addr) in req.user_sides() {
        s.pin_user(side, addr + at, len)?;
        h.taken[side as usize] = true;
    }
    for (side, handle) in req.gpu_sides() {
        s.enter_surface(side, handle, req.surface_at + at, len)?;
        h.taken[side as usize] = true;
    }
    h.ran = true;
    let work = match req.work {
        Work::OneWay {
            dir,
            fpga,
            card_time,
        } => Work::OneWay {
            dir,
            fpga: fpga + at,
            card_time,
        },
        Work::RoundTrip => Work::RoundTrip,
    };
    s.run(work, req.surface_at + at, len)
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
