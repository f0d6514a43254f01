#!/usr/bin/env bash
# Format the kernel module's Rust with the kernel's own rustfmt configuration and the kernel's rustfmt
# (from the bench chroot). --check only reports. It also reaches the shared files included through #[path];
# the kernel style and cargo fmt agree on those, so the two never fight.
. "$(dirname "$0")/lib.sh"
need_root
ROOT=$("$REPO/bench/rootfs.sh")
# (`|| true`: under pipefail a failed ls would end the script before the message below.)
CONF=$(ls -d "$GDR_CACHE"/src/linux-*/.rustfmt.toml 2>/dev/null | head -n1 || true)
[ -n "$CONF" ] || die "no kernel source in $GDR_CACHE/src yet: run bench/kernel.sh first"
mode=${1:-}
files=$(cd "$REPO" && git ls-files -co --exclude-standard 'kmod/*/*.rs' 'kmod/*/rust/*.rs')
in_root "$ROOT" bash -c "cd '$REPO' && for f in $(echo $files); do
  rustfmt --config-path '$CONF' --edition 2021 ${mode:+--check} \"\$f\" || exit 1
done"
