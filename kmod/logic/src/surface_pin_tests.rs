//! PIN_CUDA's sequence against fake services: every fallible step failing in turn, dying surfaces in the
//! way, remapped pages, checked against the order the module comment gives.

extern crate std;
use super::*;
use std::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Lock,
    Unlock,
    Frames,
    Overlaps,
    Dying,
    WaitFreed,
    Evict,
    Pin,
    Same,
    Unpin,
    Publish,
}

#[derive(Default)]
struct Fake {
    log: Vec<Ev>,
    locked: bool,
    /// Which step fails (by its kind), if any.
    fail: Option<Ev>,
    overlap: bool,
    /// How many dying surfaces are found before the way is clear.
    dying: u32,
    remapped: bool,
    /// Frames alive now (taken by `frames`, given back when dropped or pinned).
    frames_out: std::rc::Rc<core::cell::Cell<i32>>,
    pins: i32,
}

struct Frames(std::rc::Rc<core::cell::Cell<i32>>);

impl Drop for Frames {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Surface {
    Dying,
    Pinned,
}

impl Fake {
    fn ev(&mut self, e: Ev) -> Result<(), Errno> {
        self.log.push(e);
        let under_lock = matches!(
            e,
            Ev::Frames | Ev::Overlaps | Ev::Dying | Ev::Evict | Ev::Pin
        );
        assert_eq!(
            self.locked, under_lock,
            "{e:?} with the pin lock {}",
            self.locked
        );
        if self.fail == Some(e) {
            Err(Errno::ENOMEM)
        } else {
            Ok(())
        }
    }
}

impl Services for Fake {
    type Frames = Frames;
    type Surface = Surface;
    fn lock(&mut self) {
        self.ev(Ev::Lock).unwrap();
        self.locked = true;
    }
    fn unlock(&mut self) {
        assert!(self.locked, "unlocked twice");
        self.locked = false;
        self.ev(Ev::Unlock).unwrap();
    }
    fn frames(&mut self) -> Result<Frames, Errno> {
        self.ev(Ev::Frames)?;
        self.frames_out.set(self.frames_out.get() + 1);
        Ok(Frames(self.frames_out.clone()))
    }
    fn overlaps(&mut self, _: &Frames) -> bool {
        self.ev(Ev::Overlaps).unwrap();
        self.overlap
    }
    fn dying(&mut self, _: &Frames) -> Option<Surface> {
        self.ev(Ev::Dying).unwrap();
        (self.dying > 0).then(|| {
            self.dying -= 1;
            Surface::Dying
        })
    }
    fn wait_freed(&mut self, s: Surface) {
        self.ev(Ev::WaitFreed).unwrap();
        assert_eq!(s, Surface::Dying);
        assert_eq!(self.frames_out.get(), 0, "waited holding the pages' list");
    }
    fn evict_cached(&mut self, _: &Frames) -> Result<(), Errno> {
        self.ev(Ev::Evict)
    }
    fn pin(&mut self, f: Frames) -> Result<Surface, Errno> {
        self.ev(Ev::Pin)?;
        drop(f);
        self.pins += 1;
        Ok(Surface::Pinned)
    }
    fn same_frames(&mut self, s: &Surface) -> bool {
        self.ev(Ev::Same).unwrap();
        assert_eq!(*s, Surface::Pinned);
        !self.remapped
    }
    fn unpin(&mut self, s: Surface) {
        self.ev(Ev::Unpin).unwrap();
        assert_eq!(s, Surface::Pinned);
        self.pins -= 1;
    }
    fn publish(&mut self, s: Surface) -> Result<u32, (Errno, Surface)> {
        match self.ev(Ev::Publish) {
            Ok(()) => Ok(7),
            Err(e) => Err((e, s)),
        }
    }
}

fn run(f: &mut Fake) -> Result<u32, Errno> {
    let r = pin(f);
    assert!(!f.locked, "returned holding the pin lock: {:?}", f.log);
    assert_eq!(f.frames_out.get(), 0, "leaked the pages' list: {:?}", f.log);
    assert_eq!(
        f.pins,
        i32::from(r.is_ok()),
        "a pin outlives a failure, or none was made: {:?}",
        f.log
    );
    r
}

#[test]
fn the_plain_path_checks_evicts_pins_then_publishes() {
    let mut f = Fake::default();
    assert_eq!(run(&mut f), Ok(7));
    use Ev::*;
    let want = [
        Lock, Frames, Overlaps, Dying, Evict, Pin, Unlock, Same, Publish,
    ];
    assert_eq!(f.log, want);
}

#[test]
fn every_failing_step_fails_the_pin_and_lets_go_of_everything() {
    for step in [Ev::Frames, Ev::Evict, Ev::Pin, Ev::Publish] {
        let mut f = Fake {
            fail: Some(step),
            ..Fake::default()
        };
        assert_eq!(run(&mut f), Err(Errno::ENOMEM), "{step:?}");
        assert!(
            !f.log.contains(&Ev::Publish) || step == Ev::Publish,
            "{step:?}: {:?}",
            f.log
        );
    }
}

#[test]
fn an_overlap_is_busy_and_pins_nothing() {
    let mut f = Fake {
        overlap: true,
        ..Fake::default()
    };
    assert_eq!(run(&mut f), Err(Errno::EBUSY));
    assert!(!f.log.contains(&Ev::Evict) && !f.log.contains(&Ev::Pin));
}

#[test]
fn dying_surfaces_are_waited_for_without_the_lock_then_checked_again() {
    let mut f = Fake {
        dying: 2,
        ..Fake::default()
    };
    assert_eq!(run(&mut f), Ok(7));
    let waits = f.log.iter().filter(|&&e| e == Ev::WaitFreed).count();
    let checks = f.log.iter().filter(|&&e| e == Ev::Overlaps).count();
    assert_eq!((waits, checks), (2, 3), "{:?}", f.log);
}

#[test]
fn remapped_pages_unpin_and_ask_to_try_again() {
    let mut f = Fake {
        remapped: true,
        ..Fake::default()
    };
    assert_eq!(run(&mut f), Err(Errno::EAGAIN));
    assert!(!f.log.contains(&Ev::Publish));
}
