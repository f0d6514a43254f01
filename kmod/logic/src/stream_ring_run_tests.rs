//! The driver's ring producer against a fake caller: the argument's checks, the chains it runs, the order
//! of its publications around each chain, back-pressure's waits and every way a ring ends.

extern crate std;
use super::*;
use std::collections::BTreeMap;
use std::vec::Vec;

const CONTROL: u64 = 0x10_0000;
const RING: u64 = 0x20_0000;
const CARD: request::Card = request::Card {
    ram: 65536,
    stream: true,
};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ev {
    Store(u64, u64),
    Transfer(gate::Request),
    Sleep(u32),
    Wake,
}

/// The caller: its control words, and a consumer that runs on every transfer and sleep (`step`).
struct Fake {
    words: BTreeMap<u64, u64>,
    log: Vec<Ev>,
    loads: Vec<u64>,
    /// Makes the `n`-th transfer (from 0) fail with this errno.
    fail: Option<(usize, Errno)>,
    fault_store: bool,
    interrupted: bool,
    step: fn(&mut Fake),
    transfers: usize,
    /// The ring is emptied (RING_H2C): the caller's words are `produced` and `stop`.
    h2c: bool,
}

impl Fake {
    fn new(step: fn(&mut Fake)) -> Self {
        Fake {
            words: BTreeMap::new(),
            log: Vec::new(),
            loads: Vec::new(),
            fail: None,
            fault_store: false,
            interrupted: false,
            step,
            transfers: 0,
            h2c: false,
        }
    }
    fn emptying(step: fn(&mut Fake)) -> Self {
        Fake {
            h2c: true,
            ..Fake::new(step)
        }
    }
    fn word(&self, off: u64) -> u64 {
        self.words.get(&(CONTROL + off)).copied().unwrap_or(0)
    }
    fn set(&mut self, off: u64, v: u64) {
        self.words.insert(CONTROL + off, v);
    }
    fn chains(&self) -> Vec<gate::Request> {
        self.log
            .iter()
            .filter_map(|e| match e {
                Ev::Transfer(r) => Some(*r),
                _ => None,
            })
            .collect()
    }
}

impl Services for Fake {
    fn transfer(&mut self, req: &gate::Request) -> Result<u64, Errno> {
        self.log.push(Ev::Transfer(*req));
        assert!(self.transfers < 10_000, "the ring never ended");
        let n = self.transfers;
        self.transfers += 1;
        if let Some((at, e)) = self.fail {
            if at == n {
                return Err(e);
            }
        }
        (self.step)(self);
        Ok(1000)
    }
    fn load(&mut self, addr: u64) -> Result<u64, Errno> {
        assert_eq!(addr % 8, 0, "a word load is aligned");
        self.loads.push(addr - CONTROL);
        Ok(self.words.get(&addr).copied().unwrap_or(0))
    }
    fn store(&mut self, addr: u64, v: u64) -> Result<(), Errno> {
        assert_eq!(addr % 8, 0, "a word store is aligned");
        if self.fault_store {
            return Err(Errno::EFAULT);
        }
        let caller = if self.h2c { PRODUCED } else { CONSUMED };
        assert!(
            addr != CONTROL + caller && addr != CONTROL + STOP,
            "the driver never writes the caller's words"
        );
        self.log.push(Ev::Store(addr - CONTROL, v));
        self.words.insert(addr, v);
        Ok(())
    }
    fn interrupted(&self) -> bool {
        self.interrupted
    }
    fn sleep_us(&mut self, us: u32) {
        assert!(self.log.len() < 100_000, "the ring never ended");
        self.log.push(Ev::Sleep(us));
        (self.step)(self);
    }
    fn wake(&mut self) {
        self.log.push(Ev::Wake);
    }
}

fn arg() -> abi::StreamRing {
    abi::StreamRing {
        ring: RING,
        control: CONTROL,
        slot_bytes: 4096,
        total: 0,
        slots: 8,
        chain_slots: 2,
        flags: 0,
        ..Default::default()
    }
}

fn ring(f: impl FnOnce(&mut abi::StreamRing)) -> Ring {
    let mut a = arg();
    f(&mut a);
    check(&a).unwrap()
}

fn nothing(_: &mut Fake) {}

/// A consumer that releases everything produced at once.
fn keeps_up(f: &mut Fake) {
    let p = f.word(PRODUCED);
    f.set(CONSUMED, p);
}

