//! A ring of `slots` equal slots in host or GPU memory that a stream fills and a consumer empties, written
//! once for every producer (a thread issuing one C2H per chain today, the driver's own producer later):
//! which slots the next chain fills, and what a consumer that fell behind lost.
//!
//! The producer publishes two counters, both in slots since the start and never wrapping (2^64 slots):
//! `writing`, stored before a chain starts (the DMA may touch slots up to it), and `produced`, stored once
//! the chain ended (slots below it are whole). Slot `n` lives at index `n % slots`. The consumer keeps its
//! own `consumed` and publishes it for a back-pressure producer.
//!
//! - **Back-pressure**: the producer never fills a slot the consumer has not released: it waits (and a
//!   source that cannot wait drops records itself, counting each: the stream block's overrun counter).
//! - **Drop-oldest**: the producer never waits; a consumer that fell more than `slots` behind loses the
//!   oldest. It learns so without a syscall: slot `n` is readable while `n >= produced - slots`, and a copy
//!   of it is good only if `writing` did not pass `n + slots` before the copy ended (the producer began
//!   overwriting it): the consumer loads `writing` after the copy behind an acquire fence, as a seqlock
//!   reader does, and the producer stores it before the chain's doorbell (the kernel's MMIO write orders
//!   earlier stores before it). Every slot lost is counted, so the consumer never sees a slot twice or out of order,
//!   and the drop counter equals the slots it never got.

use core::sync::atomic::AtomicU64;

use crate::abi;

/// `abi::RingControl` as user space shares it: between its own producer and consumer threads, or with the
/// driver's producer (IOC_STREAM_RING), which stores each word whole. The same words, each an atomic.
#[repr(C)]
#[derive(Default, Debug)]
pub struct SharedControl {
    pub writing: AtomicU64,
    pub produced: AtomicU64,
    pub consumed: AtomicU64,
    pub stop: AtomicU64,
    pub waits: AtomicU64,
}

const _: () = {
    use core::mem::offset_of;
    assert!(size_of::<SharedControl>() == size_of::<abi::RingControl>());
    assert!(offset_of!(SharedControl, writing) == offset_of!(abi::RingControl, writing));
    assert!(offset_of!(SharedControl, produced) == offset_of!(abi::RingControl, produced));
    assert!(offset_of!(SharedControl, consumed) == offset_of!(abi::RingControl, consumed));
    assert!(offset_of!(SharedControl, stop) == offset_of!(abi::RingControl, stop));
    assert!(offset_of!(SharedControl, waits) == offset_of!(abi::RingControl, waits));
};

/// What the producer does when the consumer has not released the slot it would fill next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Wait for the consumer.
    BackPressure,
    /// Overwrite the oldest slots; the consumer counts them as dropped.
    DropOldest,
}

/// The producer's next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Fill `count` slots from slot counter `first` (indexes `first % slots` up, never wrapping): publish
    /// `writing = first + count`, run the chain, then publish `produced = first + count`.
    Fill { first: u64, count: u64 },
    /// Nothing free: wait for the consumer to release a slot.
    Wait,
}

/// The producer's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Producer {
    slots: u64,
    policy: Policy,
    produced: u64,
}

impl Producer {
    /// A ring of `slots` slots (at least 2: one being filled, one being read).
    pub fn new(slots: u64, policy: Policy) -> Option<Self> {
        (slots >= 2).then_some(Producer {
            slots,
            policy,
            produced: 0,
        })
    }

    /// The next chain, given the consumer's published `consumed` (back-pressure only; a value above
    /// `produced` is taken as `produced`) and the most slots one chain may hold (`max` >= 1).
    pub fn plan(&self, consumed: u64, max: u64) -> Plan {
        let first = self.produced;
        let index = first % self.slots;
        let room = match self.policy {
            Policy::BackPressure => {
                let held = first - consumed.min(first);
                self.slots - held.min(self.slots)
            }
            Policy::DropOldest => self.slots,
        };
        let count = room.min(max.max(1)).min(self.slots - index);
        if count == 0 {
            Plan::Wait
        } else {
            Plan::Fill { first, count }
        }
    }

    /// The chain `plan` gave filled its `count` slots: `produced` to publish.
    pub fn filled(&mut self, count: u64) -> u64 {
        self.produced += count;
        self.produced
    }

    /// Slots filled so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }
}

/// A slot the consumer may read: its counter and index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub n: u64,
    pub index: u64,
}

/// The consumer's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consumer {
    slots: u64,
    consumed: u64,
    dropped: u64,
}

impl Consumer {
    /// The consumer of a ring of `slots` slots.
    pub fn new(slots: u64) -> Self {
        Consumer {
            slots,
            consumed: 0,
            dropped: 0,
        }
    }

    /// The next slot to read given the producer's published `produced`, or None if none is whole yet.
    /// Slots the producer has lapped are skipped and counted as dropped.
    pub fn next(&mut self, produced: u64) -> Option<Slot> {
        let oldest = produced.saturating_sub(self.slots);
        if self.consumed < oldest {
            self.dropped += oldest - self.consumed;
            self.consumed = oldest;
        }
        (self.consumed < produced).then_some(Slot {
            n: self.consumed,
            index: self.consumed % self.slots,
        })
    }

