//! The round trip against fake engines: every byte moved once and in order through RAM an H2C finished
//! writing, no half rewritten while a C2H reads it, chains split where a table fills, and with every start
//! and every judgement failing in turn, the error returned with every started chain ended.

extern crate std;
use super::*;
use std::cell::RefCell;
use std::rc::Rc;
use std::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Start {
        h2c: bool,
        off: u64,
        ram: u64,
        len: u64,
    },
    Wait(bool),
    Finish(bool),
    Cancel(bool),
}

#[derive(Default)]
struct World {
    log: Vec<Ev>,
    /// Fallible calls (starts and finishes) so far, and which one fails.
    fallible: usize,
    fail_at: Option<usize>,
    /// Card RAM bytes that hold a finished H2C's data: (ram, len).
    written: Vec<(u64, u64)>,
    /// The C2H running now: (ram, len).
    reading: Option<(u64, u64)>,
    /// Runs started and not ended.
    live: usize,
}

impl World {
    fn fallible(&mut self) -> Result<(), Errno> {
        self.fallible += 1;
        if self.fail_at == Some(self.fallible - 1) {
            Err(Errno::EIO)
        } else {
            Ok(())
        }
    }
}

struct Fake {
    h2c: bool,
    world: Rc<RefCell<World>>,
    /// Bytes one chain moves at most (the table's capacity).
    table: u64,
    /// Where this side's next chain must start.
    next: u64,
}

struct FakeRun {
    h2c: bool,
    world: Rc<RefCell<World>>,
    ram: u64,
    len: u64,
    ended: bool,
}

impl Side for Fake {
    type Run<'a> = FakeRun;
    fn start(&mut self, host_off: u64, ram: u64, len: u64, _wake: Wake) -> Result<FakeRun, Errno> {
        let mut w = self.world.borrow_mut();
        assert_eq!(host_off, self.next, "chains of one side follow each other");
        w.fallible()?;
        let len = len.min(self.table);
        w.log.push(Ev::Start {
            h2c: self.h2c,
            off: host_off,
            ram,
            len,
        });
        if self.h2c {
            if let Some((r, l)) = w.reading {
                assert!(
                    ram + len <= r || r + l <= ram,
                    "H2C rewrites RAM a running C2H reads"
                );
            }
        } else {
            let covered = w
                .written
                .iter()
                .any(|&(r, l)| r <= ram && ram + len <= r + l);
            assert!(
                covered,
                "C2H of RAM no finished H2C wrote: {ram:#x}+{len:#x}"
            );
            w.reading = Some((ram, len));
        }
        w.live += 1;
        self.next += len;
        Ok(FakeRun {
            h2c: self.h2c,
            world: self.world.clone(),
            ram,
            len,
            ended: false,
        })
    }
}

impl Started for FakeRun {
    fn wait(&mut self) {
        self.world.borrow_mut().log.push(Ev::Wait(self.h2c));
    }
    fn finish(mut self) -> Result<u64, Errno> {
        self.ended = true;
        let mut w = self.world.borrow_mut();
        w.live -= 1;
        w.log.push(Ev::Finish(self.h2c));
        if !self.h2c {
            w.reading = None;
        }
        w.fallible()?;
        if self.h2c {
            w.written.push((self.ram, self.len));
        }
        Ok(self.len)
    }
    fn cancel(mut self) {
        self.ended = true;
        let mut w = self.world.borrow_mut();
        w.live -= 1;
        w.log.push(Ev::Cancel(self.h2c));
        if !self.h2c {
            w.reading = None;
        }
    }
}

impl Drop for FakeRun {
    fn drop(&mut self) {
        assert!(
            self.ended || std::thread::panicking(),
            "a run dropped without being ended"
        );
    }
}

fn run(len: u64, ram: u64, table: u64, fail_at: Option<usize>) -> (Result<(), Errno>, World) {
    let world = Rc::new(RefCell::new(World {
        fail_at,
        ..World::default()
    }));
    let mut h = Fake {
        h2c: true,
        world: world.clone(),
        table,
        next: 0,
    };
    let mut c = Fake {
        h2c: false,
        world: world.clone(),
        table,
        next: 0,
    };
    let r = super::run(&mut h, &mut c, len, ram);
    // A side's chains cover its buffer exactly once, in order (checked at each start); on success, all of it.
    if r.is_ok() {
        assert_eq!((h.next, c.next), (len, len));
    }
    drop((h, c));
    (r, Rc::try_unwrap(world).ok().unwrap().into_inner())
}

#[test]
fn every_byte_goes_through_ram_an_h2c_wrote_and_no_half_is_rewritten_while_read() {
    for (len, table) in [
        (4096, 1 << 20),
        (65536, 1 << 20),
        (1 << 20, 1 << 20),
        (300_000, 8192),
        (8, 4096),
    ] {
        let (r, w) = run(len, 65536, table, None);
        assert_eq!(r, Ok(()), "{len} {table}");
        assert_eq!(w.live, 0);
    }
}

#[test]
fn h2c_starts_first_and_c2h_is_judged_first() {
    let (r, w) = run(3 * 32768, 65536, 1 << 20, None);
    assert_eq!(r, Ok(()));
    // The middle steps: both run.
    let both: Vec<_> = w
        .log
        .windows(6)
        .filter(|e| {
            matches!(e[0], Ev::Start { h2c: true, .. })
                && matches!(e[1], Ev::Start { h2c: false, .. })
        })
        .collect();
    assert_eq!(both.len(), 2);
    for e in both {
        assert_eq!(
            &e[2..],
            &[
                Ev::Wait(false),
                Ev::Finish(false),
                Ev::Wait(true),
                Ev::Finish(true)
            ]
        );
    }
}

#[test]
fn every_failure_ends_every_started_run_and_starts_nothing_after() {
    let (_, clean) = run(200_000, 65536, 16384, None);
    for fail_at in 0..clean.fallible {
        let (r, w) = run(200_000, 65536, 16384, Some(fail_at));
        assert_eq!(r, Err(Errno::EIO), "failure {fail_at}");
        assert_eq!(w.live, 0, "failure {fail_at}: {:?}", w.log);
        assert_eq!(
            w.fallible,
            fail_at + 1,
            "failure {fail_at}: work after the error"
        );
    }
}

#[test]
fn a_chain_that_moves_nothing_ends_the_request() {
    let (r, w) = run(65536, 65536, 0, None);
    assert_eq!(r, Err(Errno::EIO));
    assert_eq!(w.live, 0);
}
