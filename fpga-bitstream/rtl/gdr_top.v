// gdr PicoEVB design, top level (XC7A50T-2CSG325C, PCIe Gen2 x1).
//
// Same layout as NVIDIA's jetson-rdma-picoevb bitstream, so the same driver binds:
//   BAR0 (XDMA AXI-Lite master, 4 KiB)  0x000-0x7ff AXI GPIO: ch1 = 3 LEDs (active-low), ch2 = 4 iocon pins
//                                       0x800-0xbff gdr ID block (new; repeats every 0x40)
//                                       0xc00-0xfff gdr stream block registers (new; repeat every 0x40)
//   BAR1                                XDMA registers (1 H2C + 1 C2H AXI-MM channel)
//   DMA (XDMA AXI4 master, 64-bit)      AXI addr[32] clear: 64 KiB BRAM; only address bits [15:0] are
//                                       wired, so DMA addresses wrap modulo 64 KiB as on the reference
//                                       AXI addr[32] set: the stream window (C2H reads the source, H2C
//                                       writes the checker; gdr_stream.v)
//   AXI GPIO interrupt                  XDMA usr_irq_req[0]
//
// The Xilinx IP (xdma_0, axi_bram_ctrl_0, blk_mem_gen_0, axi_gpio_0) is created by build.tcl. The build-time
// ID values arrive as parameters from build.tcl (synth_design -generic).

