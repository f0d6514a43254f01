#!/usr/bin/env bash
# The test command (README; .ci/run calls it). Runs, in order:
#   1. host checks: cargo fmt --check, cargo clippy -D warnings, cargo test (logic, model, ABI, harness, ...)
#   2. the FPGA RTL simulation (fpga-bitstream/sim/run.sh); meta-gdr's checks (meta-gdr/scripts/check.sh:
#      oelint-adv, the crates list, install paths, kas files); the agent and its client library cross-built
#      for aarch64 (bench/cross-agent.sh); the import circles of kmod/picoevb (bench/imports.py)
#   3. the `ci` rows of bench/matrix, in its order: the workspace with the oldest and newest rustc; on
#      Linux 6.18 x86_64 the guest suite with the Jetson and the dGPU nvidia_p2p provider, under
#      swiotlb=force (the DMA, cache, pipeline and GPU-memory tests; the whole suite under it is soak's), two cards without a provider, a short ioctl fuzzer run (GDR_FUZZ_ITERATIONS, default
#      3000), the suite with the model corrupting every transfer (which must fail) and the emulated
#      appliance (bench/appliance/); on arm64 the suite behind virtio-iommu and the Orin module with
#      wrynose's and the newest rustc; on Linux 5.10 (Xavier) the same-logic check, the suite on arm64
#      behind virtio-iommu (x86_64 5.10 is soak's), and the Xavier module with the mixin's, wrynose's and
#      the newest rustc.
#      Each boot is judged by the harness (no kernel splat, no kmemleak report, clean load and unload).
#      GDR_ARM64_TESTS=0, GDR_BENCH_510=0, GDR_APPLIANCE_TESTS=0, GDR_RUSTC_MATRIX=0 leave rows out.
# and closes with one line "N passed, M failed" over all of them. Needs root (chroot, mounts).
# The long runs are bench/soak.sh (the `soak` rows).
. "$(dirname "$0")/lib.sh"
need_root
cd "$REPO"
. "$REPO/bench/runs.sh"

command -v cargo >/dev/null || die "cargo not found: install Rust with rustup first"
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt >&2 || true

check "cargo fmt" cargo fmt --all --check
check "cargo clippy" cargo clippy --workspace --all-targets --quiet -- -D warnings
rc=0; out=$(cargo test --workspace --quiet 2>&1) || rc=1
printf '%s\n' "$out" | grep -E '^test result|FAILED|panicked' >&2 || true
sum() { printf '%s\n' "$out" | awk -v w="$1" '/^test result:/ {for (i = 1; i < NF; i++) if ($(i+1) ~ "^" w) s += $i} END {print s + 0}'; }
p=$(sum passed); f=$(sum failed)
[ "$rc" -eq 0 ] || [ "$f" -gt 0 ] || f=1
count "cargo test" "$p" "$f"

[ -f fpga-bitstream/sim/run.sh ] && counted "rtl simulation" "$LOGS/last-rtl.log" bash fpga-bitstream/sim/run.sh
counted "yocto: meta-gdr and kas checks" "$LOGS/last-yocto.log" meta-gdr/scripts/check.sh
# Import circles in the 6.18 glue: only those issue 24 still has to end (bench/imports.py names them).
counted "kmod: import circles" "$LOGS/last-imports.log" python3 bench/imports.py
# The Jetson's user space (agent programs, client library) cross-built for aarch64 with the bench's cross
# toolchain and checked to be AArch64: a Jetson build failure shows here first.
counted "cross: agent and client for aarch64" "$LOGS/last-cross-agent.log" "$REPO/bench/cross-agent.sh"

# Every kernel, architecture, provider and rustc: the `ci` rows of bench/matrix.
run_matrix ci
finish
