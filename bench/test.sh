#!/usr/bin/env bash
# The test command (README; .ci/run calls it). Runs, in order:
#   1. host checks: cargo fmt --check, cargo clippy -D warnings, cargo test (logic, model, ABI, harness, ...)
#   2. the FPGA RTL simulation (fpga-bitstream/sim/run.sh); meta-gdr's checks (meta-gdr/scripts/check.sh:
#      oelint-adv, the crates list, install paths, kas files); the agent and its client library cross-built
#      for aarch64 (bench/cross-agent.sh)
#   3. the emulated bench, each boot judged by the harness (no kernel splat, no kmemleak report, clean
#      module load and unload): the guest suite with the Jetson and with the dGPU nvidia_p2p provider, with
#      the Jetson one under swiotlb=force (every DMA bounced), the tests that want two cards and no provider,
#      and a short ioctl fuzzer run (GDR_FUZZ_ITERATIONS, default 3000)
#   4. the suite with the model corrupting every transfer, which must fail
#   5. (the whole suite without a provider, the suite behind intel-iommu and the registration-cache
#      benchmark moved to bench/soak.sh, to keep a cold CI inside its time; steps 7 and 9 run behind an IOMMU)
#   6. the emulated appliance (bench/appliance/): one boot of the Debian/systemd image whose test unit runs
#      bench/appliance/guest/scenarios/tests.sh (agent ready, reprogramming, access, revocation, self-test
#      failure, config reload, watchdog, unit hardening)
#   7. arm64: the suite with the Jetson provider on qemu-system-aarch64 -M virt behind virtio-iommu (the
#      short form of bench/arm64.sh --full; GDR_ARM64_TESTS=0 leaves it out)
#   8. the 5.10 modules (kmod/picoevb-5.10, kmod/nvidia-p2p-5.10) on Linux 5.10:
#      same-logic check, the suite with the Jetson provider, and the tests that want two cards and no
#      provider (GDR_BENCH_510=0 leaves it out)
#   9. the same 5.10 modules for arm64 on an arm64 Linux 5.10, the suite with the Jetson provider behind
#      virtio-iommu (GDR_BENCH_510=0 or GDR_ARM64_TESTS=0 leaves it out)
# and closes with one line "N passed, M failed" over all of them. Needs root (chroot, mounts).
# The long version of 3 is bench/soak.sh.
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
# The Jetson's user space (agent programs, client library) cross-built for aarch64 with the bench's cross
# toolchain and checked to be AArch64: a Jetson build failure shows here first.
counted "cross: agent and client for aarch64" "$LOGS/last-cross-agent.log" "$REPO/bench/cross-agent.sh"

# The model corrupts every transfer: the guest's byte checks must catch it, so this suite run must fail
# (the harness's --expect-failures succeeds only then, with every kernel check still clean).
must_fail() {
  harness "$GDR_KO" -- --mode suite --inject corrupt_data:0 --expect-failures >"$LOGS/last-must-fail.log" 2>&1 ||
    { tail -n 40 "$LOGS/last-must-fail.log" >&2; return 1; }
}

if vars=$("$REPO/bench/build.sh"); then
  eval "$vars"
  check "kernel rustfmt (kmod)" "$REPO/bench/kfmt.sh" --check
  L=$LOGS
  # Without a provider only these differ from the Jetson boot below (which runs every other test): two
  # cards, and PIN_CUDA refused. The whole suite without a provider is in bench/soak.sh.
  counted "bench: two cards, no GPU-memory provider" "$L/last-suite-plain.log" \
    harness "$GDR_KO" -- --mode suite --cards 2 --guest-args "--filter errors::,cards::,cuda::no_provider"
  counted "bench: suite, Jetson nvidia_p2p" "$L/last-suite-jetson.log" harness "$GDR_P2P" "$GDR_KO" -- --mode suite
  counted "bench: suite, dGPU nvidia_p2p" "$L/last-suite-dgpu.log" harness "$GDR_P2P_DGPU" "$GDR_KO_DGPU" -- --mode suite
  # Bounce buffers for every mapping: a missing or partial CPU-cache sync becomes a byte mismatch here.
  counted "bench: suite under swiotlb=force, Jetson nvidia_p2p" "$L/last-suite-swiotlb.log" \
    harness "$GDR_P2P" "$GDR_KO" -- --mode suite --append "swiotlb=131072,force"
  counted "bench: ioctl fuzzer" "$L/last-fuzz.log" harness "$GDR_P2P" "$GDR_KO" -- --mode fuzz \
    --guest-args "--iterations ${GDR_FUZZ_ITERATIONS:-3000} --threads 4"
  check "bench: the suite fails when the model corrupts data" must_fail
  # The card starts with NVIDIA's reference design, so the agent must reprogram it at boot.
  # GDR_APPLIANCE_TESTS=0 leaves it out.
  if [ "${GDR_APPLIANCE_TESTS:-1}" = 1 ]; then
    if avars=$(export GDR_KDIR GDR_KO GDR_P2P GDR_MODEL; "$REPO/bench/appliance/prepare.sh"); then
      eval "$avars"
      counted "appliance: tests" "$L/last-appliance.log" "$GDR_HARNESS" appliance --root "$GDR_ROOT" \
        --kernel "$GDR_KERNEL" --model "$GDR_MODEL" --base "$GDR_APPLIANCE_BASE" \
        --layer "$GDR_APPLIANCE_LAYER" --scenario tests --model-arg=--design --model-arg=reference \
        --model-arg=--golden="$GDR_APPLIANCE_GOLDEN" --timeout 1500
    else
      count "appliance build" 0 1
    fi
  else
    log "appliance: tests left out (GDR_APPLIANCE_TESTS=0)"
  fi
