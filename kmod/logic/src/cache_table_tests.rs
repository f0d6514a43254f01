//! The cache's sequences against fake services: a fake address space whose pages can be remapped, aliased
//! or covered by a surface, pins that can go stale, a concurrent close, and the lock rules of the module
//! comment asserted on every call.

extern crate std;
use super::*;
use crate::cache_policy::CAPACITY;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::vec::Vec;

const PAGE: u64 = 4096;
const MM: usize = 7;

/// A pin: its range, its frames and whether its memory changed since.
#[derive(Debug, PartialEq, Eq)]
struct PinInfo {
    want: Range,
    frames: Vec<u64>,
    stale: Cell<bool>,
}

type Pin = Rc<PinInfo>;

struct FakeTable {
    policy: Policy,
    pins: [Option<Pin>; CAPACITY],
    closed: bool,
}

impl Table for FakeTable {
    type Pin = Pin;
    fn policy(&mut self) -> &mut Policy {
        &mut self.policy
    }
    fn closed(&self) -> bool {
        self.closed
    }
    fn close(&mut self) {
        self.closed = true;
    }
    fn fresh(&self, slot: usize) -> Option<Pin> {
        self.pins[slot].clone().filter(|p| !p.stale.get())
    }
    fn stale(&self, slot: usize) -> bool {
        self.pins[slot].as_ref().is_some_and(|p| p.stale.get())
    }
    fn holds_frames(&self, slot: usize, frames: &[u64]) -> bool {
        self.pins[slot]
            .as_ref()
            .is_some_and(|p| p.frames.iter().any(|f| frames.contains(f)))
    }
    fn keep(&mut self, slot: usize, pin: &Pin) {
        assert!(self.pins[slot].is_none(), "slot {slot} kept twice");
        self.pins[slot] = Some(pin.clone());
    }
    fn drop_pin(&mut self, slot: usize) {
        self.pins[slot] = None;
    }
}

/// One file's cache on a card. Page `p` of the address space is frame `p + shift` (the shift changes
/// when the memory is remapped); `elsewhere` are frames a surface or another file holds.
struct Fake {
    table: RefCell<FakeTable>,
    table_locked: Cell<bool>,
    pin_locked: Cell<bool>,
    shift: Cell<u64>,
    /// A surface covers these pages `[first, end)`.
    surface: Option<(u64, u64)>,
    elsewhere: RefCell<Vec<u64>>,
    /// Frames cannot be read (not all struct pages).
    no_frames: bool,
    /// The pin fails (not cacheable).
    pin_fails: bool,
    /// Pinning remaps the memory first (the pages pinned are not those looked up).
    remap_on_pin: bool,
    /// The file closes while the pin is made.
    close_on_pin: bool,
    pins_made: Cell<usize>,
}

impl Fake {
    fn new() -> Self {
        Self {
            table: RefCell::new(FakeTable {
                policy: Policy::new(PAGE),
                pins: [const { None }; CAPACITY],
                closed: false,
            }),
            table_locked: Cell::new(false),
            pin_locked: Cell::new(false),
            shift: Cell::new(1000),
            surface: None,
            elsewhere: RefCell::new(Vec::new()),
            no_frames: false,
            pin_fails: false,
            remap_on_pin: false,
            close_on_pin: false,
            pins_made: Cell::new(0),
        }
    }

    fn frames_of(&self, first: u64, end: u64) -> Vec<u64> {
        (first / PAGE..end / PAGE)
            .map(|p| p + self.shift.get())
            .collect()
    }

    /// A card-wide service: under the pin lock, never under a table lock.
    fn card_wide(&self, what: &str) {
        assert!(self.pin_locked.get(), "{what} without the pin lock");
        assert!(!self.table_locked.get(), "{what} under the table lock");
    }

    fn get(&self, addr: u64, len: u64) -> Held<Pin, ()> {
        let r = Range { mm: MM, addr, len };
        get::<_, (), ()>(self, r, || Ok(())).unwrap()
    }

    fn report(&self) -> abi::RegCache {
        self.table.borrow().policy.report()
    }

    fn cached_pins(&self) -> usize {
        self.table.borrow().pins.iter().flatten().count()
    }
}

