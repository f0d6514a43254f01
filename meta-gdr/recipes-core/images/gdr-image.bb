SUMMARY = "gdr appliance image for a Jetson with a PicoEVB"
DESCRIPTION = "A small systemd image with the PicoEVB driver, its bitstream, CUDA's driver library and the \
               gdr agent, enabled so that it loads the FPGA and runs its DMA self-test at every boot."
SECTION = "images"
LICENSE = "MIT"

inherit core-image features_check

REQUIRED_DISTRO_FEATURES = "systemd usrmerge"

IMAGE_INSTALL = "packagegroup-core-boot packagegroup-gdr ${CORE_IMAGE_EXTRA_INSTALL}"
IMAGE_LINGUAS = ""
