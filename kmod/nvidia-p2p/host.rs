//! Host build of `logic.rs` for `cargo test`; the kernel module includes the same file by path.

#[allow(dead_code)]
#[path = "logic.rs"]
mod logic;
