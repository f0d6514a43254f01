#!/usr/bin/env bash
# The registration-cache benchmark, one command: one boot with the Jetson nvidia_p2p provider and the driver
# on the debug kernel, `gdr-guest-tests bench` in the guest (4 KiB and 64 KiB host buffers by H2C and C2H,
# 1 MiB by H2C2H; per ioctl wall time, mean and median, and FOLL_PIN pages, with the cache on and off, two
# files taking turns), judged by the harness like any boot (a DMA or byte check failing fails it, timings
# never do). Prints the GUEST BENCH lines, then "N passed, M failed".
# The guest runs under TCG with KASAN, lockdep and DMA-API debug: absolute times mean nothing, only the
# on/off ratios within one run do.
#   GDR_PERF_ITERATIONS (default 200): timed ioctls per file and case
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
eval "$("$REPO/bench/build.sh")"
ITER=${GDR_PERF_ITERATIONS:-200}
LOG=$LOGS/perf.log
counted "perf: registration cache on vs off, x$ITER" "$LOG" \
  harness "$GDR_P2P" "$GDR_KO" -- --mode bench --guest-args "--iterations $ITER" --timeout 3600
echo "registration cache, guest wall time per ioctl (TCG: compare the on/off ratios within this run only):"
grep -h "GUEST BENCH" "$LOG" || echo "no GUEST BENCH lines: see $LOG"
finish
