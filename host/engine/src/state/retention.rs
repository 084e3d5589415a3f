//! Retention: which settled Runs, their checkpoints and delivered packets
//! the operator's `[retention]` lets go, and the bytes `.jig/` holds.
//! `jig gc` and `jig serve`'s periodic sweep both apply [`sweep`]; without
//! a table nothing is removed, as a plain CLI project expects.
//!
//! The rules:
//! - A settled Run goes when it is older than `max-age` (since it
//!   settled) or past the newest `max-runs` settled Runs of the project
//!   (newest by submission); with both set, both apply.
//! - A keyed Run stays at least [`Policy::key_window`] after it settled
//!   (default [`crate::config::retention::DEFAULT_KEY_WINDOW`]), whatever the limits, so its key
//!   replays it. After its Run is removed a key is forgotten: the same key
//!   makes a new Run.
//! - A packet goes with its Run, or once older than `packets-max-age`
//!   (default `max-age`); a checkpoint goes with its Run.
//! - Never removed: a pending Run, its work, checkpoint or packet.
//! - The store ([`collect_store`]): a retained Plan, package or blob goes
//!   once nothing names it: not the admitted generation, nor the
//!   generation of any recorded Run, pending or settled. The bundled SDK
//!   trees of other jig builds below the store go by their own rule, their
//!   last use ([`crate::exec::sdk::collect_support`]), which the same callers apply.
//!
//! Crash safety: a Run's key goes first, then its record (one unlink), then
//! its kept input, checkpoint and packet (renamed aside, then removed). A
//! reader sees the Run or not; a crash leaves at most an orphan input,
//! checkpoint or packet nobody can reach, which the next sweep removes. The
//! store goes from the top of what names what down: Plans, then package
//! manifests (each one unlink; a package's shared tree renamed aside
//! first), then blobs, so a crash leaves only unnamed entries, which the
//! next collection removes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use flow::json::Value;

use super::{ProjectState, RunRecord, StateError, PACKET_STORE};
use crate::config::retention::Policy;

/// Runs one sweep of `jig serve` removes at most; it sweeps again soon
/// after when more are due, so a backlog never holds the project long.
pub const SWEEP_BATCH: usize = 500;
/// What an entry being removed is renamed to first (a packet below
/// `packets/`, a shared tree, an SDK tree, a worker's work root), so its
/// name is whole or gone and the next collection removes what a crash
/// left aside.
pub const REMOVING_PREFIX: &str = ".removing-";

/// What retention knows of one settled Run.
#[derive(Debug, Clone)]
pub struct Settled {
    pub id: String,
    pub submitted_ms: u64,
    pub settled_ms: u64,
    pub keyed: bool,
}

impl Settled {
    fn of(record: &RunRecord) -> Settled {
        let ms = |field: &str| record.value.get(field).and_then(Value::as_u64);
        let submitted_ms = ms("submittedAtUnixMs").unwrap_or(0);
        Settled {
            id: record.id.clone(),
            submitted_ms,
            // Records written before settlement times were kept age from
            // their submission.
            settled_ms: ms("settledAtUnixMs").unwrap_or(submitted_ms),
            keyed: record.value.get("key").is_some_and(|k| !k.is_null()),
        }
    }
}

/// The ids among `settled` that `policy` removes at `now_ms`, newest first.
pub fn expired(policy: &Policy, settled: &mut [Settled], now_ms: u64) -> Vec<String> {
    settled.sort_by(|a, b| (b.submitted_ms, &b.id).cmp(&(a.submitted_ms, &a.id)));
    let older =
        |since: u64, limit: Duration| now_ms.saturating_sub(since) > limit.as_millis() as u64;
    settled
        .iter()
        .enumerate()
        .filter(|(rank, run)| {
            let over_count = policy.max_runs.is_some_and(|max| *rank >= max);
            let over_age = policy.max_age.is_some_and(|age| older(run.settled_ms, age));
            let replayable = run.keyed && !older(run.settled_ms, policy.key_window);
            (over_count || over_age) && !replayable
        })
        .map(|(_, run)| run.id.clone())
        .collect()
}

/// What one sweep removed (or, dry, would remove).
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub runs: Vec<String>,
    pub packets: Vec<String>,
    pub checkpoints: usize,
    pub freed_bytes: u64,
    /// More was due than the sweep's budget allowed.
    pub more: bool,
}

