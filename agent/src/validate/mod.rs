//! `gdrctl validate`: is this card fit for an application? At `xbutil validate`'s level: the PCIe link
//! against what the card trains to, the ID block against the manifest, DMA integrity and bandwidth both
//! ways and through the round trip, small-transfer latency, and the GPU-memory path, each judged against a
//! threshold (docs/agent.md, "gdrctl validate").
//!
//! Measuring ([`dma`], [`link`], [`run`]) is kept apart from judging ([`judge`], pure functions), so every
//! verdict is tested on the host. The I/O goes through `gdr_client`, as an application's does: the card's
//! fd comes from the agent's `Open`, and the card RAM is claimed before anything moves.

pub mod dma;
pub mod judge;
pub mod link;
pub mod options;
pub mod report;
pub mod run;

pub use options::Options;
pub use report::{Check, EXIT_COULD_NOT_RUN, Report, Verdict, could_not_run_json};
pub use run::{CouldNotRun, run};
