#!/usr/bin/env bash
# Build the Xavier flavour of picoevb.ko (kmod/picoevb-5.10) against an NVIDIA L4T R35 kernel tree the way
# the Yocto recipe does (meta-gdr/recipes-kernel/picoevb/picoevb-mod-5.10_0.1.0.bb): arm64, tegra_defconfig,
# `make -C <tree> O=<build> M=... RUSTC=... RUST_LIB_SRC=... KCFLAGS='-DGDR_P2P_LINKED -DGDR_P2P_SYSTEM_HEADER'`,
# linked against the tree's own nvidia-p2p module (CONFIG_TEGRA_RDMA=m), whose Module.symvers is passed as
# KBUILD_EXTRA_SYMBOLS (a full kernel build would have it in the kernel's own). Only modules_prepare is run
# on the tree, not a kernel build, so modpost has no vmlinux symbols: the six nvidia_p2p_* are checked one by
# one instead (exported by nvidia-p2p, undefined in picoevb.ko with nvidia-p2p's CRC, depends=nvidia-p2p).
#
# NOT RUN IN CI: NVIDIA's kernel sources are not in the package registries the bench installs from. Get them
# by hand (docs/yocto.md says from where) and pass their kernel-5.10 folder.
#
# Usage: l4t-kmod.sh KERNEL_TREE [--rustc PATH] [--p2p-header DIR]
#   KERNEL_TREE   the tree's kernel-5.10 folder; its overlays (nvidia/, nvgpu/) beside it (NVIDIA's layout)
#                 or inside it (OE4T's)
#   --rustc PATH  build the Rust half with this rustc and its own rust-src, not the bench chroot's Debian one
#   --p2p-header DIR
#                 also compile kmod/picoevb/p2p.c (the Orin module's nvidia_p2p shim) against DIR/linux/nv-p2p.h
#                 with the Orin recipe's KCFLAGS, and print the struct layouts and version constants of that
#                 header, the tree's and gdr's own (kmod/include/nv-p2p.h) side by side
# The tree and DIR are only read (bound read-only into the chroot). The prepared tree is kept under
# $GDR_CACHE/l4t-<version>-<hash>/; the scratch copies of kmod/ and crates/ under target/l4t-kmod/.
. "$(dirname "$0")/lib.sh"
need_root

TREE= RUSTC_HOST= OOT=
while [ $# -gt 0 ]; do
  case $1 in
    --rustc) RUSTC_HOST=${2:?--rustc needs a path}; shift 2 ;;
    --p2p-header) OOT=${2:?--p2p-header needs a folder}; shift 2 ;;
    -*) die "unknown option $1" ;;
    *) [ -z "$TREE" ] || die "one KERNEL_TREE only"; TREE=$1; shift ;;
  esac
done
[ -n "$TREE" ] || die "usage: l4t-kmod.sh KERNEL_TREE [--rustc PATH] [--p2p-header DIR]"
TREE=$(cd "$TREE" && pwd) || die "no such folder: $TREE"
[ -f "$TREE/Makefile" ] && [ -e "$TREE/arch/arm64/configs/tegra_defconfig" ] ||
  die "$TREE is not an L4T kernel tree (no Makefile or arch/arm64/configs/tegra_defconfig)"
if [ -n "$OOT" ]; then
  OOT=$(cd "$OOT" && pwd) || die "no such folder: $OOT"
  [ -f "$OOT/linux/nv-p2p.h" ] || die "$OOT/linux/nv-p2p.h does not exist"
fi

# The tree's parent is bound at /mnt/l4t, so NVIDIA's overlays (../nvidia) resolve there as they do here.
TOP=$(dirname "$TREE")
KSRC=/mnt/l4t/$(basename "$TREE")
if [ -d "$TREE/nvidia/drivers/nv-p2p" ]; then NV=$(basename "$TREE")/nvidia
elif [ -d "$TOP/nvidia/drivers/nv-p2p" ]; then NV=nvidia
else die "no nvidia/drivers/nv-p2p in or beside $TREE: not an L4T R35 tree (nvidia_p2p is nvidia-oot's from R36 on)"; fi
[ -f "$TOP/$NV/include/linux/nv-p2p.h" ] || die "no $TOP/$NV/include/linux/nv-p2p.h"

ROOT=$("$REPO/bench/rootfs.sh")
export GDR_CACHE

