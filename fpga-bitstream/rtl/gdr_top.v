// gdr PicoEVB design, top level (XC7A50T-2CSG325C, PCIe Gen2 x1).
//
// Same layout as NVIDIA's jetson-rdma-picoevb bitstream, so the same driver binds:
//   BAR0 (XDMA AXI-Lite master, 4 KiB)  0x000-0x7ff AXI GPIO: ch1 = 3 LEDs (active-low), ch2 = 4 iocon pins
//                                       0x800-0xfff gdr ID block (new; repeats every 0x40)
//   BAR1                                XDMA registers (1 H2C + 1 C2H AXI-MM channel)
//   DMA (XDMA AXI4 master, 64-bit)      64 KiB BRAM at AXI 0; only address bits [15:0] are wired, so DMA
//                                       addresses wrap modulo 64 KiB as on the reference
//   AXI GPIO interrupt                  XDMA usr_irq_req[0]
//
// The Xilinx IP (xdma_0, axi_bram_ctrl_0, blk_mem_gen_0, axi_gpio_0) is created by build.tcl. The build-time
// ID values arrive as parameters from build.tcl (synth_design -generic).

`timescale 1ns / 1ps
`default_nettype none

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
        .s_axi_awvalid (m_axi_awvalid),       .s_axi_awready (m_axi_awready),
        .s_axi_wdata   (m_axi_wdata),         .s_axi_wstrb   (m_axi_wstrb),
        .s_axi_wlast   (m_axi_wlast),         .s_axi_wvalid  (m_axi_wvalid),   .s_axi_wready  (m_axi_wready),
        .s_axi_bid     (m_axi_bid),           .s_axi_bresp   (m_axi_bresp),
        .s_axi_bvalid  (m_axi_bvalid),        .s_axi_bready  (m_axi_bready),
        .s_axi_arid    (m_axi_arid),          .s_axi_araddr  (m_axi_araddr[15:0]),
        .s_axi_arlen   (m_axi_arlen),         .s_axi_arsize  (m_axi_arsize),
        .s_axi_arburst (m_axi_arburst),       .s_axi_arlock  (m_axi_arlock),
        .s_axi_arcache (m_axi_arcache),       .s_axi_arprot  (m_axi_arprot),
        .s_axi_arvalid (m_axi_arvalid),       .s_axi_arready (m_axi_arready),
        .s_axi_rid     (m_axi_rid),           .s_axi_rdata   (m_axi_rdata),
        .s_axi_rresp   (m_axi_rresp),         .s_axi_rlast   (m_axi_rlast),
        .s_axi_rvalid  (m_axi_rvalid),        .s_axi_rready  (m_axi_rready),
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

    // ---- BAR0: AXI GPIO below 0x800, ID block from 0x800 ---------------------------------------------------
    wire [31:0] g_awaddr, g_araddr, g_wdata, g_rdata, i_awaddr, i_araddr, i_wdata, i_rdata;
    wire [3:0]  g_wstrb, i_wstrb;
    wire [1:0]  g_bresp, g_rresp, i_bresp, i_rresp;
    wire        g_awvalid, g_awready, g_wvalid, g_wready, g_bvalid, g_bready;
    wire        g_arvalid, g_arready, g_rvalid, g_rready;
    wire        i_awvalid, i_awready, i_wvalid, i_wready, i_bvalid, i_bready;
    wire        i_arvalid, i_arready, i_rvalid, i_rready;

    gdr_bar0_decode #(.ADDR_WIDTH(32)) bar0_decode (
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
        .i_awaddr (i_awaddr), .i_awvalid (i_awvalid), .i_awready (i_awready),
        .i_wdata  (i_wdata),  .i_wstrb   (i_wstrb),   .i_wvalid  (i_wvalid),  .i_wready (i_wready),
        .i_bresp  (i_bresp),  .i_bvalid  (i_bvalid),  .i_bready  (i_bready),
        .i_araddr (i_araddr), .i_arvalid (i_arvalid), .i_arready (i_arready),
        .i_rdata  (i_rdata),  .i_rresp   (i_rresp),   .i_rvalid  (i_rvalid),  .i_rready (i_rready)
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

    wire _unused = &{1'b0, user_lnk_up, bram_addr[2:0], m_axi_awaddr[63:16], m_axi_araddr[63:16],
                     m_axil_awprot, m_axil_arprot, g_awaddr[31:9], g_araddr[31:9], i_awaddr[31:12],
                     i_araddr[31:12]};
endmodule

`default_nettype wire
