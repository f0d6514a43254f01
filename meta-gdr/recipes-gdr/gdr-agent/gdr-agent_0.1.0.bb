SUMMARY = "gdr-agent (PicoEVB loader, self-test, D-Bus service) and gdrctl"
DESCRIPTION = "The gdr agent, a systemd service on the system bus as org.gdr.Agent1 that loads the PicoEVB \
               FPGA and self-tests it at boot, and its command-line client, with the unit, D-Bus policy, \
               udev rules, sysusers/tmpfiles entries and default configuration the emulated appliance \
               installs, from the same agent/deploy/install.list."
SECTION = "base"
LICENSE = "GPL-2.0-only | MIT"
# The workspace's licence is a Cargo.toml key, not a licence file.
# nooelint: oelint.var.licenseremotefile - the repository's licences are oe-core's common ones
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/GPL-2.0-only;md5=801f80980d171dd6425610833a22dbe6 \
                    file://${COMMON_LICENSE_DIR}/MIT;md5=0835ade698e0bcf8506ecda2f7b4f302"

inherit gdr_source gdr_rust_version cargo systemd useradd features_check

REQUIRED_DISTRO_FEATURES = "systemd usrmerge"

# The whole cargo workspace (cargo loads every member to build one) and its Cargo.lock, and the files
# install.list names outside it.
SRC_URI = "${@gdr.source.workspace_src_uri(d)} ${@gdr.source.install_list_src_uri(d)}"
# Every crate of Cargo.lock, from meta-gdr/scripts/crates-inc.py; check.sh fails when it is stale.
require ${BPN}-crates.inc
# The registry Cargo.lock names, for the crate:// URIs above.
GDR_CRATE_REGISTRY = "${@gdr.source.crate_registry_of(d)}"

CARGO_SRC_DIR = "agent"
CARGO_LOCK_PATH = "${S}/Cargo.lock"

# As on the emulated appliance: gdr-agent and gdrctl in bindir, the package's other programs (the
# self-test child, the privileged helper) in libexecdir/gdr, where agent.toml and the units look for them.
do_install:append() {
	install -d ${D}${libexecdir}/gdr
	for b in ${D}${bindir}/*; do
		case ${b##*/} in
		gdr-agent|gdrctl) ;;
		*) mv "$b" ${D}${libexecdir}/gdr/ ;;
		esac
	done
	gdr_install_list
}

FILES:${PN} += "${libexecdir}/gdr ${@gdr.source.install_list_files(d)}"
CONFFILES:${PN} += "${@gdr.source.install_list_conffiles(d)}"
# The units with an [Install] section: gdr-agent.service, so the self-test runs at every boot.
SYSTEMD_SERVICE:${PN} = "${@gdr.source.systemd_units(d)}"

# The gdr user exists in the image itself (the rootfs's udev rules and tmpfiles name it); the parameters
# come from the sysusers.d file install.list installs, which stays its one definition.
USERADD_PACKAGES = "${PN}"
USERADD_PARAM:${PN} = "${@gdr.source.useradd_params(d)[0]}"
GROUPADD_PARAM:${PN} = "${@gdr.source.useradd_params(d)[1]}"

# cudarc loads the CUDA driver library (libcuda.so) at run time; the BSP ships it in tegra-libraries-cuda.
RDEPENDS:${PN} += "tegra-libraries-cuda"