`timescale 1ns / 1ps
`default_nettype none
`include "gdr_id_regs.vh"

module gdr_top #(
    parameter [31:0] DESIGN_VERSION = 32'h0000_0000,
    parameter [31:0] BUILD_HASH     = 32'h0000_0000,
    parameter [31:0] BUILD_TIME     = 32'h0000_0000
) (
    input  wire       refclk_p,   // 100 MHz PCIe reference clock (B6)
    input  wire       refclk_n,
    input  wire       perst_n,    // PCIe PERST# (A10)
    output wire       clkreq_n,   // CLKREQ#, held low (A9)
    input  wire       per0_p,     // PCIe lane 0 RX (G4/G3)
    input  wire       per0_n,
    output wire       pet0_p,     // PCIe lane 0 TX (B2/B1)
    output wire       pet0_n,
    output wire [2:0] leds,       // V12/V13/V14, active-low
    inout  wire [3:0] iocon       // A14/A13/B12/A12
);
    localparam integer AXI_ID_WIDTH = 2;  // XDMA axi_id_width and axi_bram_ctrl ID_WIDTH in build.tcl

    assign clkreq_n = 1'b0;

    wire sys_clk;
    IBUFDS_GTE2 refclk_ibuf (
        .I(refclk_p), .IB(refclk_n), .CEB(1'b0), .O(sys_clk), .ODIV2()
    );

    wire axi_aclk;
    wire axi_aresetn;
    wire user_lnk_up;
    wire gpio_irq;

    // XDMA AXI4 master (DMA) -> BRAM controller
    wire [AXI_ID_WIDTH-1:0] m_axi_awid, m_axi_bid, m_axi_arid, m_axi_rid;
    wire [63:0] m_axi_awaddr, m_axi_araddr;
    wire [7:0]  m_axi_awlen, m_axi_arlen;
    wire [2:0]  m_axi_awsize, m_axi_arsize, m_axi_awprot, m_axi_arprot;
    wire [1:0]  m_axi_awburst, m_axi_arburst, m_axi_bresp, m_axi_rresp;
    wire [3:0]  m_axi_awcache, m_axi_arcache;
    wire        m_axi_awlock, m_axi_arlock;
    wire        m_axi_awvalid, m_axi_awready, m_axi_wvalid, m_axi_wready, m_axi_wlast;
    wire        m_axi_bvalid, m_axi_bready, m_axi_arvalid, m_axi_arready;
    wire        m_axi_rvalid, m_axi_rready, m_axi_rlast;
    wire [63:0] m_axi_wdata, m_axi_rdata;
    wire [7:0]  m_axi_wstrb;

    // XDMA AXI-Lite master (BAR0) -> BAR0 decode
    wire [31:0] m_axil_awaddr, m_axil_araddr, m_axil_wdata, m_axil_rdata;
    wire [2:0]  m_axil_awprot, m_axil_arprot;
    wire [3:0]  m_axil_wstrb;
    wire [1:0]  m_axil_bresp, m_axil_rresp;
    wire        m_axil_awvalid, m_axil_awready, m_axil_wvalid, m_axil_wready, m_axil_bvalid, m_axil_bready;
    wire        m_axil_arvalid, m_axil_arready, m_axil_rvalid, m_axil_rready;

    xdma_0 xdma (
        .sys_clk          (sys_clk),
        .sys_rst_n        (perst_n),
        .user_lnk_up      (user_lnk_up),
        .pci_exp_txp      (pet0_p),
        .pci_exp_txn      (pet0_n),
        .pci_exp_rxp      (per0_p),
        .pci_exp_rxn      (per0_n),
        .axi_aclk         (axi_aclk),
        .axi_aresetn      (axi_aresetn),
        .usr_irq_req      (gpio_irq),
        .usr_irq_ack      (),
        .msi_enable       (),
        .msi_vector_width (),

        .m_axi_awready (m_axi_awready), .m_axi_wready  (m_axi_wready),
        .m_axi_bid     (m_axi_bid),     .m_axi_bresp   (m_axi_bresp),   .m_axi_bvalid  (m_axi_bvalid),
        .m_axi_arready (m_axi_arready),
        .m_axi_rid     (m_axi_rid),     .m_axi_rdata   (m_axi_rdata),   .m_axi_rresp   (m_axi_rresp),
        .m_axi_rlast   (m_axi_rlast),   .m_axi_rvalid  (m_axi_rvalid),
        .m_axi_awid    (m_axi_awid),    .m_axi_awaddr  (m_axi_awaddr),  .m_axi_awlen   (m_axi_awlen),
        .m_axi_awsize  (m_axi_awsize),  .m_axi_awburst (m_axi_awburst), .m_axi_awprot  (m_axi_awprot),
        .m_axi_awvalid (m_axi_awvalid), .m_axi_awlock  (m_axi_awlock),  .m_axi_awcache (m_axi_awcache),
        .m_axi_wdata   (m_axi_wdata),   .m_axi_wstrb   (m_axi_wstrb),   .m_axi_wlast   (m_axi_wlast),
        .m_axi_wvalid  (m_axi_wvalid),  .m_axi_bready  (m_axi_bready),
        .m_axi_arid    (m_axi_arid),    .m_axi_araddr  (m_axi_araddr),  .m_axi_arlen   (m_axi_arlen),
        .m_axi_arsize  (m_axi_arsize),  .m_axi_arburst (m_axi_arburst), .m_axi_arprot  (m_axi_arprot),
        .m_axi_arvalid (m_axi_arvalid), .m_axi_arlock  (m_axi_arlock),  .m_axi_arcache (m_axi_arcache),
        .m_axi_rready  (m_axi_rready),

        .m_axil_awaddr  (m_axil_awaddr),  .m_axil_awprot  (m_axil_awprot),  .m_axil_awvalid (m_axil_awvalid),
        .m_axil_awready (m_axil_awready), .m_axil_wdata   (m_axil_wdata),   .m_axil_wstrb   (m_axil_wstrb),
        .m_axil_wvalid  (m_axil_wvalid),  .m_axil_wready  (m_axil_wready),  .m_axil_bvalid  (m_axil_bvalid),
        .m_axil_bresp   (m_axil_bresp),   .m_axil_bready  (m_axil_bready),  .m_axil_araddr  (m_axil_araddr),
        .m_axil_arprot  (m_axil_arprot),  .m_axil_arvalid (m_axil_arvalid), .m_axil_arready (m_axil_arready),
        .m_axil_rdata   (m_axil_rdata),   .m_axil_rresp   (m_axil_rresp),   .m_axil_rvalid  (m_axil_rvalid),
        .m_axil_rready  (m_axil_rready)
    );

    // ---- DMA: BRAM below the stream window, the stream block in it -----------------------------------------
    wire a_awvalid, a_awready, a_wvalid, a_wready, a_bvalid, a_bready, a_arvalid, a_arready;
    wire a_rvalid, a_rready, a_rlast;
    wire s_awvalid, s_awready, s_wvalid, s_wready, s_bvalid, s_bready, s_arvalid, s_arready;
    wire s_rvalid, s_rready, s_rlast;
    wire [AXI_ID_WIDTH-1:0] a_bid, a_rid, s_bid, s_rid;
    wire [1:0]  a_bresp, a_rresp, s_bresp, s_rresp;
    wire [63:0] a_rdata, s_rdata;

    gdr_dma_decode #(.ID_WIDTH(AXI_ID_WIDTH)) dma_decode (
        .aclk (axi_aclk), .aresetn (axi_aresetn),
        .awaddr (m_axi_awaddr), .awvalid (m_axi_awvalid), .awready (m_axi_awready),
        .wlast  (m_axi_wlast),  .wvalid  (m_axi_wvalid),  .wready  (m_axi_wready),
        .bid    (m_axi_bid),    .bresp   (m_axi_bresp),   .bvalid  (m_axi_bvalid),  .bready (m_axi_bready),
        .araddr (m_axi_araddr), .arvalid (m_axi_arvalid), .arready (m_axi_arready),
        .rid    (m_axi_rid),    .rdata   (m_axi_rdata),   .rresp   (m_axi_rresp),
        .rlast  (m_axi_rlast),  .rvalid  (m_axi_rvalid),  .rready  (m_axi_rready),
        .a_awvalid (a_awvalid), .a_awready (a_awready), .a_wvalid (a_wvalid), .a_wready (a_wready),
        .a_bid (a_bid), .a_bresp (a_bresp), .a_bvalid (a_bvalid), .a_bready (a_bready),
        .a_arvalid (a_arvalid), .a_arready (a_arready), .a_rid (a_rid), .a_rdata (a_rdata),
        .a_rresp (a_rresp), .a_rlast (a_rlast), .a_rvalid (a_rvalid), .a_rready (a_rready),
        .s_awvalid (s_awvalid), .s_awready (s_awready), .s_wvalid (s_wvalid), .s_wready (s_wready),
        .s_bid (s_bid), .s_bresp (s_bresp), .s_bvalid (s_bvalid), .s_bready (s_bready),
        .s_arvalid (s_arvalid), .s_arready (s_arready), .s_rid (s_rid), .s_rdata (s_rdata),
        .s_rresp (s_rresp), .s_rlast (s_rlast), .s_rvalid (s_rvalid), .s_rready (s_rready)
    );

    // ---- DMA memory: 64 KiB BRAM at AXI 0 ------------------------------------------------------------------
    wire        bram_en;
    wire [7:0]  bram_we;
    wire [15:0] bram_addr;
    wire [63:0] bram_wrdata, bram_rddata;

    axi_bram_ctrl_0 bram_ctrl (
        .s_axi_aclk    (axi_aclk),
        .s_axi_aresetn (axi_aresetn),
        .s_axi_awid    (m_axi_awid),          .s_axi_awaddr  (m_axi_awaddr[15:0]),
        .s_axi_awlen   (m_axi_awlen),         .s_axi_awsize  (m_axi_awsize),
        .s_axi_awburst (m_axi_awburst),       .s_axi_awlock  (m_axi_awlock),
        .s_axi_awcache (m_axi_awcache),       .s_axi_awprot  (m_axi_awprot),
        .s_axi_awvalid (a_awvalid),       .s_axi_awready (a_awready),
        .s_axi_wdata   (m_axi_wdata),         .s_axi_wstrb   (m_axi_wstrb),
        .s_axi_wlast   (m_axi_wlast),         .s_axi_wvalid  (a_wvalid),   .s_axi_wready  (a_wready),
        .s_axi_bid     (a_bid),           .s_axi_bresp   (a_bresp),
        .s_axi_bvalid  (a_bvalid),        .s_axi_bready  (a_bready),
        .s_axi_arid    (m_axi_arid),          .s_axi_araddr  (m_axi_araddr[15:0]),
        .s_axi_arlen   (m_axi_arlen),         .s_axi_arsize  (m_axi_arsize),
        .s_axi_arburst (m_axi_arburst),       .s_axi_arlock  (m_axi_arlock),
        .s_axi_arcache (m_axi_arcache),       .s_axi_arprot  (m_axi_arprot),
        .s_axi_arvalid (a_arvalid),       .s_axi_arready (a_arready),
        .s_axi_rid     (a_rid),           .s_axi_rdata   (a_rdata),
        .s_axi_rresp   (a_rresp),         .s_axi_rlast   (a_rlast),
        .s_axi_rvalid  (a_rvalid),        .s_axi_rready  (a_rready),
        .bram_rst_a    (),
        .bram_clk_a    (),
        .bram_en_a     (bram_en),
        .bram_we_a     (bram_we),
        .bram_addr_a   (bram_addr),
        .bram_wrdata_a (bram_wrdata),
        .bram_rddata_a (bram_rddata)
    );

    blk_mem_gen_0 bram (
        .clka  (axi_aclk),
        .ena   (bram_en),
        .wea   (bram_we),
        .addra (bram_addr[15:3]),  // byte address -> 64-bit word index, 8192 deep
        .dina  (bram_wrdata),
        .douta (bram_rddata)
    );

    // ---- BAR0: AXI GPIO below 0x800, ID block from 0x800, stream registers from 0xc00 -----------------------
    wire [31:0] g_awaddr, g_araddr, g_wdata, g_rdata, i_awaddr, i_araddr, i_wdata, i_rdata;
    wire [3:0]  g_wstrb, i_wstrb;
    wire [1:0]  g_bresp, g_rresp, i_bresp, i_rresp;
    wire [31:0] u_awaddr, u_araddr, u_wdata, u_rdata, t_awaddr, t_araddr, t_wdata, t_rdata;
    wire [3:0]  u_wstrb, t_wstrb;
    wire [1:0]  u_bresp, u_rresp, t_bresp, t_rresp;
    wire        u_awvalid, u_awready, u_wvalid, u_wready, u_bvalid, u_bready;
    wire        u_arvalid, u_arready, u_rvalid, u_rready;
    wire        t_awvalid, t_awready, t_wvalid, t_wready, t_bvalid, t_bready;
    wire        t_arvalid, t_arready, t_rvalid, t_rready;
    wire        g_awvalid, g_awready, g_wvalid, g_wready, g_bvalid, g_bready;
    wire        g_arvalid, g_arready, g_rvalid, g_rready;
    wire        i_awvalid, i_awready, i_wvalid, i_wready, i_bvalid, i_bready;
    wire        i_arvalid, i_arready, i_rvalid, i_rready;

    gdr_bar0_decode #(.ADDR_WIDTH(32), .SPLIT(`GDR_ID_BASE)) bar0_decode (
        .aclk (axi_aclk), .aresetn (axi_aresetn),
        .s_awaddr (m_axil_awaddr), .s_awvalid (m_axil_awvalid), .s_awready (m_axil_awready),
        .s_wdata  (m_axil_wdata),  .s_wstrb   (m_axil_wstrb),   .s_wvalid  (m_axil_wvalid),
        .s_wready (m_axil_wready), .s_bresp   (m_axil_bresp),   .s_bvalid  (m_axil_bvalid),
        .s_bready (m_axil_bready),
        .s_araddr (m_axil_araddr), .s_arvalid (m_axil_arvalid), .s_arready (m_axil_arready),
        .s_rdata  (m_axil_rdata),  .s_rresp   (m_axil_rresp),   .s_rvalid  (m_axil_rvalid),
        .s_rready (m_axil_rready),
        .g_awaddr (g_awaddr), .g_awvalid (g_awvalid), .g_awready (g_awready),
        .g_wdata  (g_wdata),  .g_wstrb   (g_wstrb),   .g_wvalid  (g_wvalid),  .g_wready (g_wready),
        .g_bresp  (g_bresp),  .g_bvalid  (g_bvalid),  .g_bready  (g_bready),
        .g_araddr (g_araddr), .g_arvalid (g_arvalid), .g_arready (g_arready),
        .g_rdata  (g_rdata),  .g_rresp   (g_rresp),   .g_rvalid  (g_rvalid),  .g_rready (g_rready),
        .i_awaddr (u_awaddr), .i_awvalid (u_awvalid), .i_awready (u_awready),
        .i_wdata  (u_wdata),  .i_wstrb   (u_wstrb),   .i_wvalid  (u_wvalid),  .i_wready (u_wready),
        .i_bresp  (u_bresp),  .i_bvalid  (u_bvalid),  .i_bready  (u_bready),
        .i_araddr (u_araddr), .i_arvalid (u_arvalid), .i_arready (u_arready),
        .i_rdata  (u_rdata),  .i_rresp   (u_rresp),   .i_rvalid  (u_rvalid),  .i_rready (u_rready)
    );

    gdr_bar0_decode #(.ADDR_WIDTH(32), .SPLIT(`GDR_ID_END)) gdr_decode (
        .aclk (axi_aclk), .aresetn (axi_aresetn),
        .s_awaddr (u_awaddr), .s_awvalid (u_awvalid), .s_awready (u_awready),
        .s_wdata  (u_wdata),  .s_wstrb   (u_wstrb),   .s_wvalid  (u_wvalid),  .s_wready (u_wready),
        .s_bresp  (u_bresp),  .s_bvalid  (u_bvalid),  .s_bready  (u_bready),
        .s_araddr (u_araddr), .s_arvalid (u_arvalid), .s_arready (u_arready),
        .s_rdata  (u_rdata),  .s_rresp   (u_rresp),   .s_rvalid  (u_rvalid),  .s_rready (u_rready),
        .g_awaddr (i_awaddr), .g_awvalid (i_awvalid), .g_awready (i_awready),
        .g_wdata  (i_wdata),  .g_wstrb   (i_wstrb),   .g_wvalid  (i_wvalid),  .g_wready (i_wready),
        .g_bresp  (i_bresp),  .g_bvalid  (i_bvalid),  .g_bready  (i_bready),
        .g_araddr (i_araddr), .g_arvalid (i_arvalid), .g_arready (i_arready),
        .g_rdata  (i_rdata),  .g_rresp   (i_rresp),   .g_rvalid  (i_rvalid),  .g_rready (i_rready),
        .i_awaddr (t_awaddr), .i_awvalid (t_awvalid), .i_awready (t_awready),
        .i_wdata  (t_wdata),  .i_wstrb   (t_wstrb),   .i_wvalid  (t_wvalid),  .i_wready (t_wready),
        .i_bresp  (t_bresp),  .i_bvalid  (t_bvalid),  .i_bready  (t_bready),
        .i_araddr (t_araddr), .i_arvalid (t_arvalid), .i_arready (t_arready),
        .i_rdata  (t_rdata),  .i_rresp   (t_rresp),   .i_rvalid  (t_rvalid),  .i_rready (t_rready)
    );

    wire [3:0] iocon_i, iocon_o, iocon_t;

    axi_gpio_0 gpio (
        .s_axi_aclk    (axi_aclk),
        .s_axi_aresetn (axi_aresetn),
        .s_axi_awaddr  (g_awaddr[8:0]),  // the GPIO decodes 9 bits: it repeats every 512 B below 0x800
        .s_axi_awvalid (g_awvalid),
        .s_axi_awready (g_awready),
        .s_axi_wdata   (g_wdata),
        .s_axi_wstrb   (g_wstrb),
        .s_axi_wvalid  (g_wvalid),
        .s_axi_wready  (g_wready),
        .s_axi_bresp   (g_bresp),
        .s_axi_bvalid  (g_bvalid),
        .s_axi_bready  (g_bready),
        .s_axi_araddr  (g_araddr[8:0]),
        .s_axi_arvalid (g_arvalid),
        .s_axi_arready (g_arready),
        .s_axi_rdata   (g_rdata),
        .s_axi_rresp   (g_rresp),
        .s_axi_rvalid  (g_rvalid),
        .s_axi_rready  (g_rready),
        .ip2intc_irpt  (gpio_irq),
        .gpio_io_o     (leds),           // 0 lights an LED
        .gpio2_io_i    (iocon_i),
        .gpio2_io_o    (iocon_o),
        .gpio2_io_t    (iocon_t)         // 1 = input (reset: all inputs)
    );

    genvar n;
    generate
        for (n = 0; n < 4; n = n + 1) begin : iocon_buf
            assign iocon[n]   = iocon_t[n] ? 1'bz : iocon_o[n];
            assign iocon_i[n] = iocon[n];
        end
    endgenerate

    gdr_id_block #(
        .ADDR_WIDTH     (12),
        .DESIGN_VERSION (DESIGN_VERSION),
        .BUILD_HASH     (BUILD_HASH),
        .BUILD_TIME     (BUILD_TIME)
    ) id_block (
        .aclk (axi_aclk), .aresetn (axi_aresetn),
        .s_axil_awaddr (i_awaddr[11:0]), .s_axil_awvalid (i_awvalid), .s_axil_awready (i_awready),
        .s_axil_wdata  (i_wdata),        .s_axil_wstrb   (i_wstrb),   .s_axil_wvalid  (i_wvalid),
        .s_axil_wready (i_wready),       .s_axil_bresp   (i_bresp),   .s_axil_bvalid  (i_bvalid),
        .s_axil_bready (i_bready),
        .s_axil_araddr (i_araddr[11:0]), .s_axil_arvalid (i_arvalid), .s_axil_arready (i_arready),
        .s_axil_rdata  (i_rdata),        .s_axil_rresp   (i_rresp),   .s_axil_rvalid  (i_rvalid),
        .s_axil_rready (i_rready)
    );

    gdr_stream #(.ADDR_WIDTH(12), .ID_WIDTH(AXI_ID_WIDTH)) stream (
        .aclk (axi_aclk), .aresetn (axi_aresetn),
        .s_axil_awaddr (t_awaddr[11:0]), .s_axil_awvalid (t_awvalid), .s_axil_awready (t_awready),
        .s_axil_wdata  (t_wdata),        .s_axil_wvalid  (t_wvalid),  .s_axil_wready  (t_wready),
        .s_axil_bresp  (t_bresp),        .s_axil_bvalid  (t_bvalid),  .s_axil_bready  (t_bready),
        .s_axil_araddr (t_araddr[11:0]), .s_axil_arvalid (t_arvalid), .s_axil_arready (t_arready),
        .s_axil_rdata  (t_rdata),        .s_axil_rresp   (t_rresp),   .s_axil_rvalid  (t_rvalid),
        .s_axil_rready (t_rready),
        .s_arid (m_axi_arid), .s_arlen (m_axi_arlen), .s_arvalid (s_arvalid), .s_arready (s_arready),
        .s_rid  (s_rid),      .s_rdata (s_rdata),     .s_rresp   (s_rresp),   .s_rlast   (s_rlast),
        .s_rvalid (s_rvalid), .s_rready (s_rready),
        .s_awid (m_axi_awid), .s_awvalid (s_awvalid), .s_awready (s_awready),
        .s_wdata (m_axi_wdata), .s_wlast (m_axi_wlast), .s_wvalid (s_wvalid), .s_wready (s_wready),
        .s_bid  (s_bid),      .s_bresp (s_bresp),     .s_bvalid  (s_bvalid),  .s_bready  (s_bready)
    );

    wire _unused = &{1'b0, user_lnk_up, bram_addr[2:0], m_axi_awaddr[63:16], m_axi_araddr[63:16],
                     m_axil_awprot, m_axil_arprot, g_awaddr[31:9], g_araddr[31:9], i_awaddr[31:12],
                     i_araddr[31:12], t_awaddr[31:12], t_araddr[31:12], t_wstrb};
endmodule

`default_nettype wire
