//! The added cost of one Project Command call. Three measurements in the
//! same run, all contained (bubblewrap and cgroups, as a user runs them):
//!
//! - `bun_direct`: the command itself, `bun --no-install ./src/cli.ts`
//!   started directly in a directory holding the candidate;
//! - `run_without_call`: `jig run binding:fixer` whose Flow returns at
//!   once (the Run's own cost);
//! - `run_with_call`: the same Run whose Flow calls the command once.
//!
//! The added cost of a call is `run_with_call - run_without_call`
//! (materialising the candidate, a second envelope, Bun's start, the
//! collection and cleanup), reported against `bun_direct`.
//!
//! Measured 2026-12-01 (`cargo bench --profile dev -p jig --bench command`:
//! debug build of jig, 2-core shared machine with other engineers' builds
//! running, medians of 20): `bun_direct` 12.9 ms, `run_without_call`
//! 549 ms, `run_with_call` 711 ms, so one call adds ~161 ms, ~12x running
//! the same command directly. Before the call reused the caller's verified
//! Bun (instead of hashing the ~90 MB runtime again per call) it added
//! ~394 ms (963 - 569) against 20 ms direct.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

fn main() {
    fixture();
    divan::main();
}

struct Fixture {
    dir: tempfile::TempDir,
    direct: PathBuf,
    with_call: String,
    without_call: String,
}

const CLI_TS: &str = "console.log(\"ok \" + process.argv.slice(2).join(\" \"));\n";

const FLOW_TS: &str = r#"import { handle } from "@jigging/flow";
await handle(async (run) => {
  if (run.input.call === false) return { outcome: "done", output: null };
  const value = await run.callCapability({ operationId: "c1", slot: "project", method: "run", input: run.input.call });
  return { outcome: "done", output: value.stdout.text };
});
"#;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn write(root: &Path, path: &str, text: &str) {
    let target = root.join(path);
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::write(target, text).unwrap();
}

fn jig(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_jig"));
    command
        .current_dir(dir)
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .stderr(Stdio::null());
    command
}

fn fixture() -> &'static Fixture {
    static CELL: OnceLock<Fixture> = OnceLock::new();
    CELL.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let contract = std::fs::read_to_string(
            workspace().join("flow/tests/data/project-command.capability.json"),
        )
        .unwrap();
        write(root, "jig.ts", "import { defineJig, discover } from \"@jigging/jig\";\nexport default defineJig({ flows: discover(\"./flows\"), bindings: discover(\"./bindings\") });\n");
        write(root, "flows/repair/FLOW.md", "---\nname: repair\ndescription: Calls one project command.\nuses:\n  project:\n    contract: ./contracts/project-command.capability.json\n---\n");
        write(root, "flows/repair/flow.ts", FLOW_TS);
        write(
            root,
            "flows/repair/contracts/project-command.capability.json",
            &contract,
        );
        write(root, "bindings/fixer.ts", "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"flows/repair\", commands: { cli: { run: \"src/cli.ts\" } } });\n");
        let reviewed = jig(root).args(["review", "--yes"]).output().unwrap();
        assert!(reviewed.status.success(), "{reviewed:?}");
        let direct = root.join("direct");
        write(&direct, "src/cli.ts", CLI_TS);
        let call = serde_json::json!({"command": "cli", "files": {"src/cli.ts": CLI_TS}, "args": ["bench"]});
        Fixture {
            with_call: serde_json::json!({ "call": call }).to_string(),
            without_call: serde_json::json!({ "call": false }).to_string(),
            dir,
            direct,
        }
    })
}

fn run(input: &str, expected: &str) {
    let fixture = fixture();
    let out = jig(fixture.dir.path())
        .args(["run", "binding:fixer", "--input", input])
        .output()
        .expect("jig runs");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(expected));
}

#[divan::bench(sample_count = 20)]
fn run_with_call() {
    run(&fixture().with_call, "\"output\":\"ok bench\\n\"");
}

#[divan::bench(sample_count = 20)]
fn run_without_call() {
    run(&fixture().without_call, "\"output\":null");
}

#[divan::bench(sample_count = 20)]
fn bun_direct() {
    let fixture = fixture();
    let bun = [
        "/usr/bin/bun",
        "/usr/local/bin/bun",
        "/run/current-system/sw/bin/bun",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("an installed bun");
    let out = Command::new(bun)
        .current_dir(&fixture.direct)
        .env_clear()
        .args(["--no-install", "./src/cli.ts", "bench"])
        .output()
        .expect("bun runs");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ok bench\n");
}
