//! Run Checkpoint (docs/src/runs.md; seed 002 §4 and §8) through the real
//! `jig`: accepted saves, the packet each ending delivers (`final`,
//! `checkpoint`), the record in `result.json` and on stdout, recovery
//! after a killed coordinator, the save rules and the root-only rule.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::{json, Value};

/// A copy of examples/checkpoint, reviewed.
fn chapters_example() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/checkpoint"), dir.path());
    review(dir.path());
    dir
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn chapters(project: &Path, input: Value, out: &Path, extra: &[&str]) -> Run {
    let input = input.to_string();
    let mut args = vec![
        "run",
        "flow:flows/chapters",
        "--input",
        &input,
        "--out",
        path(out),
    ];
    args.extend_from_slice(extra);
    run_jig(project, &args)
}

fn spawn_chapters(project: &Path, input: Value, out: &Path) -> Child {
    jig(project)
        .args(["run", "flow:flows/chapters", "--input", &input.to_string()])
        .args(["--out", path(out), "--timeout", "5m"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Every file under `files/` of a packet, with its text.
fn packet_files(out: &Path) -> Vec<(String, String)> {
    fn walk(dir: &Path, prefix: &str, found: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let rel = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &rel, found);
            } else {
                found.push((rel, std::fs::read_to_string(entry.path()).unwrap()));
            }
        }
    }
    let mut found = Vec::new();
    walk(&out.join("files"), "", &mut found);
    found.sort();
    found
}

fn result_json(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("result.json")).unwrap()).unwrap()
}

fn chapter(index: usize, title: &str) -> (String, String) {
    (
        format!("chapters/{index:02}-{title}.md"),
        format!("# {index}. {title}\n\nThis chapter is finished.\n"),
    )
}

