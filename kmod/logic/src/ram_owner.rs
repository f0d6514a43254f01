//! Who may use the card RAM: isolation between the holders of one card.
//!
//! The RAM has at most one owner at a time: a set of open files. A DMA request that touches the RAM (H2C,
//! C2H, H2C2H) or an explicit CLAIM (`IOC_RAM_OWNER`) through a file takes the RAM when it is free; the
//! calling process becomes the claimer and the file a member. While it is owned, a request through a
//! member file goes ahead (whoever calls: fork and fd passing share the open file, and with it what it may
//! see), and so does one from the claiming process through another of its files, which then becomes a
//! member: one process's files share the RAM, as the reference driver's single-holder use does. Anything
//! else fails with EBUSY. The RAM is free again when the last member file closes, or on RELEASE through a
//! member file or by the claimer, and it is dirty from then on: the next owner's first use scrubs it
//! (zeroes all of it) before anything of that owner runs, so no owner ever sees another's bytes. It starts
//! dirty: the card may hold what an earlier driver load left.
//!
//! The glue keeps one `RamOwner` per card under a mutex and one `Member` per open file, touched only under
//! that mutex. The mutex is held from a `ScrubFirst` answer until `scrubbed`, so nothing (the new owner's
//! other threads included) runs on the RAM before it is clean. Processes are named by their thread-group
//! id; a file's own membership is what protects it, so an id reused after its process exited matters only
//! while member files of the dead process are still open elsewhere.

use crate::abi;
use crate::errno::Errno;

/// An open file's part in the RAM's ownership: the ownership generation it is a member of (0: none).
/// Transparent: the 5.10 glue keeps it as a `u64`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Member(u64);

/// What a caller granted the RAM must do before using it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Go ahead.
    Go,
    /// Zero the whole RAM first, then report with `scrubbed` (still under the mutex).
    ScrubFirst,
}

/// The card RAM's ownership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RamOwner {
    /// Generation of the current ownership; bumped whenever the RAM is freed, which makes every
    /// membership of the old one stale.
    generation: u64,
    /// The claiming process, while owned.
    claimer: Option<u32>,
    /// Open member files.
    members: u32,
    /// Requests of the owner in flight on the RAM.
    active: u32,
    /// Whether the RAM may hold an earlier owner's bytes.
    dirty: bool,
}

impl Default for RamOwner {
    fn default() -> Self {
        Self::new()
    }
}

impl RamOwner {
    /// Free and dirty.
    pub const fn new() -> Self {
        Self {
            generation: 1,
            claimer: None,
            members: 0,
            active: 0,
            dirty: true,
        }
    }

    fn is_member(&self, m: &Member) -> bool {
        self.claimer.is_some() && m.0 == self.generation
    }

    /// Takes or joins the ownership for file `m` in process `pid`.
    fn join(&mut self, m: &mut Member, pid: u32) -> Result<Grant, Errno> {
        if self.is_member(m) {
            return Ok(Grant::Go);
        }
        match self.claimer {
            Some(c) if c != pid => Err(Errno::EBUSY),
            Some(_) => {
                m.0 = self.generation;
                self.members += 1;
                Ok(Grant::Go)
            }
            None => {
                self.claimer = Some(pid);
                m.0 = self.generation;
                self.members = 1;
                Ok(if self.dirty {
                    Grant::ScrubFirst
                } else {
                    Grant::Go
                })
            }
        }
    }

    /// A request through file `m` by process `pid` that touches the RAM. On `Ok` the caller must call
    /// `end` once the request is over (after `scrubbed`, if asked to scrub).
    pub fn begin(&mut self, m: &mut Member, pid: u32) -> Result<Grant, Errno> {
        let g = self.join(m, pid)?;
        self.active += 1;
        Ok(g)
    }

    /// A request that `begin` admitted is over.
    pub fn end(&mut self) {
        self.active -= 1;
    }

    /// CLAIM through file `m` by process `pid`: as `begin`, but no request follows (no `end`).
    pub fn claim(&mut self, m: &mut Member, pid: u32) -> Result<Grant, Errno> {
        self.join(m, pid)
    }

