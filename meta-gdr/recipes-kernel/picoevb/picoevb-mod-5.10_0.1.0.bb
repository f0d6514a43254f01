SUMMARY = "picoevb.ko for L4T R35's linux-tegra 5.10 (no Rust-for-Linux)"
DESCRIPTION = "The gdr PicoEVB driver's 5.10 flavour (Jetson AGX Xavier, L4T R35): the same core-only \
               Rust logic as the Rust-for-Linux module with thin C glue for 5.10, linked against the \
               kernel's own nvidia-p2p module (CONFIG_TEGRA_RDMA)."
SECTION = "kernel/modules"
LICENSE = "GPL-2.0-only"
LIC_FILES_CHKSUM = "file://kmod/picoevb/Kbuild;beginline=1;endline=1;md5=daad6f7f7a0a286391cd7773ccf79340"

# The logic is core-only Rust, compiled as Rust-for-Linux compiles kernel Rust: rustc for the kernel's
# target (no FP/SIMD, panic=abort) against a `core` built from Rust's library sources with the same rustc.
# rust-native gives both: rustc, and the sources in rustlib/src (wrynose's installs them; on scarthgap
# meta-gdr's bbappend for meta-lts-mixins' Rust does, dynamic-layers/scarthgap-rust-mixin). Its LLVM
# must have the AArch64 backend, which oe-core's builds for an aarch64 MACHINE.
DEPENDS += "rust-native"
GDR_RUSTC = "${STAGING_BINDIR_NATIVE}/rustc"
GDR_RUST_LIB_SRC = "${STAGING_LIBDIR_NATIVE}/rustlib/src/rust/library"

# The flavour's Kbuild compiles these files of kmod/logic and crates/ (the 6.18 module's own) by path.
SRC_URI = "file://kmod;subdir=gdr file://crates;subdir=gdr"

inherit gdr_source gdr_rust_version module

GDR_KMOD_5_10 ?= "kmod/picoevb-5.10"

# Kbuild directly (the kernel's own M= build): linux-tegra's Module.symvers has nvidia-p2p's symbols, so
# no KBUILD_EXTRA_SYMBOLS; RUSTC and RUST_LIB_SRC are the names the kernel's own Makefile uses.
EXTRA_OEMAKE += "-C ${STAGING_KERNEL_DIR} M=${S}/${GDR_KMOD_5_10} RUSTC=${GDR_RUSTC} RUST_LIB_SRC=${GDR_RUST_LIB_SRC}"
MAKE_TARGETS = "modules"
MODULES_MODULE_SYMVERS_LOCATION = "${GDR_KMOD_5_10}"

# nvidia-p2p is in the kernel tree on R35 (drivers/nv-p2p, include/linux/nv-p2p.h): call it directly (a
# hard module dependency that modprobe follows) through the kernel's header, whose layout is this
# revision's.
EXTRA_OEMAKE += "KCFLAGS='-DGDR_P2P_LINKED -DGDR_P2P_SYSTEM_HEADER'"

do_compile:prepend() {
	if [ ! -f "${S}/${GDR_KMOD_5_10}/Kbuild" ]; then
		bbfatal "The 5.10 flavour of picoevb.ko is not in this gdr checkout (${GDR_KMOD_5_10}/Kbuild is missing): \
Jetson AGX Xavier images cannot carry the driver without it (issue 12)."
	fi
	if [ ! -f "${GDR_RUST_LIB_SRC}/core/src/lib.rs" ]; then
		bbfatal "rust-native has no library sources in ${GDR_RUST_LIB_SRC}: the 5.10 module builds core from them. \
On scarthgap, meta-gdr's rust bbappend installs them when meta-lts-mixins (scarthgap/rust) is in bblayers.conf."
	fi
}

# nooelint: oelint.task.noanonpython - which kernel this machine runs is only known at parse time
python __anonymous() {
    if d.getVar("PREFERRED_PROVIDER_virtual/kernel") != "linux-tegra":
        raise bb.parse.SkipRecipe("the 5.10 flavour is for L4T R35's linux-tegra; Rust kernels use picoevb-mod")
}

# linux-tegra packages drivers/nv-p2p/nvidia-p2p.ko (CONFIG_TEGRA_RDMA=m, the Kconfig default with GK20A).
RDEPENDS:${PN} += "kernel-module-nvidia-p2p"
KERNEL_MODULE_AUTOLOAD += "picoevb"
