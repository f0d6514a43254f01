// SPDX-License-Identifier: GPL-2.0

//! The card RAM's ownership (`ram_owner`, decided by the shared logic): whose transfers may use the RAM,
//! and the scrub that zeroes it before a new owner's first use.

use crate::card::Card;
use crate::engine::kerr;
use crate::ram_owner::{Grant, Member, Op, RamOwner};
use crate::segments::Segment;
use crate::xdma::Dir;
use kernel::{
    device::{Bound, Device},
    dma::CoherentAllocation,
    new_mutex,
    page::PAGE_SIZE,
    prelude::*,
    sync::Mutex,
};

/// The ownership, and a zeroed page the scrub copies from. The page goes at removal (`Card::remove`):
/// no DMA allocation of the card outlives its binding.
pub(crate) struct Ram {
    owner: RamOwner,
    zeros: Option<CoherentAllocation<u8>>,
}

impl Ram {
    pub(crate) fn new(dev: &Device<Bound>) -> Result<impl PinInit<Mutex<Ram>>> {
        let zeros =
            CoherentAllocation::<u8>::alloc_coherent(dev, PAGE_SIZE, GFP_KERNEL | __GFP_ZERO)?;
        Ok(new_mutex!(Ram {
            owner: RamOwner::new(),
            zeros: Some(zeros),
        }))
    }
}

/// A request's use of the RAM, admitted by `Card::ram_begin`; ends when dropped.
pub(crate) struct RamUse<'a> {
    card: &'a Card,
}

impl Drop for RamUse<'_> {
    fn drop(&mut self) {
        self.card.ram.lock().owner.end();
    }
}

/// The calling process (thread-group id).
fn caller() -> u32 {
    kernel::current!().group_leader().pid() as u32
}

impl Card {
    /// Admits a transfer through the file whose membership is `member` to the RAM: EBUSY while another
    /// holder owns it; a new owner's first use zeroes it first. The caller holds the gate (`begin`).
    pub(crate) fn ram_begin(&self, member: &Mutex<Member>) -> Result<RamUse<'_>> {
        let mut m = member.lock();
        let mut ram = self.ram.lock();
        let grant = ram.owner.begin(&mut m, caller()).map_err(kerr)?;
        self.scrub_if(&mut ram, grant)?;
        Ok(RamUse { card: self })
    }

    /// IOC_RAM_OWNER: does `op` and returns the state the caller sees afterwards.
    pub(crate) fn ram_control(&self, member: &Mutex<Member>, op: Op) -> Result<u32> {
        let mut m = member.lock();
        let pid = caller();
        match op {
            Op::Query => {}
            Op::Claim => {
                let _active = self.begin()?;
                let mut ram = self.ram.lock();
                let grant = ram.owner.claim(&mut m, pid).map_err(kerr)?;
                self.scrub_if(&mut ram, grant)?;
            }
            Op::Release => self.ram.lock().owner.release(&m, pid).map_err(kerr)?,
        }
        Ok(self.ram.lock().owner.state(&m, pid))
    }

    /// The file closes: the RAM is free once its owner's last file is closed.
    pub(crate) fn ram_close(&self, member: &Mutex<Member>) {
        // The file's lock first, then the card's: the order every path takes them in.
        let mut m = member.lock();
        self.ram.lock().owner.close(&mut m);
    }

    /// At removal, after the drain: frees the scrub's page (a later claim fails at the gate).
    pub(crate) fn ram_release_zeros(&self) {
        drop(self.ram.lock().zeros.take());
    }

    /// Scrubs if `grant` says so, still under the lock, so nothing of the new owner runs before.
    fn scrub_if(&self, ram: &mut Ram, grant: Grant) -> Result {
        if grant == Grant::Go {
            return Ok(());
        }
        let r = self.scrub(ram);
        ram.owner.scrubbed(r.is_ok());
        r
    }

    /// One H2C of zeros over the whole RAM: every page of it from the same zeroed page.
    fn scrub(&self, ram: &Ram) -> Result {
        let zeros = ram.zeros.as_ref().ok_or(ENODEV)?;
        let page = PAGE_SIZE as u64;
        let n = self.ram_size.div_ceil(page) as usize;
        let mut segs = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            segs.push(
                Segment {
                    addr: zeros.dma_handle(),
                    len: page,
                },
                GFP_KERNEL,
            )?;
        }
        self.one_way(Dir::H2c, &segs, 0, self.ram_size).map(|_| ())
    }
}
