//! Every interleaving of the threads that touch one surface, explored exhaustively: the provider's free
//! callback, an unpin (UNPIN or close), DMAs taking uses, and card removal. Each step is one `Life` call
//! under the surface's lock, as the glue makes it; waits are steps that cannot run until their condition
//! holds. Checked in every reachable state and at every end: exactly one free, never while a use is held
//! or before both callback and unpin are over; no use begins after the callback or an unpin has; the
//! shim's unpin (which unmaps) never runs under a use; no unmap of a freed pin; no state where every
//! unfinished thread waits (a hang), also where a use's end fails to wake the callback or the unpin.

extern crate std;
use super::*;
use std::collections::HashSet;
use std::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Actor {
    /// The provider's free callback (always comes, once).
    Callback,
    /// UNPIN or close. The shim's unpin usually runs the callback inside it, but returns without it when an
    /// invalidation has claimed it (`pevb_p2p_unpin`): so here it may return at any time.
    Unpin,
    /// A DMA's use.
    Dma,
    /// Card removal.
    Detach,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct World {
    life: Life,
    /// Each actor's program counter; `DONE` when it finished.
    pc: Vec<u8>,
    /// Which actor's answer said "free" and has not freed yet.
    frees: u32,
    callback_over: bool,
    unpin_started: bool,
    unpin_over: bool,
    /// A use's end said to wake the waiters (`end_use`): the callback, which sleeps until then.
    woken: bool,
    /// The same wake-up, as the unpin's wait sees it (one notify_all wakes both).
    unpin_woken: bool,
    /// DMAs holding a use (removal's unmap holds one too, but unmaps under the shim's lock: harmless).
    dmas: u32,
}

const DONE: u8 = u8::MAX;

/// A bug the exploration found, with the actors and the state where it happened.
type Found = std::string::String;

fn free(w: &mut World) -> Result<(), Found> {
    if w.life.is_freed() {
        return Err(std::format!("second free: {w:?}"));
    }
    if !w.callback_over || (w.unpin_started && !w.unpin_over) {
        return Err(std::format!(
            "freed before callback and unpin are over: {w:?}"
        ));
    }
    if !w.life.idle() {
        return Err(std::format!("freed while a use is held: {w:?}"));
    }
    w.life.set_freed();
    w.frees += 1;
    Ok(())
}

/// A use ends; the glue's notify_all wakes every waiter when `end_use` says so.
fn end_use(w: &mut World) {
    let wake = w.life.end_use();
    w.woken |= wake;
    w.unpin_woken |= wake;
}

/// Runs actor `i`'s next step if it can run. `Ok(false)`: it waits.
fn step(actors: &[Actor], w: &mut World, i: usize) -> Result<bool, Found> {
    let pc = w.pc[i];
    let next = |w: &mut World, pc: u8| {
        w.pc[i] = pc;
        Ok(true)
    };
    match (actors[i], pc) {
        (_, DONE) => Ok(false),
        (Actor::Callback, 0) => {
            w.life.begin_callback();
            next(w, 1)
        }
        // The wait checks under the lock, then sleeps until a use's end wakes it, then checks again.
        (Actor::Callback, 1) if !w.life.idle() => {
            w.woken = false;
            next(w, 3)
        }
        (Actor::Callback, 3) if !w.woken => Ok(false),
        (Actor::Callback, 3) => next(w, 1),
        (Actor::Callback, 1) => {
            let frees = w.life.end_callback();
            w.callback_over = true;
            next(w, if frees { 2 } else { DONE })
        }
        (Actor::Callback, 2) => {
            free(w)?;
            next(w, DONE)
        }
        (Actor::Unpin, 0) => {
            if w.life.begin_unpin() {
                w.unpin_started = true;
                next(w, 4)
            } else {
                next(w, DONE)
            }
        }
        // Waits for the uses as the callback does, then the shim's unpin, which unmaps.
        (Actor::Unpin, 4) if !w.life.idle() => {
            w.unpin_woken = false;
            next(w, 5)
        }
        (Actor::Unpin, 5) if !w.unpin_woken => Ok(false),
        (Actor::Unpin, 5) => next(w, 4),
        (Actor::Unpin, 4) => next(w, 1),
        (Actor::Unpin, 1) => {
            if w.dmas > 0 {
                return Err(std::format!("the shim's unpin unmapped under a DMA: {w:?}"));
            }
            let frees = w.life.end_unpin();
            w.unpin_over = true;
            next(w, if frees { 2 } else { DONE })
        }
        (Actor::Unpin, 2) => {
            free(w)?;
            next(w, DONE)
        }
        (Actor::Dma, 0) => match w.life.begin_use() {
            Ok(()) => {
                if w.life.dying() {
                    return Err(std::format!("a use began after the callback: {w:?}"));
                }
                if w.unpin_started {
                    return Err(std::format!("a use began after the unpin: {w:?}"));
                }
                w.dmas += 1;
                next(w, 1)
            }
            Err(_) => next(w, DONE),
        },
        (Actor::Dma, 1) => {
            if w.life.is_freed() {
                return Err(std::format!("a DMA ran on a freed pin: {w:?}"));
            }
            next(w, 2)
        }
        (Actor::Dma, 2) => {
            w.dmas -= 1;
            end_use(w);
            next(w, DONE)
        }
        (Actor::Detach, 0) => match w.life.detach() {
            Detach::Done => next(w, DONE),
            Detach::Unmap => next(w, 1),
            Detach::AwaitFree => next(w, 3),
        },
        (Actor::Detach, 1) => {
            if w.life.is_freed() {
                return Err(std::format!("unmapped a freed pin: {w:?}"));
            }
            next(w, 2)
        }
        (Actor::Detach, 2) => {
            end_use(w);
            next(w, DONE)
        }
        (Actor::Detach, 3) if !w.life.is_freed() => Ok(false),
        (Actor::Detach, 3) => next(w, DONE),
        (a, pc) => Err(std::format!("{a:?} has no step {pc}")),
    }
}

/// Explores every interleaving of `actors` from a fresh surface; returns how many distinct states.
fn explore(actors: &[Actor]) -> Result<usize, Found> {
    let start = World {
        life: Life::new(),
        pc: std::vec![0; actors.len()],
        frees: 0,
        callback_over: false,
        unpin_started: false,
        unpin_over: false,
        woken: false,
        unpin_woken: false,
        dmas: 0,
    };
    let mut seen = HashSet::new();
    let mut todo = std::vec![start];
    while let Some(w) = todo.pop() {
        if !seen.insert(w.clone()) {
            continue;
        }
        if w.pc.iter().all(|&p| p == DONE) {
            if w.frees != 1 {
                return Err(std::format!("{} frees at the end: {w:?}", w.frees));
            }
            continue;
        }
        let mut moved = false;
        for i in 0..actors.len() {
            let mut n = w.clone();
            if step(actors, &mut n, i)? {
                moved = true;
                todo.push(n);
            }
        }
        if !moved {
            return Err(std::format!("every unfinished thread waits: {w:?}"));
        }
    }
    Ok(seen.len())
}

const SHAPES: &[&[Actor]] = &[
    &[Actor::Callback],
    &[Actor::Callback, Actor::Unpin],
    &[Actor::Callback, Actor::Dma],
    &[Actor::Callback, Actor::Unpin, Actor::Dma],
    &[Actor::Callback, Actor::Unpin, Actor::Dma, Actor::Dma],
    &[Actor::Callback, Actor::Detach],
    &[Actor::Callback, Actor::Unpin, Actor::Detach],
    &[Actor::Callback, Actor::Unpin, Actor::Dma, Actor::Detach],
    &[
        Actor::Callback,
        Actor::Unpin,
        Actor::Unpin,
        Actor::Dma,
        Actor::Detach,
    ],
    &[
        Actor::Callback,
        Actor::Unpin,
        Actor::Dma,
        Actor::Dma,
        Actor::Detach,
    ],
];

#[test]
fn every_interleaving_frees_once_and_never_under_a_use() {
    for shape in SHAPES {
        let states = explore(shape).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        assert!(states > shape.len(), "{shape:?}: only {states} states");
    }
}

#[test]
fn uses_are_refused_once_the_memory_or_the_card_goes() {
    let mut l = Life::new();
    l.begin_callback();
    assert_eq!(l.begin_use(), Err(Errno::EINVAL));
    assert!(!l.begin_unpin(), "no unpin once the callback has begun");
    let mut l = Life::new();
    assert_eq!(l.detach(), Detach::Unmap);
    assert!(!l.end_use(), "no callback waits yet");
    assert_eq!(l.begin_use(), Err(Errno::ENODEV));
    assert_eq!(l.detach(), Detach::Done, "unmapped once");
}

#[test]
fn the_last_use_wakes_the_callback() {
    let mut l = Life::new();
    l.begin_use().unwrap();
    l.begin_use().unwrap();
    l.begin_callback();
    assert!(!l.end_use());
    assert!(l.end_use());
    assert!(l.end_callback(), "no unpin started: the callback frees");
}

#[test]
fn an_unpin_refuses_new_uses_and_the_last_use_wakes_it() {
    let mut l = Life::new();
    l.begin_use().unwrap();
    assert!(l.begin_unpin());
    assert_eq!(
        l.begin_use(),
        Err(Errno::EINVAL),
        "no use after the unpin began"
    );
    assert!(!l.idle());
    assert!(l.end_use(), "the last use wakes the unpin");
    assert!(l.idle());
}

#[test]
fn the_view_shows_the_state() {
    let mut l = Life::new();
    l.begin_use().unwrap();
    assert!(l.begin_unpin());
    assert_eq!(
        l.view(),
        View {
            users: 1,
            dead: false,
            unpinning: true,
            detached: false,
            freed: false
        }
    );
}

/// The sequences over services that log what they are asked, one thread at a time: the order of each,
/// which of callback and unpin frees, and what removal leaves to wait for.
mod sequences {
    extern crate std;
    use super::super::*;
    use core::cell::{Cell, RefCell};
    use std::vec::Vec;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Ev {
        Wait(Until),
        Wake,
        UnpinPin,
        Unmap,
        Free,
        Awaited,
    }

    #[derive(Default)]
    struct Fake {
        life: RefCell<Life>,
        log: RefCell<Vec<Ev>>,
        /// What `unmap_device` answers.
        move_began: Cell<bool>,
    }

    impl Surface for Fake {
        fn locked<R>(&self, f: impl FnOnce(&mut Life) -> R) -> R {
            f(&mut self.life.borrow_mut())
        }
        fn wait(&self, u: Until) {
            // One thread: a wait that would sleep is a hang.
            assert!(self.life.borrow().reached(u), "waits for {u:?} forever");
            self.log.borrow_mut().push(Ev::Wait(u));
        }
        fn wake(&self) {
            self.log.borrow_mut().push(Ev::Wake);
        }
        fn unpin_pin(&self) {
            assert!(self.life.borrow().idle(), "unpin under a use");
            self.log.borrow_mut().push(Ev::UnpinPin);
        }
        fn unmap_device(&self) -> bool {
            self.log.borrow_mut().push(Ev::Unmap);
            !self.move_began.get()
        }
        fn free_pin(&self) {
            assert!(!self.life.borrow().is_freed(), "freed twice");
            self.log.borrow_mut().push(Ev::Free);
        }
        fn uses_awaited(&self) {
            self.log.borrow_mut().push(Ev::Awaited);
        }
    }

    #[test]
    fn callback_alone_frees() {
        let f = Fake::default();
        callback(&f);
        assert_eq!(
            *f.log.borrow(),
            [Ev::Awaited, Ev::Wait(Until::Idle), Ev::Free, Ev::Wake]
        );
        assert!(f.life.borrow().is_freed());
        // An unpin after the callback does nothing.
        unpin(&f);
        assert_eq!(f.log.borrow().len(), 4);
    }

    #[test]
    fn unpin_then_callback_frees_once() {
        // The shim's unpin returned without the callback (an invalidation claimed it): the callback frees.
        let f = Fake::default();
        unpin(&f);
        assert_eq!(*f.log.borrow(), [Ev::Wait(Until::Idle), Ev::UnpinPin]);
        callback(&f);
        assert_eq!(f.log.borrow().iter().filter(|e| **e == Ev::Free).count(), 1);
        // The callback inside the unpin: the unpin frees at its end.
        let f = Fake::default();
        f.life.borrow_mut().begin_unpin();
        callback(&f);
        assert!(!f.log.borrow().contains(&Ev::Free));
        assert!(f.life.borrow_mut().end_unpin());
    }

    #[test]
    fn the_last_use_wakes_the_waiters() {
        let f = Fake::default();
        f.life.borrow_mut().begin_use().unwrap();
        end_use(&f);
        assert!(f.log.borrow().is_empty(), "nobody waits yet");
        f.life.borrow_mut().begin_use().unwrap();
        f.life.borrow_mut().begin_callback();
        end_use(&f);
        assert_eq!(*f.log.borrow(), [Ev::Wake]);
    }

    #[test]
    fn removal_unmaps_a_live_surface_and_waits_only_for_a_dying_one() {
        let f = Fake::default();
        assert!(!detach(&f));
        assert_eq!(*f.log.borrow(), [Ev::Unmap]);
        // The unmap was held like a DMA, and that hold ended: a callback later waits for nothing.
        assert!(f.life.borrow().idle());
        assert_eq!(f.life.borrow_mut().begin_use(), Err(Errno::ENODEV));
        assert!(!detach(&f), "once");
        // A dma-buf whose move began meanwhile: its callback unmaps.
        let f = Fake::default();
        f.move_began.set(true);
        assert!(detach(&f));
        // The callback has begun: its free unmaps.
        let f = Fake::default();
        f.life.borrow_mut().begin_callback();
        assert!(detach(&f));
        assert!(f.log.borrow().is_empty());
        callback(&f);
        await_free(&f);
        assert_eq!(f.log.borrow().last(), Some(&Ev::Wait(Until::Freed)));
    }
}
