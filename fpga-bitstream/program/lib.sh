# shellcheck shell=bash
# Shared by the PicoEVB programming scripts in this directory: finding OpenOCD and the jtagspi proxy,
# checking images before they go anywhere near the card, and running OpenOCD with picoevb.cfg.
#
# Environment (all optional):
#   GDR_OPENOCD         OpenOCD binary (default: openocd on PATH), >= 0.11
#   GDR_JTAGSPI_PROXY   jtagspi proxy bitstream for the XC7A50T (see docs/fpga.md, "Programming a card")
#   GDR_JTAG_KHZ        adapter speed request (default 10000: the FT230X bit-bang maximum is used)
#   GDR_JTAG_SERIAL     USB serial number of the FT230X, when several cards are attached

GDR_PROGRAM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
GDR_FPGA_DIR=$(cd "$GDR_PROGRAM_DIR/.." && pwd)
# shellcheck source=../flash-layout.conf
source "$GDR_FPGA_DIR/flash-layout.conf"

# XC7A50T JTAG IDCODE without the revision nibble (the bitstream's IDCODE check uses the same value).
GDR_IDCODE_TAIL=362c093

# Exit codes shared by the scripts.
GDR_EXIT_USAGE=1 GDR_EXIT_REFUSED=2 GDR_EXIT_ENV=3 GDR_EXIT_JTAG=4

gdr_die() { local code=$1; shift; echo "$GDR_TOOL: error: $*" >&2; exit "$code"; }
gdr_note() { echo "$GDR_TOOL: $*" >&2; }

gdr_find_openocd() {
    GDR_OPENOCD_BIN=${GDR_OPENOCD:-$(command -v openocd || true)}
    [[ -n $GDR_OPENOCD_BIN && -x $GDR_OPENOCD_BIN ]] ||
        gdr_die "$GDR_EXIT_ENV" "OpenOCD not found (install openocd >= 0.11 or set GDR_OPENOCD)"
    local text major minor
    text=$("$GDR_OPENOCD_BIN" --version 2>&1 || true)
    [[ $text =~ Open\ On-Chip\ Debugger\ ([0-9]+)\.([0-9]+) ]] ||
        gdr_die "$GDR_EXIT_ENV" "cannot tell the version of $GDR_OPENOCD_BIN"
    major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
    if (( major == 0 && minor < 11 )); then
        gdr_die "$GDR_EXIT_ENV" "OpenOCD $major.$minor is too old: the ft232r 'adapter driver' syntax needs >= 0.11"
    fi
}

gdr_find_proxy() {
    local candidates=("${GDR_JTAGSPI_PROXY:-}" "$GDR_PROGRAM_DIR/bscan_spi_xc7a50t.bit"
                      /usr/share/gdr/bscan_spi_xc7a50t.bit /usr/local/share/gdr/bscan_spi_xc7a50t.bit)
    local c
    for c in "${candidates[@]}"; do
        if [[ -n $c && -f $c ]]; then GDR_PROXY=$c; return; fi
    done
    gdr_die "$GDR_EXIT_ENV" "no jtagspi proxy bitstream: flash access goes through a BSCANE2-to-SPI bridge \
bitstream for the XC7A50T (bscan_spi_xc7a50t.bit). Set GDR_JTAGSPI_PROXY or place it in $GDR_PROGRAM_DIR \
(docs/fpga.md, 'Programming a card')"
}

# The file as one lowercase hex string, two characters per byte.
gdr_hex() { od -An -v -tx1 "$1" | tr -d ' \n'; }

# Byte offsets (in hex characters / 2) where the extended regex matches at a byte boundary.
gdr_find() {
    local hex=$1 re=$2 hit
    grep -obE "$re" <<<"$hex" | while IFS=: read -r hit _; do
        if (( hit % 2 == 0 )); then echo $(( hit / 2 )); fi
    done
}

# Inspects a configuration image (.bit or raw .bin) and sets:
#   IMG_SIZE  bytes;  IMG_BIT  1 if it has a .bit header;  IMG_SYNC  byte offsets of sync words;
#   IMG_IDCODE_OK  1 if it configures an XC7A50T;  IMG_IPROG  1 if it jumps (a golden image);
#   IMG_WBSTAR  the first WBSTAR value written (hex), empty if none.
gdr_image_info() {
    local file=$1 hex
    IMG_SIZE=$(stat -c %s "$file")
    hex=$(gdr_hex "$file")
    IMG_BIT=0
    [[ ${hex:0:12} == 00090ff00ff0 ]] && IMG_BIT=1
    IMG_SYNC=$(gdr_find "$hex" 'aa995566' | tr '\n' ' ')
    IMG_IDCODE_OK=0
    [[ -n $(gdr_find "$hex" "30018001[0-9a-f]$GDR_IDCODE_TAIL") ]] && IMG_IDCODE_OK=1
    IMG_IPROG=0
    [[ -n $(gdr_find "$hex" '300080010000000f') ]] && IMG_IPROG=1
    IMG_WBSTAR=
    local at
    at=$(gdr_find "$hex" '30020001[0-9a-f]{8}')
    at=${at%%$'\n'*}  # the first one (no `head`: under pipefail its early exit can fail the pipeline)
    [[ -n $at ]] && IMG_WBSTAR=0x${hex:$(( at * 2 + 8 )):8}
    return 0
}

