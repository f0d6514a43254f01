#!/usr/bin/env bash
# Build picoevb.ko (kmod/picoevb-5.10 through kmod/compat) for JetPack 4 against an NVIDIA L4T R32 kernel
# tree (Linux 4.9, e.g. R32.7.4's kernel/kernel-4.9 of NVIDIA's public_sources, or OE4T's linux-tegra-4.9):
# arm64, tegra_defconfig, modules_prepare, then the module with the tree's own configuration. NVIDIA's
# overlays (nvidia/, nvgpu/ beside kernel-4.9) are used where they are; a tree without them (kernel-4.9
# alone) gets an overlay of empty Kconfig files for the ones its Kconfig sources from there, so
# tegra_defconfig runs (the config then lacks NVIDIA's overlay drivers, which an out-of-tree module does
# not build against). Only
# modules_prepare runs on the tree, so modpost has no vmlinux symbols (it warns instead of failing); the
# module links NVIDIA's nvidia_p2p at run time (symbol_get), so gdr's own nv-p2p.h is used unless the tree
# has include/linux/nv-p2p.h. Checks what the box's loader needs: vermagic, and no ADRP relocation in the
# Rust object when the tree builds modules with the large code model.
#
# NOT RUN IN CI: NVIDIA's kernel sources are not in the package registries.
# Usage: l4t32-kmod.sh KERNEL_TREE [--p2p-header DIR]
#   --p2p-header DIR  build against DIR/linux/nv-p2p.h (GDR_P2P_SYSTEM_HEADER), e.g. R32's own header where
#                     the tree lacks it (NVIDIA keeps it with nvgpu)
# The tree is only read; the prepared build is kept under $GDR_CACHE/l4t32-<hash>/.
. "$(dirname "$0")/lib.sh"
need_root
TREE= HDR=
while [ $# -gt 0 ]; do
  case $1 in
    --p2p-header) HDR=$(cd "${2:?--p2p-header needs a folder}" && pwd) || die "no such folder: $2"; shift 2 ;;
    -*) die "unknown option $1" ;;
    *) [ -z "$TREE" ] || die "one KERNEL_TREE only"; TREE=$(cd "$1" && pwd) || die "no such folder: $1"; shift ;;
  esac
done
[ -n "$TREE" ] || die "usage: l4t32-kmod.sh KERNEL_TREE [--p2p-header DIR]"
[ -z "$HDR" ] || [ -f "$HDR/linux/nv-p2p.h" ] || die "$HDR/linux/nv-p2p.h does not exist"
[ -e "$TREE/arch/arm64/configs/tegra_defconfig" ] || die "$TREE is not an L4T kernel tree (no tegra_defconfig)"
KVER=$(make -s -C "$TREE" kernelversion 2>/dev/null) || die "cannot read the kernel version of $TREE"
case $KVER in 4.9.*) ;; *) die "$TREE is Linux $KVER: L4T R32 is 4.9 (R35's 5.10 is bench/l4t-kmod.sh's)" ;; esac

ROOT=$("$REPO/bench/rootfs.sh")
toolchain=$(in_root "$ROOT" bash -c 'aarch64-linux-gnu-gcc --version | head -1')
OUT=$GDR_CACHE/l4t32-$(hash_of "$0" <(echo "$TREE $KVER $toolchain"))
# A scratch copy of what the module compiles: the tree's build must not write into this checkout's objects.
SCRATCH=$REPO/target/l4t32-kmod
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
cp -r "$REPO/kmod" "$REPO/crates" "$SCRATCH/"
MOD=$SCRATCH/kmod/picoevb-5.10
make -s -C "$MOD" clean >/dev/null 2>&1 || true

