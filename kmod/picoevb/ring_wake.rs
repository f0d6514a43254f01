// SPDX-License-Identifier: GPL-2.0

//! A stream ring's eventfd (`RING_EVENTFD`): the context the caller's descriptor names, referenced for
//! the ring's ioctl (`ring_wake.c`).

use crate::errno::Errno;
use crate::ffi;
use crate::ioctl;
use core::ptr::NonNull;
use kernel::bindings;

/// A referenced eventfd context; dropping it lets go of the reference.
pub(crate) struct RingEventfd(NonNull<bindings::eventfd_ctx>);

impl RingEventfd {
    /// The eventfd descriptor `fd` of the calling process names (EBADF: none; EINVAL: not an eventfd).
    pub(crate) fn get(fd: i32) -> Result<Self, Errno> {
        let mut ctx = core::ptr::null_mut();
        // SAFETY: `ctx` is ours and writable; the C looks the descriptor up in the caller's table and
        // writes a referenced context only when it returns 0.
        match unsafe { ffi::pevb_eventfd_get(fd, &mut ctx) } {
            0 => NonNull::new(ctx).map(RingEventfd).ok_or(Errno::EINVAL),
            e => Err(Errno(-e)),
        }
    }
}

impl ioctl::Eventfd for RingEventfd {
    fn signal(&self) {
        // SAFETY: the context is referenced until `drop`. Called from the ring's ioctl, process context,
        // holding no lock of the driver's: eventfd_signal runs its waiters' wake-up callbacks (epoll's,
        // say) under the queue's lock, and those may take locks of their own.
        unsafe { ffi::pevb_eventfd_signal(self.0.as_ptr()) }
    }
}

impl Drop for RingEventfd {
    fn drop(&mut self) {
        // SAFETY: the reference `get` took, let go of once.
        unsafe { ffi::pevb_eventfd_put(self.0.as_ptr()) }
    }
}
