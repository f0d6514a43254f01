//! Registration-cache policy: which cached host buffer serves a request, which one to evict (least recently
//! used first), the limits, the counters and the IOC_REG_CACHE argument checks.
//!
//! Only bookkeeping: the kernel glue keeps the pins in a table indexed by the same slot numbers and does
//! what the answers say (pin, insert, drop). Rules:
//! - no page is in two cached buffers of one file: then at most one mapping per file covers any memory,
//!   which bounds the overlapping DMA mappings of a cache line (DMA-API debug warns past 7);
//! - a request hits when its range lies inside one cached buffer of the same address space;
//! - a miss caches the request's range merged with the cached buffers that share a page with it (their
//!   pages are the union's pages: pinning it touches no new memory), or, if that union is over
//!   `max_bytes`, the range alone; the buffers sharing a page with what is cached go first, then the least
//!   recently used until both limits hold;
//! - a buffer larger than `max_bytes`, or any buffer with `max_entries == 0`, is pinned for once only;
//! - a miss is cached only when its range was used before (`admission`), full cache or not: the first
//!   use of a buffer is pinned for once only, so a single-use buffer costs an uncached request plus a
//!   lookup, never a registration or an eviction, and cannot push out the buffers that are being reused.

use crate::abi;
use crate::admission::Admission;
use crate::errno::Errno;

/// Slots per open file: the largest `max_entries`.
pub const CAPACITY: usize = 64;
/// Bytes one open file may keep cached unless it says otherwise.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;
/// The most `max_bytes` SET_LIMITS accepts. Long-term pins are also charged to the caller's
/// `RLIMIT_MEMLOCK`; this bounds what a process with CAP_IPC_LOCK (which that limit does not stop) keeps
/// pinned through one file.
pub const MAX_MAX_BYTES: u64 = 1 << 30;

/// `len` bytes at user address `addr` of address space `mm` (an identity only, never dereferenced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// Address space.
    pub mm: usize,
    /// First byte.
    pub addr: u64,
    /// Bytes; `addr + len` does not overflow (the request checks saw to it).
    pub len: u64,
}

impl Range {
    fn end(&self) -> u64 {
        self.addr.saturating_add(self.len)
    }

    /// Whether the two ranges share a page of size `page` (a power of two).
    fn shares_page(&self, o: &Range, page: u64) -> bool {
        let first = |r: &Range| r.addr & !(page - 1);
        let last = |r: &Range| (r.end().max(r.addr + 1) - 1) & !(page - 1);
        self.mm == o.mm && first(self) <= last(o) && first(o) <= last(self)
    }

    /// The smallest range holding both.
    fn union(&self, o: &Range) -> Range {
        let addr = self.addr.min(o.addr);
        Range {
            mm: self.mm,
            addr,
            len: self.end().max(o.end()) - addr,
        }
    }

    /// Whether `inner` lies entirely inside `self`.
    pub fn contains(&self, inner: &Range) -> bool {
        self.mm == inner.mm && self.addr <= inner.addr && inner.end() <= self.end()
    }
}

/// Whether two sorted lists of page frame numbers share one: the overlap rules between mappings of one
/// card key on the pages behind an address, not on the address (one memory may be mapped at many).
pub fn share_page_frames(a: &[u64], b: &[u64]) -> bool {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    match (small.first(), small.last(), large.first(), large.last()) {
        (Some(&s0), Some(&s1), Some(&l0), Some(&l1)) if s0 <= l1 && l0 <= s1 => {
            small.iter().any(|f| large.binary_search(f).is_ok())
        }
        _ => false,
    }
}

/// How much one file may keep cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most buffers, at most [`CAPACITY`]; 0 turns caching off.
    pub max_entries: u32,
    /// Most bytes, summed over the buffers' lengths.
    pub max_bytes: u64,
}

impl Limits {
    /// What a newly opened file gets.
    pub const DEFAULT: Limits = Limits {
        max_entries: CAPACITY as u32,
        max_bytes: DEFAULT_MAX_BYTES,
    };
}