# The rustc: the chroot's (Debian's, with rust-src in /usr/src) unless --rustc names one; that one's sysroot
# (rustc, its libraries, rust-src) is bound at /mnt/rust.
RSYS=
if [ -n "$RUSTC_HOST" ]; then
  RSYS=$("$RUSTC_HOST" --print sysroot) || die "$RUSTC_HOST does not run"
  [ -f "$RSYS/lib/rustlib/src/rust/library/core/src/lib.rs" ] ||
    die "$RUSTC_HOST has no rust-src ($RSYS/lib/rustlib/src/rust/library): rustup component add rust-src"
  RUSTC=/mnt/rust/bin/rustc RUST_LIB_SRC=/mnt/rust/lib/rustlib/src/rust/library
else
  RUSTC=/usr/bin/rustc RUST_LIB_SRC=$(cd "$ROOT" && echo usr/src/rustc-*/library)
  RUST_LIB_SRC=/$RUST_LIB_SRC
fi

# l4t_root CMD...: in_root, with the tree's parent at /mnt/l4t, the rustc's sysroot at /mnt/rust and the
# --p2p-header folder at /mnt/oot, all read-only, on a tmpfs over the chroot's /mnt (nothing left behind).
l4t_root() {
  unshare --mount --propagation private -- bash -c '
    set -e; root=$1; top=$2; rsys=$3; oot=$4; shift 4
    mount -t tmpfs gdr-l4t "$root/mnt"
    bind_ro() { mkdir "$root/mnt/$2"; mount --bind "$1" "$root/mnt/$2"; mount -o remount,bind,ro "$root/mnt/$2"; }
    bind_ro "$top" l4t
    if [ -n "$rsys" ]; then bind_ro "$rsys" rust; fi
    if [ -n "$oot" ]; then bind_ro "$oot" oot; fi
    . "$REPO/bench/lib.sh"; in_root "$root" "$@"' _ "$ROOT" "$TOP" "$RSYS" "$OOT" "$@"
}
export REPO

# The prepared tree, keyed by what decides its content: the tree's version, config, nvidia-p2p, and the
# chroot (its gcc).
KVER=$(sed -n 's/^VERSION = //p; s/^PATCHLEVEL = //p; s/^SUBLEVEL = //p' "$TREE/Makefile" | paste -sd.)
commit=$(git -C "$TREE" rev-parse HEAD 2>/dev/null || true)
key=$( { echo "$commit $ROOT"; cat "$TREE/Makefile" "$TREE/arch/arm64/configs/tegra_defconfig" \
  "$TOP/$NV/drivers/nv-p2p/"* "$TOP/$NV/include/linux/nv-p2p.h"; } | sha256sum | cut -c1-16)
B=$GDR_CACHE/l4t-$KVER-$key
mkdir -p "$B"
K="make -C $KSRC O=$B/obj ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-"
# Extra compiler flags a newer gcc needs for an older tree. None for R35.3.1 (5.10.104) with gcc 14.2:
# modules_prepare, nvidia-p2p (its Makefile's -Werror) and picoevb build warning-free without any; the
# tree's 130-odd -Werror Makefiles elsewhere are not compiled here. One visible place for any addition.
KCFLAGS_GCC=""

# Kernel-tree makes one at a time on this machine (bench/kernel.sh takes the same lock), niced.
# GDR_KERNEL_LOCKED=1: the caller holds that lock already, over several runs (flock of a new open would wait
# for itself).
if [ -z "${GDR_KERNEL_LOCKED:-}" ]; then
  exec 9>"$GDR_CACHE/kernel-build.lock"
  log "waiting for $GDR_CACHE/kernel-build.lock"; flock 9
fi
if [ ! -f "$B/obj/.gdr-prepared" ]; then
  log "tegra_defconfig + modules_prepare in $B/obj"
  l4t_root nice -n 10 bash -c "$K -s tegra_defconfig && $K -s -j$(nproc) modules_prepare" \
    >"$B/prepare.log" 2>&1 || { tail -30 "$B/prepare.log" >&2; die "modules_prepare failed, see $B/prepare.log"; }
  touch "$B/obj/.gdr-prepared"
fi
grep -qx 'CONFIG_TEGRA_RDMA=m' "$B/obj/.config" || die "tegra_defconfig does not set CONFIG_TEGRA_RDMA=m"

# The tree's nvidia-p2p, alone, from a copy (its Makefile's -Werror kept): its Module.symvers.
rm -rf "$B/nvidia-p2p"; cp -r "$TOP/$NV/drivers/nv-p2p" "$B/nvidia-p2p"
log "building the tree's nvidia-p2p.ko"
l4t_root nice -n 10 bash -c "$K M=$B/nvidia-p2p KCFLAGS='$KCFLAGS_GCC' modules" >"$B/nvidia-p2p.log" 2>&1 ||
  { tail -30 "$B/nvidia-p2p.log" >&2; die "the tree's nvidia-p2p does not build, see $B/nvidia-p2p.log"; }

