// SPDX-License-Identifier: GPL-2.0

//! PIN_CUDA's sequence for the 5.10 glue: `surface_pin::pin`, the 6.18 module's, run over the services
//! `cuda.c` defines (`pevb_cuda_pin_*`), exported as `pevb_cuda_pin`. Kernel build only, as
//! `engine_glue.rs`.

use crate::errno::Errno;
use crate::res;
use crate::surface_pin::{self, Services};
use core::ffi::{c_int, c_void};

/// `struct pevb_frames` (logic.h): the pages behind a range, a kvmalloc'd array owned by this value.
#[repr(C)]
pub struct Frames {
    f: *mut u64,
    n: usize,
}

impl Frames {
    /// None yet: what a service fills.
    pub fn empty() -> Self {
        Self {
            f: core::ptr::null_mut(),
            n: 0,
        }
    }
}

impl core::ops::Deref for Frames {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        if self.f.is_null() {
            return &[];
        }
        // SAFETY: a filled `Frames` owns a kvmalloc'd array of `n` values until it is dropped.
        unsafe { core::slice::from_raw_parts(self.f, self.n) }
    }
}

impl Drop for Frames {
    fn drop(&mut self) {
        // SAFETY: `self` is empty or came from a service (`pevb_cuda_pin_frames`,
        // `pevb_cache_call_frames`) and still owns its array (`pevb_cuda_pin_pin` takes it only through
        // `ManuallyDrop`).
        unsafe { pevb_frames_free(self) };
    }
}

/// A reference to a `struct pevb_surface`, handed back to C exactly once (wait, unpin or publish).
pub struct Surface(*mut c_void);

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // cuda.c. `call` is the `struct pevb_cuda_pin_call` of the running PIN_CUDA.
    fn pevb_cuda_pin_lock(call: *mut c_void);
    fn pevb_cuda_pin_unlock(call: *mut c_void);
    fn pevb_cuda_pin_frames(call: *mut c_void, out: *mut Frames) -> c_int;
    fn pevb_frames_free(f: *mut Frames);
    fn pevb_cuda_pin_overlaps(call: *mut c_void, f: *const Frames) -> bool;
    fn pevb_cuda_pin_dying(call: *mut c_void, f: *const Frames) -> *mut c_void;
    fn pevb_cuda_pin_wait_freed(s: *mut c_void);
    fn pevb_cuda_pin_evict(call: *mut c_void, f: *const Frames);
    fn pevb_cuda_pin_pin(call: *mut c_void, f: *mut Frames, out: *mut *mut c_void) -> c_int;
    fn pevb_cuda_pin_same(call: *mut c_void, s: *mut c_void) -> bool;
    fn pevb_cuda_pin_unpin(s: *mut c_void);
    fn pevb_cuda_pin_publish(call: *mut c_void, s: *mut c_void) -> c_int;
}

/// One PIN_CUDA call in `cuda.c`.
struct Call(*mut c_void);

// Every call below passes the live `struct pevb_cuda_pin_call` that `pevb_cuda_pin`'s caller owns for the
// whole sequence, and surfaces and frames as the services above handed them out.
impl Services for Call {
    type Frames = Frames;
    type Surface = Surface;
    fn lock(&mut self) {
        // SAFETY: see above.
        unsafe { pevb_cuda_pin_lock(self.0) };
    }
    fn unlock(&mut self) {
        // SAFETY: see above; the sequence holds the lock here.
        unsafe { pevb_cuda_pin_unlock(self.0) };
    }
    fn frames(&mut self) -> Result<Frames, Errno> {
        let mut f = Frames::empty();
        // SAFETY: see above; on failure `f` stays empty, which `pevb_frames_free` accepts.
        res(unsafe { pevb_cuda_pin_frames(self.0, &mut f) })?;
        Ok(f)
    }
    fn overlaps(&mut self, f: &Frames) -> bool {
        // SAFETY: see above.
        unsafe { pevb_cuda_pin_overlaps(self.0, f) }
    }
    fn dying(&mut self, f: &Frames) -> Option<Surface> {
        // SAFETY: see above; a non-null answer is a reference `wait_freed` gives back.
        let s = unsafe { pevb_cuda_pin_dying(self.0, f) };
        (!s.is_null()).then_some(Surface(s))
    }
    fn wait_freed(&mut self, dying: Surface) {
        // SAFETY: `dying` is the reference `pevb_cuda_pin_dying` took; this gives it back.
        unsafe { pevb_cuda_pin_wait_freed(dying.0) };
    }
    fn evict_cached(&mut self, f: &Frames) -> Result<(), Errno> {
        // SAFETY: see above.
        unsafe { pevb_cuda_pin_evict(self.0, f) };
        Ok(())
    }
    fn pin(&mut self, f: Frames) -> Result<Surface, Errno> {
        let mut f = core::mem::ManuallyDrop::new(f);
        let mut s = core::ptr::null_mut();
        // SAFETY: see above; `pevb_cuda_pin_pin` takes the frames' array, pinned or not.
        res(unsafe { pevb_cuda_pin_pin(self.0, &mut *f, &mut s) })?;
        Ok(Surface(s))
    }
    fn same_frames(&mut self, s: &Surface) -> bool {
        // SAFETY: see above; `s` is a pinned surface this call holds.
        unsafe { pevb_cuda_pin_same(self.0, s.0) }
    }
    fn unpin(&mut self, s: Surface) {
        // SAFETY: `s` is a surface this call pinned and holds; this gives the reference back.
        unsafe { pevb_cuda_pin_unpin(s.0) };
    }
    fn publish(&mut self, s: Surface) -> Result<u32, (Errno, Surface)> {
        // SAFETY: see above; on success the file's table has the reference, on failure it is still ours.
        let rc = unsafe { pevb_cuda_pin_publish(self.0, s.0) };
        res(rc).map(|()| rc as u32).map_err(|e| (e, s))
    }
}

/// Runs PIN_CUDA's sequence for `call`: the new handle, or a negative errno.
///
/// # Safety
/// `call` is a live `struct pevb_cuda_pin_call` (cuda.c) whose caller has faulted the range in, holds the
/// device and a provider reference, and does not hold the card's pin lock.
#[no_mangle]
pub unsafe extern "C" fn pevb_cuda_pin(call: *mut c_void) -> c_int {
    match surface_pin::pin(&mut Call(call)) {
        Ok(h) => h as c_int,
        Err(e) => crate::neg(e),
    }
}
