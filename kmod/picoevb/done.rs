// SPDX-License-Identifier: GPL-2.0

//! An engine's completion: signalled by the interrupt handler (or by removal), waited on with a timeout,
//! re-armed before each run.
//!
//! Not 6.18's `kernel::sync::Completion`: it offers `complete_all` and an untimed
//! `wait_for_completion` only, while a run needs `complete` (one wake-up, from hard IRQ context),
//! `wait_for_completion_killable_timeout` (a lost interrupt must not hang the request, a kill must end it) and `reinit_completion`
//! (one completion per engine, reused for every run). The three are `static inline` or take jiffies, so
//! helpers.c wraps them.

use crate::engine_logic::Waited;
use crate::ffi;
use kernel::{bindings, prelude::*, types::Opaque};

/// A `struct completion` signalled by the interrupt handler.
#[pin_data]
pub(crate) struct Done {
    #[pin]
    inner: Opaque<bindings::completion>,
}

// SAFETY: a completion is designed to be signalled and waited on from any context and thread.
unsafe impl Send for Done {}
// SAFETY: as above.
unsafe impl Sync for Done {}

impl Done {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inner <- Opaque::ffi_init(|slot: *mut bindings::completion| {
                // SAFETY: `slot` points to an uninitialised completion we own.
                unsafe { bindings::init_completion(slot) };
            }),
        })
    }
    pub(crate) fn reinit(&self) {
        // SAFETY: `inner` is an initialised completion; callers hold the engine lock, so nobody waits on it.
        unsafe { ffi::pevb_completion_reinit(self.inner.get()) };
    }
    pub(crate) fn complete(&self) {
        // SAFETY: `inner` is an initialised completion; complete() is safe from hard IRQ context.
        unsafe { ffi::pevb_completion_complete(self.inner.get()) };
    }
    /// Waits up to `ms` for the completion; a fatal signal ends the wait early (the process is dying).
    pub(crate) fn wait(&self, ms: u32) -> Waited {
        // SAFETY: `inner` is an initialised completion that outlives the wait.
        match unsafe { ffi::pevb_completion_wait_ms(self.inner.get(), ms) } {
            n if n > 0 => Waited::Completed,
            0 => Waited::TimedOut,
            _ => Waited::Killed,
        }
    }
}
