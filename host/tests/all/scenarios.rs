//! The Run/1 conformance scenarios (the FLOW reference's corpus) under
//! `jig exec`: the standard and matrix components, once as Python
//! (`host/python/tests/components/`) and once as the Rust SDK examples
//! built natively (`flow.bin`), served by the `scenario-native-provider`
//! test provider and small Python child Flows.
//!
//! The provider journals every dispatch it receives, so the operation
//! ledger's joins and replays are checked from the provider side too.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::*;

/// The scenario provider (a cdylib).
fn scenario_provider() -> PathBuf {
    static CELL: OnceLock<PathBuf> = OnceLock::new();
    CELL.get_or_init(|| {
        cargo_build(&["-p", "scenario-native-provider"])
            .join("debug/libscenario_native_provider.so")
    })
    .clone()
}

fn rust_example(name: &'static str) -> PathBuf {
    static STANDARD: OnceLock<PathBuf> = OnceLock::new();
    static MATRIX: OnceLock<PathBuf> = OnceLock::new();
    let cell = match name {
        "standard" => &STANDARD,
        "matrix" => &MATRIX,
        other => panic!("no example {other}"),
    };
    cell.get_or_init(|| {
        cargo_build(&["-p", "flow-sdk", "--example", name]).join(format!("debug/examples/{name}"))
    })
    .clone()
}

#[derive(Clone, Copy, Debug)]
enum Sdk {
    Python,
    Rust,
}

const SDKS: [Sdk; 2] = [Sdk::Python, Sdk::Rust];

/// A child that answers with its input.
const ECHO_CHILD: &str = "from jiggy.flow import handle\n\n\nasync def run(ctx):\n    return {\"outcome\": \"done\", \"output\": {\"echo\": ctx.input}}\n\n\nhandle(run)\n";

/// A child that stays open until cancelled (or the deadline). It names its
/// process `tag` so a test can find it if the host leaves it behind.
fn sleeper_child(tag: &str) -> String {
    format!(
        "import asyncio\n\nfrom jiggy.flow import handle\n\n\
         with open('/proc/self/comm', 'w') as comm:\n    comm.write('{tag}')\n\n\n\
         async def run(ctx):\n    await asyncio.sleep(30)\n    return {{'outcome': 'done', 'output': 'woke'}}\n\n\n\
         handle(run)\n"
    )
}

