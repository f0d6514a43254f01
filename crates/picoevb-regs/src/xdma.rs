//! Xilinx XDMA (PG195) in AXI memory-mapped mode, as configured on the PicoEVB: one H2C and one C2H channel.
//!
//! BAR1 decoding: offset[15:12] = target block, [11:8] = channel, [7:0] = register. All registers are 32-bit,
//! little-endian, DWORD access only.

/// Target block of a BAR1 offset (bits [15:12]).
pub const fn target_of(offset: usize) -> usize {
    (offset >> 12) & 0xf
}
/// Channel of a BAR1 offset (bits [11:8]).
pub const fn channel_of(offset: usize) -> usize {
    (offset >> 8) & 0xf
}
/// Register of a BAR1 offset within its block (bits [7:0]).
pub const fn reg_of(offset: usize) -> usize {
    offset & 0xff
}

/// H2C channel block target (BAR1 offset bits [15:12]).
pub const TARGET_H2C: usize = 0x0;
/// C2H channel block target.
pub const TARGET_C2H: usize = 0x1;
/// IRQ block target.
pub const TARGET_IRQ: usize = 0x2;
/// Config block target.
pub const TARGET_CONFIG: usize = 0x3;
/// H2C SGDMA block target.
pub const TARGET_H2C_SGDMA: usize = 0x4;
/// C2H SGDMA block target.
pub const TARGET_C2H_SGDMA: usize = 0x5;
/// SGDMA common block target.
pub const TARGET_SGDMA_COMMON: usize = 0x6;

/// Base offset of a target block for channel `channel`.
pub const fn block(target: usize, channel: usize) -> usize {
    target << 12 | channel << 8
}

/// Identifier: 0x1fc in [31:20].
pub const ID_SUBSYSTEM: u32 = 0x1fc;
/// IP version the PicoEVB's XDMA reports (2017.1 and later).
pub const ID_VERSION: u32 = 0x06;
/// Identifier value of an AXI-MM block: 0x1fc [31:20], target [19:16], channel [11:8], version [7:0].
pub const fn identifier(target: usize, channel: usize) -> u32 {
    ID_SUBSYSTEM << 20 | (target as u32) << 16 | (channel as u32) << 8 | ID_VERSION
}
/// Whether an identifier read back names `target` (what upstream's channel probe checks).
pub const fn identifier_matches(id: u32, target: usize) -> bool {
    id >> 16 == (ID_SUBSYSTEM << 4 | target as u32)
}

/// Channels per direction on the PicoEVB.
pub const CHANNELS: usize = 1;

/// A DMA direction, i.e. which engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Host to card: the engine reads host memory and writes FPGA RAM.
    H2c,
    /// Card to host: the engine reads FPGA RAM and writes host memory.
    C2h,
}

impl Dir {
    /// Both engines, H2C first (the lock order the driver uses).
    pub const ALL: [Dir; 2] = [Dir::H2c, Dir::C2h];

    /// Channel register block of channel 0 of this engine.
    pub const fn channel_base(self) -> usize {
        match self {
            Dir::H2c => block(TARGET_H2C, 0),
            Dir::C2h => block(TARGET_C2H, 0),
        }
    }
    /// SGDMA register block of channel 0 of this engine.
    pub const fn sgdma_base(self) -> usize {
        match self {
            Dir::H2c => block(TARGET_H2C_SGDMA, 0),
            Dir::C2h => block(TARGET_C2H_SGDMA, 0),
        }
    }
    /// Bit of channel 0 of this engine in the IRQ block channel registers: H2C channels first, then C2H.
    pub const fn irq_bit(self) -> u32 {
        match self {
            Dir::H2c => 1 << 0,
            Dir::C2h => 1 << CHANNELS,
        }
    }
    /// Bit of channel 0 of this engine in the SGDMA common descriptor-halt / credit registers.
    pub const fn sgdma_common_bit(self) -> u32 {
        match self {
            Dir::H2c => 1 << 0,
            Dir::C2h => 1 << 16,
        }
    }
    /// Index 0 for H2C, 1 for C2H.
    pub const fn index(self) -> usize {
        match self {
            Dir::H2c => 0,
            Dir::C2h => 1,
        }
    }
}

// ---- Channel registers (relative to `Dir::channel_base`) ----

