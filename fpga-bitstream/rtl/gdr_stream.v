// gdr stream block: a record source the C2H engine reads and a checker the H2C engine writes, so streaming
// tests itself without external I/O. Register map, record format and behaviour are defined once in
// crates/picoevb-regs/src/stream.rs (docs/fpga.md, "The stream block"); the constants come from the
// generated gdr_id_regs.vh.
//
// Ports:
//   s_axil_*   AXI4-Lite registers (BAR0 from `GDR_STREAM_BASE; decodes addr[5:0], repeats every 0x40)
//   s_ar/r     AXI4 read slave: the DMA window for C2H. Addresses are ignored; every beat is the next 8 bytes
//              of the record stream. One burst at a time.
//   s_aw/w/b   AXI4 write slave: the DMA window for H2C. Addresses and strobes are ignored; every beat is the
//              next 8 bytes for the checker. One burst at a time.
//
// Source: a tick counter (the AXI clock) produces a record every PERIOD ticks while enabled, the first PERIOD
// ticks after enabling (PERIOD 0: keeps the FIFO full). Producing pushes (sequence, timestamp) into a FIFO of `GDR_STREAM_FIFO_DEPTH entries, or,
// when it is full, counts an overrun; the sequence number is used either way. Records are generated beat by
// beat as they are read, with a running CRC-32C, so no record payload is stored. A read with no record in
// the FIFO waits (RVALID low) while enabled and returns zeros while disabled; a record started is read out
// whole.
//
// Register writes take the whole word (strobes ignored); every response is OKAY.

