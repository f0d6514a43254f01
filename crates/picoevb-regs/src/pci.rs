//! PCI identity and BAR layout of the PicoEVB design (matches NVIDIA's jetson-rdma-picoevb bitstream so the
//! reference driver and ours both bind).

/// Vendor ID the design uses (NVIDIA's, not Xilinx's: the stock XDMA driver must not grab the card).
pub const VENDOR_ID: u16 = 0x10de;
/// Device ID of the PicoEVB RDMA design.
pub const DEVICE_ID: u16 = 0x0001;
/// Subsystem vendor ID.
pub const SUBSYSTEM_VENDOR_ID: u16 = 0x10de;
/// Subsystem ID of the PicoEVB board (0x0002 is the HTG-K800 variant, which gdr does not support).
pub const SUBSYSTEM_ID_PICOEVB: u16 = 0x0001;
/// Class code: memory controller, other.
pub const CLASS_CODE: u32 = 0x05_80_00;

/// BAR0: XDMA AXI-Lite master window (AXI GPIO and the gdr ID block).
pub const BAR_USER: u32 = 0;
/// Size of BAR0 in bytes.
pub const BAR_USER_SIZE: usize = 4096;
/// BAR1: XDMA DMA/config register space.
pub const BAR_DMA: u32 = 1;
/// Size of BAR1 in bytes.
pub const BAR_DMA_SIZE: usize = 65536;

/// Size of the BRAM behind the DMA engines, at AXI address 0.
pub const FPGA_RAM_SIZE: u64 = 65536;
/// The design decodes only AXI address bits [15:0], so DMA addresses wrap modulo the RAM size.
pub const FPGA_RAM_ADDR_MASK: u64 = FPGA_RAM_SIZE - 1;
