#!/usr/bin/env bash
# Loads a bitstream into the PicoEVB FPGA's configuration SRAM over JTAG (volatile: gone at power-off or at
# the next reconfiguration from flash). The PCIe link drops while the FPGA reconfigures: remove the device
# from the host first and rescan afterwards (docs/fpga.md, "Reloading").
#
#   load-sram.sh [--dry-run] BITFILE
#
#   BITFILE    gdr-picoevb-<version>-update.bit (the golden .bit is refused: its IPROG would reboot the FPGA
#              from flash as soon as it loaded)
set -euo pipefail
GDR_TOOL=load-sram
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bit=
while [[ $# -gt 0 ]]; do
    case $1 in
        --dry-run) GDR_DRY_RUN=1; shift ;;
        -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
        -*) gdr_die "$GDR_EXIT_USAGE" "unknown option $1" ;;
        *) [[ -z $bit ]] || gdr_die "$GDR_EXIT_USAGE" "one file only"; bit=$1; shift ;;
    esac
done
[[ -n $bit ]] || gdr_die "$GDR_EXIT_USAGE" "usage: load-sram.sh [--dry-run] BITFILE"

gdr_check_image "$bit" sram
gdr_find_openocd
gdr_note "loading $bit ($IMG_SIZE bytes) into SRAM"
gdr_openocd "gdr_pld_load {$bit}" gdr_status || exit "$GDR_EXIT_JTAG"
echo "load-sram: ok size=$IMG_SIZE"
