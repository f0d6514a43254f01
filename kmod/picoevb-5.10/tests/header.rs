//! `logic.h` is what cbindgen makes of `rust/picoevb_logic.rs` today (`cbindgen.toml`): the C glue's view of
//! the Rust half cannot drift from it. `GDR_BLESS=1` rewrites the header instead of failing.

use std::path::PathBuf;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generated() -> String {
    let dir = crate_dir();
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_src(dir.join("rust/picoevb_logic.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen reads rust/picoevb_logic.rs")
        .write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn the_committed_header_is_generated_from_the_rust() {
    let path = crate_dir().join("logic.h");
    let want = generated();
    if std::env::var_os("GDR_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write logic.h");
        return;
    }
    let have = std::fs::read_to_string(&path).expect("logic.h");
    assert!(
        have == want,
        "logic.h is stale: run GDR_BLESS=1 cargo test -p picoevb-510-surface --test header\n--- generated:\n{want}"
    );
}
