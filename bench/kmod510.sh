#!/usr/bin/env bash
# Build the Linux 5.10 picoevb.ko (kmod/picoevb-5.10: C glue + the shared Rust logic, built freestanding)
# against a 5.10 bench kernel (bench/kernel510.sh), in the bench chroot whose rustc and rust-src build the
# Rust half. Copies it to target/kmod/510-<arch>/ and prints that folder. No nvidia_p2p provider yet: the
# 6.18 provider (kmod/nvidia-p2p) needs Rust-for-Linux.
# Usage: kmod510.sh KDIR
. "$(dirname "$0")/lib.sh"
need_root
KDIR=${1:?usage: kmod510.sh KDIR}
ROOT=$("$REPO/bench/rootfs.sh")
if grep -q '^export ARCH=arm64 ' "$KDIR/env.sh"; then OUT=$REPO/target/kmod/510-arm64; else OUT=$REPO/target/kmod/510-x86_64; fi
rm -rf "$OUT"; mkdir -p "$OUT"
in_root "$ROOT" bash -c ". '$KDIR/env.sh' && make -s -C '$KDIR' M='$REPO/kmod/picoevb-5.10' modules" >&2 ||
  die "kernel module build failed: kmod/picoevb-5.10"
cp "$REPO/kmod/picoevb-5.10/picoevb.ko" "$OUT/"
echo "$OUT"
