// SPDX-License-Identifier: GPL-2.0

//! `/dev/picoevbN`: the ioctl ABI (`crates/picoevb-abi`), checked by the shared logic, run on the card.

use crate::abi;
use crate::cache_policy;
use crate::card::{Card, QuarantineRoom};
use crate::cuda::{self, InUse, Surfaces};
use crate::engine::kerr;
use crate::ram_owner::{self, Member};
use crate::regcache::{self, HostPin, RegCache};
use crate::request::{self, Host};
use crate::segments::Segment;
use crate::xdma::Dir;
use crate::PicoevbDriver;
use kernel::{
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceRegistration},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

/// An open file: holds the card alive (after hot removal its ioctls fail with ENODEV) and owns the GPU
/// surfaces pinned and the host buffers cached through it.
#[pin_data]
pub(crate) struct PicoevbFile {
    card: Arc<Card>,
    #[pin]
    surfaces: Surfaces,
    cache: Arc<RegCache>,
    /// Its part in the card RAM's ownership (`ram.rs`).
    #[pin]
    ram: Mutex<Member>,
}

/// Reads a `T` from user memory at `arg`, lets `f` update it, writes it back.
fn inout<T: FromBytes + AsBytes>(arg: usize, f: impl FnOnce(&mut T) -> Result) -> Result {
    let (mut r, mut w) =
        UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<T>()).reader_writer();
    let mut v: T = r.read()?;
    f(&mut v)?;
    w.write(&v)
}

/// Writes `v` to user memory at `arg`.
fn write_out<T: AsBytes>(arg: usize, v: &T) -> Result {
    UserSlice::new(UserPtr::from_addr(arg), core::mem::size_of::<T>())
        .writer()
        .write(v)
}

/// User memory of a request faulted in before the request holds the device (unbind waits for that hold)
/// or any lock of the card: see `pin::prefault`. For writing only where the device writes: a source is
/// only read, and a write fault would dirty a shared file mapping's pages for nothing.
fn prefault(host: Host, len: u64, device_writes: bool) -> Result {
    match host {
        Host::User(addr) => crate::pin::prefault(addr, len, device_writes),
        Host::Cuda(_) => Ok(()),
    }
}

/// One side of a transfer, held for its duration: pinned user memory or a use of a GPU surface.
enum Held {
    User(HostPin),
    Gpu(InUse),
}

impl Held {
    fn is_gpu(&self) -> bool {
        matches!(self, Held::Gpu(_))
    }

    /// The bus segments of the request's `len` bytes, handed to the device (host pins were when taken).
    /// Borrowed, never built here: a surface use may be held, under which nothing may allocate (`InUse`).
    fn segments(&mut self, len: u64, to_device: bool) -> Result<&[Segment]> {
        match self {
            Held::User(p) => Ok(p.segments()),
            Held::Gpu(u) if len > u.len() => Err(EINVAL),
            Held::Gpu(u) => {
                u.sync_for_device(len, to_device);
                Ok(u.segments())
            }
        }
    }
}

impl PicoevbFile {
    /// Pins user memory now; GPU surfaces are entered by `enter` once every user pin of the request is
    /// done, so pinning can never wait on a surface this very request holds.
    fn pin_user(&self, host: Host, len: u64, to_device: bool) -> Result<Option<Held>> {
        match host {
            Host::User(addr) => Ok(Some(Held::User(RegCache::get(
                &self.cache,
                &self.card,
                addr,
                len,
                to_device,
            )?))),
            Host::Cuda(_) => Ok(None),
        }
    }

    fn enter(&self, host: Host, held: Option<Held>) -> Result<Held> {
        match (host, held) {
            (_, Some(h)) => Ok(h),
            (Host::Cuda(handle), None) => Ok(Held::Gpu(self.surfaces.enter(handle)?)),
            (Host::User(_), None) => Err(EINVAL),
        }
    }