/// The answer to a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Served by the buffer in `slot`, from `offset` bytes into it.
    Hit {
        /// Slot of the cached buffer.
        slot: usize,
        /// Where the request starts inside it.
        offset: u64,
    },
    /// Not cached and cacheable: if [`Policy::admit`] says so (a second use), pin [`Policy::merged`],
    /// drop what [`Policy::make_room`] names, then [`Policy::insert`].
    Miss,
    /// Not to be cached: pin for this request only (and call [`Policy::note_uncached`]).
    Bypass,
}

/// Why a buffer leaves the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// Least recently used, or covered by a new buffer, or over a lowered limit.
    Evicted,
    /// Its memory changed.
    Invalidated,
    /// FLUSH, close or card removal.
    Flushed,
}

/// An IOC_REG_CACHE request, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read only.
    Query,
    /// New limits, then read.
    SetLimits(Limits),
    /// Drop everything, then read.
    Flush,
}

/// Checks an IOC_REG_CACHE argument: a known op, limits within [`CAPACITY`] and [`MAX_MAX_BYTES`],
/// reserved words zero.
pub fn parse(req: &abi::RegCache) -> Result<Op, Errno> {
    if req.reserved.iter().any(|&r| r != 0) {
        return Err(Errno::EINVAL);
    }
    match req.op {
        abi::REG_CACHE_QUERY => Ok(Op::Query),
        abi::REG_CACHE_FLUSH => Ok(Op::Flush),
        abi::REG_CACHE_SET_LIMITS
            if req.max_entries as usize <= CAPACITY && req.max_bytes <= MAX_MAX_BYTES =>
        {
            Ok(Op::SetLimits(Limits {
                max_entries: req.max_entries,
                max_bytes: req.max_bytes,
            }))
        }
        _ => Err(Errno::EINVAL),
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    range: Range,
    last_use: u64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    hits: u64,
    misses: u64,
    evictions: u64,
    invalidations: u64,
    uncached: u64,
}

/// The bookkeeping of one file's cache.
#[derive(Debug)]
pub struct Policy {
    /// The kernel's page size.
    page: u64,
    slots: [Option<Slot>; CAPACITY],
    /// Ticks once per use: the least recently used slot has the smallest `last_use`.
    clock: u64,
    limits: Limits,
    entries: u32,
    bytes: u64,
    counters: Counters,
    /// Ranges used before: only a miss inside one is cached.
    seen: Admission,
}

impl Policy {
    /// An empty cache with [`Limits::DEFAULT`], for a kernel with `page`-byte pages (a power of two).
    pub const fn new(page: u64) -> Self {
        Self {
            page,
            slots: [None; CAPACITY],
            clock: 0,
            limits: Limits::DEFAULT,
            entries: 0,
            bytes: 0,
            counters: Counters {
                hits: 0,
                misses: 0,
                evictions: 0,
                invalidations: 0,
                uncached: 0,
            },
            seen: Admission::new(page),
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Finds the buffer that serves `r`, or says how to serve it. A hit is not counted until the caller,
    /// having checked that the buffer is still valid, calls [`Policy::hit`].
    pub fn lookup(&self, r: Range) -> Lookup {
        if self.limits.max_entries == 0 || r.len > self.limits.max_bytes {
            return Lookup::Bypass;
        }
        for (slot, s) in self.slots.iter().enumerate() {
            if let Some(s) = s {
                if s.range.contains(&r) {
                    return Lookup::Hit {
                        slot,
                        offset: r.addr - s.range.addr,
                    };
                }
            }
        }
        Lookup::Miss
    }

    /// Counts a hit on `slot` and marks it the most recently used.
    pub fn hit(&mut self, slot: usize) {
        let now = self.tick();
        if let Some(s) = self.slots.get_mut(slot).and_then(Option::as_mut) {
            s.last_use = now;
            self.counters.hits += 1;
        }
    }

    /// What to pin on a miss of `r`: `r` merged with every cached buffer sharing a page with it (again and
    /// again, as the union grows), unless the union is over `max_bytes`: then `r` alone.
    pub fn merged(&self, r: Range) -> Range {
        let mut u = r;
        loop {
            let grown = self
                .slots
                .iter()
                .flatten()
                .find(|s| s.range.shares_page(&u, self.page) && !u.contains(&s.range));
            match grown {
                Some(s) => u = u.union(&s.range),
                None => break,
            }
        }
        // Over the limit, the union could never be cached: the range alone can.
        if u.len <= self.limits.max_bytes {
            return u;
        }
        r
    }

    /// Whether a miss of `r` is cached now: only when `r` lies in a range used before, whatever room the
    /// cache has. Remembers `r` either way. `false`: pin for once only (and call [`Policy::note_uncached`]).
    pub fn admit(&mut self, r: Range) -> bool {
        self.seen.admit(r.mm, r.addr, r.len)
    }

    /// The next slot to drop before `r` can be inserted: a cached buffer sharing a page with `r`, else the
    /// least recently used while the cache would exceed a limit with `r` in it; `None` once it fits. The
    /// caller removes it ([`Removal::Evicted`]) and asks again.
    pub fn make_room(&self, r: Range) -> Option<usize> {
        self.sharing(r).or_else(|| self.lru_over(1, r.len))
    }

    /// Whether the buffer in `slot` shares a page (by address) with `r`.
    pub fn slot_shares_page(&self, slot: usize, r: Range) -> bool {
        matches!(self.slots.get(slot), Some(Some(s)) if s.range.shares_page(&r, self.page))
    }

    /// A slot whose buffer shares a page with `r` (memory about to be mapped some other way).
    pub fn sharing(&self, r: Range) -> Option<usize> {
        self.slots.iter().position(|s| match s {
            Some(s) => s.range.shares_page(&r, self.page),
            None => false,
        })
    }

    /// The least recently used slot while `extra_entries` more buffers of `extra_bytes` more bytes would
    /// not fit the limits.
    fn lru_over(&self, extra_entries: u32, extra_bytes: u64) -> Option<usize> {
        let over = self.entries + extra_entries > self.limits.max_entries
            || self.bytes.saturating_add(extra_bytes) > self.limits.max_bytes;
        if !over {
            return None;
        }
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i, s.last_use)))
            .min_by_key(|&(_, t)| t)
            .map(|(i, _)| i)
    }

    /// Records a newly pinned buffer (a miss); returns its slot. `None` if it does not fit or shares a page
    /// with a cached buffer: the caller did not make room first, and must use its pin for this request only.
    pub fn insert(&mut self, r: Range) -> Option<usize> {
        if self.make_room(r).is_some()
            || self.limits.max_entries == 0
            || r.len > self.limits.max_bytes
        {
            return None;
        }
        let slot = self.slots.iter().position(Option::is_none)?;
        let now = self.tick();
        self.slots[slot] = Some(Slot {
            range: r,
            last_use: now,
        });
        self.entries += 1;
        self.bytes += r.len;
        self.counters.misses += 1;
        Some(slot)
    }

    /// Forgets the buffer in `slot` (no-op if empty); the caller drops its pin.
    pub fn remove(&mut self, slot: usize, why: Removal) {
        let Some(s) = self.slots.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.entries -= 1;
        self.bytes -= s.range.len;
        match why {
            Removal::Evicted => self.counters.evictions += 1,
            Removal::Invalidated => self.counters.invalidations += 1,
            Removal::Flushed => {}
        }
    }

    /// Counts a request served by a pin for once only.
    pub fn note_uncached(&mut self) {
        self.counters.uncached += 1;
    }

    /// Sets new limits; the caller then removes [`Policy::over_limits`] slots until there is none.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The least recently used slot while the cache exceeds its limits.
    pub fn over_limits(&self) -> Option<usize> {
        self.lru_over(0, 0)
    }

    /// IOC_REG_CACHE's `op`: new limits evict the least recently used buffers until they hold, FLUSH drops
    /// every buffer. `dropped` is told each slot removed (the glue drops its pin). Returns the answer.
    pub fn control(&mut self, op: Op, mut dropped: impl FnMut(usize)) -> abi::RegCache {
        match op {
            Op::Query => {}
            Op::SetLimits(l) => {
                self.set_limits(l);
                while let Some(slot) = self.over_limits() {
                    self.remove(slot, Removal::Evicted);
                    dropped(slot);
                }
            }
            Op::Flush => self.flush(dropped),
        }
        self.report()
    }

    /// Drops every buffer (FLUSH, close, card removal; not counted as evictions), telling `dropped` each
    /// slot removed.
    pub fn flush(&mut self, mut dropped: impl FnMut(usize)) {
        for slot in 0..CAPACITY {
            if self.slots[slot].is_some() {
                self.remove(slot, Removal::Flushed);
                dropped(slot);
            }
        }
    }

    /// Slots holding a buffer.
    pub fn occupied(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|_| i))
    }

    /// The kernel's page size it was made for.
    pub fn page(&self) -> u64 {
        self.page
    }

    /// Buffers cached now.
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// The IOC_REG_CACHE answer: limits, occupancy and counters.
    pub fn report(&self) -> abi::RegCache {
        let c = &self.counters;
        abi::RegCache {
            op: 0,
            max_entries: self.limits.max_entries,
            max_bytes: self.limits.max_bytes,
            entries: self.entries,
            capacity: CAPACITY as u32,
            bytes: self.bytes,
            hits: c.hits,
            misses: c.misses,
            evictions: c.evictions,
            invalidations: c.invalidations,
            uncached: c.uncached,
            reserved: [0; 4],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;

    const MM: usize = 0x1000;
    const PAGE: u64 = 4096;

    fn r(addr: u64, len: u64) -> Range {
        Range { mm: MM, addr, len }
    }

    fn new() -> Policy {
        Policy::new(PAGE)
    }

    /// Looks `x` up and, on a miss, inserts what the glue would pin, making room first; returns the lookup.
    fn use_buf(p: &mut Policy, x: Range) -> Lookup {
        let l = p.lookup(x);
        if let Lookup::Hit { slot, .. } = l {
            p.hit(slot);
        } else if l == Lookup::Miss {
            let u = p.merged(x);
            assert!(u.contains(&x));
            if !p.admit(x) {
                p.note_uncached();
                return Lookup::Bypass;
            }
            while let Some(v) = p.make_room(u) {
                p.remove(v, Removal::Evicted);
            }
            assert!(p.insert(u).is_some());
        } else if l == Lookup::Bypass {
            p.note_uncached();
        }
        l
    }

    /// `use_buf` on a buffer used before (its first, uncached use already made and remembered, not
    /// counted): the buffer the tests of merging, eviction and limits start from.
    fn reuse(p: &mut Policy, x: Range) -> Lookup {
        p.seen.admit(x.mm, x.addr, x.len);
        use_buf(p, x)
    }

    fn limits(max_entries: u32, max_bytes: u64) -> Limits {
        Limits {
            max_entries,
            max_bytes,
        }
    }

    #[test]
    fn reuse_and_subranges_hit() {
        let mut p = new();
        assert_eq!(reuse(&mut p, r(0x10000, 0x4000)), Lookup::Miss);
        let slot = match reuse(&mut p, r(0x10000, 0x4000)) {
            Lookup::Hit { slot, offset: 0 } => slot,
            l => panic!("{l:?}"),
        };
        assert_eq!(
            reuse(&mut p, r(0x11234, 0x100)),
            Lookup::Hit {
                slot,
                offset: 0x1234
            }
        );
        assert_eq!(
            reuse(&mut p, r(0x13fff, 1)),
            Lookup::Hit {
                slot,
                offset: 0x3fff
            }
        );
        // One byte past either end, or another address space: not this buffer.
        assert_eq!(p.lookup(r(0x13fff, 2)), Lookup::Miss);
        assert_eq!(p.lookup(r(0xffff, 2)), Lookup::Miss);
        let other_mm = Range {
            mm: MM + 1,
            ..r(0x10000, 0x100)
        };
        assert_eq!(p.lookup(other_mm), Lookup::Miss);
        let rep = p.report();
        assert_eq!(
            (rep.hits, rep.misses, rep.entries, rep.bytes),
            (3, 1, 1, 0x4000)
        );
    }

    #[test]
    fn least_recently_used_goes_first() {
        let mut p = new();
        p.set_limits(limits(4, u64::MAX));
        for i in 0..4 {
            reuse(&mut p, r(0x100000 * (i + 1), 0x1000));
        }
        // Use the first again: the second is now the oldest.
        assert!(matches!(
            reuse(&mut p, r(0x100000, 0x1000)),
            Lookup::Hit { .. }
        ));
        // Full: the first use of a new buffer is pinned for once and evicts nothing, the second is cached.
        assert_eq!(use_buf(&mut p, r(0x900000, 0x1000)), Lookup::Bypass);
        assert_eq!(p.report().evictions, 0);
        assert_eq!(use_buf(&mut p, r(0x900000, 0x1000)), Lookup::Miss);
        assert_eq!(p.entries(), 4);
        assert_eq!(p.lookup(r(0x200000, 0x1000)), Lookup::Miss);
        for a in [0x100000, 0x300000, 0x400000, 0x900000] {
            assert!(
                matches!(p.lookup(r(a, 0x1000)), Lookup::Hit { .. }),
                "{a:#x}"
            );
        }
        assert_eq!(p.report().evictions, 1);
    }

    #[test]
    fn byte_limit_evicts_until_it_fits() {
        let mut p = new();
        p.set_limits(limits(64, 0x3000));
        reuse(&mut p, r(0x10000, 0x1000));
        reuse(&mut p, r(0x20000, 0x1000));
        reuse(&mut p, r(0x30000, 0x1000));
        assert_eq!(use_buf(&mut p, r(0x40000, 0x2000)), Lookup::Bypass);
        assert_eq!(use_buf(&mut p, r(0x40000, 0x2000)), Lookup::Miss);
        let rep = p.report();
        assert_eq!((rep.entries, rep.bytes, rep.evictions), (2, 0x3000, 2));
        assert!(matches!(p.lookup(r(0x30000, 1)), Lookup::Hit { .. }));
        assert_eq!(p.lookup(r(0x10000, 1)), Lookup::Miss);
    }

    #[test]
    fn too_large_or_off_bypasses() {
        let mut p = new();
        p.set_limits(limits(8, 0x1000));
        assert_eq!(reuse(&mut p, r(0x10000, 0x1001)), Lookup::Bypass);
        assert_eq!(reuse(&mut p, r(0x10000, 0x1000)), Lookup::Miss);
        p.set_limits(limits(0, 0x1000));
        // Off: even a cached buffer is not used (it goes at the next over_limits sweep).
        assert_eq!(p.lookup(r(0x10000, 0x1000)), Lookup::Bypass);
        assert_eq!(p.over_limits(), Some(0));
        p.remove(0, Removal::Evicted);
        assert_eq!(p.over_limits(), None);
        assert_eq!(p.insert(r(0x10000, 1)), None);
        let rep = p.report();
        assert_eq!((rep.uncached, rep.entries, rep.evictions), (1, 0, 1));
    }

    #[test]
    fn a_covering_buffer_replaces_the_ones_inside_it() {
        let mut p = new();
        reuse(&mut p, r(0x10000, 0x1000));
        reuse(&mut p, r(0x12000, 0x1000));
        reuse(&mut p, r(0x40000, 0x1000));
        reuse(&mut p, r(0x10000, 0x4000));
        let rep = p.report();
        assert_eq!((rep.entries, rep.bytes, rep.evictions), (2, 0x5000, 2));
        assert!(matches!(
            p.lookup(r(0x12000, 0x1000)),
            Lookup::Hit { offset: 0x2000, .. }
        ));
    }

    #[test]
    fn lowering_limits_evicts_oldest_first() {
        let mut p = new();
        for i in 0..6 {
            reuse(&mut p, r(0x100000 * (i + 1), 0x1000));
        }
        p.set_limits(limits(2, u64::MAX));
        let mut gone = 0;
        while let Some(s) = p.over_limits() {
            p.remove(s, Removal::Evicted);
            gone += 1;
        }
        assert_eq!(gone, 4);
        assert!(matches!(p.lookup(r(0x600000, 1)), Lookup::Hit { .. }));
        assert!(matches!(p.lookup(r(0x500000, 1)), Lookup::Hit { .. }));
        assert_eq!(p.lookup(r(0x400000, 1)), Lookup::Miss);
    }

    #[test]
    fn removal_reasons_count_apart_and_flush_empties() {
        let mut p = new();
        for i in 0..3 {
            reuse(&mut p, r(0x100000 * (i + 1), 0x1000));
        }
        let slots: [usize; 3] = core::array::from_fn(|i| p.occupied().nth(i).unwrap());
        p.remove(slots[0], Removal::Invalidated);
        p.remove(slots[0], Removal::Invalidated); // already empty: nothing counted
        p.remove(slots[1], Removal::Flushed);
        p.remove(slots[2], Removal::Evicted);
        let rep = p.report();
        assert_eq!(
            (rep.entries, rep.bytes, rep.invalidations, rep.evictions),
            (0, 0, 1, 1)
        );
        assert_eq!(p.occupied().count(), 0);
    }

    #[test]
    fn a_first_use_is_never_cached_even_with_room() {
        let mut p = new();
        let x = r(0x10000, 0x1000);
        // Empty cache: the first use is pinned for once, the second is cached, the third hits.
        assert_eq!(use_buf(&mut p, x), Lookup::Bypass);
        assert_eq!((p.entries(), p.report().uncached), (0, 1));
        assert_eq!(use_buf(&mut p, x), Lookup::Miss);
        assert_eq!(p.entries(), 1);
        assert!(matches!(use_buf(&mut p, x), Lookup::Hit { .. }));
        // A window of a buffer used before counts as a second use.
        assert_eq!(use_buf(&mut p, r(0x40000, 0x4000)), Lookup::Bypass);
        assert_eq!(use_buf(&mut p, r(0x41000, 0x100)), Lookup::Miss);
        // Another address space is another buffer.
        let other = Range { mm: MM + 1, ..x };
        assert_eq!(use_buf(&mut p, other), Lookup::Bypass);
        let rep = p.report();
        assert_eq!(
            (rep.entries, rep.uncached, rep.misses, rep.hits),
            (2, 3, 2, 1)
        );
    }

    #[test]
    fn single_use_buffers_in_a_full_cache_evict_nothing() {
        let mut p = new();
        p.set_limits(limits(2, u64::MAX));
        reuse(&mut p, r(0x10000, 0x1000));
        reuse(&mut p, r(0x20000, 0x1000));
        // A stream of buffers used once each: none is cached, the reused ones stay.
        for i in 0..10 {
            assert_eq!(
                use_buf(&mut p, r(0x100000 * (i + 1), 0x1000)),
                Lookup::Bypass
            );
        }
        let rep = p.report();
        assert_eq!((rep.entries, rep.evictions, rep.uncached), (2, 0, 10));
        assert!(matches!(
            use_buf(&mut p, r(0x10000, 0x1000)),
            Lookup::Hit { .. }
        ));
        // A second use evicts the least recently used.
        assert_eq!(use_buf(&mut p, r(0x100800, 0x100)), Lookup::Miss);
        assert_eq!(p.report().evictions, 1);
        assert_eq!(p.lookup(r(0x20000, 0x1000)), Lookup::Miss);
        // A miss merging with the buffer it covers is a use of seen memory only where all of it was seen.
        assert_eq!(use_buf(&mut p, r(0x100000, 0x3000)), Lookup::Bypass);
        assert_eq!(use_buf(&mut p, r(0x100000, 0x3000)), Lookup::Miss);
        assert_eq!(p.report().evictions, 2);
    }

    #[test]
    fn forgotten_and_stale_ranges() {
        let mut p = new();
        let x = r(0x10000, 0x1000);
        use_buf(&mut p, x);
        // The seen list keeps the SEEN most recently used ranges: past them, a use is a first use again.
        for i in 0..crate::admission::SEEN as u64 {
            use_buf(&mut p, r(0x100000 * (i + 1), 0x1000));
        }
        assert_eq!(use_buf(&mut p, x), Lookup::Bypass);
        // Cached, then its memory changed (invalidated): the range is still seen, so the next use caches
        // again at once (a stale entry costs at most one needless caching, never a wrong hit).
        assert_eq!(use_buf(&mut p, x), Lookup::Miss);
        let slot = p.occupied().next().unwrap();
        p.remove(slot, Removal::Invalidated);
        assert_eq!(p.lookup(x), Lookup::Miss);
        assert_eq!(use_buf(&mut p, x), Lookup::Miss);
        assert_eq!(p.entries(), 1);
    }

    #[test]
    fn page_frames_shared() {
        assert!(share_page_frames(&[1, 5, 9], &[2, 9]));
        assert!(share_page_frames(&[7], &[1, 3, 5, 7, 11]));
        assert!(!share_page_frames(&[1, 5, 9], &[2, 6, 10]));
        assert!(!share_page_frames(&[], &[1]));
        assert!(!share_page_frames(&[100, 200], &[1, 2, 3]));
    }

    #[test]
    fn capacity_is_the_hard_bound() {
        let mut p = new();
        for i in 0..(CAPACITY as u64 + 10) {
            let x = r(0x100000 * (i + 1), 1);
            if reuse(&mut p, x) == Lookup::Bypass {
                assert_eq!(reuse(&mut p, x), Lookup::Miss);
            }
        }
        assert_eq!(p.entries() as usize, CAPACITY);
        assert_eq!(p.report().evictions, 10);
    }

    #[test]
    fn parse_checks_op_limits_and_reserved() {
        let q = |op, max_entries| abi::RegCache {
            op,
            max_entries,
            max_bytes: 1 << 20,
            ..Default::default()
        };
        assert_eq!(parse(&q(abi::REG_CACHE_QUERY, 999)), Ok(Op::Query));
        assert_eq!(parse(&q(abi::REG_CACHE_FLUSH, 0)), Ok(Op::Flush));
        assert_eq!(
            parse(&q(abi::REG_CACHE_SET_LIMITS, CAPACITY as u32)),
            Ok(Op::SetLimits(limits(CAPACITY as u32, 1 << 20)))
        );
        assert_eq!(
            parse(&q(abi::REG_CACHE_SET_LIMITS, CAPACITY as u32 + 1)),
            Err(Errno::EINVAL)
        );
        assert_eq!(parse(&q(3, 0)), Err(Errno::EINVAL));
        let mut huge = q(abi::REG_CACHE_SET_LIMITS, 1);
        huge.max_bytes = MAX_MAX_BYTES;
        assert_eq!(parse(&huge), Ok(Op::SetLimits(limits(1, MAX_MAX_BYTES))));
        huge.max_bytes = MAX_MAX_BYTES + 1;
        assert_eq!(parse(&huge), Err(Errno::EINVAL));
        let mut bad = q(abi::REG_CACHE_QUERY, 0);
        bad.reserved[3] = 1;
        assert_eq!(parse(&bad), Err(Errno::EINVAL));
    }

    #[test]
    fn control_evicts_oldest_to_new_limits_and_flush_drops_all() {
        let mut p = new();
        for i in 0..5 {
            reuse(&mut p, r(0x100000 * (i + 1), 0x1000));
        }
        let oldest: std::vec::Vec<usize> = p.occupied().take(3).collect();
        let mut gone = std::vec::Vec::new();
        let rep = p.control(Op::SetLimits(limits(2, u64::MAX)), |s| gone.push(s));
        assert_eq!(gone, oldest);
        assert_eq!((rep.entries, rep.evictions, rep.max_entries), (2, 3, 2));
        gone.clear();
        let rep = p.control(Op::Query, |s| gone.push(s));
        assert!(gone.is_empty());
        assert_eq!(rep.entries, 2);
        let rep = p.control(Op::Flush, |s| gone.push(s));
        assert_eq!(gone.len(), 2);
        assert_eq!((rep.entries, rep.bytes, rep.evictions), (0, 0, 3));
        assert_eq!(p.occupied().count(), 0);
    }

    #[test]
    fn report_fills_every_field() {
        let mut p = new();
        reuse(&mut p, r(0x10000, 0x1234));
        let rep = p.report();
        assert_eq!(rep.capacity as usize, CAPACITY);
        assert_eq!(rep.max_entries, Limits::DEFAULT.max_entries);
        assert_eq!(rep.max_bytes, DEFAULT_MAX_BYTES);
        assert_eq!((rep.entries, rep.bytes, rep.misses), (1, 0x1234, 1));
        assert_eq!(rep.reserved, [0; 4]);
    }

    #[test]
    fn a_lookup_alone_counts_nothing() {
        let mut p = new();
        p.set_limits(limits(2, u64::MAX));
        reuse(&mut p, r(0x10000, 0x100));
        reuse(&mut p, r(0x20000, 0x100));
        // Found but not confirmed (the glue found it stale): no hit, and it stays the oldest.
        assert!(matches!(p.lookup(r(0x10000, 0x100)), Lookup::Hit { .. }));
        assert_eq!(p.report().hits, 0);
        reuse(&mut p, r(0x30000, 0x100));
        assert_eq!(p.lookup(r(0x10000, 0x100)), Lookup::Miss);
        p.hit(CAPACITY + 1);
        p.hit(63);
        assert_eq!(p.report().hits, 0);
    }

    #[test]
    fn buffers_sharing_a_page_merge_into_one() {
        let mut p = new();
        // Two small buffers in one page.
        reuse(&mut p, r(0x10010, 0x10));
        reuse(&mut p, r(0x10800, 0x10));
        assert_eq!(p.entries(), 1);
        assert!(matches!(
            p.lookup(r(0x10010, 0x10)),
            Lookup::Hit { offset: 0, .. }
        ));
        // One reaching into the next page, then an unrelated one.
        reuse(&mut p, r(0x10ff0, 0x20));
        reuse(&mut p, r(0x30000, 0x10));
        let rep = p.report();
        assert_eq!(
            (rep.entries, rep.bytes, rep.evictions),
            (2, 0x1000 + 0x10, 2)
        );
        for (a, l) in [(0x10010, 0x10), (0x10800, 0x10), (0x10ff0, 0x20)] {
            assert!(matches!(p.lookup(r(a, l)), Lookup::Hit { .. }), "{a:#x}");
        }
        // Another address space is never merged.
        let other = Range {
            mm: MM + 1,
            ..r(0x10020, 1)
        };
        assert_eq!(p.merged(other), other);
    }

    #[test]
    fn no_page_is_in_two_cached_buffers() {
        let mut p = new();
        let mut seed = 0x1234_5678_u64;
        for _ in 0..2000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let addr = 0x100000 + (seed >> 33) % 0x40000;
            let len = 1 + (seed >> 13) % 0x3000;
            reuse(&mut p, r(addr, len));
            let live: std::vec::Vec<Range> = p.slots.iter().flatten().map(|s| s.range).collect();
            for (i, a) in live.iter().enumerate() {
                for b in &live[i + 1..] {
                    assert!(!a.shares_page(b, PAGE), "{a:?} and {b:?} share a page");
                }
            }
            assert_eq!(live.iter().map(|s| s.len).sum::<u64>(), p.report().bytes);
            assert!(matches!(p.lookup(r(addr, len)), Lookup::Hit { .. }));
        }
    }

    #[test]
    fn a_union_over_the_byte_limit_pins_the_range_alone() {
        let mut p = new();
        p.set_limits(limits(8, 0x2000));
        reuse(&mut p, r(0x10000, 0x1800));
        let x = r(0x11800, 0x1000);
        assert_eq!(p.merged(x), x);
        reuse(&mut p, x);
        let rep = p.report();
        assert_eq!((rep.entries, rep.bytes, rep.evictions), (1, 0x1000, 1));
    }

    #[test]
    fn insert_refuses_what_shares_a_page() {
        let mut p = new();
        reuse(&mut p, r(0x10000, 0x100));
        assert_eq!(p.insert(r(0x10f00, 0x100)), None);
        assert_eq!(p.entries(), 1);
    }

    #[test]
    fn pages_are_shared_by_bytes_not_by_ends() {
        let a = r(0x10000, 0x1000);
        assert!(!a.shares_page(&r(0x11000, 1), PAGE));
        assert!(a.shares_page(&r(0x10fff, 1), PAGE));
        assert!(a.shares_page(&r(0xf000, 0x1001), PAGE));
        assert!(!a.shares_page(&r(0xf000, 0x1000), PAGE));
    }

    #[test]
    fn sharing_finds_every_buffer_on_the_pages_of_a_range() {
        let mut p = new();
        reuse(&mut p, r(0x10000, 0x100));
        reuse(&mut p, r(0x22000, 0x2000));
        reuse(&mut p, r(0x40000, 0x10));
        // A 64 KiB GPU page over the first two.
        let gpu = r(0x10000, 0x10000);
        let mut n = 0;
        while let Some(s) = p.sharing(gpu) {
            p.remove(s, Removal::Evicted);
            n += 1;
        }
        assert_eq!(n, 1);
        let gpu = r(0x20000, 0x10000);
        assert!(p.sharing(gpu).is_some());
        assert_eq!(p.sharing(r(0x30000, 0x10000)), None);
    }
}
