//! What the preparation benches share: a one-Flow project and its review.
//! (A directory module, so Cargo does not take it for a bench target.)

use std::path::Path;
use std::process::Command;

const JIG_TS: &str = "import { defineJig, discover } from \"@jigging/jig\";\nexport default defineJig({ flows: discover(\"./flows\"), bindings: discover(\"./bindings\") });\n";

/// A fresh project whose `flows/hello` holds FLOW.md and `files` (name,
/// text), with `host_toml` as its host configuration.
pub fn project(files: &[(&str, &str)], host_toml: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let flow = dir.path().join("flows/hello");
    std::fs::create_dir_all(&flow).unwrap();
    std::fs::write(dir.path().join("jig.ts"), JIG_TS).unwrap();
    std::fs::write(
        flow.join("FLOW.md"),
        "---\nname: hello\ndescription: Greets.\n---\n",
    )
    .unwrap();
    for (name, text) in files {
        std::fs::write(flow.join(name), text).unwrap();
    }
    let config = dir.path().join("config/jig");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("host.toml"), host_toml).unwrap();
    dir
}

/// `jig review --yes` of `dir` with its own host configuration; it must
/// succeed.
pub fn review(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_jig"))
        .args(["review", "--yes"])
        .current_dir(dir)
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "review failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
