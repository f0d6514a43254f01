#!/usr/bin/env bash
# Build the out-of-tree kernel modules (picoevb.ko and the nvidia_p2p provider gdr_nv_p2p.ko) against the
# bench kernel, in the chroot whose rustc built that kernel (a Rust .ko links against that exact kernel
# crate build), for one flavour of the nvidia_p2p API: jetson (default) or dgpu; and the bench's dma-buf
# exporter gdr_exporter.ko (kmod/bench-exporter, plain C, the same for both flavours). Copies them to
# target/kmod/<flavour>/ (target/kmod/arm64-<flavour>/ for an arm64 kernel) and prints that folder.
# Usage: kmod.sh KDIR [jetson|dgpu]
. "$(dirname "$0")/lib.sh"
need_root
KDIR=${1:?usage: kmod.sh KDIR [jetson|dgpu]}
FLAVOUR=${2:-jetson}
case $FLAVOUR in jetson | dgpu) ;; *) die "unknown flavour $FLAVOUR (jetson or dgpu)" ;; esac
ROOT=$("$REPO/bench/rootfs.sh")
# Per checkout (worktrees build side by side), never in the shared cache.
if grep -q '^export ARCH=arm64 ' "$KDIR/env.sh"; then OUT=$REPO/target/kmod/arm64-$FLAVOUR; else OUT=$REPO/target/kmod/$FLAVOUR; fi
rm -rf "$OUT"; mkdir -p "$OUT"
for m in nvidia-p2p picoevb; do
  # Kbuild rebuilds whatever the flavour's flags change, so the two flavours can share the source folder.
  in_root "$ROOT" bash -c ". '$KDIR/env.sh' && make -s -C '$KDIR' M='$REPO/kmod/$m' GDR_P2P_FLAVOUR=$FLAVOUR modules" >&2 ||
    die "kernel module build failed: kmod/$m ($FLAVOUR)"
  cp "$REPO"/kmod/$m/*.ko "$OUT/"
done
# No flavour flags: each flavour's folder gets its own copy of the same module.
in_root "$ROOT" bash -c ". '$KDIR/env.sh' && make -s -C '$KDIR' M='$REPO/kmod/bench-exporter' modules" >&2 ||
  die "kernel module build failed: kmod/bench-exporter"
cp "$REPO/kmod/bench-exporter/gdr_exporter.ko" "$OUT/"
log "kmod/nvidia-p2p, kmod/picoevb ($FLAVOUR) built with $(in_root "$ROOT" rustc --version), the kernel's;" \
  "kmod/bench-exporter (C)"
echo "$OUT"
