// SPDX-License-Identifier: GPL-2.0

//! Probe's checks, the interrupt's service and removal's order for the 5.10 glue: the shared `probe`,
//! `interrupt` and `removal` modules (`kmod/logic/src/`, the very files the 6.18 module runs) over the DMA
//! BAR and the card services `main.c` and `card.c` offer, exported as `pevb_probe_*`, `pevb_irq_service`
//! and `pevb_card_remove`. Kernel build only, as `engine_glue.rs`.

use crate::channel::IrqRegs;
use crate::engine_glue::{pevb_engine_stop, DmaBar};
use crate::probe::{self, Refused};
use crate::removal::{self, Services};
use crate::xdma::Dir;
use crate::{interrupt, neg};
use core::ffi::{c_char, c_int, c_void};

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // card.c and main.c: removal's steps on a card `card` (a `struct pevb_card`).
    fn pevb_card_close(card: *mut c_void);
    fn pevb_card_wedge(card: *mut c_void);
    fn pevb_card_wake(card: *mut c_void);
    fn pevb_card_drain(card: *mut c_void);
    fn pevb_card_release_quarantine(card: *mut c_void);
    fn pevb_card_detach_surfaces(card: *mut c_void);
    fn pevb_card_close_caches(card: *mut c_void);
    fn pevb_card_release_tables(card: *mut c_void);
}

/// Engine `d`'s index in the C glue's `eng[]`.
fn idx(d: Dir) -> u32 {
    match d {
        Dir::H2c => 0,
        Dir::C2h => 1,
    }
}

/// Stops both engines and resets the IRQ block: 0, -EIO if an engine was not shown idle, or the errno of
/// a failed register access.
///
/// # Safety
/// `card` is a live `struct pevb_card` whose DMA BAR is mapped, and no request runs on it.
#[no_mangle]
pub unsafe extern "C" fn pevb_probe_quiesce(card: *mut c_void) -> c_int {
    // SAFETY: caller's contract, for each engine.
    let stop = |d| unsafe { pevb_engine_stop(card, idx(d)) };
    match probe::quiesce(stop, || IrqRegs::new(&DmaBar(card)).reset()) {
        Ok(()) => 0,
        Err(Refused::Access(e)) => neg(e),
        Err(_) => neg(crate::errno::Errno::EIO),
    }
}

/// Checks every XDMA block's identifier: 0; -ENODEV with the block's name (`*name`, `*name_len` bytes, not
/// NUL-terminated) and what it answered (`*id`) for the log; or the errno of a failed register access.
///
/// # Safety
/// `card` as for `pevb_probe_quiesce`; `name`, `name_len` and `id` writable.
#[no_mangle]
pub unsafe extern "C" fn pevb_probe_identify(
    card: *mut c_void,
    name: *mut *const c_char,
    name_len: *mut usize,
    id: *mut u32,
) -> c_int {
    match probe::identify(&DmaBar(card)) {
        Ok(()) => 0,
        Err(Refused::Foreign { name: n, id: v }) => {
            // SAFETY: caller's contract.
            unsafe {
                *name = n.as_ptr().cast();
                *name_len = n.len();
                *id = v;
            }
            neg(crate::errno::Errno::ENODEV)
        }
        Err(Refused::Access(e)) => neg(e),
        Err(Refused::Busy) => neg(crate::errno::Errno::EIO),
    }
}

/// One interrupt: a bit per engine that raised it (bit 0 H2C, bit 1 C2H), its run's status in
/// `status[idx]`; 0: not this card's.
///
/// # Safety
/// `card` as for `pevb_probe_quiesce` (the handler is freed before the BARs are unmapped); `status` is
/// writable for two values.
#[no_mangle]
pub unsafe extern "C" fn pevb_irq_service(card: *mut c_void, status: *mut u32) -> u32 {
    let Some(raised) = interrupt::service(&DmaBar(card)) else {
        return 0;
    };
    let mut mask = 0;
    for (i, st) in raised.into_iter().enumerate() {
        if let Some(st) = st {
            // SAFETY: caller's contract; `i` is 0 or 1.
            unsafe { *status.add(i) = st };
            mask |= 1 << i;
        }
    }
    mask
}

/// The removal of one card, as `main.c` and `card.c` carry out each step.
struct CRemoval(*mut c_void);

// Every call is sound for the card `pevb_card_remove` was given (its contract).
impl Services for CRemoval {
    fn close(&mut self) {
        // SAFETY: see above.
        unsafe { pevb_card_close(self.0) }
    }
    fn quiesce(&mut self) -> bool {
        // SAFETY: see above; the gate is closed, so no new chain starts.
        unsafe { pevb_probe_quiesce(self.0) == 0 }
    }
    fn wedge(&mut self) {
        // SAFETY: see above.
        unsafe { pevb_card_wedge(self.0) }
    }
    fn wake_waiters(&mut self) {
        // SAFETY: see above.
        unsafe { pevb_card_wake(self.0) }
    }
    fn drain(&mut self) {
        // SAFETY: see above.
        unsafe { pevb_card_drain(self.0) }
    }
    fn release_quarantine(&mut self) {
        // SAFETY: see above; no request is left and the engines are stopped or cut off.
        unsafe { pevb_card_release_quarantine(self.0) }
    }
    fn detach_surfaces(&mut self) {
        // SAFETY: as above.
        unsafe { pevb_card_detach_surfaces(self.0) }
    }
    fn close_caches(&mut self) {
        // SAFETY: as above.
        unsafe { pevb_card_close_caches(self.0) }
    }
    fn release_tables(&mut self) {
        // SAFETY: as above.
        unsafe { pevb_card_release_tables(self.0) }
    }
}

/// Hot removal or unbind of `card`, while its BARs are still mapped (`kmod/logic/src/removal.rs`).
///
/// # Safety
/// `card` is a live, probed `struct pevb_card` being removed, from the PCI remove callback only.
#[no_mangle]
pub unsafe extern "C" fn pevb_card_remove(card: *mut c_void) {
    removal::remove(&mut CRemoval(card));
}
