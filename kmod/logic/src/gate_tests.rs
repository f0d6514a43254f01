//! The gate against fake services: every request shape, with every fallible step failing in turn and the
//! card wedged or not, checked against the order the module comment gives.

extern crate std;
use super::*;
use std::vec::Vec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    Prefault { addr: u64, writes: bool },
    Begin,
    End,
    RamBegin,
    RamEnd,
    Reserve(usize),
    Unreserve,
    Pin(Side),
    Unpin(Side),
    Quarantine(Side),
    Enter(Side),
    Exit(Side),
    Run(Work),
}

impl Ev {
    /// Whether this event takes something (and so may fail).
    fn fallible(self) -> bool {
        matches!(
            self,
            Ev::Prefault { .. }
                | Ev::Begin
                | Ev::RamBegin
                | Ev::Reserve(_)
                | Ev::Pin(_)
                | Ev::Enter(_)
                | Ev::Run(_)
        )
    }
}

/// Services that log every call; the `fail_at`-th fallible call fails with ENOMEM (the run: EIO). They
/// also keep what is held now and assert the gate's rules as it goes: a side holds one window at a time,
/// nothing is pinned or let go of while a surface use is held, and the engines run on the current window
/// of every side.
struct Fake {
    log: Vec<Ev>,
    fallible: usize,
    fail_at: Option<usize>,
    wedged: bool,
    /// The request's length (what prefault is asked for).
    len: u64,
    /// Per side: the window (offset, length) pinned or entered now.
    live: [Option<(u64, u64)>; 2],
    /// Per side: whether that hold is a surface use.
    uses: [bool; 2],
    /// Windows run, in order.
    runs: Vec<(u64, u64)>,
}

const DMA_NS: u64 = 1234;

impl Fake {
    fn new(fail_at: Option<usize>, wedged: bool) -> Self {
        Self::of_len(LEN, fail_at, wedged)
    }

    fn of_len(len: u64, fail_at: Option<usize>, wedged: bool) -> Self {
        Fake {
            log: Vec::new(),
            fallible: 0,
            fail_at,
            wedged,
            len,
            live: [None; 2],
            uses: [false; 2],
            runs: Vec::new(),
        }
    }

    /// Whether a surface use is held now.
    fn in_use(&self) -> bool {
        self.uses.contains(&true)
    }

    /// Takes `side`'s window `(at, len)`: one window at a time, each at most `WINDOW`.
    fn hold(&mut self, side: Side, at: u64, len: u64) {
        assert!(self.live[side as usize].is_none(), "{side:?} taken twice");
        assert!(
            len > 0 && len <= WINDOW && at + len <= self.len,
            "window {at} {len}"
        );
        self.live[side as usize] = Some((at, len));
    }

    fn let_go(&mut self, side: Side) {
        assert!(
            self.live[side as usize].take().is_some(),
            "{side:?} let go unheld"
        );
    }

    fn take(&mut self, ev: Ev) -> Result<(), Errno> {
        self.log.push(ev);
        let n = self.fallible;
        self.fallible += 1;
        if self.fail_at == Some(n) {
            return Err(if matches!(ev, Ev::Run(_)) {
                Errno::EIO
            } else {
                Errno::ENOMEM
            });
        }
        Ok(())
    }
}

