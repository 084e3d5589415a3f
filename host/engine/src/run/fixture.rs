//! A Flow's fixtures (`jig test`): examples kept beside its `FLOW.md`,
//! each an input with the result it must give, run as a trial
//! ([`super::trial`]) in the same envelope as `jig exec`.
//!
//! A fixture is a directory `fixtures/<case>/` of the package holding
//! `case.json` (`input`, `settings`, `children`, `timeout`, `expect` and
//! `match`; docs/src/writing-a-flow.md, Fixtures) and, for each read
//! attachment the case gives, `attachments/<name>/`. The fixtures are
//! package files like any other: they travel, and are digested, with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use flow::json::Value;

/// The folder of a package that holds its fixtures.
pub const FIXTURES_DIR: &str = "fixtures";
/// The file of a fixture that says what it runs and expects.
pub const CASE_FILE: &str = "case.json";
/// The most fixtures one package may keep.
pub const MAX_FIXTURES: usize = 256;
/// The largest `case.json` read (a JSON/1 document).
const MAX_CASE_BYTES: u64 = flow::json::MAX_DOCUMENT_BYTES as u64;

/// One fixture, read and checked.
#[derive(Debug)]
pub struct Fixture {
    /// Its directory's name.
    pub name: String,
    pub dir: PathBuf,
    pub input: Value,
    pub settings: Value,
    /// Child slots served by package directories, relative to the package.
    pub children: BTreeMap<String, PathBuf>,
    /// `--timeout`'s grammar; the default timeout when absent.
    pub timeout: Option<String>,
    /// `--attach` arguments for each `attachments/<name>/`.
    pub attach: Vec<String>,
    pub expect: Expect,
}

/// What a fixture's Run must give. Only what is named is compared.
#[derive(Debug)]
pub struct Expect {
    /// `succeeded` (the default) or `failed`.
    pub status: String,
    pub outcome: Option<String>,
    pub output: Option<Value>,
    pub code: Option<String>,
    /// `output` is a subset of the Run's (every member it names, at any
    /// depth, equal), not the whole of it.
    pub subset: bool,
}

/// A fixture that cannot be read: its path and why.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {why}")]
pub struct FixtureError {
    pub path: String,
    pub why: String,
}

/// What a Run gave that its fixture did not expect: the expected and the
/// actual values compared, each as indented JSON.
#[derive(Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub expected: String,
    pub actual: String,
}

impl Mismatch {
    /// The two as a unified diff, expected first.
    pub fn diff(&self) -> String {
        similar::TextDiff::from_lines(&self.expected, &self.actual)
            .unified_diff()
            .context_radius(3)
            .header("expected", "actual")
            .missing_newline_hint(false)
            .to_string()
    }
}

/// The fixtures of the package at `package`, by name; none when it has
/// no `fixtures/` folder.
pub fn read_all(package: &Path) -> Result<Vec<Fixture>, FixtureError> {
    let root = package.join(FIXTURES_DIR);
    let fault = |path: &Path, why: String| FixtureError {
        path: path.display().to_string(),
        why,
    };
    let entries = match std::fs::read_dir(&root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(fault(&root, e.to_string())),
    };
    let mut dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| fault(&root, e.to_string()))?;
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            dirs.push(entry.path());
        }
    }
    if dirs.len() > MAX_FIXTURES {
        return Err(fault(
            &root,
            format!("more than {MAX_FIXTURES} fixtures in one package"),
        ));
    }
    dirs.sort();
    dirs.iter().map(|dir| read(dir)).collect()
}

