// BAR0 address decode: one AXI4-Lite master (XDMA m_axil, BAR0) to two slaves, split at SPLIT.
//
//   offset <  SPLIT  -> port G
//   offset >= SPLIT  -> port I
//
// gdr_top uses two: SPLIT = `GDR_ID_BASE puts the AXI GPIO (it decodes addr[8:0] itself, so it repeats every
// 512 B) on G and the gdr blocks on I; behind I, SPLIT = `GDR_ID_END puts the ID block (repeating every
// `GDR_ID_WINDOW bytes) on G and the stream block on I.
//
// Offsets are taken modulo `GDR_BAR0_SIZE (the XDMA maps BAR0 to AXI address 0, pciebar2axibar_axil_master).
//
// One write and one read may be in flight at a time (the XDMA issues AXI-Lite accesses one by one). A write
// is routed by its AW address: W is not passed on until the AW has been seen, so W-before-AW waits here.
// The slave is chosen when AW (AR) is first seen and held until its B (R) has been taken.

`timescale 1ns / 1ps
`default_nettype none
`include "gdr_id_regs.vh"

module gdr_bar0_decode #(
    parameter integer ADDR_WIDTH = 32,
    parameter [31:0]  SPLIT      = `GDR_ID_BASE
) (
    input  wire                  aclk,
    input  wire                  aresetn,

    // from the XDMA AXI-Lite master
    input  wire [ADDR_WIDTH-1:0] s_awaddr,
    input  wire                  s_awvalid,
    output wire                  s_awready,
    input  wire [31:0]           s_wdata,
    input  wire [3:0]            s_wstrb,
    input  wire                  s_wvalid,
    output wire                  s_wready,
    output wire [1:0]            s_bresp,
    output wire                  s_bvalid,
    input  wire                  s_bready,
    input  wire [ADDR_WIDTH-1:0] s_araddr,
    input  wire                  s_arvalid,
    output wire                  s_arready,
    output wire [31:0]           s_rdata,
    output wire [1:0]            s_rresp,
    output wire                  s_rvalid,
    input  wire                  s_rready,

    // port G: below SPLIT
    output wire [ADDR_WIDTH-1:0] g_awaddr,
    output wire                  g_awvalid,
    input  wire                  g_awready,
    output wire [31:0]           g_wdata,
    output wire [3:0]            g_wstrb,
    output wire                  g_wvalid,
    input  wire                  g_wready,
    input  wire [1:0]            g_bresp,
    input  wire                  g_bvalid,
    output wire                  g_bready,
    output wire [ADDR_WIDTH-1:0] g_araddr,
    output wire                  g_arvalid,
    input  wire                  g_arready,
    input  wire [31:0]           g_rdata,
    input  wire [1:0]            g_rresp,
    input  wire                  g_rvalid,
    output wire                  g_rready,

    // port I: from SPLIT
    output wire [ADDR_WIDTH-1:0] i_awaddr,
    output wire                  i_awvalid,
    input  wire                  i_awready,
    output wire [31:0]           i_wdata,
    output wire [3:0]            i_wstrb,
    output wire                  i_wvalid,
    input  wire                  i_wready,
    input  wire [1:0]            i_bresp,
    input  wire                  i_bvalid,
    output wire                  i_bready,
    output wire [ADDR_WIDTH-1:0] i_araddr,
    output wire                  i_arvalid,
    input  wire                  i_arready,
    input  wire [31:0]           i_rdata,
    input  wire [1:0]            i_rresp,
    input  wire                  i_rvalid,
    output wire                  i_rready
);
    localparam [31:0] BAR_MASK = `GDR_BAR0_SIZE - 1;

    function is_id;  // 1: the offset belongs to port I
        input [ADDR_WIDTH-1:0] addr;
        reg   [31:0] offset;
        begin
            offset = addr & BAR_MASK;
            is_id  = offset >= SPLIT;
        end
    endfunction

    // ---- writes --------------------------------------------------------------------------------------------
    reg w_busy;     // a write is open: AW seen, B not yet taken
    reg w_sel;      // its target (1 = ID block)
    reg aw_done;    // its AW has been passed on
    reg w_done;     // its W has been passed on

    // While idle the target follows the AW address (stable while AWVALID is high), so AW and W may pass in the
    // same cycle the write opens.
    wire w_open   = w_busy || s_awvalid;
    wire w_target = w_busy ? w_sel : is_id(s_awaddr);
    wire aw_pass  = w_open && !aw_done && s_awvalid;
    wire w_pass   = w_open && !w_done && s_wvalid;

    assign g_awaddr  = s_awaddr;
    assign i_awaddr  = s_awaddr;
    assign g_awvalid = aw_pass && !w_target;
    assign i_awvalid = aw_pass &&  w_target;
    assign s_awready = w_open && !aw_done && (w_target ? i_awready : g_awready);

    assign g_wdata  = s_wdata;
    assign i_wdata  = s_wdata;
    assign g_wstrb  = s_wstrb;
    assign i_wstrb  = s_wstrb;
    assign g_wvalid = w_pass && !w_target;
    assign i_wvalid = w_pass &&  w_target;
    assign s_wready = w_open && !w_done && (w_target ? i_wready : g_wready);

    assign s_bvalid = w_busy && (w_sel ? i_bvalid : g_bvalid);
    assign s_bresp  = w_sel ? i_bresp : g_bresp;
    assign g_bready = w_busy && !w_sel && s_bready;
    assign i_bready = w_busy &&  w_sel && s_bready;

    always @(posedge aclk) begin
        if (!aresetn) begin
            w_busy  <= 1'b0;
            w_sel   <= 1'b0;
            aw_done <= 1'b0;
            w_done  <= 1'b0;
        end else if (s_bvalid && s_bready) begin
            w_busy  <= 1'b0;
            aw_done <= 1'b0;
            w_done  <= 1'b0;
        end else begin
            if (!w_busy && s_awvalid) begin
                w_busy <= 1'b1;
                w_sel  <= is_id(s_awaddr);
            end
            if (s_awvalid && s_awready)
                aw_done <= 1'b1;
            if (s_wvalid && s_wready)
                w_done <= 1'b1;
        end
    end

    // ---- reads ---------------------------------------------------------------------------------------------
    reg r_busy;     // a read is open: AR seen, R not yet taken
    reg r_sel;
    reg ar_done;

    wire r_target = r_busy ? r_sel : is_id(s_araddr);
    wire ar_pass  = s_arvalid && !ar_done;

    assign g_araddr  = s_araddr;
    assign i_araddr  = s_araddr;
    assign g_arvalid = ar_pass && !r_target;
    assign i_arvalid = ar_pass &&  r_target;
    assign s_arready = !ar_done && (r_target ? i_arready : g_arready);

    assign s_rvalid = r_busy && (r_sel ? i_rvalid : g_rvalid);
    assign s_rdata  = r_sel ? i_rdata : g_rdata;
    assign s_rresp  = r_sel ? i_rresp : g_rresp;
    assign g_rready = r_busy && !r_sel && s_rready;
    assign i_rready = r_busy &&  r_sel && s_rready;

    always @(posedge aclk) begin
        if (!aresetn) begin
            r_busy  <= 1'b0;
            r_sel   <= 1'b0;
            ar_done <= 1'b0;
        end else if (s_rvalid && s_rready) begin
            r_busy  <= 1'b0;
            ar_done <= 1'b0;
        end else begin
            if (!r_busy && s_arvalid) begin
                r_busy <= 1'b1;
                r_sel  <= is_id(s_araddr);
            end
            if (s_arvalid && s_arready)
                ar_done <= 1'b1;
        end
    end
endmodule

`default_nettype wire