/// The packet's `result.json` and stdout agree: the same Run, method,
/// input, checkpoint, execution terminal and delivery source.
fn assert_packet_agrees(stdout: &Value, out: &Path) {
    let packet = result_json(out);
    assert_eq!(packet["runId"], stdout["runId"]);
    assert_eq!(packet["target"], stdout["method"]["target"]);
    assert_eq!(packet["package"], stdout["method"]["package"]);
    assert_eq!(packet["binding"], stdout["method"]["binding"]);
    assert_eq!(packet["input"], stdout["input"]);
    assert_eq!(packet["checkpoint"], stdout["checkpoint"]);
    assert_eq!(packet["delivery"]["source"], stdout["delivery"]["source"]);
    let mut execution = stdout.clone();
    for field in ["runId", "method", "input", "checkpoint", "delivery"] {
        execution.as_object_mut().unwrap().remove(field);
    }
    assert_eq!(packet["execution"], execution);
    // The manifest lists exactly the delivered files.
    let listed: Vec<String> = packet["delivery"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    let present: Vec<String> = packet_files(out).into_iter().map(|(p, _)| p).collect();
    assert_eq!(listed, present);
}

/// No Run keeps an aggregate once it is settled.
fn assert_no_aggregate_kept(project: &Path) {
    let left = std::fs::read_dir(project.join(".jig/checkpoints"))
        .unwrap()
        .count();
    assert_eq!(left, 0, "a settled Run's aggregate is not retained");
}

/// Wait (not a timed assertion: a generous bound on a slow machine) until
/// the one running Run's durable aggregate holds `sequence`.
fn wait_for_saved(project: &Path, sequence: u64) {
    let dir = project.join(".jig/checkpoints");
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let saved = std::fs::read_dir(&dir).ok().into_iter().flatten().any(|e| {
            let bytes = std::fs::read(e.unwrap().path()).unwrap_or_default();
            serde_json::from_slice::<Value>(&bytes)
                .is_ok_and(|v| v["sequence"].as_u64() == Some(sequence))
        });
        if saved {
            return;
        }
        assert!(Instant::now() < until, "save {sequence} never arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn saves_one_two_three_then_success_deliver_the_final_files() {
    let project = chapters_example();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("report");
    let run = chapters(
        project.path(),
        json!({"chapters": ["intro", "method", "results"]}),
        &out,
        &[],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let stdout = run.json();
    assert_eq!(stdout["status"], "succeeded");
    assert_eq!(
        stdout["delivery"],
        json!({"status": "written", "destination": path(&out), "source": "final"})
    );
    let receipts = stdout["output"]["receipts"].as_array().unwrap();
    let sequences: Vec<u64> = receipts
        .iter()
        .map(|r| r["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(sequences, [1, 2, 3]);
    let digests: std::collections::BTreeSet<&str> = receipts
        .iter()
        .map(|r| r["digest"].as_str().unwrap())
        .collect();
    assert_eq!(digests.len(), 3, "each save has its own digest");
    assert!(digests
        .iter()
        .all(|d| d.starts_with("sha256:") && d.len() == 71));
    // The final files, not the checkpoint's: contents.md was never saved.
    let mut expected = vec![
        chapter(1, "intro"),
        chapter(2, "method"),
        chapter(3, "results"),
        (
            "contents.md".into(),
            "- chapters/01-intro.md\n- chapters/02-method.md\n- chapters/03-results.md\n".into(),
        ),
    ];
    expected.sort();
    assert_eq!(packet_files(&out), expected);
    // The record names the latest accepted save.
    let record = &stdout["checkpoint"];
    assert_eq!(record["sequence"], 3);
    assert_eq!(record["digest"], receipts[2]["digest"]);
    assert_eq!(
        record["evidence"],
        json!({"chaptersDone": 3, "last": "results"})
    );
    assert_eq!(record["files"].as_array().unwrap().len(), 3);
    assert_packet_agrees(&stdout, &out);
    assert_no_aggregate_kept(project.path());
}

#[test]
fn an_exception_after_two_saves_delivers_the_second_checkpoint() {
    let project = chapters_example();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("partial");
    let run = chapters(
        project.path(),
        json!({"chapters": ["intro", "method", "results"], "failAfter": 2}),
        &out,
        &[],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let stdout = run.json();
    assert_eq!(stdout["status"], "failed");
    assert_eq!(stdout["code"], "EXECUTION_FAILED");
    assert_eq!(stdout["delivery"]["source"], "checkpoint");
    assert_eq!(stdout["delivery"]["status"], "written");
    assert_eq!(stdout["checkpoint"]["sequence"], 2);
    // Only the checkpoint's files: not the draft the attachment held.
    assert_first_two_chapters(&out);
    assert_packet_agrees(&stdout, &out);
    assert_no_aggregate_kept(project.path());
}

#[test]
fn a_deadline_after_two_saves_delivers_the_second_checkpoint() {
    let project = chapters_example();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("late");
    let run = chapters(
        project.path(),
        json!({"chapters": ["intro", "method", "results"], "waitAfter": 2}),
        &out,
        &["--timeout", "15s"],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let stdout = run.json();
    assert_eq!(stdout["code"], "DEADLINE_EXCEEDED", "{run:?}");
    assert_eq!(stdout["delivery"]["source"], "checkpoint");
    assert_eq!(stdout["checkpoint"]["sequence"], 2);
    assert_first_two_chapters(&out);
    assert_packet_agrees(&stdout, &out);
}

#[test]
fn an_interrupt_after_two_saves_delivers_the_second_checkpoint() {
    let project = chapters_example();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("stopped");
    let child = spawn_chapters(
        project.path(),
        json!({"chapters": ["intro", "method", "results"], "waitAfter": 2}),
        &out,
    );
    wait_for_saved(project.path(), 2);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let run = output(child.wait_with_output().unwrap());
    assert_interrupted(&run);
    let stdout = newest_terminal(project.path());
    assert_eq!(stdout["code"], "CANCELLED");
    assert_eq!(
        stdout["delivery"],
        json!({"status": "written", "destination": path(&out), "source": "checkpoint"})
    );
    assert_first_two_chapters(&out);
    assert_packet_agrees(&stdout, &out);
    assert_no_aggregate_kept(project.path());
}

#[test]
fn a_killed_coordinator_is_fenced_lost_and_its_checkpoint_published_once() {
    let project = chapters_example();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("recovered");
    let mut child = spawn_chapters(
        project.path(),
        json!({"chapters": ["intro", "method", "results"], "waitAfter": 2}),
        &out,
    );
    wait_for_saved(project.path(), 2);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !out.exists(),
        "nothing is published by a killed coordinator"
    );

    let listed = run_jig(project.path(), &["runs"]);
    assert_eq!(listed.status, 0, "{listed:?}");
    let line = listed.stdout.lines().next().unwrap().to_string();
    let fields: Vec<&str> = line.split('\t').collect();
    assert_eq!(
        fields[1..],
        ["lost", "flow:flows/chapters", "COORDINATOR_LOST"]
    );
    let run_id = fields[0].to_string();

    assert_first_two_chapters(&out);
    let packet = result_json(&out);
    assert_eq!(packet["runId"], run_id.as_str());
    assert_eq!(packet["execution"]["status"], "lost");
    assert_eq!(packet["execution"]["code"], "COORDINATOR_LOST");
    assert_eq!(packet["delivery"]["source"], "checkpoint");
    assert_eq!(packet["checkpoint"]["sequence"], 2);

    // The settled record is the terminal the packet holds.
    let shown = run_jig(project.path(), &["runs", "show", &run_id]);
    let terminal = shown.json()["terminal"].clone();
    assert_eq!(terminal["code"], "COORDINATOR_LOST");
    assert_eq!(
        terminal["delivery"],
        json!({"status": "written", "destination": path(&out), "source": "checkpoint"})
    );
    assert_packet_agrees(&terminal, &out);

    // Exactly once: a later fence publishes nothing again and nothing re-ran.
    let before = std::fs::read(out.join("result.json")).unwrap();
    let again = run_jig(project.path(), &["runs"]);
    assert_eq!(again.stdout.lines().count(), 1, "{again:?}");
    assert_eq!(std::fs::read(out.join("result.json")).unwrap(), before);
    let entries: Vec<PathBuf> = std::fs::read_dir(parent.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        entries,
        std::slice::from_ref(&out),
        "one packet, no staging"
    );
    assert_no_aggregate_kept(project.path());
}

const SCRIPT_FLOW_MD: &str = "---\nname: script\ndescription: Make the saves its input lists and report each answer.\nuses:\n  progress:\n    contract: ./contracts/run-checkpoint.capability.json\nattachments:\n  deliverables: read-write\n---\n";

/// Each entry of `input.saves` is one save (or, as a list, saves made
/// concurrently); the output reports each receipt or refusal code.
const SCRIPT_FLOW_PY: &str = r#"import asyncio
import json

from jiggy.flow import OperationError, handle


def sized(spec):
    # {"evidenceBytes": N, "sequence": S}: a save whose canonical JSON/1 is N bytes.
    if "evidenceBytes" in spec:
        body = {"evidence": "", "files": {}, "sequence": spec["sequence"]}
        overhead = len(json.dumps(body, separators=(",", ":"), sort_keys=True))
        body["evidence"] = "e" * (spec["evidenceBytes"] - overhead)
        return body
    if "fileCount" in spec:
        files = {f"f{i:03}": "x" for i in range(spec["fileCount"])}
        return {"sequence": spec["sequence"], "evidence": None, "files": files}
    if "entries" in spec:
        # 64 files, each three directories down: 256 entries; one level
        # deeper for the first file makes 257.
        files = {f"d{i}/e/f/file": "x" for i in range(64)}
        if spec["entries"] > 256:
            del files["d0/e/f/file"]
            files["d0/e/f/g/file"] = "x"
        return {"sequence": spec["sequence"], "evidence": None, "files": files}
    if "fileBytes" in spec:
        # Two-byte characters: the byte limit is reached with half as many
        # scalars, well inside the contract schema's work budget.
        n = spec["fileBytes"]
        files = {"a": "\u00e9" * (n // 4), "b": "\u00e9" * (n // 4) + "x" * (n % 4)}
        return {"sequence": spec["sequence"], "evidence": None, "files": files}
    return spec


async def save(context, name, spec):
    try:
        receipt = await context.call_capability(
            operation_id=name, slot="progress", method="save", input=sized(spec)
        )
        return {"sequence": receipt["sequence"]}
    except OperationError as error:
        return {"code": error.code}


async def run(context):
    answers = []
    for index, step in enumerate(context.input["saves"]):
        if isinstance(step, list):
            together = [save(context, f"s{index}-{j}", s) for j, s in enumerate(step)]
            answers.append(await asyncio.gather(*together))
        else:
            answers.append(await save(context, f"s{index}", step))
    if context.input.get("undeclared"):
        return {"outcome": "undeclared", "output": answers}
    return {"outcome": "done", "output": answers}


handle(run)
"#;

/// A reviewed project whose `flows/script` makes the saves it is given.
fn script_project() -> tempfile::TempDir {
    checkpointing_project("script", "flow.py", SCRIPT_FLOW_PY)
}

/// A reviewed project with one checkpointing Flow `flows/<name>` whose
/// entrypoint `entry` is `source`, carrying the Run Checkpoint contract.
fn checkpointing_project(name: &str, entry: &str, source: &str) -> tempfile::TempDir {
    let contract = std::fs::read_to_string(
        workspace()
            .join("examples/checkpoint/flows/chapters/contracts/run-checkpoint.capability.json"),
    )
    .unwrap();
    let project = project(&[
        (&format!("flows/{name}/FLOW.md"), SCRIPT_FLOW_MD),
        (&format!("flows/{name}/{entry}"), source),
        (
            &format!("flows/{name}/contracts/run-checkpoint.capability.json"),
            &contract,
        ),
    ]);
    review(project.path());
    project
}

/// Run the script with `saves`; (answers, the terminal's checkpoint record).
fn script(project: &Path, saves: Value) -> (Value, Value) {
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("packet");
    let input = json!({ "saves": saves }).to_string();
    let run = run_jig(
        project,
        &[
            "run",
            "flow:flows/script",
            "--input",
            &input,
            "--out",
            path(&out),
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let stdout = run.json();
    assert_packet_agrees(&stdout, &out);
    (stdout["output"].clone(), stdout["checkpoint"].clone())
}

/// A Run whose result is invalid (an undeclared outcome) after `saves`:
/// the terminal and the packet it published.
fn invalid_result(saves: Value) -> (Value, PathBuf, tempfile::TempDir) {
    let project = script_project();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("packet");
    let input = json!({ "saves": saves, "undeclared": true }).to_string();
    let run = run_jig(
        project.path(),
        &[
            "run",
            "flow:flows/script",
            "--input",
            &input,
            "--out",
            path(&out),
        ],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let stdout = run.json();
    assert_eq!(stdout["code"], "INVALID_RESULT", "{run:?}");
    assert_packet_agrees(&stdout, &out);
    (stdout, out, parent)
}

#[test]
fn an_invalid_result_delivers_the_checkpoint_or_only_the_record() {
    let (stdout, out, _parent) = invalid_result(json!([plain(1), plain(2)]));
    assert_eq!(stdout["delivery"]["source"], "checkpoint");
    assert_eq!(stdout["checkpoint"]["sequence"], 2);
    assert_eq!(
        packet_files(&out),
        [("progress.txt".to_string(), "2\n".to_string())]
    );

    // With no accepted save the packet is the bare record.
    let (stdout, out, _parent) = invalid_result(json!([plain(2)]));
    assert_eq!(stdout["delivery"]["source"], "none");
    assert_eq!(stdout["checkpoint"], Value::Null);
    assert!(packet_files(&out).is_empty());
}

fn plain(sequence: u64) -> Value {
    json!({"sequence": sequence, "evidence": {"n": sequence}, "files": {"progress.txt": format!("{sequence}\n")}})
}

const INVALID: &str = "INVALID_INPUT";

#[test]
fn gaps_and_repeats_are_refused_and_leave_the_last_aggregate() {
    let project = script_project();
    let (answers, record) = script(
        project.path(),
        json!([plain(2), plain(1), plain(1), plain(3), plain(2), plain(0)]),
    );
    assert_eq!(
        answers,
        json!([
            {"code": INVALID},
            {"sequence": 1},
            {"code": INVALID},
            {"code": INVALID},
            {"sequence": 2},
            {"code": INVALID},
        ])
    );
    assert_eq!(record["sequence"], 2);
    assert_eq!(record["evidence"], json!({"n": 2}));
}

#[test]
fn sixteen_saves_are_accepted_and_the_seventeenth_is_refused() {
    let project = script_project();
    let mut saves: Vec<Value> = (1..=16).map(plain).collect();
    saves.push(plain(17));
    saves.push(plain(16));
    let (answers, record) = script(project.path(), Value::Array(saves));
    let answers = answers.as_array().unwrap();
    for (i, answer) in answers[..16].iter().enumerate() {
        assert_eq!(answer, &json!({"sequence": i + 1}));
    }
    assert_eq!(answers[16], json!({"code": INVALID}));
    assert_eq!(answers[17], json!({"code": INVALID}));
    assert_eq!(record["sequence"], 16);
}

#[test]
fn size_limits_at_the_value_and_one_past() {
    use jig_provider_builtin::checkpoint::{MAX_FILES, MAX_FILES_BYTES, MAX_INPUT_BYTES};
    let project = script_project();
    let (answers, record) = script(
        project.path(),
        json!([
            {"sequence": 1, "fileCount": MAX_FILES + 1},
            {"sequence": 1, "fileCount": MAX_FILES},
            {"sequence": 2, "fileBytes": MAX_FILES_BYTES + 1},
            {"sequence": 2, "fileBytes": MAX_FILES_BYTES},
            {"sequence": 3, "evidenceBytes": MAX_INPUT_BYTES + 1},
            {"sequence": 3, "evidenceBytes": MAX_INPUT_BYTES},
            {"sequence": 4, "evidence": null, "files": {"../escape": "x"}},
            {"sequence": 4, "evidence": null, "files": {"a": "x", "a/b": "y"}},
            {"sequence": 4, "evidence": null, "files": {"a/b": "y"}},
            {"sequence": 5, "entries": 257},
            {"sequence": 5, "entries": 256},
        ]),
    );
    assert_eq!(
        answers,
        json!([
            {"code": INVALID},
            {"sequence": 1},
            {"code": INVALID},
            {"sequence": 2},
            {"code": INVALID},
            {"sequence": 3},
            {"code": INVALID},
            {"code": INVALID},
            {"sequence": 4},
            {"code": INVALID},
            {"sequence": 5},
        ])
    );
    assert_eq!(record["sequence"], 5);
    assert_eq!(record["files"].as_array().unwrap().len(), 64);
}

#[test]
fn a_second_concurrent_save_is_never_accepted_as_well() {
    let project = script_project();
    let (answers, record) = script(project.path(), json!([[plain(1), plain(1)], plain(2)]));
    let pair = answers[0].as_array().unwrap();
    let accepted = pair.iter().filter(|a| a.get("sequence").is_some()).count();
    assert_eq!(accepted, 1, "{answers}");
    let refused = pair.iter().find_map(|a| a["code"].as_str()).unwrap();
    // Refused while the first is in flight, or as a repeat once it landed.
    assert!(
        ["RESOURCE_EXHAUSTED", INVALID].contains(&refused),
        "{answers}"
    );
    assert_eq!(answers[1], json!({"sequence": 2}));
    assert_eq!(record["sequence"], 2);
}

#[test]
fn a_checkpointing_target_without_out_is_refused_before_dispatch() {
    let project = chapters_example();
    let run = run_jig(project.path(), &["run", "flow:flows/chapters"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.starts_with("JIG_RUN_FILES_INVALID: "), "{run:?}");
    assert!(run.stderr.contains("--out"), "{run:?}");
    let runs = run_jig(project.path(), &["runs"]);
    assert_eq!(runs.stdout, "", "nothing was recorded: {runs:?}");
}

#[test]
fn a_child_or_a_package_without_a_writable_attachment_cannot_use_it() {
    let example = workspace().join("examples/checkpoint/flows/chapters");
    let binding = |body: &str| {
        format!("import {{ defineBinding }} from \"@jigging/jig\";\nexport default defineBinding({body});\n")
    };
    let cases = [
        (
            binding(
                "{ package: \"./flows/intake\", slots: { classifier: \"flow:flows/chapters\" } }",
            ),
            "PROJECT_BINDING_SLOT_MISSING at \"bindings/intake.ts\" pointer \"/slots/classifier\"",
        ),
        (
            binding("{ package: \"./flows/intake\", slots: { classifier: \"binding:saver\" } }"),
            "PROJECT_BINDING_SLOT_MISSING at \"bindings/intake.ts\" pointer \"/slots/classifier\"",
        ),
    ];
    for (intake, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&workspace().join("examples/triage"), dir.path());
        copy_dir(&example, &dir.path().join("flows/chapters"));
        write_files(
            dir.path(),
            &[
                ("bindings/intake.ts", &intake),
                (
                    "bindings/saver.ts",
                    &binding("{ package: \"./flows/chapters\" }"),
                ),
            ],
        );
        // `--details` explains each diagnostic after the reference's line.
        let run = run_jig(dir.path(), &["review", "--yes", "--details"]);
        assert_eq!(run.status, 1, "{run:?}");
        assert!(run.stderr.starts_with("INVALID_CANDIDATE: "), "{run:?}");
        assert!(run.stderr.contains(expected), "{run:?}");
        assert!(run.stderr.contains("only a root Run"), "{run:?}");
    }
    // A root Binding of the same package is fine.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/triage"), dir.path());
    copy_dir(&example, &dir.path().join("flows/chapters"));
    write_files(
        dir.path(),
        &[(
            "bindings/saver.ts",
            &binding("{ package: \"./flows/chapters\" }"),
        )],
    );
    review(dir.path());

    // Without a writable attachment there is nothing to deliver it through.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join("examples/checkpoint"), dir.path());
    let flow_md = dir.path().join("flows/chapters/FLOW.md");
    let text = std::fs::read_to_string(&flow_md)
        .unwrap()
        .replace("  deliverables: read-write\n", "  deliverables: read\n");
    std::fs::write(&flow_md, text).unwrap();
    let run = run_jig(dir.path(), &["review", "--yes"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stderr
            .contains("METADATA_INVALID at \"flows/chapters/FLOW.md\" pointer \"/uses/progress\""),
        "{run:?}"
    );
}

#[test]
fn a_save_uses_its_own_capacity_beside_two_active_children() {
    let contract = std::fs::read_to_string(
        workspace()
            .join("examples/checkpoint/flows/chapters/contracts/run-checkpoint.capability.json"),
    )
    .unwrap();
    let leader_py = r#"import asyncio

from jiggy.flow import handle


async def run(context):
    async def child(n):
        return await context.run_child_flow(operation_id=f"child-{n}", slot="worker", input=n)

    first, second, receipt = await asyncio.gather(
        child(1),
        child(2),
        context.call_capability(
            operation_id="save-1",
            slot="progress",
            method="save",
            input={"sequence": 1, "evidence": "both children running", "files": {"a.txt": "a"}},
        ),
    )
    return {"outcome": "done", "output": [first["output"], second["output"], receipt["sequence"]]}


handle(run)
"#;
    let sleeper_py = "import asyncio\n\nfrom jiggy.flow import handle\n\n\nasync def run(context):\n    await asyncio.sleep(2)\n    return {\"outcome\": \"done\", \"output\": context.input}\n\n\nhandle(run)\n";
    let project = project(&[
        ("flows/leader/FLOW.md", SCRIPT_FLOW_MD),
        ("flows/leader/flow.py", leader_py),
        (
            "flows/leader/contracts/run-checkpoint.capability.json",
            &contract,
        ),
        (
            "flows/sleeper/FLOW.md",
            "---\nname: sleeper\ndescription: Wait a moment and answer with the input.\n---\n",
        ),
        ("flows/sleeper/flow.py", sleeper_py),
        (
            "bindings/leader.ts",
            "import { defineBinding } from \"@jigging/jig\";\nexport default defineBinding({ package: \"./flows/leader\", slots: { worker: \"flow:flows/sleeper\" } });\n",
        ),
    ]);
    review(project.path());
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("packet");
    let run = run_jig(
        project.path(),
        &["run", "binding:leader", "--out", path(&out)],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let stdout = run.json();
    // Two sibling children fill the root's activity; the save still lands.
    assert_eq!(stdout["output"], json!([1, 2, 1]));
    assert_eq!(stdout["method"]["binding"], "leader");
    assert_eq!(stdout["checkpoint"]["evidence"], "both children running");
    assert_packet_agrees(&stdout, &out);
}

#[test]
fn a_known_success_is_not_downgraded_when_the_coordinator_is_lost_before_delivery() {
    let project = chapters_example();
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("report");
    let input = json!({"chapters": ["intro", "method"]}).to_string();
    // The coordinator dies once the execution is accepted, before delivery.
    let crashed = output(
        jig(project.path())
            .args([
                "run",
                "flow:flows/chapters",
                "--input",
                &input,
                "--out",
                path(&out),
            ])
            .env("JIG_TEST_CRASH_AT", "run-executed")
            .output()
            .unwrap(),
    );
    assert_ne!(crashed.status, 0, "{crashed:?}");
    assert!(!out.exists(), "{crashed:?}");

    let listed = run_jig(project.path(), &["runs"]);
    let fields: Vec<String> = listed
        .stdout
        .lines()
        .next()
        .unwrap()
        .split('\t')
        .map(str::to_string)
        .collect();
    assert_eq!(
        fields[1..3],
        ["succeeded", "flow:flows/chapters"],
        "{listed:?}"
    );
    let terminal =
        run_jig(project.path(), &["runs", "show", &fields[0]]).json()["terminal"].clone();
    assert_eq!(terminal["status"], "succeeded");
    assert_eq!(terminal["output"]["chapters"], 2);
    // The final files went with the coordinator: the source names the
    // checkpoint's bytes instead (contents.md was never saved).
    assert_eq!(terminal["delivery"]["source"], "checkpoint");
    assert_first_two_chapters(&out);
    assert_packet_agrees(&terminal, &out);
}

/// The same contract from TypeScript, as an ordinary capability call.
const SAVER_TS: &str = r#"import { handle } from "@jigging/flow";

await handle(async (run) => {
  const receipt = await run.callCapability({
    operationId: "save-1",
    slot: "progress",
    method: "save",
    input: { sequence: 1, evidence: { from: "ts" }, files: { "notes.md": "saved from TypeScript\n" } },
  });
  throw new Error(`stopped after ${JSON.stringify(receipt)}`);
});
"#;

#[test]
fn a_typescript_flow_saves_through_an_ordinary_capability_call() {
    let project = checkpointing_project("saver", "flow.ts", SAVER_TS);
    let parent = tempfile::tempdir().unwrap();
    let out = parent.path().join("packet");
    let run = run_jig(
        project.path(),
        &["run", "flow:flows/saver", "--out", path(&out)],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let stdout = run.json();
    assert_eq!(stdout["code"], "EXECUTION_FAILED", "{run:?}");
    let message = stdout["message"].as_str().unwrap();
    assert!(message.contains(r#""sequence":1"#), "{run:?}");
    assert!(
        message.contains(stdout["checkpoint"]["digest"].as_str().unwrap()),
        "{run:?}"
    );
    assert_eq!(stdout["delivery"]["source"], "checkpoint");
    assert_eq!(
        packet_files(&out),
        [(
            "notes.md".to_string(),
            "saved from TypeScript\n".to_string()
        )]
    );
    assert_packet_agrees(&stdout, &out);
}

/// The packet at `out` holds exactly the second checkpoint's files: the
/// first two chapters.
fn assert_first_two_chapters(out: &std::path::Path) {
    assert_eq!(
        packet_files(out),
        [chapter(1, "intro"), chapter(2, "method")]
    );
}
