//! Durable Run records: written before dispatch, settled exactly once.

use std::path::PathBuf;

use flow::digest::sha256_digest;
use flow::json::Value;
use jig_provider_api::dispatch::now_unix_ms;
use serde::Deserialize;
use serde_json::json;

use super::{digest_hex, write_atomic, Aggregate, Checkpoints, StateError};
use crate::terminal::{Delivery, Source, Status, Terminal};

/// What [`Runs::list`] found: the records, newest first, and those that
/// cannot be read (one corrupt file never hides the others).
#[derive(Debug, Default)]
pub struct Listing {
    pub records: Vec<RunRecord>,
    pub unreadable: Vec<Unreadable>,
}

/// A Run whose record cannot be read: its id and its file, relative to the
/// project (`.jig/runs/<id>.json`), for an operator to look at.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    pub id: String,
    pub file: String,
}

/// Could `id` name a Run (`run-…`: ASCII letters, digits and `-`)? Anything
/// else names none, before any lookup (a door answers it not found).
pub fn is_run_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// One Run as stored in `.jig/runs/<id>.json`.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub id: String,
    /// `{target, inputDigest, inputRetained?, generation, pid, submittedAtUnixMs, key?, contentDigest, terminal?}`
    pub value: Value,
}

/// The record field saying the Run's input is kept beside it
/// ([`Runs::input`]); records written before it existed lack it, and show
/// only the input's digest.
pub(crate) const INPUT_RETAINED: &str = "inputRetained";
/// The most input bytes kept with a Run: the JSON/1 document limit every
/// door already holds an input to, so nothing a Run accepted is too large.
pub(crate) const MAX_RETAINED_INPUT_BYTES: usize = flow::json::MAX_DOCUMENT_BYTES;

/// The canonical bytes of `input` to keep with a new Run, when within
/// [`MAX_RETAINED_INPUT_BYTES`], and `record` marked as keeping them.
pub(crate) fn retain_input(record: &mut RunRecord, input: &Value) -> Option<Vec<u8>> {
    let bytes = flow::json::canonical(input);
    if bytes.len() > MAX_RETAINED_INPUT_BYTES {
        return None;
    }
    record
        .value
        .as_object_mut()
        .expect("run content is an object")
        .insert(INPUT_RETAINED.into(), json!(true));
    Some(bytes)
}

impl RunRecord {
    /// Its terminal's status; `pending` until it settles.
    pub fn status(&self) -> Status {
        self.value
            .pointer("/terminal/status")
            .and_then(|status| Status::deserialize(status).ok())
            .unwrap_or(Status::Pending)
    }

    pub fn terminal(&self) -> Option<&Value> {
        self.value.get("terminal")
    }
}

#[derive(Clone)]
pub struct Runs {
    dir: PathBuf,
    /// What [`Runs::reserve`] sets aside for each Run it records.
    reserve_bytes: u64,
}

pub enum Submission {
    New(RunRecord),
    Existing(RunRecord),
}

