#!/usr/bin/env bash
# Programs the whole PicoEVB flash over JTAG (bench / first install): the MultiBoot layout from build.sh,
# golden image at 0 and update image at UPDATE_OFFSET, written and verified in one pass.
#
#   flash-program.sh [--reload] [--dry-run] [--single] IMAGE
#
#   IMAGE      gdr-picoevb-<version>-flash.bin from build.sh (raw flash bytes from address 0)
#   --single   IMAGE is a plain single image instead (no MultiBoot: no update slot, no fallback), e.g. the
#              NVIDIA reference image converted with `objcopy -I ihex -O binary picoevb.mcs picoevb.bin`
#   --reload   reconfigure the FPGA from flash afterwards (JPROGRAM; the PCIe link drops)
#   --dry-run  check the image and print the OpenOCD command instead of running it
#
# Exit status as flash-update.sh. Interrupting this one can leave the card without a bootable image:
# it then needs this script again over JTAG.
set -euo pipefail
GDR_TOOL=flash-program
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

reload=0 role=golden-layout image=
while [[ $# -gt 0 ]]; do
    case $1 in
        --reload) reload=1; shift ;;
        --single) role=single; shift ;;
        --dry-run) GDR_DRY_RUN=1; shift ;;
        -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) gdr_die "$GDR_EXIT_USAGE" "unknown option $1" ;;
        *) [[ -z $image ]] || gdr_die "$GDR_EXIT_USAGE" "one image only"; image=$1; shift ;;
    esac
done
[[ -n $image ]] || gdr_die "$GDR_EXIT_USAGE" "usage: flash-program.sh [--reload] [--dry-run] [--single] IMAGE"

gdr_check_image "$image" "$role"
if [[ $role == golden-layout ]] && (( IMG_SIZE > UPDATE_OFFSET )); then
    last_sync=${IMG_SYNC% }
    last_sync=${last_sync##* }
    (( last_sync >= UPDATE_OFFSET )) || gdr_die "$GDR_EXIT_REFUSED" "$image has no image in the update slot"
fi
sum=$(sha256sum "$image" | cut -d' ' -f1)
gdr_find_openocd
gdr_find_proxy

cmds=("gdr_flash_init {$GDR_PROXY}" "gdr_flash_write {$image} $GOLDEN_OFFSET")
(( reload )) && cmds+=(gdr_reload)
gdr_note "whole flash from $GOLDEN_OFFSET: $image ($IMG_SIZE bytes, sha256 $sum)"
gdr_openocd "${cmds[@]}" || exit "$GDR_EXIT_JTAG"
echo "flash-program: ok offset=$GOLDEN_OFFSET size=$IMG_SIZE sha256=$sum reloaded=$( (( reload )) && echo yes || echo no)"
