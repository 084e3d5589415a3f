//! Embeds the bundled SDKs into the binary, so recipes can supply them
//! without an installation: the Python SDK (`host/python/jiggy/`, imported
//! as `jiggy.flow`) and the JavaScript SDK (`host/typescript/flow/`, imported
//! as `@jigging/flow`).

use std::fmt::Write;
use std::path::Path;

fn collect(dir: &Path, prefix: &str, keep: &dyn Fn(&str) -> bool, out: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if path.is_dir() {
            if name != "__pycache__" && name != "node_modules" && name != "tests" {
                collect(&path, &format!("{prefix}{name}/"), keep, out);
            }
        } else if keep(&name) {
            out.push((format!("{prefix}{name}"), path.display().to_string()));
        }
    }
}

fn table(name: &str, files: &[(String, String)]) -> String {
    let mut code = format!("pub const {name}: &[(&str, &[u8])] = &[\n");
    for (rel, path) in files {
        writeln!(code, "    ({rel:?}, include_bytes!({path:?})),").unwrap();
        println!("cargo:rerun-if-changed={path}");
    }
    code.push_str("];\n");
    code
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let python = Path::new(&manifest).join("../python").join("jiggy");
    let typescript = Path::new(&manifest).join("../typescript").join("flow");
    println!("cargo:rerun-if-changed={}", python.display());
    println!("cargo:rerun-if-changed={}", typescript.display());
    let mut python_files = Vec::new();
    collect(
        &python,
        "jiggy/",
        &|n| n.ends_with(".py"),
        &mut python_files,
    );
    let mut js_files = Vec::new();
    collect(
        &typescript,
        "",
        &|n| n.ends_with(".js") || n.ends_with(".d.ts") || n == "package.json",
        &mut js_files,
    );
    let code = table("PYTHON_SDK", &python_files) + &table("JS_SDK", &js_files);
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("python_sdk.rs");
    std::fs::write(out, code).unwrap();
}