    /// Ends the read of `slot`, given `writing` as published after the copy ended: whether the copy is
    /// good (else the producer began overwriting the slot during it, and it counts as dropped). Either way
    /// the slot is released: `consumed` to publish.
    pub fn done(&mut self, slot: Slot, writing: u64) -> (bool, u64) {
        let good = writing <= slot.n + self.slots;
        if !good {
            self.dropped += 1;
        }
        self.consumed = self.consumed.max(slot.n + 1);
        (good, self.consumed)
    }

    /// Slots released so far (read or dropped).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Slots never read: lapped, or overwritten while read.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn back_pressure_fills_what_is_free_and_never_wraps_a_chain() {
        let mut p = Producer::new(8, Policy::BackPressure).unwrap();
        assert_eq!(p.plan(0, 5), Plan::Fill { first: 0, count: 5 });
        p.filled(5);
        // Three free up to the end of the ring, but only three slots are free at all.
        assert_eq!(p.plan(0, 16), Plan::Fill { first: 5, count: 3 });
        p.filled(3);
        assert_eq!(p.plan(0, 16), Plan::Wait, "full");
        assert_eq!(p.plan(2, 16), Plan::Fill { first: 8, count: 2 });
        assert_eq!(p.plan(99, 16), Plan::Fill { first: 8, count: 8 });
        assert!(Producer::new(1, Policy::DropOldest).is_none());
    }

    #[test]
    fn drop_oldest_never_waits_and_the_consumer_counts_the_lapped() {
        let mut p = Producer::new(4, Policy::DropOldest).unwrap();
        let mut c = Consumer::new(4);
        for _ in 0..10 {
            let Plan::Fill { count, .. } = p.plan(0, 4) else {
                panic!("waited")
            };
            p.filled(count);
        }
        // 40 produced, 4 readable: 36 lost.
        let s = c.next(p.produced()).unwrap();
        assert_eq!((s.n, s.index, c.dropped()), (36, 0, 36));
        assert_eq!(c.done(s, p.produced()), (true, 37));
    }

    #[test]
    fn a_copy_the_producer_overwrote_meanwhile_is_dropped() {
        let mut c = Consumer::new(4);
        let s = c.next(4).unwrap();
        assert_eq!(s.n, 0);
        // While slot 0 was copied the producer started filling 4..6: index 0 and 1 again.
        assert_eq!(c.done(s, 6), (false, 1));
        assert_eq!(c.dropped(), 1);
        let s = c.next(4).unwrap();
        assert_eq!(c.done(s, 6), (false, 2), "slot 1 was being overwritten too");
        let s = c.next(6).unwrap();
        assert_eq!((s.n, c.done(s, 6)), (2, (true, 3)));
    }

    /// A producer and a consumer interleaved at random (a fixed seed), both policies: every slot produced
    /// is either read good exactly once, in order, or counted as dropped, never both; back-pressure drops
    /// nothing; a good read's bytes were never touched by a later chain.
    #[test]
    fn random_interleavings_account_for_every_slot() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for policy in [Policy::BackPressure, Policy::DropOldest] {
            for slots in [2u64, 3, 8, 13] {
                let mut p = Producer::new(slots, policy).unwrap();
                let mut c = Consumer::new(slots);
                // The ring's contents: which slot counter each index holds (u64::MAX: being written).
                let mut ring: Vec<u64> = std::vec![u64::MAX; slots as usize];
                let (mut writing, mut published_consumed) = (0u64, 0u64);
                let mut chain: Option<(u64, u64)> = None;
                let mut reading: Option<(Slot, u64)> = None;
                let mut seen: Vec<u64> = Vec::new();
                for _ in 0..4000 {
                    match rand(4) {
                        // The producer starts a chain, or ends the one in flight.
                        0 | 1 => match chain.take() {
                            None => {
                                if let Plan::Fill { first, count } =
                                    p.plan(published_consumed, 1 + rand(slots))
                                {
                                    writing = first + count;
                                    for n in first..first + count {
                                        ring[(n % slots) as usize] = u64::MAX;
                                    }
                                    chain = Some((first, count));
                                }
                            }
                            Some((first, count)) => {
                                for n in first..first + count {
                                    ring[(n % slots) as usize] = n;
                                }
                                p.filled(count);
                            }
                        },
                        // The consumer starts copying a slot (the bytes it sees now), or ends the copy.
                        _ => match reading.take() {
                            None => {
                                if let Some(s) = c.next(p.produced()) {
                                    reading = Some((s, ring[s.index as usize]));
                                }
                            }
                            Some((s, began)) => {
                                let now = ring[s.index as usize];
                                let (good, consumed) = c.done(s, writing);
                                published_consumed = consumed;
                                if good {
                                    assert_eq!(
                                        (began, now),
                                        (s.n, s.n),
                                        "{policy:?} {slots}: torn"
                                    );
                                    assert!(seen.last().is_none_or(|&l| l < s.n), "out of order");
                                    seen.push(s.n);
                                }
                            }
                        },
                    }
                }
                let done = c.consumed();
                assert_eq!(seen.len() as u64 + c.dropped(), done, "{policy:?} {slots}");
                if policy == Policy::BackPressure {
                    assert_eq!(c.dropped(), 0);
                } else {
                    assert!(
                        c.dropped() > 0,
                        "{slots}: the test never lapped the consumer"
                    );
                }
            }
        }
    }
}
