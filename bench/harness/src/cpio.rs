//! Uncompressed "newc" cpio archives, the format the kernel unpacks as an initramfs
//! (Documentation/driver-api/early-userspace/buffer-format.rst). A writer for the harness and a reader for
//! its tests (symlinks and hard links are not needed: busybox installs its applet links at boot).

use std::io::{self, Write};

const MAGIC: &[u8; 6] = b"070701";
const HEADER_LEN: usize = 110;
const TRAILER: &str = "TRAILER!!!";

pub const S_IFDIR: u32 = 0o040000;
pub const S_IFREG: u32 = 0o100000;
pub const S_IFCHR: u32 = 0o020000;

/// One archive member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Path without a leading `/`.
    pub name: String,
    /// File type and permission bits (`S_IF* | 0o755`).
    pub mode: u32,
    /// Device number of a character or block device.
    pub rdev: (u32, u32),
    /// File contents.
    pub data: Vec<u8>,
}

impl Entry {
    pub fn dir(name: &str) -> Self {
        Entry {
            name: name.into(),
            mode: S_IFDIR | 0o755,
            rdev: (0, 0),
            data: Vec::new(),
        }
    }
    pub fn file(name: &str, perm: u32, data: Vec<u8>) -> Self {
        Entry {
            name: name.into(),
            mode: S_IFREG | perm,
            rdev: (0, 0),
            data,
        }
    }
    pub fn char_dev(name: &str, perm: u32, major: u32, minor: u32) -> Self {
        Entry {
            name: name.into(),
            mode: S_IFCHR | perm,
            rdev: (major, minor),
            data: Vec::new(),
        }
    }
}

fn pad4(w: &mut impl Write, len: usize) -> io::Result<()> {
    w.write_all(&[0u8; 3][..(4 - len % 4) % 4])
}

fn header(w: &mut impl Write, ino: u32, e: &Entry, nlink: u32) -> io::Result<()> {
    let fields = [
        ino,
        e.mode,
        0, // uid: root
        0, // gid
        nlink,
        0, // mtime: fixed, so equal inputs give equal archives
        u32::try_from(e.data.len()).map_err(|_| io::Error::other("cpio member over 4 GiB"))?,
        0, // devmajor
        0, // devminor
        e.rdev.0,
        e.rdev.1,
        u32::try_from(e.name.len() + 1).map_err(|_| io::Error::other("cpio name too long"))?,
        0, // check: unused by newc
    ];
    w.write_all(MAGIC)?;
    for f in fields {
        write!(w, "{f:08x}")?;
    }
    w.write_all(e.name.as_bytes())?;
    w.write_all(&[0])?;
    // Header and name together are padded to a multiple of 4.
    pad4(w, HEADER_LEN + e.name.len() + 1)
}

/// Writes `entries` and the trailer. Parents must come before their children.
pub fn write(w: &mut impl Write, entries: &[Entry]) -> io::Result<()> {
    for (i, e) in entries.iter().enumerate() {
        let nlink = if e.mode & 0o170000 == S_IFDIR { 2 } else { 1 };
        header(w, i as u32 + 1, e, nlink)?;
        w.write_all(&e.data)?;
        pad4(w, e.data.len())?;
    }
    header(
        w,
        0,
        &Entry {
            name: TRAILER.into(),
            mode: 0,
            rdev: (0, 0),
            data: Vec::new(),
        },
        1,
    )
}

