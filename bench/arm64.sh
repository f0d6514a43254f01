#!/usr/bin/env bash
# The arm64 bench: the guest suite on qemu-system-aarch64 -M virt (TCG) with virtio-iommu translating the
# card's DMA (docs/arm64.md). By default the suite with the Jetson provider; --full adds the suite without a
# provider and with the dGPU one, the ioctl fuzzer, and the corrupt-data run that must fail. Builds what it
# needs (ARCH=arm64 bench/build.sh) and closes with "N passed, M failed".
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
case ${1:-} in "" | --full) ;; *) die "usage: arm64.sh [--full]" ;; esac
# The `arm64` or `arm64-full` rows of bench/matrix.
run_matrix "arm64${1:+-full}"
finish
