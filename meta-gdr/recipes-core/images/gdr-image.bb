SUMMARY = "gdr appliance image for a Jetson with a PicoEVB"
DESCRIPTION = "A small systemd image with the PicoEVB driver, CUDA's driver library, the gdr agent and, \
               when GDR_BITSTREAM_URI names a release, its bitstream: at every boot the agent programs \
               that release (or keeps the design the card carries) and runs its DMA self-test."
SECTION = "images"
LICENSE = "MIT"

inherit core-image features_check

REQUIRED_DISTRO_FEATURES = "systemd"

IMAGE_INSTALL = "packagegroup-core-boot packagegroup-gdr ${CORE_IMAGE_EXTRA_INSTALL}"
IMAGE_LINGUAS = ""
