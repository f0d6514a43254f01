#!/usr/bin/env bash
# Reads what JTAG can tell about a PicoEVB without PCIe: the scan chain IDCODE, USERCODE (gdr builds put
# their BUILD_HASH there), the configuration STAT and WBSTAR registers and BOOTSTS (which image booted,
# whether a fallback happened and why). Changes nothing on the card.
#
#   jtag-status.sh [--dry-run]
set -euo pipefail
GDR_TOOL=jtag-status
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

case ${1:-} in
    --dry-run) GDR_DRY_RUN=1 ;;
    -h|--help) sed -n '2,6p' "${BASH_SOURCE[0]}"; exit 0 ;;
    "") ;;
    *) gdr_die "$GDR_EXIT_USAGE" "usage: jtag-status.sh [--dry-run]" ;;
esac
gdr_find_openocd
gdr_openocd "scan_chain" gdr_status || exit "$GDR_EXIT_JTAG"
