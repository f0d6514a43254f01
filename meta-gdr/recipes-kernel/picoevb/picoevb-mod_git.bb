SUMMARY = "picoevb.ko, the gdr PicoEVB driver"
DESCRIPTION = "The gdr PCI driver for the PicoEVB FPGA card (XDMA), pinning CUDA memory through NVIDIA's \
               nvidia_p2p, in the flavour the machine's kernel takes: Rust-for-Linux (linux-yocto 6.18, \
               Orin) or C glue around the same core-only Rust logic (L4T R35's linux-tegra 5.10, Xavier)."
SECTION = "kernel/modules"
LICENSE = "GPL-2.0-only"
LIC_FILES_CHKSUM = "file://LICENSE;md5=202ed382cf0c4e08eb5105115674aa00 \
                    file://LICENSES/GPL-2.0-only.txt;md5=b234ee4d69f5fce4486a80fdaf4a4263"

inherit gdr_source gdr_rust_version

# The flavour follows the kernel provider, as an override: gdr-kernel-linux-tegra (L4T R35's 5.10) takes
# kmod/picoevb-5.10; any other kernel takes kmod/picoevb, the Rust-for-Linux module, which needs
# oe-core's module-rust (wrynose on) and a kernel with KERNEL_FEATURES "rust" (module-rust skips the
# recipe otherwise, with that reason; before wrynose gdr_needs_module_rust does).
OVERRIDES .= ":gdr-kernel-${PREFERRED_PROVIDER_virtual/kernel}"

# -- Rust-for-Linux (Orin, wrynose: linux-yocto 6.18 with "rust") --
GDR_KMOD_CLASS = "${@'module-rust' if gdr.source.has_class(d, 'module-rust') else 'gdr_needs_module_rust'}"
GDR_KMOD_DIR = "kmod/picoevb"
# NVIDIA's nvidia_p2p comes from nvidia-kernel-oot: module.bbclass points KBUILD_EXTRA_SYMBOLS at its
# Module.symvers for this DEPENDS, and its headers (linux/nv-p2p.h) are staged under nvidia-kernel-oot.
GDR_KMOD_DEPENDS = "kernel-module-nvidia-kernel-oot"
GDR_KMOD_CFLAGS = "-I${STAGING_INCDIR}/nvidia-kernel-oot"
GDR_KMOD_RDEPENDS = "nv-kernel-module-nvidia-p2p"

# -- Thor (tegra264: linux-yocto 6.18 as Orin). NVIDIA's CUDA 13 GPUDirect RDMA guide: nvidia_p2p is not
# supported on Blackwell-based Tegra. The module is built without it (no link to nvidia-kernel-oot, no
# hard dependency on nvidia-p2p): PIN_CUDA answers as on a box without a provider, ABI_INFO has no
# CAP_CUDA_* bit, and the agent's self-test takes CUDA pinned host memory (gdr_client::gpu_path). --
GDR_KMOD_DEPENDS:tegra264 = ""
GDR_KMOD_P2P_CFLAGS:tegra264 = ""
GDR_KMOD_RDEPENDS:tegra264 = ""

# -- L4T R35 (Xavier, scarthgap-l4t-r35.x: linux-tegra 5.10, no Rust-for-Linux) --
GDR_KMOD_CLASS:gdr-kernel-linux-tegra = "module"
GDR_KMOD_DIR:gdr-kernel-linux-tegra = "kmod/picoevb-5.10"
# The logic is core-only Rust, compiled as Rust-for-Linux compiles kernel Rust: rust-native's rustc for the
# kernel's target against a core built from the library sources of the same Rust release
# (rust-library-src-native). nvidia-p2p is in linux-tegra's tree (drivers/nv-p2p, include/linux/nv-p2p.h)
# and its symbols in the kernel's Module.symvers, so no extra symbols or include path.
GDR_KMOD_DEPENDS:gdr-kernel-linux-tegra = "rust-native rust-library-src-native"
GDR_KMOD_CFLAGS:gdr-kernel-linux-tegra = ""
GDR_KMOD_RDEPENDS:gdr-kernel-linux-tegra = "kernel-module-nvidia-p2p"
# RUSTC and RUST_LIB_SRC: the names the kernel's own Makefile uses.
GDR_RUST_LIB_SRC = "${STAGING_DATADIR_NATIVE}/rust-library-src/library"
EXTRA_OEMAKE:append:gdr-kernel-linux-tegra = " RUSTC=${STAGING_BINDIR_NATIVE}/rustc RUST_LIB_SRC=${GDR_RUST_LIB_SRC}"

inherit_defer ${GDR_KMOD_CLASS}
DEPENDS += "${GDR_KMOD_DEPENDS}"

# Kbuild directly (the kernel's own M= build; kmod/picoevb/Makefile is a wrapper for hand builds).
EXTRA_OEMAKE += "-C ${STAGING_KERNEL_DIR} M=${S}/${GDR_KMOD_DIR}"
MAKE_TARGETS = "modules"
MODULES_MODULE_SYMVERS_LOCATION = "${GDR_KMOD_DIR}"

# NVIDIA exports nvidia_p2p_* with plain EXPORT_SYMBOL, which symbol_get() cannot resolve on kernels >= 6.5:
# call them directly (p2p.c's GDR_P2P_LINKED, a hard module dependency modprobe follows) and compile
# against NVIDIA's own header (GDR_P2P_SYSTEM_HEADER), whose struct layout is this kernel's.
GDR_KMOD_P2P_CFLAGS ?= "-DGDR_P2P_LINKED -DGDR_P2P_SYSTEM_HEADER ${GDR_KMOD_CFLAGS}"
EXTRA_OEMAKE += "KCFLAGS='${GDR_KMOD_P2P_CFLAGS}'"

RDEPENDS:${PN} += "${GDR_KMOD_RDEPENDS}"
KERNEL_MODULE_AUTOLOAD += "picoevb"
