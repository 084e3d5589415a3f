//! Run Checkpoint (`https://jig.md/contracts/run-checkpoint` 1.0.0, docs/src/runs.md):
//! the rules one `save` must meet against the last accepted aggregate, and
//! the receipt digest. The host owns where the aggregate is kept and how it
//! is delivered; this module decides only whether a save is acceptable.

use std::collections::BTreeMap;

use flow::json::Value;
use serde_json::json;

pub const CONTRACT_ID: &str = "https://jig.md/contracts/run-checkpoint";
pub const CONTRACT_VERSION: &str = "1.0.0";
pub const CONTRACT_DIGEST: &str =
    "sha256:e7961d96842dc07bf2932f2979b2145301e4071093435e0e4e842a057896c201";

/// The only method of the contract.
pub const METHOD: &str = "save";
/// Accepted saves a Run may make (sequence 1 to 16).
pub const MAX_SAVES: u64 = 16;
/// The whole `save` input, as canonical JSON/1 bytes.
pub const MAX_INPUT_BYTES: usize = 2 * 1024 * 1024;
/// Files one aggregate may hold.
pub const MAX_FILES: usize = 64;
/// UTF-8 bytes of every file of one aggregate together.
pub const MAX_FILES_BYTES: usize = 1024 * 1024;

/// One save the rules accepted: what replaces the previous aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct Save {
    pub sequence: u64,
    pub evidence: Value,
    /// Relative path to UTF-8 text, in path order.
    pub files: BTreeMap<String, String>,
}

/// Why a save was refused: a Run/1 operational code and a message. The
/// last accepted aggregate is untouched by a refused save.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Refused {
    pub code: &'static str,
    pub message: String,
}

fn invalid(message: impl Into<String>) -> Refused {
    Refused {
        code: "INVALID_INPUT",
        message: message.into(),
    }
}

/// Check `input` (already valid against the contract's input schema) as
/// the save following the accepted sequence `last` (0 before any save).
/// `path_rule` is the host's rule for a delivered relative path.
pub fn check(
    input: &Value,
    last: u64,
    path_rule: impl Fn(&str) -> Result<(), String>,
) -> Result<Save, Refused> {
    let size = flow::json::canonical(input).len();
    if size > MAX_INPUT_BYTES {
        return Err(invalid(format!(
            "the save is {size} bytes of canonical JSON/1; at most {MAX_INPUT_BYTES} are accepted"
        )));
    }
    let sequence = input
        .get("sequence")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid("sequence must be an integer from 1"))?;
    if last >= MAX_SAVES {
        return Err(invalid(format!(
            "this Run already made {MAX_SAVES} saves, the most it may make"
        )));
    }
    if sequence != last + 1 {
        return Err(invalid(format!(
            "sequence {sequence} does not follow the accepted sequence {last}; the next save is {}",
            last + 1
        )));
    }
    let evidence = input.get("evidence").cloned().unwrap_or(Value::Null);
    let listed = input
        .get("files")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("files must be an object of relative paths to text"))?;
    if listed.len() > MAX_FILES {
        return Err(invalid(format!(
            "the save has {} files; at most {MAX_FILES} are accepted",
            listed.len()
        )));
    }
    let mut files = BTreeMap::new();
    let mut total = 0usize;
    for (path, text) in listed {
        let text = text
            .as_str()
            .ok_or_else(|| invalid(format!("file {path:?} is not text")))?;
        path_rule(path).map_err(|m| invalid(format!("file {path:?}: {m}")))?;
        total += text.len();
        if total > MAX_FILES_BYTES {
            return Err(invalid(format!(
                "the save's files hold more than {MAX_FILES_BYTES} bytes"
            )));
        }
        files.insert(path.clone(), text.to_string());
    }
    // A path cannot be both a file and a directory of another file.
    for path in files.keys() {
        let mut prefix = path.as_str();
        while let Some((parent, _)) = prefix.rsplit_once('/') {
            if files.contains_key(parent) {
                return Err(invalid(format!(
                    "file {parent:?} is also the directory of {path:?}"
                )));
            }
            prefix = parent;
        }
    }
    Ok(Save {
        sequence,
        evidence,
        files,
    })
}

/// The receipt digest: SHA-256 of canonical
/// `{identity, sequence, evidence, files}`, as `sha256:<64 hex>`.
pub fn digest(identity: &Value, save: &Save) -> String {
    let value = json!({
        "identity": identity,
        "sequence": save.sequence,
        "evidence": save.evidence,
        "files": save.files,
    });
    flow::digest::sha256_digest(&flow::json::canonical(&value))
}