# picoevb.ko from a scratch copy of the checkout's kmod/ and crates/ (the recipe's SRC_URI), tracked and
# untracked files but no build outputs; per rustc, per checkout.
rver=$(l4t_root "$RUSTC" --version) || die "$RUSTC does not run in the chroot"
S=$REPO/target/l4t-kmod/rustc-$(sed -n 's/^rustc \([0-9A-Za-z.-]*\).*/\1/p' <<<"$rver")
rm -rf "$S"; mkdir -p "$S"
git -C "$REPO" ls-files -z --cached --others --exclude-standard kmod crates | tar -C "$REPO" --null -T - -cf - | tar -C "$S" -xf -
M=$S/kmod/picoevb-5.10
log "building picoevb.ko (kmod/picoevb-5.10) with $rver"
set +e
l4t_root nice -n 10 bash -c "$K M=$M RUSTC=$RUSTC RUST_LIB_SRC=$RUST_LIB_SRC \
  KCFLAGS='-DGDR_P2P_LINKED -DGDR_P2P_SYSTEM_HEADER $KCFLAGS_GCC' KBUILD_EXTRA_SYMBOLS=$B/nvidia-p2p/Module.symvers modules" \
  >"$S/build.log" 2>&1
rc=$?
set -e

# Orin's header: p2p.c as the 6.18 recipe compiles it (GDR_P2P_LINKED, GDR_P2P_SYSTEM_HEADER, -I<its headers>),
# and the layouts (offsetof/sizeof, from the same compiler and config) of the three headers.
if [ -n "$OOT" ]; then
  C=$S/p2p-header; mkdir -p "$C"
  # Kbuild builds a single target only if its object is listed.
  echo 'obj-m := p2p_oot.o layout_tree.o layout_oot.o layout_gdr.o' >"$C/Kbuild"
  echo "#include \"$S/kmod/picoevb/p2p.c\"" >"$C/p2p_oot.c"
  for h in tree:/mnt/l4t/$NV/include/linux/nv-p2p.h oot:/mnt/oot/linux/nv-p2p.h gdr:$S/kmod/include/nv-p2p.h; do
    {
      echo "#include <linux/kbuild.h>"; echo "#include \"${h#*:}\""
      echo "#define F(s, f) DEFINE(s##__##f, offsetof(struct nvidia_p2p_##s, f))"
      echo "void gdr_layout(void);"; echo "void gdr_layout(void) {"
      for f in version page_size size entries pages vaddr mapped mm mn lock free_callback data; do echo "F(page_table, $f);"; done
      for f in version hw_address hw_len entries sgt dev page_table direction; do echo "F(dma_mapping, $f);"; done
      echo "DEFINE(sizeof__page_table, sizeof(struct nvidia_p2p_page_table));"
      echo "DEFINE(sizeof__dma_mapping, sizeof(struct nvidia_p2p_dma_mapping));"
      for c in PAGE_TABLE_VERSION DMA_MAPPING_VERSION PINNED MAPPED; do echo "DEFINE(NVIDIA_P2P_$c, NVIDIA_P2P_$c);"; done
      echo "}"
    } >"$C/layout_${h%%:*}.c"
  done
  set +e
  l4t_root nice -n 10 bash -c "$K M=$C KCFLAGS='-DGDR_P2P_LINKED -DGDR_P2P_SYSTEM_HEADER -I/mnt/oot $KCFLAGS_GCC' \
    p2p_oot.o layout_tree.s layout_oot.s layout_gdr.s" >"$C/build.log" 2>&1
  orc=$?
  set -e
fi
[ -n "${GDR_KERNEL_LOCKED:-}" ] || exec 9>&-

# The report.
ko=$M/picoevb.ko
echo "kernel:   $(l4t_root bash -c "$K -s kernelrelease") (tree $TREE${commit:+, commit $commit}; build $B/obj)"
echo "gcc:      $(l4t_root aarch64-linux-gnu-gcc --version | head -n1)"
echo "rustc:    $rver ($RUSTC, library $RUST_LIB_SRC)"
echo "nvidia-p2p.ko: built, $(grep -c 'warning:' "$B/nvidia-p2p.log") warnings; exports: $(awk '{print $2}' "$B/nvidia-p2p/Module.symvers" | paste -sd' ')"
if [ "$rc" != 0 ] || [ ! -f "$ko" ]; then
  grep -iE 'error' "$S/build.log" | head -20 >&2 || true
  die "picoevb.ko does not build (exit $rc), see $S/build.log"
