//! Programs a real card over JTAG. The FT230X is a USB device the sandboxed agent cannot reach, so the
//! privileged helper runs `fpga-bitstream/program/load-sram.sh` (SRAM) or `flash-update.sh --reload`
//! (MultiBoot update slot, written and verified; the golden slot is never touched).

use std::path::Path;

use crate::card::ports::Loader;
use crate::config::Target;
use crate::sys::helper::Helper;
use crate::sys::request::Request;

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

    fn program(&self, image: &Path, target: Target) -> Result<String, String> {
        // The helper only takes plain names from the shipped bitstream directory.
        let name = image
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| format!("{} is not a file", image.display()))?;
        let serial = self.serial.clone();
        let req = match target {
            Target::Sram => Request::JtagSram {
                image: name,
                serial,
            },
            Target::Flash => Request::JtagFlash {
                image: name,
                serial,
            },
        };
        self.helper.call(&req)
    }
}
