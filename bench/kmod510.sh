#!/usr/bin/env bash
# Build the Linux 5.10 modules against a 5.10 bench kernel (bench/kernel510.sh), or a 4.9/4.14 one
# (bench/kernel4x.sh; the same sources, through kmod/compat): picoevb.ko
# (kmod/picoevb-5.10: C glue + the shared Rust logic, built freestanding) and the bench's nvidia_p2p
# provider gdr_nv_p2p.ko (kmod/nvidia-p2p-5.10: the 6.18 provider's C and Rust logic, Jetson flavour), in
# the bench chroot whose rustc and rust-src build the Rust halves. Copies them to target/kmod/<series>-<arch>/
# and prints that folder.
# Usage: kmod510.sh KDIR
. "$(dirname "$0")/lib.sh"
need_root
KDIR=${1:?usage: kmod510.sh KDIR}
ROOT=$("$REPO/bench/rootfs.sh")
# target/kmod/<series>-<arch>: 510 for 5.10, 414 and 49 for the 4.x kernels of bench/kernel4x.sh.
series=$(sed -n 's/^\([0-9]*\)\.\([0-9]*\)\..*/\1\2/p' "$KDIR/include/config/kernel.release")
[ -n "$series" ] || die "no kernel release in $KDIR"
if grep -q '^export ARCH=arm64 ' "$KDIR/env.sh"; then OUT=$REPO/target/kmod/$series-arm64; else OUT=$REPO/target/kmod/$series-x86_64; fi
rm -rf "$OUT"; mkdir -p "$OUT"
for m in nvidia-p2p-5.10 picoevb-5.10; do
  # KCFLAGS= : the modules get the kernel's own warnings-as-errors, not the relief its old sources need.
  in_root "$ROOT" bash -c ". '$KDIR/env.sh' && make -s -C '$KDIR' M='$REPO/kmod/$m' KCFLAGS= modules" >&2 ||
    die "kernel module build failed: kmod/$m"
  cp "$REPO"/kmod/$m/*.ko "$OUT/"
done
# Under a KASAN kernel the Rust objects must be instrumented as the C glue is (rust.mk): their loads and
# stores call KASAN's checks. An uninstrumented Rust object would pass every test and check nothing.
# Generic KASAN: CONFIG_KASAN_GENERIC, or before 4.20 CONFIG_KASAN itself.
if grep -qx 'CONFIG_KASAN_GENERIC=y' "$KDIR/.config" ||
  { grep -qx 'CONFIG_KASAN=y' "$KDIR/.config" && ! grep -q '^CONFIG_KASAN_\(SW\|HW\)_TAGS=y' "$KDIR/.config"; }; then
  for o in picoevb-5.10/picoevb_rust.o nvidia-p2p-5.10/gdr_nv_p2p_rust.o; do
    undefined=$(in_root "$ROOT" bash -c ". '$KDIR/env.sh' && \${CROSS_COMPILE}nm -u '$REPO/kmod/$o'") ||
      die "nm failed on kmod/$o"
    grep -q ' __asan_load8_noabort$' <<<"$undefined" ||
      die "kmod/$o calls no KASAN check (__asan_load8_noabort), though $KDIR has generic KASAN"
  done
fi
# Where the kernel builds modules with the large code model (4.x arm64 with erratum 843419), its loader
# refuses ADRP relocations ("unsupported RELA relocation: 275"): the Rust objects must have none either.
if grep -qx 'CONFIG_ARM64_MODULE_CMODEL_LARGE=y' "$KDIR/.config"; then
  for o in picoevb-5.10/picoevb_rust.o nvidia-p2p-5.10/gdr_nv_p2p_rust.o; do
    relocs=$(in_root "$ROOT" bash -c ". '$KDIR/env.sh' && \${CROSS_COMPILE}readelf -rW '$REPO/kmod/$o'") ||
      die "readelf failed on kmod/$o"
    ! grep -q 'R_AARCH64_ADR_PREL_PG_HI21' <<<"$relocs" ||
      die "kmod/$o has ADRP relocations, which $KDIR's module loader refuses (CONFIG_ARM64_MODULE_CMODEL_LARGE)"
  done
fi
log "kmod/nvidia-p2p-5.10, kmod/picoevb-5.10 built with $(in_root "$ROOT" rustc --version)"
echo "$OUT"