impl Services for Fake {
    fn prefault(&mut self, addr: u64, len: u64, device_writes: bool) -> Result<(), Errno> {
        assert_eq!(len, self.len);
        self.take(Ev::Prefault {
            addr,
            writes: device_writes,
        })
    }
    fn begin(&mut self) -> Result<(), Errno> {
        self.take(Ev::Begin)
    }
    fn end(&mut self) {
        self.log.push(Ev::End);
    }
    fn ram_begin(&mut self) -> Result<(), Errno> {
        self.take(Ev::RamBegin)
    }
    fn ram_end(&mut self) {
        self.log.push(Ev::RamEnd);
    }
    fn reserve_quarantine(&mut self, pins: usize) -> Result<(), Errno> {
        self.take(Ev::Reserve(pins))
    }
    fn unreserve_quarantine(&mut self) {
        self.log.push(Ev::Unreserve);
    }
    fn pin_user(&mut self, side: Side, addr: u64, len: u64) -> Result<(), Errno> {
        // Pinning may wait on a provider callback that waits for a surface use to end.
        assert!(!self.in_use(), "pinned while a surface use is held");
        let at = addr
            .checked_sub(addr_of(side))
            .expect("an address of the request");
        self.take(Ev::Pin(side))?;
        self.hold(side, at, len);
        Ok(())
    }
    fn unpin_user(&mut self, side: Side) {
        assert!(!self.in_use(), "unpinned while a surface use is held");
        self.let_go(side);
        self.log.push(Ev::Unpin(side));
    }
    fn quarantine(&mut self, side: Side) {
        assert!(!self.in_use(), "quarantined while a surface use is held");
        self.let_go(side);
        self.log.push(Ev::Quarantine(side));
    }
    fn enter_surface(&mut self, side: Side, handle: u32, at: u64, len: u64) -> Result<(), Errno> {
        assert_eq!(handle, handle_of(side));
        self.take(Ev::Enter(side))?;
        self.hold(side, at, len);
        self.uses[side as usize] = true;
        Ok(())
    }
    fn exit_surface(&mut self, side: Side) {
        assert!(self.uses[side as usize], "{side:?} exited unentered");
        self.uses[side as usize] = false;
        self.let_go(side);
        self.log.push(Ev::Exit(side));
    }
    fn run(&mut self, work: Work, at: u64, len: u64) -> Result<u64, Errno> {
        // Every side the work touches holds exactly this window.
        let sides: &[Side] = match work {
            Work::OneWay { dir, .. } => &[Side::of(dir)],
            Work::RoundTrip => &[Side::Src, Side::Dst],
        };
        for side in sides {
            assert_eq!(
                self.live[*side as usize],
                Some((at, len)),
                "run off {side:?}'s window"
            );
        }
        self.runs.push((at, len));
        let work = match work {
            Work::OneWay {
                dir,
                fpga,
                card_time,
            } => Work::OneWay {
                dir,
                fpga: fpga - at,
                card_time,
            },
            w => w,
        };
        self.take(Ev::Run(work)).map(|()| DMA_NS)
    }
    fn wedged(&self) -> bool {
        self.wedged
    }
}

const LEN: u64 = 4096;

fn addr_of(side: Side) -> u64 {
    match side {
        Side::Src => 0x10_000,
        Side::Dst => 0x20_000,
    }
}

fn handle_of(side: Side) -> u32 {
    match side {
        Side::Src => 3,
        Side::Dst => 4,
    }
}

fn host(side: Side, gpu: bool) -> Host {
    if gpu {
        Host::Cuda(handle_of(side))
    } else {
        Host::User(addr_of(side))
    }
}

/// Every request shape: H2C and C2H with user or GPU memory, H2C2H with each pair.
fn shapes() -> Vec<Request> {
    let mut v = Vec::new();
    for gpu in [false, true] {
        for dir in Dir::ALL {
            let side = if dir == Dir::H2c {
                Side::Src
            } else {
                Side::Dst
            };
            let x = OneWay {
                host: host(side, gpu),
                fpga: 512,
                len: LEN,
                card_time: false,
            };
            v.push(Request::one_way(dir, &x));
            // The same with the stream block instead of the card RAM.
            v.push(Request::one_way(
                dir,
                &OneWay {
                    fpga: crate::stream::WINDOW_AXI_ADDR,
                    ..x
                },
            ));
        }
        for dst_gpu in [false, true] {
            v.push(Request::round_trip(&RoundTrip {
                src: host(Side::Src, gpu),
                dst: host(Side::Dst, dst_gpu),
                len: LEN,
            }));
        }
    }
    v
}

