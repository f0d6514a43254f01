#!/usr/bin/env bash
# The performance report, one command: one boot with the Jetson nvidia_p2p provider and the driver on the
# debug kernel, the model in timing mode (a modeled PicoEVB Gen2 x1 link, docs/perf.md), and
# `gdr-guest-tests perf` in the guest: H2C, C2H and H2C2H at each size, host memory (registration cache
# hit, miss, off) and GPU surfaces (pinned once, pinned per request), each beside the reference driver's
# scheme done through the same ABI on the same model (serial round trip in 64 KiB windows, one descriptor
# per DMA, pin per call); then, on a card with the stream block, C2H from its source and H2C into its checker
# at each size of whole 4 KiB records, and the stream ring (chains of 64 and 256 KiB, 16 MiB at least).
# Prints the GUEST PERF lines, then "N passed, M failed". Judged by the harness like any boot: a DMA, byte or
# record check failing fails it, times never do.
#   GDR_PERF_SIZES   (default 4K,64K,1M,16M): request sizes
#   GDR_PERF_OPS     (default h2c,c2h,h2c2h): operations
#   GDR_PERF_VOLUME  (default 2M): bytes per case and scheme at least (at most 32 requests, at least 1)
#   GDR_PERF_TIMING  (default on, the Jetson profile): the model's --timing value, e.g. pcie-reset or
#                    pcie-reset,irq_latency_ns=2000
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
eval "$("$REPO/bench/build.sh")"
SIZES=${GDR_PERF_SIZES:-4K,64K,1M,16M}
OPS=${GDR_PERF_OPS:-h2c,c2h,h2c2h}
VOLUME=${GDR_PERF_VOLUME:-2M}
TIMING=${GDR_PERF_TIMING:-on}
LOG=$LOGS/perf.log
counted "perf: the performance report, $OPS at $SIZES" "$LOG" \
  harness "$GDR_P2P" "$GDR_KO" -- --mode perf --model-arg=--timing "--model-arg=$TIMING" \
  --guest-args "--sizes $SIZES --ops $OPS --volume $VOLUME" --timeout 3600
echo "performance report (MB/s on the model's clock; wall: TCG guest time, compare within this run only):"
grep -h "GUEST PERF" "$LOG" || echo "no GUEST PERF lines: see $LOG"
finish
