//! The one definition of the PicoEVB register map.
//!
//! Every module here is plain `core` Rust with no crate-level items, so the kernel module can include the
//! same files with `#[path]` (see `kmod/picoevb/regs.rs`) while the FPGA model, the host tests and the
//! Verilog header generator use this crate. Nothing may be added here that needs `std` or `alloc`.
#![no_std]

pub mod channel;
pub mod gpio;
pub mod idblock;
pub mod pci;
pub mod stream;
pub mod xdma;
