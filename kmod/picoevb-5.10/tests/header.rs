//! `logic.h` is what cbindgen makes of `rust/picoevb_logic.rs` today (`cbindgen.toml`): the C glue's view of
//! the Rust half cannot drift from it. `GDR_BLESS=1` rewrites the header instead of failing. The other
//! direction, what C defines for the Rust half, is declared by hand: checked against the Rust imports here,
//! for this module and for the 6.18 module's `ffi.rs`, whose C helpers it shares in part.

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

/// One function's signature, reduced to what C and Rust must agree on: each parameter's and the return
/// value's kind (`p` any pointer, else the integer's width and signedness; `void` for none). Both kernels'
/// targets (x86_64, arm64) are LP64: `long` and `size_t` are 64 bits, as Rust's `isize`/`usize` (the 6.18
/// kernel crate's `c_long`/`c_ulong`).
#[derive(Debug, PartialEq)]
struct Sig {
    params: Vec<String>,
    ret: String,
}

fn rust_kind(t: &str) -> String {
    let t = t.trim();
    // A function pointer is a pointer (`Option<unsafe extern "C" fn(..)>`).
    if t.starts_with('*') || t.starts_with('&') || t.starts_with("Option<") && t.contains("fn(") {
        return "p".into();
    }
    let t = t
        .trim_start_matches("core::ffi::")
        .trim_start_matches("kernel::ffi::");
    match t {
        "" | "!" => "void",
        "c_int" | "i32" => "i32",
        "c_uint" | "u32" => "u32",
        "c_long" | "isize" | "i64" => "i64",
        "c_ulong" | "usize" | "u64" => "u64",
        "u8" => "u8",
        "u16" => "u16",
        "bool" => "bool",
        other => {
            panic!("a C service takes or returns a Rust type this check does not know: {other}")
        }
    }
    .into()
}

fn c_kind(t: &str) -> String {
    let t = t.replace("__noreturn", "").replace("const ", "");
    let t = t.trim();
    if t.contains('*') {
        return "p".into();
    }
    // The parameter's name is the last word.
    let ty = match t.rsplit_once(char::is_whitespace) {
        Some((ty, _name)) => ty.trim(),
        None => t,
    };
    match ty {
        "" | "void" => "void",
        "int" | "s32" => "i32",
        "unsigned int" | "u32" => "u32",
        "long" | "ssize_t" | "s64" => "i64",
        "unsigned long" | "size_t" | "u64" => "u64",
        // Types no Rust import uses keep their name: they match nothing.
        other => other,
    }
    .into()
}

/// `s` split at each `sep` outside parentheses and angle brackets (a function pointer's own arguments stay
/// with it).
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let (mut out, mut depth, mut from) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '<' => depth += 1,
            ')' | '>' if !s[..i].ends_with('-') => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&s[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[from..]);
    out
}

/// The name and signature of the first `fn` in `decl`, a Rust function's head.
fn rust_signature(decl: &str) -> (String, Sig) {
    let decl = &decl[decl.find("fn ").unwrap() + 3..];
    let (name, rest) = decl.split_once('(').unwrap();
    let (args, ret) = rest.rsplit_once(')').unwrap();
    let params = split_top(args, ',')
        .into_iter()
        .filter(|a| !a.trim().is_empty())
        .map(|a| rust_kind(a.split_once(':').unwrap().1))
        .collect();
    let ret = rust_kind(ret.trim().trim_start_matches("->"));
    (name.trim().to_string(), Sig { params, ret })
}

/// The functions the `extern "C"` blocks of these Rust files import (what C defines for them).
fn rust_imports(files: &[PathBuf]) -> std::collections::BTreeMap<String, Sig> {
    let mut out = std::collections::BTreeMap::new();
    for path in files {
        let text = std::fs::read_to_string(path).unwrap();
        for block in text.split("extern \"C\" {").skip(1) {
            let block = &block[..block.find("\n}").unwrap()];
            let code: String = block
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join(" ");
            for decl in code.split(';').filter(|d| d.contains("fn ")) {
                let (name, sig) = rust_signature(decl);
                out.insert(name, sig);
            }
        }
    }
    out
}

/// The functions these Rust files export to C (`#[no_mangle] .. extern "C" fn`).
fn rust_exports(files: &[PathBuf]) -> std::collections::BTreeMap<String, Sig> {
    let mut out = std::collections::BTreeMap::new();
    for path in files {
        let text = std::fs::read_to_string(path).unwrap();
        for item in text.split("#[no_mangle]").skip(1) {
            let head = &item[..item.find('{').unwrap()];
            let (name, sig) = rust_signature(head);
            out.insert(name, sig);
        }
    }
    out
}

