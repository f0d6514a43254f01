//! The one definition of the `/dev/picoevbN` ioctl ABI.
//!
//! `abi.rs` is plain `core` Rust so that the kernel module includes the very same file (`kmod/picoevb/abi.rs`),
//! while user space (guest tests, agent, CLI) uses this crate.
#![no_std]

mod abi;
pub use abi::*;
