//! `logic.h` is what cbindgen makes of `rust/picoevb_logic.rs` today (`cbindgen.toml`): the C glue's view of
//! the Rust half cannot drift from it. `GDR_BLESS=1` rewrites the header instead of failing. The other
//! direction, what C defines for the Rust half, is declared by hand: checked against the Rust imports here.

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
/// value's kind (`p` any pointer, else the integer type's C name; `void` for none).
#[derive(Debug, PartialEq)]
struct Sig {
    params: Vec<String>,
    ret: String,
}

fn rust_kind(t: &str) -> String {
    let t = t.trim();
    if t.starts_with('*') || t.starts_with('&') {
        return "p".into();
    }
    match t {
        "" | "!" => "void",
        "c_int" | "i32" => "int",
        "u8" => "u8",
        "u16" => "u16",
        "u32" => "u32",
        "u64" => "u64",
        "usize" => "size_t",
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
        "unsigned long" => "u64",
        other => other,
    }
    .into()
}

/// The functions the Rust half's `extern "C"` blocks import (what C defines for it).
fn rust_imports(dir: &std::path::Path) -> std::collections::BTreeMap<String, Sig> {
    let mut out = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir.join("rust")).unwrap() {
        let path = e.unwrap().path();
        // The kernel build leaves its objects beside the sources.
        if path.extension().is_none_or(|x| x != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        for block in text.split("extern \"C\" {").skip(1) {
            let block = &block[..block.find("\n}").unwrap()];
            let code: String = block
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join(" ");
            for decl in code.split(';').filter(|d| d.contains("fn ")) {
                let decl = &decl[decl.find("fn ").unwrap() + 3..];
                let (name, rest) = decl.split_once('(').unwrap();
                let (args, ret) = rest.rsplit_once(')').unwrap();
                let params = args
                    .split(',')
                    .filter(|a| !a.trim().is_empty())
                    .map(|a| rust_kind(a.split_once(':').unwrap().1))
                    .collect();
                let ret = rust_kind(ret.trim().trim_start_matches("->"));
                out.insert(name.trim().to_string(), Sig { params, ret });
            }
        }
    }
    out
}

/// The `pevb_*` functions the hand-written headers declare.
fn c_declarations(dir: &std::path::Path) -> std::collections::BTreeMap<String, Sig> {
    let mut out = std::collections::BTreeMap::new();
    for h in [
        "services.h",
        "picoevb.h",
        "../picoevb/cpin.h",
        "../picoevb/p2p.h",
    ] {
        let text = std::fs::read_to_string(dir.join(h)).unwrap();
        // Comments and preprocessor lines out; what is left splits into declarations at ';' and '}'.
        let mut code = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("/*") {
            code.push_str(&rest[..i]);
            rest = &rest[i + rest[i..].find("*/").unwrap() + 2..];
        }
        code.push_str(rest);
        let code: String = code
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect::<Vec<_>>()
            .join(" ");
        for decl in code.split([';', '{', '}']) {
            let Some(open) = decl.find('(') else { continue };
            let head = &decl[..open];
            let name = head
                .rsplit(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .unwrap();
            if !name.starts_with("pevb_") || head.contains("static") || head.contains("struct {") {
                continue;
            }
            let ret = c_kind(&format!("{} x", head[..head.len() - name.len()].trim()));
            let args = &decl[open + 1..decl.rfind(')').unwrap()];
            let params = args
                .split(',')
                .map(c_kind)
                .filter(|k| k != "void")
                .collect();
            out.insert(name.to_string(), Sig { params, ret });
        }
    }
    out
}

/// What C defines for the Rust half is declared by hand (`services.h`, `picoevb.h` for the platform's
/// register services, which C calls too, and the shared `cpin.h` and `p2p.h`): each function the Rust `extern "C"`
/// blocks import is declared there with the same parameters and return value, kind for kind (a pointer for
/// a pointer: the Rust side passes C's structs as `c_void`).
#[test]
fn every_c_service_is_declared_as_rust_imports_it() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let rust = rust_imports(&dir);
    let c = c_declarations(&dir);
    assert!(
        rust.len() > 40,
        "found only {} imports: the parser broke",
        rust.len()
    );
    let mut wrong = Vec::new();
    for (name, sig) in &rust {
        match c.get(name) {
            None => wrong.push(format!(
                "{name}: imported by the Rust half, declared in no header"
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
