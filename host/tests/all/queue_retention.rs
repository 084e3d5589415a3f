//! `[retention]` in database mode, against the real PostgreSQL the test
//! support starts: each rule at its boundary, the key window, the batch
//! bound, and queued Runs never touched.

use serde_json::json;

use jig_engine::config::retention::{Policy, Retention};
use jig_server::queue::{connect_config, Queue};

use std::time::{Duration, Instant};

use crate::queue::{input, queue_fixture, wait_until, Served};
use crate::support::*;

fn policy(max_age: Option<&str>, max_runs: Option<u64>, key_window: Option<&str>) -> Policy {
    Policy::from_table(&Retention {
        max_age: max_age.map(str::to_string),
        max_runs,
        key_window: key_window.map(str::to_string),
        ..Default::default()
    })
    .unwrap()
}

/// Submit Run `n` (with `key`) and settle it: a timeout of 0 is past its
/// deadline, so the queue's own sweep settles it DEADLINE_EXCEEDED.
async fn settled(queue: &Queue, n: i64, key: Option<&str>) -> String {
    let id = submit(queue, n, key, 0).await;
    queue.sweep().await.unwrap();
    id
}

async fn submit(queue: &Queue, n: i64, key: Option<&str>, timeout_ms: i64) -> String {
    let (content, input) = (json!({"n": n}), json!(n));
    let (run, _) = queue
        .submit(
            "p",
            key,
            1,
            "flow:flows/x",
            &input,
            &content,
            timeout_ms,
            &[],
            None,
        )
        .await
        .unwrap();
    run.id
}

fn count(pg: &Postgres, table_where: &str) -> String {
    pg.sql(&format!("SELECT count(*) FROM {table_where}"))
}

#[test]
fn database_retention_at_each_boundary() {
    let pg = Postgres::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let queue = Queue::open(connect_config(&pg.url(), None, None).unwrap())
            .await
            .unwrap();
        // The count limit at and one past.
        let mut ids = Vec::new();
        for n in 0..3 {
            ids.push(settled(&queue, n, None).await);
        }
        let pending = submit(&queue, 100, None, 600_000).await;
        let three = policy(None, Some(3), None);
        assert!(queue.retain("p", &three, 64).await.unwrap().runs.is_empty());
        ids.push(settled(&queue, 3, None).await);
        let removed = queue.retain("p", &three, 64).await.unwrap();
        assert_eq!(removed.runs, [ids[0].clone()], "the oldest goes");
        assert_eq!(count(&pg, &format!("jig_runs WHERE id = '{}'", ids[0])), "0");
        assert_eq!(
            count(&pg, &format!("jig_events WHERE run_id = '{}'", ids[0])),
            "0"
        );
        assert_eq!(
            pg.sql(&format!("SELECT status FROM jig_runs WHERE id = '{pending}'")),
            "queued",
            "a queued Run is never removed"
        );

        // The age limit one second inside and one second past.
        let (inside, past) = (ids[1].clone(), ids[2].clone());
        pg.sql(&format!(
            "UPDATE jig_runs SET settled_at = now() - interval '3599 seconds' WHERE id = '{inside}'"
        ));
        pg.sql(&format!(
            "UPDATE jig_runs SET settled_at = now() - interval '3601 seconds' WHERE id = '{past}'"
        ));
        let hour = policy(Some("1h"), None, None);
        assert_eq!(queue.retain("p", &hour, 64).await.unwrap().runs, [past]);
        assert!(queue.load("p", &inside).await.is_ok());

        // A key replays within its window; once its Run is gone the same
        // key makes a new Run.
        let keyed = settled(&queue, 7, Some("k")).await;
        pg.sql(&format!(
            "UPDATE jig_runs SET settled_at = now() - interval '2 hours' WHERE id = '{keyed}'"
        ));
        let window = policy(Some("1h"), None, Some("3h"));
        assert!(!queue
            .retain("p", &window, 64)
            .await
            .unwrap()
            .runs
            .contains(&keyed));
        assert_eq!(submit(&queue, 7, Some("k"), 0).await, keyed, "replayed");
        pg.sql(&format!(
            "UPDATE jig_runs SET settled_at = now() - interval '3 hours 1 second' WHERE id = '{keyed}'"
        ));
        assert!(queue
            .retain("p", &window, 64)
            .await
            .unwrap()
            .runs
            .contains(&keyed));
        assert_eq!(count(&pg, "jig_keys WHERE key = 'k'"), "0");
        let again = submit(&queue, 7, Some("k"), 600_000).await;
        assert_ne!(again, keyed, "a new Run under the forgotten key");

        // One batch is bounded.
        for n in 10..15 {
            settled(&queue, n, None).await;
        }
        let one = policy(None, Some(1), None);
        assert_eq!(queue.retain("p", &one, 2).await.unwrap().runs.len(), 2);
        while !queue.retain("p", &one, 2).await.unwrap().runs.is_empty() {}
        assert_eq!(count(&pg, "jig_runs WHERE status = 'settled'"), "1");
        assert_eq!(
            count(&pg, "jig_runs WHERE status <> 'settled'"),
            "2",
            "the queued Runs stay"
        );
    });
}

