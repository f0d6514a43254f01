#!/usr/bin/env bash
# Runs every check of fpga-bitstream/ that needs neither Vivado nor a card:
#   * gdr_id_regs.vh is what crates/picoevb-regs/src/idblock.rs renders (cargo test);
#   * Verilator lint of our RTL (the top level against stand-ins for the Xilinx IP) and Icarus elaboration;
#   * Icarus Verilog testbenches: the ID block (registers vs the header, SCRATCH byte strobes, RO and
#     reserved registers, aliasing, AW/W orders, B/R backpressure), BAR0 (decode GPIO vs ID block) and the
#     stream block behind the DMA decode (good stream, planted CRC error, skipped sequence, overrun);
#   * the RTL's readback of the ID block equals what idblock.rs says it must be (cargo example);
#   * meta-tests: a DUT built with a wrong CAPS parameter, and a bench expecting a wrong MAGIC, must FAIL;
#     so must the stream bench against copies of gdr_stream.v with the checker or the source broken;
#   * sim/check_static.py: build.sh/build.tcl under a Vivado stand-in vs the facts, manifest, XDC pins,
#     OpenOCD configuration and programming scripts.
#
#   fpga-bitstream/sim/run.sh [-v]      (-v: print every PASS line too)
#
# Installs iverilog, verilator, openocd and tcl with apt-get when missing (root or sudo). Needs python3
# and cargo. Exit status 0 only if everything passed; the last line is "N passed, M failed".
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fpga=$(cd "$here/.." && pwd)
repo=$(cd "$fpga/.." && pwd)
out=${GDR_SIM_OUT:-$fpga/build/sim}
verbose=0
[[ ${1:-} == -v ]] && verbose=1

passed=0 failed=0
pass() { passed=$((passed + 1)); (( verbose )) && echo "PASS $*"; return 0; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
# Counts the PASS/FAIL lines of a step's output (prefixed with the step name); FAIL lines always shown.
tally() {
    local step=$1 file=$2 line
    while IFS= read -r line; do
        case $line in
            PASS\ *) pass "$step: ${line#PASS }" ;;
            FAIL\ *) fail "$step: ${line#FAIL }" ;;
        esac
    done <"$file"
}
finish() {
    echo "$passed passed, $failed failed"
    (( failed == 0 ))
    exit
}

rm -rf "$out"
mkdir -p "$out"

