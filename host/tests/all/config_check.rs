//! `jig config check FILE` through the real binary: `configuration is valid`
//! and exit 0, or `JIG_CONFIG_INVALID: …` and exit 1, without running or
//! reading anything but the file.

use crate::support::*;

/// The longest base URL and model name the Agent rules accept (docs/src/agents.md).
const MAX_BASE_URL_CHARS: usize = 4096;
const MAX_MODEL_CHARS: usize = 256;

/// A configuration with every table the NixOS module renders.
const FULL: &str = r#"
[runtimes]
python = "/opt/py/bin/python3"

[containment]
bwrap = "/opt/bw/bin/bwrap"
cgroup-parent = "/jig.slice"

[agent]
api = "chat-completions"
base-url = "https://api.example.org/v1"
model = "some-model"
api-key-file = "/run/credentials/jig.service/agent-key"

[secrets]
deploy = "/run/credentials/jig.service/secret-deploy"

[dependencies]
npm-registry = "https://registry.npmjs.org/"

[[providers]]
name = "kv"
kind = "wasm"
path = "/opt/kv/kv.wasm"
settings = { namespace = "demo" }
secrets = { token = "/run/credentials/jig.service/kv-token" }
"#;

fn check(text: &str) -> Run {
    check_with(text, &[])
}

fn check_with(text: &str, env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("host.toml"), text).unwrap();
    let mut command = jig(dir.path());
    command.args(["config", "check", "host.toml"]);
    for (name, value) in env {
        command.env(name, value);
    }
    output(command.output().expect("jig runs"))
}

#[track_caller]
fn assert_valid(run: &Run) {
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(run.stdout, "configuration is valid\n", "{run:?}");
    assert_eq!(run.stderr, "", "{run:?}");
}

#[track_caller]
fn assert_invalid(run: &Run, naming: &str) {
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(run.stderr.starts_with("JIG_CONFIG_INVALID: "), "{run:?}");
    assert!(run.stderr.contains(naming), "expected {naming:?}: {run:?}");
}

fn agent(base_url: &str, model: &str) -> String {
    format!(
        "[agent]\nbase-url = {base_url:?}\nmodel = {model:?}\napi-key-file = \"/run/credentials/jig.service/agent-key\"\n"
    )
}

#[test]
fn a_complete_configuration_is_valid_and_no_file_it_names_is_opened() {
    // None of the paths exist here: the check is of form, not of the machine.
    assert_valid(&check(FULL));
}

#[test]
fn an_empty_configuration_is_valid() {
    assert_valid(&check(""));
}

#[test]
fn a_missing_file_or_bad_toml_or_unknown_table_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_jig(dir.path(), &["config", "check", "absent.toml"]);
    assert_invalid(&run, "absent.toml");
    assert_invalid(&check("[runtimes\n"), "host.toml");
    assert_invalid(&check("[runtime]\npython = \"/x\"\n"), "runtime");
    assert_invalid(&check("[agent]\nkey = \"sk-1\"\n"), "key");
}

#[test]
fn executable_and_cgroup_paths_must_be_absolute() {
    assert_invalid(
        &check("[runtimes]\npython = \"bin/python3\"\n"),
        "[runtimes] python",
    );
    assert_invalid(&check("[runtimes]\nnode = \"node\"\n"), "[runtimes] node");
    assert_invalid(
        &check("[containment]\nbwrap = \"bwrap\"\n"),
        "[containment] bwrap",
    );
    assert_invalid(
        &check("[containment]\ncgroup-parent = \"jig.slice\"\n"),
        "[containment] cgroup-parent",
    );
    assert_invalid(&check("[containment]\nmode = \"loose\"\n"), "mode");
    assert_valid(&check("[containment]\nmode = \"none\"\n"));
}

#[test]
fn every_finding_is_reported_at_once() {
    let run = check("[runtimes]\npython = \"p\"\n[containment]\nbwrap = \"b\"\n");
    assert_invalid(&run, "[runtimes] python");
    assert_invalid(&run, "[containment] bwrap");
}

