# The gdr repository, for the recipes that build it (gdr-agent, picoevb-mod): a git source pinned by
# SRCREV, with PV from the workspace's version. To build a working tree instead (your edits, uncommitted
# ones included): externalsrc or `devtool modify` (docs/yocto.md, "Working on gdr's sources").

# [workspace.package] version in Cargo.toml (check.sh keeps them equal); "+git" makes the packages'
# version carry the commit, so a feed sees every SRCREV bump as an upgrade.
GDR_VERSION = "0.1.0"
PV = "${GDR_VERSION}+git"
# The repository has no public home yet. The default is the gdr checkout that holds this layer, read through
# git, so a build takes the pinned commit and never the working tree. Where the layer is used apart from a
# checkout, point it at a clone in local.conf:
#   GDR_GIT_URI = "git://git.example.org/gdr.git;protocol=https"
GDR_GIT_URI ??= "git://${GDR_ROOT};protocol=file"
GDR_GIT_BRANCH ??= "main"
SRC_URI = "${GDR_GIT_URI};branch=${GDR_GIT_BRANCH};destsuffix=gdr"
# The commit the recipes describe: meta-gdr/scripts/check.sh fails when Cargo.lock, install.list, the
# sysusers file or the licences changed since it (the crates list, install lines, users and checksums of
# the recipes are written for it). After such a change is committed, set SRCREV to that commit.
SRCREV = "d9c2432a841b611c363140de3aa242ce12d60bfa"
S = "${UNPACKDIR}/gdr"
