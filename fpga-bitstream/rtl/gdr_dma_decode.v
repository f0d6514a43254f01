// DMA address decode: the XDMA's AXI4 master (m_axi) to the BRAM controller (port A) or the stream block's
// window (port S), chosen by AXI address bit `GDR_STREAM_AXI_BIT. Below that bit everything reaches the BRAM,
// which decodes addr[15:0] only and so still wraps modulo 64 KiB.
//
// Only the handshakes pass through here: gdr_top wires the AW/W/AR payloads to both slaves, and this module
// gates the VALIDs, routes the READYs and multiplexes the B and R channels. Requests may be outstanding to
// one slave at a time per direction: an AR (AW) for the other slave waits until every read (write) in flight
// has answered, so responses never need reordering. W beats pass only for a write whose AW has been accepted.

`timescale 1ns / 1ps
`default_nettype none
`include "gdr_id_regs.vh"

module gdr_dma_decode #(
    parameter integer ID_WIDTH = 2
) (
    input  wire                aclk,
    input  wire                aresetn,

    // from the XDMA
    input  wire [63:0]         awaddr,
    input  wire                awvalid,
    output wire                awready,
    input  wire                wlast,
    input  wire                wvalid,
    output wire                wready,
    output wire [ID_WIDTH-1:0] bid,
    output wire [1:0]          bresp,
    output wire                bvalid,
    input  wire                bready,
    input  wire [63:0]         araddr,
    input  wire                arvalid,
    output wire                arready,
    output wire [ID_WIDTH-1:0] rid,
    output wire [63:0]         rdata,
    output wire [1:0]          rresp,
    output wire                rlast,
    output wire                rvalid,
    input  wire                rready,

    // port A: BRAM controller; port S: stream window
    output wire                a_awvalid,  s_awvalid,
    input  wire                a_awready,  s_awready,
    output wire                a_wvalid,   s_wvalid,
    input  wire                a_wready,   s_wready,
    input  wire [ID_WIDTH-1:0] a_bid,      s_bid,
    input  wire [1:0]          a_bresp,    s_bresp,
    input  wire                a_bvalid,   s_bvalid,
    output wire                a_bready,   s_bready,
    output wire                a_arvalid,  s_arvalid,
    input  wire                a_arready,  s_arready,
    input  wire [ID_WIDTH-1:0] a_rid,      s_rid,
    input  wire [63:0]         a_rdata,    s_rdata,
    input  wire [1:0]          a_rresp,    s_rresp,
    input  wire                a_rlast,    s_rlast,
    input  wire                a_rvalid,   s_rvalid,
    output wire                a_rready,   s_rready
);
    localparam integer CW = 5;  // outstanding-request counters
    localparam [CW-1:0] MAX = {CW{1'b1}};

    // ---- reads ---------------------------------------------------------------------------------------------
    reg [CW-1:0] rd_cnt;   // ARs accepted whose last R has not been taken
    reg          rd_sel;   // their slave (1 = stream)
    wire ar_tgt = araddr[`GDR_STREAM_AXI_BIT];
    wire ar_ok  = (rd_cnt == 0 || ar_tgt == rd_sel) && rd_cnt != MAX;
    assign a_arvalid = arvalid && ar_ok && !ar_tgt;
    assign s_arvalid = arvalid && ar_ok &&  ar_tgt;
    assign arready   = ar_ok && (ar_tgt ? s_arready : a_arready);

    assign rvalid   = rd_sel ? s_rvalid : a_rvalid;
    assign rid      = rd_sel ? s_rid    : a_rid;
    assign rdata    = rd_sel ? s_rdata  : a_rdata;
    assign rresp    = rd_sel ? s_rresp  : a_rresp;
    assign rlast    = rd_sel ? s_rlast  : a_rlast;
    assign a_rready = !rd_sel && rready;
    assign s_rready =  rd_sel && rready;

    wire ar_fire  = arvalid && arready;
    wire r_done   = rvalid && rready && rlast;
    always @(posedge aclk) begin
        if (!aresetn) begin
            rd_cnt <= {CW{1'b0}};
            rd_sel <= 1'b0;
        end else begin
            if (ar_fire)
                rd_sel <= ar_tgt;
            rd_cnt <= rd_cnt + {{(CW-1){1'b0}}, ar_fire} - {{(CW-1){1'b0}}, r_done};
        end
    end

    // ---- writes --------------------------------------------------------------------------------------------
    reg [CW-1:0] wr_cnt;   // AWs accepted whose B has not been taken
    reg [CW-1:0] w_cnt;    // AWs accepted whose last W has not passed
    reg          wr_sel;
    wire aw_tgt = awaddr[`GDR_STREAM_AXI_BIT];
    wire aw_ok  = (wr_cnt == 0 || aw_tgt == wr_sel) && wr_cnt != MAX;
    assign a_awvalid = awvalid && aw_ok && !aw_tgt;
    assign s_awvalid = awvalid && aw_ok &&  aw_tgt;
    assign awready   = aw_ok && (aw_tgt ? s_awready : a_awready);

    wire w_open = w_cnt != 0;
    assign a_wvalid = wvalid && w_open && !wr_sel;
    assign s_wvalid = wvalid && w_open &&  wr_sel;
    assign wready   = w_open && (wr_sel ? s_wready : a_wready);

    assign bvalid   = wr_sel ? s_bvalid : a_bvalid;
    assign bid      = wr_sel ? s_bid    : a_bid;
    assign bresp    = wr_sel ? s_bresp  : a_bresp;
    assign a_bready = !wr_sel && bready;
    assign s_bready =  wr_sel && bready;

    wire aw_fire = awvalid && awready;
    wire w_done  = wvalid && wready && wlast;
    wire b_fire  = bvalid && bready;
    always @(posedge aclk) begin
        if (!aresetn) begin
            wr_cnt <= {CW{1'b0}};
            w_cnt  <= {CW{1'b0}};
            wr_sel <= 1'b0;
        end else begin
            if (aw_fire)
                wr_sel <= aw_tgt;
            wr_cnt <= wr_cnt + {{(CW-1){1'b0}}, aw_fire} - {{(CW-1){1'b0}}, b_fire};
            w_cnt  <= w_cnt + {{(CW-1){1'b0}}, aw_fire} - {{(CW-1){1'b0}}, w_done};
        end
    end

    wire _unused = &{1'b0, awaddr, araddr};
endmodule

`default_nettype wire
