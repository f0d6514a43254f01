#!/usr/bin/env bash
# layer.sh OUT.img : the per-run layer of the emulated appliance, a small ext4 image (mkfs.ext4 -d) that
# base/layer-init copies over the root at boot. It holds what changes with the code, installed where the Yocto
# image installs it:
#   - the kernel modules under /usr/lib/modules/<release>/extra (depmod runs at boot; modules-load.d loads
#     picoevb, as the Yocto recipe's KERNEL_MODULE_AUTOLOAD does, and udev would by its PCI alias; and
#     gdr_nv_p2p, the nvidia_p2p provider NVIDIA's driver is on a Jetson),
#   - gdr-agent and gdrctl in /usr/bin (helpers in /usr/libexec/gdr), every file of agent/deploy/install.list
#     at its destination with its mode, the bitstream/model images in /usr/share/gdr/bitstream,
#   - the bench's test unit and scenarios (bench/appliance/guest; never part of a real image).
# Inputs from the environment (eval "$(bench/build.sh)"): GDR_KDIR GDR_KO GDR_P2P; and when they exist
# GDR_AGENT_BIN (folder of the agent binaries) with GDR_AGENT_BINS (their names), GDR_PROBE (the test client),
# GDR_BITSTREAM (folder of model images + manifest.json) and GDR_REFERENCE_IMAGE (NVIDIA's design as a model
# image, for the tests).
. "$(dirname "$0")/../lib.sh"
[ $# -eq 1 ] || die "usage: layer.sh OUT.img"
out=$1
: "${GDR_KDIR:?run eval \"\$(bench/build.sh)\" first}" "${GDR_KO:?}" "${GDR_P2P:?}"
HERE=$REPO/bench/appliance
stage=$(mktemp -d "${TMPDIR:-/tmp}/gdr-layer.XXXXXX")
trap 'rm -rf "$stage"' EXIT
umask 022
R=$stage/root

# Debian's /lib, /bin and /sbin are symlinks into /usr: the layer must not put directories in their place.
merged() { case $1 in /lib/* | /bin/* | /sbin/*) echo "/usr$1" ;; *) echo "$1" ;; esac; }
rel=$(cat "$GDR_KDIR/include/config/kernel.release") || die "no kernel release in $GDR_KDIR"
install -D -m 0644 "$GDR_KO" "$R/usr/lib/modules/$rel/extra/picoevb.ko"
install -D -m 0644 "$GDR_P2P" "$R/usr/lib/modules/$rel/extra/gdr_nv_p2p.ko"
# What modules_install would put beside them, so depmod and modprobe know the built-in ones (systemd asks
# for autofs4, loop, ...). The bench's in-tree modules are never installed: modules.order stays empty.
: >"$R/usr/lib/modules/$rel/modules.order"
for f in modules.builtin modules.builtin.modinfo; do
  if [ -f "$GDR_KDIR/$f" ]; then install -m 0644 "$GDR_KDIR/$f" "$R/usr/lib/modules/$rel/$f"; else : >"$R/usr/lib/modules/$rel/$f"; fi
done
install -D -m 0644 /dev/stdin "$R/usr/lib/modules-load.d/gdr-nv-p2p.conf" <<<"gdr_nv_p2p"
# Before gdr-agent starts (After=systemd-modules-load.service): its DeviceAllow=char-picoevb looks the
# driver's major up in /proc/devices then, and a module udev loads later would not be admitted.
install -D -m 0644 /dev/stdin "$R/usr/lib/modules-load.d/picoevb.conf" <<<"picoevb"

# install.list: "<repo path> <destination> <octal mode>" per line, # comments. A missing source is an error:
# the list is the truth the Yocto recipes install from too.
list=$REPO/agent/deploy/install.list
if [ -f "$list" ]; then
  n=0
  while read -r src dst mode extra; do
    [ -n "$src" ] && [ "${src:0:1}" != "#" ] || continue
    [ -n "$dst" ] && [ -n "$mode" ] && [ -z "$extra" ] && [ "${dst:0:1}" = / ] && [[ $mode =~ ^[0-7]{3,4}$ ]] ||
      die "$list: bad line: $src $dst $mode $extra"
    [ -f "$REPO/$src" ] || die "$list: $src does not exist"
    install -D -m "$mode" "$REPO/$src" "$R$(merged "$dst")"
    n=$((n + 1))
  done < <(sed 's/#.*//' "$list")
  log "layer: $n file(s) from agent/deploy/install.list"
fi
# Enable the listed units as a package's preset does (systemctl enable, done offline): a link in the .wants
# folder of every WantedBy= target. Template units (name@.service) are instantiated on demand, never enabled.
for u in "$R"/usr/lib/systemd/system/*.service "$R"/usr/lib/systemd/system/*.socket "$R"/usr/lib/systemd/system/*.timer; do
  [ -f "$u" ] || continue
  name=$(basename "$u")
  case $name in *@.*) continue ;; esac
  for t in $(sed -n 's/^WantedBy=//p' "$u"); do
    mkdir -p "$R/etc/systemd/system/$t.wants"
    ln -sf "/usr/lib/systemd/system/$name" "$R/etc/systemd/system/$t.wants/$name"
  done
done
for b in ${GDR_AGENT_BINS:-}; do
  case $b in gdr-agent | gdrctl) dir=/usr/bin ;; *) dir=/usr/libexec/gdr ;; esac
  install -D -m 0755 "$GDR_AGENT_BIN/$b" "$R$dir/$b" || die "agent binary $b missing in $GDR_AGENT_BIN"
done
if [ -n "${GDR_BITSTREAM:-}" ]; then
  [ -f "$GDR_BITSTREAM/manifest.json" ] || die "GDR_BITSTREAM=$GDR_BITSTREAM holds no manifest.json"
  mkdir -p "$R/usr/share/gdr/bitstream"
  cp -r "$GDR_BITSTREAM/." "$R/usr/share/gdr/bitstream/"
fi

# The bench's test unit, scenarios and test client.
[ -z "${GDR_PROBE:-}" ] || install -D -m 0755 "$GDR_PROBE" "$R/usr/lib/gdr-test/gdr-appliance-probe"
[ -z "${GDR_REFERENCE_IMAGE:-}" ] || install -D -m 0644 "$GDR_REFERENCE_IMAGE" "$R/usr/lib/gdr-test/reference.img"
install -D -m 0755 "$HERE/guest/run" "$R/usr/lib/gdr-test/run"
install -D -m 0644 "$HERE/guest/lib.sh" "$R/usr/lib/gdr-test/lib.sh"
for s in "$HERE"/guest/scenarios/*.sh; do install -D -m 0644 "$s" "$R/usr/lib/gdr-test/scenarios/$(basename "$s")"; done
install -D -m 0644 "$HERE/guest/gdr-test.service" "$R/etc/systemd/system/gdr-test.service"
mkdir -p "$R/etc/systemd/system/multi-user.target.wants"
ln -s ../gdr-test.service "$R/etc/systemd/system/multi-user.target.wants/gdr-test.service"

size_mb=$(( $(du -sm "$stage" | cut -f1) + 16 ))
rm -f "$out"; truncate -s "${size_mb}M" "$out"
mkfs.ext4 -q -F -L gdr-layer -d "$stage" "$out" || die "mkfs.ext4 -d (layer) failed"