/// The Rust sources in `dir` (the kernel build leaves its objects beside them).
fn rust_files(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    files
}

/// C text at file scope: comments, preprocessor lines (with their continuations) and every brace's
/// contents dropped, so a function body's calls are not read as declarations.
fn file_scope(text: &str) -> String {
    let mut code = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        rest = &rest[i + rest[i..].find("*/").unwrap() + 2..];
    }
    code.push_str(rest);
    let mut lines = Vec::new();
    let mut in_directive = false;
    for l in code.lines() {
        let l = l.split("//").next().unwrap();
        let continued = l.trim_end().ends_with('\\');
        if in_directive || l.trim_start().starts_with('#') {
            in_directive = continued;
            continue;
        }
        lines.push(l);
    }
    let mut out = String::new();
    let mut depth = 0;
    for c in lines.join(" ").chars() {
        match c {
            '{' => {
                if depth == 0 {
                    out.push('{');
                }
                depth += 1;
            }
            '}' => {
                depth -= 1;
                if depth == 0 {
                    out.push('}');
                }
            }
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// The `pevb_*` functions these C files declare or define at file scope, none static.
fn c_declarations(files: &[PathBuf]) -> std::collections::BTreeMap<String, Sig> {
    let mut out = std::collections::BTreeMap::new();
    for path in files {
        let code = file_scope(&std::fs::read_to_string(path).unwrap());
        for decl in code.split([';', '{', '}']) {
            let Some(open) = decl.find('(') else { continue };
            let head = &decl[..open];
            let name = head
                .rsplit(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap();
            if !name.starts_with("pevb_") || head.contains("static") || head.contains('=') {
                continue;
            }
            let ret = c_kind(&format!("{} x", head[..head.len() - name.len()].trim()));
            let args = &decl[open + 1..decl.rfind(')').unwrap()];
            let params = split_top(args, ',')
                .into_iter()
                .map(c_kind)
                .filter(|k| k != "void")
                .collect();
            let sig = Sig { params, ret };
            // A prototype and its definition, or a function's two configurations, must agree too.
            if let Some(seen) = out.get(name) {
                assert_eq!(
                    seen, &sig,
                    "{name} is declared twice, differently ({path:?})"
                );
            }
            out.insert(name.to_string(), sig);
        }
    }
    out
}

/// Each function `rust` imports is declared in `c` with the same parameters and return value.
fn assert_rust_imports_match(
    rust: std::collections::BTreeMap<String, Sig>,
    c: std::collections::BTreeMap<String, Sig>,
) {
    assert!(
        rust.len() > 40,
        "found only {} imports: the parser broke",
        rust.len()
    );
    let mut wrong = Vec::new();
    for (name, sig) in &rust {
        match c.get(name) {
            None => wrong.push(format!(
                "{name}: imported by the Rust half, declared in none of the C files read"
            )),
            Some(d) if d != sig => wrong.push(format!("{name}: Rust {sig:?}, C {d:?}")),
            Some(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "C services and their Rust imports differ:\n{}",
        wrong.join("\n")
    );
}

/// What C defines for the Rust half is declared by hand (`services.h`, `picoevb.h` for the platform's
/// register services, which C calls too, and the shared `cpin.h` and `p2p.h`): each function the Rust `extern "C"`
/// blocks import is declared there with the same parameters and return value, kind for kind (a pointer for
/// a pointer: the Rust side passes C's structs as `c_void`).
#[test]
fn every_c_service_is_declared_as_rust_imports_it() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let headers = [
        "services.h",
        "picoevb.h",
        "../picoevb/cpin.h",
        "../picoevb/p2p.h",
    ];
    assert_rust_imports_match(
        rust_imports(&rust_files(&dir.join("rust"))),
        c_declarations(&headers.map(|h| dir.join(h))),
    );
}

/// The same for the 6.18 module: `ffi.rs` declares the C helpers by hand (its own and the shared ones), and
/// C declares the one function Rust exports to it; each is checked against the other side (the prototypes
/// and definitions of `kmod/picoevb`'s `.c` and `.h` files).
#[test]
fn the_orin_modules_c_helpers_are_declared_as_rust_imports_them() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../picoevb");
    let c: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "c" || x == "h"))
        .filter(|p| !p.to_string_lossy().ends_with(".mod.c"))
        .collect();
    let rust = rust_files(&dir);
    let mut both = rust_imports(&rust);
    // What C calls of the Rust half (`pin.h`'s coalescing) is declared by hand too.
    let exports = rust_exports(&rust);
    assert!(
        !exports.is_empty(),
        "found no Rust export: the parser broke"
    );
    both.extend(exports);
    assert_rust_imports_match(both, c_declarations(&c));
}
