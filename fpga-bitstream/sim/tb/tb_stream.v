// The stream block behind the DMA decode, as the XDMA's AXI4 master sees it, with the registers driven over
// AXI-Lite. Checks: reset values; an invalid record length is ignored; reads while disabled return zeros;
// a good stream (records checked here with an independent CRC-32C, then fed to the checker); a planted CRC
// error; a skipped sequence number; overrun while the reader stalls, with the missing numbers equal to the
// counter and records exactly PERIOD ticks apart; a read waiting for its record; the decode sends addresses
// below the window to the BRAM side. run.sh also runs this bench against broken copies of gdr_stream.v.

`timescale 1ns / 1ps
`include "gdr_id_regs.vh"

// Stand-in for the BRAM controller: counts what reaches it, reads return a marker.
module bram_standin (
    input  wire        aclk,
    input  wire        aresetn,
    input  wire [7:0]  arlen,
    input  wire        arvalid,
    output wire        arready,
    output reg  [63:0] rdata,
    output reg         rlast,
    output reg         rvalid,
    input  wire        rready,
    input  wire        awvalid,
    output wire        awready,
    input  wire        wvalid,
    input  wire        wlast,
    output wire        wready,
    output reg         bvalid,
    input  wire        bready
);
    reg rbusy = 0, wbusy = 0;
    reg [7:0] left;
    integer beats_written = 0;
    assign arready = !rbusy;
    assign awready = !wbusy && !bvalid;
    assign wready  = wbusy;
    always @(posedge aclk) begin
        if (!aresetn) begin
            rbusy <= 0; rvalid <= 0; rlast <= 0; wbusy <= 0; bvalid <= 0; rdata <= 64'hb4a3_b4a3_b4a3_b4a3;
        end else begin
            if (arvalid && arready) begin rbusy <= 1; left <= arlen; rvalid <= 1; rlast <= arlen == 0; end
            else if (rvalid && rready) begin
                if (rlast) begin rvalid <= 0; rbusy <= 0; end
                else begin left <= left - 1; rlast <= left == 1; end
            end
            if (awvalid && awready) wbusy <= 1;
            if (wvalid && wready) begin
                beats_written = beats_written + 1;
                if (wlast) begin wbusy <= 0; bvalid <= 1; end
            end
            if (bvalid && bready) bvalid <= 0;
        end
    end
endmodule