/// `jig serve --database` applies `[retention]` itself: Runs the queue's
/// sweep settled are removed down to `max-runs`, and /metrics counts them.
#[test]
fn serve_with_a_database_sweeps_settled_runs() {
    let (pg, outer, root, logs, witness) = queue_fixture();
    let config = outer.path().join("host.toml");
    std::fs::write(&config, "[retention]\nmax-runs = 1\ninterval = \"1s\"\n").unwrap();
    let served = Served::start_with(
        &root,
        &pg,
        logs.path(),
        &["--config", config.to_str().unwrap()],
    );
    let ids: Vec<String> = (0..3)
        .map(|n| served.submit_expiring(input(&witness, n, 0)))
        .collect();
    wait_until(
        "retention kept the newest settled Run",
        std::time::Duration::from_secs(30),
        || count(&pg, "jig_runs") == "1",
    );
    assert_eq!(
        pg.sql("SELECT id FROM jig_runs"),
        ids[2],
        "the newest is kept"
    );
    // The daemon counts removed Runs after the database removed them.
    let removed = || {
        let (status, metrics) = served.call("GET", "/metrics", None);
        assert_eq!(status, 200);
        let text = metrics.as_str().unwrap_or_default().to_string();
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix("jig_retention_removed_runs_total{project=\"p\"} "))
            .map(|v| v.trim().parse::<u64>().unwrap());
        (value, text)
    };
    wait_until(
        "/metrics to count the removed Runs",
        Duration::from_secs(30),
        || removed().0.is_some_and(|n| n >= 2),
    );
    let (value, text) = removed();
    assert_eq!(value, Some(2), "{text}");
}

/// A daemon following a Run's events in the database, whose Run is
/// removed before it read the terminal (here: its rows deleted by hand
/// while the Run is still queued, with no worker to take it), ends the
/// stream with a `removed` line naming `RUN_NOT_FOUND` instead of polling
/// forever; the Run then answers 404 `RUN_NOT_FOUND`.
#[test]
fn a_follower_whose_run_was_removed_ends_the_stream() {
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let (status, body) = served.call(
        "POST",
        "/v1/projects/p/runs?wait=false",
        Some(json!({"target": "flow:flows/witness", "input": input(&witness, 1, 0), "timeout": "1h"})),
    );
    assert_eq!(status, 202, "{body}");
    let id = body["runId"].as_str().unwrap().to_string();
    let out = logs.path().join("events.ndjson");
    let mut stream = served.stream(&format!("/v1/projects/p/runs/{id}/events"), &out);
    wait_until("the stream began", Duration::from_secs(20), || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.contains("queued"))
    });
    pg.sql(&format!(
        "BEGIN; DELETE FROM jig_events WHERE run_id = '{id}'; \
         DELETE FROM jig_runs WHERE id = '{id}'; COMMIT"
    ));
    let started = Instant::now();
    let ended = loop {
        if let Some(status) = stream.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = stream.kill();
            panic!("the stream still polls a removed Run");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(ended.success());
    let text = std::fs::read_to_string(&out).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "removed", "{text}");
    assert_eq!(last["code"], "RUN_NOT_FOUND");
    assert_eq!(last["runId"], id.as_str());
    let (status, body) = served.call("GET", &format!("/v1/projects/p/runs/{id}"), None);
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("RUN_NOT_FOUND"))
    );
}

/// Publish the admitted generation of the project at `root` (the library
/// call `jig serve --database` makes before recording a Run of it).
async fn publish(queue: &Queue, root: &std::path::Path) -> i64 {
    let state = jig_engine::state::ProjectState::acquire(root).unwrap();
    let generation = state.current().unwrap().unwrap();
    queue.publish("p", &state, &generation, &[]).await.unwrap();
    generation.number as i64
}

