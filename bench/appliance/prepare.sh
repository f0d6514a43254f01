#!/usr/bin/env bash
# Everything the appliance boots, printed as shell assignments (eval "$(bench/appliance/prepare.sh)" after
# eval "$(bench/build.sh)"): the cached Debian base image (image.sh), the agent binaries (when agent/ exists)
# and this checkout's layer disk (layer.sh) in target/appliance/.
. "$(dirname "$0")/../lib.sh"
need_root
t0=$SECONDS
BASE=$("$REPO/bench/appliance/image.sh")
log "appliance base image ready ($((SECONDS - t0)) s)"
if [ -f "$REPO/agent/Cargo.toml" ]; then
  (cd "$REPO" && cargo build --release --quiet -p gdr-agent -p gdr-appliance-probe) >&2 ||
    die "cargo build (agent) failed"
  # Every binary of the gdr-agent package: gdr-agent and gdrctl go to /usr/bin, the rest to /usr/libexec/gdr.
  GDR_AGENT_BINS=$(cd "$REPO" && cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "gdr-agent":
        print(" ".join(t["name"] for t in p["targets"] if "bin" in t["kind"]))')
  export GDR_AGENT_BIN=$REPO/target/release GDR_AGENT_BINS GDR_PROBE=$REPO/target/release/gdr-appliance-probe
fi
OUT=$REPO/target/appliance
mkdir -p "$OUT"
# The model's "bitstreams" and their manifest, from the same values a Vivado build uses (fpga-bitstream/).
if [ -x "$REPO/fpga-bitstream/model-images.sh" ]; then
  rm -rf "$OUT/bitstream"
  PICOEVB_MODEL=${GDR_MODEL:?} "$REPO/fpga-bitstream/model-images.sh" "$OUT/bitstream" >&2 ||
    die "fpga-bitstream/model-images.sh failed"
  export GDR_BITSTREAM=$OUT/bitstream
  golden=$(ls "$OUT"/bitstream/*-model-golden.img) || die "model-images.sh wrote no golden image"
  # NVIDIA's reference design as a model image: the tests put it back on the card for the box without a
  # bitstream (never part of the image's bitstream folder).
  "$GDR_MODEL" make-image --design reference --build-time 0 >"$OUT/reference.img" ||
    die "picoevb-model make-image --design reference failed"
  export GDR_REFERENCE_IMAGE=$OUT/reference.img
fi
"$REPO/bench/appliance/layer.sh" "$OUT/layer.img"
log "appliance layer ready ($((SECONDS - t0)) s)"
cat <<VARS
GDR_APPLIANCE_BASE=$BASE
GDR_APPLIANCE_LAYER=$OUT/layer.img
GDR_APPLIANCE_GOLDEN=${golden:-}
VARS
