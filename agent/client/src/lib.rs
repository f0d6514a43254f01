//! gdr-client: what an application needs to use a PicoEVB card managed by `gdr-agent`.
//!
//! * [`Agent`] talks to the agent on the system bus: card status, self-test, LEDs, reprogramming, and
//!   [`Agent::open`], which hands back the card's device fd once the agent has checked the caller.
//!   [`api`] has the typed values and the proxies of the agent's D-Bus API under it.
//! * [`Device`] wraps that fd: card info, CUDA pinning, DMA. It fails with `ENODEV` once the card is
//!   reprogrammed or removed; ask the agent for a new fd then.
//! * [`Ring`] ([`Device::stream_ring`]): the card's stream source into a ring the driver fills on its own
//!   and this process reads with no system call per slot; [`RingWriter`] ([`Device::stream_ring_writer`]):
//!   a ring this process fills and the driver empties into the card's checker; [`SurfaceRing`]
//!   ([`Device::stream_ring_on`]): the source into a ring in GPU memory, read by the application's kernel.
//! * `include/gdrpico.h` is the C interface to the same functions (`capi`), prefixed `gdrpico_` so that it
//!   never collides with gdrcopy's `gdr_*` in one process.

mod agent;
pub mod api;
pub mod capi;
mod device;
mod error;
pub mod gpu_path;
mod ring;

pub use agent::{Agent, DEFAULT_TIMEOUT};
pub use api::{CardStatus, SelfTest};
pub use device::{Clock, CudaHandle, Device, Pinned, Sink, Source, StreamOp, Transfer};
pub use error::Error;
pub use ring::{Ring, RingConfig, RingPolicy, RingSummary, RingWriter, SurfaceRing};

/// Well-known bus name of the agent.
pub const BUS_NAME: &str = "org.gdr.Agent1";
/// Object path of the manager.
pub const MANAGER_PATH: &str = "/org/gdr/Agent1";
/// Manager interface. The API version is the interface name's suffix: an incompatible change gets a new
/// name (version 1 returned JSON in strings; version 2 returns D-Bus structs, see [`api`]).
pub const MANAGER_IFACE: &str = "org.gdr.Agent1.Manager2";
/// Per-card interface (version 2, as [`MANAGER_IFACE`]).
pub const CARD_IFACE: &str = "org.gdr.Agent1.Card2";

/// Object path of card `index`.
pub fn card_path(index: u32) -> String {
    format!("{MANAGER_PATH}/card{index}")
}
