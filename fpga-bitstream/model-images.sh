#!/usr/bin/env bash
# Writes the FPGA model's "bitstreams" and their manifest.json, from the same values a Vivado build uses
# (VERSION, the git commit), in the schema build.sh writes, so the agent reads both alike.
#
#   model-images.sh [--golden-version X.Y.Z] OUTDIR
#
# OUTDIR gets:
#   gdr-picoevb-<version>-model-update.img   the design the agent programs (role model-update)
#   gdr-picoevb-<golden>-model-golden.img    the fallback design (role model-golden; default 0.9.0): start
#                                            the model with --image/--golden on it to test reprogramming
#   gdr-picoevb-<version>-model-corrupt.img  the update with a bad checksum (role model-corrupt)
#   manifest.json                            id_block = the update's, golden = the golden's
# Needs the model binary: PICOEVB_MODEL (default target/release, then target/debug picoevb-model).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
die() { echo "model-images: error: $*" >&2; exit 1; }

golden_version=0.9.0 out=
while [[ $# -gt 0 ]]; do
    case $1 in
        --golden-version) golden_version=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) die "unknown option $1" ;;
        *) [[ -z $out ]] || die "one OUTDIR only"; out=$1; shift ;;
    esac
done
[[ -n $out ]] || die "usage: model-images.sh [--golden-version X.Y.Z] OUTDIR"

model=${PICOEVB_MODEL:-}
for c in "$root/target/release/picoevb-model" "$root/target/debug/picoevb-model"; do
    [[ -n $model ]] || { [[ -x $c ]] && model=$c; }
done
[[ -n $model && -x $model ]] || die "picoevb-model not built (cargo build -p picoevb-model) and PICOEVB_MODEL unset"

version=$(tr -d ' \n' <"$here/VERSION")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION '$version' is not X.Y.Z"
git_hash=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo 0000000000000000000000000000000000000000)
# Reproducible: the commit's time, not the clock.
build_time=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)
golden_hash=00000001

mkdir -p "$out"
update=gdr-picoevb-$version-model-update.img
golden=gdr-picoevb-$golden_version-model-golden.img
corrupt=gdr-picoevb-$version-model-corrupt.img
"$model" make-image --version "$version" --build-hash "$git_hash" --build-time "$build_time" >"$out/$update"
"$model" make-image --version "$golden_version" --build-hash "$golden_hash" --build-time "$build_time" >"$out/$golden"
"$model" make-image --version "$version" --build-hash "$git_hash" --build-time "$build_time" --corrupt >"$out/$corrupt"

word() { sed -n "s/^$1 //p" "$out/$2"; }
entry() {
    printf '    {"name": "%s", "role": "%s", "size": %s, "sha256": "%s"}' \
        "$1" "$2" "$(stat -c %s "$out/$1")" "$(sha256sum "$out/$1" | cut -d' ' -f1)"
}
cat >"$out/manifest.json" <<EOF2
{
  "schema": 1,
  "design": "gdr-picoevb",
  "version": "$version",
  "git_hash": "$git_hash",
  "tool": "picoevb-model",
  "id_block": {
    "design_version": "$(word design_version "$update")",
    "build_hash": "$(word build_hash "$update")",
    "build_time": "$(word build_time "$update")"
  },
  "golden": {
    "design_version": "$(word design_version "$golden")",
    "build_hash": "$(word build_hash "$golden")"
  },
  "files": [
$(entry "$update" model-update),
$(entry "$golden" model-golden),
$(entry "$corrupt" model-corrupt)
  ]
}
EOF2
echo "model-images: $out/manifest.json ($version, golden $golden_version)"