/// RO identifier.
pub const CH_IDENTIFIER: usize = 0x00;
/// RW control (`CTRL_*`).
pub const CH_CONTROL: usize = 0x04;
/// Control, write 1 to set.
pub const CH_CONTROL_W1S: usize = 0x08;
/// Control, write 1 to clear.
pub const CH_CONTROL_W1C: usize = 0x0c;
/// Status (`STAT_*`): bit 0 RO, bits [23:1] RW1C; bits [23:1] reset when Run is set.
pub const CH_STATUS: usize = 0x40;
/// Status, read-to-clear: reading clears bits [23:1].
pub const CH_STATUS_RC: usize = 0x44;
/// RO completed descriptor count; reset on the rising edge of Run.
pub const CH_COMPLETED_COUNT: usize = 0x48;
/// RO alignments: [23:16] address alignment, [15:8] length granularity, [7:0] address bits.
pub const CH_ALIGNMENTS: usize = 0x4c;
/// Alignment value of the unaligned 64-bit AXI-MM configuration.
pub const ALIGNMENTS_MM64: u32 = 0x0001_0140;
/// Poll-mode write-back address, low DWORD.
pub const CH_POLL_WB_LO: usize = 0x88;
/// Poll-mode write-back address, high DWORD.
pub const CH_POLL_WB_HI: usize = 0x8c;
/// RW interrupt enable mask (same bit positions as status).
pub const CH_INT_MASK: usize = 0x90;
/// Interrupt enable mask, write 1 to set.
pub const CH_INT_MASK_W1S: usize = 0x94;
/// Interrupt enable mask, write 1 to clear (PG195). Drivers should use this one.
pub const CH_INT_MASK_W1C: usize = 0x98;
/// Where Linux's `xdma-regs.h` puts the W1C (wrongly); a faithful model accepts both.
pub const CH_INT_MASK_W1C_ALIAS: usize = 0x9c;
/// Performance monitor control (`PERF_*`).
pub const CH_PERF_CTRL: usize = 0xc0;
/// Perf cycle count [31:0].
pub const CH_PERF_CYC_LO: usize = 0xc4;
/// Perf cycle count [41:32]; bit 16 = maxed.
pub const CH_PERF_CYC_HI: usize = 0xc8;
/// Perf data (beat) count [31:0].
pub const CH_PERF_DAT_LO: usize = 0xcc;
/// Perf data count [41:32]; bit 16 = maxed.
pub const CH_PERF_DAT_HI: usize = 0xd0;

/// Control: rising edge starts descriptor fetching.
pub const CTRL_RUN: u32 = 1 << 0;
/// Control: log descriptor_stopped.
pub const CTRL_IE_DESC_STOPPED: u32 = 1 << 1;
/// Control: log descriptor_completed.
pub const CTRL_IE_DESC_COMPLETED: u32 = 1 << 2;
/// Control: log align_mismatch.
pub const CTRL_IE_ALIGN_MISMATCH: u32 = 1 << 3;
/// Control: log magic_stopped.
pub const CTRL_IE_MAGIC_STOPPED: u32 = 1 << 4;
/// Control: log invalid_length.
pub const CTRL_IE_INVALID_LENGTH: u32 = 1 << 5;
/// Control: log idle_stopped.
pub const CTRL_IE_IDLE_STOPPED: u32 = 1 << 6;
/// Control: log (and stop on) read errors.
pub const CTRL_IE_READ_ERROR: u32 = 0x1f << 9;
/// Control: log (and stop on) write errors (H2C only).
pub const CTRL_IE_WRITE_ERROR: u32 = 0x1f << 14;
/// Control: log (and stop on) descriptor errors.
pub const CTRL_IE_DESC_ERROR: u32 = 0x1f << 19;
/// Control: non-incrementing AXI address.
pub const CTRL_NON_INC_ADDR: u32 = 1 << 25;
/// Control: poll-mode write-back enable.
pub const CTRL_POLLMODE_WB: u32 = 1 << 26;
/// Poll-mode write-back word: the engine ended with an error (PG195: `Sts_err`).
pub const WB_ERROR: u32 = 1 << 31;
/// Poll-mode write-back word: descriptors completed since Run rose.
pub const WB_COUNT: u32 = 0x00ff_ffff;
/// Every `ie_*` bit.
pub const CTRL_IE_ALL: u32 = CTRL_IE_DESC_STOPPED
    | CTRL_IE_DESC_COMPLETED
    | CTRL_IE_ALIGN_MISMATCH
    | CTRL_IE_MAGIC_STOPPED
    | CTRL_IE_INVALID_LENGTH
    | CTRL_IE_IDLE_STOPPED
    | CTRL_IE_READ_ERROR
    | CTRL_IE_WRITE_ERROR
    | CTRL_IE_DESC_ERROR;

