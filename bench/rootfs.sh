#!/usr/bin/env bash
# Build (or reuse) the trixie chroot that holds the bench's tools: QEMU 11 with vfio-user-pci
# (trixie-backports; needs a newer libc than the bookworm host), and the kernel toolchain Debian itself
# builds Rust-enabled kernels with (gcc 14, rustc 1.85 + rust-src, bindgen 0.71, libclang 19), for x86_64 and,
# through gcc-aarch64-linux-gnu and QEMU's aarch64 system emulator, arm64. Prints the chroot's path. Keyed by this file's content.
. "$(dirname "$0")/lib.sh"
need_root

PKGS_MAIN="build-essential bc bison flex libelf-dev libssl-dev cpio kmod xz-utils zstd python3 rsync
  rustc rust-src rustfmt bindgen libclang-dev dwarves busybox-static ca-certificates dpkg-dev gcc-aarch64-linux-gnu"
PKGS_BPO="qemu-system-x86 qemu-system-arm"

key=$(hash_of "$0" "$REPO/bench/lib.sh")
ROOT=$GDR_CACHE/rootfs-$key
if [ -f "$ROOT/.gdr-complete" ]; then echo "$ROOT"; exit 0; fi

mirror=$(debian_mirror); [ -n "$mirror" ] || die "no Debian mirror in the host's apt sources; set DEBIAN_MIRROR"
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

tmp=$ROOT.tmp; rm -rf "$tmp"; mkdir -p "$tmp"
log "debootstrap trixie minbase -> $tmp"
debootstrap --variant=minbase trixie "$tmp" "$mirror" >"$GDR_CACHE/debootstrap.log" 2>&1 ||
  die "debootstrap failed, see $GDR_CACHE/debootstrap.log"
cat >"$tmp/etc/apt/sources.list" <<SRC
deb $mirror trixie main
deb $mirror trixie-backports main
deb-src $mirror trixie-backports main
SRC
log "installing the toolchain and QEMU into the chroot"
in_root "$tmp" apt-get update -qq
# shellcheck disable=SC2086
in_root "$tmp" apt-get install -y -qq --no-install-recommends $PKGS_MAIN >"$GDR_CACHE/apt-main.log" 2>&1 ||
  die "apt (toolchain) failed, see $GDR_CACHE/apt-main.log"
# shellcheck disable=SC2086
in_root "$tmp" apt-get install -y -qq --no-install-recommends -t trixie-backports $PKGS_BPO >"$GDR_CACHE/apt-bpo.log" 2>&1 ||
  die "apt (qemu) failed, see $GDR_CACHE/apt-bpo.log"
in_root "$tmp" apt-get clean
for q in qemu-system-x86_64 qemu-system-aarch64; do
  in_root "$tmp" $q -device help | grep -q vfio-user-pci || die "$q in the chroot lacks vfio-user-pci"
done
touch "$tmp/.gdr-complete"
rm -rf "$ROOT"; mv "$tmp" "$ROOT"
echo "$ROOT"
