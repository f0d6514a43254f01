#!/usr/bin/env bash
# Issue 22's streaming target, one command: the driver's stream ring (STREAM_RING, back-pressure, 512 slots
# of one 4 KiB record, chains of up to 256 slots) for as many slots as GDR_STREAM_SOAK_SECONDS modeled
# seconds (default 600: ten minutes) take at the C2H ceiling, every record checked (sequence, CRC-32C) by a
# polling consumer, in one boot with the model in timing mode (the Jetson profile) on the debug kernel.
# Prints the GUEST PERF STREAM RING line (modeled seconds, MB/s and % of the ceiling, records, missing, bad,
# the guest's wall time), then "N passed, M failed". Ten modeled minutes are 270 GB through the emulated
# card: about 50 minutes of TCG on two cores (2026-11-29), so not in bench/soak.sh.
#   GDR_STREAM_SOAK_SECONDS (default 600, 1..36000)
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
eval "$("$REPO/bench/build.sh")"
SECONDS_MODELED=${GDR_STREAM_SOAK_SECONDS:-600}
LOG=$LOGS/stream-soak.log
counted "stream soak: the driver's ring for $SECONDS_MODELED modeled seconds" "$LOG" \
  harness "$GDR_P2P" "$GDR_KO" -- --mode perf --model-arg=--timing --model-arg=on \
  --guest-args "--ring-seconds $SECONDS_MODELED" --timeout $((SECONDS_MODELED * 120 + 1800))
grep -h "GUEST PERF STREAM RING" "$LOG" || echo "no GUEST PERF STREAM RING line: see $LOG"
finish
