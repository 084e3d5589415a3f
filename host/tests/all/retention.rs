//! `[retention]` through the real binary: `jig gc` and its dry run, a key
//! after its Run is gone, a crash in the middle of a sweep, `jig doctor`'s
//! disk lines, and `jig serve` sweeping while it takes Runs (the bounded
//! soak CI runs; `host/benches/soak.rs` is the long one).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::serve::{served_project, Daemon};
use crate::support::*;

/// A reviewed project `p` with the served Flows, and a host configuration
/// holding `table` beside it (returned as `--config PATH`).
fn project_with(table: &str) -> (tempfile::TempDir, std::path::PathBuf, String) {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("p");
    served_project(&root);
    let config = outer.path().join("host.toml");
    std::fs::write(&config, table).unwrap();
    let config = config.to_str().unwrap().to_string();
    (outer, root, config)
}

/// `jig gc --dry-run`, then `jig gc`: the dry run changes nothing and
/// would free some bytes, and the gc does and says just what it said.
/// Returns the dry run's lines.
fn gc_as_its_dry_run_said(root: &Path, config: &str) -> Vec<String> {
    let before = tree(&root.join(".jig"));
    let dry = jig_with(root, config, &["gc", "--dry-run"]);
    assert_eq!(dry.status, 0, "{dry:?}");
    let last = dry.stdout.lines().last().unwrap_or_default();
    let would_free: u64 = last.rsplit(' ').nth(1).unwrap().parse().unwrap();
    assert!(would_free > 0, "{dry:?}");
    assert_eq!(
        tree(&root.join(".jig")),
        before,
        "a dry run changes nothing"
    );
    let gc = jig_with(root, config, &["gc"]);
    assert_eq!(gc.status, 0, "{gc:?}");
    assert_eq!(
        gc.stdout
            .replace("removed", "would remove")
            .replace("freed", "would free"),
        dry.stdout
    );
    dry.stdout.lines().map(String::from).collect()
}

fn jig_with(root: &Path, config: &str, args: &[&str]) -> Run {
    let mut all = vec!["--config", config];
    all.extend_from_slice(args);
    run_jig(root, &all)
}

fn echo(root: &Path, config: &str, input: &str, key: Option<&str>) -> String {
    let mut args = vec!["run", "flow:flows/echo", "--input", input, "--json"];
    if let Some(key) = key {
        args.extend(["--key", key]);
    }
    let run = jig_with(root, config, &args);
    assert_eq!(run.status, 0, "{run:?}");
    run.json()["runId"].as_str().unwrap().to_string()
}

fn listed(root: &Path) -> Vec<String> {
    let run = run_jig(root, &["runs"]);
    assert_eq!(run.status, 0, "{run:?}");
    run.stdout
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

#[test]
fn without_a_table_gc_removes_nothing() {
    let (_outer, root, config) = project_with("");
    echo(&root, &config, "1", None);
    let before = tree(&root.join(".jig/runs"));
    let gc = jig_with(&root, &config, &["gc"]);
    assert_eq!(
        (gc.status, gc.stdout.as_str(), gc.stderr.as_str()),
        (
            0,
            "no [retention] table in the host configuration; nothing is removed\n",
            ""
        )
    );
    assert_eq!(tree(&root.join(".jig/runs")), before);
}

#[test]
fn gc_keeps_the_newest_runs_and_a_dry_run_changes_nothing() {
    let (_outer, root, config) = project_with("[retention]\nmax-runs = 2\n");
    let ids: Vec<String> = (0..4)
        .map(|n| echo(&root, &config, &n.to_string(), None))
        .collect();
    let lines = gc_as_its_dry_run_said(&root, &config);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], format!("would remove run {}", ids[1]));
    assert_eq!(lines[1], format!("would remove run {}", ids[0]));
    assert!(
        lines[2].starts_with(
            "would remove 2 Run(s), 0 packet(s), 0 checkpoint(s); \
             0 Plan(s), 0 package(s), 0 blob(s), 0 SDK tree(s) of the store; would free "
        ),
        "{lines:?}"
    );
    assert_eq!(listed(&root), [ids[3].clone(), ids[2].clone()]);
    let show = run_jig(&root, &["runs", "show", &ids[0]]);
    assert_eq!(show.status, 1, "{show:?}");
    assert!(show.stderr.starts_with("RUN_NOT_FOUND: "), "{show:?}");
    // At the limit: nothing more goes.
    let again = jig_with(&root, &config, &["gc"]);
    assert_eq!(
        again.stdout,
        "removed 0 Run(s), 0 packet(s), 0 checkpoint(s); \
         0 Plan(s), 0 package(s), 0 blob(s), 0 SDK tree(s) of the store; freed 0 bytes\n"
    );
}