/// Status: engine busy (RO).
pub const STAT_BUSY: u32 = 1 << 0;
/// Status: a descriptor with STOP completed.
pub const STAT_DESC_STOPPED: u32 = 1 << 1;
/// Status: a descriptor with COMPLETED completed.
pub const STAT_DESC_COMPLETED: u32 = 1 << 2;
/// Status: address alignment mismatch.
pub const STAT_ALIGN_MISMATCH: u32 = 1 << 3;
/// Status: bad descriptor magic.
pub const STAT_MAGIC_STOPPED: u32 = 1 << 4;
/// Status: invalid descriptor length.
pub const STAT_INVALID_LENGTH: u32 = 1 << 5;
/// Status: engine went idle after Run was cleared.
pub const STAT_IDLE_STOPPED: u32 = 1 << 6;
/// Status: read errors [13:9]. H2C: PCIe UR, CA, parity, header EP, unexpected completion. C2H: AXI decode, slave.
pub const STAT_READ_ERROR: u32 = 0x1f << 9;
/// Status: read error bit 0 (H2C: PCIe unsupported request; C2H: AXI decode error).
pub const STAT_READ_ERROR_UR: u32 = 1 << 9;
/// Status: write errors [18:14] (H2C only): AXI decode, slave.
pub const STAT_WRITE_ERROR: u32 = 0x1f << 14;
/// Status: write error bit 0 (AXI decode error).
pub const STAT_WRITE_ERROR_DECODE: u32 = 1 << 14;
/// Status: descriptor fetch errors [23:19]: UR, CA, parity, header EP, unexpected completion.
pub const STAT_DESC_ERROR: u32 = 0x1f << 19;
/// Status: descriptor fetch got an unsupported request.
pub const STAT_DESC_ERROR_UR: u32 = 1 << 19;
/// Bits [23:1]: everything but busy (what Run and read-to-clear reset).
pub const STAT_CLEARABLE: u32 = 0x00ff_fffe;
/// Bits that mean the transfer failed.
pub const STAT_ERRORS: u32 = STAT_ALIGN_MISMATCH
    | STAT_MAGIC_STOPPED
    | STAT_INVALID_LENGTH
    | STAT_READ_ERROR
    | STAT_WRITE_ERROR
    | STAT_DESC_ERROR;

/// Perf control: auto (stop on a STOP descriptor, clear on Run) per PG195.
pub const PERF_AUTO: u32 = 1 << 0;
/// Perf control: clear (WO).
pub const PERF_CLEAR: u32 = 1 << 1;
/// Perf control: run (arm) per PG195.
pub const PERF_RUN: u32 = 1 << 2;
/// Perf counters, high word: the count saturated.
pub const PERF_MAXED: u32 = 1 << 16;
/// The gdr design's XDMA AXI clock (125 MHz, docs/fpga.md), which the perf cycle counter counts: ns per
/// cycle.
pub const AXI_CLOCK_NS: u64 = 8;

// ---- SGDMA registers (relative to `Dir::sgdma_base`) ----

/// RO identifier.
pub const SG_IDENTIFIER: usize = 0x00;
/// First descriptor bus address, low DWORD (32-byte aligned).
pub const SG_DESC_LO: usize = 0x80;
/// First descriptor bus address, high DWORD.
pub const SG_DESC_HI: usize = 0x84;
/// Number of extra adjacent descriptors after the first, [5:0].
pub const SG_DESC_ADJ: usize = 0x88;
/// Descriptor credits (AXI-ST C2H only).
pub const SG_DESC_CREDITS: usize = 0x8c;

// ---- SGDMA common block ----

