//! Why a stage of the bring-up failed. Its text is the card's status message (`CardStatus::message`, a
//! D-Bus property, `STATUS=` and the journal), written there once, when the card fails.

use super::journal::JournalError;
use super::machine::DRIVER;
use super::ports::{LoadError, NodeError, PciError};
use crate::manifest::{Identity, ManifestError};

/// A stage's failure.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("not started: the agent is stopping")]
    Stopping,
    /// A later try might help, but the agent is stopping.
    #[error("{0} (the agent is stopping)")]
    Interrupted(Box<Failure>),
    /// The last of several tries.
    #[error("{last} (after {tries} tries)")]
    Tries { tries: u32, last: Box<Failure> },
    #[error(transparent)]
    Pci(#[from] PciError),
    #[error(transparent)]
    Node(#[from] NodeError),
    /// `wanted`: the configured address, or the position in bus order.
    #[error("no PicoEVB at {wanted} (found: {})", list(found))]
    NotFound { wanted: String, found: Vec<String> },
    #[error("driver '{DRIVER}' not bound to {bdf}")]
    NotBound { bdf: String },
    #[error(
        "driver ABI {}.{} but this agent speaks {}.x",
        picoevb_abi::abi_major(*abi),
        abi & 0xffff,
        picoevb_abi::abi_major(picoevb_abi::ABI_VERSION)
    )]
    Abi { abi: u32 },
    #[error("no bitstream manifest: cannot tell the right design")]
    NoManifest,
    #[error("card runs {runs}, the manifest wants {wants}")]
    WrongDesign { runs: Identity, wants: Identity },
    #[error("the card needs programming but its loader is 'none'")]
    NoLoader,
    /// The manifest's image for the loader could not be read or checked.
    #[error(transparent)]
    Image(#[from] ManifestError),
    /// The off-bus record was not written, so the function was not removed.
    #[error("not programmed: cannot record the operation: {0}")]
    Unrecorded(#[source] JournalError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("cannot remove {bdf}: {source}")]
    NotRemoved { bdf: String, source: PciError },
    /// After a failure the function was rescanned, and did not come back either.
    #[error("{first}; bringing it back: {back}")]
    NotBroughtBack {
        first: Box<Failure>,
        back: Box<Failure>,
    },
    /// Rescans did not bring the function back with the driver bound and its node answering
    /// (`node`: what the node said, `None`: the driver was not bound).
    #[error("{bdf} did not come back: {}", unanswered(node))]
    NotBack {
        bdf: String,
        node: Option<NodeError>,
    },
    #[error("{name} loader: {source}")]
    Loader {
        name: &'static str,
        source: LoadError,
    },
    #[error(
        "the card came back with the golden design {runs}, not {wants}: the update image was rejected \
         (MultiBoot fallback)"
    )]
    Golden { runs: Identity, wants: Identity },
    #[error("the card came back with {runs}, not {wants}")]
    CameBack { runs: Identity, wants: Identity },
    #[error("the card came back unreadable: {0}")]
    Unreadable(Box<Failure>),
    /// An interrupted earlier run left the function off the bus (`why` says which run and how), and it did
    /// not come back.
    #[error("{why}; it did not come back: {back}")]
    Unrecovered { why: String, back: Box<Failure> },
    /// The self-test's verdict (the reason it keeps in the history).
    #[error("{0}")]
    SelfTest(String),
}

impl Failure {
    /// Whether another try may help: a driver that speaks another ABI stays so.
    pub fn retryable(&self) -> bool {
        !matches!(self, Failure::Abi { .. })
    }
}

fn list(found: &[String]) -> String {
    if found.is_empty() {
        "none".to_string()
    } else {
        found.join(", ")
    }
}

fn unanswered(node: &Option<NodeError>) -> String {
    match node {
        Some(e) => e.to_string(),
        None => format!("driver '{DRIVER}' not bound"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status messages operators and the appliance tests read, word for word.
    #[test]
    fn messages_read_as_the_status_shows_them() {
        let bdf = "0000:01:00.0".to_string();
        let not_bound = Failure::NotBound { bdf: bdf.clone() };
        assert_eq!(
            not_bound.to_string(),
            "driver 'picoevb' not bound to 0000:01:00.0"
        );
        let tries = Failure::Tries {
            tries: 3,
            last: Box::new(Failure::NotBack {
                bdf: bdf.clone(),
                node: None,
            }),
        };
        assert_eq!(
            tries.to_string(),
            "0000:01:00.0 did not come back: driver 'picoevb' not bound (after 3 tries)"
        );
        let denied = NodeError {
            node: "/dev/picoevb0".into(),
            source: gdr_client::Error::Os {
                op: "open",
                errno: libc::EACCES,
            },
        };
        let back = Failure::NotBack {
            bdf,
            node: Some(denied),
        };
        assert_eq!(
            back.to_string(),
            "0000:01:00.0 did not come back: /dev/picoevb0: open: Permission denied (os error 13)"
        );
        let sandboxed = NodeError {
            node: "/dev/picoevb0".into(),
            source: gdr_client::Error::Os {
                op: "open",
                errno: libc::EPERM,
            },
        };
        assert_eq!(
            sandboxed.to_string(),
            "/dev/picoevb0: open: Operation not permitted (os error 1) (the agent's device sandbox refused \
             it: picoevb.ko must be loaded before gdr-agent starts, as modules-load.d does)"
        );
        let abi = Failure::Abi { abi: 0x0002_0000 };
        assert!(
            abi.to_string()
                .starts_with("driver ABI 2.0 but this agent speaks ")
        );
        assert!(!abi.retryable() && not_bound.retryable());
        let none = Failure::NotFound {
            wanted: "position 0 in bus order".into(),
            found: vec![],
        };
        assert_eq!(
            none.to_string(),
            "no PicoEVB at position 0 in bus order (found: none)"
        );
        let golden = Failure::Golden {
            runs: Identity {
                design_version: 0x0009_0000,
                build_hash: 1,
            },
            wants: Identity {
                design_version: 0x0100_0000,
                build_hash: 2,
            },
        };
        assert!(
            golden
                .to_string()
                .ends_with("the update image was rejected (MultiBoot fallback)"),
            "{golden}"
        );
    }
}
