//! Isolation between holders of one card (`IOC_RAM_OWNER`, ABI 1.2): the card RAM has one owner at a
//! time, another process's transfers fail with EBUSY, and the RAM is zeroed before a new owner's first use.
//! Each test gives the suite's RAM back first (the suite process owns it from earlier tests) and runs the
//! other holder in a forked child with a file of its own, as the agent's applications and self-test are.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::{Ctx, Needs, Test, TestResult, ctx_err, ensure, expect_errno, test};
use crate::dev::Device;

const RAM: usize = FPGA_RAM_SIZE as usize;

pub fn register(v: &mut Vec<Test>) {
    for (name, run) in [
        (
            "isolation::another_process_can_neither_read_nor_overwrite",
            another_process_can_neither_read_nor_overwrite as fn(&mut Ctx) -> TestResult,
        ),
        (
            "isolation::release_scrubs_for_the_next_owner",
            release_scrubs_for_the_next_owner,
        ),
        ("isolation::claim_query_release", claim_query_release),
        (
            "isolation::reference_flow_in_a_fresh_process",
            reference_flow_in_a_fresh_process,
        ),
    ] {
        v.push(test(name, run).needs(Needs::RamOwner));
    }
}

/// Gives the suite process's RAM back (it owns it through the shared file after earlier tests).
pub(super) fn give_back(dev: &Device) -> TestResult {
    let st = ctx_err("RAM_OWNER RELEASE", dev.ram_owner(abi::RAM_RELEASE))?;
    ensure!(
        st == abi::RAM_FREE,
        "RAM not free after RELEASE: state {st}"
    );
    Ok(())
}

/// Before a test forks a child that moves data through a file of its own (or one this process never
/// used): gives the RAM back so the child may take it. A driver without the ownership rules (ENOTTY) needs
/// nothing.
pub(super) fn let_another_process_in(dev: &Device) -> TestResult {
    match dev.ram_owner(abi::RAM_RELEASE) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => Ok(()),
        r => ctx_err("RAM_OWNER RELEASE before forking a holder", r).map(|_| ()),
    }
}

/// Before a test injects a fault into the next transfer: takes the RAM through `dev` now, so that the scrub
/// a new owner's first transfer runs (one H2C) happens before the fault is armed and the fault hits the
/// test's own transfer. A driver without the ownership rules (ENOTTY) needs nothing.
pub(in crate::tests) fn own_ram(dev: &Device) -> TestResult {
    match dev.ram_owner(abi::RAM_CLAIM) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => Ok(()),
        r => {
            let st = ctx_err("RAM_OWNER CLAIM before injecting a fault", r)?;
            ensure!(st == abi::RAM_MINE, "RAM not ours after CLAIM: state {st}");
            Ok(())
        }
    }
}

fn pattern(rng: &mut crate::rng::Rng) -> Vec<u8> {
    let mut p = vec![0u8; RAM];
    rng.fill(&mut p);
    // No zero word anywhere, so a scrubbed (zeroed) RAM never passes for the pattern.
    for b in p.iter_mut().filter(|b| **b == 0) {
        *b = 0x5a;
    }
    p
}

/// A forked child: it runs `body` (which may signal readiness and wait for a go) and exits with its code.
pub(super) struct Child {
    pid: libc::pid_t,
    ready: File,
    go: File,
}

/// The child's ends of the pipes.
pub(super) struct Sync {
    ready: libc::c_int,
    go: libc::c_int,
}

impl Sync {
    pub(super) fn ready(&self) {
        // SAFETY: writes one byte of ours to our pipe's write end.
        let _ = unsafe { libc::write(self.ready, [1u8].as_ptr().cast(), 1) };
    }

    pub(super) fn wait_go(&self) {
        let mut b = 0u8;
        // SAFETY: reads at most one byte into a valid buffer from our pipe's read end.
        let _ = unsafe { libc::read(self.go, (&raw mut b).cast(), 1) };
    }
}

fn pipe() -> Result<[libc::c_int; 2], String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    ensure!(rc == 0, "pipe: {}", std::io::Error::last_os_error());
    Ok(fds)
}

