# picoevb-mod-5.10 builds `core` for the kernel's target from Rust's library sources, as Rust-for-Linux
# does. wrynose's rust-native installs them into rustlib/src/rust (oe-core did it for the kernel's Rust);
# meta-lts-mixins' scarthgap/rust does not, so do the same here. Only rust-native changes.
# nooelint: oelint.vars.noncoreoverride - applies only with meta-lts-mixins' Rust, and only adds files
rust_do_install:append:class-native() {
	install -d ${D}${libdir}/rustlib/src/rust
	cp -r ${S}/library ${D}${libdir}/rustlib/src/rust
	find ${D}${libdir}/rustlib/src/rust -name "*.sh" -type f -delete
}
