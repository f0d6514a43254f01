#!/usr/bin/env bash
# Build (or reuse) the chroot that builds the arm64 guest's userspace: Debian's Rust from trixie-backports with
# its arm64 standard library (dpkg multiarch), gcc-aarch64-linux-gnu and arm64 glibc to link the guest test
# program statically, and busybox-static:arm64 for the initramfs. rustup cannot add targets offline, and the
# kernel's rustc 1.85 (bench/rootfs.sh, pinned for the kernel build) is too old for the guest crate, so this
# toolchain lives in its own chroot. Prints the chroot's path. Keyed by this file's content.
. "$(dirname "$0")/lib.sh"
need_root

PKGS_MAIN="gcc-aarch64-linux-gnu libc6-dev-arm64-cross ca-certificates busybox-static:arm64"
PKGS_BPO="rustc cargo libstd-rust-dev:arm64"

key=$(hash_of "$0" "$REPO/bench/lib.sh")
ROOT=$GDR_CACHE/cross-$key
if [ -f "$ROOT/.gdr-complete" ]; then echo "$ROOT"; exit 0; fi

mirror=$(debian_mirror); [ -n "$mirror" ] || die "no Debian mirror in the host's apt sources; set DEBIAN_MIRROR"
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

tmp=$ROOT.tmp; rm -rf "$tmp"; mkdir -p "$tmp"
log "debootstrap trixie minbase -> $tmp (arm64 guest toolchain)"
debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$GDR_CACHE/debootstrap-cross.log" 2>&1 ||
  die "debootstrap failed, see $GDR_CACHE/debootstrap-cross.log"
cat >"$tmp/etc/apt/sources.list" <<SRC
deb $mirror trixie main
deb $mirror trixie-backports main
SRC
in_root "$tmp" dpkg --add-architecture arm64
in_root "$tmp" apt-get update -qq
# shellcheck disable=SC2086
in_root "$tmp" apt-get install -y -qq --no-install-recommends $PKGS_MAIN >"$GDR_CACHE/apt-cross.log" 2>&1 ||
  die "apt (cross toolchain) failed, see $GDR_CACHE/apt-cross.log"
# shellcheck disable=SC2086
in_root "$tmp" apt-get install -y -qq --no-install-recommends -t trixie-backports $PKGS_BPO >>"$GDR_CACHE/apt-cross.log" 2>&1 ||
  die "apt (Rust for arm64) failed, see $GDR_CACHE/apt-cross.log"
in_root "$tmp" apt-get clean
[ -d "$tmp/usr/lib/rustlib/aarch64-unknown-linux-gnu/lib" ] || die "no arm64 Rust standard library in the cross chroot"
touch "$tmp/.gdr-complete"
rm -rf "$ROOT"; mv "$tmp" "$ROOT"
echo "$ROOT"