    /// The scrub a `ScrubFirst` asked for is done (`ok`) or failed: then the RAM is free again, still
    /// dirty, and the request or claim that asked must fail (without `end`).
    pub fn scrubbed(&mut self, ok: bool) {
        if ok {
            self.dirty = false;
        } else {
            self.free();
        }
    }

    fn free(&mut self) {
        self.generation += 1;
        self.claimer = None;
        self.members = 0;
        self.active = 0;
        self.dirty = true;
    }

    /// RELEASE through file `m` by process `pid`: frees the RAM if it is theirs (a member file, or the
    /// claimer), EBUSY if another owner has it or one of the owner's requests is still in flight. Free
    /// already: nothing to do.
    pub fn release(&mut self, m: &Member, pid: u32) -> Result<(), Errno> {
        match self.claimer {
            None => Ok(()),
            Some(c) if (c == pid || self.is_member(m)) && self.active == 0 => {
                self.free();
                Ok(())
            }
            Some(_) => Err(Errno::EBUSY),
        }
    }

    /// File `m` closes (no request of it can be in flight): the RAM is freed with its last member.
    pub fn close(&mut self, m: &mut Member) {
        if self.is_member(m) {
            self.members -= 1;
            if self.members == 0 {
                self.free();
            }
        }
        *m = Member::default();
    }

    /// `RAM_STATE_*` as file `m` in process `pid` sees it.
    pub fn state(&self, m: &Member, pid: u32) -> u32 {
        match self.claimer {
            None => abi::RAM_FREE,
            Some(c) if c == pid || self.is_member(m) => abi::RAM_MINE,
            Some(_) => abi::RAM_OTHER,
        }
    }
}

/// A checked `IOC_RAM_OWNER` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Only read the state.
    Query,
    /// Take the RAM now (fails with EBUSY if another owner has it; never waits).
    Claim,
    /// Give it back.
    Release,
}

