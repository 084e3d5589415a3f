use super::*;
use jig_provider_builtin::checkpoint::Save;
use std::time::{Duration, Instant};

fn aggregate() -> Aggregate {
    Aggregate {
        identity: json!({
            "runId": "run-1",
            "method": {"target": "flow:flows/p", "package": {"path": "flows/p", "digest": "sha256:00"}, "binding": null},
            "input": {"digest": "sha256:11", "attachments": {}},
        }),
        save: Save {
            sequence: 2,
            evidence: json!("half"),
            files: [("a/b.md".to_string(), "kept\n".to_string())].into(),
        },
        digest: "sha256:22".into(),
    }
}

fn lost() -> Terminal {
    Terminal::lost("gone")
}

/// A project's `runs/` with the Runs API over it.
fn fresh_runs() -> (tempfile::TempDir, Runs) {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::new(dir.path().join("runs"), DEFAULT_SETTLE_RESERVE_BYTES);
    std::fs::create_dir_all(dir.path().join("runs")).unwrap();
    (dir, runs)
}

/// A record as a coordinator that is gone (another pid) left it.
fn record(id: &str, terminal: Option<Value>) -> Vec<u8> {
    let mut value = json!({"id": id, "pid": 0, "submittedAtUnixMs": 1, "target": "flow:flows/p"});
    if let Some(terminal) = terminal {
        value["terminal"] = terminal;
    }
    flow::json::canonical(&value)
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A record removed between the listing of the directory and its read
/// (retention beside a daemon) is left out; the others are listed.
#[test]
fn a_record_removed_while_listing_is_left_out_not_an_error() {
    let (dir, runs) = fresh_runs();
    let settled = dir.path().join("runs");
    std::fs::write(
        settled.join("run-a.json"),
        record("run-a", Some(lost().to_value())),
    )
    .unwrap();
    let ids: std::collections::BTreeSet<String> =
        ["run-a".to_string(), "run-gone".to_string()].into();
    let listed = runs.load_listed(&ids).unwrap();
    assert_eq!(listed.records.len(), 1);
    assert_eq!(listed.records[0].id, "run-a");
    // An unreadable record is listed apart, by its file; the rest still is.
    std::fs::write(settled.join("run-b.json"), b"not JSON").unwrap();
    let listed = runs.list().unwrap();
    assert_eq!(listed.records.len(), 1);
    assert_eq!(
        listed.unreadable,
        [Unreadable {
            id: "run-b".into(),
            file: ".jig/runs/run-b.json".into()
        }]
    );
    // A corrupt pending record does not stop the fencing of the others.
    std::fs::create_dir_all(settled.join("pending")).unwrap();
    std::fs::write(settled.join("pending/run-c.json"), b"{").unwrap();
    std::fs::write(settled.join("pending/run-d.json"), record("run-d", None)).unwrap();
    assert_eq!(runs.fence_lost().unwrap(), 1);
    assert_eq!(runs.load("run-d").unwrap().status(), Status::Lost);
    let unreadable: Vec<String> = runs
        .list()
        .unwrap()
        .unreadable
        .into_iter()
        .map(|u| u.file)
        .collect();
    assert_eq!(
        unreadable,
        [".jig/runs/run-b.json", ".jig/runs/pending/run-c.json"]
    );
}

#[test]
fn a_pending_record_lives_apart_until_it_is_settled() {
    let (dir, runs) = fresh_runs();
    let Submission::New(mut record) = runs.submit(None, json!({"target": "t"}), None).unwrap()
    else {
        panic!("a new Run");
    };
    let id = record.id.clone();
    let json = format!("{id}.json");
    assert_eq!(
        names(&dir.path().join("runs/pending")),
        std::slice::from_ref(&json)
    );
    assert!(!dir.path().join("runs").join(&json).exists());
    assert_eq!(runs.load(&id).unwrap().status(), Status::Pending);
    assert_eq!(runs.pending_ids().unwrap(), std::slice::from_ref(&id));
    runs.note_execution(&mut record, json!({"status": "succeeded"}))
        .unwrap();
    assert_eq!(
        names(&dir.path().join("runs/pending")),
        std::slice::from_ref(&json)
    );
    runs.settle(&mut record, json!({"status": "succeeded"}))
        .unwrap();
    assert!(names(&dir.path().join("runs/pending")).is_empty());
    assert_eq!(names(&dir.path().join("runs")), ["pending".into(), json]);
    assert_eq!(runs.load(&id).unwrap().status(), Status::Succeeded);
    assert!(runs.pending_ids().unwrap().is_empty());
    assert_eq!(runs.list().unwrap().records.len(), 1);
}

#[test]
fn an_input_is_kept_with_its_run_and_an_older_record_has_none() {
    let (dir, runs) = fresh_runs();
    let input = json!({"text": "<b>hi</b>"});
    let digest = sha256_digest(&flow::json::canonical(&input));
    let content = json!({"target": "t", "inputDigest": digest});
    let Submission::New(mut record) = runs.submit(None, content, Some(&input)).unwrap() else {
        panic!("a new Run");
    };
    assert_eq!(record.value[INPUT_RETAINED], true);
    runs.settle(&mut record, json!({"status": "succeeded"}))
        .unwrap();
    let loaded = runs.load(&record.id).unwrap();
    assert_eq!(runs.input(&loaded).unwrap(), Some(input));
    assert_eq!(
        names(&dir.path().join("runs/inputs")),
        [format!("{}.json", record.id)]
    );
    // Bytes that are not the input the record names are not shown.
    std::fs::write(
        dir.path().join(format!("runs/inputs/{}.json", record.id)),
        b"{\"text\":\"other\"}",
    )
    .unwrap();
    assert_eq!(runs.input(&loaded).unwrap(), None);
    // A record written before inputs were kept: its digest alone.
    let older = RunRecord {
        id: "run-old".into(),
        value: json!({"id": "run-old", "inputDigest": digest}),
    };
    assert_eq!(runs.input(&older).unwrap(), None);
    // Without an input nothing is kept.
    let Submission::New(bare) = runs.submit(None, json!({"target": "t"}), None).unwrap() else {
        panic!("a new Run");
    };
    assert!(bare.value.get(INPUT_RETAINED).is_none());
}

#[test]
fn an_input_is_kept_up_to_the_document_limit_and_not_one_byte_past() {
    let mut record = RunRecord {
        id: "run-1".into(),
        value: json!({}),
    };
    // A JSON string's canonical bytes are its characters and two quotes.
    let at = json!("a".repeat(MAX_RETAINED_INPUT_BYTES - 2));
    assert_eq!(
        retain_input(&mut record, &at).map(|b| b.len()),
        Some(MAX_RETAINED_INPUT_BYTES)
    );
    assert_eq!(record.value[INPUT_RETAINED], true);
    let mut record = RunRecord {
        id: "run-2".into(),
        value: json!({}),
    };
    let past = json!("a".repeat(MAX_RETAINED_INPUT_BYTES - 1));
    assert_eq!(retain_input(&mut record, &past), None);
    assert!(record.value.get(INPUT_RETAINED).is_none());
}

#[test]
fn work_without_a_pending_record_is_removed_and_a_pending_runs_is_not() {
    let (dir, runs) = fresh_runs();
    let work = dir.path().join("work");
    let Submission::New(record) = runs.prepare(None, json!({"target": "t"})).unwrap() else {
        panic!("a new Run");
    };
    // Made before its record was durable, by a coordinator now gone.
    std::fs::create_dir_all(work.join(&record.id).join("0/scratch")).unwrap();
    assert_eq!(runs.fence_lost().unwrap(), 0);
    assert!(!work.join(&record.id).exists());
    // A pending Run of this process keeps its work.
    runs.commit(&record, None).unwrap();
    std::fs::create_dir_all(work.join(&record.id).join("0/scratch")).unwrap();
    assert_eq!(runs.fence_lost().unwrap(), 0);
    assert!(work.join(&record.id).join("0/scratch").exists());
}

#[test]
fn a_settled_record_wins_over_the_pending_copy_a_crash_left() {
    let (dir, runs) = fresh_runs();
    let settled = record("run-a", Some(json!({"status": "failed"})));
    std::fs::create_dir_all(dir.path().join("runs/pending")).unwrap();
    std::fs::write(
        dir.path().join("runs/pending/run-a.json"),
        record("run-a", None),
    )
    .unwrap();
    std::fs::write(dir.path().join("runs/run-a.json"), &settled).unwrap();
    assert_eq!(runs.load("run-a").unwrap().status(), Status::Failed);
    assert_eq!(runs.list().unwrap().records.len(), 1);
    assert_eq!(runs.fence_lost().unwrap(), 0);
    assert!(names(&dir.path().join("runs/pending")).is_empty());
    assert_eq!(
        std::fs::read(dir.path().join("runs/run-a.json")).unwrap(),
        settled
    );
}

#[test]
fn runs_an_older_jig_left_pending_are_moved_over_once_and_fenced() {
    // Without markers (the oldest layout): every record may be pending.
    let (dir, runs) = fresh_runs();
    let settled = record("run-s", Some(json!({"status": "succeeded"})));
    std::fs::write(dir.path().join("runs/run-p.json"), record("run-p", None)).unwrap();
    std::fs::write(dir.path().join("runs/run-s.json"), &settled).unwrap();
    assert_eq!(runs.fence_lost().unwrap(), 1);
    assert_eq!(runs.load("run-p").unwrap().status(), Status::Lost);
    assert_eq!(
        std::fs::read(dir.path().join("runs/run-s.json")).unwrap(),
        settled
    );
    assert_eq!(
        names(&dir.path().join("runs")),
        ["pending", "run-p.json", "run-s.json"]
    );
    assert!(names(&dir.path().join("runs/pending")).is_empty());
    // Once moved, the settled history is not read again: a corrupt
    // settled record does not stop the next scan.
    std::fs::write(dir.path().join("runs/run-s.json"), "not JSON").unwrap();
    assert_eq!(runs.fence_lost().unwrap(), 0);

    // With markers and their index: the marked records are the pending ones.
    let (dir, runs) = fresh_runs();
    std::fs::write(dir.path().join("runs/run-m.json"), record("run-m", None)).unwrap();
    std::fs::write(dir.path().join("runs/run-m.pending"), "").unwrap();
    std::fs::write(dir.path().join("runs/.pending-index"), "").unwrap();
    std::fs::write(dir.path().join("runs/run-s.json"), &settled).unwrap();
    // A staging directory a crash left is started afresh.
    std::fs::create_dir_all(dir.path().join("runs/.pending-staging/junk")).unwrap();
    assert_eq!(runs.fence_lost().unwrap(), 1);
    assert_eq!(runs.load("run-m").unwrap().status(), Status::Lost);
    assert_eq!(
        names(&dir.path().join("runs")),
        ["pending", "run-m.json", "run-s.json"]
    );
    assert!(names(&dir.path().join("runs/pending")).is_empty());
}

#[test]
fn a_recovered_packet_is_published_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("packet");
    let shown = out.to_str().unwrap();
    let first = recover_packet("run-1", &aggregate(), shown, lost(), Instant::now()).to_value();
    assert_eq!(
        first["delivery"],
        json!({"status": "written", "destination": shown, "source": "checkpoint"})
    );
    assert_eq!(std::fs::read(out.join("files/a/b.md")).unwrap(), b"kept\n");
    let packet = flow::json::parse(&std::fs::read(out.join("result.json")).unwrap()).unwrap();
    assert_eq!(packet["checkpoint"], first["checkpoint"]);
    assert_eq!(packet["execution"], lost().to_value());
    // A recovery interrupted after publication recognises its packet.
    let again = recover_packet("run-1", &aggregate(), shown, lost(), Instant::now()).to_value();
    assert_eq!(again["delivery"], first["delivery"]);
    // Someone else's directory there is not ours.
    let other = recover_packet("run-2", &aggregate(), shown, lost(), Instant::now()).to_value();
    assert_eq!(other["delivery"]["status"], "failed");
    assert_eq!(other["delivery"]["code"], "JIG_OUTPUT_EXISTS");
}