/// Parses an archive written by [`write`], up to and including the trailer; checks magic, padding and that
/// nothing but zero padding follows. Returns the members without the trailer.
#[cfg(test)]
pub fn parse(mut buf: &[u8]) -> Result<Vec<Entry>, String> {
    let total = buf.len();
    let mut out = Vec::new();
    loop {
        let at = total - buf.len();
        if buf.len() < HEADER_LEN {
            return Err(format!("truncated header at {at}"));
        }
        if &buf[..6] != MAGIC {
            return Err(format!("bad magic at {at}"));
        }
        let field = |i: usize| -> Result<u32, String> {
            let s = std::str::from_utf8(&buf[6 + 8 * i..14 + 8 * i]).map_err(|e| e.to_string())?;
            u32::from_str_radix(s, 16).map_err(|e| format!("field {i} at {at}: {e}"))
        };
        let (mode, size, rdev) = (field(1)?, field(6)? as usize, (field(9)?, field(10)?));
        let namesize = field(11)? as usize;
        let name_end = HEADER_LEN + namesize;
        let data_start = name_end.next_multiple_of(4);
        if namesize == 0 || buf.len() < data_start || buf[name_end - 1] != 0 {
            return Err(format!("bad name at {at}"));
        }
        if buf[name_end..data_start].iter().any(|&b| b != 0) {
            return Err(format!("nonzero name padding at {at}"));
        }
        let name =
            String::from_utf8(buf[HEADER_LEN..name_end - 1].to_vec()).map_err(|e| e.to_string())?;
        let data_end = data_start + size;
        let next = data_end.next_multiple_of(4);
        if buf.len() < next {
            return Err(format!("truncated data of {name}"));
        }
        if buf[data_end..next].iter().any(|&b| b != 0) {
            return Err(format!("nonzero data padding after {name}"));
        }
        let data = buf[data_start..data_end].to_vec();
        buf = &buf[next..];
        if name == TRAILER {
            if buf.iter().any(|&b| b != 0) {
                return Err("data after the trailer".into());
            }
            return Ok(out);
        }
        out.push(Entry {
            name,
            mode,
            rdev,
            data,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_padding_and_trailer() {
        let entries = vec![
            Entry::dir("bin"),
            Entry::dir("dev"),
            Entry::char_dev("dev/console", 0o600, 5, 1),
            // Data lengths 0..=5 and names of every length mod 4 exercise all padding cases.
            Entry::file("init", 0o755, b"#!/bin/sh\n".to_vec()),
            Entry::file("a", 0o644, vec![]),
            Entry::file("ab", 0o644, vec![1]),
            Entry::file("abc", 0o644, vec![1, 2]),
            Entry::file("abcd", 0o644, vec![1, 2, 3]),
            Entry::file("abcde", 0o644, vec![1, 2, 3, 4, 5]),
        ];
        let mut out = Vec::new();
        write(&mut out, &entries).unwrap();
        assert_eq!(out.len() % 4, 0, "archive length is 4-byte aligned");
        assert_eq!(parse(&out).unwrap(), entries);
        // The trailer is the last member, with an empty body.
        let tail = String::from_utf8_lossy(&out[out.len() - 16..]);
        assert!(tail.contains("TRAILER!!!"), "{tail:?}");
        // The first header is bit-exact newc.
        assert_eq!(&out[..6], b"070701");
        assert_eq!(&out[6..14], b"00000001", "ino");
        assert_eq!(&out[14..22], b"000041ed", "mode of a 0755 directory");
        assert_eq!(
            &out[94..102],
            b"00000004",
            "namesize of \"bin\" with its NUL"
        );
        assert_eq!(&out[110..114], b"bin\0");
        // Kernel rule: each header starts 4-byte aligned, so the second one follows at 116 (110 + 4 + pad).
        assert_eq!(&out[116..122], b"070701");
    }

    #[test]
    fn parse_rejects_damage() {
        let mut out = Vec::new();
        write(&mut out, &[Entry::file("x", 0o644, vec![7; 3])]).unwrap();
        assert!(parse(&out[..out.len() - 4]).is_err(), "missing trailer end");
        let mut bad = out.clone();
        bad[0] = b'X';
        assert!(parse(&bad).unwrap_err().contains("magic"));
        let mut bad = out.clone();
        bad[115] = 1; // the padding byte after the 3 data bytes
        assert!(
            parse(&bad).unwrap_err().contains("padding"),
            "{:?}",
            parse(&bad)
        );
    }
}
