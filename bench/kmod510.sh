#!/usr/bin/env bash
# Build the Linux 5.10 modules against a 5.10 bench kernel (bench/kernel510.sh): picoevb.ko
# (kmod/picoevb-5.10: C glue + the shared Rust logic, built freestanding) and the bench's nvidia_p2p
# provider gdr_nv_p2p.ko (kmod/nvidia-p2p-5.10: the 6.18 provider's C and Rust logic, Jetson flavour), in
# the bench chroot whose rustc and rust-src build the Rust halves. Copies them to target/kmod/510-<arch>/
# and prints that folder.
# Usage: kmod510.sh KDIR
. "$(dirname "$0")/lib.sh"
need_root
KDIR=${1:?usage: kmod510.sh KDIR}
ROOT=$("$REPO/bench/rootfs.sh")
if grep -q '^export ARCH=arm64 ' "$KDIR/env.sh"; then OUT=$REPO/target/kmod/510-arm64; else OUT=$REPO/target/kmod/510-x86_64; fi
rm -rf "$OUT"; mkdir -p "$OUT"
for m in nvidia-p2p-5.10 picoevb-5.10; do
  in_root "$ROOT" bash -c ". '$KDIR/env.sh' && make -s -C '$KDIR' M='$REPO/kmod/$m' modules" >&2 ||
    die "kernel module build failed: kmod/$m"
  cp "$REPO"/kmod/$m/*.ko "$OUT/"
done
# Under a KASAN kernel the Rust objects must be instrumented as the C glue is (rust.mk): their loads and
# stores call KASAN's checks. An uninstrumented Rust object would pass every test and check nothing.
if grep -qx 'CONFIG_KASAN_GENERIC=y' "$KDIR/.config"; then
  for o in picoevb-5.10/picoevb_rust.o nvidia-p2p-5.10/gdr_nv_p2p_rust.o; do
    undefined=$(in_root "$ROOT" bash -c ". '$KDIR/env.sh' && \${CROSS_COMPILE}nm -u '$REPO/kmod/$o'") ||
      die "nm failed on kmod/$o"
    grep -q ' __asan_load8_noabort$' <<<"$undefined" ||
      die "kmod/$o calls no KASAN check (__asan_load8_noabort), though $KDIR has CONFIG_KASAN_GENERIC"
  done
fi
log "kmod/nvidia-p2p-5.10, kmod/picoevb-5.10 built with $(in_root "$ROOT" rustc --version)"
echo "$OUT"