fn read(dir: &Path) -> Result<Fixture, FixtureError> {
    let file = dir.join(CASE_FILE);
    let fault = |why: String| FixtureError {
        path: file.display().to_string(),
        why,
    };
    let meta = std::fs::symlink_metadata(&file).map_err(|e| fault(e.to_string()))?;
    if !meta.is_file() || meta.len() > MAX_CASE_BYTES {
        return Err(fault(
            "not a regular file of at most one JSON/1 document".into(),
        ));
    }
    let bytes = std::fs::read(&file).map_err(|e| fault(e.to_string()))?;
    let case = flow::json::parse(&bytes).map_err(|e| fault(format!("not JSON/1: {e}")))?;
    let Some(case) = case.as_object() else {
        return Err(fault("not a JSON object".into()));
    };
    const KEYS: [&str; 6] = [
        "input", "settings", "children", "timeout", "expect", "match",
    ];
    if let Some(key) = case.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(fault(format!(
            "unexpected member {key:?} (expected one of {})",
            KEYS.join(", ")
        )));
    }
    let settings = case
        .get("settings")
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    if !settings.is_object() {
        return Err(fault("settings must be an object".into()));
    }
    let mut children = BTreeMap::new();
    for (slot, path) in case
        .get("children")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let path = path
            .as_str()
            .ok_or_else(|| fault(format!("children.{slot} must be a directory path")))?;
        children.insert(slot.clone(), PathBuf::from(path));
    }
    let timeout = match case.get("timeout") {
        None => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(_) => return Err(fault("timeout must be a duration like \"30s\"".into())),
    };
    let subset = match case.get("match").map(|m| m.as_str()) {
        None | Some(Some("whole")) => false,
        Some(Some("subset")) => true,
        Some(_) => return Err(fault("match must be \"whole\" or \"subset\"".into())),
    };
    let expect = case
        .get("expect")
        .and_then(Value::as_object)
        .ok_or_else(|| fault("expect must be an object".into()))?;
    let text = |key: &str| -> Result<Option<String>, FixtureError> {
        match expect.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(fault(format!("expect.{key} must be a string"))),
        }
    };
    let status = text("status")?.unwrap_or_else(|| "succeeded".into());
    if status != "succeeded" && status != "failed" {
        return Err(fault(
            "expect.status must be \"succeeded\" or \"failed\"".into(),
        ));
    }
    let expect = Expect {
        status,
        outcome: text("outcome")?,
        output: expect.get("output").cloned(),
        code: text("code")?,
        subset,
    };
    let mut attach = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("attachments")) {
        let mut names: Vec<String> = entries
            .flatten()
            .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            attach.push(format!(
                "{name}={}",
                dir.join("attachments").join(&name).display()
            ));
        }
    }
    Ok(Fixture {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        dir: dir.to_path_buf(),
        input: case
            .get("input")
            .cloned()
            .unwrap_or_else(|| Value::Object(Default::default())),
        settings,
        children,
        timeout,
        attach,
        expect,
    })
}

impl Expect {
    /// Check a Run's terminal against what is expected: only the members
    /// named are compared (the status always).
    pub fn check(&self, terminal: &Value) -> Result<(), Mismatch> {
        let mut expected = serde_json::Map::new();
        let mut actual = serde_json::Map::new();
        let mut same = true;
        let mut compare = |key: &str, want: Value, subset: bool| {
            let got = terminal.get(key).cloned().unwrap_or(Value::Null);
            same &= match subset {
                true => contains(&got, &want),
                false => got == want,
            };
            expected.insert(key.to_string(), want);
            actual.insert(key.to_string(), got);
        };
        compare("status", Value::String(self.status.clone()), false);
        if let Some(outcome) = &self.outcome {
            compare("outcome", Value::String(outcome.clone()), false);
        }
        if let Some(output) = &self.output {
            compare("output", output.clone(), self.subset);
        }
        if let Some(code) = &self.code {
            compare("code", Value::String(code.clone()), false);
        }
        if same {
            return Ok(());
        }
        // A failed Run's message says why; shown beside what differed.
        if let Some(message) = terminal
            .get("message")
            .filter(|_| !expected.contains_key("message"))
        {
            actual.insert("message".into(), message.clone());
        }
        let pretty = |map| serde_json::to_string_pretty(&Value::Object(map)).unwrap_or_default();
        Err(Mismatch {
            expected: pretty(expected),
            actual: pretty(actual),
        })
    }
}

