#!/usr/bin/env bash
# The long reliability run, one command: for both nvidia_p2p flavours, the guest suite with its extended
# tests (hung engine, lost interrupt, the kill -9 loop x200, long concurrent DMA) and the ioctl fuzzer with
# many iterations, each on the debug kernel (KASAN, lockdep, DMA-API debug, kmemleak) with the harness's
# kernel checks; then the whole guest set on arm64 behind virtio-iommu (no provider, Jetson, dGPU, the
# fuzzer, and the corrupt-data run that must fail; docs/arm64.md). Prints the figures and closes with
# "N passed, M failed".
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

eval "$(ARCH=arm64 "$REPO/bench/build.sh")"
A=(--iommu virtio --timeout 5400)
counted "soak arm64: suite, no GPU-memory provider" "$L/soak-arm64-plain.log" harness "$GDR_KO" -- --mode suite "${A[@]}"
counted "soak arm64: suite, Jetson nvidia_p2p" "$L/soak-arm64-jetson.log" harness "$GDR_P2P" "$GDR_KO" -- --mode suite "${A[@]}"
counted "soak arm64: suite, dGPU nvidia_p2p" "$L/soak-arm64-dgpu.log" \
  harness "$GDR_P2P_DGPU" "$GDR_KO_DGPU" -- --mode suite "${A[@]}"
counted "soak arm64: ioctl fuzzer" "$L/soak-arm64-fuzz.log" harness "$GDR_P2P" "$GDR_KO" -- --mode fuzz \
  --guest-args "--iterations ${GDR_FUZZ_ITERATIONS:-3000} --threads 4" "${A[@]}"
arm64_must_fail() {
  harness "$GDR_KO" -- --mode suite --inject corrupt_data:0 --expect-failures "${A[@]}" \
    >"$L/soak-arm64-must-fail.log" 2>&1 || { tail -n 40 "$L/soak-arm64-must-fail.log" >&2; return 1; }
}
check "soak arm64: the suite fails when the model corrupts data" arm64_must_fail
grep -h "GUEST FUZZ" "$L"/soak-*-fuzz.log >&2 || true
finish
