// gdr ID/version block: an AXI4-Lite slave that tells software which bitstream a card runs.
//
// The register map comes from gdr_id_regs.vh, which is generated from crates/picoevb-regs/src/idblock.rs;
// this file spells no offsets or constants of its own. The block decodes address bits
// [`GDR_ID_INDEX_BITS+1:2] only, so it repeats every `GDR_ID_WINDOW bytes; registers past
// `GDR_ID_REG_COUNT read 0. Only SCRATCH is writable (byte strobes honoured); writes elsewhere complete
// with OKAY and change nothing. Every response is OKAY.
//
// Handshakes: AW and W are accepted independently, in either order or together; the write happens once both
// are held, and no further AW/W is accepted until its B response has been taken. Reads take one AR at a time
// and hold R until it is taken. Read and write channels are independent of each other.
//
// The build-time values are parameters: the Vivado build (build.tcl) sets them from fpga-bitstream/VERSION,
// the git commit and the build time.

`timescale 1ns / 1ps
`default_nettype none
`include "gdr_id_regs.vh"

module gdr_id_block #(
    parameter integer  ADDR_WIDTH     = 12,
    parameter [31:0]   DESIGN_VERSION = 32'h0000_0000,  // major[31:24] minor[23:16] patch[15:0]
    parameter [31:0]   BUILD_HASH     = 32'h0000_0000,  // first 32 bits of the git commit
    parameter [31:0]   BUILD_TIME     = 32'h0000_0000,  // seconds since the Unix epoch
    parameter [31:0]   CAPS           = `GDR_ID_CAPS_PICOEVB,
    parameter [31:0]   RAM_SIZE       = `GDR_ID_RAM_SIZE
) (
    input  wire                  aclk,
    input  wire                  aresetn,

    input  wire [ADDR_WIDTH-1:0] s_axil_awaddr,
    input  wire                  s_axil_awvalid,
    output wire                  s_axil_awready,
    input  wire [31:0]           s_axil_wdata,
    input  wire [3:0]            s_axil_wstrb,
    input  wire                  s_axil_wvalid,
    output wire                  s_axil_wready,
    output wire [1:0]            s_axil_bresp,
    output reg                   s_axil_bvalid,
    input  wire                  s_axil_bready,

    input  wire [ADDR_WIDTH-1:0] s_axil_araddr,
    input  wire                  s_axil_arvalid,
    output wire                  s_axil_arready,
    output reg  [31:0]           s_axil_rdata,
    output wire [1:0]            s_axil_rresp,
    output reg                   s_axil_rvalid,
    input  wire                  s_axil_rready
);
    localparam integer IW = `GDR_ID_INDEX_BITS;
    reg [31:0] scratch;

    // ---- write channel -------------------------------------------------------------------------------------
    reg          aw_held;
    reg [IW-1:0] aw_idx;
    reg          w_held;
    reg [31:0]   w_data;
    reg [3:0]    w_strb;

    assign s_axil_awready = !aw_held && !s_axil_bvalid;
    assign s_axil_wready  = !w_held && !s_axil_bvalid;
    assign s_axil_bresp   = 2'b00;

    wire aw_fire = s_axil_awvalid && s_axil_awready;
    wire w_fire  = s_axil_wvalid && s_axil_wready;
    // Both halves present (held from earlier cycles or arriving now): the write takes effect this cycle.
    wire do_write = (aw_held || aw_fire) && (w_held || w_fire);
    wire [IW-1:0] wr_idx  = aw_held ? aw_idx : s_axil_awaddr[IW+1:2];
    wire [31:0]   wr_data = w_held ? w_data : s_axil_wdata;
    wire [3:0]    wr_strb = w_held ? w_strb : s_axil_wstrb;

    integer i;
    always @(posedge aclk) begin
        if (!aresetn) begin
            aw_held       <= 1'b0;
            aw_idx        <= {IW{1'b0}};
            w_held        <= 1'b0;
            w_data        <= 32'h0;
            w_strb        <= 4'h0;
            s_axil_bvalid <= 1'b0;
            scratch       <= `GDR_ID_SCRATCH_RESET;
        end else begin
            if (do_write) begin
                aw_held       <= 1'b0;
                w_held        <= 1'b0;
                s_axil_bvalid <= 1'b1;
                if ({wr_idx, 2'b00} == `GDR_ID_REG_SCRATCH) begin
                    for (i = 0; i < 4; i = i + 1)
                        if (wr_strb[i])
                            scratch[8*i +: 8] <= wr_data[8*i +: 8];
                end
            end else begin
                if (aw_fire) begin
                    aw_held <= 1'b1;
                    aw_idx  <= s_axil_awaddr[IW+1:2];
                end
                if (w_fire) begin
                    w_held <= 1'b1;
                    w_data <= s_axil_wdata;
                    w_strb <= s_axil_wstrb;
                end
            end
            if (s_axil_bvalid && s_axil_bready)
                s_axil_bvalid <= 1'b0;
        end
    end

    // ---- read channel --------------------------------------------------------------------------------------
    assign s_axil_arready = !s_axil_rvalid;
    assign s_axil_rresp   = 2'b00;

    reg [31:0] rd_value;
    always @(*) begin
        // Offset within the window, as the header spells it.
        case ({s_axil_araddr[IW+1:2], 2'b00})
            `GDR_ID_REG_MAGIC:          rd_value = `GDR_ID_MAGIC;
            `GDR_ID_REG_LAYOUT:         rd_value = `GDR_ID_LAYOUT_VERSION;
            `GDR_ID_REG_DESIGN_VERSION: rd_value = DESIGN_VERSION;
            `GDR_ID_REG_BUILD_HASH:     rd_value = BUILD_HASH;
            `GDR_ID_REG_BUILD_TIME:     rd_value = BUILD_TIME;
            `GDR_ID_REG_CAPS:           rd_value = CAPS;
            `GDR_ID_REG_RAM_SIZE:       rd_value = RAM_SIZE;
            `GDR_ID_REG_SCRATCH:        rd_value = scratch;
            default:                    rd_value = 32'h0;  // reserved
        endcase
    end

    always @(posedge aclk) begin
        if (!aresetn) begin
            s_axil_rvalid <= 1'b0;
            s_axil_rdata  <= 32'h0;
        end else if (s_axil_arvalid && s_axil_arready) begin
            s_axil_rvalid <= 1'b1;
            s_axil_rdata  <= rd_value;
        end else if (s_axil_rvalid && s_axil_rready) begin
            s_axil_rvalid <= 1'b0;
        end
    end

    // Address bits the block ignores (it repeats every window).
    wire _unused = &{1'b0, s_axil_awaddr, s_axil_araddr};
endmodule

`default_nettype wire
