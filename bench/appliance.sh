#!/usr/bin/env bash
# The main job (README): the emulated appliance. Builds what is missing (bench/build.sh, then the Debian base
# image and this checkout's layer: bench/appliance/prepare.sh), boots it under QEMU with the FPGA model on
# vfio-user and the model's control socket on virtio-serial (the JTAG cable), and shows systemd starting the
# agent, which loads the (model) FPGA, self-tests and becomes ready; then `gdrctl status`. Exits non-zero if
# the agent does not reach ready. Extra arguments go to `gdr-bench appliance` (e.g. --keep, --timeout 900).
. "$(dirname "$0")/lib.sh"
need_root
eval "$("$REPO/bench/build.sh")"
export GDR_KDIR GDR_KO GDR_P2P GDR_MODEL
eval "$("$REPO/bench/appliance/prepare.sh")"
# The card powers up with its golden design from flash, as a box fresh from the factory does; the agent
# programs the update the image ships.
golden=()
[ -z "$GDR_APPLIANCE_GOLDEN" ] || golden=(--model-arg=--image="$GDR_APPLIANCE_GOLDEN" --model-arg=--golden="$GDR_APPLIANCE_GOLDEN")
exec "$GDR_HARNESS" appliance --root "$GDR_ROOT" --kernel "$GDR_KERNEL" --model "$GDR_MODEL" \
  --base "$GDR_APPLIANCE_BASE" --layer "$GDR_APPLIANCE_LAYER" --scenario main --timeout 1200 "${golden[@]}" "$@"