#[test]
fn recovery_at_and_past_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let Some(past) = Instant::now().checked_sub(RECOVERY_BUDGET + Duration::from_millis(50)) else {
        return;
    };
    let out = dir.path().join("late");
    let late =
        recover_packet("run-1", &aggregate(), out.to_str().unwrap(), lost(), past).to_value();
    assert_eq!(late["delivery"]["status"], "failed");
    assert_eq!(late["delivery"]["code"], "JIG_DELIVERY_FAILED");
    assert!(!out.exists());
    let within = Instant::now()
        .checked_sub(RECOVERY_BUDGET - Duration::from_secs(1))
        .unwrap();
    let out = dir.path().join("in-time");
    let ok =
        recover_packet("run-1", &aggregate(), out.to_str().unwrap(), lost(), within).to_value();
    assert_eq!(ok["delivery"]["status"], "written");
}

/// A recorded Run has its settlement set aside ([`DEFAULT_SETTLE_RESERVE_BYTES`]
/// allocated beside the records); settling in it renames it into place,
/// and a record larger than it is not written there.
#[test]
fn a_run_can_settle_in_the_space_set_aside_for_it() {
    let (dir, runs) = fresh_runs();
    let Submission::New(mut record) = runs.submit(None, json!({"target": "t"}), None).unwrap()
    else {
        panic!("a new Run");
    };
    let id = record.id.clone();
    let reserve = dir.path().join(format!("runs/{id}.reserve"));
    let allocated = std::fs::metadata(&reserve).unwrap();
    assert_eq!(allocated.len(), DEFAULT_SETTLE_RESERVE_BYTES);
    record.value["terminal"] = json!({"status": "succeeded", "output": "kept"});
    let too_big = vec![b' '; DEFAULT_SETTLE_RESERVE_BYTES as usize + 1];
    assert!(!runs.settle_in_reserve(&id, &too_big).unwrap());
    // Exactly the reserve fits (another Run's, which it then settles).
    let Submission::New(at_limit) = runs.submit(None, json!({"target": "v"}), None).unwrap() else {
        panic!("a new Run");
    };
    let whole = vec![b' '; DEFAULT_SETTLE_RESERVE_BYTES as usize];
    assert!(runs.settle_in_reserve(&at_limit.id, &whole).unwrap());
    assert_eq!(
        std::fs::metadata(dir.path().join(format!("runs/{}.json", at_limit.id)))
            .unwrap()
            .len(),
        DEFAULT_SETTLE_RESERVE_BYTES
    );
    let bytes = flow::json::canonical(&record.value);
    assert!(runs.settle_in_reserve(&id, &bytes).unwrap());
    assert!(!reserve.exists());
    assert_eq!(
        std::fs::read(dir.path().join(format!("runs/{id}.json"))).unwrap(),
        bytes
    );
    assert_eq!(runs.load(&id).unwrap().status(), Status::Succeeded);
    // Settled the usual way, a Run leaves no reserve behind.
    let Submission::New(mut other) = runs.submit(None, json!({"target": "u"}), None).unwrap()
    else {
        panic!("a new Run");
    };
    runs.settle(&mut other, json!({"status": "succeeded"}))
        .unwrap();
    assert!(!dir
        .path()
        .join(format!("runs/{}.reserve", other.id))
        .exists());
}

/// A settlement written into the reserve whose rename a crash interrupted
/// is the Run's terminal at the next start, not a loss; a reserve whose
/// Run is not pending goes.
#[test]
fn a_settlement_a_crash_left_in_the_reserve_is_not_lost() {
    let (dir, runs) = fresh_runs();
    let root = dir.path().join("runs");
    std::fs::create_dir_all(root.join("pending")).unwrap();
    std::fs::write(root.join("pending/run-a.json"), record("run-a", None)).unwrap();
    let settled = json!({"status": "succeeded", "output": 7});
    std::fs::write(
        root.join("run-a.reserve"),
        record("run-a", Some(settled.clone())),
    )
    .unwrap();
    std::fs::write(root.join("run-gone.reserve"), vec![0u8; 64]).unwrap();
    assert_eq!(runs.fence_lost().unwrap(), 0);
    let record = runs.load("run-a").unwrap();
    assert_eq!(record.terminal(), Some(&settled));
    assert_eq!(names(&root), ["pending", "run-a.json"]);
    assert!(names(&root.join("pending")).is_empty());
}
