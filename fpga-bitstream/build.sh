#!/usr/bin/env bash
# Builds the gdr PicoEVB bitstream with Vivado (non-project batch flow) and writes a manifest.
#
#   fpga-bitstream/build.sh [--out DIR] [--work DIR] [--jobs N]
#
# Needs `vivado` on PATH (source Vivado's settings64.sh first). Outputs, in DIR (default
# fpga-bitstream/build/out): the .bit/.bin/.mcs files listed in build.tcl and manifest.json (design, version,
# git commit, build date, tool version, flash layout, sha256 of every output). Work files go to build/work.
#
# The version comes from fpga-bitstream/VERSION only. SOURCE_DATE_EPOCH, when set, fixes the build time.
set -euo pipefail

# Vivado first, and with shell builtins only: this must work (and fail clearly) with an empty PATH.
if ! command -v vivado >/dev/null 2>&1; then
    echo "build.sh: error: 'vivado' was not found on PATH." >&2
    echo "  Building the PicoEVB bitstream needs AMD/Xilinx Vivado with Artix-7 support (the reference design" >&2
    echo "  used 2018.3). Load its environment first, e.g.:" >&2
    echo "    source /tools/Xilinx/Vivado/2018.3/settings64.sh" >&2
    echo "  Everything that can be checked without Vivado runs in fpga-bitstream/sim/run.sh." >&2
    exit 2
fi

src=${BASH_SOURCE[0]}
[[ $src == */* ]] || src=./$src
here=$(cd "${src%/*}" && pwd)

out=$here/build/out
work=$here/build/work
jobs=2
while [[ $# -gt 0 ]]; do
    case $1 in
        --out) out=$2; shift 2 ;;
        --work) work=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$here/build.sh"; exit 0 ;;
        *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
    esac
done

die() { echo "build.sh: error: $*" >&2; exit 1; }

version=$(tr -d ' \t\r\n' <"$here/VERSION")
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION '$version' is not MAJOR.MINOR.PATCH"

if git_hash=$(git -C "$here" rev-parse HEAD 2>/dev/null); then
    if [[ -n $(git -C "$here" status --porcelain -- . ../crates/picoevb-regs 2>/dev/null) ]]; then
        git_dirty=true
        echo "build.sh: warning: uncommitted changes under fpga-bitstream/ or crates/picoevb-regs/:" \
             "the ID block's BUILD_HASH will name a commit that does not contain them" >&2
    else
        git_dirty=false
    fi
else
    git_hash=0000000000000000000000000000000000000000
    git_dirty=true
    echo "build.sh: warning: not a git checkout: BUILD_HASH will be 0" >&2
fi
build_time=${SOURCE_DATE_EPOCH:-$(date -u +%s)}
[[ $build_time =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH '$build_time' is not a Unix time"
build_date=$(date -u -d "@$build_time" +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$out" "$work"
out=$(cd "$out" && pwd)
work=$(cd "$work" && pwd)
rm -f "$out"/gdr-picoevb-* "$out"/build-info.env "$out"/manifest.json

echo "build.sh: gdr-picoevb $version, commit ${git_hash:0:12}$([[ $git_dirty == true ]] && echo ' (dirty)'), $build_date"
(
    cd "$work"
    GDR_VERSION=$version GDR_GIT_HASH=$git_hash GDR_BUILD_TIME=$build_time GDR_OUT=$out GDR_WORK=$work \
    GDR_JOBS=$jobs vivado -mode batch -nojournal -log "$work/vivado.log" -source "$here/build.tcl"
) || die "Vivado failed: see $work/vivado.log"

# ---- manifest ------------------------------------------------------------------------------------------
declare -A info=()
while IFS='=' read -r key value; do
    [[ $key =~ ^[A-Z0-9_]+$ ]] && info[$key]=$value
done <"$out/build-info.env"
for key in TOOL TOOL_VERSION PART VERSION_WORD BUILD_HASH_WORD BUILD_TIME_WORD PCI_VENDOR PCI_DEVICE \
           PCI_SUBSYSTEM_VENDOR PCI_SUBSYSTEM PCI_CLASS; do
    [[ -n ${info[$key]:-} ]] || die "build-info.env lacks $key"
done

# shellcheck source=flash-layout.conf
source "$here/flash-layout.conf"
regs=$here/rtl/gdr_id_regs.vh
define() { sed -n "s/^\`define $1 *\\([^ ]*\\).*/\\1/p" "$regs" | sed "s/32'h/0x/; s/_//g"; }

# gdr-picoevb-1.0.0-update.bit -> update-bit
role_of() { local r=${1#gdr-picoevb-"$version"-}; echo "${r/./-}"; }

files_json=
for path in "$out"/gdr-picoevb-*; do
    file=${path##*/}
    sum=$(sha256sum "$path" | cut -d' ' -f1)
    size=$(stat -c %s "$path")
    files_json+="${files_json:+,}
    {\"name\": \"$file\", \"role\": \"$(role_of "$file")\", \"size\": $size, \"sha256\": \"$sum\"}"
done
[[ -n $files_json ]] || die "Vivado produced no output files in $out"

cat >"$out/manifest.json" <<EOF
{
  "schema": 1,
  "design": "gdr-picoevb",
  "version": "$version",
  "git_hash": "$git_hash",
  "git_dirty": $git_dirty,
  "build_date": "$build_date",
  "tool": "${info[TOOL]}",
  "tool_version": "${info[TOOL_VERSION]}",
  "tool_build": "${info[TOOL_BUILD]:-}",
  "part": "${info[PART]}",
  "timing": {"wns_ns": "${info[WNS_NS]:-}", "whs_ns": "${info[WHS_NS]:-}"},
  "id_block": {
    "bar0_offset": "$(define GDR_ID_BASE)",
    "magic": "$(define GDR_ID_MAGIC)",
    "layout": "$(define GDR_ID_LAYOUT_VERSION)",
    "design_version": "${info[VERSION_WORD]}",
    "build_hash": "${info[BUILD_HASH_WORD]}",
    "build_time": "${info[BUILD_TIME_WORD]}",
    "caps": "$(define GDR_ID_CAPS_PICOEVB)",
    "ram_size": "$(define GDR_ID_RAM_SIZE)"
  },
  "pci": {
    "vendor": "${info[PCI_VENDOR]}",
    "device": "${info[PCI_DEVICE]}",
    "subsystem_vendor": "${info[PCI_SUBSYSTEM_VENDOR]}",
    "subsystem": "${info[PCI_SUBSYSTEM]}",
    "class": "${info[PCI_CLASS]}"
  },
  "flash": {
    "part": "$FLASH_PART",
    "size": "$FLASH_SIZE",
    "golden_offset": "$GOLDEN_OFFSET",
    "update_offset": "$UPDATE_OFFSET",
    "slot_size": "$SLOT_SIZE"
  },
  "files": [$files_json
  ]
}
EOF
echo "build.sh: done: $out/manifest.json"
