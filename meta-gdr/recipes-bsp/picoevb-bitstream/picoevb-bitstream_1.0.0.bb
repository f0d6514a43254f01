SUMMARY = "The gdr PicoEVB bitstream and its manifest, for gdr-agent"
DESCRIPTION = "A release of the FPGA images fpga-bitstream/build.sh writes, with manifest.json (read by \
               agent/src/manifest.rs), which names each image, its sha256 and the ID-block values the \
               agent expects after loading; installed where the agent loads them from. Without a release \
               configured the package is empty and the agent serves the design the card carries."
SECTION = "firmware"
# gdr's RTL is the repository's; the XDMA IP inside the bitstream is AMD's.
LICENSE = "(GPL-2.0-only | MIT) & Proprietary"
# nooelint: oelint.var.licenseremotefile - a release holds the images and manifest.json, no licence text
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/GPL-2.0-only;md5=801f80980d171dd6425610833a22dbe6 \
                    file://${COMMON_LICENSE_DIR}/MIT;md5=0835ade698e0bcf8506ecda2f7b4f302"

inherit allarch

# A release: a tarball with manifest.json and the images at its top, pinned by its sha256 (bitbake's fetch
# refuses it without one), e.g. in local.conf:
#   GDR_BITSTREAM_URI = "https://example.org/gdr-bitstream-1.0.0.tar.gz"
#   GDR_BITSTREAM_SHA256 = "<its sha256>"
# A local fpga-bitstream/build.sh output works the same way once packed (docs/yocto.md). Unset (the
# default, no Vivado needed): the image carries no bitstream, and gdr-agent's configuration tells the agent
# to keep the design the card carries (gdr-agent_git.bb, GDR_AGENT_LOADER).
GDR_BITSTREAM_URI ??= ""
GDR_BITSTREAM_SHA256 ??= ""
GDR_BITSTREAM_DEST = "${datadir}/gdr/bitstream"

SRC_URI = "${@'${GDR_BITSTREAM_URI};name=bitstream;subdir=bitstream' if d.getVar('GDR_BITSTREAM_URI') else ''}"
SRC_URI[bitstream.sha256sum] = "${GDR_BITSTREAM_SHA256}"
S = "${UNPACKDIR}/bitstream"
# There even without a release, so that an empty source is not mistaken for a broken S.
do_unpack[dirs] =+ "${S}"

do_install() {
	if [ -z "${GDR_BITSTREAM_URI}" ]; then
		bbwarn "No PicoEVB bitstream configured (GDR_BITSTREAM_URI is unset): the image installs none, and \
gdr-agent serves the design the card already carries instead of programming one. To ship a release, set \
GDR_BITSTREAM_URI and GDR_BITSTREAM_SHA256 (docs/yocto.md, \"The bitstream\")."
		return
	fi
	[ -f "${S}/manifest.json" ] || bbfatal "${GDR_BITSTREAM_URI}: no manifest.json at the top of the release"
	install -d "${D}${GDR_BITSTREAM_DEST}"
	find "${S}" -maxdepth 1 -type f -exec install -m 0644 {} "${D}${GDR_BITSTREAM_DEST}/" \;
}

# Empty without a release, so the package group and images that name it still build.
ALLOW_EMPTY:${PN} = "1"
FILES:${PN} += "${GDR_BITSTREAM_DEST}"