/// A consumer that stalls for 10 naps, then releases everything.
fn stall(f: &mut Fake) {
    let naps = f.log.iter().filter(|e| matches!(e, Ev::Sleep(_))).count();
    if naps >= 10 {
        keeps_up(f);
    }
}

#[test]
fn bad_arguments_are_refused_with_their_errno() {
    type Case = (fn(&mut abi::StreamRing), Errno);
    let bad: [Case; 15] = [
        (
            |a| a.flags = abi::RING_H2C | abi::RING_DROP_OLDEST,
            Errno::EINVAL,
        ),
        (|a| a.flags = 1 << 7, Errno::EINVAL),
        (|a| a.eventfd = 1, Errno::EINVAL),
        (|a| a.reserved[1] = 1, Errno::EINVAL),
        (|a| a.slots = 1, Errno::EINVAL),
        (|a| a.slot_bytes = 0, Errno::EINVAL),
        (|a| a.slot_bytes = 12, Errno::EINVAL),
        (|a| a.slot_bytes = request::MAX_H2C2H_LEN + 8, Errno::EINVAL),
        (
            |a| {
                a.slots = u32::MAX;
                a.slot_bytes = request::MAX_H2C2H_LEN;
                a.ring = USER_ADDR_LIMIT - 4096;
            },
            Errno::EFAULT,
        ),
        (|a| a.ring = u64::MAX - 8, Errno::EFAULT),
        (|a| a.control = CONTROL + 4, Errno::EINVAL),
        (|a| a.control = !7, Errno::EFAULT),
        (|a| a.control = RING + 4096, Errno::EINVAL),
        (|a| a.control = RING - 8, Errno::EINVAL),
        (
            |a| {
                a.flags = abi::RING_CUDA;
                a.ring = 1 << 31;
            },
            Errno::EINVAL,
        ),
    ];
    for (i, (f, e)) in bad.iter().enumerate() {
        let mut a = arg();
        f(&mut a);
        assert_eq!(check(&a), Err(*e), "case {i}: {a:?}");
    }
    // Just outside the ring on either side is fine.
    for control in [RING - 40, RING + 8 * 4096] {
        assert!(check(&abi::StreamRing { control, ..arg() }).is_ok());
    }
}

#[test]
fn chain_length_defaults_to_half_the_ring_and_is_bounded() {
    assert_eq!(ring(|a| a.chain_slots = 0).chain, 4);
    assert_eq!(ring(|a| a.chain_slots = 99).chain, 8);
    let big = ring(|a| {
        a.slot_bytes = 64 << 20;
        a.chain_slots = 8;
    });
    assert_eq!(big.chain, 4, "256 MiB, the longest transfer");
    let r = ring(|a| a.total = 0);
    assert_eq!(
        (r.total, r.policy, r.eventfd),
        (u64::MAX, Policy::BackPressure, None)
    );
    // The eventfd is the caller's to name: any descriptor, the kernel judges it.
    for fd in [0, 7, -1] {
        let r = ring(|a| {
            a.flags = abi::RING_EVENTFD;
            a.eventfd = fd;
        });
        assert_eq!(r.eventfd, Some(fd));
    }
    let r = ring(|a| a.flags = abi::RING_DROP_OLDEST | abi::RING_CUDA);
    assert_eq!(
        (r.memory, r.policy),
        (Memory::Surface(RING as u32), Policy::DropOldest)
    );
}

