//! What `gdr-helper` (root, one request per connection) does, in the library so host tests reach it: it
//! serves only the agent's user, removes only PicoEVB functions, and programs over JTAG exactly the bytes
//! whose sha256 the agent checked, from a private copy the agent cannot swap.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::pci::is_picoevb;
use crate::manifest::sha256_hex;

/// Why the helper refused or failed a request.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegedError {
    #[error("cannot tell who connected: {0}")]
    Peer(std::io::Error),
    #[error("uid {uid} connected; only the agent's user (uid {allowed}) is served")]
    NotTheAgent { uid: u32, allowed: u32 },
    #[error("cannot read the request: {0}")]
    Read(std::io::Error),
    #[error("no user '{0}'")]
    NoAgentUser(&'static str),
    #[error(transparent)]
    Request(#[from] super::request::RequestError),
    #[error("{0} is not a PicoEVB")]
    NotPicoevb(String),
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: larger than {MAX_IMAGE} bytes", path.display())]
    TooLarge { path: PathBuf },
    #[error("{}: sha256 {found}, but the agent checked {checked}", path.display())]
    NotChecked {
        path: PathBuf,
        found: String,
        checked: String,
    },
    /// The programming script failed (its exit status and last line).
    #[error("{0}")]
    Script(String),
}

/// Maps an I/O error on `path` (for `map_err`).
pub fn file(path: &Path) -> impl FnOnce(std::io::Error) -> PrivilegedError + '_ {
    move |source| PrivilegedError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// Largest image the helper copies (a PicoEVB `.bin` is about 2.3 MB; `.bit` about the same).
pub const MAX_IMAGE: u64 = 64 << 20;

/// The uid at the other end of the connected UNIX socket `fd` (`SO_PEERCRED`: what the kernel recorded at
/// connect, not what the peer claims).
pub fn peer_uid(fd: BorrowedFd<'_>) -> std::io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writing and `len` holds the size of `cred`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Ok if the peer of `fd` is `allowed` (the agent's user). The socket's mode already limits who connects;
/// this holds even where an admin loosened it.
pub fn check_peer(fd: BorrowedFd<'_>, allowed: u32) -> Result<(), PrivilegedError> {
    let uid = peer_uid(fd).map_err(PrivilegedError::Peer)?;
    if uid != allowed {
        return Err(PrivilegedError::NotTheAgent { uid, allowed });
    }
    Ok(())
}

/// Ok if `sys/bus/pci/devices/<bdf>` is a PicoEVB (subsystem IDs included).
pub fn check_picoevb(sys: &Path, bdf: &str) -> Result<(), PrivilegedError> {
    if !is_picoevb(&sys.join("bus/pci/devices").join(bdf)) {
        return Err(PrivilegedError::NotPicoevb(bdf.to_string()));
    }
    Ok(())
}

/// A private copy of a checked image; removed (with its directory) on drop.
#[derive(Debug)]
pub struct Staged {
    dir: PathBuf,
    pub path: PathBuf,
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Reads `bitstreams/name` once, checks it against `sha256` and writes exactly those bytes to a new file
/// in a new 0700 directory under `scratch` (never following a link, never reusing a file), for the
/// programming script to read.
pub fn stage_image(
    bitstreams: &Path,
    name: &str,
    sha256: &str,
    scratch: &Path,
) -> Result<Staged, PrivilegedError> {
    let src = bitstreams.join(name);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&src)
        .map_err(file(&src))?;
    let mut bytes = Vec::new();
    f.take(MAX_IMAGE + 1)
        .read_to_end(&mut bytes)
        .map_err(file(&src))?;
    if bytes.len() as u64 > MAX_IMAGE {
        return Err(PrivilegedError::TooLarge { path: src });
    }
    let found = sha256_hex(&bytes);
    if found != sha256 {
        return Err(PrivilegedError::NotChecked {
            path: src,
            found,
            checked: sha256.to_string(),
        });
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = scratch.join(format!("gdr-helper.{}.{nanos}", std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(file(&dir))?;
    let staged = Staged {
        path: dir.join(name),
        dir,
    };
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&staged.path)
        .map_err(file(&staged.path))?;
    out.write_all(&bytes)
        .and_then(|()| out.sync_all())
        .map_err(file(&staged.path))?;
    Ok(staged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gdr-priv-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn only_the_agents_uid_is_served() {
        let (a, _b) = UnixStream::pair().unwrap();
        // SAFETY: getuid cannot fail.
        let me = unsafe { libc::getuid() };
        assert_eq!(peer_uid(a.as_fd()).unwrap(), me);
        assert!(check_peer(a.as_fd(), me).is_ok());
        let e = check_peer(a.as_fd(), me.wrapping_add(1)).unwrap_err();
        assert!(
            matches!(e, PrivilegedError::NotTheAgent { uid, .. } if uid == me),
            "{e}"
        );
    }

    #[test]
    fn the_checked_bytes_are_staged_privately() {
        let d = tmp("stage");
        let (bits, scratch) = (d.join("bits"), d.join("scratch"));
        std::fs::create_dir_all(&bits).unwrap();
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::write(bits.join("a.bin"), b"good image").unwrap();
        let sum = sha256_hex(b"good image");
        let staged = stage_image(&bits, "a.bin", &sum, &scratch).unwrap();
        // The file changes after staging: what the script reads does not.
        std::fs::write(bits.join("a.bin"), b"evil image").unwrap();
        assert_eq!(std::fs::read(&staged.path).unwrap(), b"good image");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(staged.path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        let dir = staged.path.parent().unwrap().to_path_buf();
        drop(staged);
        assert!(!dir.exists(), "the private copy outlived the request");

        // A file that is not the one the agent checked is refused.
        let e = stage_image(&bits, "a.bin", &sum, &scratch).unwrap_err();
        assert!(matches!(e, PrivilegedError::NotChecked { .. }), "{e}");
        // A link in the bitstream directory is not followed.
        std::os::unix::fs::symlink(bits.join("a.bin"), bits.join("b.bin")).unwrap();
        let evil = sha256_hex(b"evil image");
        assert!(stage_image(&bits, "b.bin", &evil, &scratch).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn only_a_picoevb_is_removed() {
        let d = tmp("pci");
        for (bdf, sub) in [("0000:01:00.0", "0x0001"), ("0000:02:00.0", "0x0002")] {
            let dev = d.join("bus/pci/devices").join(bdf);
            std::fs::create_dir_all(&dev).unwrap();
            for (attr, v) in [
                ("vendor", "0x10de"),
                ("device", "0x0001"),
                ("subsystem_vendor", "0x10de"),
                ("subsystem_device", sub),
            ] {
                std::fs::write(dev.join(attr), format!("{v}\n")).unwrap();
            }
        }
        assert!(check_picoevb(&d, "0000:01:00.0").is_ok());
        assert!(
            check_picoevb(&d, "0000:02:00.0").is_err(),
            "an HTG-K800 (10de:0001, subsystem 10de:0002) passed for a PicoEVB"
        );
        assert!(check_picoevb(&d, "0000:03:00.0").is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
