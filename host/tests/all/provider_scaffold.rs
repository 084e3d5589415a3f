//! `jig provider new NAME --lang rust|python|js`: each scaffold builds and
//! passes its own test (`test.sh`: build the component, then one call
//! through `jig provider call`), run as an author would run it, and the
//! component it built then serves a Flow through `jig review` and `jig run`
//! (the author's guide, steps 4 to 6). Each language builds once: the same
//! test checks its script and its Flow.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{self, run_jig};

/// `PATH` with this build's `jig` first.
fn path_with_jig() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_jig")).parent().unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn scaffold(dir: &Path, lang: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["provider", "new", "greet", "--lang", lang, "greet"];
    args.extend_from_slice(extra);
    let made = run_jig(dir, &args);
    assert_eq!(made.status, 0, "{made:?}");
    assert!(made.stdout.contains("test.sh"), "{made:?}");
    let root = dir.join("greet");
    assert!(root.join("greet.capability.json").is_file());
    assert!(root.join("README.md").is_file());
    root
}

fn run_test_script(root: &Path, env: &[(&str, &std::ffi::OsStr)]) {
    let mut test = Command::new(root.join("test.sh"));
    test.env("PATH", path_with_jig())
        .env_remove("JIG_CONFIG")
        .env("XDG_CONFIG_HOME", root.join(".test-config-home"))
        .env("PYTHONDONTWRITEBYTECODE", "1");
    for (name, value) in env {
        test.env(name, value);
    }
    let out = support::output(test.output().expect("test.sh runs"));
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(out.stdout, "ok: \"Hello, Ada!\"\n", "{out:?}");
}

/// Made from this build, which has no SDK installed beside it: the
/// provider SDK of the checkout it was built in is found, and named.
#[test]
fn the_rust_scaffold_builds_and_passes_its_test() {
    let dir = tempfile::tempdir().unwrap();
    let sdk = support::workspace()
        .join("providers/sdk")
        .canonicalize()
        .unwrap();
    let made = run_jig(
        dir.path(),
        &["provider", "new", "greet", "--lang", "rust", "greet"],
    );
    assert_eq!(made.status, 0, "{made:?}");
    assert!(
        made.stdout.starts_with(&format!(
            "using the provider SDK at {}\ncreated ",
            sdk.display()
        )),
        "{made:?}"
    );
    let root = dir.path().join("greet");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "jig-provider-sdk = {{ path = \"{}\" }}",
            sdk.display()
        )),
        "{manifest}"
    );
    // One target directory for every run, so the SDK's dependencies are
    // compiled once.
    let target = support::workspace().join("target/guests/scaffold-rust");
    run_test_script(&root, &[("CARGO_TARGET_DIR", target.as_os_str())]);
    // The guide's last steps: the component serves a Flow through review
    // and run.
    serves_a_flow(&root, &target.join("wasm32-wasip2/release/greet.wasm"));
}

const HELLO_MD: &str = "---\nname: hello\ndescription: Greets through the greet provider.\nuses:\n  greeter:\n    contract: ./contracts/greet.capability.json\n---\n";

const HELLO_PY: &str = r#"from jiggy.flow import handle


async def run(ctx):
    greeting = await ctx.call_capability(
        operation_id="greet:1", slot="greeter", method="greet", input={"name": ctx.input}
    )
    return {"outcome": "done", "output": greeting}


handle(run)
"#;

/// Steps 4 to 6 of the author's guide (providers/README.md).
fn serves_a_flow(scaffold: &Path, component: &Path) {
    let contract = std::fs::read_to_string(scaffold.join("greet.capability.json")).unwrap();
    let config = format!(
        "[[providers]]\nname = \"greet\"\nkind = \"wasm\"\npath = \"{}\"\nsettings = {{}}\n",
        component.display()
    );
    // A new project, as the guide makes it.
    let home = tempfile::tempdir().unwrap();
    let made = run_jig(home.path(), &["init", "--bare", "shop"]);
    assert_eq!(made.status, 0, "{made:?}");
    let project = home.path().join("shop");
    support::write_files(
        &project,
        &[
            ("flows/hello/FLOW.md", HELLO_MD),
            ("flows/hello/flow.py", HELLO_PY),
            ("flows/hello/contracts/greet.capability.json", &contract),
            (".test-config-home/jig/host.toml", &config),
        ],
    );
    let review = support::review(&project);
    assert!(
        review
            .stdout
            .contains("\"flows/hello#greeter\" served by \"greet\" (wasm)"),
        "{review:?}"
    );
    let run = run_jig(&project, &["run", "flow:flows/hello", "--input", "\"Ada\""]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.json()["output"], "Hello, Ada!");
}

#[test]
fn the_python_scaffold_builds_and_passes_its_test() {
    let dir = tempfile::tempdir().unwrap();
    let root = scaffold(dir.path(), "python", &[]);
    assert!(root.join("wit/provider.wit").is_file());
    run_test_script(&root, &[]);
    // The guide's last steps, with the component test.sh built.
    serves_a_flow(&root, &root.join("greet.wasm"));
}

#[test]
fn the_javascript_scaffold_builds_and_passes_its_test() {
    let dir = tempfile::tempdir().unwrap();
    let root = scaffold(dir.path(), "js", &[]);
    let jco = std::env::var_os("JIG_JCO_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/opt/jig-jco".into())
        .join("node_modules/.bin/jco");
    run_test_script(&root, &[("JCO", jco.as_os_str())]);
    // The guide's last steps, with the component test.sh built.
    serves_a_flow(&root, &root.join("greet.wasm"));
}

/// `--sdk` names the SDK explicitly; a directory that is not the SDK is
/// refused and nothing is made.
#[test]
fn an_explicit_sdk_is_used_and_a_wrong_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sdk = support::workspace().join("sdk-rust");
    let run = run_jig(
        dir.path(),
        &[
            "provider",
            "new",
            "greet",
            "--lang",
            "rust",
            "--sdk",
            sdk.to_str().unwrap(),
        ],
    );
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("INVALID_REQUEST: --sdk ")
            && run.stderr.contains("is not the jig guest SDK"),
        "{run:?}"
    );
    assert!(!dir.path().join("greet").exists());
    let sdk = support::workspace().join("providers/sdk");
    let root = scaffold(dir.path(), "rust", &["--sdk", sdk.to_str().unwrap()]);
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(&format!(
            "jig-provider-sdk = {{ path = \"{}\" }}",
            sdk.canonicalize().unwrap().display()
        )),
        "{manifest}"
    );
}

#[test]
fn a_scaffold_refuses_a_bad_name_and_a_used_directory() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["provider", "new", "Greet", "--lang", "js"][..],
        &["provider", "new", "Greet", "--lang", "rust"][..],
    ] {
        let run = run_jig(dir.path(), args);
        assert_eq!(run.status, 1, "{run:?}");
        assert!(run.stderr.starts_with("INVALID_REQUEST: "), "{run:?}");
    }
    std::fs::create_dir(dir.path().join("greet")).unwrap();
    std::fs::write(dir.path().join("greet/keep.txt"), "mine").unwrap();
    let run = run_jig(dir.path(), &["provider", "new", "greet", "--lang", "js"]);
    assert!(run.stderr.starts_with("INVALID_REQUEST: "), "{run:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("greet/keep.txt")).unwrap(),
        "mine"
    );
    assert!(!dir.path().join("greet/provider.js").exists());
}