/// Change `flows/witness` (a comment) and admit it.
fn admit_a_change(root: &std::path::Path, n: usize) {
    let path = root.join("flows/witness/flow.py");
    let source = std::fs::read_to_string(&path).unwrap() + &format!("# change {n}\n");
    std::fs::write(&path, source).unwrap();
    review(root);
}

/// Set when everything in the store was last stored or published.
fn age_store(pg: &Postgres, seconds: u64) {
    pg.sql(&format!(
        "UPDATE jig_blobs SET stored_at = now() - interval '{seconds} seconds'; \
         UPDATE jig_generations SET published = now() - interval '{seconds} seconds'"
    ));
}

/// A file Run's description with one attachment file, published.
async fn publish_files(queue: &Queue, text: &str) -> String {
    use jig_engine::files::{Captured, CapturedFile, CapturedRoot};
    let mut captured = Captured::default();
    captured.roots.insert(
        "source".into(),
        CapturedRoot {
            real: std::path::PathBuf::new(),
            files: vec![CapturedFile {
                path: "a.txt".into(),
                sha256: flow::digest::sha256_hex(text.as_bytes()),
                bytes: text.as_bytes().to_vec(),
            }],
        },
    );
    let run = jig_server::queue::blobs::FileRun {
        captured,
        writable: None,
        out: false,
        method: json!({}),
        input: json!({}),
        configuration: serde_json::Value::Null,
    };
    queue.publish_files(&run).await.unwrap()
}

/// The database's store: a generation goes once no Run names it and it
/// is not the project's newest, a blob once nothing kept names it, each
/// only past the grace (one second inside kept, one second past gone);
/// a blob stored again starts its grace again; what a Run names (its
/// generation, its file Run's attachments) is kept; a worker reads the
/// kept generation whole and is told plainly the removed one is gone.
#[test]
fn database_store_collection_at_each_boundary() {
    use jig_server::queue::blobs::Cache;
    let (pg, _outer, root, _logs, _witness) = queue_fixture();
    let grace = Duration::from_secs(3600);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let queue = Queue::open(connect_config(&pg.url(), None, None).unwrap())
            .await
            .unwrap();
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(cache_dir.path()).unwrap();
        assert_eq!(publish(&queue, &root).await, 1);
        // A Run of generation 1, queued; then generation 2.
        let queued = submit(&queue, 1, None, 600_000).await;
        admit_a_change(&root, 2);
        assert_eq!(publish(&queue, &root).await, 2);
        let files = publish_files(&queue, "attached").await;
        let blobs = count(&pg, "jig_blobs");

        // Unnamed but young: kept (a Run about to name it is safe).
        assert_eq!(queue.collect_store(grace, 1024).await.unwrap().blobs, 0);
        age_store(&pg, 3599);
        let inside = queue.collect_store(grace, 1024).await.unwrap();
        assert_eq!((inside.generations, inside.blobs), (0, 0));
        assert_eq!(count(&pg, "jig_blobs"), blobs);

        // One second past: generation 1 is named by its queued Run and
        // stays; the file Run's blobs, named by nothing, go.
        age_store(&pg, 3601);
        let past = queue.collect_store(grace, 1024).await.unwrap();
        assert_eq!((past.generations, past.blobs), (0, 2), "{past:?}");
        assert!(past.freed_bytes > 0);
        assert_eq!(
            count(&pg, &format!("jig_blobs WHERE digest = '{files}'")),
            "0"
        );

        // Stored again after aging: its grace starts again, and a Run
        // naming it keeps it for good.
        let files = publish_files(&queue, "attached again").await;
        age_store(&pg, 3601);
        let again = publish_files(&queue, "attached again").await;
        assert_eq!(again, files);
        assert_eq!(queue.collect_store(grace, 1024).await.unwrap().blobs, 0);
        let (run, _) = queue
            .submit(
                "p",
                None,
                2,
                "flow:flows/witness",
                &json!(1),
                &json!({"f": 1}),
                600_000,
                &[],
                Some(&files),
            )
            .await
            .unwrap();
        age_store(&pg, 3601);
        assert_eq!(queue.collect_store(grace, 1024).await.unwrap().blobs, 0);
        let fetched = queue.fetch_files(&files).await.unwrap();
        assert_eq!(
            fetched.captured.roots["source"].files[0].bytes,
            b"attached again"
        );

        // Generation 1's last Run settled and removed: the generation and
        // the blobs only it named go; generation 2 reads whole.
        pg.sql(&format!(
            "UPDATE jig_runs SET deadline = now() WHERE id = '{queued}'"
        ));
        queue.sweep().await.unwrap();
        pg.sql(&format!(
            "UPDATE jig_runs SET settled_at = now() - interval '2 hours' WHERE id = '{queued}'"
        ));
        let hour = policy(Some("1h"), None, None);
        assert_eq!(queue.retain("p", &hour, 64).await.unwrap().runs, [queued]);
        age_store(&pg, 3601);
        let gone = queue.collect_store(grace, 1024).await.unwrap();
        assert_eq!(gone.generations, 1, "{gone:?}");
        // The changed file, its package's manifest, the Plan and the lock.
        assert_eq!(gone.blobs, 4, "{gone:?}");
        assert_eq!(count(&pg, "jig_generations"), "1");
        assert!(cache.generation(&queue, "p", 2).await.is_ok());
        let refused = cache.generation(&queue, "p", 1).await.unwrap_err();
        assert_eq!(refused.code(), "ADMISSION_MISSING", "{refused}");
        assert!(queue.fetch_files(&files).await.is_ok(), "{run:?}");
        let nothing = queue.collect_store(grace, 1024).await.unwrap();
        assert_eq!((nothing.generations, nothing.blobs), (0, 0));
    });
}

