// SPDX-License-Identifier: GPL-2.0

//! The user BAR (BAR0: the LEDs and the gdr ID block) for the 5.10 glue: the typed access the 6.18 module
//! uses (`gpio::Leds` and `idblock::IdBlock` over `Regs32`, from `crates/picoevb-regs`) over the BAR
//! `main.c` maps, exported as `pevb_user_*`. Kernel build only, as `engine_glue.rs`.

use crate::channel::Regs32;
use crate::errno::Errno;
use crate::gpio::Leds;
use crate::idblock::{self, IdBlock};
use crate::ids;
use core::ffi::{c_int, c_void};

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // card.c: a 32-bit read or write of the mapped user BAR of a `struct pevb_card`.
    fn pevb_plat_user_rd(card: *mut c_void, off: u32) -> u32;
    fn pevb_plat_user_wr(card: *mut c_void, off: u32, v: u32);
}

/// The user BAR of a C `struct pevb_card`.
struct CUserBar {
    card: *mut c_void,
}

// Sound for any `card` the glue passes: a live `struct pevb_card` whose BARs are mapped (the callers hold
// the gate or run in probe, before removal can unmap them).
impl Regs32 for CUserBar {
    type Error = Errno;
    fn read32(&self, offset: usize) -> Result<u32, Errno> {
        let off = crate::bar_offset(offset, ids::BAR_USER_SIZE)?;
        // SAFETY: see above; `off` is an aligned register inside the mapped user BAR (bar_offset).
        Ok(unsafe { pevb_plat_user_rd(self.card, off) })
    }
    fn write32(&self, value: u32, offset: usize) -> Result<(), Errno> {
        let off = crate::bar_offset(offset, ids::BAR_USER_SIZE)?;
        // SAFETY: as in read32.
        unsafe { pevb_plat_user_wr(self.card, off, value) };
        Ok(())
    }
}

/// LED: writes `value` to the GPIO data register and reads it back (the write is posted).
///
/// # Safety
/// `card` is a live `struct pevb_card` with its BARs mapped.
pub(crate) unsafe fn set_leds(card: *mut c_void, value: u32) -> Result<(), Errno> {
    Leds::new(&CUserBar { card }).set(value)
}

/// The gdr ID block read now: design version and build hash, None where it does not answer as one.
///
/// # Safety
/// As for `set_leds`.
pub(crate) unsafe fn identity(card: *mut c_void) -> Result<Option<(u32, u32)>, Errno> {
    Ok(IdBlock::new(&CUserBar { card })
        .identity()?
        .map(|id| (id.design_version, id.build_hash)))
}

/// Reads the gdr ID block: 1 with `*design_version`, `*build_hash` and `*stream` (the design has the stream
/// block) set, 0 where the bitstream has none (NVIDIA's reference design), or a negative errno.
///
/// # Safety
/// `card` as for `set_leds`; `design_version`, `build_hash` and `stream` writable.
#[no_mangle]
pub unsafe extern "C" fn pevb_user_identity(
    card: *mut c_void,
    design_version: *mut u32,
    build_hash: *mut u32,
    stream: *mut u32,
) -> c_int {
    match IdBlock::new(&CUserBar { card }).identity() {
        Ok(Some(id)) => {
            // SAFETY: caller's contract.
            unsafe {
                *design_version = id.design_version;
                *build_hash = id.build_hash;
                *stream = u32::from(id.caps & idblock::CAP_STREAM != 0);
            }
            1
        }
        Ok(None) => 0,
        Err(e) => crate::neg(e),
    }
}

/// IOC_STREAM on the card's stream block (`stream_ctl::control`).
///
/// # Safety
/// As for `set_leds`, held (the gate) by the caller.
pub(crate) unsafe fn stream(
    card: *mut c_void,
    op: crate::stream_ctl::Op,
) -> Result<crate::abi::Stream, Errno> {
    crate::stream_ctl::control(&CUserBar { card }, op).map_err(|e| match e {
        crate::stream_ctl::Refused::Invalid => Errno::EINVAL,
        crate::stream_ctl::Refused::Access(e) => e,
    })
}

/// Disables the stream source (a stopping C2H blocked on it then ends: engine.c's `pevb_plat_unblock`); 0
/// or a negative errno.
///
/// # Safety
/// `card` as for `set_leds`, whose design has the stream block.
#[no_mangle]
pub unsafe extern "C" fn pevb_user_stream_off(card: *mut c_void) -> c_int {
    crate::stream::Stream::new(&CUserBar { card })
        .enable_source(false)
        .map_or_else(crate::neg, |()| 0)
}