#[test]
fn fills_the_total_in_chains_that_never_wrap_publishing_around_each() {
    let r = ring(|a| {
        a.total = 11;
        a.chain_slots = 3;
    });
    let mut f = Fake::new(keeps_up);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!(
        out,
        Outcome {
            produced: 11,
            chains: 4,
            waits: 0
        }
    );
    // Slots 0-2, 3-5, 6-7 (the ring's end), 8-10 (indexes 0-2): 11 reached.
    let got: Vec<(u64, u64)> = f.chains().iter().map(|c| (c.dst_addr(), c.len)).collect();
    let k = 4096;
    assert_eq!(
        got,
        [
            (RING, 3 * k),
            (RING + 3 * k, 3 * k),
            (RING + 6 * k, 2 * k),
            (RING, 3 * k)
        ]
    );
    for c in f.chains() {
        assert_eq!(
            c.work,
            gate::Work::OneWay {
                dir: Dir::C2h,
                fpga: crate::stream::WINDOW_AXI_ADDR,
                card_time: false
            }
        );
        assert_eq!(c.surface_at, 0);
        assert!(
            !c.uses_ram(),
            "a stream transfer leaves the card RAM to its owner"
        );
    }
    // Counters start at 0; `writing` before each chain, `produced` after it, then a wake-up; one more at
    // the end.
    let mut expect = std::vec![
        Ev::Store(WRITING, 0),
        Ev::Store(PRODUCED, 0),
        Ev::Store(WAITS, 0)
    ];
    let mut produced = 0;
    for (c, n) in f.chains().into_iter().zip([3, 3, 2, 3]) {
        expect.push(Ev::Store(WRITING, produced + n));
        expect.push(Ev::Transfer(c));
        produced += n;
        expect.push(Ev::Store(PRODUCED, produced));
        expect.push(Ev::Wake);
    }
    expect.push(Ev::Wake);
    assert_eq!(f.log, expect);
}

impl gate::Request {
    fn dst_addr(&self) -> u64 {
        match self.dst {
            Some(Host::User(a)) => a,
            Some(Host::Cuda(h)) => u64::from(h),
            None => panic!("a C2H has a destination"),
        }
    }
}

#[test]
fn a_surface_ring_names_its_slot_by_offset() {
    let r = ring(|a| {
        a.flags = abi::RING_CUDA;
        a.ring = 5;
        a.total = 6;
        a.chain_slots = 4;
    });
    let mut f = Fake::new(keeps_up);
    run(&mut f, &r, &CARD).unwrap();
    let got: Vec<(Option<Host>, u64, u64)> = f
        .chains()
        .iter()
        .map(|c| (c.dst, c.surface_at, c.len))
        .collect();
    assert_eq!(
        got,
        [
            (Some(Host::Cuda(5)), 0, 4 * 4096),
            (Some(Host::Cuda(5)), 4 * 4096, 2 * 4096)
        ]
    );
}

#[test]
fn back_pressure_waits_for_the_consumer_and_never_overwrites_what_it_holds() {
    // The consumer releases one slot per nap, nothing on a transfer.
    fn slow(f: &mut Fake) {
        if matches!(f.log.last(), Some(Ev::Sleep(_))) {
            let c = f.word(CONSUMED);
            f.set(CONSUMED, c + 1);
        }
    }
    let r = ring(|a| {
        a.total = 30;
        a.chain_slots = 8;
    });
    let mut f = Fake::new(slow);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!(out.produced, 30);
    // Every chain's last slot is less than a ring ahead of what the consumer had released when it started.
    let mut consumed = 0;
    let mut naps = Vec::new();
    for e in &f.log {
        match e {
            Ev::Sleep(us) => {
                consumed += 1;
                naps.push(*us);
            }
            Ev::Store(WRITING, w) if *w > 0 => assert!(*w <= consumed + 8, "{w} > {consumed} + 8"),
            _ => {}
        }
    }
    // Each release ends a wait episode: the nap starts short again, and each episode is counted once.
    assert!(naps.iter().all(|us| *us == NAP_MIN_US), "{naps:?}");
    assert_eq!(out.waits, 22);
    assert_eq!(f.word(WAITS), 22);
}

#[test]
fn a_stalled_consumer_costs_naps_that_grow_to_the_longest() {
    let r = ring(|a| a.total = 16);
    let mut f = Fake::new(stall);
    let out = run(&mut f, &r, &CARD).unwrap();
    let naps: Vec<u32> = f
        .log
        .iter()
        .filter_map(|e| match e {
            Ev::Sleep(us) => Some(*us),
            _ => None,
        })
        .collect();
    assert_eq!(naps, [20, 40, 80, 160, 320, 640, 1000, 1000, 1000, 1000]);
    assert_eq!((out.produced, out.waits), (16, 1));
}

#[test]
fn drop_oldest_never_waits_nor_reads_the_consumer() {
    let r = ring(|a| {
        a.flags = abi::RING_DROP_OLDEST;
        a.total = 40;
        a.chain_slots = 4;
    });
    let mut f = Fake::new(nothing);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, out.chains, out.waits), (40, 10, 0));
    assert!(!f.log.iter().any(|e| matches!(e, Ev::Sleep(_))));
    assert!(!f.loads.contains(&CONSUMED));
}

