//! Programs a real card over JTAG. The FT230X is a USB device the sandboxed agent cannot reach, so the
//! privileged helper runs `fpga-bitstream/program/load-sram.sh` (SRAM) or `flash-update.sh --reload`
//! (MultiBoot update slot, written and verified; the golden slot is never touched).

use crate::card::ports::{LoadError, Loader};
use crate::config::Target;
use crate::manifest::Image;
use crate::sys::helper::Helper;
use crate::sys::request::{Jtag, Request};

/// The `openocd` loader.
pub struct OpenocdLoader {
    pub helper: Helper,
    pub serial: Option<String>,
}

impl Loader for OpenocdLoader {
    fn name(&self) -> &'static str {
        "openocd"
    }

    fn image_role(&self, target: Target) -> &'static str {
        match target {
            Target::Sram => "update-bit",
            Target::Flash => "update-bin",
        }
    }

    fn program(&self, image: &Image, target: Target) -> Result<String, LoadError> {
        // The helper takes a plain name from the shipped bitstream directory and programs it only if its
        // bytes still have the sha256 the agent checked.
        let jtag = Jtag {
            image: image.name(),
            sha256: image.file.sha256.clone(),
            serial: self.serial.clone(),
        };
        let req = match target {
            Target::Sram => Request::JtagSram(jtag),
            Target::Flash => Request::JtagFlash(jtag),
        };
        self.helper.call(&req).map_err(|e| LoadError(e.into()))
    }
}