`timescale 1ns / 1ps
`default_nettype none
`include "gdr_id_regs.vh"

module gdr_stream #(
    parameter integer ADDR_WIDTH = 12,
    parameter integer ID_WIDTH   = 2
) (
    input  wire                  aclk,
    input  wire                  aresetn,

    input  wire [ADDR_WIDTH-1:0] s_axil_awaddr,
    input  wire                  s_axil_awvalid,
    output wire                  s_axil_awready,
    input  wire [31:0]           s_axil_wdata,
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
    input  wire                  s_axil_rready,

    input  wire [ID_WIDTH-1:0]   s_arid,
    input  wire [7:0]            s_arlen,
    input  wire                  s_arvalid,
    output wire                  s_arready,
    output reg  [ID_WIDTH-1:0]   s_rid,
    output reg  [63:0]           s_rdata,
    output wire [1:0]            s_rresp,
    output reg                   s_rlast,
    output reg                   s_rvalid,
    input  wire                  s_rready,

    input  wire [ID_WIDTH-1:0]   s_awid,
    input  wire                  s_awvalid,
    output wire                  s_awready,
    input  wire [63:0]           s_wdata,
    input  wire                  s_wlast,
    input  wire                  s_wvalid,
    output wire                  s_wready,
    output reg  [ID_WIDTH-1:0]   s_bid,
    output wire [1:0]            s_bresp,
    output reg                   s_bvalid,
    input  wire                  s_bready
);
    localparam integer RW    = `GDR_STREAM_REG_BITS;
    localparam integer DEPTH = `GDR_STREAM_FIFO_DEPTH;
    localparam integer PW    = $clog2(DEPTH);
    localparam [PW:0]  FULL  = DEPTH[PW:0];

    // One CRC-32C step over a 64-bit beat, bytes in little-endian order, bits LSB first (reflected).
    function [31:0] crc_beat(input [31:0] crc_in, input [63:0] d);
        integer k;
        reg [31:0] c;
        begin
            c = crc_in;
            for (k = 0; k < 64; k = k + 1)
                c = (c >> 1) ^ ((c[0] ^ d[k]) ? `GDR_STREAM_CRC32C_POLY : 32'h0);
            crc_beat = c;
        end
    endfunction

    function len_valid(input [31:0] len);
        len_valid = len[2:0] == 3'd0 && len >= `GDR_STREAM_RECORD_BYTES_MIN && len <= `GDR_STREAM_RECORD_BYTES_MAX;
    endfunction

    // ---- registers -----------------------------------------------------------------------------------------
    reg        src_enable;
    reg [31:0] rec_bytes;
    reg [31:0] period;
    reg [31:0] src_seq, src_sent, src_overrun;
    reg [31:0] sink_good, sink_gaps, sink_lost, sink_crc_err, sink_bad_len, sink_expect;
    reg        src_clear, sink_clear;  // one-cycle pulses from a CTRL write

    reg          aw_held, w_held;
    reg [RW-1:0] aw_off;
    reg [31:0]   w_data;
    assign s_axil_awready = !aw_held && !s_axil_bvalid;
    assign s_axil_wready  = !w_held && !s_axil_bvalid;
    assign s_axil_bresp   = 2'b00;
    wire aw_fire = s_axil_awvalid && s_axil_awready;
    wire w_fire  = s_axil_wvalid && s_axil_wready;
    wire do_write = (aw_held || aw_fire) && (w_held || w_fire);
    wire [RW-1:0] wr_off  = aw_held ? aw_off : {s_axil_awaddr[RW-1:2], 2'b00};
    wire [31:0]   wr_data = w_held ? w_data : s_axil_wdata;

    always @(posedge aclk) begin
        src_clear  <= 1'b0;
        sink_clear <= 1'b0;
        if (!aresetn) begin
            aw_held <= 1'b0; w_held <= 1'b0; aw_off <= {RW{1'b0}}; w_data <= 32'h0;
            s_axil_bvalid <= 1'b0;
            src_enable <= 1'b0;
            rec_bytes  <= `GDR_STREAM_RECORD_BYTES_RESET;
            period     <= 32'h0;
        end else begin
            if (do_write) begin
                aw_held <= 1'b0;
                w_held  <= 1'b0;
                s_axil_bvalid <= 1'b1;
                case (wr_off)
                    `GDR_STREAM_REG_SRC_CTRL: begin
                        src_enable <= wr_data[`GDR_STREAM_SRC_ENABLE];
                        src_clear  <= wr_data[`GDR_STREAM_SRC_CLEAR];
                    end
                    `GDR_STREAM_REG_SRC_RECORD_BYTES: if (len_valid(wr_data)) rec_bytes <= wr_data;
                    `GDR_STREAM_REG_SRC_PERIOD: period <= wr_data;
                    `GDR_STREAM_REG_SINK_CTRL: sink_clear <= wr_data[`GDR_STREAM_SINK_CLEAR];
                    default: ;
                endcase
            end else begin
                if (aw_fire) begin aw_held <= 1'b1; aw_off <= {s_axil_awaddr[RW-1:2], 2'b00}; end
                if (w_fire)  begin w_held  <= 1'b1; w_data <= s_axil_wdata; end
            end
            if (s_axil_bvalid && s_axil_bready)
                s_axil_bvalid <= 1'b0;
        end
    end

    assign s_axil_arready = !s_axil_rvalid;
    assign s_axil_rresp   = 2'b00;
    reg [31:0] rd_value;
    always @(*) begin
        case ({s_axil_araddr[RW-1:2], 2'b00})
            `GDR_STREAM_REG_SRC_CTRL:         rd_value = {31'h0, src_enable};
            `GDR_STREAM_REG_SRC_RECORD_BYTES: rd_value = rec_bytes;
            `GDR_STREAM_REG_SRC_PERIOD:       rd_value = period;
            `GDR_STREAM_REG_SRC_SEQ:          rd_value = src_seq;
            `GDR_STREAM_REG_SRC_SENT:         rd_value = src_sent;
            `GDR_STREAM_REG_SRC_OVERRUN:      rd_value = src_overrun;
            `GDR_STREAM_REG_SRC_DEPTH:        rd_value = DEPTH;
            `GDR_STREAM_REG_SINK_GOOD:        rd_value = sink_good;
            `GDR_STREAM_REG_SINK_GAPS:        rd_value = sink_gaps;
            `GDR_STREAM_REG_SINK_LOST:        rd_value = sink_lost;
            `GDR_STREAM_REG_SINK_CRC_ERRORS:  rd_value = sink_crc_err;
            `GDR_STREAM_REG_SINK_BAD_LENGTH:  rd_value = sink_bad_len;
            `GDR_STREAM_REG_SINK_EXPECT:      rd_value = sink_expect;
            default:                          rd_value = 32'h0;  // SINK_CTRL, reserved
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

    // ---- source: production ------------------------------------------------------------------------------
    reg [63:0]   now;       // ticks since reset or SRC_CLEAR
    reg [31:0]   timer;     // ticks since the last record produced
    reg [31:0]   fifo_seq [0:DEPTH-1];
    reg [63:0]   fifo_ts  [0:DEPTH-1];
    reg [PW-1:0] wr_ptr, rd_ptr;
    reg [PW:0]   count;
    wire         pop;       // the head record starts being read out (below)

    wire due     = src_enable && (period == 32'h0 ? count != FULL : timer + 32'd1 >= period);
    wire push    = due && (count != FULL || pop);

    always @(posedge aclk) begin
        if (!aresetn || src_clear) begin
            now <= 64'h0; timer <= 32'h0; wr_ptr <= {PW{1'b0}}; rd_ptr <= {PW{1'b0}}; count <= {(PW+1){1'b0}};
            src_seq <= 32'h0; src_overrun <= 32'h0;
        end else begin
            now   <= now + 64'd1;
            timer <= (due || !src_enable) ? 32'h0 : timer + 32'd1;
            if (due) begin
                src_seq <= src_seq + 32'd1;
                if (!push)
                    src_overrun <= src_overrun + 32'd1;
            end
            if (push) begin
                fifo_seq[wr_ptr] <= src_seq;
                fifo_ts[wr_ptr]  <= now;
                wr_ptr <= wr_ptr + 1'b1;
            end
            if (pop)
                rd_ptr <= rd_ptr + 1'b1;
            count <= count + {{PW{1'b0}}, push} - {{PW{1'b0}}, pop};
        end
    end

    // ---- source: read-out --------------------------------------------------------------------------------
    reg        in_rec;             // a record is being read out
    reg [31:0] cur_seq, cur_len;
    reg [63:0] cur_ts;
    reg [9:0]  cur_idx;            // next beat of the record
    reg [31:0] cur_crc;            // CRC register over the beats before cur_idx
    reg        burst;              // an AR was accepted and its beats are not all out
    reg [7:0]  beats_left;         // beats after the next one

    wire [9:0]  last_idx = cur_len[12:3] - 10'd1;
    wire [31:0] head_seq = fifo_seq[rd_ptr];
    wire [31:0] head_len = rec_bytes;
    wire        have     = in_rec || count != 0 || !src_enable;
    reg  [63:0] beat;
    always @(*) begin
        if (!in_rec)
            beat = count != 0 ? {head_len, head_seq} : 64'h0;
        else if (cur_idx == 10'd1)
            beat = cur_ts;
        else if (cur_idx < last_idx)
            beat = {cur_seq, 22'h0, cur_idx - 10'd2};
        else
            beat = {`GDR_STREAM_RECORD_END, ~cur_crc};
    end

    // The R register loads the next beat when it is empty or being taken.
    wire load = burst && have && (!s_rvalid || s_rready);
    assign pop       = load && !in_rec && count != 0;
    assign s_arready = !burst;
    assign s_rresp   = 2'b00;

    always @(posedge aclk) begin
        if (!aresetn) begin
            burst <= 1'b0; beats_left <= 8'h0; s_rid <= {ID_WIDTH{1'b0}};
            s_rvalid <= 1'b0; s_rlast <= 1'b0; s_rdata <= 64'h0;
            in_rec <= 1'b0; cur_seq <= 32'h0; cur_len <= 32'h0; cur_ts <= 64'h0; cur_idx <= 10'h0;
            cur_crc <= 32'h0; src_sent <= 32'h0;
        end else begin
            if (src_clear)
                src_sent <= 32'h0;
            if (s_arvalid && s_arready) begin
                burst      <= 1'b1;
                beats_left <= s_arlen;
                s_rid      <= s_arid;
            end
            if (s_rvalid && s_rready && !load)
                s_rvalid <= 1'b0;
            if (load) begin
                s_rvalid   <= 1'b1;
                s_rdata    <= beat;
                s_rlast    <= beats_left == 8'h0;
                beats_left <= beats_left - 8'h1;
                if (beats_left == 8'h0)
                    burst <= 1'b0;
                if (pop) begin
                    in_rec  <= 1'b1;
                    cur_seq <= head_seq;
                    cur_len <= head_len;
                    cur_ts  <= fifo_ts[rd_ptr];
                    cur_idx <= 10'd1;
                    cur_crc <= crc_beat(32'hffff_ffff, beat);
                end else if (in_rec) begin
                    cur_idx <= cur_idx + 10'd1;
                    cur_crc <= crc_beat(cur_crc, beat);
                    if (cur_idx == last_idx) begin
                        in_rec   <= 1'b0;
                        src_sent <= src_clear ? 32'h1 : src_sent + 32'd1;
                    end
                end
            end
        end
    end

    // ---- checker -------------------------------------------------------------------------------------------
    reg        wburst;
    reg [9:0]  k_idx;              // beat of the record being checked (0: expecting a header)
    reg [9:0]  k_last;
    reg [31:0] k_seq, k_crc;

    assign s_awready = !wburst && !s_bvalid;
    assign s_wready  = wburst && !s_bvalid;
    assign s_bresp   = 2'b00;

    wire        beat_in   = s_wvalid && s_wready;
    wire [31:0] hdr_len   = s_wdata[63:32];
    wire        k_good    = s_wdata == {`GDR_STREAM_RECORD_END, ~k_crc};
    wire        k_gap     = k_seq != sink_expect;

    always @(posedge aclk) begin
        if (!aresetn) begin
            wburst <= 1'b0; s_bvalid <= 1'b0; s_bid <= {ID_WIDTH{1'b0}};
        end else begin
            if (s_awvalid && s_awready) begin
                wburst <= 1'b1;
                s_bid  <= s_awid;
            end
            if (beat_in && s_wlast) begin
                wburst   <= 1'b0;
                s_bvalid <= 1'b1;
            end
            if (s_bvalid && s_bready)
                s_bvalid <= 1'b0;
        end
    end

    always @(posedge aclk) begin
        if (!aresetn || sink_clear) begin
            k_idx <= 10'h0; k_last <= 10'h0; k_seq <= 32'h0; k_crc <= 32'h0;
            sink_good <= 32'h0; sink_gaps <= 32'h0; sink_lost <= 32'h0; sink_crc_err <= 32'h0;
            sink_bad_len <= 32'h0; sink_expect <= 32'h0;
        end else if (beat_in) begin
            if (k_idx == 10'h0) begin
                if (len_valid(hdr_len)) begin
                    k_idx  <= 10'h1;
                    k_last <= hdr_len[12:3] - 10'd1;
                    k_seq  <= s_wdata[31:0];
                    k_crc  <= crc_beat(32'hffff_ffff, s_wdata);
                end else begin
                    sink_bad_len <= sink_bad_len + 32'd1;
                end
            end else if (k_idx != k_last) begin
                k_idx <= k_idx + 10'd1;
                k_crc <= crc_beat(k_crc, s_wdata);
            end else begin
                k_idx <= 10'h0;
                if (k_good) begin
                    sink_good   <= sink_good + 32'd1;
                    sink_expect <= k_seq + 32'd1;
                    if (k_gap) begin
                        sink_gaps <= sink_gaps + 32'd1;
                        sink_lost <= sink_lost + (k_seq - sink_expect);
                    end
                end else begin
                    sink_crc_err <= sink_crc_err + 32'd1;
                    sink_expect  <= sink_expect + 32'd1;
                end
            end
        end
    end

    wire _unused = &{1'b0, s_axil_awaddr, s_axil_araddr, cur_len[31:13], cur_len[2:0], hdr_len[31:13]};
endmodule

`default_nettype wire
