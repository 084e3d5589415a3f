use super::*;
use serde_json::json;

const DARK: Style = Style {
    color: true,
    animate: true,
    theme: Theme::OneDark,
};

fn themed(theme: Theme) -> Style {
    Style { theme, ..DARK }
}

#[test]
fn no_color_even_empty_and_dumb_terminals_are_plain() {
    let empty = std::ffi::OsString::new();
    assert_eq!(Style::from_env(Some(&empty), None, None), Style::PLAIN);
    assert_eq!(Style::from_env(None, Some("dumb"), None), Style::PLAIN);
    assert_eq!(Style::from_env(None, Some("xterm-256color"), None), DARK);
    assert_eq!(
        Style::from_env(None, None, Some("macchiato")).theme,
        Theme::Macchiato
    );
    assert_eq!(
        Style::from_env(None, None, Some("solarized")).theme,
        Theme::OneDark
    );
}

#[test]
fn project_text_cannot_reach_the_terminal_raw() {
    let hostile = "a\u{1b}[2Jb\u{9b}c\u{202e}d\u{7}";
    assert_eq!(escape(hostile), "a\\u{1b}[2Jb\\u{9b}c\\u{202e}d\\u{7}");
    let rendered = render_json(&json!({ hostile: hostile }), &DARK);
    assert!(!rendered.contains('\u{9b}') && !rendered.contains('\u{202e}'));
    assert_eq!(rendered.matches('\u{1b}').count(), 4, "only our colours");
    // Still JSON: the escapes are JSON escapes.
    let plain = render_json(&json!({ "k": hostile }), &Style::PLAIN);
    let back: serde_json::Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(back["k"], hostile);
}

#[test]
fn utc_times_and_durations() {
    assert_eq!(utc_time(0), "1970-01-01 00:00:00");
    assert_eq!(utc_time(1_796_141_896_000), "2026-12-01 16:18:16");
    assert_eq!(utc_time(951_782_400_000), "2000-02-29 00:00:00");
    assert_eq!(rfc3339_time(1_796_141_896_250), "2026-12-01T16:18:16.250Z");
    assert_eq!(rfc3339_time(951_782_400_007), "2000-02-29T00:00:00.007Z");
    assert_eq!(duration_text(999), "999ms");
    assert_eq!(duration_text(4_250), "4.2s");
    assert_eq!(duration_text(185_000), "3m05s");
    assert_eq!(duration_text(3_720_000), "1h02m");
}

fn succeeded() -> Value {
    json!({"status": "succeeded", "outcome": "done", "output": {"message": "Hello, Ada!", "count": 2, "tags": ["a", null, true], "empty": {}}, "diagnostics": {"stderr": "", "stderrBytes": 0, "stderrTruncated": false}})
}

fn failed() -> Value {
    json!({"status": "failed", "code": "REVIEW_REQUIRED", "message": "the admitted execution environment changed (python3 changed); run jig review", "details": {"flowStarted": false, "reason": "EXECUTION_ENVIRONMENT_CHANGED"}, "diagnostics": {"stderr": "", "stderrBytes": 0, "stderrTruncated": false}})
}

#[test]
fn results_on_a_terminal() {
    insta::assert_snapshot!(
        "succeeded_plain",
        render_terminal(&succeeded(), &Style::PLAIN)
    );
    insta::assert_snapshot!("failed_plain", render_terminal(&failed(), &Style::PLAIN));
    let mut packet = succeeded();
    packet["delivery"] = json!({"status": "written", "destination": "/tmp/out", "source": "final"});
    insta::assert_snapshot!(
        "succeeded_packet_plain",
        render_terminal(&packet, &Style::PLAIN)
    );
    let lost = json!({"status": "lost", "code": "COORDINATOR_LOST", "message": "the coordinator stopped while the Run was pending"});
    insta::assert_snapshot!("lost_plain", render_terminal(&lost, &Style::PLAIN));
}

#[test]
fn each_theme_colours_the_same_layout() {
    for (name, theme) in [
        ("one_dark", Theme::OneDark),
        ("one_light", Theme::OneLight),
        ("macchiato", Theme::Macchiato),
    ] {
        let style = themed(theme);
        let text = format!(
            "{}{}",
            render_terminal(&succeeded(), &style),
            render_terminal(&failed(), &style)
        );
        insta::assert_snapshot!(format!("terminal_{name}"), text.replace('\u{1b}', "⎋"));
    }
}

#[test]
fn review_is_coloured_by_mark() {
    let text = "Packages:\n  + \"flows/a\" sha256:aa\n  ~ \"flows/b\" sha256:bb\n      was sha256:b0\n  - \"flows/c\" sha256:cc\nTargets:\n  + \"flow:flows/a\"\n    \"flow:flows/b\"\n";
    assert_eq!(paint_review(text, &Style::PLAIN), text);
    insta::assert_snapshot!(
        "review_one_dark",
        paint_review(text, &DARK).replace('\u{1b}', "⎋")
    );
}

