# For recipes that compile gdr's Rust (the agent; the 5.10 module's logic): stop at the recipe's first task
# when this configuration's Rust (RUSTVERSION) is outside the range CI compiles gdr with: older than the
# workspace's rust-version in Cargo.toml (the oldest Rust a layer configuration resolves), or newer than
# the newest stable that bench/matrix's rustc rows compiled with when this was set. Without it, scarthgap's
# own Rust 1.75 fails an hour into the build, after rust-native, with cargo's "feature `edition2024` is
# required". The parse and the dependency graph stay whole.

# Raise it when CI's `stable` rows pass with a newer Rust (docs/toolchain.md).
GDR_RUST_NEWEST_TESTED ?= "1.99"
# "1" builds with a newer Rust than that, with a warning instead of the stop.
GDR_RUST_ALLOW_UNTESTED ??= "0"

python do_gdr_check_rust() {
    problem, fatal = gdr.source.rust_version_problem(d)
    if fatal:
        bb.fatal(problem)
    elif problem:
        bb.warn(problem)
}
do_gdr_check_rust[doc] = "Fail early when this configuration's Rust is outside the range CI compiles gdr with"
do_gdr_check_rust[vardeps] += "RUSTVERSION GDR_RUST_NEWEST_TESTED GDR_RUST_ALLOW_UNTESTED"
addtask gdr_check_rust before do_fetch
