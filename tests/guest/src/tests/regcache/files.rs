//! Shared file mappings: the cache keeps a buffer pinned long-term and lets the device write it, which a
//! file system that writes its pages back cannot allow (it cleans and writes back pages the device may
//! still write: the GUP vs writeback problem). Such a mapping is served by one-off pins, never cached;
//! tmpfs (shmem, no writeback) is cached like anonymous memory.

use std::fs;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;

use super::{Ctx, RAM, TestResult, ctx_err, ensure, holds, open_cached, query, used_once};

/// A file system that writes back (ext4 on a loop device over a file in tmpfs), mounted for the test.
struct Ext4 {
    dir: &'static str,
}

impl Ext4 {
    const IMG: &'static str = "/tmp/gdr-regcache-ext4.img";
    const DIR: &'static str = "/tmp/gdr-regcache-ext4";

    fn mount() -> Result<Self, String> {
        let run = |what: &str, cmd: &mut Command| -> TestResult {
            let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
            ensure!(
                out.status.success(),
                "{what}: {} {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
            Ok(())
        };
        let img = fs::File::create(Self::IMG).map_err(|e| format!("create {}: {e}", Self::IMG))?;
        img.set_len(8 << 20)
            .map_err(|e| format!("size {}: {e}", Self::IMG))?;
        drop(img);
        fs::create_dir_all(Self::DIR).map_err(|e| format!("mkdir {}: {e}", Self::DIR))?;
        run(
            "mke2fs",
            // -F: busybox's mke2fs wants a block device unless forced; the loop device comes at mount.
            Command::new("busybox").args(["mke2fs", "-q", "-F", Self::IMG]),
        )?;
        // The loop device is set up by losetup, which exits before the mount: busybox's `mount -o loop`
        // keeps the device open for writing while it mounts, and a kernel without
        // CONFIG_BLK_DEV_WRITE_MOUNTED refuses that mount with EBUSY.
        let out = Command::new("busybox")
            .args(["losetup", "-f"])
            .output()
            .map_err(|e| format!("losetup -f: {e}"))?;
        let loopdev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        ensure!(
            out.status.success() && loopdev.starts_with("/dev/loop"),
            "losetup -f: {} {loopdev:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        run(
            "losetup",
            Command::new("busybox").args(["losetup", &loopdev, Self::IMG]),
        )?;
        let mounted = run(
            "mount ext4 on a loop device",
            Command::new("busybox").args(["mount", "-t", "ext4", &loopdev, Self::DIR]),
        );
        if mounted.is_err() {
            let _ = Command::new("busybox")
                .args(["losetup", "-d", &loopdev])
                .status();
        }
        mounted?;
        Ok(Ext4 { dir: Self::DIR })
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = Command::new("busybox")
            .args(["umount", "-d", self.dir])
            .status();
        let _ = fs::remove_file(Self::IMG);
    }
}

/// `len` bytes of `path` (created), mapped shared and writable, filled with `fill`.
fn shared_map(path: &Path, len: usize, fill: u8) -> Result<(fs::File, *mut u8), String> {
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| format!("open {}: {e}", path.display()))?;
    f.set_len(len as u64)
        .map_err(|e| format!("size {}: {e}", path.display()))?;
    // SAFETY: a new shared mapping of our own file at an address the kernel picks.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    ensure!(
        p != libc::MAP_FAILED,
        "mmap {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
    // SAFETY: `len` bytes just mapped writable, ours alone.
    unsafe { std::ptr::write_bytes(p.cast::<u8>(), fill, len) };
    Ok((f, p.cast()))
}

/// Whether a buffer in a shared mapping of `path` gets cached: two C2H into it (the second use of a buffer
/// is the one that caches), then whether the cache grew by it; the data must have landed either way.
fn cached_after_two_uses(ctx: &Ctx, path: &Path) -> Result<bool, String> {
    let dev = open_cached(ctx)?;
    let (_f, p) = shared_map(path, RAM, 0x5a)?;
    // SAFETY: `p` is `RAM` bytes mapped by `shared_map`, unmapped below, not otherwise referenced.
    let buf = unsafe { std::slice::from_raw_parts_mut(p, RAM) };
    let want: Vec<u8> = (0..RAM).map(|i| (i * 7) as u8).collect();
    ctx_err("H2C of the pattern", dev.h2c(&want, 0))?;
    used_once(&dev, buf, &format!("{}", path.display()))?;
    ctx_err("H2C of the pattern", dev.h2c(&want, 0))?;
    // The pattern's own buffer is cached by now (its second use): count only what the C2H adds.
    let before = query(&dev)?.entries;
    let r = ctx_err(
        &format!("C2H into a shared mapping of {}", path.display()),
        dev.c2h(buf, 0),
    );
    let cached = query(&dev).map(|s| s.entries > before);
    let same = buf == &want[..];
    ctx_err("REG_CACHE FLUSH", dev.reg_cache_flush())?;
    // SAFETY: our mapping; `buf` is not used after this.
    unsafe { libc::munmap(p.cast(), RAM) };
    r?;
    ensure!(same, "C2H into {}: the data did not land", path.display());
    cached
}

/// Fails on a driver whose long-term pin takes an ext4 file's page-cache pages (5.10's FOLL_LONGTERM
/// does not refuse them, so the driver must; 6.5+'s GUP refuses them itself), and on one that refuses
/// tmpfs.
pub(super) fn shared_file_mappings(ctx: &mut Ctx) -> TestResult {
    let shm = Path::new("/dev/shm");
    let tmpfs_dir = if shm.is_dir() { shm } else { Path::new("/tmp") };
    let tmpfs_file = tmpfs_dir.join("gdr-regcache-shared");
    let on_tmpfs = cached_after_two_uses(ctx, &tmpfs_file);
    let _ = fs::remove_file(&tmpfs_file);
    let ext4 = Ext4::mount()?;
    let on_ext4 = cached_after_two_uses(ctx, &Path::new(ext4.dir).join("buf"));
    drop(ext4);
    ensure!(
        !on_ext4?,
        "a shared mapping of an ext4 file was cached (pinned long-term for the device to write)"
    );
    ensure!(
        on_tmpfs?,
        "a shared mapping of a tmpfs file ({}) was not cached",
        tmpfs_file.display()
    );
    holds("after both", &query(&open_cached(ctx)?)?, 0, 0)
}