/// SGDMA common block base.
pub const SGDMA_COMMON: usize = block(TARGET_SGDMA_COMMON, 0);
/// Descriptor halt: [3:0] H2C channels, [19:16] C2H channels; stops descriptor fetching.
pub const SGC_DESC_CTRL: usize = 0x10;
/// Descriptor halt, W1S.
pub const SGC_DESC_CTRL_W1S: usize = 0x14;
/// Descriptor halt, W1C.
pub const SGC_DESC_CTRL_W1C: usize = 0x18;
/// Credit mode enable.
pub const SGC_CREDIT_MODE: usize = 0x20;
/// Credit mode enable, W1S.
pub const SGC_CREDIT_MODE_W1S: usize = 0x24;
/// Credit mode enable, W1C.
pub const SGC_CREDIT_MODE_W1C: usize = 0x28;

// ---- IRQ block ----

/// IRQ block base.
pub const IRQ_BLOCK: usize = block(TARGET_IRQ, 0);
/// User interrupt enable mask.
pub const IRQ_USER_EN: usize = 0x04;
/// User interrupt enable, W1S.
pub const IRQ_USER_EN_W1S: usize = 0x08;
/// User interrupt enable, W1C.
pub const IRQ_USER_EN_W1C: usize = 0x0c;
/// Channel interrupt enable mask (H2C channels from bit 0, then C2H).
pub const IRQ_CHAN_EN: usize = 0x10;
/// Channel interrupt enable, W1S.
pub const IRQ_CHAN_EN_W1S: usize = 0x14;
/// Channel interrupt enable, W1C.
pub const IRQ_CHAN_EN_W1C: usize = 0x18;
/// RO user interrupt request (source AND enable).
pub const IRQ_USER_REQ: usize = 0x40;
/// RO channel interrupt request (engine source AND enable).
pub const IRQ_CHAN_REQ: usize = 0x44;
/// RO user interrupt pending.
pub const IRQ_USER_PENDING: usize = 0x48;
/// RO channel interrupt pending.
pub const IRQ_CHAN_PENDING: usize = 0x4c;
/// User vector numbers, four 5-bit fields per register, 0x80..0x8c.
pub const IRQ_USER_VEC: usize = 0x80;
/// Channel vector numbers, four 5-bit fields per register, 0xa0..0xac.
pub const IRQ_CHAN_VEC: usize = 0xa0;
/// Number of user interrupts.
pub const USER_IRQS: usize = 16;

/// Vector field for interrupt `n` within the vector registers: (register offset from the first, shift).
pub const fn vector_field(n: usize) -> (usize, u32) {
    ((n / 4) * 4, ((n % 4) * 8) as u32)
}

// ---- Config block ----

/// Config block base.
pub const CONFIG_BLOCK: usize = block(TARGET_CONFIG, 0);
/// Bus/device number [15:0].
pub const CFG_BUSDEV: usize = 0x04;
/// PCIe max payload [2:0]: 0 = 128 B .. 5 = 4096 B.
pub const CFG_MAX_PAYLOAD: usize = 0x08;
/// PCIe max read request, same encoding.
pub const CFG_MAX_READ: usize = 0x0c;
/// System ID.
pub const CFG_SYSTEM_ID: usize = 0x10;
/// System ID value.
pub const SYSTEM_ID: u32 = 0xff01;
/// MSI enable: bit 0 MSI, bit 1 MSI-X.
pub const CFG_MSI_ENABLE: usize = 0x14;
/// PCIe data width [2:0]: 0 = 64 bit.
pub const CFG_DATA_WIDTH: usize = 0x18;
/// PCIe control (bit 0 relaxed ordering).
pub const CFG_PCIE_CTRL: usize = 0x1c;
/// AXI user max payload.
pub const CFG_AXI_MAX_PAYLOAD: usize = 0x40;
/// AXI user max read request.
pub const CFG_AXI_MAX_READ: usize = 0x44;
/// Write flush timeout.
pub const CFG_WRITE_FLUSH_TIMEOUT: usize = 0x60;

// ---- Descriptors ----

