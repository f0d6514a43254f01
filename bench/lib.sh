# Shared helpers for the bench scripts. Source it; it sets GDR_CACHE, REPO and the helper functions.
# Everything heavy lives in $GDR_CACHE (outside the repo), in folders named by a hash of their inputs, so a
# warm run reuses them and a changed input builds a fresh one beside the old.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GDR_CACHE=${GDR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gdr}
mkdir -p "$GDR_CACHE"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# hash_of FILE... : a short content hash naming a cache entry.
hash_of() { cat "$@" | sha256sum | cut -c1-16; }

# The Debian mirror the host's apt already uses (never hard-coded here), or $DEBIAN_MIRROR.
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
  cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    sed -n -e 's#^URIs: *\([^ ]*/debian\)/* *$#\1#p' -e 's#^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*/debian\)/* .*#\2#p' |
    head -n1 || true
}

need_root() { [ "$(id -u)" = 0 ] || die "the bench needs root (debootstrap, chroot, mounts)"; }

# in_root ROOT CMD... : run CMD inside the chroot ROOT in a private mount namespace, so no mount outlives it.
# The cache and the repo are bind-mounted at the same absolute paths as outside, so paths baked into a
# kernel build tree mean the same thing on both sides.
in_root() {
  local root=$1; shift
  unshare --mount --propagation private -- /bin/bash -c '
    set -e; r=$1; cache=$2; repo=$3; shift 3
    mount --rbind /dev "$r/dev"; mount -t proc proc "$r/proc"; mount --rbind /sys "$r/sys"
    mkdir -p "$r$cache" "$r$repo"; mount --bind "$cache" "$r$cache"; mount --bind "$repo" "$r$repo"
    if [ -n "${GDR_RUN:-}" ]; then mkdir -p "$r$GDR_RUN"; mount --bind "$GDR_RUN" "$r$GDR_RUN"; fi
    cp /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
    exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      DEBIAN_FRONTEND=noninteractive "$@"' _ "$root" "$GDR_CACHE" "$REPO" "$@"
}

# step NAME CMD... : run and time one stage, for the timings the README and CI print.
step() {
  local name=$1; shift; local t0=$SECONDS
  "$@"
  log "step $name: $((SECONDS - t0)) s"
}
