SUMMARY = "The gdr PicoEVB bitstream and its manifest, for gdr-agent"
DESCRIPTION = "The FPGA images fpga-bitstream/build.sh writes (or a pinned release of them) with \
               manifest.json (fpga-bitstream/build.sh's, read by agent/src/manifest.rs), which names each \
               image, its sha256 and the ID-block values the agent \
               expects after loading; installed where the agent loads them from."
SECTION = "firmware"
# gdr's RTL is the repository's; the XDMA IP inside the bitstream is AMD's.
LICENSE = "(GPL-2.0-only | MIT) & Proprietary"
# nooelint: oelint.var.licenseremotefile - the images carry no licence text; the repository's licences are oe-core's common ones
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/GPL-2.0-only;md5=801f80980d171dd6425610833a22dbe6 \
                    file://${COMMON_LICENSE_DIR}/MIT;md5=0835ade698e0bcf8506ecda2f7b4f302"

inherit allarch

# Where the images come from, first match wins:
#  GDR_BITSTREAM_URI + GDR_BITSTREAM_SHA256: a release tarball holding manifest.json and the images
#  (pinned by its hash);
#  GDR_BITSTREAM_DIR: a directory of fpga-bitstream/build.sh output (needs Vivado; default: the one in the
#  repository). With neither there, do_install stops and says how to get one.
GDR_BITSTREAM_URI ?= ""
GDR_BITSTREAM_SHA256 ?= ""
GDR_BITSTREAM_DIR ?= "${GDR_ROOT}/fpga-bitstream/build/out"
GDR_BITSTREAM_DEST = "${datadir}/gdr/bitstream"

# Set below from the variables above.
SRC_URI = ""
S = "${UNPACKDIR}/bitstream"

# nooelint: oelint.task.noanonpython - the source (release tarball or local output) is chosen at parse time
python __anonymous() {
    import os

    uri = d.getVar("GDR_BITSTREAM_URI")
    local = d.getVar("GDR_BITSTREAM_DIR")
    if uri:
        if not d.getVar("GDR_BITSTREAM_SHA256"):
            bb.fatal("GDR_BITSTREAM_URI is set without GDR_BITSTREAM_SHA256: a release bitstream must be pinned")
        d.setVar("SRC_URI", "%s;name=bitstream;subdir=bitstream" % uri)
        d.setVarFlag("SRC_URI", "bitstream.sha256sum", d.getVar("GDR_BITSTREAM_SHA256"))
    elif os.path.isfile(os.path.join(local, "manifest.json")):
        d.setVar("SRC_URI", "file://%s/;subdir=bitstream" % local.rstrip("/"))
        # An absolute file:// path unpacks with its whole path below subdir.
        d.setVar("S", "${UNPACKDIR}/bitstream" + local.rstrip("/"))
    else:
        # Parse and dependency checks still pass; building is what needs the images.
        bb.parse.mark_dependency(d, os.path.join(local, "manifest.json"))
        d.setVar("GDR_BITSTREAM_MISSING", "1")
}

do_install() {
	if [ "${GDR_BITSTREAM_MISSING}" = "1" ]; then
		bbfatal "No PicoEVB bitstream: ${GDR_BITSTREAM_DIR}/manifest.json does not exist. Build it with \
fpga-bitstream/build.sh (needs AMD Vivado), point GDR_BITSTREAM_DIR at such an output, or set \
GDR_BITSTREAM_URI and GDR_BITSTREAM_SHA256 to a release tarball (docs/yocto.md)."
	fi
	[ -f "${S}/manifest.json" ] || bbfatal "${GDR_BITSTREAM_URI}${GDR_BITSTREAM_DIR}: no manifest.json at its top"
	install -d "${D}${GDR_BITSTREAM_DEST}"
	find "${S}" -maxdepth 1 -type f -exec install -m 0644 {} "${D}${GDR_BITSTREAM_DEST}/" \;
}

GDR_BITSTREAM_MISSING ?= ""
FILES:${PN} += "${GDR_BITSTREAM_DEST}"
