//! dma-bufs for the import tests: `/dev/gdr_exporter`, the bench's exporter whose buffers move on request
//! (kmod/bench-exporter; its structs mirror `gdr_exporter.h`), and the kernel's udmabuf over memfd pages.

use std::fs::{File, OpenOptions};
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

/// The exporter's device node (gdr_exporter.ko, loaded by the `exp` word of bench/matrix).
pub const PATH: &str = "/dev/gdr_exporter";
/// The kernel's udmabuf device (CONFIG_UDMABUF).
pub const UDMABUF_PATH: &str = "/dev/udmabuf";
/// `GDR_EXP_MOVE_HOLD`, and how long the move then holds the lock before it notifies (`GDR_EXP_HOLD_MS`).
const MOVE_HOLD: u32 = 1;
pub const HOLD_MS: u64 = 1000;

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// The kernel's `_IOC` for any type byte (x86-64 and arm64 share this layout).
const fn ioc(dir: u32, ty: u8, nr: u32, size: usize) -> u32 {
    dir << 30 | (size as u32) << 16 | (ty as u32) << 8 | nr
}

/// `struct gdr_exp_create`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Create {
    pub size: u64,
    pub fd: i32,
    pub flags: u32,
}

/// `struct gdr_exp_fd`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct FdArg {
    pub fd: i32,
    pub flags: u32,
}

/// `struct gdr_exp_io`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Io {
    pub fd: i32,
    pub flags: u32,
    pub offset: u64,
    pub len: u64,
    pub uaddr: u64,
}

/// `struct gdr_exp_state`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct State {
    pub fd: i32,
    pub mapped: u32,
    pub attachments: u32,
    pub pins: u32,
    pub moves: u64,
    pub reserved: [u64; 2],
}

/// `struct udmabuf_create` (include/uapi/linux/udmabuf.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UdmabufCreate {
    pub memfd: u32,
    pub flags: u32,
    pub offset: u64,
    pub size: u64,
}

const _: () = assert!(size_of::<Create>() == 16);
const _: () = assert!(size_of::<FdArg>() == 8);
const _: () = assert!(size_of::<Io>() == 32);
const _: () = assert!(size_of::<State>() == 40);
const _: () = assert!(size_of::<UdmabufCreate>() == 24);

pub const IOC_CREATE: u32 = ioc(IOC_READ | IOC_WRITE, b'X', 1, size_of::<Create>());
pub const IOC_MOVE: u32 = ioc(IOC_WRITE, b'X', 2, size_of::<FdArg>());
pub const IOC_WRITE_BYTES: u32 = ioc(IOC_WRITE, b'X', 3, size_of::<Io>());
pub const IOC_READ_BYTES: u32 = ioc(IOC_WRITE, b'X', 4, size_of::<Io>());
pub const IOC_STATE: u32 = ioc(IOC_READ | IOC_WRITE, b'X', 5, size_of::<State>());
/// `UDMABUF_CREATE`.
pub const UDMABUF_CREATE: u32 = ioc(IOC_WRITE, b'u', 0x42, size_of::<UdmabufCreate>());
/// `UDMABUF_FLAGS_CLOEXEC`.
pub const UDMABUF_FLAGS_CLOEXEC: u32 = 1;

/// A buffer's counters as the exporter sees them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExporterState {
    /// Mappings made and not yet unmapped.
    pub mapped: u32,
    pub attachments: u32,
    pub pins: u32,
    /// Completed moves.
    pub moves: u64,
}

/// The kernel's page size: buffer sizes are multiples of it.
pub fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system; it touches no memory of ours.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).unwrap_or(4096)
}

/// `ioctl(fd, cmd, arg)`; the return value, or the errno as an error.
///
/// # Safety
/// What the kernel may read or write through `arg` (the argument struct and any user buffer named in it) must
/// be valid for that access, and no Rust reference to memory it writes may be live during the call.
unsafe fn ioctl(fd: BorrowedFd<'_>, cmd: u32, arg: libc::c_ulong) -> io::Result<i32> {
    // SAFETY: the fd is borrowed, so open, for the whole call; what the kernel touches is the caller's contract.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), cmd as libc::Ioctl, arg) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Takes ownership of a descriptor a successful call just returned.
fn owned(fd: i32) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::other(format!("kernel returned fd {fd}")));
    }
    // SAFETY: the kernel installed `fd` for this process on success and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An open `/dev/gdr_exporter`.
pub struct Exporter {
    file: File,
}

impl Exporter {
    /// Whether the exporter module is loaded.
    pub fn available() -> bool {
        Path::new(PATH).exists()
    }

