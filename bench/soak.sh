#!/usr/bin/env bash
# The long reliability run, one command: for both nvidia_p2p flavours, the guest suite with its extended
# tests (hung engine, lost interrupt, the kill -9 loop x200, long concurrent DMA) and the ioctl fuzzer with
# many iterations, each on the debug kernel (KASAN, lockdep, DMA-API debug, kmemleak) with the harness's
# kernel checks. Prints the figures and closes with "N passed, M failed".
#   GDR_SOAK_ITERATIONS (default 100000)  GDR_SOAK_THREADS (default 8)
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
eval "$("$REPO/bench/build.sh")"
ITER=${GDR_SOAK_ITERATIONS:-100000}
THREADS=${GDR_SOAK_THREADS:-8}
L=$LOGS
for flavour in jetson dgpu; do
  if [ $flavour = jetson ]; then mods=("$GDR_P2P" "$GDR_KO"); else mods=("$GDR_P2P_DGPU" "$GDR_KO_DGPU"); fi
  counted "soak $flavour: extended suite" "$L/soak-$flavour-suite.log" \
    harness "${mods[@]}" -- --mode suite --guest-args "--extended" --timeout 5400
  counted "soak $flavour: fuzzer x$ITER" "$L/soak-$flavour-fuzz.log" \
    harness "${mods[@]}" -- --mode fuzz --guest-args "--iterations $ITER --threads $THREADS" --timeout 5400
done
grep -h "GUEST FUZZ" "$L"/soak-*-fuzz.log >&2 || true
finish
