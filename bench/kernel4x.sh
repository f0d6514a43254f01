#!/usr/bin/env bash
# Build (or reuse) a Linux 4.9 or 4.14 guest kernel for the bench (issue 23: JetPack 4 is 4.9, DRIVE OS 5.2 on
# Drive AGX Xavier is 4.14) from a kernel tree given as the argument:
#   ARCH=x86_64 bench/kernel4x.sh /path/to/linux-4.14.y
# These sources are not in the package registries: take a mainline stable tree (kernel.org's tarball or a git
# checkout of v4.14.y / v4.9.y) and never commit it. Configured from allnoconfig + bench/kernel/<arch>-4.x.config
# (the 5.10 guest's debug options that these kernels have), built in the bench's chroot. Prints the build
# folder (KDIR for kmod/picoevb-5.10 built with bench/kmod4x.sh). Keyed by the tree's version, the fragment,
# this script and the chroot's C toolchain. Not run by CI.
. "$(dirname "$0")/lib.sh"
need_root
SRC=$(realpath "${1:?usage: bench/kernel4x.sh KERNEL_TREE}")
ARCH=${ARCH:-x86_64}
FRAG=$REPO/bench/kernel/$ARCH-4.x.config
[ -f "$FRAG" ] || die "no 4.x kernel config fragment for $ARCH ($FRAG)"
[ -f "$SRC/Makefile" ] || die "$SRC is not a kernel tree"
KVER=$(make -s -C "$SRC" kernelversion 2>/dev/null) || die "cannot read the kernel version of $SRC"
case $KVER in 4.9.* | 4.14.*) ;; *) die "$SRC is Linux $KVER; this script builds 4.9 and 4.14" ;; esac

ROOT=$("$REPO/bench/rootfs.sh")
toolchain=$(in_root "$ROOT" bash -c 'gcc --version | head -1; dpkg-query -W binutils')
key=$(hash_of "$0" "$FRAG" <(echo "$KVER $toolchain"))
OUT=$GDR_CACHE/kernel$KVER-$ARCH-$key
if [ -f "$OUT/.gdr-complete" ]; then echo "$OUT"; exit 0; fi

# One kernel build at a time on this machine (two cores): a second caller waits, then reuses the result.
exec 9>"$GDR_CACHE/kernel-build.lock"; flock 9
if [ -f "$OUT/.gdr-complete" ]; then echo "$OUT"; exit 0; fi

case $ARCH in
  x86_64) KARCH=x86; CROSS= ; IMAGE=bzImage ;;
  arm64) KARCH=arm64; CROSS=aarch64-linux-gnu- ; IMAGE=Image ;;
  *) die "unsupported ARCH $ARCH" ;;
esac
rm -rf "$OUT"; mkdir -p "$OUT"
# gcc 14 is years newer than these trees: the errors it added (C99 rules the gnu89 kernel code may break)
# stay warnings in the kernel's objects; the host tools build with the kernel's own flags (docs/kernels-4x.md
# §4). Modules built against this folder get the same KCFLAGS: bench/kmod510.sh checks theirs.
cat >"$OUT/env.sh" <<ENV
export ARCH=$KARCH CROSS_COMPILE=$CROSS
export KCFLAGS="-Wno-error -Wno-error=implicit-function-declaration -Wno-error=incompatible-pointer-types -Wno-error=int-conversion"
ENV
kmake() { in_root "$ROOT" bash -c ". '$OUT/env.sh' && make -s -C '$SRC' O='$OUT' $*"; }
log "configuring $ARCH $KVER kernel in $OUT"
kmake allnoconfig >/dev/null
in_root "$ROOT" bash -c ". '$OUT/env.sh' && cd '$SRC' && scripts/kconfig/merge_config.sh -m -O '$OUT' '$OUT/.config' '$FRAG'" >"$OUT/merge.log"
kmake olddefconfig
missing=$(grep -E '^CONFIG_[A-Z0-9_]+=[ym]' "$FRAG" | while IFS= read -r l; do grep -qx "$l" "$OUT/.config" || echo "$l"; done)
[ -z "$missing" ] || die "kernel config did not take: $missing"
log "building $ARCH $KVER kernel ($IMAGE, -j$(nproc)); a cold build takes a while"
t0=$SECONDS
kmake -j"$(nproc)" "$IMAGE" modules >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log" >&2; die "$KVER kernel build failed, see $OUT/build.log"; }
log "$KVER kernel built in $((SECONDS - t0)) s"
touch "$OUT/.gdr-complete"
echo "$OUT"