#[test]
fn a_key_replays_within_its_window_and_makes_a_new_run_once_its_run_is_gone() {
    // The window is wide enough that a slow machine's gc and replay still
    // fall inside it; each age counts from when the first Run had settled.
    let (_outer, root, config) =
        project_with("[retention]\nmax-age = \"1s\"\nkey-window = \"5s\"\n");
    let first = echo(&root, &config, "\"k\"", Some("k"));
    let settled = Instant::now();
    let sleep_until = |age: Duration| {
        std::thread::sleep(age.saturating_sub(settled.elapsed()));
    };
    sleep_until(Duration::from_millis(1100));
    // Past max-age, inside the key window: kept, and the key replays it.
    let gc = jig_with(&root, &config, &["gc"]);
    assert!(gc.stdout.starts_with("removed 0 Run(s)"), "{gc:?}");
    assert_eq!(echo(&root, &config, "\"k\"", Some("k")), first);
    sleep_until(Duration::from_millis(5100));
    let gc = jig_with(&root, &config, &["gc"]);
    assert_eq!(
        gc.stdout.lines().next(),
        Some(&*format!("removed run {first}"))
    );
    // The key was forgotten with its Run: the same key is a new Run.
    let second = echo(&root, &config, "\"k\"", Some("k"));
    assert_ne!(second, first);
    assert_eq!(echo(&root, &config, "\"k\"", Some("k")), second);
}

#[test]
fn a_crash_in_the_middle_of_a_sweep_leaves_whole_runs() {
    let (_outer, root, config) = project_with("[retention]\nmax-runs = 1\nkey-window = \"1s\"\n");
    let ids: Vec<String> = (0..3)
        .map(|n| echo(&root, &config, &n.to_string(), Some(&format!("k{n}"))))
        .collect();
    std::thread::sleep(Duration::from_millis(1100));
    for point in ["retention:key-removed", "retention:record-removed"] {
        gc_crashing_at(&root, &config, point);
        // Every listed Run reads whole; its key replays it or makes a new Run.
        for id in listed(&root) {
            let show = run_jig(&root, &["runs", "show", &id]);
            assert_eq!(show.status, 0, "{point}: {show:?}");
            assert_eq!(show.json()["terminal"]["status"], "succeeded");
        }
    }
    let gc = jig_with(&root, &config, &["gc"]);
    assert_eq!(gc.status, 0, "{gc:?}");
    assert_eq!(listed(&root), [ids[2].clone()]);
}

