// SPDX-License-Identifier: GPL-2.0

//! `/dev/picoevbN`: the ioctl ABI (`crates/picoevb-abi`), checked by the shared logic, run on the card.

use crate::abi;
use crate::card::{logic_err, Card};
use crate::request;
use crate::xdma::Dir;
use crate::PicoevbDriver;
use kernel::{
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceRegistration},
    prelude::*,
    sync::Arc,
    transmute::{AsBytes, FromBytes},
    uaccess::{UserPtr, UserSlice},
};

/// An open file: holds the card alive; after hot removal its ioctls fail with ENODEV.
#[pin_data]
pub(crate) struct PicoevbFile {
    card: Arc<Card>,
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

#[vtable]
impl MiscDevice for PicoevbFile {
    type Ptr = Pin<KBox<Self>>;

    fn open(_file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<Self>>> {
        // SAFETY: every registration of this type is the `misc` field of a `PicoevbDriver`, and misc_open()
        // holds misc_mtx, so the registration (and the driver data around it) cannot go away meanwhile.
        let drv =
            unsafe { &*kernel::container_of!(core::ptr::from_ref(misc), PicoevbDriver, misc) };
        KBox::try_pin_init(
            try_pin_init!(PicoevbFile {
                card: drv.card.clone()
            }),
            GFP_KERNEL,
        )
    }

    fn ioctl(me: Pin<&PicoevbFile>, _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        let card = &me.card;
        match cmd {
            abi::IOC_LED => card.set_leds(request::led_value(arg).map_err(logic_err)?)?,
            abi::IOC_CARD_INFO => write_out(
                arg,
                &abi::CardInfo {
                    fpga_ram_size: card.ram_size,
                },
            )?,
            abi::IOC_ABI_INFO => write_out(arg, &card.abi_info())?,
            abi::IOC_H2C_DMA => inout(arg, |req: &mut abi::H2cDma| {
                let x = request::h2c(req, card.ram_size).map_err(logic_err)?;
                req.dma_time_ns = card.one_way(Dir::H2c, &x)?;
                Ok(())
            })?,
            abi::IOC_C2H_DMA => inout(arg, |req: &mut abi::C2hDma| {
                let x = request::c2h(req, card.ram_size).map_err(logic_err)?;
                req.dma_time_ns = card.one_way(Dir::C2h, &x)?;
                Ok(())
            })?,
            abi::IOC_H2C2H_DMA => inout(arg, |req: &mut abi::H2c2hDma| {
                let x = request::h2c2h(req).map_err(logic_err)?;
                req.dma_time_ns = card.round_trip(&x)?;
                Ok(())
            })?,
            // GPU memory needs an nvidia_p2p provider, which this driver version does not use yet.
            abi::IOC_PIN_CUDA => return Err(logic_err(crate::errno::Errno::EOPNOTSUPP)),
            abi::IOC_UNPIN_CUDA => return Err(EINVAL),
            _ => return Err(ENOTTY),
        }
        Ok(0)
    }
}
