#!/usr/bin/env bash
# Build (or reuse) the emulated appliance's base image: Debian trixie (minbase + bench/appliance/packages)
# with systemd, D-Bus and udev, test users, and base/layer-init, written as an ext4 file system image with
# `mkfs.ext4 -d` (no loop mounts). Prints the image's path. Keyed by this script, the package list and base/,
# so a code change never rebuilds it: the per-run parts come on a second disk (layer.sh).
. "$(dirname "$0")/../lib.sh"
need_root
HERE=$REPO/bench/appliance
key=$(hash_of "$0" "$REPO/bench/lib.sh" "$HERE/packages" "$HERE"/base/*)
OUT=$GDR_CACHE/appliance-$key
IMG=$OUT/base.img
if [ -f "$OUT/.gdr-complete" ]; then echo "$IMG"; exit 0; fi
exec 9>"$GDR_CACHE/appliance-build.lock"; flock 9
if [ -f "$OUT/.gdr-complete" ]; then echo "$IMG"; exit 0; fi

mirror=$(debian_mirror); [ -n "$mirror" ] || die "no Debian mirror in the host's apt sources; set DEBIAN_MIRROR"
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 not found (e2fsprogs)"
pkgs=$(sed -e 's/#.*//' "$HERE/packages" | xargs | tr ' ' ,)

rm -rf "$OUT"; mkdir -p "$OUT"
R=$OUT/root
log "debootstrap trixie minbase + $pkgs -> $R"
step debootstrap debootstrap --variant=minbase --include="$pkgs" trixie "$R" "$mirror" >"$OUT/debootstrap.log" 2>&1 ||
  die "debootstrap failed, see $OUT/debootstrap.log"

# Offline configuration: nothing here needs /proc or a running systemd.
ch() { chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin LANG=C.UTF-8 "$@"; }
echo gdr-appliance >"$R/etc/hostname"
# A fixed machine id: the image is not on its first boot, so systemd-firstboot never prompts on the console.
echo 6764722d6170706c69616e6365000001 >"$R/etc/machine-id"
: >"$R/etc/fstab"
mkdir -p "$R/mnt/layer" "$R/usr/lib/gdr-appliance" "$R/etc/systemd/journald.conf.d"
install -m 0755 "$HERE/base/layer-init" "$R/usr/lib/gdr-appliance/layer-init"
printf '[Journal]\nStorage=volatile\n' >"$R/etc/systemd/journald.conf.d/gdr-appliance.conf"
# Units that only cost boot time in a throwaway VM (timers, gettys), and the first-boot wizard.
for u in apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer e2scrub_reap.service \
  fstrim.timer man-db.timer getty@tty1.service serial-getty@ttyS0.service systemd-firstboot.service; do
  ch systemctl mask "$u" >/dev/null 2>&1 || true
done
# Generators run under a fixed timeout before any unit starts; a debug kernel under TCG on a loaded machine
# can exceed it, and systemd then freezes ("Failed to fork off sandboxing environment for executing
# generators"). The appliance needs none of them (empty fstab, no gettys, no cryptsetup), so mask them all.
# hwdb and ldconfig rebuilds would run on every boot (the layer makes /etc and /usr newer): masked too.
mkdir -p "$R/etc/systemd/system-generators"
for g in "$R"/usr/lib/systemd/system-generators/*; do ln -sf /dev/null "$R/etc/systemd/system-generators/${g##*/}"; done
for u in systemd-hwdb-update.service ldconfig.service; do ch systemctl mask "$u" >/dev/null 2>&1 || true; done
# Test users: alice is authorised by the test config, mallory never is.
ch useradd -m -s /bin/bash alice
ch useradd -m -s /bin/bash mallory
ch passwd -qd root
rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/lib/apt/lists/* "$R"/var/log/*.log
ch systemd-analyze --version >/dev/null || die "systemd-analyze missing from the image"

log "writing the ext4 image"
size_mb=$(( $(du -sm "$R" | cut -f1) * 3 / 2 + 256 ))
truncate -s "${size_mb}M" "$IMG.tmp"
step mkfs mkfs.ext4 -q -F -L gdr-root -d "$R" "$IMG.tmp" >&2 || die "mkfs.ext4 -d failed"
mv "$IMG.tmp" "$IMG"
rm -rf "$R"
touch "$OUT/.gdr-complete"
echo "$IMG"
