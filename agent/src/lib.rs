//! gdr-agent: brings PicoEVB cards to a known bitstream, proves them with a loopback DMA and serves them
//! to applications.
//!
//! Layers, dependencies pointing down: `bin/` (entry points) -> `dbus/` (adapts the core to D-Bus) ->
//! `daemon` (threads, reload, watchdog) -> `card/`, `loader/`, `selftest/`, `health`, `metrics` (the core,
//! which knows nothing of D-Bus) -> `sys/` (sysfs, the privileged helper, device nodes) and `config`,
//! `manifest`. `validate` is `gdrctl validate`'s checks, run through gdr-client as an application's I/O.

pub mod access;
pub mod atomic;
pub mod card;
pub mod config;
pub mod daemon;
pub mod dbus;
pub mod health;
pub mod latency;
pub mod loader;
pub mod logging;
pub mod manifest;
pub mod metrics;
pub mod notify;
pub mod polkit;
pub mod progress;
pub mod selftest;
pub mod stream;
pub mod sys;
pub mod validate;
