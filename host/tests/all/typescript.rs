//! `flow.ts` and `flow.js` packages written for the reference Jig
//! (`import { handle } from "@jigging/flow"`) run under Bun, Deno and Node
//! with the bundled SDK, and the SDK's own suite passes.

use std::path::Path;

use crate::support::*;

const FLOW_TS: &str = "import { handle } from \"@jigging/flow\";\n\nawait handle(async (run) => {\n  const name: string = typeof run.input === \"string\" ? run.input : \"world\";\n  console.log(\"greeting\", name);\n  return { outcome: \"done\", output: { message: `Hello, ${name}!` } };\n});\n";

fn runtime(name: &str) -> String {
    for dir in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return path.display().to_string();
        }
    }
    panic!("{name} is not installed (npm install -g bun deno); CI installs it");
}

/// Review and run `flows/hello` with only `keep` of the JS runtimes configured.
fn greet_with(entry: &str, keep: &str) -> serde_json::Value {
    let file = format!("flows/hello/{entry}");
    let dir = project(&[
        (
            "flows/hello/FLOW.md",
            "---\nname: hello\ndescription: Greets.\n---\n",
        ),
        (&file, FLOW_TS),
    ]);
    let mut config = String::from("[runtimes]\n");
    for name in ["bun", "deno", "node"] {
        let path = if name == keep {
            runtime(name)
        } else {
            format!("/nonexistent/{name}")
        };
        config.push_str(&format!("{name} = \"{path}\"\n"));
    }
    write_files(dir.path(), &[(".test-config-home/jig/host.toml", &config)]);
    review(dir.path());
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/hello", "--input", "\"Ada\""],
    );
    assert_eq!(run.status, 0, "{keep}: {run:?}");
    let terminal = run.json();
    assert_eq!(
        terminal["output"],
        serde_json::json!({"message": "Hello, Ada!"}),
        "{keep}"
    );
    terminal
}

#[test]
fn flow_ts_runs_under_bun() {
    let terminal = greet_with("flow.ts", "bun");
    assert_eq!(
        terminal["diagnostics"]["stderr"], "greeting Ada\n",
        "console.log is a diagnostic"
    );
}

#[test]
fn flow_ts_runs_under_deno() {
    greet_with("flow.ts", "deno");
}

#[test]
fn flow_js_runs_under_node() {
    // Node 20 cannot strip types, so the JavaScript form of the same Flow.
    let dir = project(&[
        ("flows/hello/FLOW.md", "---\nname: hello\ndescription: Greets.\n---\n"),
        (
            "flows/hello/flow.js",
            "import { handle } from \"@jigging/flow\";\n\nawait handle(async (run) => ({ outcome: \"done\", output: { message: `Hello, ${run.input}!` } }));\n",
        ),
    ]);
    let config = format!(
        "[runtimes]\nbun = \"/nonexistent/bun\"\ndeno = \"/nonexistent/deno\"\nnode = \"{}\"\n",
        runtime("node")
    );
    write_files(dir.path(), &[(".test-config-home/jig/host.toml", &config)]);
    review(dir.path());
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/hello", "--input", "\"Ada\""],
    );
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["output"],
        serde_json::json!({"message": "Hello, Ada!"})
    );
}

#[test]
fn without_a_js_runtime_the_plan_names_the_entrypoint() {
    let dir = project(&[
        (
            "flows/hello/FLOW.md",
            "---\nname: hello\ndescription: Greets.\n---\n",
        ),
        ("flows/hello/flow.ts", FLOW_TS),
    ]);
    write_files(
        dir.path(),
        &[(
            ".test-config-home/jig/host.toml",
            "[runtimes]\nbun = \"/nonexistent/bun\"\ndeno = \"/nonexistent/deno\"\n",
        )],
    );
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("UNAVAILABLE: "), "{run:?}");
    assert!(
        run.stderr
            .contains("UNAVAILABLE at \"flows/hello/flow.ts\""),
        "{run:?}"
    );
}

#[test]
fn typescript_sdk_suite_passes() {
    let out = std::process::Command::new(runtime("node"))
        .arg(workspace().join("host/typescript/tests/run.mjs"))
        .current_dir(workspace())
        .output()
        .expect("node runs");
    let run = output(out);
    assert_eq!(run.status, 0, "{run:?}");
}
