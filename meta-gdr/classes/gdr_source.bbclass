# Recipes that build and install files of the gdr repository that holds this layer (GDR_ROOT, set in
# conf/layer.conf). file:// URIs name paths relative to the repository root and unpack under ${S}
# keeping those paths, so kmod/picoevb still finds ../../crates and the cargo workspace stays whole.

# nooelint: oelint.vars.fileextrapaths,oelint.vars.outofcontext - this layer's recipes take their files from the repository around it, not from a bbappend's directory
FILESEXTRAPATHS:prepend := "${GDR_ROOT}:"
S = "${UNPACKDIR}/gdr"

# Installs every file agent/deploy/install.list names (the list the emulated appliance installs from):
# "<source relative to the repository root> <absolute destination> <mode>" per line, # comments.
# gdr.source.parse_install_list checked its syntax at parse time.
gdr_install_list[doc] = "Install the files agent/deploy/install.list names, as the emulated appliance does"
gdr_install_list() {
	sed -e 's/#.*//' "${S}/agent/deploy/install.list" | while read -r src dst mode; do
		[ -n "$src" ] || continue
		[ -f "${S}/$src" ] || bbfatal "agent/deploy/install.list names $src, which is not in the repository"
		install -D -m "$mode" "${S}/$src" "${D}$dst"
	done
}
