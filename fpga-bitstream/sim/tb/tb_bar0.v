// BAR0 as the XDMA's AXI-Lite master sees it: gdr_bar0_decode in front of a minimal AXI GPIO stand-in and
// the real gdr_id_block, wired as in gdr_top.v. Checks the address decode (GPIO below `GDR_ID_BASE, ID block
// from there, aliasing on both sides), handshake orders through the decode, and dumps one window of the ID
// block (+DUMP=file) for run.sh to compare with what idblock.rs says it must read.

`timescale 1ns / 1ps
`include "gdr_id_regs.vh"

// Stand-in for Xilinx axi_gpio: decodes addr[8:0]; GPIO_DATA is a register, every other offset reads
// 0x6000_0000 | offset so the bench can tell who answered. Like the Xilinx AXI-Lite IPIF it accepts AW and
// W only together.
module gpio_standin (
    input  wire        aclk,
    input  wire        aresetn,
    input  wire [8:0]  awaddr,
    input  wire        awvalid,
    output wire        awready,
    input  wire [31:0] wdata,
    input  wire        wvalid,
    output wire        wready,
    output reg         bvalid,
    input  wire        bready,
    input  wire [8:0]  araddr,
    input  wire        arvalid,
    output wire        arready,
    output reg  [31:0] rdata,
    output reg         rvalid,
    input  wire        rready
);
    reg [31:0] data;
    assign awready = awvalid && wvalid && !bvalid;
    assign wready  = awready;
    assign arready = !rvalid;
    always @(posedge aclk) begin
        if (!aresetn) begin
            bvalid <= 0; rvalid <= 0; data <= 0;
        end else begin
            if (awready) begin
                bvalid <= 1;
                if (awaddr == `GDR_GPIO_DATA) data <= wdata;
            end else if (bready) bvalid <= 0;
            if (arvalid && arready) begin
                rvalid <= 1;
                rdata  <= araddr == `GDR_GPIO_DATA ? data : 32'h6000_0000 | araddr;
            end else if (rready) rvalid <= 0;
        end
    end
endmodule

module tb_bar0;
    parameter [31:0] DESIGN_VERSION = 32'h0102_0003;
    parameter [31:0] BUILD_HASH     = 32'hdead_beef;
    parameter [31:0] BUILD_TIME     = 32'h6553_f100;

    localparam [31:0] ID   = `GDR_ID_BASE;
    localparam [31:0] SCRATCH = `GDR_ID_BASE + `GDR_ID_REG_SCRATCH;
    localparam integer WINDOW = `GDR_ID_WINDOW;

    `include "check.vh"

    reg aclk = 0;
    reg aresetn = 0;
    always #4 aclk = !aclk;

    // master side
    wire [31:0] awaddr, araddr, wdata, rdata;
    wire [3:0]  wstrb;
    wire [1:0]  bresp, rresp;
    wire awvalid, awready, wvalid, wready, bvalid, bready, arvalid, arready, rvalid, rready;
    // GPIO side
    wire [31:0] g_awaddr, g_araddr, g_wdata, g_rdata;
    wire [3:0]  g_wstrb;
    wire [1:0]  g_bresp = 2'b00, g_rresp = 2'b00;
    wire g_awvalid, g_awready, g_wvalid, g_wready, g_bvalid, g_bready, g_arvalid, g_arready, g_rvalid, g_rready;
    // ID block side
    wire [31:0] i_awaddr, i_araddr, i_wdata, i_rdata;
    wire [3:0]  i_wstrb;
    wire [1:0]  i_bresp, i_rresp;
    wire i_awvalid, i_awready, i_wvalid, i_wready, i_bvalid, i_bready, i_arvalid, i_arready, i_rvalid, i_rready;

    axil_bfm #(.ADDR_WIDTH(32)) m (
        .aclk(aclk), .awaddr(awaddr), .awvalid(awvalid), .awready(awready), .wdata(wdata), .wstrb(wstrb),
        .wvalid(wvalid), .wready(wready), .bresp(bresp), .bvalid(bvalid), .bready(bready), .araddr(araddr),
        .arvalid(arvalid), .arready(arready), .rdata(rdata), .rresp(rresp), .rvalid(rvalid), .rready(rready)
    );

    gdr_bar0_decode #(.ADDR_WIDTH(32)) decode (
        .aclk(aclk), .aresetn(aresetn),
        .s_awaddr(awaddr), .s_awvalid(awvalid), .s_awready(awready), .s_wdata(wdata), .s_wstrb(wstrb),
        .s_wvalid(wvalid), .s_wready(wready), .s_bresp(bresp), .s_bvalid(bvalid), .s_bready(bready),
        .s_araddr(araddr), .s_arvalid(arvalid), .s_arready(arready), .s_rdata(rdata), .s_rresp(rresp),
        .s_rvalid(rvalid), .s_rready(rready),
        .g_awaddr(g_awaddr), .g_awvalid(g_awvalid), .g_awready(g_awready), .g_wdata(g_wdata), .g_wstrb(g_wstrb),
        .g_wvalid(g_wvalid), .g_wready(g_wready), .g_bresp(g_bresp), .g_bvalid(g_bvalid), .g_bready(g_bready),
        .g_araddr(g_araddr), .g_arvalid(g_arvalid), .g_arready(g_arready), .g_rdata(g_rdata),
        .g_rresp(g_rresp), .g_rvalid(g_rvalid), .g_rready(g_rready),
        .i_awaddr(i_awaddr), .i_awvalid(i_awvalid), .i_awready(i_awready), .i_wdata(i_wdata), .i_wstrb(i_wstrb),
        .i_wvalid(i_wvalid), .i_wready(i_wready), .i_bresp(i_bresp), .i_bvalid(i_bvalid), .i_bready(i_bready),
        .i_araddr(i_araddr), .i_arvalid(i_arvalid), .i_arready(i_arready), .i_rdata(i_rdata),
        .i_rresp(i_rresp), .i_rvalid(i_rvalid), .i_rready(i_rready)
    );

    gpio_standin gpio (
        .aclk(aclk), .aresetn(aresetn),
        .awaddr(g_awaddr[8:0]), .awvalid(g_awvalid), .awready(g_awready), .wdata(g_wdata), .wvalid(g_wvalid),
        .wready(g_wready), .bvalid(g_bvalid), .bready(g_bready), .araddr(g_araddr[8:0]), .arvalid(g_arvalid),
        .arready(g_arready), .rdata(g_rdata), .rvalid(g_rvalid), .rready(g_rready)
    );

    gdr_id_block #(
        .ADDR_WIDTH(12), .DESIGN_VERSION(DESIGN_VERSION), .BUILD_HASH(BUILD_HASH), .BUILD_TIME(BUILD_TIME)
    ) id_block (
        .aclk(aclk), .aresetn(aresetn),
        .s_axil_awaddr(i_awaddr[11:0]), .s_axil_awvalid(i_awvalid), .s_axil_awready(i_awready),
        .s_axil_wdata(i_wdata), .s_axil_wstrb(i_wstrb), .s_axil_wvalid(i_wvalid), .s_axil_wready(i_wready),
        .s_axil_bresp(i_bresp), .s_axil_bvalid(i_bvalid), .s_axil_bready(i_bready),
        .s_axil_araddr(i_araddr[11:0]), .s_axil_arvalid(i_arvalid), .s_axil_arready(i_arready),
        .s_axil_rdata(i_rdata), .s_axil_rresp(i_rresp), .s_axil_rvalid(i_rvalid), .s_axil_rready(i_rready)
    );

    // A request on the wrong side of the decode is an error even if the data happens to match.
    integer stray = 0;
    reg wr_to_id = 0, rd_to_id = 0;  // which side the current write / read must reach
    always @(posedge aclk) begin
        if ((g_awvalid || g_wvalid) && wr_to_id) stray = stray + 1;
        if ((i_awvalid || i_wvalid) && !wr_to_id) stray = stray + 1;
        if (g_arvalid && rd_to_id) stray = stray + 1;
        if (i_arvalid && !rd_to_id) stray = stray + 1;
    end

    reg [31:0] data, want, id_magic;
    reg [1:0]  resp, resp2;
    reg [8*72-1:0] name;
    reg [8*256-1:0] dump_path;
    reg [11:0] off12;
    integer i, fd, order;

    function [31:0] gpio_read(input [31:0] addr, input [31:0] gpio_data);
        gpio_read = (addr & `GDR_GPIO_DECODE_MASK) == `GDR_GPIO_DATA ? gpio_data
                                                                      : 32'h6000_0000 | (addr & `GDR_GPIO_DECODE_MASK);
    endfunction

    task automatic rd(input [31:0] addr);
        begin
            rd_to_id = (addr & (`GDR_BAR0_SIZE - 1)) >= `GDR_ID_BASE;
            m.read(addr, 0, data, resp);
        end
    endtask
    task automatic wr(input [31:0] addr, input [31:0] value, input integer order, input integer gap);
        begin
            wr_to_id = (addr & (`GDR_BAR0_SIZE - 1)) >= `GDR_ID_BASE;
            m.write(addr, value, 4'b1111, order, gap, 1, resp);
        end
    endtask

    initial begin
        repeat (4) @(posedge aclk);
        #1 aresetn = 1;

        // ---- one window of the ID block, dumped for the Rust cross-check ----
        if (!$value$plusargs("DUMP=%s", dump_path)) dump_path = "idblock_readback.txt";
        fd = $fopen(dump_path, "w");
        for (i = 0; i < WINDOW; i = i + 4) begin
            rd(ID + i);
            off12 = ID + i;
            $fdisplay(fd, "0x%03h 0x%08h", off12, data);
        end
        $fclose(fd);
        rd(ID + `GDR_ID_REG_MAGIC);
        id_magic = data;
        check32("BAR0 0x800 reads the ID block MAGIC", data, `GDR_ID_MAGIC);

        // ---- decode boundaries and aliasing ----
        rd(32'h000); check32("BAR0 0x000 -> GPIO_DATA", data, 32'h0);
        rd(32'h004); check32("BAR0 0x004 -> GPIO", data, gpio_read(32'h004, 0));
        rd(32'h1fc); check32("BAR0 0x1fc -> GPIO", data, gpio_read(32'h1fc, 0));
        rd(32'h204); check32("BAR0 0x204 -> GPIO alias of 0x004", data, gpio_read(32'h004, 0));
        rd(32'h7fc); check32("BAR0 0x7fc (last GPIO word)", data, gpio_read(32'h7fc, 0));
        rd(32'h800); check32("BAR0 0x800 (first ID word)", data, `GDR_ID_MAGIC);
        rd(32'h840); check32("BAR0 0x840 -> ID alias of 0x800", data, `GDR_ID_MAGIC);
        rd(32'hbc0 + `GDR_ID_REG_BUILD_HASH);
        check32("BAR0 0xbcc -> ID alias of BUILD_HASH", data, BUILD_HASH);
        rd(32'hbfc); check32("BAR0 0xbfc (last ID word) -> ID reserved", data, 32'h0);
        rd(32'h1800); check32("AXI 0x1800 decodes modulo the 4 KiB BAR (ID)", data, `GDR_ID_MAGIC);
        rd(32'h1004); check32("AXI 0x1004 decodes modulo the 4 KiB BAR (GPIO)", data, gpio_read(32'h004, 0));
        check32("BAR0 reads respond OKAY", {30'd0, resp}, 0);

        // ---- writes reach only their side ----
        wr(32'h000, 32'h0000_0005, 0, 0);
        check_okay("GPIO_DATA write responds OKAY", resp);
        rd(32'h000); check32("GPIO_DATA written (LEDs 0 and 2 off)", data, 32'h5);
        rd(SCRATCH); check32("GPIO write leaves ID SCRATCH alone", data, `GDR_ID_SCRATCH_RESET);
        wr(SCRATCH, 32'h7e57_0001, 0, 0);
        rd(SCRATCH); check32("ID SCRATCH written through BAR0", data, 32'h7e57_0001);
        rd(32'h000); check32("ID write leaves GPIO_DATA alone", data, 32'h5);
        wr(32'h200, 32'h0000_0002, 0, 0);
        rd(32'h000); check32("GPIO_DATA written through alias 0x200", data, 32'h2);
        wr(ID + `GDR_ID_REG_MAGIC, 32'hffff_ffff, 0, 0);
        rd(ID + `GDR_ID_REG_MAGIC); check32("MAGIC not writable through BAR0", data, `GDR_ID_MAGIC);

        // ---- W before AW, AW before W, both: to either side, through the decode ----
        for (order = 0; order < 3; order = order + 1) begin
            want = 32'h00c0_de00 | order;
            wr(SCRATCH, want, order, 2);
            rd(SCRATCH);
            $sformat(name, "ID write, order %0d, through the decode", order);
            check32(name, data, want);
            wr(32'h000, order, order, 2);
            rd(32'h000);
            $sformat(name, "GPIO write, order %0d, through the decode", order);
            check32(name, data, order);
        end

        // ---- a GPIO write and an ID read in flight together ----
        fork
            begin wr_to_id = 0; m.write(32'h000, 32'h3, 4'b1111, 2, 2, 2, resp2); end
            begin rd_to_id = 1; #3; m.read(ID + `GDR_ID_REG_LAYOUT, 1, data, resp); end
        join
        check32("ID read while a GPIO write is open", data, `GDR_ID_LAYOUT_VERSION);
        rd(32'h000); check32("GPIO write completed alongside", data, 32'h3);

        check32("no request reached the wrong side", stray, 0);
        check32("no AXI-Lite protocol errors", m.errors, 0);
        finish_tb;
    end

    initial begin
        #2000000;
        $display("FAIL tb_bar0: simulation timeout");
        $finish;
    end
endmodule