/// The receipt of an accepted save (the contract's `Receipt`).
pub fn receipt(save: &Save, digest: &str) -> Value {
    json!({ "sequence": save.sequence, "digest": digest })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any_path(_: &str) -> Result<(), String> {
        Ok(())
    }

    fn save(sequence: u64, files: Value) -> Value {
        json!({ "sequence": sequence, "evidence": {"step": sequence}, "files": files })
    }

    #[test]
    fn the_sequence_starts_at_one_and_rises_by_one() {
        assert_eq!(check(&save(1, json!({})), 0, any_path).unwrap().sequence, 1);
        assert_eq!(check(&save(2, json!({})), 1, any_path).unwrap().sequence, 2);
        for (sequence, last) in [(2, 0), (1, 1), (3, 1), (1, 2)] {
            let refused = check(&save(sequence, json!({})), last, any_path).unwrap_err();
            assert_eq!(refused.code, "INVALID_INPUT", "{sequence} after {last}");
        }
    }

    #[test]
    fn saves_at_and_past_the_limit() {
        assert!(check(&save(MAX_SAVES, json!({})), MAX_SAVES - 1, any_path).is_ok());
        let refused = check(&save(MAX_SAVES + 1, json!({})), MAX_SAVES, any_path).unwrap_err();
        assert_eq!(refused.code, "INVALID_INPUT");
        assert!(refused.message.contains("16 saves"), "{refused}");
    }

    #[test]
    fn files_at_and_past_the_count_limit() {
        let files =
            |n: usize| Value::Object((0..n).map(|i| (format!("f{i:02}"), json!("x"))).collect());
        assert!(check(&save(1, files(MAX_FILES)), 0, any_path).is_ok());
        let refused = check(&save(1, files(MAX_FILES + 1)), 0, any_path).unwrap_err();
        assert!(refused.message.contains("65 files"), "{refused}");
    }

    #[test]
    fn file_bytes_at_and_past_the_total_limit() {
        let half = MAX_FILES_BYTES / 2;
        let at = json!({"a": "x".repeat(half), "b": "y".repeat(MAX_FILES_BYTES - half)});
        assert!(check(&save(1, at), 0, any_path).is_ok());
        let past = json!({"a": "x".repeat(half), "b": "y".repeat(MAX_FILES_BYTES - half + 1)});
        let refused = check(&save(1, past), 0, any_path).unwrap_err();
        assert_eq!(refused.code, "INVALID_INPUT");
        // Bytes, not characters: two-byte characters count twice.
        let wide = json!({"a": "\u{e9}".repeat(MAX_FILES_BYTES / 2 + 1)});
        assert!(check(&save(1, wide), 0, any_path).is_err());
    }

    #[test]
    fn the_input_at_and_past_its_canonical_size() {
        let overhead =
            flow::json::canonical(&json!({"sequence": 1, "evidence": "", "files": {}})).len();
        let at =
            json!({"sequence": 1, "evidence": "e".repeat(MAX_INPUT_BYTES - overhead), "files": {}});
        assert_eq!(flow::json::canonical(&at).len(), MAX_INPUT_BYTES);
        assert!(check(&at, 0, any_path).is_ok());
        let past = json!({"sequence": 1, "evidence": "e".repeat(MAX_INPUT_BYTES - overhead + 1), "files": {}});
        let refused = check(&past, 0, any_path).unwrap_err();
        assert!(refused.message.contains("canonical JSON/1"), "{refused}");
    }

    #[test]
    fn paths_follow_the_host_rule_and_never_nest_under_a_file() {
        let rule = |p: &str| {
            if p.contains("..") {
                Err("traverses".to_string())
            } else {
                Ok(())
            }
        };
        assert!(check(&save(1, json!({"a/b": "", "a/c": ""})), 0, rule).is_ok());
        assert!(check(&save(1, json!({"../x": ""})), 0, rule).is_err());
        let refused = check(&save(1, json!({"a": "", "a/b/c": ""})), 0, rule).unwrap_err();
        assert!(refused.message.contains("also the directory"), "{refused}");
    }

    #[test]
    fn the_digest_covers_identity_sequence_evidence_and_files() {
        let identity = json!({"runId": "run-1"});
        let base = check(&save(1, json!({"a": "x"})), 0, any_path).unwrap();
        let d = digest(&identity, &base);
        assert_eq!(d.len(), 71);
        assert!(d.starts_with("sha256:"));
        let expected = flow::digest::sha256_digest(
            br#"{"evidence":{"step":1},"files":{"a":"x"},"identity":{"runId":"run-1"},"sequence":1}"#,
        );
        assert_eq!(d, expected);
        assert_ne!(digest(&json!({"runId": "run-2"}), &base), d);
        let mut other = base.clone();
        other.files.insert("a".into(), "y".into());
        assert_ne!(digest(&identity, &other), d);
        other = base.clone();
        other.evidence = json!(null);
        assert_ne!(digest(&identity, &other), d);
        assert_eq!(receipt(&base, &d), json!({"sequence": 1, "digest": d}));
    }
}