/// Apply `policy` to the project at `now_ms`, removing at most `budget`
/// Runs (their packets and checkpoints with them) and as many expired
/// packets. With `dry_run` nothing changes and the report says what would.
pub fn sweep(
    state: &ProjectState,
    policy: &Policy,
    now_ms: u64,
    dry_run: bool,
    budget: usize,
) -> Result<Report, StateError> {
    let runs = state.runs();
    let checkpoints = state.checkpoints();
    let packets = state.dir.join(PACKET_STORE);
    let mut report = Report::default();
    if !dry_run {
        // Packets a crash left half-removed: nobody can reach them.
        for (name, path) in entries(&packets) {
            if name.starts_with(REMOVING_PREFIX) {
                report.freed_bytes += tree_bytes(&path);
                crate::files::remove_tree(&path).map_err(StateError::io("removing a packet"))?;
            }
        }
    }
    let records = runs.settled();
    let mut settled: Vec<Settled> = records.iter().map(Settled::of).collect();
    let due = expired(policy, &mut settled, now_ms);
    report.more = due.len() > budget;
    let by_id: std::collections::HashMap<&str, &RunRecord> =
        records.iter().map(|r| (r.id.as_str(), r)).collect();
    for id in due.iter().take(budget) {
        let record = by_id[id.as_str()];
        report.freed_bytes += runs.remove_settled(record, dry_run).map_err(|e| match e {
            super::RunsError::State(e) => e,
            other => StateError::Invalid {
                message: other.to_string(),
            },
        })?;
        super::crash_point("retention:record-removed");
        let checkpoint = state.dir.join("checkpoints").join(format!("{id}.json"));
        if let Ok(meta) = std::fs::metadata(&checkpoint) {
            report.freed_bytes += meta.len();
            report.checkpoints += 1;
            if !dry_run {
                checkpoints.remove(id)?;
            }
        }
        if remove_packet(&packets, id, dry_run, &mut report.freed_bytes)? {
            report.packets.push(id.clone());
        }
        report.runs.push(id.clone());
    }
    // Inputs whose record a sweep a crash interrupted removed.
    for (_, path) in runs.orphan_inputs() {
        report.freed_bytes += tree_bytes(&path);
        if !dry_run {
            std::fs::remove_file(&path)
                .or_else(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(()),
                    _ => Err(e),
                })
                .map_err(StateError::io("removing a Run's input"))?;
        }
    }
    // Packets past their own age, and orphans (a Run removed by a sweep a
    // crash interrupted): never the packet of a pending Run.
    let removed: std::collections::HashSet<&str> = report.runs.iter().map(String::as_str).collect();
    let settled_at: std::collections::HashMap<&str, u64> = settled
        .iter()
        .map(|s| (s.id.as_str(), s.settled_ms))
        .collect();
    let mut expired_packets = Vec::new();
    for (id, _) in entries(&packets) {
        if id.starts_with('.') || removed.contains(id.as_str()) {
            continue;
        }
        let due = match settled_at.get(id.as_str()) {
            Some(settled) => policy
                .packets_max_age
                .is_some_and(|age| now_ms.saturating_sub(*settled) > age.as_millis() as u64),
            // No settled record: pending (kept), or gone (an orphan).
            None => matches!(runs.load(&id), Err(super::RunsError::NotFound(_))),
        };
        if due {
            expired_packets.push(id);
        }
    }
    for id in expired_packets {
        if remove_packet(&packets, &id, dry_run, &mut report.freed_bytes)? {
            report.packets.push(id);
        }
    }
    Ok(report)
}

/// Remove the packet of Run `id`, if it has one: renamed aside in one step
/// (a reader finds it whole or not at all), then removed.
fn remove_packet(
    packets: &Path,
    id: &str,
    dry_run: bool,
    freed: &mut u64,
) -> Result<bool, StateError> {
    let dir = packets.join(id);
    if !dir.is_dir() {
        return Ok(false);
    }
    *freed += tree_bytes(&dir);
    if dry_run {
        return Ok(true);
    }
    let aside = packets.join(format!("{REMOVING_PREFIX}{id}"));
    std::fs::rename(&dir, &aside).map_err(StateError::io("removing a packet"))?;
    super::crash_point("retention:packet-aside");
    crate::files::remove_tree(&aside).map_err(StateError::io("removing a packet"))?;
    Ok(true)
}