#[test]
fn the_stop_word_ends_the_ring_at_a_chain_boundary() {
    fn stops_after_two(f: &mut Fake) {
        keeps_up(f);
        if f.transfers == 2 {
            f.set(STOP, 1);
        }
    }
    let r = ring(|a| a.total = 0);
    let mut f = Fake::new(stops_after_two);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, out.chains), (4, 2));
    assert_eq!((f.word(WRITING), f.word(PRODUCED)), (4, 4));
    // A stalled back-pressure ring stops too.
    fn stops_while_waiting(f: &mut Fake) {
        if f.log.iter().filter(|e| matches!(e, Ev::Sleep(_))).count() == 3 {
            f.set(STOP, 1);
        }
    }
    let mut f = Fake::new(stops_while_waiting);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, out.waits), (8, 1));
}

#[test]
fn a_signal_a_failed_chain_or_a_fault_ends_the_ring_with_its_errno() {
    let r = ring(|a| a.total = 0);
    let mut f = Fake::new(keeps_up);
    f.interrupted = true;
    assert_eq!(run(&mut f, &r, &CARD), Err(Errno::EINTR));
    assert!(f.chains().is_empty());

    for e in [Errno::ENODEV, Errno::EINVAL, Errno::EIO] {
        let mut f = Fake::new(keeps_up);
        f.fail = Some((3, e));
        assert_eq!(run(&mut f, &r, &CARD), Err(e));
        // The failed chain's slots were announced, never published.
        assert_eq!((f.word(WRITING), f.word(PRODUCED)), (8, 6));
    }

    let mut f = Fake::new(keeps_up);
    f.fault_store = true;
    assert_eq!(run(&mut f, &r, &CARD), Err(Errno::EFAULT));
    assert!(f.chains().is_empty());
}

#[test]
fn a_consumer_ahead_of_the_producer_changes_nothing() {
    fn lies(f: &mut Fake) {
        f.set(CONSUMED, u64::MAX);
    }
    let r = ring(|a| a.total = 20);
    let mut f = Fake::new(lies);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, out.waits), (20, 0));
}

/// A caller producing three slots more on every transfer and nap of the driver, up to 11.
fn produces_three(f: &mut Fake) {
    let p = f.word(PRODUCED);
    f.set(PRODUCED, (p + 3).min(11));
}

#[test]
fn emptying_moves_what_the_caller_produced_in_chains_that_never_wrap() {
    let r = ring(|a| {
        a.flags = abi::RING_H2C;
        a.total = 11;
        a.chain_slots = 4;
    });
    assert_eq!(r.way, Way::Empty);
    let mut f = Fake::emptying(produces_three);
    f.set(PRODUCED, 3);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, f.word(CONSUMED)), (11, 11));
    // What the caller had produced when each chain was planned bounds it; a chain never wraps the ring.
    let k = 4096;
    let got: Vec<(Option<Host>, u64)> = f.chains().iter().map(|c| (c.src, c.len)).collect();
    assert_eq!(
        got,
        [
            (Some(Host::User(RING)), 3 * k),
            (Some(Host::User(RING + 3 * k)), 3 * k),
            (Some(Host::User(RING + 6 * k)), 2 * k),
            (Some(Host::User(RING)), 3 * k),
        ]
    );
    for c in f.chains() {
        assert_eq!(
            c.work,
            gate::Work::OneWay {
                dir: Dir::H2c,
                fpga: crate::stream::WINDOW_AXI_ADDR,
                card_time: false
            }
        );
        assert!(c.dst.is_none() && !c.uses_ram());
    }
    // `writing` before each chain, `consumed` after it, then a wake-up; the caller's `produced` never
    // written.
    let mut expect = std::vec![
        Ev::Store(WRITING, 0),
        Ev::Store(CONSUMED, 0),
        Ev::Store(WAITS, 0)
    ];
    let mut consumed = 0;
    for (c, n) in f.chains().into_iter().zip([3, 3, 2, 3]) {
        expect.push(Ev::Store(WRITING, consumed + n));
        expect.push(Ev::Transfer(c));
        consumed += n;
        expect.push(Ev::Store(CONSUMED, consumed));
        expect.push(Ev::Wake);
    }
    expect.push(Ev::Wake);
    assert_eq!(f.log, expect);
}

