#!/usr/bin/env bash
# Build everything the bench runs and print it as shell assignments (eval "$(bench/build.sh)"):
# the chroot, the guest kernel, the kernel module, the FPGA model, the host harness and the guest tests.
# Heavy parts come from $GDR_CACHE when their inputs are unchanged.
. "$(dirname "$0")/lib.sh"
need_root
ARCH=${ARCH:-x86_64}
t0=$SECONDS
ROOT=$("$REPO/bench/rootfs.sh")
log "chroot ready ($((SECONDS - t0)) s)"
KDIR=$(ARCH=$ARCH "$REPO/bench/kernel.sh")
log "kernel ready ($((SECONDS - t0)) s)"
KMOD_DGPU=$("$REPO/bench/kmod.sh" "$KDIR" dgpu)
KMOD=$("$REPO/bench/kmod.sh" "$KDIR" jetson)
log "kernel modules built ($((SECONDS - t0)) s)"

# Host tools (model, harness) and the static guest test binary. The guest build gets its own target folder
# so its static-CRT flags never invalidate the host build.
TARGET=$REPO/target
(cd "$REPO" && cargo build --release --quiet -p picoevb-model -p gdr-bench) >&2 || die "cargo build (host tools) failed"
(cd "$REPO" && CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
  cargo build --release --quiet -p gdr-guest-tests --target x86_64-unknown-linux-gnu --target-dir "$TARGET/guest") >&2 ||
  die "cargo build (guest tests) failed"
log "userspace built ($((SECONDS - t0)) s)"

cat <<VARS
GDR_ROOT=$ROOT
GDR_KDIR=$KDIR
GDR_KERNEL=$KDIR/arch/x86/boot/bzImage
GDR_KO=$KMOD/picoevb.ko
GDR_P2P=$KMOD/gdr_nv_p2p.ko
GDR_KO_DGPU=$KMOD_DGPU/picoevb.ko
GDR_P2P_DGPU=$KMOD_DGPU/gdr_nv_p2p.ko
GDR_MODEL=$TARGET/release/picoevb-model
GDR_HARNESS=$TARGET/release/gdr-bench
GDR_GUEST=$TARGET/guest/x86_64-unknown-linux-gnu/release/gdr-guest-tests
VARS
