// GENERATED FILE, DO NOT EDIT.
// Rendered from crates/picoevb-regs/src/idblock.rs and stream.rs (plus pci.rs, gpio.rs) by
// crates/picoevb-regs/tests/verilog_header.rs. Regenerate with:
//   GDR_REGEN=1 cargo test -p picoevb-regs --test verilog_header
`ifndef GDR_ID_REGS_VH
`define GDR_ID_REGS_VH
`define GDR_PCI_VENDOR_ID            16'h10de              // XDMA vendor_id
`define GDR_PCI_DEVICE_ID            16'h0001              // XDMA pf0_device_id
`define GDR_PCI_SUBSYS_VENDOR_ID     16'h10de
`define GDR_PCI_SUBSYS_ID            16'h0001
`define GDR_PCI_CLASS_CODE           24'h058000
`define GDR_BAR0_SIZE                32'h0000_1000         // bytes of BAR0 (XDMA AXI-Lite master)
`define GDR_BAR1_SIZE                32'h0001_0000         // bytes of BAR1 (XDMA registers)
`define GDR_GPIO_DECODE_MASK         32'h0000_01ff         // AXI GPIO decodes these bits
`define GDR_GPIO_DATA                32'h0000_0000         // LEDs, active-low
`define GDR_ID_BASE                  32'h0000_0800         // BAR0 offsets >= this hit the ID block
`define GDR_ID_WINDOW                32'h0000_0040         // the block repeats every WINDOW bytes
`define GDR_ID_INDEX_BITS            4                     // register index = addr[INDEX_BITS+1:2]
`define GDR_ID_REG_COUNT             8                     // registers; the rest of the window reads 0
`define GDR_ID_REG_MAGIC             6'h00
`define GDR_ID_REG_LAYOUT            6'h04
`define GDR_ID_REG_DESIGN_VERSION    6'h08
`define GDR_ID_REG_BUILD_HASH        6'h0c
`define GDR_ID_REG_BUILD_TIME        6'h10
`define GDR_ID_REG_CAPS              6'h14
`define GDR_ID_REG_RAM_SIZE          6'h18
`define GDR_ID_REG_SCRATCH           6'h1c
`define GDR_ID_WRITABLE              32'h0000_0080         // bit i set: register i is RW
`define GDR_ID_MAGIC                 32'h4744_5231         // "GDR1"
`define GDR_ID_LAYOUT_VERSION        32'h0000_0001
`define GDR_ID_SCRATCH_RESET         32'h0000_0000
`define GDR_ID_CAP_BRAM              32'h0000_0001
`define GDR_ID_CAP_LEDS              32'h0000_0002
`define GDR_ID_CAP_M2_GPIO           32'h0000_0004
`define GDR_ID_CAP_MSI               32'h0000_0008
`define GDR_ID_CAP_USER_IRQ          32'h0000_0010
`define GDR_ID_CAP_RAM_WRAPS         32'h0000_0020
`define GDR_ID_CAP_STREAM            32'h0000_0040
`define GDR_ID_CAPS_PICOEVB          32'h0000_007f
`define GDR_ID_RAM_SIZE              32'h0001_0000         // bytes of BRAM behind the DMA engines
`define GDR_ID_END                   32'h0000_0c00         // BAR0 offsets >= this hit the stream block
`define GDR_STREAM_BASE              32'h0000_0c00         // BAR0 offset of the stream registers
`define GDR_STREAM_REG_BITS          6                     // register offset = addr[REG_BITS-1:0]
`define GDR_STREAM_REG_SRC_CTRL      6'h00
`define GDR_STREAM_REG_SRC_RECORD_BYTES 6'h04
`define GDR_STREAM_REG_SRC_PERIOD    6'h08
`define GDR_STREAM_REG_SRC_SEQ       6'h0c
`define GDR_STREAM_REG_SRC_SENT      6'h10
`define GDR_STREAM_REG_SRC_OVERRUN   6'h14
`define GDR_STREAM_REG_SRC_DEPTH     6'h18
`define GDR_STREAM_REG_SINK_CTRL     6'h20
`define GDR_STREAM_REG_SINK_GOOD     6'h24
`define GDR_STREAM_REG_SINK_GAPS     6'h28
`define GDR_STREAM_REG_SINK_LOST     6'h2c
`define GDR_STREAM_REG_SINK_CRC_ERRORS 6'h30
`define GDR_STREAM_REG_SINK_BAD_LENGTH 6'h34
`define GDR_STREAM_REG_SINK_EXPECT   6'h38
`define GDR_STREAM_SRC_ENABLE        0                     // bit number
`define GDR_STREAM_SRC_CLEAR         1                     // bit number
`define GDR_STREAM_SINK_CLEAR        0                     // bit number
`define GDR_STREAM_RECORD_BYTES_RESET 32'h0000_0100
`define GDR_STREAM_RECORD_BYTES_MIN  32'h0000_0018
`define GDR_STREAM_RECORD_BYTES_MAX  32'h0000_1000
`define GDR_STREAM_FIFO_DEPTH        8                     // records the source holds
`define GDR_STREAM_RECORD_END        32'h4744_5253         // "GDRS", last word of a record
`define GDR_STREAM_CRC32C_POLY       32'h82f6_3b78         // bit-reflected
`define GDR_STREAM_AXI_BIT           32                    // AXI address bit selecting the stream window
`endif // GDR_ID_REGS_VH
