//! The lifecycle of pinned GPU memory: its memory going away under a handle (munmap), files closed with
//! surfaces pinned, processes killed in the middle of DMA, concurrent users, pin/unpin churn; and, last of
//! the whole suite, the kernel's own counters (DMA-API debug, pinned pages) back where they started.
//! The harness adds its checks for the whole boot: no splat (KASAN, lockdep, DMA-API), no kmemleak report.
//! One file per topic: `memory` (munmap, close), `kill` (processes killed mid-DMA), `concurrency` (threads,
//! churn), `counters` (the suite's last test).
//!
//! Tests that count pinned pages exactly while their files are open turn those files' registration cache
//! off (host buffers would stay pinned in it) and flush the suite's shared file first; the concurrency test
//! keeps the cache on, it compares counts only after closing its files.

mod concurrency;
mod counters;
mod kill;
mod memory;
mod reclaim;
mod revoke;

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use picoevb_abi as abi;
use picoevb_regs::pci::FPGA_RAM_SIZE;

use super::cuda::{
    Side, cuda, dma_refuses, flavour, h2c2h_sides, host_to_surface, open, pin, pin_range, surface,
    surface_to_host, unpin,
};
use super::regcache::{open_uncached, quiesce};
use super::{
    Ctx, Needs, Test, TestResult, card_state, ctx_err, ensure, expect_errno, h2c2h_check, pins_are,
    sanity, test,
};
use crate::buf::compare;
use crate::dev::Device;
use crate::kstat;
use crate::rng::Rng;
use crate::surface::{Flavour, ISOLATION};

const RAM: usize = FPGA_RAM_SIZE as usize;
/// Surfaces a killed child pins.
const CHILD_SURFACES: usize = 8;
/// Size of each of them, and of its H2C2H.
const CHILD_SURFACE: usize = 1 << 20;
/// Threads of the concurrency test; thread t uses file t % 2 and FPGA RAM slice t.
const THREADS: usize = 4;
/// Operation kinds of the concurrency test.
const OPS: [&str; 5] = [
    "host h2c2h",
    "surface h2c2h",
    "surface->fpga->host",
    "host->fpga->surface",
    "pin+dma+unpin",
];
/// CPU page: what FOLL_PIN counts.
const PAGE: usize = 4096;
/// How long the kernel may take to finish deferred unpinning (work items) before counters must be back.
const SETTLE: Duration = Duration::from_secs(5);

pub fn register(v: &mut Vec<Test>) {
    v.push(cuda(
        "lifecycle::munmap_pinned_surface",
        memory::munmap_pinned,
    ));
    v.push(cuda(
        "lifecycle::close_with_pins_and_reopen",
        memory::close_with_pins,
    ));
    v.push(cuda("lifecycle::kill9_mid_dma", |ctx| {
        kill::kill9_loop(ctx, 5)
    }));
    v.push(
        cuda("lifecycle::reaper_mid_dma", |ctx| {
            kill::reaper_mid_dma(ctx, 6)
        })
        .needs(Needs::JetsonReaper),
    );
    v.push(
        cuda("lifecycle::kill9_loop_long", |ctx| {
            kill::kill9_loop(ctx, 200)
        })
        .into_extended(),
    );
    v.push(cuda("lifecycle::threads_mixed_dma", |ctx| {
        concurrency::threads_mixed(ctx, Duration::from_secs(5))
    }));
    v.push(
        cuda("lifecycle::threads_mixed_dma_long", |ctx| {
            concurrency::threads_mixed(ctx, Duration::from_secs(60))
        })
        .into_extended(),
    );
    v.push(cuda("lifecycle::pin_unpin_churn", |ctx| {
        concurrency::churn(ctx, 500)
    }));
    v.push(cuda("lifecycle::callback_right_after_pin", |ctx| {
        revoke::callback_right_after_pin(ctx, 1)
    }));
    v.push(
        cuda("lifecycle::callback_right_after_pin_long", |ctx| {
            revoke::callback_right_after_pin(ctx, 20)
        })
        .into_extended(),
    );
    v.push(cuda(
        "lifecycle::callbacks_in_reclaim_context",
        reclaim::callbacks_in_reclaim,
    ));
    v.push(cuda(
        "lifecycle::dma_uses_in_reclaim_context",
        reclaim::dma_uses_in_reclaim,
    ));
    v.push(cuda("lifecycle::device_still_works", sanity));
    // Runs with or without a provider: host DMA pins and maps too.
    v.push(test(
        "lifecycle::no_dma_api_errors",
        counters::counters_back_to_baseline,
    ));
}
