#!/usr/bin/env bash
# Build (or reuse) the bench's guest kernel: Debian's Linux 6.18 source with CONFIG_RUST=y, configured from
# allnoconfig + bench/kernel/<arch>.config, built in the trixie chroot with Debian's own Rust kernel toolchain
# (rustc 1.85, bindgen 0.71; see docs/bench.md for why). Prints the build folder (KDIR for out-of-tree
# modules). Keyed by the kernel version, the config fragment, this script and the chroot.
. "$(dirname "$0")/lib.sh"
need_root
ARCH=${ARCH:-x86_64}
KVER=6.18.15
KDEB=$KVER-1~bpo13+1
FRAG=$REPO/bench/kernel/$ARCH.config
[ -f "$FRAG" ] || die "no kernel config fragment for $ARCH ($FRAG)"

ROOT=$("$REPO/bench/rootfs.sh")
# Keyed by what the build really depends on: the toolchain versions in the chroot, not the chroot script.
toolchain=$(in_root "$ROOT" bash -c 'gcc --version | head -1; rustc --version; bindgen --version;
  dpkg-query -W rust-src libclang-dev binutils')
key=$(hash_of "$0" "$FRAG" <(echo "$KDEB $toolchain"))
OUT=$GDR_CACHE/kernel-$ARCH-$key
if [ -f "$OUT/.gdr-complete" ]; then echo "$OUT"; exit 0; fi
# One kernel build at a time on this machine (two cores): a second caller waits, then reuses the result.
exec 9>"$GDR_CACHE/kernel-build.lock"; flock 9
if [ -f "$OUT/.gdr-complete" ]; then echo "$OUT"; exit 0; fi

SRC=$GDR_CACHE/src/linux-$KVER
if [ ! -f "$SRC/.gdr-complete" ]; then
  log "fetching Debian's linux $KDEB source"
  mkdir -p "$GDR_CACHE/src"
  # Only the orig tarball is published for the backports versions; the .dsc fetch fails, which is fine.
  in_root "$ROOT" bash -c "cd '$GDR_CACHE/src' && apt-get source --download-only linux=$KDEB >/dev/null 2>&1 || true"
  [ -f "$GDR_CACHE/src/linux_$KVER.orig.tar.xz" ] || die "could not download linux_$KVER.orig.tar.xz"
  rm -rf "$SRC"; tar -C "$GDR_CACHE/src" -xf "$GDR_CACHE/src/linux_$KVER.orig.tar.xz"
  touch "$SRC/.gdr-complete"
fi

case $ARCH in
  x86_64) KARCH=x86; CROSS= ; IMAGE=bzImage ;;
  arm64) KARCH=arm64; CROSS=aarch64-linux-gnu- ; IMAGE=Image ;;
  *) die "unsupported ARCH $ARCH" ;;
esac
rm -rf "$OUT"; mkdir -p "$OUT"
cat >"$OUT/env.sh" <<ENV
export ARCH=$KARCH CROSS_COMPILE=$CROSS
export RUST_LIB_SRC=\$(ls -d /usr/src/rustc-*/library | head -n1)
export LIBCLANG_PATH=\$(ls -d /usr/lib/llvm-*/lib | tail -n1)
ENV
kmake() { in_root "$ROOT" bash -c ". '$OUT/env.sh' && make -s -C '$SRC' O='$OUT' $*"; }
log "configuring $ARCH kernel in $OUT"
kmake allnoconfig >/dev/null
in_root "$ROOT" bash -c ". '$OUT/env.sh' && cd '$SRC' && scripts/kconfig/merge_config.sh -m -O '$OUT' '$OUT/.config' '$FRAG'" >"$OUT/merge.log"
kmake olddefconfig
# merge_config only warns about options that did not stick; a lean config must fail loudly instead.
missing=$(grep -E '^CONFIG_[A-Z0-9_]+=[ym]' "$FRAG" | while IFS= read -r l; do grep -qx "$l" "$OUT/.config" || echo "$l"; done)
[ -z "$missing" ] || die "kernel config did not take: $missing"
log "building $ARCH kernel ($IMAGE, -j$(nproc)); a cold build takes a while"
kmake -j"$(nproc)" "$IMAGE" modules >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log" >&2; die "kernel build failed"; }
touch "$OUT/.gdr-complete"
echo "$OUT"
