//! What a file's registration cache does with the pins it keeps: serve a request (a hit, or a miss cached
//! on its second use), drop the buffers PIN_CUDA takes, sweep stale ones, answer IOC_REG_CACHE and close.
//! Written once for both modules over the glue's kernel services; which buffer hits and which goes is
//! `cache_policy`'s.
//!
//! The glue keeps a table (`Table`): the policy and a pin per slot, under the file's table lock. Around
//! it, `Services` gives the card-wide rules, under the card's pin lock (the lock PIN_CUDA holds while it
//! evicts cached buffers and maps a surface). The order of a miss, which the host tests check:
//! 1. under the table lock: look up; a hit on a fresh pin is a new reference to it; a stale one is
//!    dropped and the lookup runs again; a miss is cached only on its second use (`Policy::admit`);
//! 2. the table lock let go, under the pin lock: pages a GPU surface covers, or that another cached
//!    buffer holds (an alias, by page frame), are pinned for the request only; so is memory that is not
//!    all struct pages. Looked up before pinning, so a request never makes a long-lived pin it cannot
//!    keep; pinning may fault pages in for a long time and runs under no table lock;
//! 3. the pages pinned differ from those looked up when the memory was remapped meanwhile: then the pin
//!    serves this request only if its pages are held elsewhere;
//! 4. under the table lock again (inside the pin lock): unless closed meanwhile, drop what
//!    `Policy::make_room` names and insert.
//!
//! The card-wide checks take every file's table lock in turn (their own included), so nothing here calls
//! them under a table lock.

use crate::abi;
use crate::cache_policy;
use crate::cache_policy::{Lookup, Op, Policy, Range, Removal};

/// One file's table, reached only under its lock (`Services::with_table`).
pub trait Table {
    /// A reference to a cached buffer's pin; dropping it lets go of the reference.
    type Pin;
    /// The table's policy.
    fn policy(&mut self) -> &mut Policy;
    /// Close or card removal happened: nothing is cached any more.
    fn closed(&self) -> bool;
    /// Marks the table closed.
    fn close(&mut self);
    /// A new reference to the pin in `slot`, if it holds one whose memory has not changed since it was
    /// pinned (its notifier did not fire).
    fn fresh(&self, slot: usize) -> Option<Self::Pin>;
    /// Whether `slot` holds a pin whose memory changed.
    fn stale(&self, slot: usize) -> bool;
    /// Whether `slot` holds a pin on any of pages `frames` (sorted page frame numbers).
    fn holds_frames(&self, slot: usize, frames: &[u64]) -> bool;
    /// Keeps a new reference to `pin` in the empty `slot`.
    fn keep(&mut self, slot: usize, pin: &Self::Pin);
    /// Lets go of the pin in `slot`, if any (its last holder unpins it).
    fn drop_pin(&mut self, slot: usize);
}

/// The kernel services of one file's cache on its card.
pub trait Services {
    /// As `Table::Pin`.
    type Pin;
    /// The file's table.
    type Table: Table<Pin = Self::Pin>;
    /// A list of page frame numbers, sorted.
    type Frames: core::ops::Deref<Target = [u64]>;
    /// Runs `f` under the file's table lock.
    fn with_table<R>(&self, f: impl FnOnce(&mut Self::Table) -> R) -> R;
    /// Runs `f` under the card's pin lock.
    fn with_pin_lock<R>(&self, f: impl FnOnce() -> R) -> R;
    /// Whether a live GPU surface covers pages `[first, end)` of address space `mm` (under the pin lock).
    fn overlaps_surface(&self, mm: usize, first: u64, end: u64) -> bool;
    /// The page frames behind the caller's pages `[first, end)`; `None` if they are not all writable
    /// struct pages (read-only memory, a device's BAR) or cannot be read.
    fn frames(&self, first: u64, end: u64) -> Option<Self::Frames>;
    /// Whether a live surface or a buffer cached by any file of the card holds any of pages `frames`,
    /// not counting this file's buffers that `replacing` takes the place of (under the pin lock; takes
    /// every table lock in turn).
    fn frames_in_use(&self, frames: &[u64], replacing: Range) -> bool;
    /// Pins `want` of the caller's memory for the cache: watched, long-term, charged. `None` if it cannot
    /// be cached (read-only memory, a mapping that needs writeback, memory that kept changing, over
    /// RLIMIT_MEMLOCK): the request's own pin then serves it or gives its real error.
    fn pin(&self, want: Range) -> Option<Self::Pin>;
    /// The pages `pin` holds, sorted.
    fn pin_frames<'a>(&self, pin: &'a Self::Pin) -> &'a [u64];
}

/// How one request's host memory is held.
#[derive(Debug, PartialEq, Eq)]
pub enum Held<P, O> {
    /// A cached buffer, from `offset` bytes into it.
    Cached {
        /// The buffer's pin (a reference).
        pin: P,
        /// Where the request starts inside it.
        offset: u64,
    },
    /// A pin for this request only.
    Once(O),
}

/// Pins `r` of the caller's memory for one request: a cached buffer when one serves it or it can be
/// cached, else `once()` (a pin for this request only, whose error is the request's).
pub fn get<S: Services, O, E>(
    s: &S,
    r: Range,
    once: impl FnOnce() -> Result<O, E>,
) -> Result<Held<S::Pin, O>, E> {
    if let Some((pin, offset)) = cached(s, r) {
        return Ok(Held::Cached { pin, offset });
    }
    let o = once()?;
    s.with_table(|t| t.policy().note_uncached());
    Ok(Held::Once(o))
}

