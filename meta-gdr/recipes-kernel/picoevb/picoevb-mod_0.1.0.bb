SUMMARY = "picoevb.ko, the gdr PicoEVB driver (Rust-for-Linux)"
DESCRIPTION = "The gdr PCI driver for the PicoEVB FPGA card (XDMA), pinning CUDA memory through \
               nvidia_p2p; built with module-rust against a Rust-enabled kernel (linux-yocto 6.18 on Orin), \
               linked against NVIDIA's nvidia_p2p from nvidia-kernel-oot."
SECTION = "kernel/modules"
LICENSE = "GPL-2.0-only"
LIC_FILES_CHKSUM = "file://kmod/picoevb/Kbuild;beginline=1;endline=1;md5=daad6f7f7a0a286391cd7773ccf79340"

# NVIDIA's nvidia_p2p comes from nvidia-kernel-oot: module.bbclass points KBUILD_EXTRA_SYMBOLS at its
# Module.symvers for this DEPENDS, and its headers (linux/nv-p2p.h) are staged under nvidia-kernel-oot.
DEPENDS += "kernel-module-nvidia-kernel-oot"

# The crate root includes the core-only logic and register files by relative path (../../crates, ../logic).
SRC_URI = "file://kmod;subdir=gdr file://crates;subdir=gdr"

inherit gdr_source
# module-rust skips this recipe unless KERNEL_FEATURES has "rust"; before wrynose the class does not exist.
inherit_defer ${@'module-rust' if gdr.source.has_class(d, 'module-rust') else 'gdr_needs_module_rust'}

# Kbuild directly: kmod/picoevb/Makefile is a wrapper for hand builds with KDIR.
EXTRA_OEMAKE += "-C ${STAGING_KERNEL_DIR} M=${S}/kmod/picoevb"
MAKE_TARGETS = "modules"
MODULES_MODULE_SYMVERS_LOCATION = "kmod/picoevb"

# NVIDIA exports nvidia_p2p_* with plain EXPORT_SYMBOL, which symbol_get() cannot resolve on kernels >= 6.5:
# call them directly (p2p.c's GDR_P2P_LINKED, a hard module dependency modprobe follows) and compile
# against NVIDIA's own header (GDR_P2P_SYSTEM_HEADER), whose struct layout is the one the module has.
EXTRA_OEMAKE += "KCFLAGS='-DGDR_P2P_LINKED -DGDR_P2P_SYSTEM_HEADER -I${STAGING_INCDIR}/nvidia-kernel-oot'"

RDEPENDS:${PN} += "nv-kernel-module-nvidia-p2p"
KERNEL_MODULE_AUTOLOAD += "picoevb"