impl Runs {
    pub(super) fn new(dir: PathBuf, reserve_bytes: u64) -> Runs {
        Runs { dir, reserve_bytes }
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// The space set aside to settle Run `id` ([`Runs::reserve`]), beside
    /// where its settled record goes: `<id>.reserve`.
    fn reserve_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}{RESERVE_SUFFIX}"))
    }

    /// Set aside the space settling Run `id` needs, so that a filesystem
    /// filled while it runs cannot keep its terminal from being written.
    /// A filesystem that cannot allocate ahead (no `fallocate`) gets no
    /// reserve; one that is full refuses the Run here.
    fn reserve(&self, id: &str) -> Result<(), RunsError> {
        use std::os::unix::fs::OpenOptionsExt;
        let io = |e| RunsError::State(StateError::io("reserving the Run's settlement")(e));
        let path = self.reserve_path(id);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        let allocated = nix::fcntl::fallocate(
            &file,
            nix::fcntl::FallocateFlags::empty(),
            0,
            self.reserve_bytes as i64,
        );
        match allocated {
            Ok(()) => Ok(()),
            Err(nix::errno::Errno::EOPNOTSUPP) => {
                let _ = std::fs::remove_file(&path);
                Ok(())
            }
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(io(e.into()))
            }
        }
    }

    /// Write settled record `bytes` of Run `id` into its reserve and
    /// rename it into place: what [`Runs::settle`] does when the
    /// filesystem has no room for a new file. `false`: there is no reserve,
    /// or the record does not fit it (the size it was set aside with, when
    /// the Run was recorded, decides).
    fn settle_in_reserve(&self, id: &str, bytes: &[u8]) -> Result<bool, RunsError> {
        use std::os::unix::fs::FileExt;
        let io = |e| RunsError::State(StateError::io("settling the Run in its reserve")(e));
        let reserve = self.reserve_path(id);
        let file = match std::fs::OpenOptions::new().write(true).open(&reserve) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io(e)),
        };
        if bytes.len() as u64 > file.metadata().map_err(io)?.len() {
            return Ok(false);
        }
        file.write_all_at(bytes, 0).map_err(io)?;
        file.set_len(bytes.len() as u64).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&reserve, self.path(id)).map_err(io)?;
        super::sync_dir(&self.dir).map_err(RunsError::State)?;
        Ok(true)
    }

    /// A settled record of Run `id` that its reserve holds: one settled in
    /// it whose rename a crash interrupted.
    fn settled_in_reserve(&self, id: &str) -> Option<RunRecord> {
        let record = read_record(id, &self.reserve_path(id)).ok()?;
        let own = record.value.get("id").and_then(Value::as_str) == Some(id);
        (own && record.status() != Status::Pending).then_some(record)
    }

    /// Where a Run's record is kept until it is settled:
    /// `pending/<id>.json`. Only this directory is read to find the Runs
    /// a lost coordinator left, so a command's cost does not grow with the
    /// project's history.
    fn pending_path(&self, id: &str) -> PathBuf {
        self.dir.join(PENDING_DIR).join(format!("{id}.json"))
    }

    /// Where a Run's input is kept: `inputs/<id>.json`, its canonical
    /// JSON/1 bytes. Written after its record and removed after it, so a
    /// record never outlives a sweep without its input, and an input
    /// without a record is an orphan ([`Runs::orphan_inputs`]).
    fn input_path(&self, id: &str) -> PathBuf {
        self.dir.join(INPUTS_DIR).join(format!("{id}.json"))
    }

    /// The pending directory, made once. A `runs/` written before it
    /// existed (pending records beside the settled ones, with or without
    /// `.pending` markers) is moved over first, crash-safe: the pending
    /// records are copied into a fresh directory that is renamed into
    /// place, and only then are the old copies and markers removed (a copy
    /// left behind by a crash is the same pending record, or is superseded
    /// once that Run is settled).
    fn pending_dir(&self) -> Result<PathBuf, RunsError> {
        let dir = self.dir.join(PENDING_DIR);
        if dir.is_dir() {
            return Ok(dir);
        }
        let io = |e| RunsError::State(StateError::io("reading the Run records")(e));
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let mut markers = Vec::new();
        let mut records = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries {
                let name = entry.map_err(io)?.file_name().to_string_lossy().to_string();
                if let Some(id) = name.strip_suffix(LEGACY_MARKER_SUFFIX) {
                    markers.push(id.to_string());
                } else if let Some(id) = name.strip_suffix(".json") {
                    records.push(id.to_string());
                }
            }
        }
        let indexed = self.dir.join(LEGACY_INDEX).exists();
        let candidates = if indexed { &markers } else { &records };
        let staging = self.dir.join(PENDING_STAGING);
        crate::files::remove_tree(&staging).map_err(io)?;
        super::create_private_dir(&staging)?;
        let mut moved = Vec::new();
        for id in candidates {
            let Ok(record) = self.load_settled_or_legacy(id) else {
                continue;
            };
            if record.status() == Status::Pending {
                write_atomic(
                    &staging.join(format!("{id}.json")),
                    &flow::json::canonical(&record.value),
                )?;
                moved.push(id.clone());
            }
        }
        std::fs::rename(&staging, &dir).map_err(io)?;
        super::sync_dir(&self.dir)?;
        for id in &moved {
            let _ = std::fs::remove_file(self.path(id));
        }
        for id in &markers {
            let _ = std::fs::remove_file(self.dir.join(format!("{id}{LEGACY_MARKER_SUFFIX}")));
        }
        let _ = std::fs::remove_file(self.dir.join(LEGACY_INDEX));
        Ok(dir)
    }

    /// The ids of every Run that may still be pending.
    fn pending_ids(&self) -> Result<Vec<String>, RunsError> {
        let io = |e| RunsError::State(StateError::io("reading the Run records")(e));
        let mut ids = Vec::new();
        for entry in std::fs::read_dir(self.pending_dir()?).map_err(io)? {
            let name = entry.map_err(io)?.file_name().to_string_lossy().to_string();
            if let Some(id) = name.strip_suffix(".json") {
                ids.push(id.to_string());
            }
        }
        Ok(ids)
    }

    fn key_path(&self, key: &str) -> PathBuf {
        self.dir
            .join("keys")
            .join(digest_hex(&sha256_digest(key.as_bytes())))
    }

    /// The Run already submitted under `key`, if any. Its content must be
    /// identical to `content` (target, input digest, captured file identity,
    /// output intent, ...), else `SUBMISSION_CONFLICT`.
    pub fn lookup(&self, key: &str, content: &Value) -> Result<Option<RunRecord>, RunsError> {
        let content_digest = sha256_digest(&flow::json::canonical(content));
        let Ok(existing) = std::fs::read_to_string(self.key_path(key)) else {
            return Ok(None);
        };
        // A key whose Run retention removed is forgotten with it: the
        // same key then makes a new Run (see `state::retention`).
        let record = match self.load(existing.trim()) {
            Err(RunsError::NotFound(_)) => return Ok(None),
            found => found?,
        };
        if record.value.get("contentDigest").and_then(Value::as_str)
            != Some(content_digest.as_str())
        {
            return Err(RunsError::Conflict);
        }
        Ok(Some(record))
    }

    /// Record a new Run before dispatch, keeping `input` with it. With an
    /// idempotency key, the same key and identical content return the
    /// existing Run; changed content is `SUBMISSION_CONFLICT`.
    pub fn submit(
        &self,
        key: Option<&str>,
        content: Value,
        input: Option<&Value>,
    ) -> Result<Submission, RunsError> {
        let mut submission = self.prepare(key, content)?;
        if let Submission::New(record) = &mut submission {
            let kept = input.and_then(|input| retain_input(record, input));
            self.commit(record, kept.as_deref())?;
        }
        Ok(submission)
    }

    /// A new Run's record, not yet written (see [`Runs::commit`]), or the
    /// Run already submitted under `key`.
    pub fn prepare(&self, key: Option<&str>, content: Value) -> Result<Submission, RunsError> {
        let content_digest = sha256_digest(&flow::json::canonical(&content));
        if let Some(key) = key {
            if let Some(record) = self.lookup(key, &content)? {
                return Ok(Submission::Existing(record));
            }
        }
        let id = new_run_id();
        let mut value = content;
        let object = value.as_object_mut().expect("run content is an object");
        object.insert("id".into(), json!(id));
        object.insert("contentDigest".into(), json!(content_digest));
        object.insert("pid".into(), json!(std::process::id()));
        object.insert("submittedAtUnixMs".into(), json!(now_unix_ms()));
        if let Some(k) = key {
            object.insert("key".into(), json!(k));
        }
        Ok(Submission::New(RunRecord { id, value }))
    }

    /// Make a prepared Run's record durable, then its key's, then the
    /// input [`retain_input`] kept for it.
    pub fn commit(&self, record: &RunRecord, input: Option<&[u8]>) -> Result<(), RunsError> {
        super::pause_point("run-record");
        super::crash_point("run-record");
        self.reserve(&record.id)?;
        if let Err(e) = self.store(record) {
            let _ = std::fs::remove_file(self.reserve_path(&record.id));
            return Err(e);
        }
        if let Some(key) = record.value.get("key").and_then(Value::as_str) {
            let key_path = self.key_path(key);
            std::fs::create_dir_all(key_path.parent().unwrap())
                .map_err(|e| RunsError::State(StateError::io("recording the key")(e)))?;
            write_atomic(&key_path, record.id.as_bytes()).map_err(RunsError::State)?;
        }
        if let Some(bytes) = input {
            // Kept to be shown, not to recover the Run: unsynced (a crash
            // may lose it, and the Run's page then says it is not kept).
            let path = self.input_path(&record.id);
            super::create_private_dir(path.parent().unwrap())?;
            super::write_unsynced(&path, bytes).map_err(RunsError::State)?;
        }
        Ok(())
    }

    /// The input kept with Run `record`: `None` when the record keeps none
    /// (written before inputs were kept, or over the bound) or when it is
    /// gone or is not the input its digest names.
    pub fn input(&self, record: &RunRecord) -> Result<Option<Value>, RunsError> {
        if record.value.get(INPUT_RETAINED) != Some(&json!(true)) {
            return Ok(None);
        }
        let bytes = match std::fs::read(self.input_path(&record.id)) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(RunsError::State(StateError::io("reading a Run's input")(e))),
        };
        let digest = record.value.get("inputDigest").and_then(Value::as_str);
        if bytes.len() > MAX_RETAINED_INPUT_BYTES || digest != Some(sha256_digest(&bytes).as_str())
        {
            return Ok(None);
        }
        Ok(flow::json::parse(&bytes).ok())
    }

    /// Kept inputs whose Run has no record (a sweep a crash interrupted
    /// after the record went): (id, path). An input is written after its
    /// record, so one without a record is never a Run being submitted.
    pub(super) fn orphan_inputs(&self) -> Vec<(String, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(self.dir.join(INPUTS_DIR)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let id = name.strip_suffix(".json")?.to_string();
                let gone =
                    !id.starts_with('.') && matches!(self.load(&id), Err(RunsError::NotFound(_)));
                gone.then(|| (id, entry.path()))
            })
            .collect()
    }

    /// Settle a pending Run with its one terminal.
    pub fn settle(&self, record: &mut RunRecord, terminal: Value) -> Result<(), RunsError> {
        if record.status() != Status::Pending {
            return Ok(());
        }
        record
            .value
            .as_object_mut()
            .unwrap()
            .insert("terminal".into(), terminal);
        record
            .value
            .as_object_mut()
            .unwrap()
            .insert("settledAtUnixMs".into(), json!(now_unix_ms()));
        self.store(record)
    }

    /// Keep a pending Run's accepted execution terminal before its delivery,
    /// so a recovery after coordinator loss reports it instead of a loss.
    pub(crate) fn note_execution(
        &self,
        record: &mut RunRecord,
        execution: Value,
    ) -> Result<(), RunsError> {
        record
            .value
            .as_object_mut()
            .unwrap()
            .insert("execution".into(), execution);
        self.store(record)
    }

    /// The record of Run `id`: its settled record, else its pending one
    /// (a settled record wins over a pending copy a crash left behind).
    pub fn load(&self, id: &str) -> Result<RunRecord, RunsError> {
        if !is_run_id(id) {
            return Err(RunsError::NotFound(id.to_string()));
        }
        match self.load_settled_or_legacy(id) {
            Ok(record) if record.status() != Status::Pending => Ok(record),
            found => match read_record(id, &self.pending_path(id)) {
                Err(RunsError::NotFound(_)) => found,
                pending => pending,
            },
        }
    }

    /// `<id>.json` beside the settled records: a settled Run, or a pending
    /// one an older jig kept there.
    fn load_settled_or_legacy(&self, id: &str) -> Result<RunRecord, RunsError> {
        read_record(id, &self.path(id))
    }

    /// Every record, newest first, and apart those that cannot be read.
    pub fn list(&self) -> Result<Listing, RunsError> {
        let mut ids = std::collections::BTreeSet::new();
        for dir in [self.dir.clone(), self.dir.join(PENDING_DIR)] {
            if let Ok(entries) = std::fs::read_dir(&dir) {
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().to_string();
                    if let Some(id) = name.strip_suffix(".json") {
                        ids.insert(id.to_string());
                    }
                }
            }
        }
        let Listing {
            mut records,
            unreadable,
        } = self.load_listed(&ids)?;
        records.sort_by_key(|r| {
            std::cmp::Reverse(
                r.value
                    .get("submittedAtUnixMs")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            )
        });
        Ok(Listing {
            records,
            unreadable,
        })
    }

    /// The records of `ids`, read from a listing of the directories: one
    /// removed since (retention, beside a daemon) is not listed, one that
    /// is not a record (corrupt) is listed apart, and the rest still are.
    fn load_listed(&self, ids: &std::collections::BTreeSet<String>) -> Result<Listing, RunsError> {
        let mut listing = Listing {
            records: Vec::with_capacity(ids.len()),
            unreadable: Vec::new(),
        };
        for id in ids {
            match self.load(id) {
                Ok(record) => listing.records.push(record),
                Err(RunsError::NotFound(_)) => {}
                Err(RunsError::State(StateError::Invalid { .. })) => {
                    listing.unreadable.push(self.unreadable(id));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(listing)
    }

    /// Run `id`'s record that cannot be read, named by its file.
    fn unreadable(&self, id: &str) -> Unreadable {
        let file = match self.path(id).exists() {
            true => format!("{id}.json"),
            false => format!("{PENDING_DIR}/{id}.json"),
        };
        Unreadable {
            id: id.to_string(),
            file: format!("{}/runs/{file}", super::STATE_DIR),
        }
    }

    /// The settled records beside the pending directory, in no order
    /// (retention's candidates). A pending record an older jig kept there,
    /// or one that cannot be read, is not a candidate.
    pub(super) fn settled(&self) -> Vec<RunRecord> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                let id = name.strip_suffix(".json")?;
                let record = read_record(id, &entry.path()).ok()?;
                (record.status() != Status::Pending).then_some(record)
            })
            .collect()
    }

    /// The generation of every Run recorded, pending or settled, but
    /// those in `gone`. The pending ones are read first: a Run settling
    /// meanwhile is then found in one place or the other, never missed.
    pub(super) fn generations(
        &self,
        gone: &[String],
    ) -> Result<std::collections::BTreeSet<u64>, RunsError> {
        let mut generations = std::collections::BTreeSet::new();
        let mut note = |record: &RunRecord| {
            if gone.contains(&record.id) {
                return;
            }
            if let Some(n) = record.value.get("generation").and_then(Value::as_u64) {
                generations.insert(n);
            }
        };
        for id in self.pending_ids()? {
            match self.load(&id) {
                Ok(record) => note(&record),
                Err(RunsError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        for record in self.settled() {
            note(&record);
        }
        Ok(generations)
    }

    /// Remove a settled Run's record, its key first (only while the key
    /// still names this Run): a crash between the two leaves a record
    /// whose key is forgotten, which the next sweep removes. Returns the
    /// bytes removed (or, with `dry_run`, that would be).
    pub(super) fn remove_settled(
        &self,
        record: &RunRecord,
        dry_run: bool,
    ) -> Result<u64, RunsError> {
        let io = |e| RunsError::State(StateError::io("removing a Run record")(e));
        let mut bytes = 0;
        if let Some(key) = record.value.get("key").and_then(Value::as_str) {
            let key_path = self.key_path(key);
            if std::fs::read_to_string(&key_path).is_ok_and(|named| named.trim() == record.id) {
                bytes += std::fs::metadata(&key_path).map_or(0, |m| m.len());
                if !dry_run {
                    remove_file(&key_path).map_err(io)?;
                    super::crash_point("retention:key-removed");
                }
            }
        }
        let path = self.path(&record.id);
        bytes += std::fs::metadata(&path).map_or(0, |m| m.len());
        if !dry_run {
            remove_file(&path).map_err(io)?;
            super::sync_dir(&self.dir)?;
            super::crash_point("retention:record-unlinked");
        }
        // The input after the record: a crash between leaves an orphan
        // input, never a record without its input.
        let input = self.input_path(&record.id);
        bytes += std::fs::metadata(&input).map_or(0, |m| m.len());
        if !dry_run {
            remove_file(&input).map_err(io)?;
        }
        Ok(bytes)
    }

    /// Settle Runs left pending by a coordinator that is gone: dispatch may
    /// have happened and no result can be proved, so they are lost, never
    /// replayed. Called while holding the project.
    ///
    /// A lost Run with an accepted Run Checkpoint gets its packet now, from
    /// that aggregate (`delivery.source: "checkpoint"`), exactly once: the
    /// record is settled with the delivery after the no-replace publication,
    /// and a packet this Run already published is recognised, not redone.
    pub fn fence_lost(&self) -> Result<usize, RunsError> {
        let mut fenced = 0;
        let started = std::time::Instant::now();
        let checkpoints = self
            .dir
            .parent()
            .map(|state| Checkpoints::new(state.join("checkpoints")));
        // Only the Runs that may be pending are read, not the whole history.
        for id in self.pending_ids()? {
            let mut record = match self.load(&id) {
                Ok(record) => record,
                // Gone since it was listed: nothing is left to fence.
                Err(RunsError::NotFound(_)) => {
                    let _ = std::fs::remove_file(self.pending_path(&id));
                    continue;
                }
                // Not a record: nothing to fence it with; `jig runs` names
                // its file, and the other Runs go on.
                Err(RunsError::State(StateError::Invalid { .. })) => continue,
                Err(e) => return Err(e),
            };
            if record.status() != Status::Pending {
                let _ = std::fs::remove_file(self.pending_path(&id));
                let _ = std::fs::remove_file(self.reserve_path(&id));
                continue;
            }
            let pid = record.value.get("pid").and_then(Value::as_u64).unwrap_or(0);
            if pid as u32 == std::process::id() {
                continue;
            }
            // Settled in its reserve, the rename interrupted: its terminal
            // was known, so it is not lost.
            if let Some(settled) = self.settled_in_reserve(&id) {
                self.store(&settled)?;
                continue;
            }
            let lost = Terminal::lost(
                "the process coordinating this Run ended before it settled; its work was fenced and is not replayed",
            );
            let aggregate = match &checkpoints {
                Some(checkpoints) => checkpoints.load(&record.id)?,
                None => None,
            };
            let output = record.value.get("output").and_then(Value::as_str);
            let terminal = match (&aggregate, output) {
                (Some(aggregate), Some(output)) => {
                    // A known execution terminal stays what it was; only
                    // the delivered bytes come from the checkpoint.
                    let execution = record
                        .value
                        .get("execution")
                        .and_then(Terminal::from_value)
                        .unwrap_or(lost);
                    recover_packet(&record.id, aggregate, output, execution, started)
                }
                _ => lost,
            };
            self.settle(&mut record, terminal.to_value())?;
            if let Some(checkpoints) = &checkpoints {
                checkpoints.remove(&record.id)?;
            }
            // Its private work (scratch, sealed attachments, unpublished
            // output) is never resumed, so it is removed now.
            if let Some(state_dir) = self.dir.parent() {
                let work = state_dir.join("work").join(&record.id);
                crate::files::remove_tree(&work)
                    .map_err(StateError::io("removing a lost Run's work"))?;
            }
            fenced += 1;
        }
        // A Run's private work lives only while its record is pending: a
        // directory without one (its coordinator gone before the record was
        // durable, or before the directory was removed) goes now.
        if let Some(state_dir) = self.dir.parent() {
            if let Ok(entries) = std::fs::read_dir(state_dir.join("work")) {
                for entry in entries.flatten() {
                    let id = entry.file_name().to_string_lossy().into_owned();
                    if !self.pending_path(&id).exists() {
                        crate::files::remove_tree(&entry.path())
                            .map_err(StateError::io("removing a stale Run's work"))?;
                    }
                }
            }
        }
        // A reserve whose Run is not pending (settled since, or never
        // recorded: its coordinator ended between the two) is not needed.
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(id) = name.strip_suffix(RESERVE_SUFFIX) {
                    if !self.pending_path(id).exists() {
                        let _ = std::fs::remove_file(entry.path());
                    }
                }
            }
        }
        Ok(fenced)
    }

    /// Write a record durably where its status keeps it: a pending one in
    /// the pending directory, a settled one beside the others, after which
    /// its pending copy goes (one that outlives a crash here is superseded
    /// by the settled record and removed by the next scan).
    fn store(&self, record: &RunRecord) -> Result<(), RunsError> {
        let bytes = flow::json::canonical(&record.value);
        if record.status() == Status::Pending {
            let pending = self.pending_dir()?;
            let path = pending.join(format!("{}.json", record.id));
            return super::write_atomic_at(&path, &bytes, Some("run-record"))
                .map_err(RunsError::State);
        }
        match write_atomic(&self.path(&record.id), &bytes) {
            Ok(()) => {}
            // No room for a new file: the space set aside at commit.
            Err(e @ StateError::Unwritable { .. }) => {
                if !self.settle_in_reserve(&record.id, &bytes)? {
                    return Err(RunsError::State(e));
                }
            }
            Err(e) => return Err(RunsError::State(e)),
        }
        let _ = std::fs::remove_file(self.reserve_path(&record.id));
        let _ = std::fs::remove_file(self.pending_path(&record.id));
        Ok(())
    }
}

