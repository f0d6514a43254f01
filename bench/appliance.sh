#!/usr/bin/env bash
# The main job (README): the emulated PicoEVB appliance. Builds what is missing (see bench/build.sh), starts
# the FPGA model and a QEMU guest with the real Rust driver, and runs a loopback DMA through the card:
# host memory -> FPGA BRAM -> host memory, every byte verified, printed as it goes.
. "$(dirname "$0")/lib.sh"
need_root
eval "$("$REPO/bench/build.sh")"
exec "$GDR_HARNESS" run --root "$GDR_ROOT" --kernel "$GDR_KERNEL" --module "$GDR_KO" --guest "$GDR_GUEST" \
  --model "$GDR_MODEL" --mode loopback "$@"
