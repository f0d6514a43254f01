// Empty stand-ins for the Xilinx primitives and IP that gdr_top.v instantiates, with the ports gdr_top.v
// connects, so the top level can be elaborated and linted here (port names, widths, our own modules'
// wiring). They model nothing and prove nothing about the real IP's ports: only Vivado can (bring-up list).

`timescale 1ns / 1ps
`default_nettype none

module IBUFDS_GTE2 (input wire I, input wire IB, input wire CEB, output wire O, output wire ODIV2);
    assign O = I & ~IB & ~CEB;
    assign ODIV2 = 1'b0;
endmodule

module xdma_0 (
    input  wire sys_clk, input wire sys_rst_n, output wire user_lnk_up,
    output wire [0:0] pci_exp_txp, output wire [0:0] pci_exp_txn,
    input  wire [0:0] pci_exp_rxp, input wire [0:0] pci_exp_rxn,
    output wire axi_aclk, output wire axi_aresetn,
    input  wire [0:0] usr_irq_req, output wire [0:0] usr_irq_ack,
    output wire msi_enable, output wire [2:0] msi_vector_width,
    input  wire m_axi_awready, input wire m_axi_wready,
    input  wire [1:0] m_axi_bid, input wire [1:0] m_axi_bresp, input wire m_axi_bvalid,
    input  wire m_axi_arready,
    input  wire [1:0] m_axi_rid, input wire [63:0] m_axi_rdata, input wire [1:0] m_axi_rresp,
    input  wire m_axi_rlast, input wire m_axi_rvalid,
    output wire [1:0] m_axi_awid, output wire [63:0] m_axi_awaddr, output wire [7:0] m_axi_awlen,
    output wire [2:0] m_axi_awsize, output wire [1:0] m_axi_awburst, output wire [2:0] m_axi_awprot,
    output wire m_axi_awvalid, output wire m_axi_awlock, output wire [3:0] m_axi_awcache,
    output wire [63:0] m_axi_wdata, output wire [7:0] m_axi_wstrb, output wire m_axi_wlast,
    output wire m_axi_wvalid, output wire m_axi_bready,
    output wire [1:0] m_axi_arid, output wire [63:0] m_axi_araddr, output wire [7:0] m_axi_arlen,
    output wire [2:0] m_axi_arsize, output wire [1:0] m_axi_arburst, output wire [2:0] m_axi_arprot,
    output wire m_axi_arvalid, output wire m_axi_arlock, output wire [3:0] m_axi_arcache,
    output wire m_axi_rready,
    output wire [31:0] m_axil_awaddr, output wire [2:0] m_axil_awprot, output wire m_axil_awvalid,
    input  wire m_axil_awready, output wire [31:0] m_axil_wdata, output wire [3:0] m_axil_wstrb,
    output wire m_axil_wvalid, input wire m_axil_wready, input wire m_axil_bvalid,
    input  wire [1:0] m_axil_bresp, output wire m_axil_bready, output wire [31:0] m_axil_araddr,
    output wire [2:0] m_axil_arprot, output wire m_axil_arvalid, input wire m_axil_arready,
    input  wire [31:0] m_axil_rdata, input wire [1:0] m_axil_rresp, input wire m_axil_rvalid,
    output wire m_axil_rready
);
    assign {user_lnk_up, pci_exp_txp, pci_exp_txn, axi_aclk, axi_aresetn, usr_irq_ack, msi_enable,
            msi_vector_width} = 0;
    assign {m_axi_awid, m_axi_awaddr, m_axi_awlen, m_axi_awsize, m_axi_awburst, m_axi_awprot, m_axi_awvalid,
            m_axi_awlock, m_axi_awcache, m_axi_wdata, m_axi_wstrb, m_axi_wlast, m_axi_wvalid, m_axi_bready,
            m_axi_arid, m_axi_araddr, m_axi_arlen, m_axi_arsize, m_axi_arburst, m_axi_arprot, m_axi_arvalid,
            m_axi_arlock, m_axi_arcache, m_axi_rready} = 0;
    assign {m_axil_awaddr, m_axil_awprot, m_axil_awvalid, m_axil_wdata, m_axil_wstrb, m_axil_wvalid,
            m_axil_bready, m_axil_araddr, m_axil_arprot, m_axil_arvalid, m_axil_rready} = 0;
    wire _unused = &{1'b0, sys_clk, sys_rst_n, pci_exp_rxp, pci_exp_rxn, usr_irq_req, m_axi_awready,
                     m_axi_wready, m_axi_bid, m_axi_bresp, m_axi_bvalid, m_axi_arready, m_axi_rid, m_axi_rdata,
                     m_axi_rresp, m_axi_rlast, m_axi_rvalid, m_axil_awready, m_axil_wready, m_axil_bvalid,
                     m_axil_bresp, m_axil_arready, m_axil_rdata, m_axil_rresp, m_axil_rvalid};
