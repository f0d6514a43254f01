SUMMARY = "gdr: PicoEVB driver, bitstream, agent, CUDA driver library"
DESCRIPTION = "Everything gdr puts on a Jetson, for people who add gdr to their own systemd image: \
               IMAGE_INSTALL:append = \" packagegroup-gdr\" (docs/yocto.md). OpenOCD comes with \
               gdr-agent (its PACKAGECONFIG \"openocd\")."
SECTION = "base"
# The kernel module differs per kernel, so this is not allarch.
PACKAGE_ARCH = "${MACHINE_ARCH}"

inherit packagegroup

# picoevb-mod builds the flavour the machine's kernel takes (Rust-for-Linux or L4T R35's 5.10).
RDEPENDS:${PN} = "\
    gdr-agent \
    libgdr-client \
    picoevb-bitstream \
    picoevb-mod \
    tegra-libraries-cuda \
"
