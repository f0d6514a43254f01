//! The operation that has a card off the bus, kept on disk (the agent's state directory) from just before
//! the PCI remove until the function is back. An agent that was stopped, killed or crashed in between
//! finds the record on its next start and rescans that address before it looks for the card: without it,
//! discovery finds nothing and the card stays stranded until a reboot.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What was in progress when the function left the bus.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffBus {
    /// The operation (`program`).
    pub op: String,
    /// The function that was removed (`DDDD:BB:DD.F`).
    pub pci: String,
    /// Unix time it was removed.
    pub since: u64,
}

/// A record that cannot be written, read or removed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    Write(#[from] crate::atomic::WriteError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {source}", path.display())]
    Damaged {
        path: PathBuf,
        source: serde_json::Error,
    },
}

/// The record of card `index` in `state_dir`.
pub fn path(state_dir: &Path, index: usize) -> PathBuf {
    state_dir.join(format!("card{index}-offbus.json"))
}

/// Records `op` durably (written beside, synced, renamed into place).
pub fn record(path: &Path, op: &OffBus) -> Result<(), JournalError> {
    let text = serde_json::to_string(op).map_err(|source| JournalError::Damaged {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(crate::atomic::write(path, text.as_bytes())?)
}

/// The record, if there is one; `Err` for a record that cannot be read or parsed.
pub fn read(path: &Path) -> Option<Result<OffBus, JournalError>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(
            serde_json::from_str(&text).map_err(|source| JournalError::Damaged {
                path: path.to_path_buf(),
                source,
            }),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => Some(Err(JournalError::Io {
            path: path.to_path_buf(),
            source,
        })),
    }
}

/// Removes the record (the function is back); a missing record is fine.
pub fn clear(path: &Path) -> Result<(), JournalError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(JournalError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_reads_and_clears() {
        let dir = std::env::temp_dir().join(format!("gdr-journal-{}", std::process::id()));
        let p = path(&dir, 1);
        assert!(p.ends_with("card1-offbus.json"));
        assert!(read(&p).is_none());
        let op = OffBus {
            op: "program".into(),
            pci: "0000:01:00.0".into(),
            since: 7,
        };
        record(&p, &op).unwrap();
        assert_eq!(read(&p).unwrap().unwrap(), op);
        clear(&p).unwrap();
        assert!(read(&p).is_none());
        clear(&p).unwrap();
        std::fs::write(&p, "{").unwrap();
        assert!(
            matches!(read(&p), Some(Err(JournalError::Damaged { .. }))),
            "a damaged record is reported"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