/// A crash in the middle of a database sweep: `jig serve` is stopped
/// (aborted, as `kill -9` would) inside the transaction of a Run batch,
/// after its first statement, and later inside a store collection, after
/// the generations went and before the blobs. Each time readers find the
/// old state whole (every Run with its events; the generation published
/// and readable by a worker), and the next daemon's sweep completes.
#[test]
fn a_crash_in_the_middle_of_a_database_sweep_leaves_the_old_state() {
    use jig_server::queue::blobs::Cache;
    let (pg, outer, root, logs, witness) = queue_fixture();
    let config = outer.path().join("host.toml");
    std::fs::write(&config, "[retention]\nmax-runs = 1\ninterval = \"1s\"\n").unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let crash = |point| [("JIG_TEST_CRASH_AT", point)];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(cache_dir.path()).unwrap();
    let read_generation = |n: i64| {
        runtime.block_on(async {
            let queue = Queue::open(connect_config(&pg.url(), None, None).unwrap())
                .await
                .unwrap();
            cache.generation(&queue, "p", n).await.map(|_| ())
        })
    };

    let mut served = Served::start_env(
        &root,
        &pg,
        logs.path(),
        &args,
        &crash("queue-retention:events-removed"),
    );
    // Three Runs with time left, then past their deadlines at once: one
    // sweep settles all three. (Each expiring on its own, a sweep could
    // settle two, and retention crash, before the third settled.)
    let ids: Vec<String> = (0..3)
        .map(|n| {
            let (status, body) = served.call(
                "POST",
                "/v1/projects/p/runs?wait=false",
                Some(json!({"target": "flow:flows/witness", "input": input(&witness, n, 0), "timeout": "1h"})),
            );
            assert_eq!(status, 202, "{body}");
            body["runId"].as_str().unwrap().to_string()
        })
        .collect();
    pg.sql("UPDATE jig_runs SET deadline = now()");
    assert!(!served.exited(Duration::from_secs(60)).success());
    assert_eq!(count(&pg, "jig_runs WHERE status = 'settled'"), "3");
    for id in &ids {
        let events = count(&pg, &format!("jig_events WHERE run_id = '{id}'"));
        assert!(events.parse::<u64>().unwrap() >= 2, "{id}: {events} events");
    }

    admit_a_change(&root, 2);
    let mut served = Served::start_env(
        &root,
        &pg,
        logs.path(),
        &args,
        &crash("queue-store:generations-removed"),
    );
    let newest = served.submit_expiring(input(&witness, 9, 0));
    wait_until(
        "the interrupted Run sweep completed",
        Duration::from_secs(30),
        || pg.sql("SELECT string_agg(id, ',') FROM jig_runs") == newest,
    );
    age_store(&pg, 7200);
    assert!(!served.exited(Duration::from_secs(60)).success());
    assert_eq!(count(&pg, "jig_generations"), "2");
    read_generation(1).expect("generation 1 whole after the crash");

    let _served = Served::start_with(&root, &pg, logs.path(), &args);
    wait_until(
        "the next store collection completed",
        Duration::from_secs(30),
        || count(&pg, "jig_generations") == "1",
    );
    read_generation(2).expect("generation 2 whole");
    assert_eq!(read_generation(1).unwrap_err().code(), "ADMISSION_MISSING");
}