module tb_stream;
    // Values run.sh passes to every bench; unused here.
    parameter [31:0] DESIGN_VERSION = 0;
    parameter [31:0] BUILD_HASH     = 0;
    parameter [31:0] BUILD_TIME     = 0;

    localparam [11:0] B = `GDR_STREAM_BASE;
    localparam [63:0] WIN = 64'h1 << `GDR_STREAM_AXI_BIT;
    localparam integer DEPTH = `GDR_STREAM_FIFO_DEPTH;

    `include "check.vh"

    reg aclk = 0;
    reg aresetn = 0;
    always #4 aclk = !aclk;

    // ---- AXI-Lite registers --------------------------------------------------------------------------------
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

    // ---- AXI4 DMA master (this bench) ----------------------------------------------------------------------
    reg  [63:0] m_awaddr = 0, m_araddr = 0, m_wdata = 0;
    reg  [1:0]  m_awid = 0, m_arid = 0;
    wire [1:0]  a_bid, a_rid;  // the BRAM stand-in echoes the one ID in flight
    assign a_bid = m_awid;
    assign a_rid = m_arid;
    reg  [7:0]  m_arlen = 0;
    reg         m_awvalid = 0, m_wvalid = 0, m_wlast = 0, m_bready = 0, m_arvalid = 0, m_rready = 0;
    wire        m_awready, m_wready, m_bvalid, m_arready, m_rvalid, m_rlast;
    wire [1:0]  m_bid, m_rid, m_bresp, m_rresp;
    wire [63:0] m_rdata;

    wire a_awvalid, a_awready, a_wvalid, a_wready, a_bvalid, a_bready, a_arvalid, a_arready;
    wire a_rvalid, a_rready, a_rlast;
    wire s_awvalid, s_awready, s_wvalid, s_wready, s_bvalid, s_bready, s_arvalid, s_arready;
    wire s_rvalid, s_rready, s_rlast;
    wire [1:0]  a_bresp = 2'b00, a_rresp = 2'b00;
    wire [1:0]  s_bid, s_rid, s_bresp, s_rresp;
    wire [63:0] a_rdata, s_rdata;

    gdr_dma_decode #(.ID_WIDTH(2)) decode (
        .aclk(aclk), .aresetn(aresetn),
        .awaddr(m_awaddr), .awvalid(m_awvalid), .awready(m_awready), .wlast(m_wlast), .wvalid(m_wvalid),
        .wready(m_wready), .bid(m_bid), .bresp(m_bresp), .bvalid(m_bvalid), .bready(m_bready),
        .araddr(m_araddr), .arvalid(m_arvalid), .arready(m_arready), .rid(m_rid), .rdata(m_rdata),
        .rresp(m_rresp), .rlast(m_rlast), .rvalid(m_rvalid), .rready(m_rready),
        .a_awvalid(a_awvalid), .a_awready(a_awready), .a_wvalid(a_wvalid), .a_wready(a_wready), .a_bid(a_bid),
        .a_bresp(a_bresp), .a_bvalid(a_bvalid), .a_bready(a_bready), .a_arvalid(a_arvalid),
        .a_arready(a_arready), .a_rid(a_rid), .a_rdata(a_rdata), .a_rresp(a_rresp), .a_rlast(a_rlast),
        .a_rvalid(a_rvalid), .a_rready(a_rready),
        .s_awvalid(s_awvalid), .s_awready(s_awready), .s_wvalid(s_wvalid), .s_wready(s_wready), .s_bid(s_bid),
        .s_bresp(s_bresp), .s_bvalid(s_bvalid), .s_bready(s_bready), .s_arvalid(s_arvalid),
        .s_arready(s_arready), .s_rid(s_rid), .s_rdata(s_rdata), .s_rresp(s_rresp), .s_rlast(s_rlast),
        .s_rvalid(s_rvalid), .s_rready(s_rready)
    );

    bram_standin bram (
        .aclk(aclk), .aresetn(aresetn), .arlen(m_arlen), .arvalid(a_arvalid), .arready(a_arready),
        .rdata(a_rdata), .rlast(a_rlast), .rvalid(a_rvalid), .rready(a_rready), .awvalid(a_awvalid),
        .awready(a_awready), .wvalid(a_wvalid), .wlast(m_wlast), .wready(a_wready), .bvalid(a_bvalid),
        .bready(a_bready)
    );

    gdr_stream #(.ADDR_WIDTH(12), .ID_WIDTH(2)) dut (
        .aclk(aclk), .aresetn(aresetn),
        .s_axil_awaddr(awaddr), .s_axil_awvalid(awvalid), .s_axil_awready(awready), .s_axil_wdata(wdata),
        .s_axil_wvalid(wvalid), .s_axil_wready(wready), .s_axil_bresp(bresp), .s_axil_bvalid(bvalid),
        .s_axil_bready(bready), .s_axil_araddr(araddr), .s_axil_arvalid(arvalid), .s_axil_arready(arready),
        .s_axil_rdata(rdata), .s_axil_rresp(rresp), .s_axil_rvalid(rvalid), .s_axil_rready(rready),
        .s_arid(m_arid), .s_arlen(m_arlen), .s_arvalid(s_arvalid), .s_arready(s_arready), .s_rid(s_rid),
        .s_rdata(s_rdata), .s_rresp(s_rresp), .s_rlast(s_rlast), .s_rvalid(s_rvalid), .s_rready(s_rready),
        .s_awid(m_awid), .s_awvalid(s_awvalid), .s_awready(s_awready), .s_wdata(m_wdata), .s_wlast(m_wlast),
        .s_wvalid(s_wvalid), .s_wready(s_wready), .s_bid(s_bid), .s_bresp(s_bresp), .s_bvalid(s_bvalid),
        .s_bready(s_bready)
    );

    // ---- AXI4 master tasks ---------------------------------------------------------------------------------
    reg [63:0] rx [0:4095];   // beats read, in order
    integer    rx_n = 0;
    integer    axi_errors = 0;

    // Reads `beats` beats at `addr` into rx[]; RREADY low every `stall`-th cycle (0: never).
    task automatic rd_burst(input [63:0] addr, input integer beats, input integer stall);
        integer got, n;
        reg ar_go;
        begin
            @(posedge aclk); #1;
            m_araddr = addr; m_arlen = beats - 1; m_arid = m_arid + 1; m_arvalid = 1;
            got = 0; n = 0;
            while (got < beats && n < 20000) begin
                m_rready = stall == 0 || (n % stall) != 0;
                @(negedge aclk);
                ar_go = m_arvalid && m_arready;
                if (m_rvalid && m_rready) begin
                    rx[rx_n] = m_rdata; rx_n = rx_n + 1; got = got + 1;
                    if (m_rlast !== (got == beats)) axi_errors = axi_errors + 1;
                    if (m_rid !== m_arid) axi_errors = axi_errors + 1;
                end
                @(posedge aclk); #1;
                if (ar_go) m_arvalid = 0;
                n = n + 1;
            end
            if (got < beats) begin
                $display("FAIL read burst of %0d beats at %h timed out after %0d", beats, addr, got);
                n_fail = n_fail + 1;
            end
            m_arvalid = 0; m_rready = 0;
        end
    endtask

    // Writes tx[first .. first+beats-1] at `addr` in one burst and waits for B.
    reg [63:0] tx [0:4095];
    task automatic wr_burst(input [63:0] addr, input integer first, input integer beats);
        integer sent, n;
        reg b_done, aw_go;
        begin
            @(posedge aclk); #1;
            m_awaddr = addr; m_awid = m_awid + 1; m_awvalid = 1;
            sent = 0; n = 0; b_done = 0;
            m_wvalid = 1; m_wdata = tx[first]; m_wlast = beats == 1; m_bready = 1;
            while (!b_done && n < 20000) begin
                @(negedge aclk);
                aw_go = m_awvalid && m_awready;
                if (m_wvalid && m_wready) sent = sent + 1;
                if (m_bvalid && m_bready) begin
                    b_done = 1;
                    if (m_bid !== m_awid || sent != beats) axi_errors = axi_errors + 1;
                end
                @(posedge aclk); #1;
                if (aw_go) m_awvalid = 0;
                m_wvalid = sent < beats;
                m_wdata  = tx[first + sent];
                m_wlast  = sent == beats - 1;
                n = n + 1;
            end
            if (!b_done) begin
                $display("FAIL write burst at %h timed out", addr);
                n_fail = n_fail + 1;
            end
            m_wvalid = 0; m_bready = 0; m_awvalid = 0;
        end
    endtask

    // Writes `beats` beats of tx[] from `first` to the window in bursts of at most 16.
    task automatic feed(input integer first, input integer beats);
        integer done, n;
        begin
            done = 0;
            while (done < beats) begin
                n = beats - done > 16 ? 16 : beats - done;
                wr_burst(WIN, first + done, n);
                done = done + n;
            end
        end
    endtask

    // ---- registers -----------------------------------------------------------------------------------------
    reg [31:0] data;
    reg [1:0]  resp;
    task automatic reg_wr(input [11:0] off, input [31:0] v);
        m.write(B + off, v, 4'hf, 0, 0, 0, resp);
    endtask
    task automatic reg_rd(input [11:0] off);
        m.read(B + off, 0, data, resp);
    endtask

    // ---- an independent CRC-32C (bytewise) and record check ------------------------------------------------
    function [31:0] crc_bytes(input [31:0] crc, input [63:0] w);
        integer byte_i, bit_i;
        reg [7:0] b;
        begin
            for (byte_i = 0; byte_i < 8; byte_i = byte_i + 1) begin
                b = w[8*byte_i +: 8];
                crc = crc ^ {24'h0, b};
                for (bit_i = 0; bit_i < 8; bit_i = bit_i + 1)
                    crc = crc[0] ? (crc >> 1) ^ 32'h82f6_3b78 : crc >> 1;
            end
            crc_bytes = crc;
        end
    endfunction

    // Checks the record at rx[at]: 1 if it is record `seq` of `len` bytes with a good CRC, pattern and end.
    reg [63:0] ts_of;
    function record_ok(input integer at, input [31:0] seq, input [31:0] len);
        integer k, words;
        reg [31:0] crc;
        reg ok;
        begin
            words = len / 8;
            ok = rx[at] === {len, seq};
            crc = 32'hffff_ffff;
            for (k = 0; k < words - 1; k = k + 1) begin
                crc = crc_bytes(crc, rx[at + k]);
                if (k >= 2 && rx[at + k] !== {seq, k[31:0] - 32'd2}) ok = 0;
            end
            if (rx[at + words - 1] !== {32'h4744_5253, ~crc}) ok = 0;
            ts_of = rx[at + 1];
            record_ok = ok;
        end
    endfunction

    integer i, r, bad, seq_at_stop, overrun, fd;
    reg [8*256-1:0] dump_path;
    reg [63:0] prev_ts;
    reg [8*72-1:0] name;

    initial begin
        repeat (4) @(posedge aclk);
        #1 aresetn = 1;

        check32("bench CRC-32C of 32 zero bytes is 0x8a9136aa",
                ~crc_bytes(crc_bytes(crc_bytes(crc_bytes(32'hffff_ffff, 0), 0), 0), 0), 32'h8a91_36aa);

        // ---- reset values ----
        reg_rd(`GDR_STREAM_REG_SRC_DEPTH);        check32("SRC_DEPTH", data, DEPTH);
        reg_rd(`GDR_STREAM_REG_SRC_RECORD_BYTES); check32("SRC_RECORD_BYTES reset", data, `GDR_STREAM_RECORD_BYTES_RESET);
        reg_rd(`GDR_STREAM_REG_SRC_CTRL);         check32("SRC_CTRL reset: disabled", data, 0);
        reg_wr(`GDR_STREAM_REG_SRC_RECORD_BYTES, 100);
        reg_rd(`GDR_STREAM_REG_SRC_RECORD_BYTES); check32("RECORD_BYTES 100 (not a multiple of 8) ignored", data, `GDR_STREAM_RECORD_BYTES_RESET);
        reg_wr(`GDR_STREAM_REG_SRC_RECORD_BYTES, 64);
        reg_rd(`GDR_STREAM_REG_SRC_RECORD_BYTES); check32("RECORD_BYTES 64 taken", data, 64);

        // ---- disabled: zeros at once ----
        rd_burst(WIN, 4, 0);
        check32("read while disabled returns zeros", (rx[0] | rx[1] | rx[2] | rx[3]) != 0, 0);
        rx_n = 0;

        // ---- good stream: 12 records of 64 B, on demand, in 6-beat bursts with RREADY stalls ----
        reg_wr(`GDR_STREAM_REG_SRC_CTRL, 1 << `GDR_STREAM_SRC_ENABLE);
        for (i = 0; i < 16; i = i + 1) rd_burst(WIN + i * 48, 6, 3);
        bad = 0;
        prev_ts = 0;
        for (r = 0; r < 12; r = r + 1) begin
            if (!record_ok(r * 8, r, 64)) begin
                bad = bad + 1;
                $display("  record %0d: %h %h .. %h", r, rx[r*8], rx[r*8+1], rx[r*8+7]);
            end
            if (ts_of < prev_ts) bad = bad + 1;
            prev_ts = ts_of;
        end
        check32("good stream: 12 records in sequence, CRC, pattern, end marker", bad, 0);
        // The beats, for run.sh to compare with what stream.rs generates for the same sequence and timestamps.
        if (!$value$plusargs("DUMP=%s", dump_path)) dump_path = "stream_readback.txt";
        fd = $fopen(dump_path, "w");
        for (i = 0; i < 96; i = i + 1) $fdisplay(fd, "%016h", rx[i]);
        $fclose(fd);
        reg_rd(`GDR_STREAM_REG_SRC_SENT);    check32("SRC_SENT counts 12 records", data, 12);
        reg_rd(`GDR_STREAM_REG_SRC_OVERRUN); check32("on demand: no overrun", data, 0);
        reg_wr(`GDR_STREAM_REG_SRC_CTRL, 0);

        for (i = 0; i < 96; i = i + 1) tx[i] = rx[i];
        reg_wr(`GDR_STREAM_REG_SINK_CTRL, 1 << `GDR_STREAM_SINK_CLEAR);
        feed(0, 96);
        reg_rd(`GDR_STREAM_REG_SINK_GOOD);       check32("good stream: checker counts 12 good", data, 12);
        reg_rd(`GDR_STREAM_REG_SINK_GAPS);       check32("good stream: no gaps", data, 0);
        reg_rd(`GDR_STREAM_REG_SINK_CRC_ERRORS); check32("good stream: no CRC errors", data, 0);
        reg_rd(`GDR_STREAM_REG_SINK_BAD_LENGTH); check32("good stream: no bad lengths", data, 0);
        reg_rd(`GDR_STREAM_REG_SINK_EXPECT);     check32("good stream: expects 12 next", data, 12);

        // ---- planted CRC error: one payload bit of record 3 ----
        reg_wr(`GDR_STREAM_REG_SINK_CTRL, 1 << `GDR_STREAM_SINK_CLEAR);
        reg_rd(`GDR_STREAM_REG_SINK_GOOD);       check32("SINK_CLEAR zeroes GOOD", data, 0);
        tx[3 * 8 + 4] = tx[3 * 8 + 4] ^ 64'h0000_0100_0000_0000;
        feed(0, 96);
        tx[3 * 8 + 4] = rx[3 * 8 + 4];
        reg_rd(`GDR_STREAM_REG_SINK_CRC_ERRORS); check32("planted CRC error counted once", data, 1);
        reg_rd(`GDR_STREAM_REG_SINK_GOOD);       check32("planted CRC error: 11 good", data, 11);
        reg_rd(`GDR_STREAM_REG_SINK_GAPS);       check32("planted CRC error: not a gap", data, 0);

        // ---- skipped sequence number: record 5 left out ----
        reg_wr(`GDR_STREAM_REG_SINK_CTRL, 1 << `GDR_STREAM_SINK_CLEAR);
        feed(0, 40);
        feed(48, 48);
        reg_rd(`GDR_STREAM_REG_SINK_GAPS);       check32("skipped record: one gap", data, 1);
        reg_rd(`GDR_STREAM_REG_SINK_LOST);       check32("skipped record: one number lost", data, 1);
        reg_rd(`GDR_STREAM_REG_SINK_GOOD);       check32("skipped record: 11 good", data, 11);
        reg_rd(`GDR_STREAM_REG_SINK_CRC_ERRORS); check32("skipped record: no CRC error", data, 0);

        // ---- overrun: a record every 40 ticks, nobody reading for 600 ----
        reg_wr(`GDR_STREAM_REG_SRC_CTRL, 1 << `GDR_STREAM_SRC_CLEAR);
        reg_wr(`GDR_STREAM_REG_SRC_PERIOD, 40);
        reg_wr(`GDR_STREAM_REG_SRC_CTRL, 1 << `GDR_STREAM_SRC_ENABLE);
        repeat (600) @(posedge aclk);
        reg_wr(`GDR_STREAM_REG_SRC_CTRL, 0);
        reg_rd(`GDR_STREAM_REG_SRC_SEQ);     seq_at_stop = data;
        reg_rd(`GDR_STREAM_REG_SRC_OVERRUN); overrun = data;
        check32("overrun: 15 records produced in 600 ticks", seq_at_stop, 15);
        check32("overrun = produced - FIFO depth", overrun, seq_at_stop - DEPTH);
        // The FIFO kept the first DEPTH records; after re-enabling, the next one carries seq_at_stop.
        rx_n = 0;
        reg_wr(`GDR_STREAM_REG_SRC_CTRL, 1 << `GDR_STREAM_SRC_ENABLE);
        for (i = 0; i < DEPTH + 1; i = i + 1) rd_burst(WIN, 8, 0);
        reg_wr(`GDR_STREAM_REG_SRC_CTRL, 0);
        bad = 0;
        for (r = 0; r < DEPTH; r = r + 1) begin
            if (!record_ok(r * 8, r, 64)) bad = bad + 1;
            if (r > 0 && ts_of != prev_ts + 40) bad = bad + 1;
            prev_ts = ts_of;
        end
        check32("overrun: the FIFO's records intact, exactly 40 ticks apart", bad, 0);
        // Re-enabled with the FIFO still full, the source may have dropped more before the reads drained it.
        reg_rd(`GDR_STREAM_REG_SRC_OVERRUN); overrun = data;
        check32("overrun: the next record read carries DEPTH + SRC_OVERRUN",
                record_ok(DEPTH * 8, DEPTH + overrun, 64), 1);
        check32("overrun: that record waited for its period", ts_of > prev_ts, 1);
        for (i = 0; i < (DEPTH + 1) * 8; i = i + 1) tx[i] = rx[i];
        reg_wr(`GDR_STREAM_REG_SINK_CTRL, 1 << `GDR_STREAM_SINK_CLEAR);
        feed(0, (DEPTH + 1) * 8);
        reg_rd(`GDR_STREAM_REG_SINK_LOST);  check32("checker's lost numbers = SRC_OVERRUN", data, overrun);
        reg_rd(`GDR_STREAM_REG_SINK_GAPS);  check32("overrun: one gap at the checker", data, 1);
        reg_rd(`GDR_STREAM_REG_SINK_GOOD);  check32("overrun: every record read is good", data, DEPTH + 1);

        // ---- the decode: below the window is the BRAM ----
        rx_n = 0;
        rd_burst(64'h0000_0000_0001_0000, 2, 0);
        check32("AXI 0x10000 reads the BRAM side", rx[0] == 64'hb4a3_b4a3_b4a3_b4a3, 1);
        i = bram.beats_written;
        wr_burst(64'h0, 0, 4);
        check32("AXI 0 writes reach the BRAM side", bram.beats_written - i, 4);
        reg_rd(`GDR_STREAM_REG_SINK_BAD_LENGTH); check32("...and not the checker", data, 0);

        check32("no AXI4 response errors (RLAST, RID, BID)", axi_errors, 0);
        check32("no AXI-Lite protocol errors", m.errors, 0);
        finish_tb;
    end

    initial begin
        #5000000;
        $display("FAIL tb_stream: simulation timeout");
        $finish;
    end
endmodule