/// Checks an `IOC_RAM_OWNER` argument: a known op, reserved fields zero.
pub fn parse(req: &abi::RamOwner) -> Result<Op, Errno> {
    if req.reserved != [0; 3] {
        return Err(Errno::EINVAL);
    }
    match req.op {
        abi::RAM_QUERY => Ok(Op::Query),
        abi::RAM_CLAIM => Ok(Op::Claim),
        abi::RAM_RELEASE => Ok(Op::Release),
        _ => Err(Errno::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u32 = 100;
    const B: u32 = 200;

    /// A fresh owner whose RAM is clean and free (the probe-time scrub already done by someone).
    fn clean() -> RamOwner {
        let mut o = RamOwner::new();
        let mut m = Member::default();
        assert_eq!(o.claim(&mut m, 1), Ok(Grant::ScrubFirst));
        o.scrubbed(true);
        o.close(&mut m);
        o.dirty = false;
        o
    }

    #[test]
    fn first_use_scrubs_then_goes() {
        let mut o = RamOwner::new();
        let mut a = Member::default();
        assert_eq!(o.begin(&mut a, A), Ok(Grant::ScrubFirst));
        o.scrubbed(true);
        o.end();
        assert_eq!(o.begin(&mut a, A), Ok(Grant::Go));
        o.end();
    }

    #[test]
    fn another_process_is_busy_for_every_use() {
        let mut o = RamOwner::new();
        let (mut a, mut b) = (Member::default(), Member::default());
        assert_eq!(o.begin(&mut a, A), Ok(Grant::ScrubFirst));
        o.scrubbed(true);
        o.end();
        assert_eq!(o.begin(&mut b, B), Err(Errno::EBUSY));
        assert_eq!(o.claim(&mut b, B), Err(Errno::EBUSY));
        assert_eq!(o.release(&b, B), Err(Errno::EBUSY));
        assert_eq!(o.state(&b, B), abi::RAM_OTHER);
        assert_eq!(o.state(&a, A), abi::RAM_MINE);
        // The refusals made B no member.
        assert_eq!(b, Member::default());
    }

    #[test]
    fn the_claimers_other_files_join_and_the_last_close_frees() {
        let mut o = clean();
        let (mut a1, mut a2, mut b) = (Member::default(), Member::default(), Member::default());
        assert_eq!(o.begin(&mut a1, A), Ok(Grant::Go));
        o.end();
        assert_eq!(o.begin(&mut a2, A), Ok(Grant::Go));
        o.end();
        o.close(&mut a1);
        assert_eq!(o.begin(&mut b, B), Err(Errno::EBUSY));
        o.close(&mut a2);
        assert_eq!(o.state(&b, B), abi::RAM_FREE);
        assert_eq!(
            o.begin(&mut b, B),
            Ok(Grant::ScrubFirst),
            "freed RAM is dirty"
        );
    }

    #[test]
    fn a_member_file_works_from_any_process() {
        let mut o = clean();
        let mut a = Member::default();
        o.claim(&mut a, A).unwrap();
        // A forked child or an fd passed on: the same open file.
        assert_eq!(o.begin(&mut a, B), Ok(Grant::Go));
        o.end();
        assert_eq!(o.state(&a, B), abi::RAM_MINE);
        // ...but a file of its own is another holder's.
        let mut b = Member::default();
        assert_eq!(o.begin(&mut b, B), Err(Errno::EBUSY));
    }

    #[test]
    fn release_frees_and_dirties_and_stales_every_membership() {
        let mut o = clean();
        let (mut a1, mut a2, mut b) = (Member::default(), Member::default(), Member::default());
        o.claim(&mut a1, A).unwrap();
        o.claim(&mut a2, A).unwrap();
        assert_eq!(o.release(&a2, A), Ok(()));
        assert_eq!(o.state(&a1, A), abi::RAM_FREE);
        assert_eq!(o.claim(&mut b, B), Ok(Grant::ScrubFirst));
        o.scrubbed(true);
        // A's old files are no members of B's ownership; closing them changes nothing.
        assert_eq!(o.begin(&mut a1, A), Err(Errno::EBUSY));
        o.close(&mut a1);
        o.close(&mut a2);
        assert_eq!(o.state(&b, B), abi::RAM_MINE);
        o.close(&mut b);
        assert_eq!(o.state(&b, B), abi::RAM_FREE);
    }

    #[test]
    fn release_waits_for_requests_in_flight() {
        let mut o = clean();
        let mut a = Member::default();
        assert_eq!(o.begin(&mut a, A), Ok(Grant::Go));
        assert_eq!(o.release(&a, A), Err(Errno::EBUSY));
        o.end();
        assert_eq!(o.release(&a, A), Ok(()));
        assert_eq!(o.release(&a, A), Ok(()), "free already");
    }

    #[test]
    fn a_failed_scrub_leaves_it_free_and_dirty() {
        let mut o = RamOwner::new();
        let (mut a, mut b) = (Member::default(), Member::default());
        assert_eq!(o.begin(&mut a, A), Ok(Grant::ScrubFirst));
        o.scrubbed(false);
        assert_eq!(o.state(&a, A), abi::RAM_FREE);
        assert_eq!(o.begin(&mut b, B), Ok(Grant::ScrubFirst));
        o.scrubbed(true);
        o.end();
        // A's membership of the failed generation is stale: closing it does not free B's.
        o.close(&mut a);
        assert_eq!(o.state(&b, B), abi::RAM_MINE);
    }

    #[test]
    fn clean_free_ram_is_not_scrubbed_again() {
        let mut o = clean();
        let mut a = Member::default();
        assert_eq!(o.claim(&mut a, A), Ok(Grant::Go));
    }

    #[test]
    fn parse_checks_op_and_reserved() {
        let mut r = abi::RamOwner {
            op: abi::RAM_CLAIM,
            ..Default::default()
        };
        assert_eq!(parse(&r), Ok(Op::Claim));
        r.op = 3;
        assert_eq!(parse(&r), Err(Errno::EINVAL));
        r.op = abi::RAM_QUERY;
        r.reserved[2] = 1;
        assert_eq!(parse(&r), Err(Errno::EINVAL));
    }
}
