# nooelint: oelint.file.underscores,oelint.var.mandatoryvar.SRC_URI - PV is the Rust release the configuration builds, not a version of this recipe; SRC_URI comes with rust-source.inc
SUMMARY = "Rust's library sources (core, alloc), for kernel modules that build core"
DESCRIPTION = "The library/ folder of the Rust source release this configuration's rust-native is built \
               from (what rustup's rust-src component holds), in the native sysroot at \
               ${datadir}/rust-library-src/library. picoevb-mod's flavour for L4T R35's linux-tegra 5.10 \
               builds core for the kernel's target from it with rust-native's rustc, as Rust-for-Linux \
               does; a core built from another release does not link with that rustc. A recipe of its own \
               so that rust-native stays as its layer builds it and comes from shared state."
HOMEPAGE = "https://www.rust-lang.org"
SECTION = "devel"
LICENSE = "MIT | Apache-2.0"
# nooelint: oelint.var.licenseremotefile - the release's COPYRIGHT file changes with every Rust release; the library's licences are these two
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/MIT;md5=0835ade698e0bcf8506ecda2f7b4f302 \
                    file://${COMMON_LICENSE_DIR}/Apache-2.0;md5=89aea4e17d99a7cacdbeed46a0096b10"

# nooelint: oelint.var.inheritdevtool.native - a native-only recipe, never a target one for devtool to extend
inherit native

# The rust recipes' own source description: the release tarball (pinned by its sha256) and patches of
# whichever layer builds Rust here (meta-lts-mixins' scarthgap/rust on Xavier, oe-core on wrynose). PV is
# the version of the rust recipe beside that rust-source.inc, which must be the one RUSTVERSION selects
# (lib/gdr/rust.py; the recipe is skipped with the reason otherwise).
PV = "${@gdr.rust.source_version(d)}"
# nooelint: oelint.file.requirenotfound - found through BBPATH, in the layer that builds Rust
require recipes-devtools/rust/rust-source.inc
# nooelint: oelint.vars.fileextrapaths,oelint.vars.outofcontext - the patches rust-source.inc names sit beside it, in the other layer
FILESEXTRAPATHS:prepend := "${@gdr.rust.source_dir(d)}/files:"
S = "${RUSTSRC}"

GDR_RUST_LIBRARY_SRC = "${datadir}/rust-library-src"

do_configure[noexec] = "1"
do_compile[noexec] = "1"

do_install() {
	install -d ${D}${GDR_RUST_LIBRARY_SRC}
	cp -r --no-preserve=ownership ${S}/library ${D}${GDR_RUST_LIBRARY_SRC}/
	# As oe-core's rust recipe does for its rust-src package: the library's helper scripts are not needed.
	find ${D}${GDR_RUST_LIBRARY_SRC} -name "*.sh" -type f -delete
}
