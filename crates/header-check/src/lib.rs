//! The check both generated C headers of gdr run as a test (`agent/client/include/gdrpico.h`,
//! `kmod/picoevb-5.10/logic.h`): the committed header is exactly what cbindgen makes of the Rust today, so
//! C and Rust cannot drift. With `GDR_BLESS` set in the environment it rewrites the header instead.

use std::path::Path;

pub use cbindgen;

/// Runs `builder` (its sources and configuration set) and compares its output with the committed file at
/// `header`; `bless` is the command that rewrites it, for the failure message.
///
/// # Panics
/// When cbindgen fails, the header cannot be read or written, or the committed header is stale: this is a
/// test.
pub fn committed_header_is_generated(builder: cbindgen::Builder, header: &Path, bless: &str) {
    let mut out = Vec::new();
    builder
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen for {}: {e}", header.display()))
        .write(&mut out);
    let want = String::from_utf8(out).expect("the header is UTF-8");
    if std::env::var_os("GDR_BLESS").is_some() {
        std::fs::write(header, &want).unwrap_or_else(|e| panic!("write {}: {e}", header.display()));
        return;
    }
    let have = std::fs::read_to_string(header)
        .unwrap_or_else(|e| panic!("read {}: {e}", header.display()));
    assert!(
        have == want,
        "{} is stale: run {bless}\n--- generated:\n{want}",
        header.display()
    );
}

/// The configuration in `file` (a crate's `cbindgen.toml`).
///
/// # Panics
/// When it cannot be read or parsed.
pub fn config(file: &Path) -> cbindgen::Config {
    cbindgen::Config::from_file(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}
