//! `include/gdrpico.h` is what cbindgen makes of `src/capi.rs` today, and a C compiler accepts it with its
//! layout assertions. `GDR_BLESS=1` rewrites the header instead of failing.

use std::path::PathBuf;
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_committed_header_is_generated_from_the_rust() {
    let dir = crate_dir();
    let builder = gdr_header_check::cbindgen::Builder::new()
        .with_crate(&dir)
        .with_config(gdr_header_check::config(&dir.join("cbindgen.toml")));
    gdr_header_check::committed_header_is_generated(
        builder,
        &dir.join("include/gdrpico.h"),
        "GDR_BLESS=1 cargo test -p gdr-client --test header",
    );
}

#[test]
fn a_c_compiler_takes_the_header_and_its_layout() {
    let dir = std::env::temp_dir().join(format!("gdrpico-h-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("use.c");
    std::fs::write(
        &c,
        "#include \"gdrpico.h\"\n\
         int main(void) {\n\
             struct gdrpico_card_info info;\n\
             int fd;\n\
             (void)info;\n\
             return gdrpico_version() >> 16 == GDRPICO_VERSION_MAJOR ? gdrpico_open(0, &fd) : GDRPICO_E_INVALID;\n\
         }\n",
    )
    .unwrap();
    for std in ["-std=c11", "-std=gnu17"] {
        let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args([
                std,
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                "-fsyntax-only",
                "-I",
            ])
            .arg(crate_dir().join("include"))
            .arg(&c)
            .output()
            .expect("a C compiler (cc)");
        assert!(
            out.status.success(),
            "cc {std} refused gdrpico.h:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