#[test]
fn emptying_waits_for_the_caller_and_counts_each_wait_once() {
    // Produces one slot on every second nap.
    fn slow(f: &mut Fake) {
        let naps = f.log.iter().filter(|e| matches!(e, Ev::Sleep(_))).count();
        if naps % 2 == 0 && matches!(f.log.last(), Some(Ev::Sleep(_))) {
            let p = f.word(PRODUCED);
            f.set(PRODUCED, p + 1);
        }
    }
    let r = ring(|a| {
        a.flags = abi::RING_H2C;
        a.total = 5;
    });
    let mut f = Fake::emptying(slow);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, out.chains, out.waits), (5, 5, 5));
    // A sleeping caller is woken when slots were freed (5 chains) and at the end, never for a nap.
    assert_eq!(f.log.iter().filter(|e| **e == Ev::Wake).count(), 6);
    let naps: Vec<u32> = f
        .log
        .iter()
        .filter_map(|e| match e {
            Ev::Sleep(us) => Some(*us),
            _ => None,
        })
        .collect();
    assert_eq!(
        naps,
        [20, 40, 20, 40, 20, 40, 20, 40, 20, 40],
        "a new episode starts short"
    );
}

#[test]
fn emptying_takes_a_producer_ahead_by_more_than_a_ring_as_a_ring_ahead() {
    fn lies(f: &mut Fake) {
        f.set(PRODUCED, u64::MAX);
    }
    let r = ring(|a| {
        a.flags = abi::RING_H2C;
        a.total = 20;
        a.chain_slots = 8;
    });
    let mut f = Fake::emptying(lies);
    f.set(PRODUCED, u64::MAX);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, out.chains), (20, 3));
    assert!(f.chains().iter().all(|c| c.len <= 8 * 4096));
}

#[test]
fn emptying_a_surface_names_its_slot_by_offset_and_stops_when_asked() {
    fn stops_after_one(f: &mut Fake) {
        if f.transfers == 1 {
            f.set(STOP, 1);
        }
    }
    let r = ring(|a| {
        a.flags = abi::RING_H2C | abi::RING_CUDA;
        a.ring = 9;
        a.total = 0;
        a.chain_slots = 2;
    });
    let mut f = Fake::emptying(stops_after_one);
    f.set(PRODUCED, 5);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.produced, out.chains), (2, 1));
    let c = f.chains()[0];
    assert_eq!(
        (c.src, c.surface_at, c.len),
        (Some(Host::Cuda(9)), 0, 2 * 4096)
    );
    let mut f = Fake::emptying(nothing);
    f.set(PRODUCED, 5);
    f.interrupted = true;
    assert_eq!(run(&mut f, &r, &CARD), Err(Errno::EINTR));
}

#[test]
fn a_sleeper_is_woken_after_each_publication_and_at_every_end_never_while_the_driver_waits() {
    fn wakes(f: &Fake) -> usize {
        f.log.iter().filter(|e| **e == Ev::Wake).count()
    }
    // A stalled back-pressure consumer: many naps, one wake-up per chain and one at the end.
    let r = ring(|a| a.total = 16);
    let mut f = Fake::new(stall);
    let out = run(&mut f, &r, &CARD).unwrap();
    assert_eq!((out.chains, wakes(&f)), (8, 9));
    // Each wake-up follows the store it announces, and a nap is never followed by one.
    for w in f.log.windows(2) {
        if w[1] == Ev::Wake {
            assert!(matches!(w[0], Ev::Store(PRODUCED, _) | Ev::Wake), "{w:?}");
        }
    }
    // Every error still ends with one: a signal, a failed chain, a fault.
    let r = ring(|a| a.total = 0);
    let mut f = Fake::new(keeps_up);
    f.interrupted = true;
    assert_eq!(run(&mut f, &r, &CARD), Err(Errno::EINTR));
    assert_eq!(f.log.last(), Some(&Ev::Wake));
    let mut f = Fake::new(keeps_up);
    f.fail = Some((2, Errno::ENODEV));
    assert_eq!(run(&mut f, &r, &CARD), Err(Errno::ENODEV));
    assert_eq!((wakes(&f), f.log.last()), (3, Some(&Ev::Wake)));
    let mut f = Fake::new(keeps_up);
    f.fault_store = true;
    assert_eq!(run(&mut f, &r, &CARD), Err(Errno::EFAULT));
    assert_eq!(f.log, [Ev::Wake]);
}
