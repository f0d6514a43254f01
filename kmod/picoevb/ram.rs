// SPDX-License-Identifier: GPL-2.0

//! The card RAM's ownership (`ram_owner`, decided by the shared logic): whose transfers may use the RAM,
//! and the scrub that zeroes it before a new owner's first use.

use crate::errors::kerr;
use crate::ram_owner::{Grant, Member, Op, RamOwner};
use crate::segments::Segment;
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
struct State {
    owner: RamOwner,
    zeros: Option<CoherentAllocation<u8>>,
}

/// The card RAM of `size` bytes as its owners see it. The scrub runs through `Scrub`, which the card
/// supplies (one H2C over the whole RAM), so nothing here reaches back into the card.
#[pin_data]
pub(crate) struct Ram {
    #[pin]
    state: Mutex<State>,
    size: u64,
}

/// One H2C of the given segments to RAM offset 0 over the whole RAM (the card's engine, under its gate).
pub(crate) type Scrub<'a> = &'a dyn Fn(&[Segment], u64) -> Result;

/// A request's use of the RAM, admitted by `Ram::begin`; ends when dropped.
pub(crate) struct RamUse<'a> {
    ram: &'a Ram,
}

impl Drop for RamUse<'_> {
    fn drop(&mut self) {
        self.ram.state.lock().owner.end();
    }
}

/// The calling process (thread-group id).
fn caller() -> u32 {
    kernel::current!().group_leader().pid() as u32
}

impl Ram {
    pub(crate) fn new(dev: &Device<Bound>, size: u64) -> Result<impl PinInit<Ram>> {
        let zeros =
            CoherentAllocation::<u8>::alloc_coherent(dev, PAGE_SIZE, GFP_KERNEL | __GFP_ZERO)?;
        Ok(pin_init!(Ram {
            state <- new_mutex!(State {
                owner: RamOwner::new(),
                zeros: Some(zeros),
            }),
            size,
        }))
    }

    /// Its size in bytes.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Admits a transfer through the file whose membership is `member` to the RAM: EBUSY while another
    /// holder owns it; a new owner's first use zeroes it first. The caller holds the card's gate.
    pub(crate) fn begin(&self, member: &Mutex<Member>, scrub: Scrub<'_>) -> Result<RamUse<'_>> {
        let mut m = member.lock();
        let mut st = self.state.lock();
        let grant = st.owner.begin(&mut m, caller()).map_err(kerr)?;
        self.scrub_if(&mut st, grant, scrub)?;
        Ok(RamUse { ram: self })
    }

    /// IOC_RAM_OWNER: does `op` and returns the state the caller sees afterwards. A claim scrubs, so its
    /// caller holds the card's gate for it.
    pub(crate) fn control(&self, member: &Mutex<Member>, op: Op, scrub: Scrub<'_>) -> Result<u32> {
        let mut m = member.lock();
        let pid = caller();
        match op {
            Op::Query => {}
            Op::Claim => {
                let mut st = self.state.lock();
                let grant = st.owner.claim(&mut m, pid).map_err(kerr)?;
                self.scrub_if(&mut st, grant, scrub)?;
            }
            Op::Release => self.state.lock().owner.release(&m, pid).map_err(kerr)?,
        }
        Ok(self.state.lock().owner.state(&m, pid))
    }

    /// The file closes: the RAM is free once its owner's last file is closed.
    pub(crate) fn close(&self, member: &Mutex<Member>) {
        // The file's lock first, then the card's: the order every path takes them in.
        let mut m = member.lock();
        self.state.lock().owner.close(&mut m);
    }

    /// At removal, after the drain: frees the scrub's page (a later claim fails at the gate).
    pub(crate) fn release_zeros(&self) {
        drop(self.state.lock().zeros.take());
    }

    /// Scrubs if `grant` says so, still under the lock, so nothing of the new owner runs before.
    fn scrub_if(&self, st: &mut State, grant: Grant, scrub: Scrub<'_>) -> Result {
        if grant == Grant::Go {
            return Ok(());
        }
        let r = self.scrub(st, scrub);
        st.owner.scrubbed(r.is_ok());
        r
    }

    /// One H2C of zeros over the whole RAM: every page of it from the same zeroed page.
    fn scrub(&self, st: &State, scrub: Scrub<'_>) -> Result {
        let zeros = st.zeros.as_ref().ok_or(ENODEV)?;
        let page = PAGE_SIZE as u64;
        let n = self.size.div_ceil(page) as usize;
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
        scrub(&segs, self.size)
    }
}
