// gdr_id_block on its own: register values against gdr_id_regs.vh (generated from idblock.rs), SCRATCH with
// byte strobes, read-only and reserved registers, aliasing, and AXI4-Lite handshake orders and backpressure.
//
// Build values come in as parameters (run.sh passes the ones the Vivado build would use). The meta-tests in
// run.sh rebuild this bench with DUT_CAPS wrong, or with GDR_TB_EXPECT_WRONG_MAGIC defined, and require
// failures: they show the checks can fail.

`timescale 1ns / 1ps
`include "gdr_id_regs.vh"

module tb_id_block;
    parameter [31:0] DESIGN_VERSION = 32'h0102_0003;
    parameter [31:0] BUILD_HASH     = 32'hdead_beef;
    parameter [31:0] BUILD_TIME     = 32'h6553_f100;
    parameter [31:0] DUT_CAPS       = `GDR_ID_CAPS_PICOEVB;  // what the DUT is built with

`ifdef GDR_TB_EXPECT_WRONG_MAGIC
    localparam [31:0] WANT_MAGIC = `GDR_ID_MAGIC ^ 32'h0000_0001;
`else
    localparam [31:0] WANT_MAGIC = `GDR_ID_MAGIC;
`endif
    localparam [11:0] BASE = `GDR_ID_BASE;
    localparam integer WINDOW = `GDR_ID_WINDOW;
    localparam [11:0] SCRATCH = `GDR_ID_BASE + `GDR_ID_REG_SCRATCH;

    `include "check.vh"

    reg aclk = 0;
    reg aresetn = 0;
    always #4 aclk = !aclk;  // 125 MHz

    wire [11:0] awaddr, araddr;
    wire [31:0] wdata, rdata;
    wire [3:0]  wstrb;
    wire [1:0]  bresp, rresp;
    wire awvalid, awready, wvalid, wready, bvalid, bready, arvalid, arready, rvalid, rready;

    axil_bfm #(.ADDR_WIDTH(12)) m (
        .aclk(aclk), .awaddr(awaddr), .awvalid(awvalid), .awready(awready), .wdata(wdata), .wstrb(wstrb),
        .wvalid(wvalid), .wready(wready), .bresp(bresp), .bvalid(bvalid), .bready(bready), .araddr(araddr),
        .arvalid(arvalid), .arready(arready), .rdata(rdata), .rresp(rresp), .rvalid(rvalid), .rready(rready)
    );

    gdr_id_block #(
        .ADDR_WIDTH(12), .DESIGN_VERSION(DESIGN_VERSION), .BUILD_HASH(BUILD_HASH), .BUILD_TIME(BUILD_TIME),
        .CAPS(DUT_CAPS)
    ) dut (
        .aclk(aclk), .aresetn(aresetn),
        .s_axil_awaddr(awaddr), .s_axil_awvalid(awvalid), .s_axil_awready(awready),
        .s_axil_wdata(wdata), .s_axil_wstrb(wstrb), .s_axil_wvalid(wvalid), .s_axil_wready(wready),
        .s_axil_bresp(bresp), .s_axil_bvalid(bvalid), .s_axil_bready(bready),
        .s_axil_araddr(araddr), .s_axil_arvalid(arvalid), .s_axil_arready(arready),
        .s_axil_rdata(rdata), .s_axil_rresp(rresp), .s_axil_rvalid(rvalid), .s_axil_rready(rready)
    );

    // One transaction at a time: once AW (W) is accepted no other AW (W) may be until the B response has
    // been taken, and no AR while an R is waiting. Checked on the READY signals, whatever the master does.
    integer overlap = 0;
    reg aw_taken = 0, w_taken = 0;
    always @(negedge aclk) if (aresetn) begin
        if ((aw_taken || bvalid) && awready) overlap = overlap + 1;
        if ((w_taken || bvalid) && wready) overlap = overlap + 1;
        if (rvalid && arready) overlap = overlap + 1;
    end
    always @(posedge aclk) begin
        if (!aresetn || (bvalid && bready)) begin
            aw_taken <= 0;
            w_taken  <= 0;
        end else begin
            if (awvalid && awready) aw_taken <= 1;
            if (wvalid && wready) w_taken <= 1;
        end
    end

    // What each register must read at reset, by index (reserved ones 0).
    function [31:0] expected(input integer idx);
        begin
            case (idx * 4)
                `GDR_ID_REG_MAGIC:          expected = WANT_MAGIC;
                `GDR_ID_REG_LAYOUT:         expected = `GDR_ID_LAYOUT_VERSION;
                `GDR_ID_REG_DESIGN_VERSION: expected = DESIGN_VERSION;
                `GDR_ID_REG_BUILD_HASH:     expected = BUILD_HASH;
                `GDR_ID_REG_BUILD_TIME:     expected = BUILD_TIME;
                `GDR_ID_REG_CAPS:           expected = `GDR_ID_CAPS_PICOEVB;
                `GDR_ID_REG_RAM_SIZE:       expected = `GDR_ID_RAM_SIZE;
                `GDR_ID_REG_SCRATCH:        expected = `GDR_ID_SCRATCH_RESET;
                default:                    expected = 32'h0;
            endcase
        end
    endfunction

    reg [31:0] data, want;
    reg [1:0]  resp, resp2;
    reg [8*72-1:0] name;
    integer i, k, order, gap, stall;

    // Register offsets at their natural width, for readable check names.
    function [7:0] off8(input integer v); off8 = v; endfunction
    function [11:0] off12(input integer v); off12 = v; endfunction

    task automatic rd(input [11:0] addr, input integer rstall);
        m.read(addr, rstall, data, resp);
    endtask
    task automatic wr(input [11:0] addr, input [31:0] value, input [3:0] strb);
        m.write(addr, value, strb, 0, 0, 0, resp);
    endtask

    initial begin
        repeat (4) @(posedge aclk);
        #1 aresetn = 1;

        // ---- every register after reset, against the generated header ----
        for (i = 0; i < WINDOW / 4; i = i + 1) begin
            rd(BASE + 4 * i, 0);
            $sformat(name, "reset value of register 0x%02h", off8(4 * i));
            check32(name, data, expected(i));
            $sformat(name, "read 0x%02h responds OKAY", off8(4 * i));
            check_okay(name, resp);
        end

        // ---- the block repeats every window, from any address ----
        for (k = 1; k < 32; k = k + 5) begin
            for (i = 0; i < WINDOW / 4; i = i + 3) begin
                rd(BASE + k * WINDOW + 4 * i, 0);
                $sformat(name, "alias +0x%03h of register 0x%02h", off12(k * WINDOW), off8(4 * i));
                check32(name, data, expected(i));
            end
        end
        rd(12'h000 + `GDR_ID_REG_MAGIC, 0);
        check32("alias at 0x000 (block alone decodes addr[5:2])", data, WANT_MAGIC);

        // ---- SCRATCH: full write, then byte strobes ----
        wr(SCRATCH, 32'ha5a5_5a5a, 4'b1111);
        check_okay("scratch write responds OKAY", resp);
        rd(SCRATCH, 0);
        check32("scratch full write", data, 32'ha5a5_5a5a);
        want = 32'ha5a5_5a5a;
        for (i = 0; i < 16; i = i + 1) begin
            wr(SCRATCH, 32'h1122_3344 + i * 32'h0101_0101, i[3:0]);
            for (k = 0; k < 4; k = k + 1)
                if (i[k]) want[8*k +: 8] = (32'h1122_3344 + i * 32'h0101_0101) >> (8 * k);
            rd(SCRATCH, 0);
            $sformat(name, "scratch byte strobes %b", i[3:0]);
            check32(name, data, want);
        end

        // ---- writes to read-only and reserved registers change nothing ----
        wr(SCRATCH, 32'h0bad_f00d, 4'b1111);
        for (i = 0; i < WINDOW / 4; i = i + 1) begin
            if (!((`GDR_ID_WRITABLE >> i) & 1)) begin
                wr(BASE + 4 * i, 32'hffff_ffff, 4'b1111);
                $sformat(name, "write to RO 0x%02h responds OKAY", off8(4 * i));
                check_okay(name, resp);
                rd(BASE + 4 * i, 0);
                $sformat(name, "write to RO 0x%02h ignored", off8(4 * i));
                check32(name, data, expected(i));
            end
        end
        rd(SCRATCH, 0);
        check32("RO writes leave scratch alone", data, 32'h0bad_f00d);

        // ---- a write through an alias lands in SCRATCH ----
        wr(SCRATCH + 5 * WINDOW, 32'hcafe_0001, 4'b1111);
        rd(SCRATCH, 0);
        check32("scratch written through alias +0x140", data, 32'hcafe_0001);

        // ---- AW/W orders: together, AW first, W first; each with gaps of 1 and 3 cycles ----
        for (order = 0; order < 3; order = order + 1) begin
            for (gap = 1; gap <= 3; gap = gap + 2) begin
                want = {8'h5c, order[7:0], gap[7:0], 8'h77};
                m.write(SCRATCH, want, 4'b1111, order, gap, 0, resp);
                $sformat(name, "write order %0d gap %0d responds OKAY", order, gap);
                check_okay(name, resp);
                rd(SCRATCH, 0);
                $sformat(name, "write order %0d gap %0d lands", order, gap);
                check32(name, data, want);
            end
        end

        // ---- backpressure on B and R ----
        for (stall = 1; stall <= 5; stall = stall + 2) begin
            want = 32'h0b00_0000 | stall;
            m.write(SCRATCH, want, 4'b1111, 1, 2, stall, resp);
            $sformat(name, "BREADY held low %0d cycles", stall);
            check_okay(name, resp);
            rd(SCRATCH, stall);
            $sformat(name, "RREADY held low %0d cycles", stall);
            check32(name, data, want);
            rd(BASE + `GDR_ID_REG_BUILD_HASH, stall);
            $sformat(name, "RREADY held low %0d cycles (hash)", stall);
            check32(name, data, BUILD_HASH);
        end

        // ---- a read and a write at the same time ----
        fork
            m.write(SCRATCH, 32'h1234_5678, 4'b1111, 2, 1, 1, resp2);
            m.read(BASE + `GDR_ID_REG_MAGIC, 2, data, resp);
        join
        check32("concurrent read returns MAGIC", data, WANT_MAGIC);
        check_okay("concurrent write responds OKAY", resp2);
        rd(SCRATCH, 0);
        check32("concurrent write lands", data, 32'h1234_5678);

        // ---- reset puts SCRATCH back ----
        @(posedge aclk); #1 aresetn = 0;
        repeat (2) @(posedge aclk);
        #1 aresetn = 1;
        rd(SCRATCH, 0);
        check32("reset restores scratch", data, `GDR_ID_SCRATCH_RESET);

        check32("one transaction at a time (READY low while one is open)", overlap, 0);
        check32("no AXI-Lite protocol errors", m.errors, 0);
        finish_tb;
    end

    initial begin
        #2000000;
        $display("FAIL tb_id_block: simulation timeout");
        $finish;
    end
endmodule