impl Child {
    pub(super) fn spawn(body: impl FnOnce(&Sync) -> i32) -> Result<Self, String> {
        let (ready, go) = (pipe()?, pipe()?);
        // SAFETY: the suite is single-threaded here (no test leaves threads behind), so the child may run
        // ordinary Rust; it never returns into the suite: it ends in _exit.
        let pid = unsafe { libc::fork() };
        ensure!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let rc = body(&Sync {
                ready: ready[1],
                go: go[0],
            });
            // SAFETY: ends the child without running the parent's destructors or atexit handlers.
            unsafe { libc::_exit(rc) };
        }
        // SAFETY: these ends are the child's; the other two are ours alone, each owned by its File.
        let (ready, go) = unsafe {
            libc::close(ready[1]);
            libc::close(go[0]);
            (File::from_raw_fd(ready[0]), File::from_raw_fd(go[1]))
        };
        Ok(Child { pid, ready, go })
    }

    pub(super) fn wait_ready(&mut self) -> TestResult {
        let mut b = [0u8; 1];
        match self.ready.read(&mut b) {
            Ok(1) => Ok(()),
            _ => Err(format!("child ended before it was ready: {}", self.reap()?)),
        }
    }

    fn go(&mut self) {
        let _ = self.go.write_all(&[1]);
    }

    /// The child's process id.
    pub(super) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Kills the child (SIGKILL) and waits for it; an error if it had exited on its own first.
    pub(super) fn kill(&mut self) -> TestResult {
        // SAFETY: signals our own child, not yet reaped (reap consumes the pid).
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let mut st = 0;
        // SAFETY: waits for our own child; `st` is a valid out pointer.
        let r = unsafe { libc::waitpid(self.pid, &mut st, 0) };
        ensure!(
            r == self.pid,
            "waitpid: {}",
            std::io::Error::last_os_error()
        );
        ensure!(
            libc::WIFSIGNALED(st),
            "the child ended before it was killed (status {st:#x})"
        );
        Ok(())
    }

    /// Lets the child finish and returns its exit code (an error if it did not exit in 60 s).
    pub(super) fn reap(&mut self) -> Result<i32, String> {
        self.go();
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let mut st = 0;
            // SAFETY: waits for our own child; `st` is a valid out pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
            ensure!(r >= 0, "waitpid: {}", std::io::Error::last_os_error());
            if r == self.pid {
                ensure!(libc::WIFEXITED(st), "child status {st:#x}");
                return Ok(libc::WEXITSTATUS(st));
            }
            ensure!(Instant::now() < until, "child still running after 60 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A holder in another process (the child, A) writes the whole RAM and waits; this process (B), through a
/// file of its own and through the suite's, gets EBUSY for C2H, H2C, H2C2H and CLAIM, and its buffers stay
/// untouched; A then reads its bytes back intact. After A exits (its file closes), B takes the RAM and reads
/// zeros: the new owner never sees the old one's bytes. Fails on a driver without the ownership rules: B's
/// C2H returns A's bytes, or its H2C lands in A's data (A's check, exit 5), or B reads A's bytes at the end.
fn another_process_can_neither_read_nor_overwrite(ctx: &mut Ctx) -> TestResult {
    give_back(ctx.dev)?;
    let a_bytes = pattern(&mut ctx.rng);
    let mut child = spawn_owner(ctx.dev_path, &a_bytes)?;
    let checks = child.wait_ready().and_then(|()| {
        let b = ctx_err("open B", Device::open(ctx.dev_path))?;
        let st = ctx_err("B: RAM_OWNER QUERY", b.ram_owner(abi::RAM_QUERY))?;
        ensure!(st == abi::RAM_OTHER, "B sees state {st}, not RAM_OTHER");
        for (who, dev) in [("B's own file", &b), ("the suite's file", ctx.dev)] {
            let mut seen = vec![0xeeu8; RAM];
            expect_errno(
                &format!("C2H of A's RAM through {who}"),
                dev.c2h(&mut seen, 0),
                libc::EBUSY,
            )?;
            ensure!(
                seen.iter().all(|&x| x == 0xee),
                "{who}: a refused C2H wrote into the buffer"
            );
            let junk = vec![0u8; 4096];
            expect_errno(
                &format!("H2C over A's RAM through {who}"),
                dev.h2c(&junk, 0),
                libc::EBUSY,
            )?;
            let mut out = vec![0u8; 4096];
            expect_errno(
                &format!("H2C2H through {who}"),
                dev.h2c2h(&junk, &mut out),
                libc::EBUSY,
            )?;
            expect_errno(
                &format!("RAM_OWNER CLAIM through {who}"),
                dev.ram_owner(abi::RAM_CLAIM),
                libc::EBUSY,
            )?;
            expect_errno(
                &format!("RAM_OWNER RELEASE of A's RAM through {who}"),
                dev.ram_owner(abi::RAM_RELEASE),
                libc::EBUSY,
            )?;
        }
        Ok(b)
    });
    let code = child.reap()?;
    let b = checks?;
    ensure!(code == 0, "holder A exited with {code} ({OWNER_EXITS})");
    let st = ctx_err("B: QUERY after A exited", b.ram_owner(abi::RAM_QUERY))?;
    ensure!(
        st == abi::RAM_FREE,
        "A's close left state {st}, not RAM_FREE"
    );
    let mut seen = vec![0xeeu8; RAM];
    ctx_err("B: C2H after A exited", b.c2h(&mut seen, 0))?;
    if let Some(at) = seen.iter().position(|&x| x != 0) {
        return Err(format!(
            "B reads {:#04x} at {at} after A exited: the RAM was not scrubbed{}",
            seen[at],
            if seen[at] == a_bytes[at] {
                " (A's byte)"
            } else {
                ""
            }
        ));
    }
    ensure!(
        ctx_err("B: QUERY", b.ram_owner(abi::RAM_QUERY))? == abi::RAM_MINE,
        "B's C2H did not make it the owner"
    );
    give_back(&b)
}

/// What [`spawn_owner`]'s child exits with.
pub(super) const OWNER_EXITS: &str = "open 2, H2C 3, C2H 4, its bytes changed 5, not owner 6";

/// A holder in a child process with a file of its own: it writes `bytes` at RAM offset 0 (taking the RAM),
/// checks that it owns it, signals ready, and on the go reads them back; exit 0 if they are intact, else
/// [`OWNER_EXITS`].
pub(super) fn spawn_owner(path: &str, bytes: &[u8]) -> Result<Child, String> {
    Child::spawn(|sync| {
        let Ok(a) = Device::open(path) else { return 2 };
        if a.h2c(bytes, 0).is_err() {
            return 3;
        }
        if a.ram_owner(abi::RAM_QUERY).ok() != Some(abi::RAM_MINE) {
            return 6;
        }
        sync.ready();
        sync.wait_go();
        let mut back = vec![0u8; bytes.len()];
        if a.c2h(&mut back, 0).is_err() {
            return 4;
        }
        if back != bytes {
            return 5;
        }
        0
    })
}

/// The suite process writes a pattern and RELEASEs; a child that claims next reads zeros only. Fails on a
/// driver that does not scrub between owners (the child sees the pattern: exit 4).
fn release_scrubs_for_the_next_owner(ctx: &mut Ctx) -> TestResult {
    give_back(ctx.dev)?;
    let bytes = pattern(&mut ctx.rng);
    ctx_err("H2C of the pattern", ctx.dev.h2c(&bytes, 0))?;
    give_back(ctx.dev)?;
    let path = ctx.dev_path.to_string();
    let mut seen = vec![0xeeu8; RAM];
    let mut child = Child::spawn(|_| {
        let Ok(d) = Device::open(&path) else { return 2 };
        if d.ram_owner(abi::RAM_CLAIM).ok() != Some(abi::RAM_MINE) {
            return 3;
        }
        if d.c2h(&mut seen, 0).is_err() {
            return 5;
        }
        if seen.iter().any(|&x| x != 0) {
            return 4;
        }
        0
    })?;
    let code = child.reap()?;
    ensure!(
        code == 0,
        "next owner (open 2, CLAIM 3, saw non-zero bytes 4, C2H 5) exited with {code}"
    );
    Ok(())
}

/// The explicit calls: CLAIM takes the RAM, the claiming process's other files join it, another process's
/// CLAIM fails at once with EBUSY (it never waits) and its QUERY says RAM_OTHER; RELEASE frees it; bad ops
/// and reserved words are EINVAL. Fails on a driver without IOC_RAM_OWNER (ENOTTY) or whose CLAIM does not
/// exclude another process (the child's CLAIM succeeds: exit 4).
fn claim_query_release(ctx: &mut Ctx) -> TestResult {
    give_back(ctx.dev)?;
    let mine = ctx_err("CLAIM", ctx.dev.ram_owner(abi::RAM_CLAIM))?;
    ensure!(mine == abi::RAM_MINE, "CLAIM left state {mine}");
    let second = ctx_err("open a second file", Device::open(ctx.dev_path))?;
    ensure!(
        ctx_err("QUERY on the second file", second.ram_owner(abi::RAM_QUERY))? == abi::RAM_MINE,
        "the claiming process's second file does not see the RAM as its own"
    );
    let path = ctx.dev_path.to_string();
    let mut child = Child::spawn(|_| {
        let Ok(d) = Device::open(&path) else { return 2 };
        if d.ram_owner(abi::RAM_QUERY).ok() != Some(abi::RAM_OTHER) {
            return 3;
        }
        let t0 = Instant::now();
        match d.ram_owner(abi::RAM_CLAIM) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {}
            _ => return 4,
        }
        if t0.elapsed() > Duration::from_secs(1) {
            return 5;
        }
        0
    })?;
    let code = child.reap()?;
    ensure!(
        code == 0,
        "other process (open 2, QUERY not RAM_OTHER 3, CLAIM not EBUSY 4, CLAIM waited 5) exited with {code}"
    );
    give_back(&second)?;
    ensure!(
        ctx_err("QUERY after RELEASE", ctx.dev.ram_owner(abi::RAM_QUERY))? == abi::RAM_FREE,
        "RELEASE through the second file did not free the RAM"
    );
    for (what, a) in [
        (
            "op 3",
            abi::RamOwner {
                op: 3,
                ..Default::default()
            },
        ),
        (
            "reserved word set",
            abi::RamOwner {
                op: abi::RAM_QUERY,
                reserved: [0, 0, 1],
                ..Default::default()
            },
        ),
    ] {
        let mut a = a;
        expect_errno(
            &format!("RAM_OWNER {what}"),
            ctx.dev.ram_owner_raw(&mut a),
            libc::EINVAL,
        )?;
    }
    Ok(())
}

/// NVIDIA's reference flow in a process of its own, which never heard of IOC_RAM_OWNER: one file, H2C,
/// C2H, H2C2H and CARD_INFO work as before, and its close frees the RAM for the next holder.
fn reference_flow_in_a_fresh_process(ctx: &mut Ctx) -> TestResult {
    give_back(ctx.dev)?;
    let path = ctx.dev_path.to_string();
    let bytes = pattern(&mut ctx.rng);
    let mut back = vec![0u8; RAM];
    let mut rt = vec![0u8; 8192];
    let mut child = Child::spawn(|_| {
        let Ok(d) = Device::open(&path) else { return 2 };
        if d.card_info().map(|i| i.fpga_ram_size).ok() != Some(FPGA_RAM_SIZE) {
            return 3;
        }
        if d.h2c(&bytes, 0).is_err() || d.c2h(&mut back, 0).is_err() || back != bytes {
            return 4;
        }
        if d.h2c2h(&bytes[..8192], &mut rt).is_err() || rt[..] != bytes[..8192] {
            return 5;
        }
        0
    })?;
    let code = child.reap()?;
    ensure!(
        code == 0,
        "reference flow (open 2, CARD_INFO 3, H2C/C2H 4, H2C2H 5) exited with {code}"
    );
    let st = ctx_err(
        "QUERY after the holder exited",
        ctx.dev.ram_owner(abi::RAM_QUERY),
    )?;
    ensure!(st == abi::RAM_FREE, "the holder's exit left state {st}");
    Ok(())
}
