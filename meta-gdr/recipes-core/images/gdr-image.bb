SUMMARY = "gdr appliance: a small systemd image whose agent loads and self-tests the PicoEVB at boot"
LICENSE = "MIT"

inherit core-image features_check

REQUIRED_DISTRO_FEATURES = "systemd usrmerge"

IMAGE_INSTALL = "packagegroup-core-boot packagegroup-gdr ${CORE_IMAGE_EXTRA_INSTALL}"
IMAGE_LINGUAS = ""
