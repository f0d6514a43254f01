#!/usr/bin/env bash
# Writes a new image into the PicoEVB's MultiBoot UPDATE slot over JTAG and verifies it. The golden slot is
# never touched: if this is interrupted or the new image is bad, the card falls back to the golden image.
#
#   flash-update.sh [--reload] [--dry-run] IMAGE
#
#   IMAGE      the update-slot image from build.sh: gdr-picoevb-<version>-update.bin (raw flash bytes)
#   --reload   after a verified write, reconfigure the FPGA from flash (JPROGRAM). The PCIe link drops: the
#              host must remove the device first and rescan afterwards (docs/fpga.md, "Reloading").
#   --dry-run  check the image and print the OpenOCD command instead of running it
#
# Exit status: 0 written and verified; 1 usage; 2 image refused (nothing written); 3 OpenOCD or proxy
# bitstream missing (nothing written); 4 JTAG or flash failure (the update slot may be partly written:
# the next boot falls back to the golden image). The last line on success is machine-readable:
#   flash-update: ok slot=update offset=0x200000 size=N sha256=HEX reloaded=no
set -euo pipefail
GDR_TOOL=flash-update
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

reload=0 image=
while [[ $# -gt 0 ]]; do
    case $1 in
        --reload) reload=1; shift ;;
        --dry-run) GDR_DRY_RUN=1; shift ;;
        -h|--help) sed -n '2,19p' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) gdr_die "$GDR_EXIT_USAGE" "unknown option $1" ;;
        *) [[ -z $image ]] || gdr_die "$GDR_EXIT_USAGE" "one image only"; image=$1; shift ;;
    esac
done
[[ -n $image ]] || gdr_die "$GDR_EXIT_USAGE" "usage: flash-update.sh [--reload] [--dry-run] IMAGE"

gdr_check_image "$image" update
sum=$(sha256sum "$image" | cut -d' ' -f1)
gdr_find_openocd
gdr_find_proxy

cmds=("gdr_flash_init {$GDR_PROXY}" "gdr_flash_write {$image} $UPDATE_OFFSET")
(( reload )) && cmds+=(gdr_reload)
gdr_note "update slot $UPDATE_OFFSET: $image ($IMG_SIZE bytes, sha256 $sum)"
gdr_openocd "${cmds[@]}" || exit "$GDR_EXIT_JTAG"
echo "flash-update: ok slot=update offset=$UPDATE_OFFSET size=$IMG_SIZE sha256=$sum reloaded=$( (( reload )) && echo yes || echo no)"