endmodule

module axi_bram_ctrl_0 (
    input  wire s_axi_aclk, input wire s_axi_aresetn,
    input  wire [1:0] s_axi_awid, input wire [15:0] s_axi_awaddr, input wire [7:0] s_axi_awlen,
    input  wire [2:0] s_axi_awsize, input wire [1:0] s_axi_awburst, input wire s_axi_awlock,
    input  wire [3:0] s_axi_awcache, input wire [2:0] s_axi_awprot, input wire s_axi_awvalid,
    output wire s_axi_awready,
    input  wire [63:0] s_axi_wdata, input wire [7:0] s_axi_wstrb, input wire s_axi_wlast,
    input  wire s_axi_wvalid, output wire s_axi_wready,
    output wire [1:0] s_axi_bid, output wire [1:0] s_axi_bresp, output wire s_axi_bvalid,
    input  wire s_axi_bready,
    input  wire [1:0] s_axi_arid, input wire [15:0] s_axi_araddr, input wire [7:0] s_axi_arlen,
    input  wire [2:0] s_axi_arsize, input wire [1:0] s_axi_arburst, input wire s_axi_arlock,
    input  wire [3:0] s_axi_arcache, input wire [2:0] s_axi_arprot, input wire s_axi_arvalid,
    output wire s_axi_arready,
    output wire [1:0] s_axi_rid, output wire [63:0] s_axi_rdata, output wire [1:0] s_axi_rresp,
    output wire s_axi_rlast, output wire s_axi_rvalid, input wire s_axi_rready,
    output wire bram_rst_a, output wire bram_clk_a, output wire bram_en_a, output wire [7:0] bram_we_a,
    output wire [15:0] bram_addr_a, output wire [63:0] bram_wrdata_a, input wire [63:0] bram_rddata_a
);
    assign {s_axi_awready, s_axi_wready, s_axi_bid, s_axi_bresp, s_axi_bvalid, s_axi_arready, s_axi_rid,
            s_axi_rdata, s_axi_rresp, s_axi_rlast, s_axi_rvalid} = 0;
    assign {bram_rst_a, bram_clk_a, bram_en_a, bram_we_a, bram_addr_a, bram_wrdata_a} = 0;
    wire _unused = &{1'b0, s_axi_aclk, s_axi_aresetn, s_axi_awid, s_axi_awaddr, s_axi_awlen, s_axi_awsize,
                     s_axi_awburst, s_axi_awlock, s_axi_awcache, s_axi_awprot, s_axi_awvalid, s_axi_wdata,
                     s_axi_wstrb, s_axi_wlast, s_axi_wvalid, s_axi_bready, s_axi_arid, s_axi_araddr,
                     s_axi_arlen, s_axi_arsize, s_axi_arburst, s_axi_arlock, s_axi_arcache, s_axi_arprot,
                     s_axi_arvalid, s_axi_rready, bram_rddata_a};
endmodule

module blk_mem_gen_0 (
    input wire clka, input wire ena, input wire [7:0] wea, input wire [12:0] addra, input wire [63:0] dina,
    output wire [63:0] douta
);
    assign douta = 0;
    wire _unused = &{1'b0, clka, ena, wea, addra, dina};
endmodule

module axi_gpio_0 (
    input  wire s_axi_aclk, input wire s_axi_aresetn,
    input  wire [8:0] s_axi_awaddr, input wire s_axi_awvalid, output wire s_axi_awready,
    input  wire [31:0] s_axi_wdata, input wire [3:0] s_axi_wstrb, input wire s_axi_wvalid,
    output wire s_axi_wready, output wire [1:0] s_axi_bresp, output wire s_axi_bvalid, input wire s_axi_bready,
    input  wire [8:0] s_axi_araddr, input wire s_axi_arvalid, output wire s_axi_arready,
    output wire [31:0] s_axi_rdata, output wire [1:0] s_axi_rresp, output wire s_axi_rvalid,
    input  wire s_axi_rready,
    output wire ip2intc_irpt,
    output wire [2:0] gpio_io_o,
    input  wire [3:0] gpio2_io_i, output wire [3:0] gpio2_io_o, output wire [3:0] gpio2_io_t
);
    assign {s_axi_awready, s_axi_wready, s_axi_bresp, s_axi_bvalid, s_axi_arready, s_axi_rdata, s_axi_rresp,
            s_axi_rvalid, ip2intc_irpt, gpio_io_o, gpio2_io_o} = 0;
    assign gpio2_io_t = 4'hf;
    wire _unused = &{1'b0, s_axi_aclk, s_axi_aresetn, s_axi_awaddr, s_axi_awvalid, s_axi_wdata, s_axi_wstrb,
                     s_axi_wvalid, s_axi_bready, s_axi_araddr, s_axi_arvalid, s_axi_rready, gpio2_io_i};
endmodule

`default_nettype wire
