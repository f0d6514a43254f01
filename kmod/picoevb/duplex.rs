// SPDX-License-Identifier: GPL-2.0

//! The round trip (H2C2H) as a full-duplex pipeline through the card RAM: the schedule is the shared
//! logic's (`pipeline.rs`); this runs its steps on the two engines.
//!
//! In a step where both engines run, H2C (the slower direction of the link: read requests and completions
//! against posted writes) is started first; the waiter learns C2H's end first, then H2C's. Which run is
//! polled (its write-back word watched, its interrupt armed only if the spin gives up) and which sleeps on
//! its interrupt is the logic's (`pipeline::wakes`): the PicoEVB's chunks are small enough to be polled,
//! so a round trip normally costs no interrupt, and at most `2n` for `n` chunks (every spin giving up).

use crate::engine::{Engine, Run, Table};
use crate::errors::kerr;
use crate::pipeline::{self, Move, Pipeline, Step};
use crate::port::Port;
use crate::segments::Cursor;
use kernel::prelude::*;

/// Chunks are whole pages (as the schedule plans them), so no TLP or descriptor is split needlessly.
const ALIGN: u64 = 4096;

/// The card as the pipeline sees it: both engines, the port they run on, the RAM they move through.
#[derive(Clone, Copy)]
pub(crate) struct Engines<'a> {
    pub(crate) h2c: &'a Engine,
    pub(crate) c2h: &'a Engine,
    pub(crate) port: &'a Port,
    pub(crate) ram_size: u64,
}

/// Copies `len` bytes from `src` through the card RAM to `dst`. The caller holds both engines' tables
/// (H2C first, the lock order of every path).
pub(crate) fn round_trip(
    e: Engines<'_>,
    h2c: &mut Table,
    c2h: &mut Table,
    src: &mut Cursor<'_>,
    dst: &mut Cursor<'_>,
    len: u64,
) -> Result {
    let plan = Pipeline::new(len, e.ram_size, ALIGN).map_err(kerr)?;
    for step in plan.iter() {
        run_step(e, h2c, c2h, src, dst, step)?;
    }
    Ok(())
}

/// What is left of one direction's move in a step.
#[derive(Clone, Copy)]
struct Left {
    ram: u64,
    len: u64,
}

impl Left {
    fn of(m: Option<Move>) -> Self {
        m.map_or(Self { ram: 0, len: 0 }, |m| Self {
            ram: m.ram_addr,
            len: m.len,
        })
    }
}

/// Runs one step: H2C of one chunk and C2H of the previous one at once, on disjoint halves of the RAM,
/// both ended before the next step reuses a half. A move needing more descriptors than a table holds
/// runs as several chains, each pair of them ended together.
fn run_step(
    e: Engines<'_>,
    h2c: &mut Table,
    c2h: &mut Table,
    src: &mut Cursor<'_>,
    dst: &mut Cursor<'_>,
    step: Step,
) -> Result {
    let (mut h, mut c) = (Left::of(step.h2c), Left::of(step.c2h));
    while h.len > 0 || c.len > 0 {
        let (h_wake, c_wake) = pipeline::wakes(h.len, c.len);
        let h_run = match h.len {
            0 => None,
            n => Some(e.h2c.start(e.port, h2c, src, h.ram, n, h_wake)?),
        };
        // An error here drops `h_run`, which stops H2C before we return.
        let c_run = match c.len {
            0 => None,
            n => Some(e.c2h.start(e.port, c2h, dst, c.ram, n, c_wake)?),
        };
        let (hb, cb) = end_both(h_run, c_run)?;
        h = Left {
            ram: h.ram + hb,
            len: h.len - hb,
        };
        c = Left {
            ram: c.ram + cb,
            len: c.len - cb,
        };
    }
    Ok(())
}

/// Waits for and ends both runs, C2H first (it ends first; when chunks are large its interrupt is the one
/// armed). If one fails the other is still ended (stopped, if not yet judged) before the first error is
/// returned: no engine touches the caller's pages after the request.
fn end_both(h: Option<Run<'_>>, c: Option<Run<'_>>) -> Result<(u64, u64)> {
    let cb = match c {
        Some(mut run) => {
            run.wait();
            match run.finish() {
                Ok(n) => n,
                Err(e) => {
                    if let Some(h) = h {
                        // Wedges the card if H2C cannot be stopped; the C2H error is the one reported.
                        let _ = h.cancel();
                    }
                    return Err(e);
                }
            }
        }
        None => 0,
    };
    let hb = match h {
        Some(mut run) => {
            run.wait();
            run.finish()?
        }
        None => 0,
    };
    Ok((hb, cb))
}
