// SPDX-License-Identifier: GPL-2.0

//! `/dev/picoevbN`: the ioctl ABI (`crates/picoevb-abi`), checked by the shared logic, run on the card.

use crate::abi;
use crate::book::QuarantineRoom;
use crate::cache_policy;
use crate::card::Card;
use crate::cuda::{self, Backing, InUse, SurfaceBook, Surfaces};
use crate::errno::Errno;
use crate::errors::{errno, kerr};
use crate::gate::{self, Side, Work};
use crate::ioctl;
use crate::port::Active;
use crate::ram::RamUse;
use crate::ram_owner::{self, Member};
use crate::regcache::{self, HostPin, RegCache};
use crate::ring_wake::RingEventfd;
use crate::segments::Cursor;
use crate::stream_ctl;
use crate::PicoevbDriver;
use kernel::{
    error::to_result,
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceRegistration},
    new_mutex,
    prelude::*,
    sync::{Arc, Mutex},
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

/// One side of a transfer, held for its duration: pinned user memory or a use of a GPU surface.
enum Held {
    User(HostPin),
    Gpu(InUse),
}

impl Held {
    /// The bus segments of the window at offset `at` of the request, handed to the device when taken: a
    /// host pin holds just the window, a surface use the whole surface. Borrowed, never built here: a
    /// surface use may be held, under which nothing may allocate (`InUse`).
    fn cursor(&self, at: u64) -> Result<Cursor<'_>> {
        match self {
            Held::User(p) => Ok(Cursor::new(p.segments())),
            Held::Gpu(u) => {
                let mut c = Cursor::new(u.segments());
                c.skip(at).map_err(kerr)?;
                Ok(c)
            }
        }
    }
}

/// One transfer's holds, taken and let go of in the order the shared gate decides
/// (`kmod/logic/src/gate.rs`): this glue only supplies the kernel services.
struct Transfer<'a> {
    file: &'a PicoevbFile,
    active: Option<Active<'a>>,
    ram: Option<RamUse<'a>>,
    room: Option<QuarantineRoom<'a>>,
    /// Indexed by `Side`.
    held: [Option<Held>; 2],
}

impl<'a> Transfer<'a> {
    fn new(file: &'a PicoevbFile) -> Self {
        Transfer {
            file,
            active: None,
            ram: None,
            room: None,
            held: [None, None],
        }
    }

    fn take(&mut self, side: Side) -> Option<Held> {
        self.held[side as usize].take()
    }

    fn cursor(&self, side: Side, at: u64) -> Result<Cursor<'_>> {
        self.held[side as usize].as_ref().ok_or(EINVAL)?.cursor(at)
    }

    fn run_engines(&self, work: Work, at: u64, len: u64) -> Result<u64> {
        let card = &self.file.card;
        match work {
            Work::OneWay {
                dir,
                fpga,
                card_time,
            } => card.one_way(
                dir,
                &mut self.cursor(Side::of(dir), at)?,
                fpga,
                len,
                card_time,
            ),
            Work::RoundTrip => {
                let (mut s, mut d) = (self.cursor(Side::Src, at)?, self.cursor(Side::Dst, at)?);
                card.round_trip(&mut s, &mut d, len)
            }
        }
    }
}

impl gate::Services for Transfer<'_> {
    /// See `pin::prefault`: for writing only where the device writes, since a source is only read and a
    /// write fault would dirty a shared file mapping's pages for nothing.
    fn prefault(&mut self, addr: u64, len: u64, device_writes: bool) -> Result<(), Errno> {
        crate::pin::prefault(addr, len, device_writes).map_err(errno)
    }
    fn begin(&mut self) -> Result<(), Errno> {
        self.active = Some(self.file.card.begin().map_err(errno)?);
        Ok(())
    }
    fn end(&mut self) {
        self.active = None;
    }
    fn ram_begin(&mut self) -> Result<(), Errno> {
        self.ram = Some(self.file.card.ram_begin(&self.file.ram).map_err(errno)?);
        Ok(())
    }
    fn ram_end(&mut self) {
        self.ram = None;
    }
    fn reserve_quarantine(&mut self, pins: usize) -> Result<(), Errno> {
        self.room = Some(self.file.card.book().quarantine_room(pins).map_err(errno)?);
        Ok(())
    }
    fn unreserve_quarantine(&mut self) {
        self.room = None;
    }
    fn pin_user(&mut self, side: Side, addr: u64, len: u64) -> Result<(), Errno> {
        let f = self.file;
        let (book, dev) = (&**f.card.book(), f.card.dev());
        let pin = RegCache::get(&f.cache, book, dev, addr, len, side.to_device()).map_err(errno)?;
        self.held[side as usize] = Some(Held::User(pin));
        Ok(())
    }
    fn unpin_user(&mut self, side: Side) {
        drop(self.take(side));
    }
    fn quarantine(&mut self, side: Side) {
        match (self.take(side), self.room.as_mut()) {
            (Some(Held::User(pin)), Some(room)) => {
                let card = &self.file.card;
                card.book().quarantine(card.dev(), room, pin)
            }
            // Unreachable: the gate reserves the room before it pins anything. Never unpin what the
            // engine may still write: leak it instead.
            (Some(h), None) => core::mem::forget(h),
            (h, _) => drop(h),
        }
    }
    fn enter_surface(&mut self, side: Side, handle: u32, at: u64, len: u64) -> Result<(), Errno> {
        let to_device = side.to_device();
        let u = self.file.surfaces.enter(handle, at, len, to_device);
        self.held[side as usize] = Some(Held::Gpu(u.map_err(errno)?));
        Ok(())
    }
    fn exit_surface(&mut self, side: Side) {
        drop(self.take(side));
    }
    fn run(&mut self, work: Work, at: u64, len: u64) -> Result<u64, Errno> {
        self.run_engines(work, at, len).map_err(errno)
    }
    fn wedged(&self) -> bool {
        self.file.card.is_wedged()
    }
}