else
  count "bench build" 0 1
fi

# The Jetson's architecture, with an IOMMU translating every DMA of the card (docs/arm64.md). Its own
# kernel, modules and static guest program: a build failure here is an arm64 build failure.
if [ "${GDR_ARM64_TESTS:-1}" = 1 ]; then
  # After every x86_64 step: its variables (GDR_KO, GDR_ARCH, ...) replace the x86_64 ones.
  if vars=$(ARCH=arm64 "$REPO/bench/build.sh"); then
    eval "$vars"
    counted "arm64: suite behind virtio-iommu, Jetson nvidia_p2p" "$LOGS/last-arm64-jetson.log" \
      harness "$GDR_P2P" "$GDR_KO" -- --mode suite --iommu virtio --timeout 5400
  else
    count "arm64 build" 0 1
  fi
else
  log "arm64: left out (GDR_ARM64_TESTS=0)"
fi

# Xavier's kernel series (issue 12, docs/driver.md "Two builds"): the 5.10 modules, whose Rust logic must be the
# very files the 6.18 modules compile (bench/same-logic.sh), run the guest suite on Linux 5.10 with the bench's
# Jetson nvidia_p2p provider. Its kernel costs about 5 min cold on an idle 2-core machine (docs/bench.md).
# Runs after every 6.18 step, since it replaces the GDR_* variables.
if [ "${GDR_BENCH_510:-1}" = 1 ]; then
  if vars=$(GDR_KSERIES=5.10 "$REPO/bench/build.sh"); then
    eval "$vars"
    check "5.10: the same Rust logic files as the 6.18 module" "$REPO/bench/same-logic.sh"
    counted "bench 5.10: suite, Jetson nvidia_p2p" "$LOGS/last-suite-510.log" harness "$GDR_P2P" "$GDR_KO" -- --mode suite
    # What the Jetson boot skips for want of its setup: two cards, and the tests that need no provider loaded
    # (picoevb.ko without nvidia_p2p: PIN_CUDA answers EOPNOTSUPP).
    counted "bench 5.10: two cards, no GPU-memory provider" "$LOGS/last-suite-510-plain.log" \
      harness "$GDR_KO" -- --mode suite --cards 2 --guest-args "--filter errors::,cards::,cuda::no_provider"
  else
    count "bench build (5.10)" 0 1
  fi
else
  log "5.10 bench left out (GDR_BENCH_510=0)"
fi

# Xavier's kernel series on Xavier's architecture: the 5.10 modules built for arm64 (KASAN in their Rust
# objects too) on Linux 5.10 for arm64 (bench/kernel/arm64-5.10.config), behind virtio-iommu as in step 7.
if [ "${GDR_BENCH_510:-1}" = 1 ] && [ "${GDR_ARM64_TESTS:-1}" = 1 ]; then
  if vars=$(ARCH=arm64 GDR_KSERIES=5.10 "$REPO/bench/build.sh"); then
    eval "$vars"
    counted "arm64 5.10: suite behind virtio-iommu, Jetson nvidia_p2p" "$LOGS/last-arm64-suite-510.log" \
      harness "$GDR_P2P" "$GDR_KO" -- --mode suite --iommu virtio --timeout 5400
  else
    count "arm64 build (5.10)" 0 1
  fi
else
  log "arm64 5.10: left out (GDR_BENCH_510=0 or GDR_ARM64_TESTS=0)"
fi

finish