/// What collecting the store removed (or, dry, would remove).
#[derive(Debug, Default, Clone)]
pub struct Collected {
    pub plans: Vec<String>,
    pub packages: Vec<String>,
    pub blobs: usize,
    pub freed_bytes: u64,
    /// A review held the admission lock: the store was left as it was,
    /// for the next collection.
    pub deferred: bool,
}

/// Remove from the store what nothing names any more: the retained Plans
/// that are neither the admitted generation's nor possibly the Plan of a
/// generation some recorded Run (pending or settled) ran, the packages
/// those Plans do not name, and the blobs neither those Plans nor the
/// kept packages name. With `dry_run` nothing changes.
///
/// The caller keeps new Runs from being recorded meanwhile (it owns the
/// project, or holds the daemon's submission lock), so every Run that can
/// still read the store is among the records read here. The admission
/// lock is taken (without waiting; busy, the collection is
/// [`Collected::deferred`]) so no review is between writing the packages
/// of a Plan and admitting it.
///
/// A generation's Plan is not recorded by number: the Plans that may be
/// generation `n`'s are those retained with base `n - 1` (none for 1),
/// every one of them kept while a Run of `n` is. Every `sha256:` digest a
/// kept Plan holds anywhere (its packages, prepared packages, layouts) is
/// kept. The Runs in `runs_gone` count as removed (those a dry sweep would
/// remove), so a dry run says what the sweep and collection would free.
pub fn collect_store(
    state: &ProjectState,
    dry_run: bool,
    runs_gone: &[String],
) -> Result<Collected, StateError> {
    let mut collected = Collected::default();
    let _admission = match state.admission_guard() {
        Ok(guard) => guard,
        Err(StateError::Busy { .. }) => {
            collected.deferred = true;
            return Ok(collected);
        }
        Err(e) => return Err(e),
    };
    let current = state.current()?;
    let generations = state.runs().generations(runs_gone).map_err(|e| match e {
        super::RunsError::State(e) => e,
        other => StateError::Invalid {
            message: other.to_string(),
        },
    })?;
    let plans_dir = state.dir.join("plans");
    let mut kept_plans = Vec::new();
    let mut unnamed_plans = Vec::new();
    for (name, path) in entries(&plans_dir) {
        if name.starts_with('.') {
            continue;
        }
        let digest = format!("sha256:{name}");
        let plan = std::fs::read(&path)
            .ok()
            .and_then(|bytes| flow::json::parse(&bytes).ok());
        let Some(plan) = plan else {
            // Unreadable: not ours to judge; kept, and it keeps nothing.
            continue;
        };
        let generation = match plan.get("base") {
            Some(Value::Null) | None => Some(1),
            Some(base) => base.as_u64().and_then(|b| b.checked_add(1)),
        };
        let admitted = current.as_ref().is_some_and(|g| g.plan_digest == digest);
        if admitted || generation.is_some_and(|n| generations.contains(&n)) {
            kept_plans.push(plan);
        } else {
            unnamed_plans.push((digest, path));
        }
    }
    let mut named = std::collections::BTreeSet::new();
    for plan in &kept_plans {
        digests_in(plan, &mut named);
    }
    let store = state.store();
    // Top down: Plans, then packages, then blobs.
    for (digest, path) in unnamed_plans {
        collected.freed_bytes += tree_bytes(&path);
        if !dry_run {
            std::fs::remove_file(&path).map_err(StateError::io("removing a retained Plan"))?;
            super::crash_point("retention:store-plan-removed");
        }
        collected.plans.push(digest);
    }
    let unnamed = store.collect(&named, dry_run)?;
    collected.packages = unnamed.packages;
    collected.blobs = unnamed.blobs;
    collected.freed_bytes += unnamed.freed_bytes;
    Ok(collected)
}

/// What [`Store::collect`] removed (or, dry, would remove).
///
/// [`Store::collect`]: super::Store::collect
#[derive(Debug, Default, Clone)]
pub struct Unnamed {
    pub packages: Vec<String>,
    pub blobs: usize,
    pub freed_bytes: u64,
}

/// Every `sha256:<64 hex>` string anywhere in `value`.
fn digests_in(value: &Value, out: &mut std::collections::BTreeSet<String>) {
    match value {
        Value::String(s) => {
            let hex = s.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                out.insert(s.clone());
            }
        }
        Value::Array(items) => items.iter().for_each(|v| digests_in(v, out)),
        Value::Object(map) => map.values().for_each(|v| digests_in(v, out)),
        _ => {}
    }
}