/// The kernel services of one ioctl; what runs, in which order and with the card held or not, is
/// `kmod/logic/src/ioctl.rs`'s.
struct Call<'a> {
    file: &'a PicoevbFile,
    /// The card's hold between `begin` and `end`.
    active: Option<Active<'a>>,
}

impl Call<'_> {
    fn active(&self) -> Result<&Active<'_>, Errno> {
        self.active.as_ref().ok_or(Errno::ENODEV)
    }
}

impl ioctl::Services for Call<'_> {
    fn gone(&self) -> bool {
        self.file.card.is_gone()
    }
    fn copy_in(&mut self, arg: usize, buf: &mut [u8]) -> Result<(), Errno> {
        UserSlice::new(UserPtr::from_addr(arg), buf.len())
            .reader()
            .read_slice(buf)
            .map_err(errno)
    }
    fn copy_out(&mut self, arg: usize, buf: &[u8]) -> Result<(), Errno> {
        UserSlice::new(UserPtr::from_addr(arg), buf.len())
            .writer()
            .write_slice(buf)
            .map_err(errno)
    }
    fn begin(&mut self) -> Result<(), Errno> {
        self.active = Some(self.file.card.begin().map_err(errno)?);
        Ok(())
    }
    fn end(&mut self) {
        self.active = None;
    }
    fn facts(&self) -> ioctl::Facts {
        self.file.card.facts()
    }
    fn features(&self) -> ioctl::Features {
        // The cache's pins and host surfaces are both watched pins (watched.c).
        let watched = regcache::supported();
        ioctl::Features {
            provider: cuda::provider_available().then_some(if cfg!(gdr_p2p_dgpu) {
                ioctl::Provider::Dgpu
            } else {
                ioctl::Provider::Jetson
            }),
            reg_cache: watched,
            host_surface: watched,
            // SAFETY: a plain query of the C build.
            dmabuf: unsafe { crate::ffi::pevb_p2p_dmabuf_supported() },
        }
    }
    /// See `pin::prefault`: for writing only where the device writes.
    fn prefault(&mut self, addr: u64, len: u64, device_writes: bool) -> Result<(), Errno> {
        crate::pin::prefault(addr, len, device_writes).map_err(errno)
    }
    fn config_id(&mut self) -> Result<u32, Errno> {
        self.file.card.config_id().map_err(errno)
    }
    fn vanished(&self) -> bool {
        self.file.card.vanished()
    }
    fn identity(&mut self) -> Result<Option<(u32, u32)>, Errno> {
        self.file.card.identity().map_err(errno)
    }
    fn set_leds(&mut self, value: u32) -> Result<(), Errno> {
        self.file.card.set_leds(value).map_err(errno)
    }
    fn transfer(&mut self, req: &gate::Request) -> Result<u64, Errno> {
        gate::run(&mut Transfer::new(self.file), req)
    }
    fn pin(&mut self, backing: ioctl::Backing, va: u64, len: u64) -> Result<u32, Errno> {
        let backing = match backing {
            ioctl::Backing::Provider => Backing::Provider,
            ioctl::Backing::Host => Backing::Host,
        };
        let card = &self.file.card;
        let book: Arc<dyn SurfaceBook> = card.book().clone();
        let active = self.active()?;
        self.file
            .surfaces
            .pin(&book, card.dev(), active, backing, va, len)
            .map_err(errno)
    }
    fn import_dmabuf(&mut self, fd: i32, offset: u64, len: u64) -> Result<(u32, u32), Errno> {
        let card = &self.file.card;
        let book: Arc<dyn SurfaceBook> = card.book().clone();
        let active = self.active()?;
        self.file
            .surfaces
            .import(&book, card.dev(), active, fd, offset, len)
            .map_err(errno)
    }
    fn unpin(&mut self, handle: u32) -> Result<(), Errno> {
        self.file.surfaces.unpin(handle).map_err(errno)
    }
    fn reg_cache(&mut self, op: cache_policy::Op) -> abi::RegCache {
        self.file.cache.control(op)
    }
    fn stream(&mut self, op: stream_ctl::Op) -> Result<abi::Stream, Errno> {
        self.file.card.stream_control(op).map_err(errno)
    }
    fn ram_owner(&mut self, op: ram_owner::Op) -> Result<u32, Errno> {
        self.file
            .card
            .ram_control(&self.file.ram, op)
            .map_err(errno)
    }
    fn surface_len(&mut self, handle: u32) -> Result<u64, Errno> {
        self.file.surfaces.surface_len(handle).map_err(errno)
    }
    fn load_user(&mut self, addr: u64) -> Result<u64, Errno> {
        let mut v = 0;
        // SAFETY: `v` is ours and writable; the C checks the user address (get_user).
        to_result(unsafe { crate::ffi::pevb_user_load_u64(addr, &mut v) }).map_err(errno)?;
        Ok(v)
    }
    fn store_user(&mut self, addr: u64, v: u64) -> Result<(), Errno> {
        // SAFETY: the C checks the user address (put_user).
        to_result(unsafe { crate::ffi::pevb_user_store_u64(addr, v) }).map_err(errno)
    }
    fn interrupted(&self) -> bool {
        kernel::current!().signal_pending()
    }
    fn sleep_us(&mut self, us: u32) {
        kernel::time::delay::fsleep(kernel::time::Delta::from_micros(i64::from(us)));
    }
    type Eventfd = RingEventfd;
    fn eventfd(&mut self, fd: i32) -> Result<RingEventfd, Errno> {
        RingEventfd::get(fd)
    }
}