# gcc 14 against a 2019 tree: its new errors stay warnings in the kernel's own objects, as bench/kernel4x.sh.
env_k="export ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-"
relief="KCFLAGS='-Wno-error -Wno-error=implicit-function-declaration -Wno-error=incompatible-pointer-types -Wno-error=int-conversion'"
OVL=
if [ ! -d "$TREE/../nvidia" ]; then OVL=$OUT.overlay; fi
ovl=${OVL:+KERNEL_OVERLAYS=$OVL}
if [ ! -f "$OUT/.gdr-complete" ]; then
  rm -rf "$OUT" "$OUT.overlay"; mkdir -p "$OUT" ${OVL:+"$OVL"}
  log "preparing $TREE ($KVER) with tegra_defconfig in $OUT${OVL:+ (no overlays beside it: empty Kconfig stubs)}"
  configured=
  for _ in $(seq 1 50); do
    if in_root "$ROOT" bash -c "$env_k && make -s -C '$TREE' O='$OUT' $ovl tegra_defconfig" >"$OUT/prepare.log" 2>&1; then
      configured=1; break
    fi
    missing=$(sed -n 's/.*can.t open file "\([^"]*Kconfig[^"]*\)".*/\1/p' "$OUT/prepare.log" | head -n1)
    [ -n "$OVL" ] && [ -n "$missing" ] && [ ! -e "$OVL/$missing" ] ||
      { tail -30 "$OUT/prepare.log" >&2; die "tegra_defconfig failed, see $OUT/prepare.log"; }
    mkdir -p "$OVL/$(dirname "$missing")"; : >"$OVL/$missing"
  done
  [ -n "$configured" ] || die "tegra_defconfig still wants overlay files after 50 stubs, see $OUT/prepare.log"
  [ -z "$OVL" ] || log "empty Kconfig stubs: $(cd "$OVL" && find . -type f | sed 's|^\./||' | tr '\n' ' ')"
  in_root "$ROOT" bash -c "$env_k && make -s -C '$TREE' O='$OUT' $ovl $relief -j$(nproc) modules_prepare" \
    >>"$OUT/prepare.log" 2>&1 || { tail -30 "$OUT/prepare.log" >&2; die "modules_prepare failed, see $OUT/prepare.log"; }
  touch "$OUT/.gdr-complete"
fi
# The header DIR given is copied beside the module (the chroot sees the cache and the checkout only).
hdr=
if [ -n "$HDR" ]; then
  mkdir -p "$SCRATCH/p2p-header/linux"; cp "$HDR/linux/nv-p2p.h" "$SCRATCH/p2p-header/linux/"
  hdr="GDR_P2P_SYSTEM_HEADER=1 KCFLAGS=-I$SCRATCH/p2p-header"
elif [ -f "$TREE/include/linux/nv-p2p.h" ]; then
  hdr="GDR_P2P_SYSTEM_HEADER=1 KCFLAGS="
else
  hdr="KCFLAGS="
fi
log "building picoevb.ko against $KVER (tegra_defconfig; $hdr)"
in_root "$ROOT" bash -c "$env_k && make -C '$OUT' M='$MOD' $ovl $hdr modules" >"$SCRATCH/build.log" 2>&1 ||
  { tail -40 "$SCRATCH/build.log" >&2; die "picoevb.ko did not build, see $SCRATCH/build.log"; }
warn=$(grep -c 'warning:' "$SCRATCH/build.log" || true)
[ "$(grep -c 'CC \[M\]' "$SCRATCH/build.log" || true)" -gt 0 ] || die "no C file compiled: see $SCRATCH/build.log"
modpost=$(grep -c '^WARNING:' "$SCRATCH/build.log" || true)
info=$(in_root "$ROOT" modinfo -F vermagic "$MOD/picoevb.ko") || die "modinfo failed"
case $info in "$KVER"*) ;; *) die "picoevb.ko has vermagic '$info', not $KVER" ;; esac
if grep -qx 'CONFIG_ARM64_MODULE_CMODEL_LARGE=y' "$OUT/.config"; then
  # Captured first: `grep -q` on a pipe would stop readelf early, and pipefail would call that a failure.
  relocs=$(in_root "$ROOT" aarch64-linux-gnu-readelf -rW "$MOD/picoevb_rust.o") || die "readelf failed"
  ! grep -q R_AARCH64_ADR_PREL_PG_HI21 <<<"$relocs" ||
    die "picoevb_rust.o has ADRP relocations, which this kernel's module loader refuses (large code model)"
fi
cp "$MOD/picoevb.ko" "$SCRATCH/picoevb.ko"
echo "picoevb.ko: built for $KVER (vermagic $info; large code model: $(grep -c '^CONFIG_ARM64_MODULE_CMODEL_LARGE=y' "$OUT/.config")); compiler warnings: $warn; modpost warnings: $modpost (without vmlinux symbols); $SCRATCH/picoevb.ko"