/// Processes still named `tag` (the sleeper child of one scenario).
fn processes_named(tag: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (comm.trim_end() == tag).then(|| entry.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

/// One scenario workspace: the component package `component`, the child
/// packages `echo` and `sleeper`, a host.toml with the provider, and the
/// provider's journal.
struct Scenario {
    dir: tempfile::TempDir,
    /// The process name of this scenario's sleeper child (15 bytes at most).
    sleeper: String,
}

impl Scenario {
    fn new(component: &'static str, sdk: Sdk, slots: &[&str]) -> Scenario {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let sleeper = format!(
            "slp{}",
            &root.file_name().unwrap().to_string_lossy().replace('.', "")
        )
        .chars()
        .take(15)
        .collect::<String>();
        let mut uses = String::from("uses:\n");
        for slot in slots {
            uses.push_str(&format!(
                "  {slot}:\n    contract: ./contracts/{slot}.capability.json\n"
            ));
            std::fs::create_dir_all(root.join("component/contracts")).unwrap();
            std::fs::copy(
                workspace().join(format!(
                    "providers/examples/contracts/{slot}.capability.json"
                )),
                root.join(format!("component/contracts/{slot}.capability.json")),
            )
            .unwrap();
        }
        let flow_md = format!(
            "---\nname: {component}\ndescription: The Run/1 conformance {component} component.\n{uses}---\n"
        );
        write_files(
            root,
            &[
                ("component/FLOW.md", &flow_md),
                (
                    "echo/FLOW.md",
                    "---\nname: echo\ndescription: Answers with its input.\n---\n",
                ),
                ("echo/flow.py", ECHO_CHILD),
                (
                    "sleeper/FLOW.md",
                    "---\nname: sleeper\ndescription: Stays open until cancelled.\n---\n",
                ),
                ("sleeper/flow.py", &sleeper_child(&sleeper)),
            ],
        );
        match sdk {
            Sdk::Python => {
                std::fs::copy(
                    workspace().join(format!("host/python/tests/components/{component}.py")),
                    root.join("component/flow.py"),
                )
                .unwrap();
            }
            Sdk::Rust => {
                std::fs::copy(rust_example(component), root.join("component/flow.bin")).unwrap();
            }
        }
        let config = format!(
            "[[providers]]\nname = \"scenario\"\nkind = \"native\"\npath = \"{}\"\nsettings = {{ journal = \"{}\" }}\n",
            scenario_provider().display(),
            root.join("journal").display()
        );
        write_files(root, &[("host.toml", &config)]);
        Scenario { dir, sleeper }
    }

    fn exec(&self, children: &[(&str, &str)], input: &Value) -> Run {
        self.exec_within("20s", children, input)
    }

    /// [`Scenario::exec`] with the root deadline `timeout`.
    fn exec_within(&self, timeout: &str, children: &[(&str, &str)], input: &Value) -> Run {
        let input = input.to_string();
        let mut args = vec![
            "exec",
            "component",
            "--json",
            "--config",
            "host.toml",
            "--timeout",
            timeout,
            "--input",
            &input,
        ];
        let children: Vec<String> = children
            .iter()
            .map(|(slot, dir)| format!("{slot}={dir}"))
            .collect();
        for child in &children {
            args.extend(["--child", child]);
        }
        run_jig(self.dir.path(), &args)
    }

    /// The dispatches the provider saw: `<contract> <method> <operationId> <input>`.
    fn journal(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("journal"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn dispatches_of(&self, operation_id: &str) -> usize {
        self.journal()
            .iter()
            .filter(|line| line.split(' ').nth(2) == Some(operation_id))
            .count()
    }
}

/// Runs `case` of the matrix component in both SDKs; the child slot is
/// served by `child`.
fn matrix(case: &str, child: &str) -> Vec<(Sdk, Scenario, Run)> {
    SDKS.iter()
        .map(|&sdk| {
            let scenario = Scenario::new("matrix", sdk, &["sink", "control"]);
            let started = Instant::now();
            let run = scenario.exec(&[("child", child)], &json!({ "case": case }));
            // The sleeper child sleeps 30 s and the Run's deadline is 20 s:
            // finishing well before either proves the host cancelled the
            // open child instead of waiting it out.
            assert!(
                started.elapsed() < PROMPT,
                "{sdk:?} {case} took {:?}: {run:?}",
                started.elapsed()
            );
            (sdk, scenario, run)
        })
        .collect()
}

/// Every matrix case ends well within this.
const PROMPT: Duration = Duration::from_secs(10);

fn assert_done(sdk: Sdk, run: &Run, output: &Value) {
    assert_eq!(run.status, 0, "{sdk:?}: {run:?}");
    assert_eq!(run.json()["outcome"], "done", "{sdk:?}: {run:?}");
    assert_eq!(&run.json()["output"], output, "{sdk:?}: {run:?}");
}

#[test]
fn the_standard_component_runs_a_child_and_the_artifacts_capability() {
    let input = json!({"topic": "dark mode", "n": 2});
    for sdk in SDKS {
        let scenario = Scenario::new("standard", sdk, &["artifacts"]);
        let run = scenario.exec(&[("research", "echo")], &input);
        assert_done(
            sdk,
            &run,
            &json!({
                "research": {"outcome": "done", "output": {"echo": input}},
                "stored": {"uri": "artifact://research"},
                "missing": "not-found",
            }),
        );
        let mut journal = scenario.journal();
        journal.sort();
        assert_eq!(
            journal,
            [
                "artifacts read missing:1 {\"uri\":\"artifact://missing\"}",
                "artifacts write store:1 {\"source\":\"research\"}",
            ],
            "{sdk:?}"
        );
    }
}

#[test]
fn operation_identity_joins_replays_and_conflicts() {
    let written = json!({"written": {"value": "same"}});
    for (sdk, scenario, run) in matrix("operation-identity", "echo") {
        assert_done(
            sdk,
            &run,
            &json!({"first": written, "second": written, "replay": written, "conflict": "OPERATION_CONFLICT"}),
        );
        // Two joined waiters and a replay are one dispatch; the conflict none.
        assert_eq!(
            scenario.journal(),
            ["sink write shared:1 {\"value\":\"same\"}"],
            "{sdk:?}"
        );
    }
}

#[test]
fn cancelling_one_shared_waiter_leaves_the_other() {
    for (sdk, scenario, run) in matrix("cancel-shared-waiter", "echo") {
        assert_done(
            sdk,
            &run,
            &json!({"cancellation": "CANCELLED", "survivor": {"written": {"value": "shared"}}}),
        );
        assert_eq!(scenario.dispatches_of("shared-cancel:1"), 1, "{sdk:?}");
        assert_eq!(
            scenario.dispatches_of("release-shared-cancel:1"),
            1,
            "{sdk:?}"
        );
    }
}

#[test]
fn an_uncertain_operation_is_never_replayed() {
    for (sdk, scenario, run) in matrix("uncertain-replay", "echo") {
        assert_done(
            sdk,
            &run,
            &json!({"first": "UNCERTAIN", "replay": "UNCERTAIN", "fresh": "UNCERTAIN"}),
        );
        assert_eq!(scenario.dispatches_of("uncertain:1"), 1, "{sdk:?}");
        assert_eq!(scenario.dispatches_of("uncertain:2"), 1, "{sdk:?}");
    }
}

#[test]
fn one_flow_answers_the_complete_child_result() {
    for (sdk, _, run) in matrix("one-flow", "echo") {
        assert_done(
            sdk,
            &run,
            &json!({"outcome": "done", "output": {"echo": null}}),
        );
    }
}

#[test]
fn two_effects_run_in_sequence() {
    for (sdk, scenario, run) in matrix("two-effects", "echo") {
        assert_done(
            sdk,
            &run,
            &json!({"first": {"written": {"sequence": 1}}, "second": {"written": {"sequence": 2}}}),
        );
        assert_eq!(
            scenario.journal(),
            [
                "sink write first:1 {\"sequence\":1}",
                "sink write second:1 {\"sequence\":2}",
            ],
            "{sdk:?}"
        );
    }
}

#[test]
fn cancelling_one_child_call_locally_completes_the_run() {
    for (sdk, scenario, run) in matrix("cancel-one-call", "sleeper") {
        assert_done(sdk, &run, &json!("cancelled-locally"));
        assert_eq!(
            processes_named(&scenario.sleeper),
            Vec::<String>::new(),
            "{sdk:?}: the cancelled child outlived the Run"
        );
    }
}

#[test]
fn returning_with_a_child_call_open_fails_execution() {
    for (sdk, scenario, run) in matrix("abandoned-call", "sleeper") {
        assert_eq!(run.status, 1, "{sdk:?}: {run:?}");
        assert_eq!(run.json()["code"], "EXECUTION_FAILED", "{sdk:?}: {run:?}");
        assert_eq!(
            processes_named(&scenario.sleeper),
            Vec::<String>::new(),
            "{sdk:?}: the cancelled child outlived the Run"
        );
    }
}

#[test]
fn sixty_five_concurrent_calls_all_settle() {
    for (sdk, scenario, run) in matrix("fanout-65", "echo") {
        // The host refuses a 65th pending request, so 65 settled calls
        // prove the SDK never had more than 64 on the wire.
        assert_done(sdk, &run, &json!({"settled": 65}));
        let mut indexes: Vec<String> = scenario
            .journal()
            .iter()
            .map(|line| line.split(' ').nth(2).unwrap().to_owned())
            .collect();
        indexes.sort();
        indexes.dedup();
        assert_eq!(indexes.len(), 65, "{sdk:?}");
    }
}

#[test]
fn interrupting_the_standard_component_cancels_it_and_its_child() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;

    for sdk in SDKS {
        let scenario = Scenario::new("standard", sdk, &["artifacts"]);
        let child = jig(scenario.dir.path())
            .args(["exec", "component", "--json", "--config", "host.toml"])
            .args([
                "--timeout",
                "20s",
                "--input",
                "1",
                "--child",
                "research=sleeper",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // store:1 is dispatched together with research:1, so once the
        // provider saw it the sleeping child call is open.
        let waiting = Instant::now();
        while scenario.dispatches_of("store:1") == 0 {
            assert!(waiting.elapsed() < PROMPT, "{sdk:?}: store:1 never came");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        let interrupted = Instant::now();
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let run = output(child.wait_with_output().unwrap());
        assert!(
            interrupted.elapsed() < PROMPT,
            "{sdk:?} took {:?} after SIGINT: {run:?}",
            interrupted.elapsed()
        );
        assert_eq!(run.status, 2, "{sdk:?}: {run:?}");
        assert_eq!(run.json()["code"], "CANCELLED", "{sdk:?}: {run:?}");
        assert!(
            run.stderr.starts_with("JIG_COMMAND_INTERRUPTED: "),
            "{sdk:?}: {run:?}"
        );
        // The component never got to missing:1.
        assert_eq!(scenario.dispatches_of("missing:1"), 0, "{sdk:?}");
        assert_eq!(
            processes_named(&scenario.sleeper),
            Vec::<String>::new(),
            "{sdk:?}: the cancelled child outlived the Run"
        );
    }
}

#[test]
fn request_lifetime_serves_65536_calls_and_the_next_never_reaches_the_host() {
    for sdk in SDKS {
        let scenario = Scenario::new("matrix", sdk, &["sink", "control"]);
        let started = Instant::now();
        let run = scenario.exec_within(
            "300s",
            &[("child", "echo")],
            &json!({ "case": "request-lifetime" }),
        );
        eprintln!(
            "{sdk:?} request-lifetime: 65,536 calls in {:?}",
            started.elapsed()
        );
        assert_done(
            sdk,
            &run,
            &json!({"accepted": 65536, "rejected": "RESOURCE_EXHAUSTED"}),
        );
        // Every accepted call was dispatched exactly once; the 65,537th
        // was refused by the SDK and never dispatched.
        let journal = scenario.journal();
        assert_eq!(journal.len(), 65_536, "{sdk:?}");
        assert_eq!(scenario.dispatches_of("lifetime:65536"), 1, "{sdk:?}");
        assert_eq!(scenario.dispatches_of("lifetime:65537"), 0, "{sdk:?}");
    }
}
