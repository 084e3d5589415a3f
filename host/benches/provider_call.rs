//! One kv `get` into the same contract served three ways, in one run: the
//! Rust component (`kv-provider`, release), the Python one (componentize-py)
//! and the JavaScript one (jco). Each call is what the host pays per
//! `capability/call`: admission, schema checks, a fresh instance, the call.
//!
//! `cargo bench -p jig --bench provider_call`. The Python and JavaScript
//! components are the ones the provider_authoring tests build into
//! `target/guests/{python,js}-kv/provider.wasm`; missing ones are built
//! the same way first. A missing toolchain is reported and the bench exits
//! non-zero rather than comparing fewer languages. Read the result as the
//! ratio of each language to the Rust row.
//!
//! Overrides (the names the scaffolds' `test.sh` use): `COMPONENTIZE_PY`
//! and `JCO`, the toolchain binaries; `JIG_BENCH_GUESTS`, where the Python
//! and JavaScript components are looked for and built (default
//! `target/guests`). Pointing both at something missing checks the
//! refusal without deleting a build:
//! `JIG_BENCH_GUESTS=$(mktemp -d) COMPONENTIZE_PY=/missing cargo bench
//! --profile dev -p jig --bench provider_call` exits 1 naming python-kv.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use jig_provider_api::dispatch::now_unix_ms;
use jig_provider_api::{CallContext, NoPorts, Provider, ProviderDecl, ProviderKind};
use serde_json::json;

const LANGUAGES: [&str; 3] = ["rust", "python", "js"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn guests() -> PathBuf {
    workspace().join("target/guests")
}

fn fail(message: String) -> ! {
    eprintln!("provider_call bench: {message}");
    std::process::exit(1);
}

fn run(what: &str, command: &mut Command) {
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => fail(format!("building {what} failed ({status})")),
        Err(e) => fail(format!(
            "building {what}: the toolchain does not run ({e}); run .ci/setup"
        )),
    }
}

/// The component of `language`, built if the tests have not built it yet.
fn component(language: &str) -> PathBuf {
    let root = workspace();
    match language {
        "rust" => {
            run(
                "kv-provider",
                Command::new(env!("CARGO"))
                    .current_dir(&root)
                    .args(["build", "--quiet", "--release", "-p", "kv-provider"])
                    .args(["--target", "wasm32-wasip2", "--target-dir"])
                    .arg(guests()),
            );
            guests().join("wasm32-wasip2/release/kv_provider.wasm")
        }
        "python" | "js" => {
            let (example, source) = match language {
                "python" => ("python-kv", "app.py"),
                _ => ("js-kv", "provider.js"),
            };
            let dir = std::env::var_os("JIG_BENCH_GUESTS")
                .map(PathBuf::from)
                .unwrap_or_else(guests)
                .join(example);
            let out = dir.join("provider.wasm");
            if out.is_file() {
                return out;
            }
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| fail(e.to_string()));
            let copy = |from: PathBuf, to: &str| {
                std::fs::copy(from, dir.join(to)).unwrap_or_else(|e| fail(e.to_string()))
            };
            copy(
                root.join("providers/examples").join(example).join(source),
                source,
            );
            copy(root.join("providers/wit/provider.wit"), "provider.wit");
            let mut tool = if language == "python" {
                let tool =
                    std::env::var_os("COMPONENTIZE_PY").unwrap_or_else(|| "componentize-py".into());
                let mut c = Command::new(tool);
                c.args(["-d", "provider.wit", "-w", "capability-provider"])
                    .args(["componentize", "app", "-o", "provider.wasm"]);
                c
            } else {
                let jco = std::env::var_os("JCO")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| {
                        std::env::var_os("JIG_JCO_DIR")
                            .map(PathBuf::from)
                            .unwrap_or_else(|| "/opt/jig-jco".into())
                            .join("node_modules/.bin/jco")
                    });
                let mut c = Command::new(jco);
                c.args(["componentize", "provider.js", "--wit", "provider.wit"])
                    .args(["--world-name", "capability-provider", "--disable", "all"])
                    .args(["-o", "provider.wasm"]);
                c
            };
            run(
                example,
                tool.current_dir(&dir).env("PYTHONDONTWRITEBYTECODE", "1"),
            );
            out
        }
        other => fail(format!("no language {other}")),
    }
}

fn provider(language: &str) -> Arc<dyn Provider> {
    static LOADED: OnceLock<Vec<(&'static str, Arc<dyn Provider>)>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        LANGUAGES
            .iter()
            .map(|language| {
                let decl = ProviderDecl {
                    name: format!("kv-{language}"),
                    kind: ProviderKind::Wasm,
                    path: Some(component(language)),
                    settings: json!({"entries": {"greeting": "hello"}}),
                    secrets: Default::default(),
                    grants: Default::default(),
                };
                let provider = jig_provider_wasm::WasmProvider::load(&decl)
                    .unwrap_or_else(|e| fail(format!("{language}: {e}")));
                (*language, provider)
            })
            .collect()
    });
    loaded
        .iter()
        .find(|(l, _)| *l == language)
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| fail(format!("no language {language}")))
}

fn main() {
    // Build and load all three before measuring anything, so a missing
    // toolchain stops the run instead of leaving a row out.
    for language in LANGUAGES {
        provider(language);
    }
    divan::main();
}

#[divan::bench(args = LANGUAGES, sample_count = 200, sample_size = 10)]
fn get(bencher: divan::Bencher, language: &str) {
    let provider = provider(language);
    let ctx = CallContext {
        contract: provider.contracts()[0].identity.clone(),
        operation_id: "op:1".to_owned(),
        deadline_unix_ms: now_unix_ms() + 3_600_000,
    };
    let input = json!({"key": "greeting"});
    let call = || provider.call(&ctx, "get", divan::black_box(&input), Arc::new(NoPorts));
    assert_eq!(call().unwrap(), json!("hello"), "{language}");
    bencher.bench(call);
}
