SUMMARY = "gdr on a Jetson: the PicoEVB driver, its bitstream, the agent and CUDA's driver library"
DESCRIPTION = "Add this to IMAGE_INSTALL to put gdr into an existing systemd image."
# The kernel module differs per kernel, so this is not allarch.
PACKAGE_ARCH = "${MACHINE_ARCH}"

inherit packagegroup

# picoevb-mod: Rust-for-Linux driver (linux-yocto 6.18 with KERNEL_FEATURES "rust");
# picoevb-mod-5.10: L4T R35's linux-tegra 5.10.
GDR_KERNEL_MODULE ?= "${@'picoevb-mod-5.10' if d.getVar('PREFERRED_PROVIDER_virtual/kernel') == 'linux-tegra' else 'picoevb-mod'}"

RDEPENDS:${PN} = "\
    ${GDR_KERNEL_MODULE} \
    picoevb-bitstream \
    gdr-agent \
    tegra-libraries-cuda \
"
