//! The shared library's soname carries the C interface's major version (src/capi.rs
//! GDRPICO_VERSION_MAJOR), so a program linked against libgdr_client.so.1 never loads an incompatible 2.
fn main() {
    let capi = std::fs::read_to_string("src/capi.rs").expect("src/capi.rs");
    let major = capi
        .lines()
        .find_map(|l| l.strip_prefix("pub const GDRPICO_VERSION_MAJOR: u32 = "))
        .and_then(|v| v.strip_suffix(';'))
        .expect("src/capi.rs defines GDRPICO_VERSION_MAJOR");
    println!("cargo:rerun-if-changed=src/capi.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libgdr_client.so.{major}");
}