fi
cc_warn=$(grep -cE '(^|: )warning:' "$S/build.log" || true)
mp_warn=$(grep -c '^WARNING:' "$S/build.log" || true)
nocrc=$(grep -c 'has no CRC' "$S/build.log" || true)
echo "picoevb.ko: built; compiler (gcc, rustc) warnings: $cc_warn; modpost warnings: $mp_warn (\"Module.symvers is missing\" and \"Symbol info of vmlinux is missing\" are those of any build against modules_prepare), of which 'has no CRC': $nocrc"
grep -v 'has no CRC' "$S/build.log" | grep -E '(^|: )warning:|^WARNING:' | sed 's/^/  /' || true
undef=$(l4t_root aarch64-linux-gnu-nm -u "$ko")
# The CRCs modpost wrote into picoevb.ko's __versions (from nvidia-p2p's Module.symvers where it resolved).
versions=$(sed -n 's/^[[:space:]]*{ \(0x[0-9a-f]*\), "\([^"]*\)" },$/\2 \1/p' "$M/picoevb.mod.c")
used=$(grep -o '[^ ]*nv-p2p\.h' "$M/.p2p.o.cmd" | sort -u | paste -sd' ')
[ "$used" = "/mnt/l4t/$NV/include/linux/nv-p2p.h" ] || die "picoevb's p2p.c compiled against $used, not the tree's header"
echo "p2p.c's header: $TOP/$NV/include/linux/nv-p2p.h"
depends=$(l4t_root modinfo -F depends "$ko")
echo "depends:  $depends"
echo "vermagic: $(l4t_root modinfo -F vermagic "$ko")"
ok=0
for s in get_pages put_pages free_page_table dma_map_pages dma_unmap_pages free_dma_mapping; do
  s=nvidia_p2p_$s
  exp=$(awk -v s="$s" '$2 == s { print $1 }' "$B/nvidia-p2p/Module.symvers")
  crc=$(awk -v s="$s" '$1 == s { print $2 }' <<<"$versions")
  if grep -qw "$s" <<<"$undef" && [ -n "$exp" ] && [ -n "$crc" ] && [ $((exp)) = $((crc)) ] && ! grep -q "\"$s\".*has no CRC" "$S/build.log"; then
    echo "  $s: resolved against nvidia-p2p (CRC $crc)"; ok=$((ok + 1))
  else
    echo "  $s: NOT resolved (picoevb.ko needs it: $(grep -qw "$s" <<<"$undef" && echo yes || echo no); nvidia-p2p exports: ${exp:-no}; CRC in picoevb.ko: ${crc:-none})"
  fi
done
echo "nvidia_p2p symbols resolved: $ok of 6"
[[ ",$depends," == *,nvidia-p2p,* ]] || { echo "picoevb.ko does not depend on nvidia-p2p" >&2; ok=0; }

if [ -n "$OOT" ]; then
  if [ "$orc" != 0 ]; then
    grep -iE 'error|warning' "$C/build.log" | head -20 >&2 || true; die "the --p2p-header check does not compile, see $C/build.log"
  fi
  used=$(grep -o '[^ ]*nv-p2p\.h' "$C/.p2p_oot.o.cmd" | sort -u | paste -sd' ')
  [ "$used" = /mnt/oot/linux/nv-p2p.h ] || die "p2p.c compiled against $used, not $OOT/linux/nv-p2p.h"
  echo "kmod/picoevb/p2p.c against $OOT/linux/nv-p2p.h: compiles, $(grep -c ': warning:' "$C/build.log" || true) warnings"
  for h in tree oot gdr; do sed -n 's/.*"->\([A-Za-z0-9_]*\) [#$]*\([0-9-]*\) .*/\1 \2/p' "$C/layout_$h.s" >"$C/layout_$h.txt"; done
  printf '  %-30s %12s %12s %12s\n' "offsetof/sizeof/constant" tree "${OOT##*/}" gdr
  paste -d' ' "$C/layout_tree.txt" "$C/layout_oot.txt" "$C/layout_gdr.txt" |
    awk '{ mark = ($2 == $4 && $2 == $6) ? "" : "   <- differs"
           if ($1 ~ /^NVIDIA_P2P_/) { $2 = sprintf("%#010x", $2); $4 = sprintf("%#010x", $4); $6 = sprintf("%#010x", $6) }
           printf "  %-30s %12s %12s %12s%s\n", $1, $2, $4, $6, mark }'
  cmp -s "$C/layout_tree.txt" "$C/layout_oot.txt" && cmp -s "$C/layout_tree.txt" "$C/layout_gdr.txt" ||
    die "the nv-p2p.h layouts differ"
fi
[ "$ok" = 6 ] || die "not every nvidia_p2p_* symbol resolved against the tree's nvidia-p2p"
