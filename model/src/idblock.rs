//! The gdr ID/version block in BAR0, served from the shared `picoevb_regs::idblock` constants.

use picoevb_regs::{idblock, pci};

use crate::options::{DESIGN_VERSION, DeviceOptions};

/// Register state of the ID block: everything is constant except the scratch register.
#[derive(Clone, Debug)]
pub struct IdBlock {
    design_version: u32,
    build_hash: u32,
    build_time: u32,
    scratch: u32,
}

impl IdBlock {
    /// The block as the bitstream described by `options` presents it at reset.
    pub fn new(options: &DeviceOptions) -> Self {
        Self {
            design_version: DESIGN_VERSION,
            build_hash: options.build_hash,
            build_time: options.build_time,
            scratch: idblock::SCRATCH_RESET,
        }
    }

    /// Reads the register a BAR0 offset in the block decodes to (the block repeats every `WINDOW` bytes).
    pub fn read(&self, bar0_offset: usize) -> u32 {
        match idblock::decode(bar0_offset) << 2 {
            idblock::REG_MAGIC => idblock::MAGIC,
            idblock::REG_LAYOUT => idblock::LAYOUT_VERSION,
            idblock::REG_DESIGN_VERSION => self.design_version,
            idblock::REG_BUILD_HASH => self.build_hash,
            idblock::REG_BUILD_TIME => self.build_time,
            idblock::REG_CAPS => idblock::CAPS_PICOEVB,
            idblock::REG_RAM_SIZE => pci::FPGA_RAM_SIZE as u32,
            idblock::REG_SCRATCH => self.scratch,
            _ => 0, // reserved
        }
    }

    /// Writes a register; only the scratch register is writable.
    pub fn write(&mut self, bar0_offset: usize, value: u32) {
        if idblock::decode(bar0_offset) << 2 == idblock::REG_SCRATCH {
            self.scratch = value;
        }
    }

    /// Takes the constants of a newly loaded design (programming); the scratch register resets.
    pub fn load(&mut self, image: &crate::image::ModelImage) {
        self.design_version = image.design_version;
        self.build_hash = image.build_hash;
        self.build_time = image.build_time;
        self.scratch = idblock::SCRATCH_RESET;
    }

    /// The scratch register.
    pub fn scratch(&self) -> u32 {
        self.scratch
    }

    /// Puts the scratch register back to its reset value (the constants never change).
    pub fn reset(&mut self) {
        self.scratch = idblock::SCRATCH_RESET;
    }
}
