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

/// The record of card `index` in `state_dir`.
pub fn path(state_dir: &Path, index: usize) -> PathBuf {
    state_dir.join(format!("card{index}-offbus.json"))
}

/// Records `op` durably (written beside, synced, renamed into place).
pub fn record(path: &Path, op: &OffBus) -> Result<(), String> {
    let text = serde_json::to_string(op).map_err(|e| e.to_string())?;
    crate::atomic::write(path, text.as_bytes()).map_err(|e| e.to_string())
}

/// The record, if there is one; `Err` for a record that cannot be read or parsed.
pub fn read(path: &Path) -> Option<Result<OffBus, String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            Some(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display())))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(format!("{}: {e}", path.display()))),
    }
}

/// Removes the record (the function is back); a missing record is fine.
pub fn clear(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot remove {}: {e}", path.display())),
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
        assert!(read(&p).unwrap().is_err(), "a damaged record is reported");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
