//! Run Checkpoint aggregates (docs/src/runs.md, Checkpoints): the latest accepted save of
//! a root Run, kept in `.jig/checkpoints/<run id>.json` so it survives the
//! coordinator. Only the latest is kept; an accepted save replaces the
//! previous one with [`write_atomic`] (durable before the receipt is sent).
//! It is removed once the Run's packet was published and its record
//! settled.

use std::collections::BTreeMap;
use std::path::PathBuf;

use flow::digest::sha256_hex;
use flow::json::Value;
use jig_provider_builtin::checkpoint::Save;
use serde_json::json;

use super::{write_atomic, StateError};
use crate::files::OutputFile;

/// The latest accepted aggregate of one root Run: the Run's identity, the
/// accepted save and its receipt digest.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregate {
    pub identity: Value,
    pub save: Save,
    pub digest: String,
}

impl Aggregate {
    /// The durable form.
    pub fn to_value(&self) -> Value {
        json!({
            "identity": self.identity,
            "sequence": self.save.sequence,
            "evidence": self.save.evidence,
            "files": self.save.files,
            "digest": self.digest,
        })
    }

    pub fn from_value(value: &Value) -> Option<Aggregate> {
        let files = value
            .get("files")?
            .as_object()?
            .iter()
            .map(|(path, text)| Some((path.clone(), text.as_str()?.to_string())))
            .collect::<Option<BTreeMap<String, String>>>()?;
        Some(Aggregate {
            identity: value.get("identity")?.clone(),
            save: Save {
                sequence: value.get("sequence")?.as_u64()?,
                evidence: value.get("evidence")?.clone(),
                files,
            },
            digest: value.get("digest")?.as_str()?.to_string(),
        })
    }

    /// The files the aggregate delivers, as UTF-8 bytes in path order.
    pub(crate) fn output_files(&self) -> Vec<OutputFile> {
        self.save
            .files
            .iter()
            .map(|(path, text)| OutputFile {
                path: path.clone(),
                sha256: sha256_hex(text.as_bytes()),
                bytes: text.as_bytes().to_vec(),
            })
            .collect()
    }

    /// The packet's and terminal's `checkpoint` record: which save was
    /// accepted (sequence, receipt digest), its evidence, and the manifest
    /// of its files.
    pub fn record(&self) -> Value {
        let files: Vec<Value> = self
            .output_files()
            .iter()
            .map(|f| json!({"path": f.path, "length": f.bytes.len(), "sha256": f.sha256}))
            .collect();
        json!({
            "sequence": self.save.sequence,
            "digest": self.digest,
            "evidence": self.save.evidence,
            "files": files,
        })
    }
}

/// Where else an accepted aggregate must be durable before its receipt
/// (a `jig worker` stores it in the database, fenced by its claim); an
/// error refuses the save.
pub type Mirror = std::sync::Arc<dyn Fn(&str, &Aggregate) -> Result<(), String> + Send + Sync>;

/// `.jig/checkpoints/`: one file per root Run with an accepted save.
#[derive(Clone)]
pub struct Checkpoints {
    dir: PathBuf,
    mirror: Option<Mirror>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("dir", &self.dir)
            .field("mirrored", &self.mirror.is_some())
            .finish()
    }
}

impl Checkpoints {
    pub fn new(dir: PathBuf) -> Checkpoints {
        Checkpoints { dir, mirror: None }
    }

    /// Also keep each accepted aggregate through `mirror`.
    pub fn with_mirror(mut self, mirror: Mirror) -> Checkpoints {
        self.mirror = Some(mirror);
        self
    }

    fn path(&self, run_id: &str) -> PathBuf {
        self.dir.join(format!("{run_id}.json"))
    }

    /// Replace the Run's aggregate, atomically and durably.
    pub fn save(&self, run_id: &str, aggregate: &Aggregate) -> Result<(), StateError> {
        if let Some(mirror) = &self.mirror {
            mirror(run_id, aggregate).map_err(|message| StateError::Invalid { message })?;
        }
        write_atomic(
            &self.path(run_id),
            &flow::json::canonical(&aggregate.to_value()),
        )
    }

    /// The Run's latest accepted aggregate, if it has one.
    pub fn load(&self, run_id: &str) -> Result<Option<Aggregate>, StateError> {
        let bytes = match std::fs::read(self.path(run_id)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::io("reading a Run checkpoint")(e)),
        };
        let invalid = || StateError::Invalid {
            message: format!("the checkpoint of Run {run_id} is corrupt"),
        };
        let value = flow::json::parse(&bytes).map_err(|_| invalid())?;
        Aggregate::from_value(&value).map(Some).ok_or_else(invalid)
    }

    /// Forget the Run's aggregate (its packet is published or never will be).
    pub fn remove(&self, run_id: &str) -> Result<(), StateError> {
        match std::fs::remove_file(self.path(run_id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StateError::io("removing a Run checkpoint")(e))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn aggregate(sequence: u64) -> Aggregate {
        let mut files = BTreeMap::new();
        files.insert("notes/a.md".to_string(), format!("step {sequence}\n"));
        Aggregate {
            identity: json!({"runId": "run-1"}),
            save: Save {
                sequence,
                evidence: json!({"done": sequence}),
                files,
            },
            digest: format!("sha256:{}", "0".repeat(64)),
        }
    }

    #[test]
    fn only_the_latest_aggregate_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::new(dir.path().to_path_buf());
        assert_eq!(checkpoints.load("run-1").unwrap(), None);
        checkpoints.save("run-1", &aggregate(1)).unwrap();
        checkpoints.save("run-1", &aggregate(2)).unwrap();
        assert_eq!(checkpoints.load("run-1").unwrap(), Some(aggregate(2)));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let record = aggregate(2).record();
        assert_eq!(record["sequence"], 2);
        assert_eq!(record["files"][0]["path"], "notes/a.md");
        assert_eq!(record["files"][0]["length"], 7);
        checkpoints.remove("run-1").unwrap();
        checkpoints.remove("run-1").unwrap();
        assert_eq!(checkpoints.load("run-1").unwrap(), None);
    }

    #[test]
    fn a_corrupt_aggregate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = Checkpoints::new(dir.path().to_path_buf());
        std::fs::write(dir.path().join("run-1.json"), b"{\"sequence\":1}").unwrap();
        let err = checkpoints.load("run-1").unwrap_err();
        assert_eq!(err.code(), "PROJECT_STATE_INVALID");
    }
}
