//! BAR0, the XDMA AXI-Lite master window: address decoding for the two designs.
//!
//! * gdr: the AXI GPIO decodes `addr[8:0]` in 0x000..0x7ff; the ID block sits at 0x800..0xbff repeating every
//!   0x40, the stream block's registers at 0xc00..0xfff, also repeating every 0x40.
//! * reference (NVIDIA's bitstream): the GPIO decodes `addr[8:0]` across the whole 4 KiB, no ID block.

use picoevb_regs::{gpio, idblock, pci, stream};

use crate::gpio::Gpio;
use crate::idblock::IdBlock;
use crate::options::{Design, DeviceOptions};
use crate::stream::StreamBlock;

/// What lives behind BAR0.
#[derive(Clone, Debug)]
pub struct UserBar {
    design: Design,
    /// The AXI GPIO.
    pub gpio: Gpio,
    /// The gdr ID block (kept in the reference design too, but not decoded there).
    pub id: IdBlock,
    /// The gdr stream block (likewise), with its DMA window.
    pub stream: StreamBlock,
}

/// The block a BAR0 DWORD offset selects.
enum Target {
    Gpio(usize),
    IdBlock(usize),
    Stream(usize),
}

impl UserBar {
    /// BAR0 at reset.
    pub fn new(options: &DeviceOptions) -> Self {
        Self {
            design: options.design,
            gpio: Gpio::default(),
            id: IdBlock::new(options),
            stream: StreamBlock::default(),
        }
    }

    fn decode(&self, offset: usize) -> Target {
        let offset = offset % pci::BAR_USER_SIZE;
        match self.design {
            Design::Gdr if idblock::contains(offset) => Target::IdBlock(offset),
            Design::Gdr if stream::contains(offset) => Target::Stream(offset),
            _ => Target::Gpio(offset & gpio::DECODE_MASK),
        }
    }

    /// Reads the DWORD containing `offset` at time `now` (ns; see [`crate::stream`]).
    pub fn read32(&mut self, offset: usize, now: u64) -> u32 {
        match self.decode(offset & !3) {
            Target::Gpio(o) => self.gpio.read(o),
            Target::IdBlock(o) => self.id.read(o),
            Target::Stream(o) => self.stream.read(o, now),
        }
    }

    /// Writes the DWORD at `offset` (DWORD-aligned) at time `now`.
    pub fn write32(&mut self, offset: usize, value: u32, now: u64) {
        match self.decode(offset & !3) {
            Target::Gpio(o) => self.gpio.write(o, value),
            Target::IdBlock(o) => self.id.write(o, value),
            Target::Stream(o) => self.stream.write(o, value, now),
        }
    }

    /// Whether the DMA engines reach the stream block at AXI address `addr` (the gdr design, AXI bit 32);
    /// everything else is the BRAM.
    pub fn stream_window(&self, addr: u64) -> bool {
        self.design == Design::Gdr && stream::in_window(addr)
    }

    /// A newly loaded design: its decoding and ID block, everything else at reset.
    pub fn load(&mut self, image: &crate::image::ModelImage) {
        self.design = image.design;
        self.gpio = Gpio::default();
        self.id.load(image);
        self.stream.reset();
    }

    /// Back to reset values (the design and build constants stay).
    pub fn reset(&mut self) {
        self.gpio = Gpio::default();
        self.id.reset();
        self.stream.reset();
    }
}
