//! Bounded on-disk history of self-test results: one JSON object per line in
//! `<state_dir>/selftest-cardN.jsonl`, the oldest lines dropped beyond the limit; rewritten atomically.

use std::path::{Path, PathBuf};

use super::SelfTestResult;

/// The history file of card `index`.
pub fn path(state_dir: &Path, index: usize) -> PathBuf {
    state_dir.join(format!("selftest-card{index}.jsonl"))
}

/// Reads the history, oldest first; unreadable lines are skipped (a torn file loses nothing else).
pub fn read(file: &Path) -> Vec<SelfTestResult> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Why a result was not appended.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{0}")]
    Encode(#[from] serde_json::Error),
    #[error(transparent)]
    Write(#[from] crate::atomic::WriteError),
}

/// Appends `result`, keeping at most `limit` entries.
pub fn append(file: &Path, result: &SelfTestResult, limit: usize) -> Result<(), HistoryError> {
    let mut all = read(file);
    all.push(result.clone());
    let skip = all.len().saturating_sub(limit);
    let mut text = String::new();
    for r in &all[skip..] {
        text.push_str(&serde_json::to_string(r)?);
        text.push('\n');
    }
    Ok(crate::atomic::write(file, text.as_bytes())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_bounded_and_ordered() {
        let dir = std::env::temp_dir().join(format!("gdr-history-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = path(&dir, 0);
        for t in 0..5 {
            append(&f, &SelfTestResult::error(t, format!("r{t}")), 3).unwrap();
        }
        let h = read(&f);
        assert_eq!(h.iter().map(|r| r.time).collect::<Vec<_>>(), [2, 3, 4]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