/// Whether `actual` holds `expected`: every member an expected object
/// names, recursively; arrays element by element, of the same length;
/// anything else equal.
fn contains(actual: &Value, expected: &Value) -> bool {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|got| contains(got, v))),
        (Value::Array(a), Value::Array(e)) => {
            a.len() == e.len() && a.iter().zip(e).all(|(got, v)| contains(got, v))
        }
        _ => actual == expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixture(case: &str) -> Result<Fixture, FixtureError> {
        let dir = tempfile::tempdir().unwrap();
        let case_dir = dir.path().join("fixtures/one");
        std::fs::create_dir_all(case_dir.join("attachments/source")).unwrap();
        std::fs::write(case_dir.join(CASE_FILE), case).unwrap();
        read_all(dir.path()).map(|mut all| all.remove(0))
    }

    #[test]
    fn a_case_reads_with_its_defaults_and_its_attachments() {
        let read = fixture(r#"{"expect": {"outcome": "done"}}"#).unwrap();
        assert_eq!(read.name, "one");
        assert_eq!(read.input, json!({}));
        assert_eq!(read.settings, json!({}));
        assert_eq!(read.expect.status, "succeeded");
        assert!(!read.expect.subset);
        assert_eq!(read.attach.len(), 1);
        assert!(read.attach[0].starts_with("source="), "{:?}", read.attach);
        assert!(read_all(Path::new("/nonexistent")).unwrap().is_empty());
    }

    #[test]
    fn a_case_that_is_not_one_is_refused_with_its_path_and_why() {
        for (case, why) in [
            ("[]", "not a JSON object"),
            (
                r#"{"expect": {}, "inputs": 1}"#,
                "unexpected member \"inputs\"",
            ),
            (r#"{"expect": {"status": "lost"}}"#, "expect.status must be"),
            (r#"{"expect": {}, "match": "some"}"#, "match must be"),
            (
                r#"{"expect": {}, "settings": 1}"#,
                "settings must be an object",
            ),
            (r#"{"input": 1}"#, "expect must be an object"),
        ] {
            let e = fixture(case).unwrap_err();
            assert!(e.path.ends_with("fixtures/one/case.json"), "{e}");
            assert!(e.why.contains(why), "{case}: {e}");
        }
    }

    #[test]
    fn a_package_keeps_at_most_its_bound_of_fixtures_each_at_most_one_document() {
        let dir = tempfile::tempdir().unwrap();
        let case = |name: &str, text: &[u8]| {
            let at = dir.path().join(FIXTURES_DIR).join(name);
            std::fs::create_dir_all(&at).unwrap();
            std::fs::write(at.join(CASE_FILE), text).unwrap();
        };
        for i in 0..MAX_FIXTURES {
            case(&format!("c{i:03}"), br#"{"expect": {}}"#);
        }
        assert_eq!(read_all(dir.path()).unwrap().len(), MAX_FIXTURES);
        case("one-past", br#"{"expect": {}}"#);
        let refused = read_all(dir.path()).unwrap_err();
        assert!(refused.why.contains("more than 256 fixtures"), "{refused}");

        let dir = tempfile::tempdir().unwrap();
        let padded = |bytes: u64| {
            let mut text = br#"{"expect": {}}"#.to_vec();
            text.resize(bytes as usize, b' ');
            text
        };
        let at = dir.path().join(FIXTURES_DIR).join("big");
        std::fs::create_dir_all(&at).unwrap();
        std::fs::write(at.join(CASE_FILE), padded(MAX_CASE_BYTES)).unwrap();
        assert!(read_all(dir.path()).is_ok());
        std::fs::write(at.join(CASE_FILE), padded(MAX_CASE_BYTES + 1)).unwrap();
        let refused = read_all(dir.path()).unwrap_err();
        assert!(
            refused.why.contains("at most one JSON/1 document"),
            "{refused}"
        );
    }

    #[test]
    fn only_what_is_named_is_compared_and_a_subset_may_leave_members_out() {
        let terminal = json!({"status": "succeeded", "outcome": "done",
            "output": {"rows": [{"a": 1, "b": 2}], "count": 1}, "runId": "run-x"});
        let expect = |output: Value, subset: bool| Expect {
            status: "succeeded".into(),
            outcome: Some("done".into()),
            output: Some(output),
            code: None,
            subset,
        };
        let whole = json!({"rows": [{"a": 1, "b": 2}], "count": 1});
        assert!(expect(whole.clone(), false).check(&terminal).is_ok());
        assert!(expect(json!({"rows": [{"a": 1}]}), true)
            .check(&terminal)
            .is_ok());
        // A subset still needs arrays of the same length, and equal leaves.
        assert!(expect(json!({"rows": []}), true).check(&terminal).is_err());
        assert!(expect(json!({"count": 2}), true).check(&terminal).is_err());
        let mismatch = expect(json!({"count": 1}), false)
            .check(&terminal)
            .unwrap_err();
        assert!(mismatch.expected.contains("\"count\": 1"), "{mismatch:?}");
        let diff = mismatch.diff();
        assert!(diff.starts_with("--- expected\n+++ actual\n@@"), "{diff}");
        assert!(diff.contains("\n+    \"rows\": [\n"), "{diff}");
        assert!(mismatch.actual.contains("\"rows\""), "{mismatch:?}");
        let failed = json!({"status": "failed", "code": "INVALID_INPUT", "message": "no"});
        let expected_failure = Expect {
            status: "failed".into(),
            outcome: None,
            output: None,
            code: Some("INVALID_INPUT".into()),
            subset: false,
        };
        assert!(expected_failure.check(&failed).is_ok());
        let mismatch = expect(whole, false).check(&failed).unwrap_err();
        assert!(
            mismatch.actual.contains("\"message\": \"no\""),
            "{mismatch:?}"
        );
    }
}