/// The (name, path) of every entry of `dir`; none when it cannot be read.
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                .collect()
        })
        .unwrap_or_default()
}

/// Bytes of the regular files below `path` (or of `path` itself), read
/// through no link.
pub fn tree_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return if meta.is_file() { meta.len() } else { 0 };
    }
    entries(path).iter().map(|(_, p)| tree_bytes(p)).sum()
}

/// A count and the bytes it takes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub count: u64,
    pub bytes: u64,
}

/// What a project's `.jig/` holds: Run records (with their keys and
/// checkpoints), delivered packets, and the store.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub runs: Tally,
    pub packets: Tally,
    pub store: Tally,
}

/// Measure the project at `root` without owning it (read only; a served
/// project can be measured beside its daemon).
pub fn usage(root: &Path) -> Usage {
    let dir = root.join(super::STATE_DIR);
    let runs_dir = dir.join("runs");
    let records = |d: &Path| {
        entries(d)
            .iter()
            .filter(|(name, _)| name.ends_with(".json") && !name.starts_with('.'))
            .count() as u64
    };
    let runs = Tally {
        count: records(&runs_dir) + records(&runs_dir.join("pending")),
        bytes: tree_bytes(&runs_dir) + tree_bytes(&dir.join("checkpoints")),
    };
    let packets_dir = dir.join(PACKET_STORE);
    let packets = Tally {
        count: entries(&packets_dir)
            .iter()
            .filter(|(name, _)| !name.starts_with('.'))
            .count() as u64,
        bytes: tree_bytes(&packets_dir),
    };
    let store_dir = dir.join("store");
    let store = Tally {
        count: (entries(&store_dir.join("packages")).len()
            + entries(&store_dir.join("blobs")).len()) as u64,
        bytes: tree_bytes(&store_dir),
    };
    Usage {
        runs,
        packets,
        store,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::retention::Retention;
    use jig_provider_api::dispatch::now_unix_ms as now_ms;

    const S: u64 = 1000;
    const DAY: u64 = 24 * 3600 * S;

    fn policy(table: &str) -> Result<Policy, String> {
        let table: Retention = toml::from_str(table).map_err(|e| e.to_string())?;
        Policy::from_table(&table)
    }

    fn run(id: &str, submitted_ms: u64, settled_ms: u64, keyed: bool) -> Settled {
        Settled {
            id: id.into(),
            submitted_ms,
            settled_ms,
            keyed,
        }
    }

    #[test]
    fn the_age_limit_one_second_inside_and_past() {
        let p = policy("max-age = \"1h\"").unwrap();
        let now = 10 * DAY;
        let mut runs = vec![
            run("inside", 1, now - 3600 * S + S, false),
            run("at", 2, now - 3600 * S, false),
            run("past", 3, now - 3600 * S - S, false),
        ];
        assert_eq!(expired(&p, &mut runs, now), ["past"]);
    }

    #[test]
    fn the_count_limit_at_and_one_past() {
        let p = policy("max-runs = 3").unwrap();
        let mut runs: Vec<Settled> = (0..3).map(|n| run(&format!("r{n}"), n, n, false)).collect();
        assert!(expired(&p, &mut runs, DAY).is_empty());
        runs.push(run("r3", 3, 3, false));
        assert_eq!(expired(&p, &mut runs, DAY), ["r0"], "the oldest goes");
    }

    #[test]
    fn both_limits_apply_and_a_key_keeps_its_run_within_the_window() {
        let p = policy("max-age = \"1d\"\nmax-runs = 2\nkey-window = \"2d\"").unwrap();
        let now = 10 * DAY;
        let mut runs = vec![
            run("new", now, now, false),
            run("old", now - 2 * DAY, now - 2 * DAY, false),
            run("third", now - 1, now - 1, false),
            run("keyed-old", now - 3, now - DAY - S, true),
            run("keyed-past", now - 4, now - 2 * DAY - S, true),
        ];
        let mut gone = expired(&p, &mut runs, now);
        gone.sort();
        assert_eq!(gone, ["keyed-past", "old"]);
    }

    fn project() -> (tempfile::TempDir, ProjectState) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("jig.ts"), "export default {};\n").unwrap();
        let state = ProjectState::acquire(dir.path()).unwrap();
        (dir, state)
    }

    /// A Run submitted (with `key`), settled, and given a packet and a
    /// checkpoint file.
    fn settled_run(state: &ProjectState, key: Option<&str>, n: u64) -> String {
        let runs = state.runs();
        let input = serde_json::json!({"n": n});
        let digest = flow::digest::sha256_digest(&flow::json::canonical(&input));
        let content = serde_json::json!({"target": "t", "n": n, "inputDigest": digest});
        let super::super::Submission::New(mut record) =
            runs.submit(key, content, Some(&input)).unwrap()
        else {
            panic!("a new Run");
        };
        runs.settle(&mut record, serde_json::json!({"status": "succeeded"}))
            .unwrap();
        let packet = state.dir.join(PACKET_STORE).join(&record.id);
        std::fs::create_dir_all(packet.join("files")).unwrap();
        std::fs::write(packet.join("result.json"), "{}").unwrap();
        std::fs::write(
            state
                .dir
                .join("checkpoints")
                .join(format!("{}.json", record.id)),
            "{}",
        )
        .unwrap();
        record.id
    }

    fn tree(dir: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for (name, path) in entries(dir) {
            out.push(name.clone());
            if path.is_dir() {
                out.extend(tree(&path).into_iter().map(|n| format!("{name}/{n}")));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn a_sweep_removes_runs_with_packets_and_checkpoints_and_keeps_pending_ones() {
        let (dir, state) = project();
        let old = settled_run(&state, None, 1);
        std::thread::sleep(Duration::from_millis(5));
        let kept = settled_run(&state, None, 2);
        let super::super::Submission::New(pending) = state
            .runs()
            .submit(
                None,
                serde_json::json!({"target": "t", "n": 3,
                    "inputDigest": flow::digest::sha256_digest(b"3")}),
                Some(&serde_json::json!(3)),
            )
            .unwrap()
        else {
            panic!("a new Run");
        };
        let p = policy("max-runs = 1").unwrap();
        let before = tree(&dir.path().join(".jig"));
        let dry = sweep(&state, &p, now_ms(), true, usize::MAX).unwrap();
        assert_eq!(dry.runs, std::slice::from_ref(&old));
        assert_eq!(dry.packets, std::slice::from_ref(&old));
        assert_eq!(dry.checkpoints, 1);
        assert!(dry.freed_bytes > 0);
        assert_eq!(
            tree(&dir.path().join(".jig")),
            before,
            "a dry run changes nothing"
        );
        let wet = sweep(&state, &p, now_ms(), false, usize::MAX).unwrap();
        assert_eq!(wet.runs, dry.runs);
        assert_eq!(wet.freed_bytes, dry.freed_bytes);
        assert!(matches!(
            state.runs().load(&old),
            Err(super::super::RunsError::NotFound(_))
        ));
        assert!(!state.dir.join(PACKET_STORE).join(&old).exists());
        assert!(!state
            .dir
            .join("runs/inputs")
            .join(format!("{old}.json"))
            .exists());
        let kept_record = state.runs().load(&kept).unwrap();
        assert_eq!(
            state.runs().input(&kept_record).unwrap(),
            Some(serde_json::json!({"n": 2}))
        );
        assert_eq!(
            state
                .runs()
                .input(&state.runs().load(&pending.id).unwrap())
                .unwrap(),
            Some(serde_json::json!(3))
        );
        assert!(sweep(&state, &p, now_ms(), false, usize::MAX)
            .unwrap()
            .runs
            .is_empty());
        let used = usage(dir.path());
        assert_eq!(used.runs.count, 2);
        assert_eq!(used.packets.count, 1);
    }

    #[test]
    fn a_key_replays_within_its_window_and_makes_a_new_run_after_its_run_is_gone() {
        let (_dir, state) = project();
        let digest = flow::digest::sha256_digest(b"{\"n\":1}");
        let content = serde_json::json!({"target": "t", "n": 1, "inputDigest": digest});
        let first = settled_run(&state, Some("k"), 1);
        let p = policy("max-age = \"1s\"\nkey-window = \"1h\"").unwrap();
        let later = now_ms() + 2 * 1000;
        assert!(sweep(&state, &p, later, false, usize::MAX)
            .unwrap()
            .runs
            .is_empty());
        let Ok(super::super::Submission::Existing(replayed)) =
            state.runs().submit(Some("k"), content.clone(), None)
        else {
            panic!("a replay within the window");
        };
        assert_eq!(replayed.id, first);
        let past = now_ms() + 3600 * 1000 + 1000;
        assert_eq!(
            sweep(&state, &p, past, false, usize::MAX).unwrap().runs,
            std::slice::from_ref(&first)
        );
        let Ok(super::super::Submission::New(again)) =
            state.runs().submit(Some("k"), content, None)
        else {
            panic!("a new Run once the keyed Run is gone");
        };
        assert_ne!(again.id, first);
    }

    fn package(word: &str) -> flow::package::Package {
        let files = std::collections::BTreeMap::from([
            (
                "FLOW.md".to_string(),
                format!("---\nname: {word}\ndescription: A package.\n---\n").into_bytes(),
            ),
            ("flow.py".to_string(), format!("# {word}\n").into_bytes()),
            ("shared.txt".to_string(), b"in every package\n".to_vec()),
        ]);
        flow::package::Package::from_files(files).unwrap()
    }

    /// Retain `package` and a Plan on `base` naming it; admit it unless
    /// `declined`. Returns the Plan's digest.
    fn plan_for(
        state: &ProjectState,
        package: &flow::package::Package,
        base: Option<u64>,
        declined: bool,
    ) -> String {
        state.store().put_package(package).unwrap();
        let plan = serde_json::json!({
            "base": base,
            "lock": {"bindings": {}, "packages": {"flows/x": {"digest": package.digest(), "directRun": true, "uses": {}}}},
            "execution": {},
        });
        let digest = state.retain_plan(&plan).unwrap();
        if !declined {
            state.apply(&digest, base).unwrap();
        }
        digest
    }

    /// A Run of `generation`, settled unless `pending`.
    fn run_of(state: &ProjectState, generation: u64, pending: bool) -> String {
        let super::super::Submission::New(mut record) = state
            .runs()
            .submit(
                None,
                serde_json::json!({"target": "t", "generation": generation}),
                None,
            )
            .unwrap()
        else {
            panic!("a new Run");
        };
        if !pending {
            state
                .runs()
                .settle(&mut record, serde_json::json!({"status": "succeeded"}))
                .unwrap();
        }
        record.id
    }

    fn stored(state: &ProjectState) -> (Vec<String>, Vec<String>, Vec<String>) {
        let (mut packages, mut blobs) = state.store().contents();
        packages.sort();
        blobs.sort();
        let plans = tree(&state.dir.join("plans"));
        (plans, packages, blobs)
    }

    #[test]
    fn the_store_keeps_what_the_admitted_generation_or_a_recorded_run_names() {
        let (dir, state) = project();
        let (a, b, c) = (package("a"), package("b"), package("c"));
        let plan_a = plan_for(&state, &a, None, false);
        let old = run_of(&state, 1, false);
        let plan_b = plan_for(&state, &b, Some(1), false);
        let plan_c = plan_for(&state, &c, Some(2), true);
        run_of(&state, 2, false);
        // The admission lock's file aside (any review makes it).
        let contents = || {
            let mut all = tree(&dir.path().join(".jig"));
            all.retain(|name| name != "admission.lock");
            all
        };
        let before = contents();
        let (_, _, blobs) = stored(&state);
        assert_eq!(blobs.len(), 7, "three packages share one blob");

        // The declined Plan and its package go; generation 1 stays while
        // its Run is retained (at the limit), generation 2 is admitted.
        let dry = collect_store(&state, true, &[]).unwrap();
        assert_eq!(dry.plans, std::slice::from_ref(&plan_c));
        assert_eq!(dry.packages, [c.digest().to_string()]);
        assert_eq!((dry.blobs, dry.deferred), (2, false));
        assert!(dry.freed_bytes > 0);
        assert_eq!(contents(), before, "a dry run changes nothing");
        let wet = collect_store(&state, false, &[]).unwrap();
        assert_eq!((wet.plans, wet.packages), (dry.plans, dry.packages));
        assert_eq!((wet.blobs, wet.freed_bytes), (dry.blobs, dry.freed_bytes));
        assert!(state.store().load_package(a.digest()).is_ok());
        assert!(state.store().load_package(b.digest()).is_ok());
        assert!(state.store().load_package(c.digest()).is_err());
        assert!(state.load_plan(&plan_a).is_ok());

        // One past: generation 1's last Run removed, its Plan and package
        // go; the blob package b shares stays.
        let p = policy("max-runs = 1").unwrap();
        assert_eq!(
            sweep(&state, &p, now_ms(), false, usize::MAX).unwrap().runs,
            [old]
        );
        let gone = collect_store(&state, false, &[]).unwrap();
        assert_eq!(gone.plans, [plan_a]);
        assert_eq!(gone.packages, [a.digest().to_string()]);
        assert_eq!(gone.blobs, 2);
        assert_eq!(
            state.store().load_package(b.digest()).unwrap().digest(),
            b.digest()
        );
        assert_eq!(state.current().unwrap().unwrap().plan_digest, plan_b);
        let (plans, packages, blobs) = stored(&state);
        assert_eq!((plans.len(), packages.len(), blobs.len()), (1, 1, 3));
        let again = collect_store(&state, false, &[]).unwrap();
        assert!(again.plans.is_empty() && again.packages.is_empty() && again.blobs == 0);
    }

    #[test]
    fn a_pending_run_keeps_its_generation() {
        let (_dir, state) = project();
        let (a, b) = (package("a"), package("b"));
        plan_for(&state, &a, None, false);
        run_of(&state, 1, true);
        plan_for(&state, &b, Some(1), false);
        let collected = collect_store(&state, false, &[]).unwrap();
        assert!(collected.packages.is_empty(), "{collected:?}");
        assert!(state.store().load_package(a.digest()).is_ok());
    }

    #[test]
    fn a_review_admitting_beside_the_holder_defers_the_collection() {
        let (dir, state) = project();
        let (a, b) = (package("a"), package("b"));
        plan_for(&state, &a, None, false);
        // A review beside the daemon: its package is written before the
        // Plan is admitted, and names nothing yet.
        let admitting = ProjectState::beside_holder(dir.path()).unwrap();
        admitting.store().put_package(&b).unwrap();
        let collected = collect_store(&state, false, &[]).unwrap();
        assert!(collected.deferred, "{collected:?}");
        assert!(state.store().load_package(b.digest()).is_ok());
        plan_for(&admitting, &b, Some(1), false);
        drop(admitting);
        let collected = collect_store(&state, false, &[]).unwrap();
        assert!(!collected.deferred);
        assert_eq!(collected.packages, [a.digest().to_string()]);
        assert!(state.store().load_package(b.digest()).is_ok());
    }

    #[test]
    fn an_input_a_crash_left_without_its_record_goes_with_the_next_sweep() {
        let (_dir, state) = project();
        let gone = settled_run(&state, None, 1);
        let kept = settled_run(&state, None, 2);
        // A sweep that unlinked the record and crashed before the input.
        std::fs::remove_file(state.dir.join("runs").join(format!("{gone}.json"))).unwrap();
        let inputs = state.dir.join("runs/inputs");
        assert!(inputs.join(format!("{gone}.json")).exists());
        let p = policy("max-runs = 10").unwrap();
        let dry = sweep(&state, &p, now_ms(), true, usize::MAX).unwrap();
        assert!(dry.runs.is_empty());
        // The orphan input and the orphan packet's `result.json`.
        assert_eq!(dry.freed_bytes, "{\"n\":1}".len() as u64 + 2);
        assert!(inputs.join(format!("{gone}.json")).exists());
        sweep(&state, &p, now_ms(), false, usize::MAX).unwrap();
        assert!(!inputs.join(format!("{gone}.json")).exists());
        let record = state.runs().load(&kept).unwrap();
        assert_eq!(
            state.runs().input(&record).unwrap(),
            Some(serde_json::json!({"n": 2}))
        );
    }

    #[test]
    fn a_budget_bounds_one_sweep() {
        let (_dir, state) = project();
        for n in 0..5 {
            settled_run(&state, None, n);
        }
        let p = policy("max-runs = 1").unwrap();
        let first = sweep(&state, &p, now_ms(), false, 2).unwrap();
        assert_eq!((first.runs.len(), first.more), (2, true));
        let second = sweep(&state, &p, now_ms(), false, 2).unwrap();
        assert_eq!((second.runs.len(), second.more), (2, false));
        assert_eq!(state.runs().list().unwrap().records.len(), 1);
    }
}
