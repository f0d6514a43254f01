//! Atomic file replacement: readers (node_exporter, gdrctl) see the old or the new file, never half of one.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A file that could not be written (the old one, if any, is still there, whole).
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// The temporary file [`write`] fills beside `path`.
fn temp_path(path: &Path) -> PathBuf {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    dir.join(format!(".{name}.{}.tmp", std::process::id()))
}

/// A new file at `tmp`: never through a link someone planted there, never an existing file (a leftover of
/// an earlier process with the same pid is unlinked, not written through).
fn create_new(tmp: &Path) -> std::io::Result<std::fs::File> {
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(tmp)
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(tmp)?;
            open()
        }
        r => r,
    }
}

/// Writes `data` to a new temporary file beside `path`, syncs it and renames it over `path`.
pub fn write(path: &Path, data: &[u8]) -> Result<(), WriteError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| WriteError {
        path: dir.to_path_buf(),
        source,
    })?;
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = create_new(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        WriteError {
            path: path.to_path_buf(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_link_is_not_followed() {
        let d = std::env::temp_dir().join(format!("gdr-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = d.join("gdr.prom");
        std::os::unix::fs::symlink(&victim, temp_path(&out)).unwrap();
        write(&out, b"metrics").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "metrics");
        assert!(!temp_path(&out).exists());
        // A stale regular file there (a dead process of the same pid) is replaced, not appended to.
        std::fs::write(temp_path(&out), "stale stale stale").unwrap();
        write(&out, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