#[vtable]
impl MiscDevice for PicoevbFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        // First: the file holds the module until after its release (see helpers.c), also if we fail below.
        // SAFETY: `file` is being opened, by misc_open() (`/dev/picoevb-miscN`) or by `node.c`'s open
        // (`/dev/picoevbN`), each of which holds its lock around this call.
        kernel::error::to_result(unsafe { crate::ffi::pevb_file_hold_module(file.as_ptr()) })?;
        // SAFETY: every registration of this type is the `misc` field of a `PicoevbDriver`, which probe's
        // `try_pin_init!` writes last, after `card` (fields are written in the initializer's order). The
        // two ways in:
        // - misc_open() holds misc_mtx around this call; misc_register() listed the device under it, and
        //   misc_deregister() (the driver data's drop) takes it too.
        // - `node.c`'s open holds `pevb_node_lock` around this call; its door was opened after the driver
        //   data was complete (probe's end), and the driver data's drop shuts it under that lock before
        //   anything else (`node` is its first field).
        // So `card` is written and visible here, and neither the registration nor the driver data around
        // it can go away meanwhile.
        let drv =
            unsafe { &*kernel::container_of!(core::ptr::from_ref(misc), PicoevbDriver, misc) };
        let cache = RegCache::new()?;
        let book = drv.card.book();
        book.add_cache(cache.clone())?;
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
            book.drop_cache(&cache);
        }
        file
    }

    fn release(me: Pin<KBox<Self>>, _file: &File) {
        me.surfaces.unpin_all();
        // Emptied while the card still lists it: a PIN_CUDA meanwhile finds its buffers, in the table or
        // on their way to being unmapped, and waits for them (`Book::evict_cached`). Removal may be closing
        // it at the same time, which is harmless; its work item is freed only with the last reference,
        // which the card's list holds until `drop_cache`.
        me.cache.close();
        // The sweeps stop when the cache is dropped: here, or after unbind if a wedged card still holds
        // one of its pins (`RegCache`'s drop).
        me.card.book().drop_cache(&me.cache);
        // No request of this file is in flight any more: the RAM is free if this was its owner's last file.
        me.card.ram_close(&me.ram);
    }

    fn ioctl(me: Pin<&PicoevbFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let mut call = Call {
            file: me.get_ref(),
            active: None,
        };
        ioctl::run(&mut call, cmd, arg).map_err(kerr)?;
        Ok(0)
    }
}
