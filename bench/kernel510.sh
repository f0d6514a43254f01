#!/usr/bin/env bash
# Build (or reuse) the bench's Linux 5.10 guest kernel, the kernel Jetson AGX Xavier runs (L4T R35 is
# linux-tegra 5.10.216): Debian bullseye's linux 5.10 source, configured from allnoconfig +
# bench/kernel/<arch>-5.10.config (the same debug options as the 6.18 guest; no CONFIG_RUST, which 5.10 lacks),
# built in the bench's trixie chroot. Prints the build folder (KDIR for kmod/picoevb-5.10). Keyed by the
# kernel version, the fragment, this script and the chroot's C toolchain. Separate from bench/kernel.sh so that
# the 6.18 kernel's cache key does not move.
. "$(dirname "$0")/lib.sh"
need_root
ARCH=${ARCH:-x86_64}
# bullseye's last point release (11.11); kept in the archive, unlike bullseye-security's moving version.
KVER=5.10.223
KDEB=$KVER-1
FRAG=$REPO/bench/kernel/$ARCH-5.10.config
[ -f "$FRAG" ] || die "no 5.10 kernel config fragment for $ARCH ($FRAG)"

ROOT=$("$REPO/bench/rootfs.sh")
toolchain=$(in_root "$ROOT" bash -c 'gcc --version | head -1; dpkg-query -W binutils')
key=$(hash_of "$0" "$FRAG" <(echo "$KDEB $toolchain"))
OUT=$GDR_CACHE/kernel510-$ARCH-$key
if [ -f "$OUT/.gdr-complete" ]; then echo "$OUT"; exit 0; fi

# The source is fetched outside the build lock (network, not CPU) under a lock of its own.
SRC=$GDR_CACHE/src/linux-$KVER
if [ ! -f "$SRC/.gdr-complete" ]; then
  exec 8>"$GDR_CACHE/src-linux-$KVER.lock"; flock 8
  if [ ! -f "$SRC/.gdr-complete" ]; then
    log "fetching Debian's linux $KDEB source (bullseye)"
    apt=$GDR_CACHE/apt-bullseye
    mirror=$(debian_mirror); [ -n "$mirror" ] || die "no Debian mirror in the host's apt sources; set DEBIAN_MIRROR"
    mkdir -p "$apt/sources.d" "$apt/lists/partial" "$GDR_CACHE/src"
    echo "deb-src $mirror bullseye main" >"$apt/sources.d/bullseye.list"
    O="-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=$apt/sources.d -o Dir::State::Lists=$apt/lists"
    in_root "$ROOT" bash -c "apt-get $O update -qq && cd '$GDR_CACHE/src' &&
      apt-get $O source --download-only linux=$KDEB" >"$GDR_CACHE/src/apt-linux-$KVER.log" 2>&1 ||
      die "could not download Debian's linux $KDEB source, see $GDR_CACHE/src/apt-linux-$KVER.log"
    [ -f "$GDR_CACHE/src/linux_$KVER.orig.tar.xz" ] || die "no linux_$KVER.orig.tar.xz after apt-get source"
    rm -rf "$SRC"; tar -C "$GDR_CACHE/src" -xf "$GDR_CACHE/src/linux_$KVER.orig.tar.xz"
    touch "$SRC/.gdr-complete"
  fi
  exec 8>&-
fi

# One kernel build at a time on this machine (two cores): a second caller waits, then reuses the result.
exec 9>"$GDR_CACHE/kernel-build.lock"; flock 9
if [ -f "$OUT/.gdr-complete" ]; then echo "$OUT"; exit 0; fi

case $ARCH in
  x86_64) KARCH=x86; CROSS= ; IMAGE=bzImage ;;
  arm64) KARCH=arm64; CROSS=aarch64-linux-gnu- ; IMAGE=Image ;;
  *) die "unsupported ARCH $ARCH" ;;
esac
rm -rf "$OUT"; mkdir -p "$OUT"
# The same env.sh shape as bench/kernel.sh's, so bench/kmod.sh's arch detection works on both. 5.10 predates
# gcc 14's stricter defaults and warnings; these keep them to warnings (the source is Debian's, unpatched).
cat >"$OUT/env.sh" <<ENV
export ARCH=$KARCH CROSS_COMPILE=$CROSS
export KCFLAGS=-Wno-error
ENV
kmake() { in_root "$ROOT" bash -c ". '$OUT/env.sh' && make -s -C '$SRC' O='$OUT' $*"; }
log "configuring $ARCH 5.10 kernel in $OUT"
kmake allnoconfig >/dev/null
in_root "$ROOT" bash -c ". '$OUT/env.sh' && cd '$SRC' && scripts/kconfig/merge_config.sh -m -O '$OUT' '$OUT/.config' '$FRAG'" >"$OUT/merge.log"
kmake olddefconfig
missing=$(grep -E '^CONFIG_[A-Z0-9_]+=[ym]' "$FRAG" | while IFS= read -r l; do grep -qx "$l" "$OUT/.config" || echo "$l"; done)
[ -z "$missing" ] || die "kernel config did not take: $missing"
log "building $ARCH 5.10 kernel ($IMAGE, -j$(nproc)); a cold build takes a while"
t0=$SECONDS
kmake -j"$(nproc)" "$IMAGE" modules >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log" >&2; die "5.10 kernel build failed, see $OUT/build.log"; }
log "5.10 kernel built in $((SECONDS - t0)) s"
touch "$OUT/.gdr-complete"
echo "$OUT"
