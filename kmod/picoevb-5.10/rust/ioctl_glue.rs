// SPDX-License-Identifier: GPL-2.0

//! The ioctls of `/dev/picoevbN` for the 5.10 glue: the shared dispatcher (`kmod/logic/src/ioctl.rs`, the
//! very file the 6.18 module runs) over the kernel services of one open file that `file.c` and the rest of
//! the C glue offer, exported as `pevb_ioctl_run`. Kernel build only, as `gate_glue.rs`: which command does
//! what, in which order and with the card held or not, is host-tested in `kmod/logic`.

use crate::channel::Regs32;
use crate::engine_glue::DmaBar;
use crate::errno::Errno;
use crate::ioctl::{self, Backing, Facts, Features, Provider, Services};
use crate::surface::PevbFacts;
use crate::{
    abi, cache_glue, cache_policy, gate, neg, ram_owner, res, stream_ctl, user_glue, xdma,
};
use core::ffi::{c_int, c_void};

// C services, declared for C in `../services.h` (cbindgen skips this block).
/// cbindgen:ignore
#[allow(unused_doc_comments)]
extern "C" {
    // file.c: one open file `pf` (a `struct pevb_file`), its card and what it holds.
    fn pevb_file_card(pf: *mut c_void) -> *mut c_void;
    fn pevb_file_cache(pf: *mut c_void) -> *mut c_void;
    fn pevb_file_transfer(pf: *mut c_void, req: *const c_void, ns: *mut u64) -> c_int;
    fn pevb_file_pin(pf: *mut c_void, host: bool, va: u64, len: u64) -> c_int;
    fn pevb_file_unpin(pf: *mut c_void, handle: u32) -> c_int;
    fn pevb_file_ram(pf: *mut c_void, op: u32, state: *mut u32) -> c_int;
    fn pevb_copy_in(arg: u64, buf: *mut c_void, len: usize) -> c_int;
    fn pevb_copy_out(arg: u64, buf: *const c_void, len: usize) -> c_int;
    fn pevb_file_surface_len(pf: *mut c_void, handle: u32, len: *mut u64) -> c_int;
    fn pevb_file_interrupted() -> bool;
    fn pevb_file_sleep_us(us: u32);
    // card.c, engine.c: the card `card` (a `struct pevb_card`).
    fn pevb_card_facts(card: *mut c_void) -> *const PevbFacts;
    fn pevb_card_begin(card: *mut c_void) -> c_int;
    fn pevb_card_end(card: *mut c_void);
    fn pevb_card_gone(card: *mut c_void) -> bool;
    // cuda.c, prefault.c, ring_wake.c, cpin.c.
    fn pevb_provider_available() -> bool;
    fn pevb_cpin_supported() -> bool;
    fn pevb_user_prefault(uaddr: u64, len: u64, write: bool) -> c_int;
    fn pevb_user_load_u64(uaddr: u64, v: *mut u64) -> c_int;
    fn pevb_user_store_u64(uaddr: u64, v: u64) -> c_int;
    fn pevb_eventfd_get(fd: c_int, ctx: *mut *mut c_void) -> c_int;
    fn pevb_eventfd_signal(ctx: *mut c_void);
    fn pevb_eventfd_put(ctx: *mut c_void);
}

/// A stream ring's eventfd (`RING_EVENTFD`): a referenced `struct eventfd_ctx`, let go of when dropped.
struct CEventfd(*mut c_void);

impl ioctl::Eventfd for CEventfd {
    fn signal(&self) {
        // SAFETY: the context is referenced until `drop`. Called from the ring's ioctl, process context,
        // holding no lock of the driver's: eventfd_signal runs its waiters' wake-up callbacks (epoll's,
        // say) under the queue's lock, and those may take locks of their own.
        unsafe { pevb_eventfd_signal(self.0) }
    }
}