    fn one_way(&self, dir: Dir, x: &request::OneWay) -> Result<u64> {
        prefault(x.host, x.len, dir == Dir::C2h)?;
        let _active = self.card.begin()?;
        let _ram = self.card.ram_begin(&self.ram)?;
        let mut room = self.card.quarantine_room(1)?;
        let held = self.pin_user(x.host, x.len, dir == Dir::H2c)?;
        let mut held = self.enter(x.host, held)?;
        let r = held
            .segments(x.len, dir == Dir::H2c)
            .and_then(|segs| self.card.one_way(dir, segs, x.fpga, x.len));
        self.release(held, &r, &mut room);
        r
    }

    fn round_trip(&self, x: &request::RoundTrip) -> Result<u64> {
        prefault(x.src, x.len, false)?;
        prefault(x.dst, x.len, true)?;
        let _active = self.card.begin()?;
        let _ram = self.card.ram_begin(&self.ram)?;
        let mut room = self.card.quarantine_room(2)?;
        let src = self.pin_user(x.src, x.len, true)?;
        let dst = self.pin_user(x.dst, x.len, false)?;
        // Until both sides are held, at most one surface use exists and no host pin is held with it: a
        // failed `enter` of the destination drops a source that is a host pin or nothing at all.
        let mut src = self.enter(x.src, src)?;
        let mut dst = match self.enter(x.dst, dst) {
            Ok(d) => d,
            Err(e) => {
                // The device never saw it.
                drop(src);
                return Err(e);
            }
        };
        // From here every outcome, errors included, goes through the ordered release below.
        let r = src.segments(x.len, true).and_then(|s| {
            let d = dst.segments(x.len, false)?;
            self.card.round_trip(s, d, x.len)
        });
        // Surface uses first: a provider callback may be waiting for them (cuda.rs) while holding up
        // whatever the host side's release needs (a folio lock that `unpin_user_pages_dirty_lock` takes).
        let (first, second) = if src.is_gpu() { (src, dst) } else { (dst, src) };
        self.release(first, &r, &mut room);
        self.release(second, &r, &mut room);
        r
    }

    /// Lets go of one side of a finished request. If the request failed because its engine could not be
    /// shown idle (the card is wedged), host pages stay pinned until unbind; a surface use is released,
    /// since its provider callback (munmap, close) must not wait until unbind, and bus mastering is off.
    fn release(&self, held: Held, r: &Result<u64>, room: &mut QuarantineRoom<'_>) {
        match held {
            Held::User(p) if r.is_err() && self.card.is_wedged() => self.card.quarantine(room, p),
            h => drop(h),
        }
    }

    fn abi_info(&self) -> Result<abi::AbiInfo> {
        let mut info = self.card.abi_info()?;
        info.caps |= abi::CAP_RAM_OWNER;
        if regcache::supported() {
            info.caps |= abi::CAP_REG_CACHE;
        }
        if cuda::provider_available() {
            info.caps |= if cfg!(gdr_p2p_dgpu) {
                abi::CAP_CUDA_DGPU
            } else {
                abi::CAP_CUDA_JETSON
            };
        }
        Ok(info)
    }
}