/// Size of one descriptor in bytes.
pub const DESC_SIZE: usize = 32;
/// Descriptors must be 32-byte aligned.
pub const DESC_ALIGN: u64 = 32;
/// A block of adjacent descriptors must not cross this boundary.
pub const DESC_BLOCK_BOUNDARY: u64 = 4096;
/// Most descriptors in one adjacent block (the 6-bit Nxt_adj field counts extras: 63 + 1).
pub const DESC_MAX_ADJACENT: usize = 64;
/// Descriptor magic in control [31:16].
pub const DESC_MAGIC: u32 = 0xad4b;
/// Control flag: stop the engine after this descriptor.
pub const DESC_STOP: u32 = 1 << 0;
/// Control flag: log descriptor_completed (and write back in poll mode) after this descriptor.
pub const DESC_COMPLETED: u32 = 1 << 1;
/// Control flag: end of packet (streaming).
pub const DESC_EOP: u32 = 1 << 4;
/// Largest length the 28-bit field holds.
pub const DESC_LEN_FIELD_MAX: u32 = (1 << 28) - 1;
/// Largest length the driver puts in one descriptor (DWORD multiple, as NVIDIA's driver).
pub const DESC_LEN_MAX: u32 = 0x0fff_fffc;

/// Descriptor control word: magic, extra adjacent descriptors at `next`, flags.
pub const fn desc_control(next_adj: u32, flags: u32) -> u32 {
    DESC_MAGIC << 16 | (next_adj & 0x3f) << 8 | (flags & 0xff)
}
/// Magic field of a control word.
pub const fn desc_magic(control: u32) -> u32 {
    control >> 16
}
/// Nxt_adj field of a control word.
pub const fn desc_next_adj(control: u32) -> u32 {
    (control >> 8) & 0x3f
}

/// One hardware descriptor, in host memory, little-endian, as 8 DWORDs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Descriptor {
    /// Magic, Nxt_adj and flags ([`desc_control`]).
    pub control: u32,
    /// Length in bytes, [27:0].
    pub len: u32,
    /// Source address low (H2C: host bus address; C2H: AXI address).
    pub src_lo: u32,
    /// Source address high.
    pub src_hi: u32,
    /// Destination address low (H2C: AXI address; C2H: host bus address).
    pub dst_lo: u32,
    /// Destination address high.
    pub dst_hi: u32,
    /// Next descriptor bus address low.
    pub next_lo: u32,
    /// Next descriptor bus address high.
    pub next_hi: u32,
}

const _: () = assert!(core::mem::size_of::<Descriptor>() == DESC_SIZE);

impl Descriptor {
    /// Builds a descriptor.
    pub const fn new(control: u32, len: u32, src: u64, dst: u64, next: u64) -> Self {
        Self {
            control,
            len,
            src_lo: src as u32,
            src_hi: (src >> 32) as u32,
            dst_lo: dst as u32,
            dst_hi: (dst >> 32) as u32,
            next_lo: next as u32,
            next_hi: (next >> 32) as u32,
        }
    }
    /// Source address.
    pub const fn src(&self) -> u64 {
        (self.src_hi as u64) << 32 | self.src_lo as u64
    }
    /// Destination address.
    pub const fn dst(&self) -> u64 {
        (self.dst_hi as u64) << 32 | self.dst_lo as u64
    }
    /// Next descriptor address.
    pub const fn next(&self) -> u64 {
        (self.next_hi as u64) << 32 | self.next_lo as u64
    }
    /// The descriptor as it lies in memory (little-endian).
    pub fn to_le_bytes(&self) -> [u8; DESC_SIZE] {
        let words = [
            self.control,
            self.len,
            self.src_lo,
            self.src_hi,
            self.dst_lo,
            self.dst_hi,
            self.next_lo,
            self.next_hi,
        ];
        let mut out = [0u8; DESC_SIZE];
        let mut i = 0;
        while i < 8 {
            let b = words[i].to_le_bytes();
            out[i * 4] = b[0];
            out[i * 4 + 1] = b[1];
            out[i * 4 + 2] = b[2];
            out[i * 4 + 3] = b[3];
            i += 1;
        }
        out
    }
    /// Parses a descriptor from memory (little-endian).
    pub fn from_le_bytes(b: &[u8; DESC_SIZE]) -> Self {
        let w = |i: usize| u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        Self {
            control: w(0),
            len: w(1),
            src_lo: w(2),
            src_hi: w(3),
            dst_lo: w(4),
            dst_hi: w(5),
            next_lo: w(6),
            next_hi: w(7),
        }
    }
}
