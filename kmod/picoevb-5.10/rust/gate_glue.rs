// SPDX-License-Identifier: GPL-2.0

//! The request gate for the 5.10 glue: the shared `gate` module (`kmod/logic/src/gate.rs`, the very file
//! the 6.18 module runs) over the kernel services `file.c` offers (`pevb_gate_*`), exported as
//! `pevb_gate_run`. Kernel build only, as `engine_glue.rs`: the order itself is host-tested in
//! `kmod/logic`.

use crate::errno::Errno;
use crate::gate::{self, Request, Services, Side, Work};
use crate::res;
use crate::xdma::Dir;
use core::ffi::{c_int, c_void};

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // file.c: the services of one transfer `x` (a `struct pevb_xfer`); `side` 0 is the source, 1 the
    // destination; `dir` 0 is H2C, 1 C2H.
    fn pevb_gate_prefault(addr: u64, len: u64, device_writes: bool) -> c_int;
    fn pevb_gate_begin(x: *mut c_void) -> c_int;
    fn pevb_gate_end(x: *mut c_void);
    fn pevb_gate_ram_begin(x: *mut c_void) -> c_int;
    fn pevb_gate_ram_end(x: *mut c_void);
    fn pevb_gate_pin(x: *mut c_void, side: u32, addr: u64, len: u64) -> c_int;
    fn pevb_gate_unpin(x: *mut c_void, side: u32);
    fn pevb_gate_quarantine(x: *mut c_void, side: u32);
    fn pevb_gate_enter(x: *mut c_void, side: u32, handle: u32, at: u64, len: u64) -> c_int;
    fn pevb_gate_exit(x: *mut c_void, side: u32);
    fn pevb_gate_one_way(
        x: *mut c_void,
        dir: u32,
        fpga: u64,
        at: u64,
        len: u64,
        card_time: bool,
        ns: *mut u64,
    ) -> c_int;
    fn pevb_gate_round_trip(x: *mut c_void, at: u64, len: u64, ns: *mut u64) -> c_int;
    fn pevb_gate_wedged(x: *mut c_void) -> bool;
}

/// One transfer of `file.c`, as the gate sees it.
struct CTransfer {
    x: *mut c_void,
}

// Every call below is sound for the `x` the glue passes to `pevb_gate_run`: a live `struct
// pevb_xfer` that only this transfer uses, and `side` 0 or 1 (`Side as u32`).
impl Services for CTransfer {
    fn prefault(&mut self, addr: u64, len: u64, device_writes: bool) -> Result<(), Errno> {
        // SAFETY: plain values; the user range is checked by the kernel's fault path.
        res(unsafe { pevb_gate_prefault(addr, len, device_writes) })
    }
    fn begin(&mut self) -> Result<(), Errno> {
        // SAFETY: see above.
        res(unsafe { pevb_gate_begin(self.x) })
    }
    fn end(&mut self) {
        // SAFETY: see above; the gate ends only a hold it began.
        unsafe { pevb_gate_end(self.x) }
    }
    fn ram_begin(&mut self) -> Result<(), Errno> {
        // SAFETY: see above.
        res(unsafe { pevb_gate_ram_begin(self.x) })
    }
    fn ram_end(&mut self) {
        // SAFETY: see above; the gate ends only a use it began.
        unsafe { pevb_gate_ram_end(self.x) }
    }
    /// A quarantined pin parks on the card's list through its own node: nothing to reserve.
    fn reserve_quarantine(&mut self, _pins: usize) -> Result<(), Errno> {
        Ok(())
    }
    fn unreserve_quarantine(&mut self) {}
    fn pin_user(&mut self, side: Side, addr: u64, len: u64) -> Result<(), Errno> {
        // SAFETY: see above.
        res(unsafe { pevb_gate_pin(self.x, side as u32, addr, len) })
    }
    fn unpin_user(&mut self, side: Side) {
        // SAFETY: see above; the gate lets go only of a pin it took.
        unsafe { pevb_gate_unpin(self.x, side as u32) }
    }
    fn quarantine(&mut self, side: Side) {
        // SAFETY: as in unpin_user.
        unsafe { pevb_gate_quarantine(self.x, side as u32) }
    }
    fn enter_surface(&mut self, side: Side, handle: u32, at: u64, len: u64) -> Result<(), Errno> {
        // SAFETY: see above.
        res(unsafe { pevb_gate_enter(self.x, side as u32, handle, at, len) })
    }
    fn exit_surface(&mut self, side: Side) {
        // SAFETY: see above; the gate ends only a use it entered.
        unsafe { pevb_gate_exit(self.x, side as u32) }
    }
    fn run(&mut self, work: Work, at: u64, len: u64) -> Result<u64, Errno> {
        let mut ns = 0;
        // SAFETY: see above; `ns` is a local the callee writes.
        res(unsafe {
            match work {
                Work::OneWay {
                    dir,
                    fpga,
                    card_time,
                } => {
                    let dir = (dir == Dir::C2h) as u32;
                    pevb_gate_one_way(self.x, dir, fpga, at, len, card_time, &mut ns)
                }
                Work::RoundTrip => pevb_gate_round_trip(self.x, at, len, &mut ns),
            }
        })?;
        Ok(ns)
    }
    fn wedged(&self) -> bool {
        // SAFETY: see above.
        unsafe { pevb_gate_wedged(self.x) }
    }
}

/// Runs the checked transfer `req` (a `gate::Request` the dispatcher made, `ioctl_glue.rs`, passed back
/// through `file.c`'s `pevb_file_transfer`) through the gate on `x`; 0 with the DMA time in `*ns`, or a
/// negative errno.
///
/// # Safety
/// `x` is a live `struct pevb_xfer` only this call uses, `req` points to a live `gate::Request`, `ns` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn pevb_gate_run(x: *mut c_void, req: *const c_void, ns: *mut u64) -> c_int {
    // SAFETY: caller's contract.
    let req = unsafe { &*req.cast::<Request>() };
    match gate::run(&mut CTransfer { x }, req) {
        Ok(t) => {
            // SAFETY: caller's contract.
            unsafe { *ns = t };
            0
        }
        Err(e) => crate::neg(e),
    }
}
