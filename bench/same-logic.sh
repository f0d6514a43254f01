#!/usr/bin/env bash
# The Rust logic in the 5.10 picoevb.ko is the same source files as in the 6.18 one: compares the shared
# files (kmod/logic/, crates/) each build's rustc really compiled, from its dependency info:
#   6.18: kmod/picoevb/.picoevb_main.o.cmd (Kbuild's record of rustc's dep-info)
#   5.10: kmod/picoevb-5.10/rust/logic.d   (rustc's dep-info, written by the 5.10 Kbuild)
# Fails on any file only one build uses, or if either list is missing or has no shared file. Run after both
# modules are built in this checkout (bench/build.sh with and without GDR_KSERIES=5.10).
. "$(dirname "$0")/lib.sh"
A=$REPO/kmod/picoevb/.picoevb_main.o.cmd
B=$REPO/kmod/picoevb-5.10/rust/logic.d
for f in "$A" "$B"; do [ -f "$f" ] || die "no dependency info $f: build that module first"; done

# shared DIR FILE : the shared .rs files FILE lists (paths relative to DIR), repo-relative, sorted.
shared() {
  grep -o '[^ :\\]*\.rs' "$2" | while read -r p; do
    case $p in /*) ;; *) p=$1/$p ;; esac
    realpath -m --relative-to="$REPO" "$p"
  done | grep -E '^(kmod/logic|crates)/' | sort -u
}
a=$(shared "$REPO/kmod/picoevb" "$A")
b=$(shared "$REPO/kmod/picoevb-5.10/rust" "$B")
[ -n "$a" ] && [ -n "$b" ] || die "no shared logic file in one of the builds (6.18: $(echo $a), 5.10: $(echo $b))"
only_a=$(comm -23 <(echo "$a") <(echo "$b"))
only_b=$(comm -13 <(echo "$a") <(echo "$b"))
if [ -n "$only_a$only_b" ]; then
  [ -z "$only_a" ] || echo "only the 6.18 module compiles: $(echo $only_a)" >&2
  [ -z "$only_b" ] || echo "only the 5.10 module compiles: $(echo $only_b)" >&2
  die "the two builds' Rust logic differs (add the file to both crate roots: kmod/picoevb/picoevb_main.rs and kmod/picoevb-5.10/rust/picoevb_logic.rs)"
fi
log "same Rust logic in both builds: $(echo "$a" | wc -l) shared files"