#[vtable]
impl MiscDevice for PicoevbFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        // First: the file holds the module until after its release (see helpers.c), also if we fail below.
        // SAFETY: `file` is being opened by misc_open(), which holds misc_mtx around this call.
        kernel::error::to_result(unsafe { crate::ffi::pevb_file_hold_module(file.as_ptr()) })?;
        // SAFETY: every registration of this type is the `misc` field of a `PicoevbDriver`, which probe's
        // `try_pin_init!` writes last, after `card` (fields are written in the initializer's order);
        // misc_register() lists the device under misc_mtx, which misc_open() holds around this call, so
        // `card` is written and visible here. misc_deregister() (the driver data's drop) takes misc_mtx
        // too, so the registration and the driver data around it cannot go away meanwhile.
        let drv =
            unsafe { &*kernel::container_of!(core::ptr::from_ref(misc), PicoevbDriver, misc) };
        let cache = RegCache::new()?;
        drv.card.add_cache(cache.clone())?;
        let file_cache = cache.clone();
        let file = KBox::try_pin_init(
            try_pin_init!(PicoevbFile {
                card: drv.card.clone(),
                surfaces <- Surfaces::new(),
                cache: file_cache,
                ram <- new_mutex!(Member::default()),
            }),
            GFP_KERNEL,
        );
        if file.is_err() {
            drv.card.drop_cache(&cache);
        }
        file
    }

    fn release(me: Pin<KBox<Self>>, _file: &File) {
        me.surfaces.unpin_all();
        // Emptied while the card still lists it: a PIN_CUDA meanwhile finds its buffers, in the table or
        // on their way to being unmapped, and waits for them (`Card::evict_cached`). Removal may be closing
        // it at the same time, which is harmless; its work item is freed only with the last reference,
        // which the card's list holds until `drop_cache`.
        me.cache.close();
        // The sweeps stop when the cache is dropped: here, or after unbind if a wedged card still holds
        // one of its pins (`RegCache`'s drop).
        me.card.drop_cache(&me.cache);
        // No request of this file is in flight any more: the RAM is free if this was its owner's last file.
        me.card.ram_close(&me.ram);
    }

    fn ioctl(me: Pin<&PicoevbFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let card = &me.card;
        // After hot removal a file only lets go of what it holds.
        if card.is_gone() && cmd != abi::IOC_UNPIN_CUDA {
            return Err(ENODEV);
        }
        match cmd {
            abi::IOC_LED => {
                let value = request::led_value(arg).map_err(kerr)?;
                let _active = card.begin()?;
                card.set_leds(value)?
            }
            abi::IOC_CARD_INFO => write_out(
                arg,
                &abi::CardInfo {
                    fpga_ram_size: card.ram_size,
                },
            )?,
            abi::IOC_ABI_INFO => write_out(arg, &me.abi_info()?)?,
            abi::IOC_H2C_DMA => inout(arg, |req: &mut abi::H2cDma| {
                let x = request::h2c(req, card.ram_size).map_err(kerr)?;
                req.dma_time_ns = me.one_way(Dir::H2c, &x)?;
                Ok(())
            })?,
            abi::IOC_C2H_DMA => inout(arg, |req: &mut abi::C2hDma| {
                let x = request::c2h(req, card.ram_size).map_err(kerr)?;
                req.dma_time_ns = me.one_way(Dir::C2h, &x)?;
                Ok(())
            })?,
            abi::IOC_H2C2H_DMA => inout(arg, |req: &mut abi::H2c2hDma| {
                let x = request::h2c2h(req).map_err(kerr)?;
                req.dma_time_ns = me.round_trip(&x)?;
                Ok(())
            })?,
            abi::IOC_PIN_CUDA => {
                let (mut r, mut w) = UserSlice::new(
                    UserPtr::from_addr(arg),
                    core::mem::size_of::<abi::PinCuda>(),
                )
                .reader_writer();
                let mut req: abi::PinCuda = r.read()?;
                let (va, len) = request::pin_cuda(&req).map_err(kerr)?;
                req.handle = me.surfaces.pin(card, va, len)?;
                if let Err(e) = w.write(&req) {
                    // The caller never learns the handle, so nothing may stay pinned under it.
                    let _ = me.surfaces.unpin(req.handle);
                    return Err(e);
                }
            }
            abi::IOC_REG_CACHE => inout(arg, |req: &mut abi::RegCache| {
                let op = cache_policy::parse(req).map_err(kerr)?;
                *req = me.cache.control(op);
                Ok(())
            })?,
            abi::IOC_RAM_OWNER => inout(arg, |req: &mut abi::RamOwner| {
                let op = ram_owner::parse(req).map_err(kerr)?;
                req.state = card.ram_control(&me.ram, op)?;
                Ok(())
            })?,
            abi::IOC_UNPIN_CUDA => {
                let req: abi::UnpinCuda = UserSlice::new(
                    UserPtr::from_addr(arg),
                    core::mem::size_of::<abi::UnpinCuda>(),
                )
                .reader()
                .read()?;
                me.surfaces.unpin(req.handle)?
            }
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }
}