    pub fn open() -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(PATH)?;
        Ok(Exporter { file })
    }

    /// `ioctl` on the exporter.
    ///
    /// # Safety
    /// As [`ioctl`]: what the module may read or write through `arg` must be valid for it.
    unsafe fn ioctl_raw(&self, cmd: u32, arg: libc::c_ulong) -> io::Result<i32> {
        // SAFETY: forwarded contract.
        unsafe { ioctl(self.file.as_fd(), cmd, arg) }
    }

    /// A zero-filled buffer of `size` bytes (a non-zero multiple of the page size, at most 64 MiB, `GDR_EXP_MAX_SIZE`): its
    /// dma-buf, close-on-exec.
    pub fn create(&self, size: u64) -> io::Result<OwnedFd> {
        let mut a = Create {
            size,
            ..Default::default()
        };
        // SAFETY: CREATE reads and writes exactly one `Create`, ours and live.
        unsafe { self.ioctl_raw(IOC_CREATE, &raw mut a as libc::c_ulong) }?;
        owned(a.fd)
    }

    /// Moves `buf` to new pages: the importers are told (move_notify) and must unmap first; EBUSY if one did
    /// not, or if the buffer is pinned.
    pub fn move_buffer(&self, buf: BorrowedFd<'_>) -> io::Result<()> {
        self.move_with(buf, 0)
    }

    /// MOVE after holding the buffer's reservation lock for [`HOLD_MS`] first (`GDR_EXP_MOVE_HOLD`): an
    /// exporter busy with the buffer, which an importer must not sleep on.
    pub fn move_holding(&self, buf: BorrowedFd<'_>) -> io::Result<()> {
        self.move_with(buf, MOVE_HOLD)
    }

    fn move_with(&self, buf: BorrowedFd<'_>, flags: u32) -> io::Result<()> {
        let mut a = FdArg {
            fd: buf.as_raw_fd(),
            flags,
        };
        // SAFETY: MOVE only reads one `FdArg`, ours and live.
        unsafe { self.ioctl_raw(IOC_MOVE, &raw mut a as libc::c_ulong) }.map(|_| ())
    }

    /// Writes `data` into `buf` at `offset`.
    pub fn write(&self, buf: BorrowedFd<'_>, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut a = Io {
            fd: buf.as_raw_fd(),
            offset,
            len: data.len() as u64,
            uaddr: data.as_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: WRITE reads one `Io` and at most `data.len()` bytes of `data`, both borrowed for the call.
        unsafe { self.ioctl_raw(IOC_WRITE_BYTES, &raw mut a as libc::c_ulong) }.map(|_| ())
    }

    /// Reads `out.len()` bytes of `buf` at `offset` into `out`.
    pub fn read(&self, buf: BorrowedFd<'_>, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let mut a = Io {
            fd: buf.as_raw_fd(),
            offset,
            len: out.len() as u64,
            uaddr: out.as_mut_ptr() as u64,
            ..Default::default()
        };
        // SAFETY: READ reads one `Io` and writes at most `out.len()` bytes of `out`, mutably borrowed for the call.
        unsafe { self.ioctl_raw(IOC_READ_BYTES, &raw mut a as libc::c_ulong) }.map(|_| ())
    }

    pub fn state(&self, buf: BorrowedFd<'_>) -> io::Result<ExporterState> {
        let mut a = State {
            fd: buf.as_raw_fd(),
            ..Default::default()
        };
        // SAFETY: STATE reads and writes exactly one `State`, ours and live.
        unsafe { self.ioctl_raw(IOC_STATE, &raw mut a as libc::c_ulong) }?;
        Ok(ExporterState {
            mapped: a.mapped,
            attachments: a.attachments,
            pins: a.pins,
            moves: a.moves,
        })
    }
}

/// The exporter's device file: open, but not a dma-buf (a descriptor the exporter must refuse as a buffer).
impl AsFd for Exporter {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// A dma-buf from the kernel's udmabuf over a new sealed memfd of `size` bytes (a multiple of the page size):
/// `(memfd, dmabuf)`, both close-on-exec. Writing through the memfd (pwrite, mmap) changes the buffer's bytes.
pub fn udmabuf_from_memfd(size: u64) -> io::Result<(OwnedFd, OwnedFd)> {
    let len =
        libc::off_t::try_from(size).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a NUL-terminated name and plain flags; the kernel touches nothing else of ours.
    let memfd = owned_or_errno(unsafe {
        libc::memfd_create(c"gdr".as_ptr(), libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC)
    })?;
    // SAFETY: a plain syscall on our open fd.
    if unsafe { libc::ftruncate(memfd.as_raw_fd(), len) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // udmabuf refuses a memfd that could still shrink under it.
    // SAFETY: a plain syscall on our open fd with an integer argument.
    if unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let dev = OpenOptions::new()
        .read(true)
        .write(true)
        .open(UDMABUF_PATH)?;
    let mut a = UdmabufCreate {
        memfd: memfd.as_raw_fd() as u32,
        flags: UDMABUF_FLAGS_CLOEXEC,
        offset: 0,
        size,
    };
    // SAFETY: UDMABUF_CREATE only reads one `UdmabufCreate`, ours and live.
    let fd = unsafe { ioctl(dev.as_fd(), UDMABUF_CREATE, &raw mut a as libc::c_ulong) }?;
    Ok((memfd, owned(fd)?))
}

/// `fd`, owned, or the errno of the call that returned it.
fn owned_or_errno(fd: i32) -> io::Result<OwnedFd> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        owned(fd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers gdr_exporter.h's `_IOW`/`_IOWR` give, and udmabuf's.
    #[test]
    fn ioctl_numbers_match_the_header() {
        assert_eq!(IOC_CREATE, 0xc010_5801);
        assert_eq!(IOC_MOVE, 0x4008_5802);
        assert_eq!(IOC_WRITE_BYTES, 0x4020_5803);
        assert_eq!(IOC_READ_BYTES, 0x4020_5804);
        assert_eq!(IOC_STATE, 0xc028_5805);
        assert_eq!(UDMABUF_CREATE, 0x4018_7542);
    }
}
