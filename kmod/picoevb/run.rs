// SPDX-License-Identifier: GPL-2.0

//! One chain on one engine, from Run to the proof that the engine is idle again: how the waiter learns
//! it ended (interrupt or poll), and the only ways out, each through `Engine::finish` or `Engine::halt`.

use crate::chain;
use crate::done::Waited;
use crate::engine::{timeout_ms, Engine};
use crate::port::Port;
use crate::xdma::Descriptor;
use kernel::{dma::CoherentAllocation, prelude::*};

/// Status reads a polled run gets before its interrupt is armed: each is a non-posted round trip over the
/// link (about 1 us on Gen2 x1), so about 32 us of spinning, a third of a 32 KiB H2C.
pub(crate) const POLL_READS: u32 = 32;

pub(crate) use crate::pipeline::Wake;

/// A chain started on an engine. It holds the engine's descriptor table until it is finished, and every
/// way out goes through `Engine::finish`: [`Run::finish`], [`Run::cancel`], or the drop of a run neither
/// reached (an early return), which cancels it.
pub(crate) struct Run<'a> {
    engine: &'a Engine,
    port: &'a Port,
    _table: &'a mut CoherentAllocation<Descriptor>,
    chain: chain::Chain,
    wake: Wake,
    completed: bool,
    /// The wait ended on a fatal signal: the run is stopped unjudged (EINTR).
    killed: bool,
    finished: bool,
}

impl<'a> Run<'a> {
    /// A chain `Engine::start` has just started, holding the engine's `table`.
    pub(crate) fn new(
        engine: &'a Engine,
        port: &'a Port,
        table: &'a mut CoherentAllocation<Descriptor>,
        chain: chain::Chain,
        wake: Wake,
    ) -> Self {
        Self {
            engine,
            port,
            _table: table,
            chain,
            wake,
            completed: false,
            killed: false,
            finished: false,
        }
    }

    /// Waits until the chain ended or its timeout passed (or removal woke us, or a fatal signal came).
    pub(crate) fn wait(&mut self) {
        let e = self.engine;
        if self.wake == Wake::Poll {
            if e.poll(self.port) {
                self.completed = true;
                return;
            }
            if e.arm(self.port).is_err() {
                return;
            }
        }
        match e.done.wait(timeout_ms(self.chain.bytes)) {
            Waited::Completed => self.completed = true,
            Waited::TimedOut => {}
            Waited::Killed => self.killed = true,
        }
    }

    /// Judges the chain (after [`Run::wait`]) and ends the run: the bytes moved, or why not.
    pub(crate) fn finish(mut self) -> Result<u64> {
        // Killed: not judged (the process is dying); `Engine::finish` still stops the engine before the
        // caller may unpin, or wedges the card.
        let outcome = if self.killed {
            Err(if self.port.is_gone() { ENODEV } else { EINTR })
        } else {
            self.engine
                .outcome(self.port, &self.chain, self.completed, self.chain.bytes)
        };
        self.finished = true;
        self.engine.finish(self.port, outcome)?;
        Ok(self.chain.bytes)
    }

    /// Stops the run without judging it (the request failed elsewhere): Ok if the engine was shown idle.
    pub(crate) fn cancel(mut self) -> Result {
        self.finished = true;
        self.engine.halt(self.port)
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.engine.halt(self.port);
        }
    }
}
