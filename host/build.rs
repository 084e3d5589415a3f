//! Embeds the bundled Python SDK (`host/python/jiggy/`) into the binary, so
//! the Python recipe can supply `jiggy.flow` without an installation.

use std::fmt::Write;
use std::path::Path;

fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read python sdk dir")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if path.is_dir() {
            if name != "__pycache__" {
                collect(&path, &format!("{prefix}{name}/"), out);
            }
        } else if name.ends_with(".py") {
            out.push((format!("{prefix}{name}"), path.display().to_string()));
        }
    }
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let sdk = Path::new(&manifest).join("python").join("jiggy");
    println!("cargo:rerun-if-changed={}", sdk.display());
    let mut files = Vec::new();
    if sdk.is_dir() {
        collect(&sdk, "jiggy/", &mut files);
    }
    for (_, path) in &files {
        println!("cargo:rerun-if-changed={path}");
    }
    let mut code = String::from("pub const PYTHON_SDK: &[(&str, &[u8])] = &[\n");
    for (rel, path) in &files {
        writeln!(code, "    ({rel:?}, include_bytes!({path:?})),").unwrap();
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("python_sdk.rs");
    std::fs::write(out, code).unwrap();
}
