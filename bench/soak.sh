#!/usr/bin/env bash
# The long reliability run, one command: for both nvidia_p2p flavours, the guest suite with its extended
# tests (hung engine, lost interrupt, the kill -9 loop x200, long concurrent DMA) and the ioctl fuzzer with
# many iterations, each on the debug kernel (KASAN, lockdep, DMA-API debug, kmemleak) with the harness's
# kernel checks; then the three runs test.sh leaves to it (below). Prints the figures and closes with "N passed, M failed".
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
# Moved here from bench/test.sh to keep a cold CI inside its time (the IOMMU suites of test.sh run on arm64
# behind virtio-iommu, 6.18 and 5.10): the whole suite without a provider, the suite behind intel-iommu, and
# the registration-cache benchmark (prints numbers; fails only on a DMA or byte-check failure).
counted "soak: suite, two cards, no GPU-memory provider" "$L/soak-plain.log" harness "$GDR_KO" -- --mode suite --cards 2
counted "soak: suite behind intel-iommu, Jetson nvidia_p2p" "$L/soak-intel-iommu.log" \
  harness "$GDR_P2P" "$GDR_KO" -- --mode suite --iommu intel --timeout 1800
counted "soak: registration cache benchmark" "$L/soak-perf.log" harness "$GDR_P2P" "$GDR_KO" -- --mode bench \
  --guest-args "--iterations ${GDR_PERF_ITERATIONS:-40}"
grep -h "GUEST FUZZ" "$L"/soak-*-fuzz.log >&2 || true
finish
