SUMMARY = "picoevb.ko for L4T R35's linux-tegra 5.10 (no Rust-for-Linux)"
DESCRIPTION = "The gdr PicoEVB driver's 5.10 flavour (Jetson AGX Xavier, L4T R35): the same core-only \
               Rust logic with thin 5.10 glue, linked against the kernel's own nvidia-p2p module \
               (CONFIG_TEGRA_RDMA)."
SECTION = "kernel/modules"
LICENSE = "GPL-2.0-only"
LIC_FILES_CHKSUM = "file://kmod/picoevb/Kbuild;beginline=1;endline=1;md5=daad6f7f7a0a286391cd7773ccf79340"

SRC_URI = "file://kmod;subdir=gdr file://crates;subdir=gdr"

inherit gdr_source module

# Where the 5.10 flavour lives (issue 12). Until it exists the recipe parses, and do_compile stops with
# the reason.
GDR_KMOD_5_10 ?= "kmod/picoevb-5.10"

EXTRA_OEMAKE += "-C ${STAGING_KERNEL_DIR} M=${S}/${GDR_KMOD_5_10}"
MAKE_TARGETS = "modules"
MODULES_MODULE_SYMVERS_LOCATION = "${GDR_KMOD_5_10}"

# nvidia-p2p is in the kernel tree on R35 (its symbols are in the kernel's Module.symvers, nv-p2p.h in
# include/linux): link it directly and use the kernel's header, whose layout differs between revisions.
EXTRA_OEMAKE += "KCFLAGS='-DGDR_P2P_LINKED -DGDR_P2P_SYSTEM_HEADER'"

do_compile:prepend() {
	if [ ! -f "${S}/${GDR_KMOD_5_10}/Kbuild" ]; then
		bbfatal "The 5.10 flavour of picoevb.ko is not in this gdr checkout (${GDR_KMOD_5_10}/Kbuild is missing). \
It is issue 12's work: Jetson AGX Xavier images cannot carry the driver until it lands."
	fi
}

# nooelint: oelint.task.noanonpython - which kernel this machine runs is only known at parse time
python __anonymous() {
    if d.getVar("PREFERRED_PROVIDER_virtual/kernel") != "linux-tegra":
        raise bb.parse.SkipRecipe("the 5.10 flavour is for L4T R35's linux-tegra; Rust kernels use picoevb-mod")
}

RDEPENDS:${PN} += "kernel-module-nvidia-p2p"
KERNEL_MODULE_AUTOLOAD += "picoevb"
