//! Admission to the registration cache on second use: a host range is cached only when a request reuses
//! memory an earlier request of the same address space already used. A single-use buffer then costs an
//! uncached request (pin, map, unmap, unpin) plus one lookup here, never a notifier, a cached pin or an
//! eviction; a reused buffer pays one uncached request before it is cached.
//!
//! The list remembers page ranges only (no pins, no references): a fixed number of them, least recently
//! used first out. A stale entry (the memory was unmapped and reused) costs at most one needless caching,
//! which the cache's own invalidation handles. `cache_policy` asks it on every miss.

/// Ranges remembered per open file.
pub const SEEN: usize = 64;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    mm: usize,
    /// Page-aligned `[first, end)`.
    first: u64,
    end: u64,
    /// Last use, for LRU; 0 = free slot.
    stamp: u64,
}

/// The "seen" list of one open file.
#[derive(Clone, Debug)]
pub struct Admission {
    page: u64,
    entries: [Entry; SEEN],
    clock: u64,
}

impl Admission {
    /// An empty list for pages of `page` bytes (a power of two).
    pub const fn new(page: u64) -> Self {
        const FREE: Entry = Entry {
            mm: 0,
            first: 0,
            end: 0,
            stamp: 0,
        };
        Self {
            page,
            entries: [FREE; SEEN],
            clock: 0,
        }
    }

    fn pages(&self, addr: u64, len: u64) -> (u64, u64) {
        let first = addr & !(self.page - 1);
        let end = addr
            .saturating_add(len.max(1))
            .saturating_add(self.page - 1)
            & !(self.page - 1);
        (first, end)
    }

    /// A request on `[addr, addr + len)` of address space `mm`: true when it lies in a range used before
    /// (cache it), false the first time (pin it for once; the range is remembered, merged with the ranges
    /// it overlaps or touches so a buffer used window by window counts as one).
    pub fn admit(&mut self, mm: usize, addr: u64, len: u64) -> bool {
        let (mut first, mut end) = self.pages(addr, len);
        self.clock += 1;
        let stamp = self.clock;
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.stamp != 0 && e.mm == mm && e.first <= first && end <= e.end)
        {
            e.stamp = stamp;
            return true;
        }
        // Touching ranges merge too: a buffer used window by window becomes one range.
        for e in self.entries.iter_mut() {
            if e.stamp != 0 && e.mm == mm && e.first <= end && first <= e.end {
                first = first.min(e.first);
                end = end.max(e.end);
                *e = Entry::default();
            }
        }
        let slot = self
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.stamp)
            .map(|(i, _)| i)
            .unwrap_or(0);
        self.entries[slot] = Entry {
            mm,
            first,
            end,
            stamp,
        };
        false
    }

    /// Forgets the ranges of `mm` overlapping pages `[first, end)` (the memory went away or changed use).
    pub fn forget(&mut self, mm: usize, first: u64, end: u64) {
        for e in self.entries.iter_mut() {
            if e.stamp != 0 && e.mm == mm && e.first < end && first < e.end {
                *e = Entry::default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 4096;

    #[test]
    fn second_use_is_admitted() {
        let mut a = Admission::new(P);
        assert!(!a.admit(1, 0x10000, 4096), "first use: pin once");
        assert!(a.admit(1, 0x10000, 4096), "second use: cache");
        assert!(a.admit(1, 0x10100, 100), "inside a seen range");
        assert!(!a.admit(2, 0x10000, 4096), "another address space");
        assert!(!a.admit(1, 0x20000, 4096), "other memory");
    }

    #[test]
    fn windows_of_one_buffer_merge() {
        let mut a = Admission::new(P);
        // A 1 MiB buffer used 64 KiB at a time, twice: the second pass is cached.
        for w in 0..16u64 {
            assert!(!a.admit(1, 0x100_0000 + w * 0x1_0000, 0x1_0000));
        }
        assert!(a.admit(1, 0x100_0000 + 0x2_0000, 0x1_0000));
        assert!(
            a.admit(1, 0x100_0000, 0x10_0000),
            "the whole buffer is one seen range"
        );
    }

    #[test]
    fn least_recently_used_goes_first() {
        let mut a = Admission::new(P);
        for i in 0..SEEN as u64 {
            a.admit(1, i * 0x10_0000, P);
        }
        assert!(a.admit(1, 0, P), "touch the oldest");
        a.admit(1, 0x1000_0000, P); // evicts the least recently used: range 1
        assert!(a.admit(1, 0, P));
        assert!(!a.admit(1, 0x10_0000, P), "range 1 was forgotten");
    }

    #[test]
    fn forget_and_wrapping_ranges() {
        let mut a = Admission::new(P);
        a.admit(1, 0x5000, P);
        a.forget(1, 0x4000, 0x6000);
        assert!(!a.admit(1, 0x5000, P), "forgotten");
        // A range ending at the top of the address space neither wraps nor panics.
        assert!(!a.admit(1, u64::MAX - 10, 100));
        assert!(a.admit(1, u64::MAX - 10, 5));
    }
}