# ---- tools -----------------------------------------------------------------------------------------------
missing=()
command -v iverilog >/dev/null || missing+=(iverilog)
command -v verilator >/dev/null || missing+=(verilator)
command -v openocd >/dev/null || missing+=(openocd)
command -v tclsh >/dev/null || missing+=(tcl)
command -v python3 >/dev/null || missing+=(python3)
if (( ${#missing[@]} )); then
    echo "run.sh: installing ${missing[*]}"
    sudo=
    (( EUID == 0 )) || sudo="sudo -n"
    export DEBIAN_FRONTEND=noninteractive
    if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >"$out/apt.log" 2>&1; then
        $sudo apt-get update -q >>"$out/apt.log" 2>&1
        $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >>"$out/apt.log" 2>&1 ||
            { cat "$out/apt.log"; fail "tools: could not install ${missing[*]}"; finish; }
    fi
fi
for t in iverilog vvp verilator openocd tclsh python3 cargo; do
    command -v "$t" >/dev/null || { fail "tools: $t not found"; finish; }
done

rtl=$fpga/rtl
tb=$here/tb

# ---- the header is generated from idblock.rs -------------------------------------------------------------
if (cd "$repo" && cargo test -q -p picoevb-regs --test verilog_header) >"$out/header.log" 2>&1; then
    pass "header: rtl/gdr_id_regs.vh is what idblock.rs renders"
else
    cat "$out/header.log"
    fail "header: rtl/gdr_id_regs.vh is stale or the generator failed (see above)"
fi

# ---- lint and elaboration --------------------------------------------------------------------------------
lint() {
    local name=$1; shift
    if verilator --lint-only -Wall -I"$rtl" "$@" >"$out/lint-$name.log" 2>&1; then
        pass "lint: $name (verilator -Wall)"
    else
        cat "$out/lint-$name.log"
        fail "lint: $name (verilator -Wall)"
    fi
}
lint gdr_id_block "$rtl/gdr_id_block.v" --top-module gdr_id_block
lint gdr_bar0_decode "$rtl/gdr_bar0_decode.v" --top-module gdr_bar0_decode
lint gdr_stream "$rtl/gdr_stream.v" --top-module gdr_stream
lint gdr_dma_decode "$rtl/gdr_dma_decode.v" --top-module gdr_dma_decode
ours=("$rtl/gdr_top.v" "$rtl/gdr_bar0_decode.v" "$rtl/gdr_id_block.v" "$rtl/gdr_stream.v" "$rtl/gdr_dma_decode.v")
lint gdr_top -Wno-PINCONNECTEMPTY -Wno-DECLFILENAME "${ours[@]}" "$here/stubs/xilinx_ip_stubs.v" --top-module gdr_top
if iverilog -g2005 -Wall -I"$rtl" -s gdr_top -o "$out/top.vvp" "${ours[@]}" \
    "$here/stubs/xilinx_ip_stubs.v" >"$out/top.log" 2>&1 && ! grep -q warning "$out/top.log"; then
    pass "elaborate: gdr_top with IP stand-ins (iverilog)"
else
    cat "$out/top.log"
    fail "elaborate: gdr_top with IP stand-ins (iverilog)"
fi

# ---- testbenches -----------------------------------------------------------------------------------------
# Build values as build.tcl would set them: VERSION through the same Tcl encoder, the current commit.
version=$(tr -d ' \t\r\n' <"$fpga/VERSION")
version_word=$(echo "source $fpga/scripts/gdr_lib.tcl; puts [gdr_version_word $version]" | tclsh)
hash=$(git -C "$repo" rev-parse HEAD 2>/dev/null | cut -c1-8)
hash=0x${hash:-deadbeef}
time=1700000000
params=(-Ptb.DESIGN_VERSION=$((version_word)) -Ptb.BUILD_HASH=$((hash)) -Ptb.BUILD_TIME=$time)

# sim NAME TOP LOG [extra iverilog args]: compiles and runs one bench; 0 when it ran to its RESULT line.
# $stream_rtl is the gdr_stream.v it builds (the stream meta-tests swap in broken copies).
stream_rtl=$rtl/gdr_stream.v
sim() {
    local name=$1 top=$2 log=$3; shift 3
    local p=("${params[@]//-Ptb./-P$top.}")
    if ! iverilog -g2005 -Wall -I"$rtl" -I"$tb" -s "$top" "${p[@]}" "$@" -o "$out/$name.vvp" \
        "$tb/$top.v" "$tb/axil_bfm.v" "$rtl/gdr_id_block.v" "$rtl/gdr_bar0_decode.v" "$stream_rtl" \
        "$rtl/gdr_dma_decode.v" >"$log" 2>&1; then
        return 1
    fi
    (cd "$out" && vvp -n "$name.vvp" +DUMP="$out/$name-readback.txt") >"$log" 2>&1
    grep -q '^RESULT ' "$log"
}

for top in tb_id_block tb_bar0 tb_stream; do
    if sim "$top" "$top" "$out/$top.log"; then
        tally "$top" "$out/$top.log"
    else
        cat "$out/$top.log"
        fail "$top: did not compile or run to the end"
    fi
done

# ---- RTL readback vs idblock.rs --------------------------------------------------------------------------
expect() {
    (cd "$repo" && cargo run -q -p picoevb-regs --example idblock_image -- "$version" "$1" "$time") 2>"$out/expect.err"
}
if expect "$hash" >"$out/idblock-expected.txt" && [[ -s $out/tb_bar0-readback.txt ]]; then
    if diff -u "$out/idblock-expected.txt" "$out/tb_bar0-readback.txt" >"$out/idblock.diff"; then
        pass "cross-check: RTL reads back the ID block idblock.rs defines (the model serves the same)"
    else
        cat "$out/idblock.diff"
        fail "cross-check: RTL readback differs from idblock.rs"
    fi
    # Meta: the comparison notices a single differing register.
    if expect "$((hash ^ 1))" | diff -q - "$out/tb_bar0-readback.txt" >/dev/null; then
        fail "meta: cross-check did not notice a wrong BUILD_HASH"
    else
        pass "meta: cross-check notices a wrong BUILD_HASH"
    fi
else
    cat "$out/expect.err"
    fail "cross-check: could not produce the expected image or the RTL readback"
fi

# ---- RTL records vs stream.rs -----------------------------------------------------------------------------
records() {
    (cd "$repo" && cargo run -q -p picoevb-regs --example stream_records -- "$1" 64) >"$out/records.log" 2>&1
}
if [[ -s $out/tb_stream-readback.txt ]] && records "$out/tb_stream-readback.txt"; then
    pass "cross-check: the RTL's records are what stream.rs generates ($(cat "$out/records.log"))"
    # Meta: one changed payload digit is noticed.
    sed '5s/^\(.*\)\(.\)$/\1x/;5s/x$/f/' "$out/tb_stream-readback.txt" >"$out/records-bad.txt"
    if ! cmp -s "$out/records-bad.txt" "$out/tb_stream-readback.txt" && ! records "$out/records-bad.txt"; then
        pass "meta: records cross-check notices a changed beat ($(cat "$out/records.log"))"
    else
        fail "meta: records cross-check did not notice a changed beat"
    fi
else
    cat "$out/records.log" 2>/dev/null
    fail "cross-check: RTL records differ from stream.rs (or no readback)"
fi

# ---- meta-tests: wrong values must be caught -------------------------------------------------------------
# meta NAME MUST_FAIL_PATTERN iverilog-args...: the bench must run, report failures, and one must match.
meta() {
    local name=$1 pattern=$2; shift 2
    local log=$out/meta-$name.log
    if ! sim "meta-$name" tb_id_block "$log" "$@"; then
        cat "$log"
        fail "meta: $name: bench did not run"
    elif grep -q '^RESULT [0-9]* passed, 0 failed' "$log"; then
        fail "meta: $name: the wrong value was NOT caught"
    elif grep -q "^FAIL $pattern" "$log"; then
        pass "meta: $name: caught ($(grep -m1 "^FAIL $pattern" "$log"))"
    else
        fail "meta: $name: failed, but not in the expected check"
    fi
}
meta wrong-caps-parameter "reset value of register 0x14" \
    -Ptb_id_block.DUT_CAPS=$(( $(sed -n "s/^\`define GDR_ID_CAPS_PICOEVB *32'h\([0-9a-f_]*\).*/0x\1/p" \
        "$rtl/gdr_id_regs.vh" | tr -d _) ^ 1 ))
meta wrong-expected-magic "reset value of register 0x00" -DGDR_TB_EXPECT_WRONG_MAGIC

# mutant NAME MUST_FAIL_PATTERN FROM TO: tb_stream against a copy of gdr_stream.v with the line FROM replaced
# by TO (exact text). The copy must differ, the bench must run, and a FAIL must match the pattern.
mutant() {
    local name=$1 pattern=$2 from=$3 to=$4
    local dir=$out/mutant-$name log=$out/mutant-$name/tb_stream.log
    mkdir -p "$dir"
    FROM=$from TO=$to python3 -c 'import os,sys; s=open(sys.argv[1]).read(); f=os.environ["FROM"]
sys.exit(1) if s.count(f) != 1 else open(sys.argv[2],"w").write(s.replace(f, os.environ["TO"]))' \
        "$rtl/gdr_stream.v" "$dir/gdr_stream.v" || { fail "meta: stream $name: mutation not applied"; return; }
    if ! stream_rtl=$dir/gdr_stream.v sim "mutant-$name" tb_stream "$log"; then
        cat "$log"
        fail "meta: stream $name: bench did not run"
    elif grep -q '^RESULT [0-9]* passed, 0 failed' "$log"; then
        fail "meta: stream $name: the broken RTL was NOT caught"
    elif grep -q "^FAIL $pattern" "$log"; then
        pass "meta: stream $name: caught ($(grep -m1 "^FAIL $pattern" "$log"))"
    else
        fail "meta: stream $name: failed, but not in the expected check"
    fi
}
mutant checker-ignores-crc "planted CRC error counted once" \
    'wire        k_good    = s_wdata == {`GDR_STREAM_RECORD_END, ~k_crc};' 'wire        k_good    = 1'"'"'b1;'
mutant checker-ignores-sequence "skipped record: one gap" \
    'wire        k_gap     = k_seq != sink_expect;' 'wire        k_gap     = 1'"'"'b0;'
mutant checker-counts-gap-as-one "checker's lost numbers = SRC_OVERRUN" \
    'sink_lost <= sink_lost + (k_seq - sink_expect);' 'sink_lost <= sink_lost + 32'"'"'d1;'
mutant source-no-overrun-count "overrun = produced - FIFO depth" \
    'src_overrun <= src_overrun + 32'"'"'d1;' 'src_overrun <= src_overrun;'
mutant source-overwrites-when-full "overrun: the FIFO's records intact" \
    'wire push    = due && (count != FULL || pop);' 'wire push    = due;'
mutant source-stale-crc "good stream: 12 records in sequence" \
    'cur_crc <= crc_beat(cur_crc, beat);' 'cur_crc <= cur_crc;'
mutant source-ignores-period "overrun: the FIFO.s records intact, exactly 40 ticks apart" \
    'timer + 32'"'"'d1 >= period' 'timer + 32'"'"'d2 >= period'

# ---- everything else: build flow, constraints, programming -----------------------------------------------
python3 "$here/check_static.py" "$out/static" >"$out/static.log" 2>&1
tally static "$out/static.log"
grep -q '^static: ' "$out/static.log" || { tail -20 "$out/static.log"; fail "static: check_static.py crashed"; }

finish
