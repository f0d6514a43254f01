# For recipes that compile gdr's Rust (the agent; the 5.10 module's logic): stop at the recipe's first task
# when this configuration's Rust (RUSTVERSION) is older than the workspace's rust-version in Cargo.toml.
# Without it, scarthgap's own Rust 1.75 fails an hour into the build, after rust-native, with cargo's
# "feature `edition2024` is required". The parse and the dependency graph stay whole.

python do_gdr_check_rust() {
    problem = gdr.source.rust_version_problem(d)
    if problem:
        bb.fatal(problem)
}
do_gdr_check_rust[doc] = "Fail early when this configuration's Rust is older than the workspace's rust-version"
do_gdr_check_rust[vardeps] += "RUSTVERSION"
addtask gdr_check_rust before do_fetch
