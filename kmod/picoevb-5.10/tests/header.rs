//! `logic.h` is what cbindgen makes of `rust/picoevb_logic.rs` today (`cbindgen.toml`): the C glue's view of
//! the Rust half cannot drift from it. `GDR_BLESS=1` rewrites the header instead of failing.

use std::path::PathBuf;

#[test]
fn the_committed_header_is_generated_from_the_rust() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let builder = gdr_header_check::cbindgen::Builder::new()
        .with_src(dir.join("rust/picoevb_logic.rs"))
        .with_config(gdr_header_check::config(&dir.join("cbindgen.toml")));
    gdr_header_check::committed_header_is_generated(
        builder,
        &dir.join("logic.h"),
        "GDR_BLESS=1 cargo test -p picoevb-510-surface --test header",
    );
}
