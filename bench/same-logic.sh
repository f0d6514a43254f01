#!/usr/bin/env bash
# The Rust logic in the 5.10 modules is the same source files as in the 6.18 ones: compares the shared
# files each build's rustc really compiled, from its dependency info, for both modules:
#   picoevb.ko     6.18 kmod/picoevb/.picoevb_main.o.cmd (Kbuild's record of rustc's dep-info)
#                  5.10 kmod/picoevb-5.10/rust/logic.d   (rustc's dep-info, written by rust.mk)
#                  shared: kmod/logic/, crates/
#   gdr_nv_p2p.ko  6.18 kmod/nvidia-p2p/.gdr_nv_p2p_main.o.cmd, 5.10 kmod/nvidia-p2p-5.10/rust/logic.d
#                  shared: kmod/nvidia-p2p/ (logic.rs, surface.rs)
# Fails on any file only one build uses, or if a list is missing or has no shared file. Run after both
# series are built in this checkout (bench/build.sh with and without GDR_KSERIES=5.10).
. "$(dirname "$0")/lib.sh"

# shared DIR FILE RE : the .rs files FILE lists (paths relative to DIR) under RE, repo-relative, sorted;
# never a crate root (the 6.18 one lives beside the provider's shared files).
shared() {
  grep -o '[^ :\\]*\.rs' "$2" | while read -r p; do
    case $p in /*) ;; *) p=$1/$p ;; esac
    realpath -m --relative-to="$REPO" "$p"
  done | grep -E "$3" | grep -vE '_main\.rs$' | sort -u
}

# same NAME A B RE ROOTS : A (6.18) and B (5.10) compile the same files under RE; ROOTS names the crate roots.
same() {
  local name=$1 A=$REPO/$2 B=$REPO/$3 re=$4 roots=$5 a b only_a only_b
  for f in "$A" "$B"; do [ -f "$f" ] || die "no dependency info $f: build that module first"; done
  a=$(shared "$(dirname "$A")" "$A" "$re")
  b=$(shared "$(dirname "$B")" "$B" "$re")
  [ -n "$a" ] && [ -n "$b" ] || die "$name: no shared logic file in one of the builds (6.18: $(echo $a), 5.10: $(echo $b))"
  only_a=$(comm -23 <(echo "$a") <(echo "$b"))
  only_b=$(comm -13 <(echo "$a") <(echo "$b"))
  if [ -n "$only_a$only_b" ]; then
    [ -z "$only_a" ] || echo "$name: only the 6.18 module compiles: $(echo $only_a)" >&2
    [ -z "$only_b" ] || echo "$name: only the 5.10 module compiles: $(echo $only_b)" >&2
    die "$name: the two builds' Rust logic differs (add the file to both crate roots: $roots)"
  fi
  log "$name: same Rust logic in both builds: $(echo "$a" | wc -l) shared files"
}

same picoevb.ko kmod/picoevb/.picoevb_main.o.cmd kmod/picoevb-5.10/rust/logic.d '^(kmod/logic|crates)/' \
  "kmod/picoevb/picoevb_main.rs and kmod/picoevb-5.10/rust/picoevb_logic.rs"
same gdr_nv_p2p.ko kmod/nvidia-p2p/.gdr_nv_p2p_main.o.cmd kmod/nvidia-p2p-5.10/rust/logic.d '^kmod/nvidia-p2p/' \
  "kmod/nvidia-p2p/gdr_nv_p2p_main.rs and kmod/nvidia-p2p-5.10/rust/gdr_nv_p2p_logic.rs"