impl Drop for CEventfd {
    fn drop(&mut self) {
        // SAFETY: the reference `pevb_eventfd_get` took, let go of once.
        unsafe { pevb_eventfd_put(self.0) }
    }
}

/// One ioctl on one open file.
struct CFile {
    pf: *mut c_void,
    card: *mut c_void,
}

// Every call below is sound for the `pf` `file.c` passes to `pevb_ioctl_run`: an open file of a card
// whose `struct pevb_card` the file holds (a reference) for as long as it is open, so `card` is live; its
// BARs stay mapped until removal, and every register access below runs with the card held (`begin`), which
// removal waits for before it unmaps them.
impl Services for CFile {
    fn gone(&self) -> bool {
        // SAFETY: see above.
        unsafe { pevb_card_gone(self.card) }
    }
    fn copy_in(&mut self, arg: usize, buf: &mut [u8]) -> Result<(), Errno> {
        // SAFETY: `buf` is valid for writing its length; the user side is checked by copy_from_user.
        res(unsafe { pevb_copy_in(arg as u64, buf.as_mut_ptr().cast(), buf.len()) })
    }
    fn copy_out(&mut self, arg: usize, buf: &[u8]) -> Result<(), Errno> {
        // SAFETY: `buf` is valid for reading its length; the user side is checked by copy_to_user.
        res(unsafe { pevb_copy_out(arg as u64, buf.as_ptr().cast(), buf.len()) })
    }
    fn begin(&mut self) -> Result<(), Errno> {
        // SAFETY: see above.
        res(unsafe { pevb_card_begin(self.card) })
    }
    fn end(&mut self) {
        // SAFETY: see above; the dispatcher ends only a hold it began.
        unsafe { pevb_card_end(self.card) }
    }
    fn facts(&self) -> Facts {
        // SAFETY: see above; probe wrote the facts before it published the card, and nothing writes them
        // after.
        let f = unsafe { &*pevb_card_facts(self.card) };
        Facts {
            card_index: f.card_index,
            ram_size: f.ram_size,
            msi: f.msi != 0,
            id_block: f.id_block != 0,
            stream: f.stream != 0,
        }
    }
    fn features(&self) -> Features {
        // regcache.c's cached pins and host surfaces are watched pins, which need the mmu interval
        // notifier: not on 4.x.
        // SAFETY: a plain query.
        let watched = unsafe { pevb_cpin_supported() };
        Features {
            // SAFETY: a plain query.
            provider: unsafe { pevb_provider_available() }.then_some(Provider::Jetson),
            reg_cache: watched,
            host_surface: watched,
            dmabuf: false,
        }
    }
    fn prefault(&mut self, addr: u64, len: u64, device_writes: bool) -> Result<(), Errno> {
        // SAFETY: plain values; the user range is checked by the kernel's fault path.
        res(unsafe { pevb_user_prefault(addr, len, device_writes) })
    }
    fn config_id(&mut self) -> Result<u32, Errno> {
        DmaBar(self.card).read32(xdma::block(xdma::TARGET_CONFIG, 0))
    }
    fn vanished(&self) -> bool {
        crate::engine_glue::vanished(self.card)
    }
    fn identity(&mut self) -> Result<Option<(u32, u32)>, Errno> {
        // SAFETY: see above (held).
        unsafe { user_glue::identity(self.card) }
    }
    fn set_leds(&mut self, value: u32) -> Result<(), Errno> {
        // SAFETY: see above (held).
        unsafe { user_glue::set_leds(self.card, value) }
    }
    fn transfer(&mut self, req: &gate::Request) -> Result<u64, Errno> {
        let mut ns = 0;
        // SAFETY: see above; `req` outlives the call, which hands it back to `pevb_gate_run` unchanged.
        res(unsafe { pevb_file_transfer(self.pf, core::ptr::from_ref(req).cast(), &mut ns) })?;
        Ok(ns)
    }
    fn pin(&mut self, backing: Backing, va: u64, len: u64) -> Result<u32, Errno> {
        // SAFETY: see above.
        let rc = unsafe { pevb_file_pin(self.pf, backing == Backing::Host, va, len) };
        res(rc).map(|()| rc as u32)
    }
    /// Never asked: `features` says no dma-buf, which the dispatcher refuses first.
    fn import_dmabuf(&mut self, _fd: i32, _offset: u64, _len: u64) -> Result<(u32, u32), Errno> {
        Err(Errno::ENOTTY)
    }
    fn unpin(&mut self, handle: u32) -> Result<(), Errno> {
        // SAFETY: see above.
        res(unsafe { pevb_file_unpin(self.pf, handle) })
    }
    fn reg_cache(&mut self, op: cache_policy::Op) -> abi::RegCache {
        // SAFETY: see above; the file's cache lives as long as the file, and this thread holds no lock.
        unsafe { cache_glue::control(pevb_file_cache(self.pf), op) }
    }
    fn stream(&mut self, op: stream_ctl::Op) -> Result<abi::Stream, Errno> {
        // SAFETY: see above (held).
        unsafe { user_glue::stream(self.card, op) }
    }
    fn ram_owner(&mut self, op: ram_owner::Op) -> Result<u32, Errno> {
        let op = match op {
            ram_owner::Op::Query => abi::RAM_QUERY,
            ram_owner::Op::Claim => abi::RAM_CLAIM,
            ram_owner::Op::Release => abi::RAM_RELEASE,
        };
        let mut state = 0;
        // SAFETY: see above; held for a claim (the dispatcher), whose scrub runs the H2C engine.
        res(unsafe { pevb_file_ram(self.pf, op, &mut state) })?;
        Ok(state)
    }
    fn surface_len(&mut self, handle: u32) -> Result<u64, Errno> {
        let mut len = 0;
        // SAFETY: see above; `len` is ours.
        res(unsafe { pevb_file_surface_len(self.pf, handle, &mut len) })?;
        Ok(len)
    }
    fn load_user(&mut self, addr: u64) -> Result<u64, Errno> {
        let mut v = 0;
        // SAFETY: `v` is ours; the user address is checked by get_user.
        res(unsafe { pevb_user_load_u64(addr, &mut v) })?;
        Ok(v)
    }
    fn store_user(&mut self, addr: u64, v: u64) -> Result<(), Errno> {
        // SAFETY: the user address is checked by put_user.
        res(unsafe { pevb_user_store_u64(addr, v) })
    }
    fn interrupted(&self) -> bool {
        // SAFETY: a plain query of the current task.
        unsafe { pevb_file_interrupted() }
    }
    fn sleep_us(&mut self, us: u32) {
        // SAFETY: sleeps; the dispatcher holds nothing here.
        unsafe { pevb_file_sleep_us(us) }
    }
    type Eventfd = CEventfd;
    fn eventfd(&mut self, fd: i32) -> Result<CEventfd, Errno> {
        let mut ctx = core::ptr::null_mut();
        // SAFETY: `ctx` is ours; the C looks the descriptor up in the caller's table and writes a
        // referenced context only when it returns 0.
        res(unsafe { pevb_eventfd_get(fd, &mut ctx) })?;
        Ok(CEventfd(ctx))
    }
}

/// Runs ioctl `cmd` with argument `arg` on the open file `pf`: 0 or a negative errno.
///
/// # Safety
/// `pf` is the `struct pevb_file` of an open file (its `private_data`), for the whole call.
#[no_mangle]
pub unsafe extern "C" fn pevb_ioctl_run(pf: *mut c_void, cmd: u32, arg: usize) -> c_int {
    // SAFETY: caller's contract.
    let card = unsafe { pevb_file_card(pf) };
    match ioctl::run(&mut CFile { pf, card }, cmd, arg) {
        Ok(()) => 0,
        Err(e) => neg(e),
    }
}
