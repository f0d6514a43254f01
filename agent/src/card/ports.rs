//! What the card state machine needs from the world, as traits: the real implementations live in `sys/`
//! and `loader/`, the tests supply scripted ones, so the machine runs without a bus or hardware.

use std::path::{Path, PathBuf};

use picoevb_abi::AbiInfo;

use crate::config::Target;
use crate::manifest::Image;
use crate::selftest::{Measurement, SelfTestError};

/// Boxed so that the ports name no implementation (they live in `sys/` and `loader/`, which depend on
/// this module): the box holds the implementation's own typed error.
type Source = Box<dyn std::error::Error + Send + Sync>;

/// Why the PCI port failed.
#[derive(Debug, thiserror::Error)]
pub enum PciError {
    /// The sysfs device directory could not be listed.
    #[error("{}: {source}", dir.display())]
    List {
        dir: PathBuf,
        source: std::io::Error,
    },
    /// The privileged helper's remove or rescan failed; its error names the request and why.
    #[error(transparent)]
    Privileged(Source),
}

/// Why the card's node did not answer `ABI_INFO`.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}{}", node.display(), sandbox_hint(source))]
pub struct NodeError {
    pub node: PathBuf,
    pub source: gdr_client::Error,
}

/// EPERM on open is the device cgroup, not the node's mode (that is EACCES): `DeviceAllow=char-picoevb`
/// finds the driver's major in /proc/devices when the unit starts, so it admits nothing if picoevb.ko was
/// loaded after the agent started.
fn sandbox_hint(e: &gdr_client::Error) -> &'static str {
    match e {
        gdr_client::Error::Os {
            op: "open",
            errno: libc::EPERM,
        } => {
            " (the agent's device sandbox refused it: picoevb.ko must be loaded before gdr-agent starts, \
             as modules-load.d does)"
        }
        _ => "",
    }
}

/// Why a loader did not program the card: the loader's own error (the model's control channel, the
/// privileged helper's JTAG job).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct LoadError(pub Source);

/// The PCI bus as sysfs shows it, plus the privileged remove/rescan.
pub trait Pci: Send + Sync {
    /// Addresses of every PicoEVB function present, sorted.
    fn list(&self) -> Result<Vec<String>, PciError>;
    /// Name of the driver bound to `bdf`, if any.
    fn driver(&self, bdf: &str) -> Option<String>;
    /// Removes `bdf` from the bus (the driver unbinds; open fds get ENODEV).
    fn remove(&self, bdf: &str) -> Result<(), PciError>;
    /// Rescans every bus.
    fn rescan(&self) -> Result<(), PciError>;
    /// Current link (speed text, width), if the device is there.
    fn link(&self, bdf: &str) -> Option<(String, u32)>;
    /// The AER error counters, where the kernel exposes them.
    fn aer_errors(&self, bdf: &str) -> Option<Aer>;
}

/// AER error totals of one function since boot (sysfs `aer_dev_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aer {
    pub correctable: u64,
    /// Non-fatal plus fatal.
    pub uncorrectable: u64,
}

/// The card's character device.
pub trait Node: Send + Sync {
    /// `PICOEVB_IOC_ABI_INFO` on `node`: the ABI version and the ID block as the driver read it.
    fn abi_info(&self, node: &Path) -> Result<AbiInfo, NodeError>;
}

/// Puts an image onto the FPGA. The link drops meanwhile; the caller removes and rescans around it.
pub trait Loader: Send + Sync {
    /// `model` or `openocd`.
    fn name(&self) -> &'static str;
    /// Which manifest file this loader takes for `target`.
    fn image_role(&self, target: Target) -> &'static str;
    /// Programs `image` (exactly its checked bytes); returns what the loader reported (for the journal).
    fn program(&self, image: &Image, target: Target) -> Result<String, LoadError>;
}

/// Runs the loopback self-test (in a child process, in the daemon).
pub trait SelfTester: Send + Sync {
    fn run(&self, node: &Path) -> Result<Measurement, SelfTestError>;
}

/// Receives every stage change (D-Bus, STATUS=, journal) and requests for more start-up time.
pub trait Events: Send + Sync {
    fn changed(&self, index: usize);
    /// Programming takes long: extend the service manager's start timeout by `usec`.
    fn extend_timeout(&self, usec: u64);
}

/// Waiting between tries (tests do not wait).
pub trait Sleep: Send + Sync {
    fn sleep(&self, d: std::time::Duration);
}

/// The real clock.
pub struct RealSleep;

impl Sleep for RealSleep {
    fn sleep(&self, d: std::time::Duration) {
        std::thread::sleep(d);
    }
}