fn pos(log: &[Ev], ev: Ev) -> Option<usize> {
    log.iter().position(|e| *e == ev)
}

fn count(log: &[Ev], ev: Ev) -> usize {
    log.iter().filter(|e| **e == ev).count()
}

/// Checks one run's log and result against the gate's rules.
fn check(req: &Request, f: &Fake, r: Result<u64, Errno>) {
    let log = &f.log;
    let ctx = || {
        std::format!(
            "{req:?} fail_at {:?} wedged {}: {log:?}",
            f.fail_at,
            f.wedged
        )
    };
    let failed = f.fail_at.filter(|n| *n < f.fallible);
    // The failing call is the last take: nothing is taken after a failure.
    let takes: Vec<usize> = (0..log.len()).filter(|i| log[*i].fallible()).collect();
    let failed_at = failed.map(|n| takes[n]);
    if let Some(i) = failed_at {
        assert_eq!(i, *takes.last().unwrap(), "took after a failure: {}", ctx());
    }
    let ok = |ev: Ev| pos(log, ev).is_some_and(|i| Some(i) != failed_at);
    // Result: the failing call's errno, or the run's time.
    let expected = match failed_at.map(|i| log[i]) {
        Some(Ev::Run(_)) => Err(Errno::EIO),
        Some(_) => Err(Errno::ENOMEM),
        None => Ok(DMA_NS),
    };
    assert_eq!(r, expected, "{}", ctx());
    // Every user side is faulted in, for writing exactly where the device writes, before the device hold.
    let begin = pos(log, Ev::Begin);
    for (side, addr) in req.user_sides() {
        let pf = Ev::Prefault {
            addr,
            writes: side == Side::Dst,
        };
        if begin.is_some() {
            assert!(pos(log, pf) < begin, "prefault after begin: {}", ctx());
        }
    }
    // Pairs: each successful take has exactly one let-go, after it; a failed take none.
    let pairs: [(Ev, &[Ev]); 3] = [
        (Ev::Begin, &[Ev::End]),
        (Ev::RamBegin, &[Ev::RamEnd]),
        (Ev::Reserve(req.user_sides().count()), &[Ev::Unreserve]),
    ];
    for (take, go) in pairs {
        assert_eq!(
            count(log, take),
            usize::from(pos(log, take).is_some()),
            "{}",
            ctx()
        );
        let gone: usize = go.iter().map(|g| count(log, *g)).sum();
        assert_eq!(
            gone,
            usize::from(ok(take)),
            "{take:?} unbalanced: {}",
            ctx()
        );
    }
    for side in [Side::Src, Side::Dst] {
        let gone = count(log, Ev::Unpin(side)) + count(log, Ev::Quarantine(side));
        assert_eq!(
            gone,
            usize::from(ok(Ev::Pin(side))),
            "pin unbalanced: {}",
            ctx()
        );
        let gone = count(log, Ev::Exit(side));
        assert_eq!(
            gone,
            usize::from(ok(Ev::Enter(side))),
            "use unbalanced: {}",
            ctx()
        );
    }
    // The RAM's owner rule is asked for every request that uses the RAM, and for no stream transfer.
    if ok(Ev::Begin) {
        assert_eq!(
            pos(log, Ev::RamBegin).is_some(),
            req.uses_ram(),
            "{}",
            ctx()
        );
    }
    // Nesting: the hold ends last, the RAM use just before it, the reservation before that.
    let last = |ev: Ev| pos(log, ev).map(|i| log.len() - i);
    if ok(Ev::Begin) {
        assert_eq!(last(Ev::End), Some(1), "{}", ctx());
    }
    if ok(Ev::RamBegin) {
        assert_eq!(last(Ev::RamEnd), Some(2), "{}", ctx());
    }
    if pos(log, Ev::Unreserve).is_some() {
        let under = 2 + usize::from(req.uses_ram());
        assert_eq!(last(Ev::Unreserve), Some(under), "{}", ctx());
    }
    // Host pins before any surface use; every take before the run; uses end before pins are let go.
    let idx = |pred: &dyn Fn(&Ev) -> bool| -> Vec<usize> {
        (0..log.len()).filter(|i| pred(&log[*i])).collect()
    };
    let pins = idx(&|e| matches!(e, Ev::Pin(_)));
    let enters = idx(&|e| matches!(e, Ev::Enter(_)));
    let exits = idx(&|e| matches!(e, Ev::Exit(_)));
    let lets_go = idx(&|e| matches!(e, Ev::Unpin(_) | Ev::Quarantine(_)));
    let run = idx(&|e| matches!(e, Ev::Run(_)));
    let before = |a: &[usize], b: &[usize]| a.iter().all(|i| b.iter().all(|j| i < j));
    assert!(
        before(&pins, &enters),
        "surface entered before a pin: {}",
        ctx()
    );
    assert!(before(&enters, &run), "{}", ctx());
    assert!(
        before(&exits, &lets_go),
        "pin let go before a surface use: {}",
        ctx()
    );
    // Quarantine exactly when the request reached the engines, failed, and the card is wedged.
    let keep = !run.is_empty() && r.is_err() && f.wedged;
    let quarantined = idx(&|e| matches!(e, Ev::Quarantine(_)));
    if keep {
        assert!(idx(&|e| matches!(e, Ev::Unpin(_))).is_empty(), "{}", ctx());
    } else {
        assert!(
            quarantined.is_empty(),
            "quarantined a pin the engine never had: {}",
            ctx()
        );
    }
    // Unfailed: every side of the request is taken, and the engines run once with the request's work.
    if failed.is_none() {
        for (side, _) in req.user_sides() {
            assert!(ok(Ev::Pin(side)), "{}", ctx());
        }
        for (side, _) in req.gpu_sides() {
            assert!(ok(Ev::Enter(side)), "{}", ctx());
        }
        assert_eq!(run.len(), 1, "{}", ctx());
        assert_eq!(log[run[0]], Ev::Run(req.work), "{}", ctx());
    }
}

