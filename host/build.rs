//! Links `jig` with packed relative relocations where this machine can
//! (see [`pack_relative_relocations`]); the bundled SDKs are embedded by the
//! engine's own build script.

use std::path::Path;

fn main() {
    pack_relative_relocations();
}

/// Link `jig` with packed relative relocations (DT_RELR) where the linker
/// makes them and the C library's loader applies them (glibc 2.36 or later):
/// the loader then reads 14 KB of relocations at every start instead of
/// 1.3 MB, which is a measurable part of a short Run. The flag is proved by
/// linking and running a position-independent C program with it on this
/// machine; anywhere it fails (an older glibc or binutils, another C
/// library, a cross build), `jig` links as before.
fn pack_relative_relocations() {
    const FLAG: &str = "-Wl,-z,pack-relative-relocs";
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || var("TARGET") != var("HOST")
    {
        return;
    }
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    let dir = Path::new(&var("OUT_DIR")).join("relr-probe");
    let _ = std::fs::create_dir_all(&dir);
    let source = dir.join("probe.c");
    let program = dir.join("probe");
    // The table's pointers are relative relocations the loader must apply.
    let pointed = "static const char *const names[] = {\"a\", \"b\"};\n\
                   int main(void) { volatile int i = 1; return names[i][0] == 'b' ? 0 : 1; }\n";
    if std::fs::write(&source, pointed).is_err() {
        return;
    }
    let linked = std::process::Command::new(&linker)
        .args(["-fPIE", "-pie", FLAG, "-o"])
        .arg(&program)
        .arg(&source)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let runs = linked
        && std::process::Command::new(&program)
            .status()
            .is_ok_and(|s| s.success());
    if runs {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    }
}
