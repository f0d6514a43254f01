#!/usr/bin/env bash
# Build (or reuse) the chroot that builds the arm64 guest's userspace: gcc-aarch64-linux-gnu and arm64 glibc to
# link the guest test program and the agent, and busybox-static:arm64 for the initramfs. Rust is a rustup
# toolchain with the aarch64 standard library ($CROSS_RUST, installed into $GDR_CACHE/rustup as
# bench/toolchain.sh's are, and run inside the chroot, which sees the cache at the same path): Debian's
# backports publish rustc and its arm64 standard library at different versions at times (rustc 1.97.1 beside
# libstd-rust-dev:arm64 1.96.1 in November 2026), which apt cannot install together, and the kernel's rustc
# 1.85 (bench/rootfs.sh) is too old for the guest crate. Prints the chroot's path; /etc/gdr-rust-bin in it
# names the toolchain's bin folder. Keyed by this file's content.
. "$(dirname "$0")/lib.sh"
need_root

# gcc and libc6-dev: the host linker for build scripts and proc macros.
PKGS_MAIN="gcc libc6-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross ca-certificates busybox-static:arm64"
# wrynose's Rust, which the layer builds the agent with.
CROSS_RUST=1.94.1

key=$(hash_of "$0" "$REPO/bench/lib.sh")
ROOT=$GDR_CACHE/cross-$key
export RUSTUP_HOME=$GDR_CACHE/rustup
command -v rustup >/dev/null || die "rustup not found: the arm64 guest and agent builds need it (https://rustup.rs)"
rustup toolchain install "$CROSS_RUST" --profile minimal --target aarch64-unknown-linux-gnu --no-self-update \
  >/dev/null 2>&1 || die "rustup could not install $CROSS_RUST with the aarch64-unknown-linux-gnu target"
bin=$(dirname "$(rustup which --toolchain "$CROSS_RUST" rustc)") || die "no rustc in the $CROSS_RUST toolchain"
if [ -f "$ROOT/.gdr-complete" ]; then echo "$ROOT"; exit 0; fi

mirror=$(debian_mirror); [ -n "$mirror" ] || die "no Debian mirror in the host's apt sources; set DEBIAN_MIRROR"
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

tmp=$ROOT.tmp; rm -rf "$tmp"; mkdir -p "$tmp"
log "debootstrap trixie minbase -> $tmp (arm64 guest toolchain)"
debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$GDR_CACHE/debootstrap-cross.log" 2>&1 ||
  die "debootstrap failed, see $GDR_CACHE/debootstrap-cross.log"
cat >"$tmp/etc/apt/sources.list" <<SRC
deb $mirror trixie main
SRC
in_root "$tmp" dpkg --add-architecture arm64
in_root "$tmp" apt-get update -qq
# shellcheck disable=SC2086
in_root "$tmp" apt-get install -y -qq --no-install-recommends $PKGS_MAIN >"$GDR_CACHE/apt-cross.log" 2>&1 ||
  die "apt (cross toolchain) failed, see $GDR_CACHE/apt-cross.log"
in_root "$tmp" apt-get clean
echo "$bin" >"$tmp/etc/gdr-rust-bin"
in_root "$tmp" "$bin/rustc" --print target-libdir --target aarch64-unknown-linux-gnu >/dev/null ||
  die "the $CROSS_RUST toolchain does not run in the cross chroot"
touch "$tmp/.gdr-complete"
rm -rf "$ROOT"; mv "$tmp" "$ROOT"
echo "$ROOT"