/// Is package `digest` in the worker cache at `cache`?
fn cached(cache: &std::path::Path, digest: &str) -> bool {
    cache
        .join("store/packages")
        .join(digest.trim_start_matches("sha256:"))
        .exists()
}

/// The `jig.worker.cache` lines of a worker's log.
fn cache_lines(log: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "jig.worker.cache")
        .collect()
}

/// A worker's cache keeps what the current generations name: a work root
/// a crashed worker left goes at start; a second worker on the same cache
/// is refused; once generation 2 is the project's newest and no Run names
/// generation 1, a collection removes generation 1's package (logged with
/// the bytes freed) and keeps generation 2's; a Run still runs.
#[test]
fn a_worker_collects_what_no_current_generation_names_from_its_cache() {
    use crate::queue::{run_status, spawn, worker_with};
    use crate::retention::admitted_package;
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let cache = logs.path().join("cache-0");
    write_files(&cache.join("runs/run_crashed"), &[("scratch/a.txt", "x")]);
    let served = Served::start(&root, &pg, logs.path());
    let first = admitted_package(&root, "flows/witness");
    let worker = worker_with(&pg, logs.path(), 0, "1", &["--cache-interval", "1s"]);
    let settled = |id: &str| {
        wait_until("the Run settled", Duration::from_secs(60), || {
            run_status(&pg, id) == "settled"
        });
        let terminal = served.terminal(id);
        assert_eq!(terminal["status"], "succeeded", "{terminal}");
    };
    settled(&served.submit("one", input(&witness, 1, 0)));
    assert!(cached(&cache, &first));
    assert!(!cache.join("runs/run_crashed").exists(), "{}", worker.log());
    let started = cache_lines(&worker.log());
    assert_eq!(
        started[0]["workRoots"],
        json!(["run_crashed"]),
        "{started:?}"
    );

    let url = pg.url();
    let mut twin = spawn(
        &logs.path().join("worker-home-0"),
        &[
            "worker",
            "--database",
            &url,
            "--cache",
            cache.to_str().unwrap(),
        ],
        logs.path().join("twin.log"),
    );
    assert!(!twin.exited(Duration::from_secs(30)).success());
    assert!(twin.log().starts_with("PROJECT_BUSY: "), "{}", twin.log());

    admit_a_change(&root, 2);
    let second = admitted_package(&root, "flows/witness");
    assert_ne!(second, first);
    settled(&served.submit("two", input(&witness, 2, 0)));
    // The worker logs a collection after its last removal: wait for the
    // line itself, not for the package to be gone.
    let removed_line = || {
        cache_lines(&worker.log())
            .into_iter()
            .find(|l| l["packages"] == json!([first.clone()]))
    };
    wait_until(
        "a collection logged removing generation 1's package",
        Duration::from_secs(30),
        || removed_line().is_some(),
    );
    let removed = removed_line().unwrap();
    assert!(!cached(&cache, &first), "{}", worker.log());
    assert!(cached(&cache, &second));
    assert!(removed["freedBytes"].as_u64().unwrap() > 0, "{removed}");
    assert!(removed["plans"].as_u64().unwrap() >= 1, "{removed}");
    settled(&served.submit("three", input(&witness, 3, 0)));
    assert!(cached(&cache, &second));
}