impl Services for Fake {
    type Pin = Pin;
    type Table = FakeTable;
    type Frames = Vec<u64>;
    fn with_table<R>(&self, f: impl FnOnce(&mut FakeTable) -> R) -> R {
        assert!(!self.table_locked.replace(true), "table lock taken twice");
        let r = f(&mut self.table.borrow_mut());
        self.table_locked.set(false);
        r
    }
    fn with_pin_lock<R>(&self, f: impl FnOnce() -> R) -> R {
        assert!(
            !self.table_locked.get(),
            "pin lock taken inside the table lock"
        );
        assert!(!self.pin_locked.replace(true), "pin lock taken twice");
        let r = f();
        self.pin_locked.set(false);
        r
    }
    fn overlaps_surface(&self, mm: usize, first: u64, end: u64) -> bool {
        self.card_wide("overlaps_surface");
        mm == MM && self.surface.is_some_and(|(a, b)| a < end && first < b)
    }
    fn frames(&self, first: u64, end: u64) -> Option<Vec<u64>> {
        self.card_wide("frames");
        (!self.no_frames).then(|| self.frames_of(first, end))
    }
    fn frames_in_use(&self, frames: &[u64], replacing: Range) -> bool {
        self.card_wide("frames_in_use");
        if frames.iter().any(|f| self.elsewhere.borrow().contains(f)) {
            return true;
        }
        // This file's own buffers, as the glue asks each table: under its lock.
        self.with_table(|t| holds_frames(t, frames, true, replacing))
    }
    fn pin(&self, want: Range) -> Option<Pin> {
        self.card_wide("pin");
        if self.pin_fails {
            return None;
        }
        if self.remap_on_pin {
            self.shift.set(self.shift.get() + 100_000);
        }
        if self.close_on_pin {
            self.with_table(close);
        }
        self.pins_made.set(self.pins_made.get() + 1);
        let first = want.addr & !(PAGE - 1);
        let end = (want.addr + want.len).div_ceil(PAGE) * PAGE;
        Some(Rc::new(PinInfo {
            want,
            frames: self.frames_of(first, end),
            stale: Cell::new(false),
        }))
    }
    fn pin_frames<'a>(&self, pin: &'a Pin) -> &'a [u64] {
        &pin.frames
    }
}

fn cached(h: Held<Pin, ()>) -> (Pin, u64) {
    match h {
        Held::Cached { pin, offset } => (pin, offset),
        Held::Once(()) => panic!("pinned for once, not cached"),
    }
}

#[test]
fn a_buffer_is_cached_on_its_second_use_and_hits_after() {
    let f = Fake::new();
    assert_eq!(f.get(0x10000, 8192), Held::Once(()));
    assert_eq!(f.pins_made.get(), 0, "the first use registers nothing");
    let (p, off) = cached(f.get(0x10000, 8192));
    assert_eq!((off, f.cached_pins()), (0, 1));
    let (q, off) = cached(f.get(0x10000 + 100, 200));
    assert!(Rc::ptr_eq(&p, &q));
    assert_eq!(off, 100);
    let r = f.report();
    assert_eq!((r.uncached, r.misses, r.hits, r.entries), (1, 1, 1, 1));
    // The table and the two requests.
    assert_eq!(Rc::strong_count(&p), 3);
}

#[test]
fn a_stale_buffer_is_dropped_and_the_memory_pinned_again() {
    let f = Fake::new();
    f.get(0x10000, 4096);
    let (old, _) = cached(f.get(0x10000, 4096));
    old.stale.set(true);
    let (new, _) = cached(f.get(0x10000, 4096));
    assert!(!Rc::ptr_eq(&old, &new), "a stale pin served a request");
    assert_eq!(Rc::strong_count(&old), 1, "the table kept the stale pin");
    let r = f.report();
    assert_eq!((r.invalidations, r.misses, r.entries), (1, 2, 1));
}