#[test]
fn the_agent_table_follows_the_endpoint_rules() {
    assert_valid(&check(&agent("https://api.example.org/v1", "m")));
    // Loopback http is accepted, for a local inference server.
    assert_valid(&check(&agent("http://127.0.0.1:8080/v1", "m")));
    assert_valid(&check(&agent("http://localhost:8080/v1", "m")));
    assert_invalid(
        &check(&agent("http://api.example.org/v1", "m")),
        "[agent] base-url",
    );
    assert_invalid(
        &check(&agent("https://u:p@api.example.org/v1", "m")),
        "[agent] base-url",
    );
    assert_invalid(
        &check(&agent("https://api.example.org/v1?x=1", "m")),
        "[agent] base-url",
    );
    assert_invalid(
        &check(&agent("https://api.example.org/v1", "-m")),
        "[agent] model",
    );
    assert_invalid(&check("[agent]\nmodel = \"m\"\n"), "[agent] api-key-file");
    assert_invalid(
        &check("[agent]\napi-key-file = \"/run/credentials/jig.service/agent-key\"\n"),
        "[agent] model",
    );
    assert_invalid(
        &check("[agent]\nmodel = \"m\"\napi-key-file = \"agent-key\"\n"),
        "[agent] api-key-file",
    );
    assert_invalid(
        &check("[agent]\napi = \"completions\"\nmodel = \"m\"\napi-key-file = \"/k\"\n"),
        "[agent] api",
    );
}

#[test]
fn agent_limits_at_and_past_the_bound() {
    let prefix = "https://a.example/";
    let at = format!("{prefix}{}", "p".repeat(MAX_BASE_URL_CHARS - prefix.len()));
    assert_valid(&check(&agent(&at, "m")));
    assert_invalid(&check(&agent(&format!("{at}p"), "m")), "[agent] base-url");

    let model = format!("m{}", "o".repeat(MAX_MODEL_CHARS - 1));
    assert_valid(&check(&agent("https://a.example/v1", &model)));
    assert_invalid(
        &check(&agent("https://a.example/v1", &format!("{model}o"))),
        "[agent] model",
    );
}

#[test]
fn the_callers_agent_environment_does_not_change_the_verdict() {
    // The result is a property of the file: the same on a build machine as
    // on the host, whatever Agent variables the caller has set.
    let env = [
        ("JIG_AGENT_CLIENT", "codex"),
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_MODEL", "env-model"),
    ];
    assert_valid(&check_with(&agent("https://a.example/v1", "m"), &env));
    assert_valid(&check_with("", &env));
    assert_invalid(
        &check_with("[agent]\nmodel = \"m\"\n", &env),
        "[agent] api-key-file",
    );
}

#[test]
fn provider_declarations_are_checked() {
    let decl = |body: &str| format!("[[providers]]\nname = \"kv\"\n{body}");
    assert_valid(&check(&decl("kind = \"native\"\npath = \"/opt/kv.so\"\n")));
    assert_valid(&check(&decl("kind = \"builtin\"\n")));
    // A relative path is resolved against the configuration's directory.
    assert_valid(&check(&decl("kind = \"wasm\"\npath = \"kv.wasm\"\n")));
    assert_invalid(&check(&decl("kind = \"wasm\"\n")), "path is required");
    assert_invalid(
        &check(&decl("kind = \"builtin\"\npath = \"/opt/kv.so\"\n")),
        "no path",
    );
    assert_invalid(&check(&decl("kind = \"lua\"\npath = \"/k\"\n")), "kind");
    assert_invalid(
        &check(&decl("kind = \"wasm\"\npath = \"/k.wasm\"\nsettings = 5\n")),
        "settings must be a table",
    );
    assert_invalid(
        &check(&decl(
            "kind = \"wasm\"\npath = \"/k.wasm\"\nsettings = { big = 9007199254740992 }\n",
        )),
        "JSON/1",
    );
    assert_invalid(
        &check(&decl(
            "kind = \"wasm\"\npath = \"/k.wasm\"\nsecrets = { \"\" = \"/k\" }\n",
        )),
        "secret name",
    );
    let twice = format!(
        "{}{}",
        decl("kind = \"native\"\npath = \"/a.so\"\n"),
        decl("kind = \"native\"\npath = \"/b.so\"\n")
    );
    assert_invalid(&check(&twice), "twice");
}

#[test]
fn secrets_and_the_npm_registry_are_checked() {
    assert_valid(&check("[secrets]\ndeploy = \"keys/deploy\"\n"));
    assert_invalid(&check("[secrets]\n\"\" = \"/k\"\n"), "[secrets]");
    assert_valid(&check(
        "[dependencies]\nnpm-registry = \"http://127.0.0.1:4873\"\n",
    ));
    assert_invalid(
        &check("[dependencies]\nnpm-registry = \"registry.npmjs.org\"\n"),
        "npm-registry",
    );
    assert_invalid(
        &check("[dependencies]\nnpm-registry = \"https://\"\n"),
        "npm-registry",
    );
    assert_valid(&check(
        "[dependencies]\npython-index = \"http://127.0.0.1:8000/simple/\"\n",
    ));
    assert_invalid(
        &check("[dependencies]\npython-index = \"pypi.org/simple\"\n"),
        "python-index",
    );
}
