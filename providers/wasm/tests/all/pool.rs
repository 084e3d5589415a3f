//! The instance pool: exactly MAX_CONCURRENT_INSTANCES calls hold an
//! instance at once; one more is refused with RESOURCE_EXHAUSTED. The pool
//! is process-wide, so the check runs alone in a fresh process.

use std::process::Command;
use std::time::{Duration, Instant};

use jig_provider_wasm::{instances_in_flight, MAX_CONCURRENT_INSTANCES};
use serde_json::json;

use super::*;

#[test]
fn concurrency_limit_holds_in_a_fresh_process() {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(exe)
        .args(["pool::limit_then_one_past", "--exact", "--ignored"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[test]
#[ignore = "run alone by concurrency_limit_holds_in_a_fresh_process"]
fn limit_then_one_past() {
    let provider = load("faulty-provider", json!({}));
    assert_eq!(instances_in_flight(), 0);
    let nappers: Vec<_> = (0..MAX_CONCURRENT_INSTANCES)
        .map(|_| {
            let provider = Arc::clone(&provider);
            std::thread::spawn(move || get(&*provider, "nap"))
        })
        .collect();
    let waited = Instant::now();
    while instances_in_flight() < u64::from(MAX_CONCURRENT_INSTANCES) {
        assert!(
            waited.elapsed() < Duration::from_millis(2500),
            "only {} instances in flight",
            instances_in_flight()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let refused = get(&*provider, "fine").unwrap_err();
    assert_eq!(refused.code(), Some("RESOURCE_EXHAUSTED"));
    for napper in nappers {
        assert_eq!(napper.join().unwrap().unwrap(), json!("nap"));
    }
    assert_eq!(instances_in_flight(), 0);
    assert_eq!(get(&*provider, "fine").unwrap(), json!("fine"));
}
