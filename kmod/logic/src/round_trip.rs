//! The round trip (H2C2H) as a full-duplex pipeline on both engines, once for both kernels: the schedule is
//! [`Pipeline`]'s; this runs its steps. Each step starts H2C of one chunk and C2H of the previous one on
//! disjoint halves of the card RAM and ends both before the next step reuses a half. H2C (the slower
//! direction of the link: read requests and completions against posted writes) is started first; C2H is
//! waited for and judged first. Which run is polled and which sleeps on its interrupt is
//! [`pipeline::wakes`]'s. A run is always ended, by its judgement or by a cancel, before an error returns:
//! no engine touches the caller's pages after the request.

use crate::errno::Errno;
use crate::pipeline::{self, Move, Pipeline, Step, Wake};

/// Chunks are whole pages, so no TLP or descriptor is split needlessly.
pub const CHUNK_ALIGN: u64 = 4096;

/// One engine's side of a round trip: its host buffer and its descriptor table, held by the caller.
pub trait Side {
    /// A started chain, ended by [`Started::finish`] or [`Started::cancel`].
    type Run<'a>: Started
    where
        Self: 'a;
    /// Starts a chain of up to `len` bytes between the host buffer from its byte `host_off` (each side's
    /// chains start where its last one ended) and card RAM at `ram`: as many as the table holds.
    fn start(
        &mut self,
        host_off: u64,
        ram: u64,
        len: u64,
        wake: Wake,
    ) -> Result<Self::Run<'_>, Errno>;
}

/// A started chain.
pub trait Started {
    /// Waits until it ended, its timeout passed, removal woke the waiter or a fatal signal came.
    fn wait(&mut self);
    /// Judges it (after `wait`) and ends it: the bytes it moved.
    fn finish(self) -> Result<u64, Errno>;
    /// Stops it without judging it (the request failed elsewhere); the card is wedged if it cannot be
    /// shown idle.
    fn cancel(self);
}

/// Copies `len` bytes from the host buffer of `h2c` through `ram` bytes of card RAM to the host buffer of
/// `c2h`. The caller holds both engines (H2C first, the lock order of every path).
pub fn run<H: Side, C: Side>(h2c: &mut H, c2h: &mut C, len: u64, ram: u64) -> Result<(), Errno> {
    let plan = Pipeline::new(len, ram, CHUNK_ALIGN)?;
    for step in plan.iter() {
        run_step(h2c, c2h, step)?;
    }
    Ok(())
}

/// What is left of one direction's move in a step.
#[derive(Clone, Copy)]
struct Left {
    offset: u64,
    ram: u64,
    len: u64,
}

impl Left {
    fn of(m: Option<Move>) -> Self {
        m.map_or(
            Left {
                offset: 0,
                ram: 0,
                len: 0,
            },
            |m| Left {
                offset: m.offset,
                ram: m.ram_addr,
                len: m.len,
            },
        )
    }

    /// The next chain moved `n` bytes.
    fn advance(&mut self, n: u64) -> Result<(), Errno> {
        // A run never moves more than it was asked, nor nothing (it would never end the step).
        if n == 0 || n > self.len {
            return Err(Errno::EIO);
        }
        self.offset += n;
        self.ram += n;
        self.len -= n;
        Ok(())
    }
}

/// One step; a move needing more descriptors than a table holds runs as several chains, ended in pairs.
fn run_step<H: Side, C: Side>(h2c: &mut H, c2h: &mut C, step: Step) -> Result<(), Errno> {
    let (mut h, mut c) = (Left::of(step.h2c), Left::of(step.c2h));
    while h.len > 0 || c.len > 0 {
        let (h_wake, c_wake) = pipeline::wakes(h.len, c.len);
        let h_run = match h.len {
            0 => None,
            n => Some(h2c.start(h.offset, h.ram, n, h_wake)?),
        };
        let c_run = match c.len {
            0 => None,
            n => match c2h.start(c.offset, c.ram, n, c_wake) {
                Ok(run) => Some(run),
                Err(e) => {
                    if let Some(run) = h_run {
                        run.cancel();
                    }
                    return Err(e);
                }
            },
        };
        let (hb, cb) = end_both(h_run, c_run)?;
        // A side ran this round exactly when it had bytes left.
        if h.len > 0 {
            h.advance(hb)?;
        }
        if c.len > 0 {
            c.advance(cb)?;
        }
    }
    Ok(())
}

/// Waits for and ends both runs, C2H first (it ends first; when chunks are large its interrupt is the one
/// armed). If one fails the other is still ended (cancelled, if not yet judged) before the first error
/// returns.
fn end_both<H: Started, C: Started>(h: Option<H>, c: Option<C>) -> Result<(u64, u64), Errno> {
    let cb = match c {
        Some(mut run) => {
            run.wait();
            match run.finish() {
                Ok(n) => n,
                Err(e) => {
                    if let Some(h) = h {
                        h.cancel();
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

#[cfg(test)]
#[path = "round_trip_tests.rs"]
mod tests;
