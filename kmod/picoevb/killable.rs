// SPDX-License-Identifier: GPL-2.0

//! A mutex whose waiters can be killed (`mutex_lock_killable`), which the 6.18 `kernel` crate's `Mutex`
//! does not offer. A request waiting for an engine waits out someone else's whole request, bounded only
//! by that request's timeout, and every request queued before it: a process killed meanwhile must be
//! able to go (the 5.10 glue takes the same locks with `mutex_lock_killable`).

use crate::ffi;
use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use kernel::{bindings, prelude::*, types::Opaque};

#[pin_data]
pub(crate) struct KillableMutex<T> {
    /// A kernel `struct mutex`: pinned, since its wait list points into it.
    #[pin]
    mutex: Opaque<bindings::mutex>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a `Guard`, which exists only while this thread holds the
// mutex; `T: Send` lets whichever thread holds it use (or drop) the data.
unsafe impl<T: Send> Send for KillableMutex<T> {}
// SAFETY: as above: shared references only ever lock.
unsafe impl<T: Send> Sync for KillableMutex<T> {}

impl<T> KillableMutex<T> {
    /// A mutex of lock class `class` (`helpers.c`'s `pevb_mutex_init`: 0 the H2C engine's, 1 the C2H's).
    /// The class keys are static in `helpers.c`, since the 6.18 `kernel` crate keeps its own
    /// `LockClassKey` pointer to itself.
    pub(crate) fn new(t: T, class: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes while the closure runs and stays pinned after it;
            // `pevb_mutex_init` only initialises it, with a static name and key (lockdep keeps both).
            mutex <- Opaque::ffi_init(|slot| unsafe { ffi::pevb_mutex_init(slot, class) }),
            data: UnsafeCell::new(t),
        })
    }

    /// Locks, or gives up with EINTR once the task has a fatal signal.
    pub(crate) fn lock_killable(&self) -> Result<Guard<'_, T>> {
        // SAFETY: the mutex was initialised in `new` and is pinned for as long as `self` lives.
        kernel::error::to_result(unsafe { ffi::pevb_mutex_lock_killable(self.mutex.get()) })?;
        Ok(Guard(self, PhantomData))
    }

    /// Locks, however long it takes: for removal, which waits only for requests already ending.
    pub(crate) fn lock(&self) -> Guard<'_, T> {
        // SAFETY: as in `lock_killable`.
        unsafe { ffi::pevb_mutex_lock(self.mutex.get()) };
        Guard(self, PhantomData)
    }
}

/// The mutex held; unlocked when dropped, by the task that locked it (so never `Send`).
pub(crate) struct Guard<'a, T>(&'a KillableMutex<T>, PhantomData<*mut ()>);

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the mutex, so no other guard exists and nothing else reaches the
        // data; shared references handed out here live no longer than the guard.
        unsafe { &*self.0.data.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.0.data.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this guard's task locked the mutex (`lock`/`lock_killable`) and has not unlocked it.
        unsafe { bindings::mutex_unlock(self.0.mutex.get()) };
    }
}
