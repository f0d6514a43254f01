// SPDX-License-Identifier: GPL-2.0

//! One chain on one engine, from Run to the proof that the engine is idle again: the shared protocol's
//! [`engine::Run`] plus what the kernel side must hold meanwhile (the descriptor table), and a drop that
//! ends a run nobody ended (an early return) through the protocol's cancel.

use crate::engine::{kerr, Platform};
use crate::engine_logic as engine;
use crate::xdma::Descriptor;
use kernel::{dma::CoherentAllocation, prelude::*};

pub(crate) use crate::pipeline::Wake;

/// A chain started on an engine. It holds the engine's descriptor table until it is finished, and every
/// way out goes through the shared protocol: [`Run::finish`], [`Run::cancel`], or the drop of a run
/// neither reached, which cancels it.
pub(crate) struct Run<'a> {
    p: Platform<'a>,
    _table: &'a mut CoherentAllocation<Descriptor>,
    run: Option<engine::Run>,
}

impl<'a> Run<'a> {
    /// A chain `Engine::start` has just started, holding the engine's `table`.
    pub(crate) fn new(
        p: Platform<'a>,
        table: &'a mut CoherentAllocation<Descriptor>,
        run: engine::Run,
    ) -> Self {
        Self {
            p,
            _table: table,
            run: Some(run),
        }
    }

    /// Waits until the chain ended or its timeout passed (or removal woke us, or a fatal signal came).
    pub(crate) fn wait(&mut self) {
        if let Some(run) = self.run.as_mut() {
            run.wait(&self.p);
        }
    }

    /// Judges the chain (after [`Run::wait`]) and ends the run: the bytes moved, or why not.
    pub(crate) fn finish(mut self) -> Result<u64> {
        let run = self.run.take().ok_or(EINVAL)?;
        run.finish(&self.p).map_err(kerr)
    }

    /// Stops the run without judging it (the request failed elsewhere): Ok if the engine was shown idle.
    pub(crate) fn cancel(mut self) -> Result {
        let run = self.run.take().ok_or(EINVAL)?;
        run.cancel(&self.p).map_err(kerr)
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            let _ = run.cancel(&self.p);
        }
    }
}
