#!/usr/bin/env bash
# The long reliability run, one command: for both nvidia_p2p flavours, the guest suite with its extended
# tests (hung engine, lost interrupt, the kill -9 loop x200, long concurrent DMA) and the ioctl fuzzer with
# many iterations, each on the debug kernel (KASAN, lockdep, DMA-API debug, kmemleak) with the harness's
# kernel checks; then the three runs test.sh leaves to it: the `soak` rows of bench/matrix. Prints the figures and closes with "N passed, M failed".
#   GDR_SOAK_ITERATIONS (default 100000)  GDR_SOAK_THREADS (default 8)
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
run_matrix soak
grep -h "GUEST FUZZ" "$LOGS"/last-soak-*.log >&2 || true
finish
