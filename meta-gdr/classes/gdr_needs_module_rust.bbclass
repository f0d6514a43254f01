# Stands in for oe-core's module-rust on releases that lack it (before wrynose), so that a Rust kernel
# module recipe is skipped with a reason instead of failing the whole parse.

# nooelint: oelint.task.noanonpython - skipping a recipe is what anonymous python is for
python __anonymous() {
    raise bb.parse.SkipRecipe("needs oe-core's module-rust class (Yocto 6.0 wrynose or newer) and a kernel "
                              "with Rust; on L4T R35 (linux-tegra 5.10) use picoevb-mod-5.10")
}