#[test]
fn runs_as_a_table() {
    let rows = vec![
        RunRow {
            id: "r-0001".into(),
            created_unix_ms: Some(1_796_141_896_000),
            status: "succeeded".into(),
            outcome: "done".into(),
            target: "flow:flows/hello".into(),
            duration_ms: Some(412),
            code: String::new(),
        },
        RunRow {
            id: "r-0002".into(),
            created_unix_ms: Some(1_796_141_999_000),
            status: "failed".into(),
            outcome: String::new(),
            target: "binding:intake\u{1b}[2J".into(),
            duration_ms: Some(30_000),
            code: "DEADLINE_EXCEEDED".into(),
        },
        RunRow {
            id: "r-0003".into(),
            created_unix_ms: None,
            status: "pending".into(),
            outcome: String::new(),
            target: "flow:flows/slow".into(),
            duration_ms: None,
            code: String::new(),
        },
    ];
    insta::assert_snapshot!("runs_plain", runs_table(&rows, &Style::PLAIN));
}

#[test]
fn a_record_for_a_person() {
    let record = json!({"id": "run-01", "target": "flow:flows/hello", "generation": 1,
        "submittedAtUnixMs": 1_796_141_896_000u64, "settledAtUnixMs": 1_796_141_897_250u64,
        "terminal": succeeded()});
    insta::assert_snapshot!("record_plain", render_record(&record, &Style::PLAIN));
    let pending = json!({"id": "run-02", "target": "binding:b\u{1b}[2J",
        "submittedAtUnixMs": 1_796_141_896_000u64});
    insta::assert_snapshot!(
        "record_pending_plain",
        render_record(&pending, &Style::PLAIN)
    );
}

#[test]
fn a_handler_error_shows_its_stack_and_a_failed_child_its_own_failure() {
    let raised = json!({"status": "failed", "code": "EXECUTION_FAILED", "message": "KeyError: 'data'",
        "details": {"exception": {"type": "KeyError", "message": "'data'",
            "stack": ["lookup (flows/hello/flow.py:4)", "run (flows/hello/flow.py:8)"], "framesOmitted": 3}},
        "diagnostics": {"stderr": "", "stderrBytes": 0, "stderrTruncated": false}});
    insta::assert_snapshot!("raised_plain", render_terminal(&raised, &Style::PLAIN));
    // Nothing on stderr and no frames: no stack to point at, no stderr to read.
    let mut bare = raised.clone();
    bare["details"]["exception"]["stack"] = json!([]);
    assert!(render_terminal(&bare, &Style::PLAIN).contains(
        "  next: the component wrote nothing to stderr; fix the Flow, review and run again\n"
    ));
    let child = json!({"status": "failed", "code": "INVALID_RESULT",
        "message": "child slot \"classifier\" (flow:flows/code) failed with INVALID_RESULT: the result does not satisfy result.schema.json",
        "details": {"child": {"slot": "classifier", "target": "flow:flows/code", "code": "INVALID_RESULT",
            "message": "the result does not satisfy result.schema.json",
            "details": {"keyword": "type", "instancePointer": "/output/label"},
            "stderr": "classifying\n\u{1b}[2Jdone\n", "stderrBytes": 21, "stderrTruncated": false}},
        "diagnostics": {"stderr": "", "stderrBytes": 0, "stderrTruncated": false}});
    let shown = render_terminal(&child, &Style::PLAIN);
    assert!(!shown.contains('\u{1b}'), "child stderr is escaped");
    insta::assert_snapshot!("child_failed_plain", shown);
}

#[test]
fn failures_lead_with_the_explanation_and_next_action() {
    insta::assert_snapshot!(
        "failure_plain",
        render_failure(
            "JIG_APPROVAL_REQUIRED",
            "project changes require confirmation; rerun with --yes",
            &Style::PLAIN
        )
    );
}

#[test]
fn the_final_line_reports_each_observation_apart() {
    let mut packet = succeeded();
    packet["delivery"] = json!({"status": "written", "destination": "/tmp/out", "source": "final"});
    assert_eq!(
        final_line(&packet, false, Duration::from_millis(1_250), &Style::PLAIN),
        "✓ execution succeeded · outcome done · delivery written (final) · cleanup complete · 1.2s\n"
    );
    assert_eq!(
        final_line(&failed(), true, Duration::from_millis(80), &Style::PLAIN),
        "✗ execution failed REVIEW_REQUIRED · cleanup failed · 80ms\n"
    );
    let mut named = failed();
    named["runId"] = json!("run-01");
    assert_eq!(
        final_line(&named, false, Duration::from_millis(80), &Style::PLAIN),
        "✗ execution failed REVIEW_REQUIRED · cleanup complete · 80ms · run run-01\n"
    );
}

#[test]
fn live_text_names_what_the_run_waits_on() {
    assert_eq!(
        live_text("flow:flows/a", Duration::from_millis(1_540), &[], false),
        "flow:flows/a · 1.5s · running"
    );
    assert_eq!(
        live_text(
            "binding:b",
            Duration::from_secs(75),
            &["a child Flow".into(), "an Agent".into()],
            false
        ),
        "binding:b · 1m15s · waiting on a child Flow, an Agent"
    );
    assert_eq!(
        live_text("binding:b", Duration::from_secs(2), &[], true),
        "binding:b · 2.0s · cancelling… waiting for cleanup"
    );
}
