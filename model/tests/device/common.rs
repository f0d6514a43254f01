//! A test rig that drives the model like a driver would: config and register accesses, descriptors in fake
//! guest memory, interrupts recorded.

use std::sync::Arc;
use std::time::Duration;

use picoevb_model::config_space::{COMMAND, COMMAND_MASTER, COMMAND_MEMORY};
use picoevb_model::{Device, DeviceOptions, FakeGuestMemory, GuestMemory, RecordingSink};
use picoevb_regs::pci::{BAR_DMA, BAR_USER};
use picoevb_regs::xdma::{self, Descriptor, Dir};

/// Start of the fake guest RAM.
pub const RAM: u64 = 0x1000_0000;
/// Size of the fake guest RAM.
pub const RAM_SIZE: usize = 1 << 20;
/// Descriptor area (page aligned).
pub const DESC: u64 = RAM;
/// Source buffer.
pub const SRC: u64 = RAM + 0x4_0000;
/// Destination buffer.
pub const DST: u64 = RAM + 0x8_0000;
/// Poll-mode write-back area.
pub const WB: u64 = RAM + 0xc_0000;

/// Control value NVIDIA's driver writes: Run + every ie bit.
pub const CTRL_ALL: u32 = xdma::CTRL_RUN | xdma::CTRL_IE_ALL;

pub struct Rig {
    pub dev: Device,
    pub mem: Arc<FakeGuestMemory>,
    pub irq: Arc<RecordingSink>,
}

impl Rig {
    pub fn new() -> Self {
        Self::with(DeviceOptions::default())
    }

    pub fn with(options: DeviceOptions) -> Self {
        let mem = Arc::new(FakeGuestMemory::new());
        mem.add_region(RAM, RAM_SIZE);
        let irq = Arc::new(RecordingSink::new());
        let dev = Device::new(options, mem.clone(), irq.clone());
        // What a driver does at probe: memory decoding and bus mastering on (DMA is refused without it).
        dev.config_write(
            COMMAND as u64,
            &(COMMAND_MEMORY | COMMAND_MASTER).to_le_bytes(),
        );
        Self { dev, mem, irq }
    }

    pub fn cfg(&self, offset: u64, len: usize) -> u32 {
        let mut b = [0u8; 4];
        self.dev.config_read(offset, &mut b[..len]);
        u32::from_le_bytes(b)
    }

    pub fn set_cfg(&self, offset: u64, value: u32, len: usize) {
        self.dev.config_write(offset, &value.to_le_bytes()[..len]);
    }

    pub fn bar0(&self, offset: usize) -> u32 {
        self.dev.read32(BAR_USER, offset as u64)
    }

    pub fn set_bar0(&self, offset: usize, v: u32) {
        self.dev.write32(BAR_USER, offset as u64, v);
    }

    pub fn bar1(&self, offset: usize) -> u32 {
        self.dev.read32(BAR_DMA, offset as u64)
    }

    pub fn set_bar1(&self, offset: usize, v: u32) {
        self.dev.write32(BAR_DMA, offset as u64, v);
    }

    pub fn ch(&self, dir: Dir, reg: usize) -> u32 {
        self.bar1(dir.channel_base() + reg)
    }

    pub fn set_ch(&self, dir: Dir, reg: usize, v: u32) {
        self.set_bar1(dir.channel_base() + reg, v);
    }

    pub fn poke(&self, addr: u64, data: &[u8]) {
        self.mem.write(addr, data).expect("test memory mapped");
    }

    pub fn peek(&self, addr: u64, len: usize) -> Vec<u8> {
        let mut b = vec![0; len];
        self.mem.read(addr, &mut b).expect("test memory mapped");
        b
    }

    pub fn put_desc(&self, addr: u64, d: Descriptor) {
        self.poke(addr, &d.to_le_bytes());
    }

    /// Programs the SGDMA block and writes `control` (which should include Run).
    pub fn start(&self, dir: Dir, first: u64, adjacent: u32, control: u32) {
        let sg = dir.sgdma_base();
        self.set_bar1(sg + xdma::SG_DESC_LO, first as u32);
        self.set_bar1(sg + xdma::SG_DESC_HI, (first >> 32) as u32);
        self.set_bar1(sg + xdma::SG_DESC_ADJ, adjacent);
        self.set_ch(dir, xdma::CH_CONTROL, control);
    }

    /// Waits for the engine to go idle; panics after 5 s.
    pub fn wait(&self, dir: Dir) {
        assert!(
            self.dev.wait_idle(dir, Duration::from_secs(5)),
            "{dir:?} still busy after 5 s"
        );
    }

    /// Clears Run like both real drivers do after a transfer.
    pub fn stop(&self, dir: Dir) {
        self.set_ch(dir, xdma::CH_CONTROL_W1C, xdma::CTRL_RUN);
    }

    /// One-descriptor transfer (STOP|COMPLETED|EOP), waits for it, returns the status register.
    pub fn single(&self, dir: Dir, src: u64, dst: u64, len: u32) -> u32 {
        self.put_desc(DESC, last(len, src, dst));
        self.start(dir, DESC, 0, CTRL_ALL);
        self.wait(dir);
        self.ch(dir, xdma::CH_STATUS)
    }
}

/// A descriptor with STOP|COMPLETED|EOP, as NVIDIA's driver builds it.
pub fn last(len: u32, src: u64, dst: u64) -> Descriptor {
    Descriptor::new(
        xdma::desc_control(0, xdma::DESC_STOP | xdma::DESC_COMPLETED | xdma::DESC_EOP),
        len,
        src,
        dst,
        0,
    )
}

/// A test pattern that differs at every byte position within 256 bytes and between seeds.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// Status after a clean STOP|COMPLETED descriptor with every ie bit set.
pub const DONE: u32 = xdma::STAT_DESC_STOPPED | xdma::STAT_DESC_COMPLETED;
