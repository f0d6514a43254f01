#!/usr/bin/env bash
# The driver on Linux 4.14 (DRIVE OS 5.2, Drive AGX Xavier) and 4.9 (JetPack 4): the `k4x` rows of
# bench/matrix, on kernel trees the caller gives (these sources are not in the package registries; never
# commit them):
#   GDR_KTREE_4_14=/src/linux-4.14.y GDR_KTREE_4_9=/src/linux-4.9.y bench/kernels4x.sh
# A series whose tree is not given is skipped. Each series' kernel is built by bench/kernel4x.sh (x86_64,
# arm64) with the 5.10 guest's debug options those kernels have; the modules are the 5.10 glue's
# (bench/kmod510.sh). Closes with "N passed, M failed". Not run by CI.
. "$(dirname "$0")/lib.sh"
need_root
. "$REPO/bench/runs.sh"
[ -n "${GDR_KTREE_4_14:-}${GDR_KTREE_4_9:-}" ] || die "give GDR_KTREE_4_14 and/or GDR_KTREE_4_9 (kernel trees)"
[ -z "${GDR_KTREE:-}" ] || die "GDR_KTREE would serve both series here: give GDR_KTREE_4_14 / GDR_KTREE_4_9"
run_matrix k4x
finish