/// A worker collecting its cache all the time (every 20 ms) never takes
/// what a Run is fetching: each new generation is claimed while the
/// collections remove the one before it, whose blobs (its unchanged
/// FLOW.md) the new package shares; every Run succeeds.
#[test]
fn collections_never_take_what_a_run_is_fetching() {
    use crate::queue::{run_status, worker_with};
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let served = Served::start(&root, &pg, logs.path());
    let worker = worker_with(&pg, logs.path(), 0, "1", &["--cache-interval", "20ms"]);
    for n in 1..=12 {
        if n > 1 {
            admit_a_change(&root, n);
        }
        let id = served.submit(&format!("run-{n}"), input(&witness, n, 0));
        wait_until("the Run settled", Duration::from_secs(60), || {
            run_status(&pg, &id) == "settled"
        });
        let terminal = served.terminal(&id);
        assert_eq!(
            terminal["status"],
            "succeeded",
            "{terminal}\n{}",
            worker.log()
        );
    }
    let removed: usize = cache_lines(&worker.log())
        .iter()
        .map(|l| l["packages"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(
        removed >= 8,
        "older generations were collected meanwhile: {}",
        worker.log()
    );
}

/// What a Run executing on a worker uses stays in its cache through the
/// collections during it, even once the database no longer names its
/// generation (its row is made to name generation 2, so only the worker's
/// own set of executing Runs keeps generation 1); once the Run ended, the
/// next collection removes it.
#[test]
fn a_worker_keeps_what_a_run_it_executes_uses() {
    use crate::queue::{run_status, worker_with};
    use crate::retention::admitted_package;
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let cache = logs.path().join("cache-0");
    let served = Served::start(&root, &pg, logs.path());
    let first = admitted_package(&root, "flows/witness");
    let worker = worker_with(&pg, logs.path(), 0, "2", &["--cache-interval", "1s"]);
    let slow = served.submit("slow", input(&witness, 1, 6));
    wait_until("the slow Run dispatched", Duration::from_secs(60), || {
        run_status(&pg, &slow) == "running"
    });
    admit_a_change(&root, 2);
    let quick = served.submit("quick", input(&witness, 2, 0));
    pg.sql(&format!(
        "UPDATE jig_runs SET generation = 2 WHERE id = '{slow}'"
    ));
    wait_until("the quick Run settled", Duration::from_secs(60), || {
        run_status(&pg, &quick) == "settled"
    });
    // Collections each second while the slow Run executes. The cache is
    // looked at first: a look counts only if the Run was still unsettled
    // after it (once settled, the worker lets go of what it used).
    loop {
        let kept = cached(&cache, &first);
        if run_status(&pg, &slow) == "settled" {
            break;
        }
        assert!(kept, "{}", worker.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let terminal = served.terminal(&slow);
    assert_eq!(terminal["status"], "succeeded", "{terminal}");
    assert_eq!(terminal["output"], 1, "{terminal}");
    wait_until(
        "a collection removed generation 1's package",
        Duration::from_secs(30),
        || !cached(&cache, &first),
    );
    assert!(cached(&cache, &admitted_package(&root, "flows/witness")));
}

/// A worker aborted in the middle of a cache collection, after generation
/// 1's package manifest went and before its shared tree and blobs: the
/// package reads as not cached (never half there), the next worker's
/// collection at start removes the rest, and Runs of the current
/// generation run.
#[test]
fn a_crash_in_the_middle_of_a_cache_collection_leaves_only_what_is_fetched_again() {
    use crate::queue::{run_status, worker_env, worker_with};
    use crate::retention::admitted_package;
    let (pg, _outer, root, logs, witness) = queue_fixture();
    let cache = logs.path().join("cache-0");
    let served = Served::start(&root, &pg, logs.path());
    let first = admitted_package(&root, "flows/witness");
    let tree = cache
        .join("store/trees")
        .join(first.trim_start_matches("sha256:"));
    let settled = |id: &str| {
        wait_until("the Run settled", Duration::from_secs(60), || {
            run_status(&pg, id) == "settled"
        });
        let terminal = served.terminal(id);
        assert_eq!(terminal["status"], "succeeded", "{terminal}");
    };
    let mut crashing = worker_env(
        &pg,
        logs.path(),
        0,
        "1",
        &["--cache-interval", "1s"],
        &[("JIG_TEST_CRASH_AT", "retention:store-package-removed")],
    );
    settled(&served.submit("one", input(&witness, 1, 0)));
    assert!(tree.exists());
    // Generation 2 published: the next collection stops the worker, maybe
    // before or while it runs this Run (which then ends as it may).
    admit_a_change(&root, 2);
    served.submit("two", input(&witness, 2, 0));
    assert!(!crashing.exited(Duration::from_secs(30)).success());
    assert!(!cached(&cache, &first));
    assert!(tree.exists(), "stopped before its tree went");

    let worker = worker_with(&pg, logs.path(), 0, "1", &["--cache-interval", "1s"]);
    settled(&served.submit("three", input(&witness, 3, 0)));
    assert!(!tree.exists(), "{}", worker.log());
    assert!(cached(&cache, &admitted_package(&root, "flows/witness")));
}
