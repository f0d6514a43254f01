SUMMARY = "gdr: PicoEVB driver, bitstream, agent, OpenOCD, CUDA driver library"
DESCRIPTION = "Everything gdr puts on a Jetson, for people who add gdr to their own systemd image: \
               IMAGE_INSTALL:append = \" packagegroup-gdr\" (docs/yocto.md)."
SECTION = "base"
# The kernel module differs per kernel, so this is not allarch.
PACKAGE_ARCH = "${MACHINE_ARCH}"

inherit packagegroup

# picoevb-mod: Rust-for-Linux driver (linux-yocto 6.18 with KERNEL_FEATURES "rust");
# picoevb-mod-5.10: L4T R35's linux-tegra 5.10.
GDR_KERNEL_MODULE ?= "${@'picoevb-mod-5.10' if d.getVar('PREFERRED_PROVIDER_virtual/kernel') == 'linux-tegra' else 'picoevb-mod'}"

RDEPENDS:${PN} = "\
    ${GDR_KERNEL_MODULE} \
    gdr-agent \
    openocd \
    picoevb-bitstream \
    tegra-libraries-cuda \
"
