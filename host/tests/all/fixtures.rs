//! The author's loop before review (issue 49): `jig new flow` scaffolds a
//! Flow whose fixture passes, and `jig test` runs each Flow's fixtures as
//! `jig exec` runs a package, with a diff of what differed, an exit status
//! and JUnit XML, admitting nothing.

use crate::support::*;

#[test]
fn a_new_flow_passes_its_fixture_and_a_changed_expectation_fails_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let init = run_jig(dir.path(), &["init", "--bare", "shop"]);
    assert_eq!(init.status, 0, "{init:?}");
    let shop = dir.path().join("shop");
    for (name, lang) in [("greet", "python"), ("hail", "typescript")] {
        let made = run_jig(&shop, &["new", "flow", name, "--lang", lang]);
        assert_eq!(made.status, 0, "{made:?}");
        assert!(
            made.stdout
                .starts_with(&format!("created flows/{name} (FLOW.md, ")),
            "{made:?}"
        );
        assert!(made
            .stdout
            .ends_with(&format!("next: jig test flows/{name}, then jig review\n")));
    }
    // The project's Flows, from jig.ts; nothing is admitted.
    let tested = run_jig(&shop, &["test"]);
    assert_eq!(tested.status, 0, "{tested:?}");
    let lines: Vec<&str> = tested.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{tested:?}");
    assert!(
        lines[0].starts_with("ok   flows/greet example ("),
        "{tested:?}"
    );
    assert!(
        lines[1].starts_with("ok   flows/hail example ("),
        "{tested:?}"
    );
    assert_eq!(lines[2], "test result: ok. 2 passed; 0 failed");
    assert!(!shop.join(".jig/admission").exists(), "nothing admitted");

    // An expectation the Flow does not meet: a diff, exit 1, JUnit.
    let case = shop.join("flows/greet/fixtures/example/case.json");
    let text = std::fs::read_to_string(&case).unwrap();
    std::fs::write(&case, text.replace("Hello, Ada!", "Hi, Ada!")).unwrap();
    let failed = run_jig(&shop, &["test", "flows/greet", "--junit", "report.xml"]);
    assert_eq!(failed.status, 1, "{failed:?}");
    assert!(
        failed.stdout.starts_with("FAIL flows/greet example ("),
        "{failed:?}"
    );
    assert!(
        failed
            .stdout
            .contains("--- expected\n+++ actual\n@@ -1,7 +1,7 @@\n {\n   \"outcome\": \"done\",\n   \"output\": {\n-    \"message\": \"Hi, Ada!\"\n+    \"message\": \"Hello, Ada!\"\n   },\n"),
        "{failed:?}"
    );
    assert!(failed
        .stdout
        .ends_with("test result: FAILED. 0 passed; 1 failed\n"));
    let report = std::fs::read_to_string(shop.join("report.xml")).unwrap();
    assert!(
        report.contains("<testsuite name=\"jig test\" tests=\"1\" failures=\"1\" errors=\"0\""),
        "{report}"
    );
    assert!(report.contains("<testcase classname=\"flows/greet\" name=\"example\""));
    assert!(
        report.contains("-    &quot;message&quot;: &quot;Hi, Ada!&quot;"),
        "{report}"
    );

    // A subset expectation, a failure expected by code, and an attachment.
    write_files(
        &shop,
        &[
            (
                "flows/greet/fixtures/example/case.json",
                r#"{"input": "Ada", "match": "subset", "expect": {"output": {}}}"#,
            ),
            (
                "flows/greet/fixtures/refused/case.json",
                r#"{"input": 5, "expect": {"status": "failed", "code": "INVALID_INPUT"}}"#,
            ),
        ],
    );
    let tested = run_jig(&shop, &["test", "flows/greet"]);
    assert_eq!(tested.status, 0, "{tested:?}");
    assert!(
        tested.stdout.contains("ok   flows/greet refused ("),
        "{tested:?}"
    );

    // A fixture that is not one fails the run, naming its file.
    write_files(
        &shop,
        &[("flows/hail/fixtures/broken/case.json", "{\"expect\": 1}")],
    );
    let broken = run_jig(&shop, &["test", "flows/hail"]);
    assert_eq!(broken.status, 1, "{broken:?}");
    assert!(
        broken.stdout.contains("FAIL flows/hail fixtures\n")
            && broken
                .stdout
                .contains("fixtures/broken/case.json: expect must be an object"),
        "{broken:?}"
    );

    // What new flow refuses: a name that is not a LocalName (of at most
    // 64 bytes), a Flow that exists.
    let refused = run_jig(&shop, &["new", "flow", "Bad Name"]);
    assert_eq!(refused.status, 2, "{refused:?}");
    assert!(refused.stderr.starts_with("JIG_USAGE: "), "{refused:?}");
    let at = "a".repeat(flow::wire::MAX_LOCAL_NAME_BYTES);
    assert_eq!(run_jig(&shop, &["new", "flow", &at]).status, 0);
    let past = run_jig(&shop, &["new", "flow", &format!("{at}a")]);
    assert_eq!(past.status, 2, "{past:?}");
    assert!(past.stderr.starts_with("JIG_USAGE: "), "{past:?}");
    let exists = run_jig(&shop, &["new", "flow", "greet"]);
    assert_eq!(exists.status, 1, "{exists:?}");
    assert!(
        exists.stderr.starts_with("JIG_INIT_DESTINATION_EXISTS: "),
        "{exists:?}"
    );
}