/// Remove `path`; already gone is done.
fn remove_file(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The records of the Runs not settled yet, below `runs/`.
const PENDING_DIR: &str = "pending";
/// The space set aside when a Run is recorded so that it can be settled on
/// a full filesystem, unless `[records] settle-reserve` says otherwise: a
/// settled record up to this size (a terminal with a larger output waits
/// for room, held by its door).
pub(crate) const DEFAULT_SETTLE_RESERVE_BYTES: u64 = 256 * 1024;
/// The suffix of a Run's reserve, `<id>.reserve` beside the settled records.
const RESERVE_SUFFIX: &str = ".reserve";
/// The inputs kept with the Runs, below `runs/` ([`Runs::input`]).
const INPUTS_DIR: &str = "inputs";
/// Where [`PENDING_DIR`] is built before it is renamed into place.
const PENDING_STAGING: &str = ".pending-staging";
/// The marker an older jig kept beside a pending record (`<id>.pending`).
const LEGACY_MARKER_SUFFIX: &str = ".pending";
/// Present once an older jig had marked every pending record.
const LEGACY_INDEX: &str = ".pending-index";

fn read_record(id: &str, path: &std::path::Path) -> Result<RunRecord, RunsError> {
    let bytes = std::fs::read(path).map_err(|_| RunsError::NotFound(id.to_string()))?;
    let value = flow::json::parse(&bytes).map_err(|_| {
        RunsError::State(StateError::Invalid {
            message: format!("run record {id} is corrupt"),
        })
    })?;
    Ok(RunRecord {
        id: id.to_string(),
        value,
    })
}

/// As the reference does (Run Checkpoint): recovery after coordinator loss has this long to reach
/// a lost Run's packet; delivery then has [`crate::files::DELIVERY_BUDGET`].
pub(crate) const RECOVERY_BUDGET: std::time::Duration = std::time::Duration::from_secs(30);

/// Publish a lost Run's packet from its latest accepted checkpoint and
/// return its terminal: the lost execution plus what ran, the input
/// identity, the delivery and the checkpoint record, as the packet's
/// `result.json` holds them.
fn recover_packet(
    run_id: &str,
    aggregate: &Aggregate,
    output: &str,
    execution: Terminal,
    started: std::time::Instant,
) -> Terminal {
    use crate::files;
    let method = &aggregate.identity["method"];
    let input = &aggregate.identity["input"];
    let checkpoint = aggregate.record();
    let destination = std::path::Path::new(output);
    let published = if files::over_budget(started, RECOVERY_BUDGET) {
        Err(files::FilesError::delivery(format!(
            "recovery took longer than {} s; the checkpoint was not delivered",
            RECOVERY_BUDGET.as_secs()
        )))
    } else {
        let delivering = std::time::Instant::now();
        let outputs = aggregate.output_files();
        let record = files::packet_record(
            run_id,
            method,
            &execution.to_value(),
            input,
            "checkpoint",
            &outputs,
            &checkpoint,
        );
        match files::prepare_destination(destination, &[]) {
            Ok(prepared) if !files::over_budget(delivering, files::DELIVERY_BUDGET) => {
                files::publish(&prepared, &outputs, &record)
            }
            Ok(_) => Err(files::FilesError::delivery("delivery ran out of time")),
            // Published before the coordinator that settles it was lost.
            Err(e)
                if e.kind == crate::files::FilesErrorKind::OutputExists
                    && published_by(destination, run_id) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    };
    let delivery = match published {
        Ok(()) => Delivery::Written {
            destination: output.to_string(),
            source: Source::Checkpoint,
        },
        Err(e) => Delivery::Failed {
            destination: output.to_string(),
            code: e.code().to_string(),
        },
    };
    execution
        .with_run_id(run_id)
        .with_packet(method, input, &checkpoint, delivery)
}

/// Is the packet at `destination` the one Run `run_id` published?
fn published_by(destination: &std::path::Path, run_id: &str) -> bool {
    std::fs::read(destination.join("result.json"))
        .ok()
        .and_then(|bytes| flow::json::parse(&bytes).ok())
        .is_some_and(|v| v.get("runId").and_then(Value::as_str) == Some(run_id))
}

#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error("the key was already used for a different submission")]
    Conflict,
    #[error("no Run {0} in this project")]
    NotFound(String),
    #[error(transparent)]
    State(#[from] StateError),
}

impl RunsError {
    pub fn code(&self) -> &'static str {
        match self {
            RunsError::Conflict => "SUBMISSION_CONFLICT",
            RunsError::NotFound(_) => "RUN_NOT_FOUND",
            RunsError::State(e) => e.code(),
        }
    }
}

/// `2026-12-01 16:18:16` (UTC) for Unix milliseconds: how every door
/// shows a Run's times.
pub fn utc_text(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Gregorian, proleptic).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Run ids sort by time and never repeat within a project.
fn new_run_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "run-{}-{:05x}{:04x}{}",
        now_unix_ms(),
        std::process::id() & 0xfffff,
        nanos & 0xffff,
        n
    )
}

#[cfg(test)]
mod tests;