#[test]
fn memory_held_elsewhere_is_pinned_for_once_without_a_cached_pin() {
    for case in ["surface", "alias", "no frames", "not cacheable"] {
        let mut f = Fake::new();
        match case {
            "surface" => f.surface = Some((0x10000, 0x11000)),
            "alias" => f.elsewhere.borrow_mut().push(0x10 + 1000),
            "no frames" => f.no_frames = true,
            _ => f.pin_fails = true,
        }
        f.get(0x10000, 4096);
        assert_eq!(f.get(0x10000, 4096), Held::Once(()), "{case}");
        if case != "not cacheable" {
            assert_eq!(
                f.pins_made.get(),
                0,
                "{case}: a long-lived pin it cannot keep"
            );
        }
        assert_eq!((f.cached_pins(), f.report().uncached), (0, 2), "{case}");
    }
}

#[test]
fn memory_remapped_while_pinned_is_cached_unless_its_new_pages_are_held_elsewhere() {
    for held in [false, true] {
        let mut f = Fake::new();
        f.remap_on_pin = true;
        if held {
            // The new pages (after the remap) belong to a surface.
            f.elsewhere.borrow_mut().push(0x10 + 101_000);
        }
        f.get(0x10000, 4096);
        let (p, _) = cached(f.get(0x10000, 4096));
        assert_eq!(
            f.cached_pins(),
            usize::from(!held),
            "held elsewhere: {held}"
        );
        assert_eq!(Rc::strong_count(&p), 1 + usize::from(!held));
        assert_eq!(f.report().uncached, 1 + u64::from(held));
    }
}

#[test]
fn a_close_while_pinning_caches_nothing_but_serves_the_request() {
    let mut f = Fake::new();
    f.close_on_pin = true;
    f.get(0x10000, 4096);
    let (p, _) = cached(f.get(0x10000, 4096));
    assert_eq!((f.cached_pins(), Rc::strong_count(&p)), (0, 1));
    // Closed: nothing is looked up or pinned any more.
    assert_eq!(f.get(0x10000, 4096), Held::Once(()));
    assert_eq!(f.pins_made.get(), 1);
}

#[test]
fn a_miss_merges_the_buffers_sharing_its_pages_and_replaces_them() {
    let f = Fake::new();
    f.get(0x10000, 4096);
    let (a, _) = cached(f.get(0x10000, 4096));
    f.get(0x10800, 4096);
    // Shares page 0x10 with `a`: the union is pinned, `a` is evicted (its own frames do not count as an
    // alias: it is what the union replaces).
    let (b, off) = cached(f.get(0x10800, 4096));
    assert_eq!((b.want.addr, b.want.len, off), (0x10000, 0x1800, 0x800));
    assert_eq!((f.cached_pins(), Rc::strong_count(&a)), (1, 1));
    assert_eq!(f.report().evictions, 1);
}

#[test]
fn evict_sweep_control_and_close_let_go_of_exactly_the_pins_they_remove() {
    let f = Fake::new();
    let mut pins = Vec::new();
    for i in 0..4u64 {
        let addr = 0x100000 * (i + 1);
        f.get(addr, 4096);
        pins.push(cached(f.get(addr, 4096)).0);
    }
    let held = |p: &Pin| Rc::strong_count(p) == 2;
    // PIN_CUDA by address (pins[0]) and, at another address, by page frame (pins[1]'s).
    f.with_table(|t| {
        let r = Range {
            mm: MM,
            addr: 0x100000,
            len: 4096,
        };
        evict(t, r, &[0x200 + 1000]);
    });
    assert_eq!(
        pins.iter().map(held).collect::<Vec<_>>(),
        [false, false, true, true]
    );
    pins[2].stale.set(true);
    f.with_table(sweep);
    assert!(!held(&pins[2]) && held(&pins[3]));
    let limits = crate::cache_policy::Limits {
        max_entries: 0,
        max_bytes: 1 << 20,
    };
    let r = f.with_table(|t| control(t, Op::SetLimits(limits)));
    assert_eq!((r.entries, r.evictions, r.invalidations), (0, 3, 1));
    assert!(!held(&pins[3]));

    let g = Fake::new();
    g.get(0x10000, 4096);
    let (p, _) = cached(g.get(0x10000, 4096));
    g.with_table(close);
    assert_eq!((Rc::strong_count(&p), g.report().entries), (1, 0));
    assert!(g.table.borrow().closed);
}
