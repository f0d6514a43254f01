#!/usr/bin/env bash
# The CUDA part of the agent's self-test on a real GPU (no PicoEVB needed): loads the PTX kernels through
# the driver's JIT, checks fill/verify against the host pattern and against planted errors, and prints the
# verify kernel's bandwidth beside the device memory bandwidth measured in the same run; then the GPU-memory
# paths the device offers (--gpu-paths: attributes, dma-buf exports, the client's choice), the GPU's
# reaction time to a word in pinned host memory (--gpu-wake), the stream-record consumer (--gpu-stream) and
# a consumer of a stream ring while a CPU producer fills it (--gpu-ring).
# docs/agent-gpu.md has a run.
#
#   agent/gpu/gpu-check.sh build OUTDIR   (here: needs cargo) build gdr-selftest, copy it and this script
#   gpu-check.sh [BINARY] [MiB]            (on the GPU machine: needs only the NVIDIA driver) run it
#
# The binary loads libcuda at run time with CUDA 11.4 bindings, so one x86-64 build runs on any driver
# from 11.4 up. Exit status: 0 all checks passed; 1 a check failed or no GPU.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ${1:-} == build ]]; then
    out=${2:?usage: gpu-check.sh build OUTDIR}
    root=$(cd "$here/../.." && pwd)
    (cd "$root" && cargo build --release -p gdr-agent --bin gdr-selftest)
    mkdir -p "$out"
    cp "$root/target/release/gdr-selftest" "$here/gpu-check.sh" "$out/"
    echo "gpu-check: built; run: $out/gpu-check.sh $out/gdr-selftest"
    exit 0
fi
bin=${1:-$here/gdr-selftest}
mib=${2:-256}
[[ -x $bin ]] || { echo "gpu-check: $bin not found (build it with: gpu-check.sh build DIR)" >&2; exit 1; }
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/driver: /'
fi
"$bin" --gpu-check "$mib"
"$bin" --gpu-paths
"$bin" --gpu-wake 20000
"$bin" --gpu-stream 256
"$bin" --gpu-ring 1024
