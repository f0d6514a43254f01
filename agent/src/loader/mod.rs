//! FPGA loader backends behind [`crate::card::ports::Loader`]: `model` (the FPGA model's control channel)
//! and `openocd` (JTAG through the privileged helper and `fpga-bitstream/program/`).

pub mod model;
pub mod openocd;
