SUMMARY = "gdr-agent (PicoEVB loader, self-test, D-Bus service) and gdrctl"
SUMMARY:libgdr-client = "gdr client library (C interface gdrpico.h)"
DESCRIPTION = "The gdr agent, a systemd service on the system bus as org.gdr.Agent1 that programs the \
               PicoEVB FPGA (or keeps the design it carries) and self-tests it at boot, and its \
               command-line client, with the units, D-Bus policy, udev rules, sysusers/tmpfiles entries \
               and configuration that agent/deploy/install.list names for the emulated appliance too."
SECTION = "base"
LICENSE = "GPL-2.0-only | MIT"
LIC_FILES_CHKSUM = "file://LICENSE;md5=202ed382cf0c4e08eb5105115674aa00 \
                    file://LICENSES/GPL-2.0-only.txt;md5=b234ee4d69f5fce4486a80fdaf4a4263 \
                    file://LICENSES/MIT.txt;md5=45bb8636fd9e894d3d466366a6dce8e1"

inherit gdr_source gdr_rust_version cargo cargo-update-recipe-crates systemd useradd features_check

REQUIRED_DISTRO_FEATURES = "systemd"

# Every crate of Cargo.lock. Written by meta-gdr/scripts/crates-inc.py, in the form
# `bitbake -c update_crates gdr-agent` (cargo-update-recipe-crates) writes but with the registry host left
# to GDR_CRATE_REGISTRY, which is read from Cargo.lock (docs/yocto.md, "The crates list"). check.sh fails
# when it is stale; a list written by update_crates passes that check too.
require ${BPN}-crates.inc
GDR_CRATE_REGISTRY = "${@gdr.source.crate_registry_of(d)}"

CARGO_SRC_DIR = "agent"
CARGO_LOCK_PATH = "${S}/Cargo.lock"
# The client library's shared object too (gdr-client's cdylib, soname libgdr_client.so.1: agent/client),
# which applications link through gdrpico.h; it is a workspace member beside the agent.
CARGO_BUILD_FLAGS:append = " -p gdr-agent -p gdr-client"

# OpenOCD (meta-oe) programs the card over JTAG; on by default where meta-oe is in the configuration.
PACKAGECONFIG ??= "${@bb.utils.contains('BBFILE_COLLECTIONS', 'openembedded-layer', 'openocd', '', d)}"
PACKAGECONFIG[openocd] = ",,,openocd"

# How the agent treats the card (the `loader` of agent.toml's [[card]] table): with a bitstream release in
# the image (picoevb-bitstream, GDR_BITSTREAM_URI) and OpenOCD, "openocd": it programs that release when
# the card runs another design. Otherwise "none": it programs nothing and serves, and self-tests, the
# design the card carries.
GDR_BITSTREAM_URI ??= ""
GDR_AGENT_LOADER = "${@'openocd' if d.getVar('GDR_BITSTREAM_URI') and bb.utils.contains('PACKAGECONFIG', 'openocd', True, False, d) else 'none'}"