/// The package digest the admitted generation runs for `path`.
pub(crate) fn admitted_package(root: &Path, path: &str) -> String {
    let pointer: Value =
        serde_json::from_slice(&std::fs::read(root.join(".jig/admission/current")).unwrap())
            .unwrap();
    let hex = pointer["plan"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:");
    let plan: Value =
        serde_json::from_slice(&std::fs::read(root.join(".jig/plans").join(hex)).unwrap()).unwrap();
    plan["lock"]["packages"][path]["digest"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Is package `digest` in the project's store?
fn stored(root: &Path, digest: &str) -> bool {
    root.join(".jig/store/packages")
        .join(digest.trim_start_matches("sha256:"))
        .exists()
}

/// Change `flows/echo` (a comment) and admit it: a new generation with a
/// new echo package. Returns that package's digest.
fn admit_a_new_echo(root: &Path, n: usize) -> String {
    let path = root.join("flows/echo/flow.py");
    let mut source = std::fs::read_to_string(&path).unwrap();
    source.push_str(&format!("# generation {n}\n"));
    std::fs::write(&path, source).unwrap();
    review(root);
    admitted_package(root, "flows/echo")
}

#[test]
fn gc_collects_the_store_no_generation_or_run_names() {
    let (_outer, root, config) = project_with("[retention]\nmax-runs = 1\n");
    let first_echo = admitted_package(&root, "flows/echo");
    let first = echo(&root, &config, "1", None);
    // At the limit: the one Run retained names generation 1, which keeps
    // its package although generation 2 is admitted.
    let second_echo = admit_a_new_echo(&root, 2);
    let gc = jig_with(&root, &config, &["gc"]);
    assert!(
        gc.stdout.ends_with(
            "0 Plan(s), 0 package(s), 0 blob(s), 0 SDK tree(s) of the store; freed 0 bytes\n"
        ),
        "{gc:?}"
    );
    assert!(stored(&root, &first_echo));
    // One past: generation 1's last Run goes, and its package with it.
    let second = echo(&root, &config, "2", None);
    let lines = gc_as_its_dry_run_said(&root, &config);
    assert_eq!(lines[0], format!("would remove run {first}"), "{lines:?}");
    assert!(
        lines[1].starts_with("would remove plan sha256:"),
        "{lines:?}"
    );
    assert_eq!(lines[2], format!("would remove package {first_echo}"));
    assert!(
        lines[3].starts_with(
            "would remove 1 Run(s), 0 packet(s), 0 checkpoint(s); \
             1 Plan(s), 1 package(s), 1 blob(s), 0 SDK tree(s) of the store; would free "
        ),
        "{lines:?}"
    );
    assert!(!stored(&root, &first_echo));
    assert!(stored(&root, &second_echo));
    assert_eq!(listed(&root), [second]);
    // What is admitted still runs.
    echo(&root, &config, "3", None);
}

#[test]
fn a_crash_in_the_middle_of_a_store_collection_leaves_what_is_named_whole() {
    let (_outer, root, config) = project_with("[retention]\nmax-runs = 1\n");
    let mut old = vec![admitted_package(&root, "flows/echo")];
    old.push(admit_a_new_echo(&root, 2));
    let current = admit_a_new_echo(&root, 3);
    echo(&root, &config, "1", None);
    for point in [
        "retention:store-plan-removed",
        "retention:store-package-removed",
    ] {
        gc_crashing_at(&root, &config, point);
        // The admitted generation reads whole, runs, and needs no review.
        echo(&root, &config, "2", None);
        let ready = run_jig(&root, &["review", "--yes"]);
        assert_eq!(ready.stdout, "project is ready\n", "{point}: {ready:?}");
    }
    let gc = jig_with(&root, &config, &["gc"]);
    assert_eq!(gc.status, 0, "{gc:?}");
    assert!(old.iter().all(|d| !stored(&root, d)), "{gc:?}");
    assert!(stored(&root, &current));
    let again = jig_with(&root, &config, &["gc"]);
    assert!(
        again.stdout.ends_with(
            "0 Plan(s), 0 package(s), 0 blob(s), 0 SDK tree(s) of the store; freed 0 bytes\n"
        ),
        "{again:?}"
    );
    echo(&root, &config, "3", None);
}

/// `jig serve` collects the store while it takes Runs and a review admits
/// beside it: a Run in flight of the old generation keeps that
/// generation's package through the sweeps; once no Run names it, a sweep
/// removes it.
#[test]
fn serve_keeps_the_package_of_a_run_in_flight_across_a_review() {
    let (_outer, root, config) = project_with("[retention]\nmax-runs = 1\ninterval = \"1s\"\n");
    let daemon = Daemon::start(&root, &["--config", &config]);
    let old_sleep = admitted_package(&root, "flows/sleep");
    let (status, started) = daemon.call(
        "POST",
        "/v1/projects/p/runs?wait=false",
        Some(serde_json::json!({"target": "flow:flows/sleep", "input": 4})),
    );
    assert_eq!(status, 202, "{started}");
    let id = started["runId"].as_str().unwrap().to_string();
    // A review admits a new sleep beside the daemon while the Run sleeps.
    let path = root.join("flows/sleep/flow.py");
    let source = std::fs::read_to_string(&path).unwrap() + "# generation 2\n";
    std::fs::write(&path, source).unwrap();
    review(&root);
    let new_sleep = admitted_package(&root, "flows/sleep");
    assert_ne!(new_sleep, old_sleep);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        stored(&root, &old_sleep),
        "two sweeps kept the Run's package"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let terminal = loop {
        let (_, record) = daemon.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
        if !record["terminal"].is_null() || Instant::now() > deadline {
            break record["terminal"].clone();
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    // A Run of generation 2, then max-runs removes the old Run, and the
    // next sweeps its generation's package.
    let (status, next) =
        daemon.submit(serde_json::json!({"target": "flow:flows/echo", "input": 1}));
    assert_eq!(
        (status, &next["status"]),
        (200, &Value::from("succeeded")),
        "{next}"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while stored(&root, &old_sleep) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!stored(&root, &old_sleep), "{}", daemon.log());
    assert!(stored(&root, &new_sleep));
    let (status, again) =
        daemon.submit(serde_json::json!({"target": "flow:flows/sleep", "input": 0}));
    assert_eq!(
        (status, &again["status"]),
        (200, &Value::from("succeeded")),
        "{again}"
    );
}

/// Set `path`'s mtime to `age` ago.
fn age_file(path: &Path, age: Duration) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - age)
        .unwrap();
}

/// The bundled SDK trees another jig build left: `jig gc` removes one
/// whose last use (its seal's mtime) is one second past the grace, with its
/// seal, and keeps one ten seconds inside it; this build's tree stays
/// however long unused; a dry run lists the same and changes nothing; the
/// project still runs.
#[test]
fn gc_collects_the_sdk_trees_of_other_builds_past_their_grace() {
    use jig_engine::exec::sdk::SUPPORT_GRACE;
    let (_outer, root, config) = project_with("[retention]\nmax-runs = 100\n");
    echo(&root, &config, "1", None);
    let support = root.join(".jig/store/support");
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(&support)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let [ours, ours_seal] = <[String; 2]>::try_from(listing()).unwrap();
    assert_eq!(ours_seal, format!("{ours}.seal"));
    // Two trees of "another build": copies of this one whose seals name
    // other sources.
    let stale = format!("python-{}", "a".repeat(64));
    let fresh = format!("python-{}", "b".repeat(64));
    let mut seal: Value =
        serde_json::from_slice(&std::fs::read(support.join(&ours_seal)).unwrap()).unwrap();
    let source = seal["files"]
        .as_object()
        .unwrap()
        .keys()
        .find(|k| k.ends_with(".py"))
        .unwrap()
        .clone();
    seal["files"][&source] = Value::from(format!("sha256:{}", "0".repeat(64)));
    for (name, age) in [
        (&stale, SUPPORT_GRACE + Duration::from_secs(1)),
        (&fresh, SUPPORT_GRACE - Duration::from_secs(10)),
    ] {
        let copied = std::process::Command::new("cp")
            .arg("-a")
            .arg(support.join(&ours))
            .arg(support.join(name))
            .status()
            .unwrap();
        assert!(copied.success());
        let path = support.join(format!("{name}.seal"));
        std::fs::write(&path, serde_json::to_vec(&seal).unwrap()).unwrap();
        age_file(&path, age);
    }
    age_file(&support.join(&ours_seal), SUPPORT_GRACE * 10);

    let lines = gc_as_its_dry_run_said(&root, &config);
    assert_eq!(
        lines[0],
        format!("would remove SDK tree {stale}"),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with(
            "would remove 0 Run(s), 0 packet(s), 0 checkpoint(s); \
             0 Plan(s), 0 package(s), 0 blob(s), 1 SDK tree(s) of the store; would free "
        ),
        "{lines:?}"
    );
    let mut kept = vec![ours, ours_seal, format!("{fresh}.seal"), fresh];
    kept.sort();
    assert_eq!(listing(), kept);
    echo(&root, &config, "2", None);
}

#[test]
fn doctor_shows_the_project_disk_and_its_retention() {
    let (_outer, root, config) = project_with("[retention]\nmax-age = \"30d\"\n");
    echo(&root, &config, "1", None);
    let doctor = jig_with(&root, &config, &["doctor"]);
    let text = doctor.stdout;
    assert!(
        text.contains("disk (this project's .jig):\n  runs: 1 ("),
        "{text}"
    );
    assert!(text.contains("\n  packets: 0 (0 bytes)\n"), "{text}");
    assert!(text.contains("\n  store: "), "{text}");
    assert!(
        text.contains("\n  retention: max-age 2592000 s, max-runs none, packets-max-age 2592000 s, key-window 86400 s\n"),
        "{text}"
    );
}

#[test]
fn config_check_validates_the_table() {
    let (outer, _root, _config) = project_with("");
    let check = |table: &str| {
        let path = outer.path().join("check.toml");
        std::fs::write(&path, table).unwrap();
        run_jig(outer.path(), &["config", "check", path.to_str().unwrap()])
    };
    let ok = check("[retention]\nmax-age = \"30d\"\nmax-runs = 1000\npackets-max-age = \"7d\"\n");
    assert_eq!(
        (ok.status, ok.stdout.as_str()),
        (0, "configuration is valid\n")
    );
    for (table, says) in [
        (
            "[retention]\nmax-age = \"30 days\"\n",
            "[retention] max-age",
        ),
        ("[retention]\nmax-runs = 0\n", "max-runs must be at least 1"),
        ("[retention]\n", "[retention] needs"),
        ("[retention]\nmax-ages = \"1d\"\n", "max-ages"),
    ] {
        let refused = check(table);
        assert_eq!(refused.status, 1, "{table}: {refused:?}");
        assert!(
            refused.stderr.starts_with("JIG_CONFIG_INVALID: "),
            "{refused:?}"
        );
        assert!(refused.stderr.contains(says), "{table}: {refused:?}");
    }
}

/// A metric's value for project `p`, if it is shown yet.
fn shown(metrics: &str, name: &str) -> Option<u64> {
    let prefix = format!("{name}{{project=\"p\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.parse().unwrap())
}

/// A metric's value for project `p`.
fn gauge(metrics: &str, name: &str) -> u64 {
    shown(metrics, name).unwrap_or_else(|| panic!("no {name}: {metrics}"))
}

/// The CI soak: a few hundred Runs through `jig serve` sweeping every
/// second with `max-runs`; every Run gets exactly one terminal, nothing
/// pending is lost, and the records level off at the limit.
#[test]
fn serve_sweeps_while_it_takes_runs_and_the_records_level_off() {
    const CLIENTS: usize = 8;
    const RUNS: usize = 200;
    const KEEP: u64 = 20;
    let (_outer, root, config) = project_with(&format!(
        "[retention]\nmax-runs = {KEEP}\ninterval = \"1s\"\n"
    ));
    let daemon = Daemon::start(&root, &["--config", &config]);
    let started = Instant::now();
    let terminals: Vec<Value> = daemon.echo_concurrently(CLIENTS, RUNS);
    let mut outputs: Vec<u64> = terminals
        .iter()
        .map(|t| {
            assert_eq!(t["status"], "succeeded", "{t}");
            t["output"].as_u64().unwrap()
        })
        .collect();
    outputs.sort();
    assert_eq!(
        outputs,
        (0..RUNS as u64).collect::<Vec<_>>(),
        "one terminal each"
    );
    let (_, metrics) = daemon.raw("GET", "/metrics", None, &[]);
    assert!(
        metrics.contains(&format!("jig_runs_total{{status=\"succeeded\"}} {RUNS}")),
        "{metrics}"
    );
    // The next sweeps bring the records to the limit; a sweep counts what
    // it removed only after it collected the store too.
    let deadline = Instant::now() + Duration::from_secs(15);
    let metrics = loop {
        let (_, metrics) = daemon.raw("GET", "/metrics", None, &[]);
        let leveled = shown(&metrics, "jig_retained_runs") == Some(KEEP)
            && shown(&metrics, "jig_retention_removed_runs_total") == Some(RUNS as u64 - KEEP);
        if leveled || Instant::now() > deadline {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        gauge(&metrics, "jig_retained_runs"),
        KEEP,
        "{}",
        daemon.log()
    );
    assert_eq!(
        gauge(&metrics, "jig_retention_removed_runs_total"),
        RUNS as u64 - KEEP
    );
    assert!(gauge(&metrics, "jig_retained_run_bytes") > 0);
    assert!(gauge(&metrics, "jig_store_bytes") > 0);
    let records = daemon.runs();
    assert_eq!(records.len(), KEEP as usize);
    let newest: Vec<&Value> = records.iter().map(|r| &r["terminal"]["status"]).collect();
    assert!(
        newest.iter().all(|s| *s == "succeeded"),
        "nothing pending is lost"
    );
    // Timed by the bench, not here: this only reports.
    eprintln!("soak: {RUNS} Runs in {:?}", started.elapsed());
}

/// `jig gc` with a crash injected at `point`: it must not succeed.
fn gc_crashing_at(root: &std::path::Path, config: &str, point: &str) {
    let crashed = output(
        jig(root)
            .args(["--config", config, "gc"])
            .env("JIG_TEST_CRASH_AT", point)
            .output()
            .unwrap(),
    );
    assert_ne!(crashed.status, 0, "{point}: {crashed:?}");
}
