// AXI4-Lite master for the testbenches, with a protocol monitor.
//
// write(): AW and W in a chosen order (0: together, 1: AW first, 2: W first; the other follows `gap` cycles
// later) and BREADY held low for `bstall` cycles after BVALID rises. read(): RREADY held low for `rstall`
// cycles after RVALID rises. The monitor counts protocol errors in `errors`: a response before its request
// was accepted, VALID dropping or the payload changing before READY, a handshake taking over TIMEOUT cycles.
// Signals change 1 ns after a rising edge; handshakes are judged at the falling edge before the next one.
// While a VALID is low its payload carries junk (the inverted value), so a slave or decode that looks at a
// payload without its VALID gets it wrong.

`timescale 1ns / 1ps

module axil_bfm #(
    parameter integer ADDR_WIDTH = 32,
    parameter integer TIMEOUT    = 100
) (
    input  wire                  aclk,
    output reg  [ADDR_WIDTH-1:0] awaddr,
    output reg                   awvalid,
    input  wire                  awready,
    output reg  [31:0]           wdata,
    output reg  [3:0]            wstrb,
    output reg                   wvalid,
    input  wire                  wready,
    input  wire [1:0]            bresp,
    input  wire                  bvalid,
    output reg                   bready,
    output reg  [ADDR_WIDTH-1:0] araddr,
    output reg                   arvalid,
    input  wire                  arready,
    input  wire [31:0]           rdata,
    input  wire [1:0]            rresp,
    input  wire                  rvalid,
    output reg                   rready
);
    integer errors = 0;

    initial begin
        awaddr = 0; awvalid = 0; wdata = 0; wstrb = 0; wvalid = 0; bready = 0;
        araddr = 0; arvalid = 0; rready = 0;
    end

    task automatic protocol_error(input [8*64-1:0] what);
        begin
            errors = errors + 1;
            $display("FAIL axi-lite protocol: %0s (t=%0t)", what, $time);
        end
    endtask

    task automatic write(input [ADDR_WIDTH-1:0] addr, input [31:0] data, input [3:0] strb,
                         input integer order, input integer gap, input integer bstall,
                         output [1:0] resp);
        integer n, t_aw, t_w, b_seen;
        reg aw_done, w_done, b_done, aw_go, w_go, b_go;
        begin
            t_aw = (order == 2) ? gap : 0;
            t_w  = (order == 1) ? gap : 0;
            aw_done = 0; w_done = 0; b_done = 0; b_seen = 0; resp = 2'bxx;
            n = 0;
            @(posedge aclk); #1;
            while (!b_done && n < TIMEOUT) begin
                awvalid = !aw_done && n >= t_aw;
                awaddr  = awvalid ? addr : ~addr;
                wvalid  = !w_done && n >= t_w;
                wdata   = wvalid ? data : ~data;
                wstrb   = wvalid ? strb : ~strb;
                bready  = b_seen >= bstall;
                @(negedge aclk);
                aw_go = awvalid && awready;
                w_go  = wvalid && wready;
                b_go  = bvalid && bready;
                if (bvalid && !(aw_done && w_done)) protocol_error("BVALID before AW and W were accepted");
                if (b_seen > 0 && !bvalid) protocol_error("BVALID dropped before BREADY");
                if (b_go) resp = bresp;
                if (bvalid) b_seen = b_seen + 1;
                @(posedge aclk); #1;
                aw_done = aw_done || aw_go;
                w_done  = w_done || w_go;
                b_done  = b_go;
                n = n + 1;
            end
            if (!b_done) protocol_error("write timed out");
            awvalid = 0; wvalid = 0; bready = 0;
        end
    endtask

    task automatic read(input [ADDR_WIDTH-1:0] addr, input integer rstall,
                        output [31:0] data, output [1:0] resp);
        integer n, r_seen;
        reg ar_done, r_done, ar_go, r_go;
        reg [31:0] first;
        begin
            ar_done = 0; r_done = 0; r_seen = 0; data = 32'hxxxx_xxxx; resp = 2'bxx;
            n = 0;
            @(posedge aclk); #1;
            while (!r_done && n < TIMEOUT) begin
                arvalid = !ar_done;
                araddr  = arvalid ? addr : ~addr;
                rready  = r_seen >= rstall;
                @(negedge aclk);
                ar_go = arvalid && arready;
                r_go  = rvalid && rready;
                if (rvalid && !ar_done) protocol_error("RVALID before AR was accepted");
                if (r_seen > 0 && !rvalid) protocol_error("RVALID dropped before RREADY");
                if (r_seen == 0 && rvalid) first = rdata;
                if (r_seen > 0 && rvalid && rdata !== first) protocol_error("RDATA changed while stalled");
                if (r_go) begin data = rdata; resp = rresp; end
                if (rvalid) r_seen = r_seen + 1;
                @(posedge aclk); #1;
                ar_done = ar_done || ar_go;
                r_done  = r_go;
                n = n + 1;
            end
            if (!r_done) protocol_error("read timed out");
            arvalid = 0; rready = 0;
        end
    endtask
endmodule
