// SPDX-License-Identifier: GPL-2.0

//! The shared logic's errno values (`kmod/logic/src/errno.rs`) as kernel errors, and back.

use crate::errno::Errno;
use kernel::prelude::*;

/// Errno values of the shared logic as kernel errors.
pub(crate) fn kerr(e: Errno) -> Error {
    Error::from_errno(-e.0)
}

/// Kernel errors as the logic's errno values.
pub(crate) fn errno(e: Error) -> Errno {
    Errno(-e.to_errno())
}
