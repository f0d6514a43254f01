#!/usr/bin/env bash
# Build the out-of-tree kernel modules against the bench kernel, in the chroot whose rustc built that kernel
# (a Rust .ko links against the exact kernel crate build). Prints the path of picoevb.ko.
# Usage: kmod.sh KDIR [extra make args]
. "$(dirname "$0")/lib.sh"
need_root
KDIR=${1:?usage: kmod.sh KDIR}; shift
ROOT=$("$REPO/bench/rootfs.sh")
M=$REPO/kmod/picoevb
in_root "$ROOT" bash -c ". '$KDIR/env.sh' && make -s -C '$KDIR' M='$M' $* modules" >&2 ||
  die "kernel module build failed"
echo "$M/picoevb.ko"