#[test]
fn every_shape_every_failure_lets_go_of_what_it_took_in_order() {
    let mut runs = 0;
    for req in shapes() {
        let mut fail_at = 0;
        loop {
            for wedged in [false, true] {
                let mut f = Fake::new(Some(fail_at), wedged);
                let r = run(&mut f, &req);
                check(&req, &f, r);
                runs += 1;
            }
            // Past the last fallible step: the same as no failure.
            if Fake::new(Some(fail_at), false).fallible_steps(&req) <= fail_at {
                break;
            }
            fail_at += 1;
        }
        for wedged in [false, true] {
            let mut f = Fake::new(None, wedged);
            let r = run(&mut f, &req);
            check(&req, &f, r);
        }
    }
    assert!(runs > 100, "{runs}");
}

impl Fake {
    /// Fallible steps of an unfailed run of `req`.
    fn fallible_steps(mut self, req: &Request) -> usize {
        self.fail_at = None;
        run(&mut self, req).unwrap();
        self.fallible
    }
}

#[test]
fn a_failed_run_on_a_wedged_card_quarantines_only_host_pins() {
    let req = Request::round_trip(&RoundTrip {
        src: host(Side::Src, true),
        dst: host(Side::Dst, false),
        len: LEN,
    });
    let steps = Fake::new(None, false).fallible_steps(&req);
    let mut f = Fake::new(Some(steps - 1), true);
    assert_eq!(run(&mut f, &req), Err(Errno::EIO));
    let tail: Vec<Ev> = f.log[f.log.len() - 5..].to_vec();
    assert_eq!(
        tail,
        [
            Ev::Exit(Side::Src),
            Ev::Quarantine(Side::Dst),
            Ev::Unreserve,
            Ev::RamEnd,
            Ev::End
        ]
    );
}

