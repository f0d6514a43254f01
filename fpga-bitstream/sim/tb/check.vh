// Result bookkeeping shared by the testbenches: every check prints one "PASS name" or "FAIL name: ..." line,
// which sim/run.sh counts. Included inside a testbench module.

integer n_pass = 0;
integer n_fail = 0;

task automatic check32(input [8*72-1:0] name, input [31:0] got, input [31:0] want);
    begin
        if (got === want) begin
            n_pass = n_pass + 1;
            $display("PASS %0s", name);
        end else begin
            n_fail = n_fail + 1;
            $display("FAIL %0s: got 0x%08h, want 0x%08h", name, got, want);
        end
    end
endtask

task automatic check_okay(input [8*72-1:0] name, input [1:0] resp);
    check32(name, {30'd0, resp}, 32'd0);
endtask

task automatic finish_tb;
    begin
        $display("RESULT %0d passed, %0d failed", n_pass, n_fail);
        $finish;
    end
endtask