/// What the first look under the table lock decided.
enum First<P> {
    Hit(P, u64),
    /// What to pin, and the page size.
    Cache(Range, u64),
    Bypass,
}

/// The cached way of `get`: the pin and the request's offset into it, or `None` (pin for once only).
fn cached<S: Services>(s: &S, r: Range) -> Option<(S::Pin, u64)> {
    let first = s.with_table(|t| {
        loop {
            if t.closed() {
                return First::Bypass;
            }
            match t.policy().lookup(r) {
                Lookup::Hit { slot, offset } => match t.fresh(slot) {
                    Some(pin) => {
                        t.policy().hit(slot);
                        return First::Hit(pin, offset);
                    }
                    None => remove(t, slot, Removal::Invalidated),
                },
                Lookup::Miss => {
                    let (want, page) = (t.policy().merged(r), t.policy().page());
                    // A buffer is cached only on its second use: the first is the uncached path, with
                    // no registration and no eviction.
                    return if t.policy().admit(r) {
                        First::Cache(want, page)
                    } else {
                        First::Bypass
                    };
                }
                Lookup::Bypass => return First::Bypass,
            }
        }
    });
    let (want, page) = match first {
        First::Hit(pin, offset) => return Some((pin, offset)),
        First::Bypass => return None,
        First::Cache(want, page) => (want, page),
    };
    let pin = s.with_pin_lock(|| cache(s, want, page))?;
    Some((pin, r.addr - want.addr))
}

/// Steps 2 to 4 of a miss (the module comment), under the pin lock: the pin that serves the request,
/// cached if it may be.
fn cache<S: Services>(s: &S, want: Range, page: u64) -> Option<S::Pin> {
    let first = want.addr & !(page - 1);
    let end = (want.addr + want.len).div_ceil(page) * page;
    if s.overlaps_surface(want.mm, first, end) {
        return None;
    }
    let frames = s.frames(first, end)?;
    if frames.is_empty() || s.frames_in_use(&frames, want) {
        return None;
    }
    let pin = s.pin(want)?;
    let got = s.pin_frames(&pin);
    let shared = *got != *frames && s.frames_in_use(got, want);
    s.with_table(|t| {
        if shared {
            t.policy().note_uncached();
        } else if !t.closed() {
            while let Some(slot) = t.policy().make_room(want) {
                remove(t, slot, Removal::Evicted);
            }
            if let Some(slot) = t.policy().insert(want) {
                t.keep(slot, &pin);
            }
        }
    });
    Some(pin)
}

/// Forgets `slot` and lets go of its pin.
fn remove<T: Table>(t: &mut T, slot: usize, why: Removal) {
    t.policy().remove(slot, why);
    t.drop_pin(slot);
}

/// Slots, one bit each: what the policy's removal callbacks collect while it is borrowed.
type Slots = u64;
const _: () = assert!(cache_policy::CAPACITY <= Slots::BITS as usize);

/// Lets go of the pins of slots `gone`, which the policy removed.
fn drop_pins<T: Table>(t: &mut T, gone: Slots) {
    for slot in 0..cache_policy::CAPACITY {
        if gone & 1 << slot != 0 {
            t.drop_pin(slot);
        }
    }
}

/// The notifier's sweep: drops the buffers whose memory changed.
pub fn sweep<T: Table>(t: &mut T) {
    for slot in 0..cache_policy::CAPACITY {
        if t.stale(slot) {
            remove(t, slot, Removal::Invalidated);
        }
    }
}

/// PIN_CUDA of pages `[r.addr, r.addr + r.len)` of `r.mm`, page frames `frames` (sorted): drops the
/// buffers on those pages, whatever address they were cached under, so the surface's mapping is the only
/// long-lived one of that memory.
pub fn evict<T: Table>(t: &mut T, r: Range, frames: &[u64]) {
    while let Some(slot) = t.policy().sharing(r) {
        remove(t, slot, Removal::Evicted);
    }
    for slot in 0..cache_policy::CAPACITY {
        if t.holds_frames(slot, frames) {
            remove(t, slot, Removal::Evicted);
        }
    }
}

/// Whether a buffer of this table holds any of pages `frames`, not counting, when the table is the one
/// asking (`own`), the buffers that `replacing` takes the place of.
pub fn holds_frames<T: Table>(t: &mut T, frames: &[u64], own: bool, replacing: Range) -> bool {
    (0..cache_policy::CAPACITY).any(|slot| {
        !(own && t.policy().slot_shares_page(slot, replacing)) && t.holds_frames(slot, frames)
    })
}

/// IOC_REG_CACHE: does `op`, returns the cache's state.
pub fn control<T: Table>(t: &mut T, op: Op) -> abi::RegCache {
    let mut gone: Slots = 0;
    let answer = t.policy().control(op, |slot| gone |= 1 << slot);
    drop_pins(t, gone);
    answer
}

/// Close or card removal: drops every buffer and caches nothing more.
pub fn close<T: Table>(t: &mut T) {
    t.close();
    let mut gone: Slots = 0;
    t.policy().flush(|slot| gone |= 1 << slot);
    drop_pins(t, gone);
}

#[cfg(test)]
#[path = "cache_table_tests.rs"]
mod tests;
