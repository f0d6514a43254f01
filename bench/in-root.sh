#!/usr/bin/env bash
# in-root.sh ROOT CMD... : run CMD in the bench chroot ROOT (see in_root in lib.sh). The cache, the repo and
# $GDR_RUN (if set) appear at the same paths inside. Used by the Rust harness to start QEMU.
. "$(dirname "$0")/lib.sh"
[ $# -ge 2 ] || die "usage: in-root.sh ROOT CMD..."
export GDR_RUN=${GDR_RUN:-}
in_root "$@"
