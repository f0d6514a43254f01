//! The PicoEVB driver's logic, in plain `core` Rust: descriptor chains, segment coalescing, ioctl argument
//! checks, engine-status decoding, the registration cache's policy and sequences and the full-duplex round trip's schedule.
//!
//! The kernel module (`kmod/picoevb`) compiles these very files with `#[path]` as modules of its own crate
//! root, so they must stay `core`-only, compile with the kernel's rustc (1.85) and edition (2021), and name
//! their siblings through `crate::` paths that exist in both crates: `crate::{errno, segments, chain,
//! request, status, cache_policy, cache_table, admission, pipeline, round_trip, ram_owner, engine, gate, ioctl, interrupt, probe, removal, surface_life,
//! surface_pin, stream_ctl, stream_ring, stream_ring_run}` plus the shared definitions `crate::{abi, channel,
//! xdma, pci, stream}` re-exported below. `stream_ring` is the stream ring's protocol, which the driver's
//! side of a ring (`stream_ring_run`, IOC_STREAM_RING) and user space share.
//! Keeping the logic here, unit-tested on the host, is what makes a later 5.10 (C-glue) build of the same
//! logic possible.
#![no_std]

pub use picoevb_abi as abi;
pub use picoevb_regs::{channel, pci, stream, xdma};

pub mod admission;
pub mod cache_policy;
pub mod cache_table;
pub mod chain;
pub mod engine;
pub mod errno;
pub mod gate;
pub mod interrupt;
pub mod ioctl;
pub mod pipeline;
pub mod probe;
pub mod ram_owner;
#[cfg(test)]
mod regs_fake;
pub mod removal;
pub mod request;
pub mod round_trip;
pub mod segments;
pub mod status;
pub mod stream_ctl;
pub mod stream_ring;
pub mod stream_ring_run;
pub mod surface_life;
pub mod surface_pin;