# Common checks on an image about to be written or loaded. role: update | golden-layout | single | sram
gdr_check_image() {
    local file=$1 role=$2
    [[ -f $file && -r $file ]] || gdr_die "$GDR_EXIT_USAGE" "cannot read $file"
    gdr_image_info "$file"
    (( IMG_SIZE > 0 )) || gdr_die "$GDR_EXIT_REFUSED" "$file is empty"
    [[ -n $IMG_SYNC ]] || gdr_die "$GDR_EXIT_REFUSED" "$file has no configuration sync word: not a bitstream"
    (( IMG_IDCODE_OK )) || gdr_die "$GDR_EXIT_REFUSED" "$file is not built for the XC7A50T (IDCODE check)"
    case $role in
        sram)
            (( IMG_BIT )) || gdr_die "$GDR_EXIT_REFUSED" "$file is not a .bit file (OpenOCD's pld load needs one)"
            ;;
        *)
            (( IMG_BIT == 0 )) ||
                gdr_die "$GDR_EXIT_REFUSED" "$file is a .bit file: flash takes the raw .bin from build.sh"
            ;;
    esac
    case $role in
        update)
            (( IMG_SIZE <= SLOT_SIZE )) ||
                gdr_die "$GDR_EXIT_REFUSED" "$file is $IMG_SIZE bytes, more than the $((SLOT_SIZE)) byte update slot"
            (( IMG_IPROG == 0 )) || gdr_die "$GDR_EXIT_REFUSED" "$file jumps elsewhere (IPROG): it is a golden \
image, and in the update slot it would loop; use the -update.bin"
            ;;
        golden-layout)
            (( IMG_SIZE <= FLASH_SIZE )) || gdr_die "$GDR_EXIT_REFUSED" "$file is larger than the flash"
            (( IMG_IPROG )) || gdr_die "$GDR_EXIT_REFUSED" "$file starts with no golden image (no IPROG): use \
the -flash.bin from build.sh, or --single for a plain image"
            [[ -n $IMG_WBSTAR ]] && (( (IMG_WBSTAR & 0x1fffffff) == UPDATE_OFFSET )) || gdr_die \
                "$GDR_EXIT_REFUSED" "$file's golden image jumps to '$IMG_WBSTAR', not to the update slot at \
$UPDATE_OFFSET"
            ;;
        single)
            (( IMG_SIZE <= FLASH_SIZE )) || gdr_die "$GDR_EXIT_REFUSED" "$file is larger than the flash"
            (( IMG_IPROG == 0 )) || gdr_die "$GDR_EXIT_REFUSED" "$file is a golden image: use it without --single"
            ;;
        sram)
            (( IMG_IPROG == 0 )) || gdr_die "$GDR_EXIT_REFUSED" "$file is a golden image: its IPROG would \
reboot the FPGA from flash right away; load the -update.bit"
            ;;
    esac
}

# Runs OpenOCD with picoevb.cfg, then the given commands (one -c each), then shuts down.
gdr_openocd() {
    local args=(-c "set GDR_JTAG_KHZ ${GDR_JTAG_KHZ:-10000}")
    [[ -n ${GDR_JTAG_SERIAL:-} ]] && args+=(-c "set GDR_JTAG_SERIAL $GDR_JTAG_SERIAL")
    args+=(-f "$GDR_PROGRAM_DIR/picoevb.cfg" -c init)
    local c
    for c in "$@"; do args+=(-c "$c"); done
    args+=(-c shutdown)
    if [[ ${GDR_DRY_RUN:-0} == 1 ]]; then
        printf '%q ' "$GDR_OPENOCD_BIN" "${args[@]}"
        echo
        return 0
    fi
    if ! "$GDR_OPENOCD_BIN" "${args[@]}"; then
        gdr_note "OpenOCD failed. Is the card's USB wired through the slot (lsusb shows 0403:6015)? Is ftdi_sio"
        gdr_note "bound to it (install 99-picoevb-jtag.rules)? Do you have access to the USB device?"
        return 1
    fi
}