do_install:append() {
	# As on the emulated appliance: gdr-agent and gdrctl in bindir, the package's other programs (the
	# self-test child, the privileged helper) in libexecdir/gdr, where agent.toml and the units look for them.
	install -d ${D}${libexecdir}/gdr
	for b in ${D}${bindir}/*; do
		case ${b##*/} in
		gdr-agent|gdrctl) ;;
		*) mv "$b" ${D}${libexecdir}/gdr/ ;;
		esac
	done

	# agent/deploy/install.list, entry by entry (meta-gdr/scripts/check_installs.py checks the two agree).
	install -D -m 0644 ${S}/agent/deploy/gdr-agent.service ${D}${systemd_system_unitdir}/gdr-agent.service
	install -D -m 0644 ${S}/agent/deploy/gdr-helper.socket ${D}${systemd_system_unitdir}/gdr-helper.socket
	install -D -m 0644 ${S}/agent/deploy/gdr-helper@.service ${D}${systemd_system_unitdir}/gdr-helper@.service
	install -D -m 0644 ${S}/agent/deploy/org.gdr.Agent1.conf ${D}${datadir}/dbus-1/system.d/org.gdr.Agent1.conf
	install -D -m 0644 ${S}/agent/deploy/org.gdr.agent.policy ${D}${datadir}/polkit-1/actions/org.gdr.agent.policy
	install -D -m 0644 ${S}/agent/deploy/70-gdr.rules ${D}${nonarch_base_libdir}/udev/rules.d/70-gdr.rules
	install -D -m 0644 ${S}/kmod/picoevb/udev/60-picoevb.rules ${D}${nonarch_base_libdir}/udev/rules.d/60-picoevb.rules
	install -D -m 0644 ${S}/agent/deploy/gdr.sysusers ${D}${nonarch_libdir}/sysusers.d/gdr.conf
	install -D -m 0644 ${S}/agent/deploy/gdr.tmpfiles ${D}${nonarch_libdir}/tmpfiles.d/gdr.conf
	install -D -m 0644 ${S}/agent/deploy/agent.toml ${D}${sysconfdir}/gdr/agent.toml
	install -D -m 0644 ${S}/fpga-bitstream/program/lib.sh ${D}${datadir}/gdr/program/lib.sh
	install -D -m 0755 ${S}/fpga-bitstream/program/load-sram.sh ${D}${datadir}/gdr/program/load-sram.sh
	install -D -m 0755 ${S}/fpga-bitstream/program/flash-update.sh ${D}${datadir}/gdr/program/flash-update.sh
	install -D -m 0644 ${S}/fpga-bitstream/program/picoevb.cfg ${D}${datadir}/gdr/program/picoevb.cfg
	install -D -m 0644 ${S}/fpga-bitstream/flash-layout.conf ${D}${datadir}/gdr/flash-layout.conf

	# The C interface: the library under its soname, the link-time name and the generated header (-dev).
	install -D -m 0755 ${B}/target/${CARGO_TARGET_SUBDIR}/libgdr_client.so ${D}${libdir}/libgdr_client.so.1
	ln -sf libgdr_client.so.1 ${D}${libdir}/libgdr_client.so
	install -D -m 0644 ${S}/agent/client/include/gdrpico.h ${D}${includedir}/gdrpico.h

	# agent.toml ends with the emulated appliance's [[card]] table (its FPGA model's port): replace it, and
	# the comment above it, with the Jetson's one card.
	conf=${D}${sysconfdir}/gdr/agent.toml
	awk '/^\[\[card\]\]/ { exit } /^#/ || /^$/ { held = held $0 "\n"; next } { printf "%s", held; held = ""; print }' \
		$conf >$conf.new
	cat >>$conf.new <<-EOF

		# The PicoEVB on this Jetson (written by the gdr-agent recipe). loader "openocd": program the
		# image's bitstream release over JTAG when the card runs another design; "none": keep and serve
		# the design the card carries (the image has no bitstream, GDR_BITSTREAM_URI unset).
		[[card]]
		pci = "auto"
		device = "/dev/picoevb0"
		loader = "${GDR_AGENT_LOADER}"
	EOF
	mv $conf.new $conf
	if [ -n "${GDR_BITSTREAM_URI}" ] && [ "${GDR_AGENT_LOADER}" != openocd ]; then
		bbwarn "GDR_BITSTREAM_URI is set but gdr-agent's PACKAGECONFIG lacks openocd (meta-oe): the agent \
cannot program the card and serves the design it carries."
	fi
}

# Applications depend on the library alone (RDEPENDS on libgdr-client, or the soname through shlibs), not
# on the agent; libgdr-client-dev (gdr-agent-dev's files: the header and libgdr_client.so) is for building them.
PACKAGES =+ "libgdr-client"
FILES:libgdr-client += "${libdir}/libgdr_client.so.1"

FILES:${PN} += "\
    ${libexecdir}/gdr \
    ${systemd_system_unitdir}/gdr-agent.service \
    ${systemd_system_unitdir}/gdr-helper.socket \
    ${systemd_system_unitdir}/gdr-helper@.service \
    ${datadir}/dbus-1/system.d/org.gdr.Agent1.conf \
    ${datadir}/polkit-1/actions/org.gdr.agent.policy \
    ${nonarch_libdir}/sysusers.d/gdr.conf \
    ${nonarch_libdir}/tmpfiles.d/gdr.conf \
    ${datadir}/gdr \
"
CONFFILES:${PN} += "${sysconfdir}/gdr/agent.toml"
# The units with an [Install] section (check_installs.py checks the list): the agent starts, and runs its
# self-test, at every boot; the helper's socket is there for it.
SYSTEMD_SERVICE:${PN} = "gdr-agent.service gdr-helper.socket"

# The gdr user and group exist in the image itself (the rootfs's udev rules and tmpfiles name them), as
# agent/deploy/gdr.sysusers declares them (check_installs.py checks these against it).
USERADD_PACKAGES = "${PN}"
# nooelint: oelint.vars.pathhardcode.localstatedir,oelint.vars.pathhardcode.sbindir - the home and shell gdr.sysusers gives, word for word
USERADD_PARAM:${PN} = "--system --no-create-home --home-dir /var/lib/gdr --shell /usr/sbin/nologin --comment 'gdr agent' --user-group gdr"
GROUPADD_PARAM:${PN} = "--system gdrusers; --system gdrmetrics"

# cudarc loads the CUDA driver library (libcuda.so) at run time; the BSP ships it in tegra-libraries-cuda.
RDEPENDS:${PN} += "tegra-libraries-cuda"
