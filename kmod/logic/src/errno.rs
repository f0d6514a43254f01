//! Linux errno values (asm-generic numbering, the same on x86-64 and arm64) as a small value type, so the
//! logic can name the errors it returns without the kernel crate.

/// A positive Linux errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// Interrupted: a fatal signal ended the wait (the run is stopped unjudged).
    pub const EINTR: Errno = Errno(4);
    /// I/O error: the engine reported a bus or descriptor error.
    pub const EIO: Errno = Errno(5);
    /// Bad file descriptor (IMPORT_DMABUF's fd).
    pub const EBADF: Errno = Errno(9);
    /// Busy: another holder owns the card RAM (`ram_owner`), or a surface already maps the memory.
    pub const EBUSY: Errno = Errno(16);
    /// Try again: the memory was remapped while it was being pinned (PIN_CUDA).
    pub const EAGAIN: Errno = Errno(11);
    /// Out of memory.
    pub const ENOMEM: Errno = Errno(12);
    /// Bad user address.
    pub const EFAULT: Errno = Errno(14);
    /// The device is gone (hot removal).
    pub const ENODEV: Errno = Errno(19);
    /// Invalid argument.
    pub const EINVAL: Errno = Errno(22);
    /// Unknown ioctl.
    pub const ENOTTY: Errno = Errno(25);
    /// Protocol error: the engine rejected a descriptor (bad magic, length, alignment).
    pub const EPROTO: Errno = Errno(71);
    /// Operation not supported by this build or card.
    pub const EOPNOTSUPP: Errno = Errno(95);
    /// The engine did not complete in time.
    pub const ETIMEDOUT: Errno = Errno(110);
}
