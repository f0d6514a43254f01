#!/usr/bin/env bash
# The arm64 bench: the guest suite on qemu-system-aarch64 -M virt (TCG) with virtio-iommu translating the
# card's DMA (docs/arm64.md). By default the suite with the Jetson provider; --full adds the suite without a
# provider and with the dGPU one, the ioctl fuzzer, and the corrupt-data run that must fail. Builds what it
# needs (ARCH=arm64 bench/build.sh) and closes with "N passed, M failed".
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
case ${1:-} in "" | --full) ;; *) die "usage: arm64.sh [--full]" ;; esac
eval "$(ARCH=arm64 "$REPO/bench/build.sh")"
L=$LOGS
A=(--iommu virtio --timeout "${GDR_ARM64_TIMEOUT:-5400}")
counted "arm64: suite behind virtio-iommu, Jetson nvidia_p2p" "$L/last-arm64-jetson.log" \
  harness "$GDR_P2P" "$GDR_KO" -- --mode suite "${A[@]}"
if [ "${1:-}" = --full ]; then
  counted "arm64: suite, no GPU-memory provider" "$L/last-arm64-plain.log" harness "$GDR_KO" -- --mode suite "${A[@]}"
  counted "arm64: suite, dGPU nvidia_p2p" "$L/last-arm64-dgpu.log" \
    harness "$GDR_P2P_DGPU" "$GDR_KO_DGPU" -- --mode suite "${A[@]}"
  counted "arm64: ioctl fuzzer" "$L/last-arm64-fuzz.log" harness "$GDR_P2P" "$GDR_KO" -- --mode fuzz \
    --guest-args "--iterations ${GDR_FUZZ_ITERATIONS:-3000} --threads 4" "${A[@]}"
  must_fail() {
    harness "$GDR_KO" -- --mode suite --inject corrupt_data:0 --expect-failures "${A[@]}" \
      >"$L/last-arm64-must-fail.log" 2>&1 || { tail -n 40 "$L/last-arm64-must-fail.log" >&2; return 1; }
  }
  check "arm64: the suite fails when the model corrupts data" must_fail
fi
finish