#[test]
fn a_gpu_destination_that_fails_to_enter_unpins_the_source_unquarantined() {
    // The card wedged by someone else meanwhile: the device never saw this request's pages.
    let req = Request::round_trip(&RoundTrip {
        src: host(Side::Src, false),
        dst: host(Side::Dst, true),
        len: LEN,
    });
    let enter_dst = 5; // prefault, begin, ram, reserve, pin src, enter dst
    let mut f = Fake::new(Some(enter_dst), true);
    assert_eq!(run(&mut f, &req), Err(Errno::ENOMEM));
    assert_eq!(f.log[enter_dst], Ev::Enter(Side::Dst));
    assert_eq!(f.log[enter_dst + 1], Ev::Unpin(Side::Src));
}

/// H2C2H shapes long enough for three windows, the last one short.
fn long_shapes() -> Vec<Request> {
    let mut v = Vec::new();
    for src_gpu in [false, true] {
        for dst_gpu in [false, true] {
            v.push(Request::round_trip(&RoundTrip {
                src: host(Side::Src, src_gpu),
                dst: host(Side::Dst, dst_gpu),
                len: LONG,
            }));
        }
    }
    v
}

const LONG: u64 = 2 * WINDOW + 4096 + 100;

#[test]
fn a_long_request_holds_one_window_at_a_time_in_order() {
    for req in long_shapes() {
        let mut f = Fake::of_len(LONG, None, false);
        assert_eq!(run(&mut f, &req), Ok(3 * DMA_NS));
        let want = [(0, WINDOW), (WINDOW, WINDOW), (2 * WINDOW, 4096 + 100)];
        assert_eq!(f.runs, want, "{req:?}");
        assert_eq!(f.live, [None, None], "{req:?}: held after the request");
        // Each window pins (or enters) every side afresh, and lets go of it before the next.
        for side in [Side::Src, Side::Dst] {
            let taken = count(&f.log, Ev::Pin(side)) + count(&f.log, Ev::Enter(side));
            assert_eq!(taken, 3, "{req:?}: {:?}", f.log);
        }
        // Everything outside the windows happens once.
        for ev in [
            Ev::Begin,
            Ev::RamBegin,
            Ev::Reserve(req.user_sides().count()),
        ] {
            assert_eq!(count(&f.log, ev), 1, "{req:?}");
        }
    }
}

#[test]
fn a_long_request_failing_anywhere_lets_go_of_everything_and_stops() {
    let mut runs = 0;
    for req in long_shapes() {
        let steps = Fake::of_len(LONG, None, false).fallible_steps(&req);
        for fail_at in 0..steps {
            for wedged in [false, true] {
                let mut f = Fake::of_len(LONG, Some(fail_at), wedged);
                let r = run(&mut f, &req);
                let ctx = || std::format!("{req:?} fail_at {fail_at} wedged {wedged}: {:?}", f.log);
                let last = *f.log.iter().rev().find(|e| e.fallible()).unwrap();
                assert_eq!(f.fallible, fail_at + 1, "took after a failure: {}", ctx());
                let want = if matches!(last, Ev::Run(_)) {
                    Errno::EIO
                } else {
                    Errno::ENOMEM
                };
                assert_eq!(r, Err(want), "{}", ctx());
                assert_eq!(f.live, [None, None], "held after the request: {}", ctx());
                // Quarantine only for the window that ran and failed on a wedged card.
                let quarantined = f.log.iter().any(|e| matches!(e, Ev::Quarantine(_)));
                assert_eq!(
                    quarantined,
                    wedged && matches!(last, Ev::Run(_)) && req.user_sides().count() > 0,
                    "{}",
                    ctx()
                );
                for (take, go) in [(Ev::Begin, Ev::End), (Ev::RamBegin, Ev::RamEnd)] {
                    assert_eq!(
                        count(&f.log, take) - usize::from(last == take),
                        count(&f.log, go),
                        "{}",
                        ctx()
                    );
                }
                runs += 1;
            }
        }
    }
    assert!(runs > 50, "{runs}");
}
