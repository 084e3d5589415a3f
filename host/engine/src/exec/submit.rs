//! The one Run path `jig run` and `jig serve` share: check what was asked,
//! resolve the target in the admitted generation, form the content
//! identity a key is bound to, record the Run durably before dispatch
//! (replaying a key already used with the same content), build the
//! executor, and form or settle the terminal.
//!
//! What each door does around it (the CLI's attachments, `--out` and
//! terminal; the daemon's queue, event log and HTTP) stays with the door;
//! everything that decides whether and what a Run is lives here, so the two
//! cannot drift. A future worker calls the same functions.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::package::Package;
use serde_json::json;

use super::{AttachmentGrant, Executor, Repository, TargetRef};
use crate::config::HostConfig;
use crate::error::Error;
use crate::files::Captured;
use crate::providers::ProviderSet;
use crate::state::{self, Generation, ProjectState, RunRecord, Runs, StateError, Submission};
use crate::terminal::Terminal;

/// A Run as a daemon takes it: the JSON body of `POST
/// /v1/projects/{project}/runs` (a file Run's `request.json`), written by
/// the `--server` client and the console, read by `jig serve`. Only the
/// members below; `out` (default `true`) is sent only when `false`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunRequest {
    pub target: String,
    pub input: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// `--receive`: the root's send ports whose items are streamed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub receive: Vec<String>,
    /// A file Run's packet is wanted (`jig run --out`). Without it a
    /// writable attachment is refused and nothing is published.
    #[serde(skip_serializing_if = "is_true")]
    pub out: bool,
}

fn is_true(value: &bool) -> bool {
    *value
}

impl RunRequest {
    /// A Run of `target` with `input`, nothing else asked.
    pub fn new(target: impl Into<String>, input: Value) -> RunRequest {
        RunRequest {
            target: target.into(),
            input,
            key: None,
            timeout: None,
            receive: Vec::new(),
            out: true,
        }
    }

    /// Read a body strictly (a JSON/1 object, no member but those above,
    /// each of its type); `Err` says what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<RunRequest, String> {
        let value = flow::json::parse(bytes)
            .map_err(|e| format!("the body is not a JSON/1 document: {e}"))?;
        let Some(object) = value.as_object() else {
            return Err("the body must be a JSON object".into());
        };
        for name in object.keys() {
            if !["target", "input", "key", "timeout", "receive", "out"].contains(&name.as_str()) {
                return Err(format!("unknown member {name:?}"));
            }
        }
        let text = |name: &str| -> Result<Option<String>, String> {
            match object.get(name) {
                None => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("{name} must be a string")),
            }
        };
        let not_names = || "receive must be an array of channel names".to_string();
        let receive = match object.get("receive") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string).ok_or_else(not_names))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(not_names()),
        };
        Ok(RunRequest {
            target: text("target")?.ok_or("target is required")?,
            input: object.get("input").cloned().unwrap_or(Value::Null),
            key: text("key")?,
            timeout: text("timeout")?,
            receive,
            out: match object.get("out") {
                None => true,
                Some(Value::Bool(out)) => *out,
                Some(_) => return Err("out must be a boolean".into()),
            },
        })
    }

    /// The body as JSON.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a submission is plain JSON")
    }
}

/// The longest idempotency key, in bytes.
pub const MAX_KEY_BYTES: usize = 128;

pub use super::timeout::{parse_timeout, DEFAULT_TIMEOUT, MAX_TIMEOUT};

/// What was asked, checked before any file or state is read.
#[derive(Debug, Clone)]
pub struct Asked {
    pub target: TargetRef,
    pub timeout: Duration,
    pub key: Option<String>,
}

/// Check a submission's target, timeout and key.
pub fn check(target: &str, timeout: Option<&str>, key: Option<&str>) -> Result<Asked, Error> {
    let target_ref = TargetRef::parse(target).ok_or(Error::TargetMalformed)?;
    let timeout = match timeout {
        None => DEFAULT_TIMEOUT,
        Some(text) => parse_timeout(text).ok_or(Error::TimeoutInvalid)?,
    };
    // A NUL byte (or any control character) cannot be stored in every
    // door's records (PostgreSQL text refuses NUL): refused here, alike.
    if key
        .is_some_and(|k| k.is_empty() || k.len() > MAX_KEY_BYTES || k.chars().any(char::is_control))
    {
        return Err(Error::KeyInvalid { max: MAX_KEY_BYTES });
    }
    Ok(Asked {
        target: target_ref,
        timeout,
        key: key.map(str::to_string),
    })
}

/// A target resolved in the admitted generation a new Run would take.
pub struct Resolved {
    pub generation: Generation,
    pub package_path: String,
    pub package_digest: String,
    pub binding: Option<String>,
    /// Read and verified once; shared with the root Run, not copied.
    pub package: Arc<Package>,
    /// Seed 002 §4: it keeps Run Checkpoints (delivered with `--out`).
    pub checkpointing: bool,
}

impl Resolved {
    /// What ran: the target, the exact package and the Binding.
    pub fn method(&self, target: &TargetRef) -> Value {
        json!({
            "target": target.to_string(),
            "package": {"path": self.package_path, "digest": self.package_digest},
            "binding": self.binding,
        })
    }
}

/// What a `flow/run` frame holds beside the input and the settings: the
/// JSON-RPC envelope, the parameter names, the attachments' and scratch's
/// paths, the deadline and the channel grants, with room to spare.
pub(crate) const FRAME_HEADROOM_BYTES: usize = 64 * 1024;

impl Resolved {
    /// Refuse an input that would not fit the one Run/1 frame that carries
    /// it with the target's settings ([`flow::wire::MAX_FRAME_BYTES`] less
    /// the settings and [`FRAME_HEADROOM_BYTES`]): before anything is
    /// recorded, not as a failure of the Run.
    pub fn check_input_fits(&self, input: &Value) -> Result<(), Error> {
        let settings = self
            .binding
            .as_ref()
            .and_then(|id| self.generation.plan["lock"]["bindings"].get(id))
            .and_then(|binding| binding.get("settings"))
            .map_or(0, |settings| flow::json::canonical(settings).len());
        let max = flow::wire::MAX_FRAME_BYTES.saturating_sub(settings + FRAME_HEADROOM_BYTES);
        let bytes = flow::json::canonical(input).len();
        match bytes <= max {
            true => Ok(()),
            false => Err(Error::InputTooLarge { bytes, max }),
        }
    }
}

/// Resolve `target` in the project's current admitted generation.
pub fn resolve(state: &ProjectState, target: &TargetRef) -> Result<Resolved, Error> {
    resolve_in(state, state.current(), target)
}

/// [`resolve`] in `current`, the generation as [`ProjectState::current`]
/// read it.
pub(crate) fn resolve_in(
    state: &ProjectState,
    current: Result<Option<Generation>, StateError>,
    target: &TargetRef,
) -> Result<Resolved, Error> {
    resolve_with(current?, target, |digest| {
        Ok(Arc::new(state.store().load_package(digest)?))
    })
}

/// [`resolve`] in `generation`, the target's package given by `load`
/// (read and verified from the store, or held by a daemon that did so).
pub fn resolve_with(
    generation: Option<Generation>,
    target: &TargetRef,
    load: impl FnOnce(&str) -> Result<Arc<Package>, Error>,
) -> Result<Resolved, Error> {
    let Some(generation) = generation else {
        return Err(Error::AdmissionMissing);
    };
    if !Executor::is_target(&generation.plan, target) {
        let targets = Executor::targets(&generation.plan);
        return Err(Error::TargetNotAdmitted {
            target: target.to_string(),
            admitted: if targets.is_empty() {
                "none".into()
            } else {
                targets.join(", ")
            },
        });
    }
    let (package_path, package_digest, binding) = admitted_package(&generation.plan, target)
        .ok_or_else(|| Error::PackageMissing {
            target: target.to_string(),
        })?;
    let package = load(&package_digest)?;
    let checkpointing = crate::plan::uses_run_checkpoint(&package);
    Ok(Resolved {
        generation,
        package_path,
        package_digest,
        binding,
        package,
        checkpointing,
    })
}

/// Does `target` run as a process (in an envelope), not as an in-process
/// `flow.wasm`? What its admitted recipe says; false when it has none.
pub(crate) fn runs_a_process(plan: &Value, target: &TargetRef) -> bool {
    admitted_package(plan, target).is_some_and(|(path, _, _)| {
        plan["execution"][&path]["recipe"]["kind"]
            .as_str()
            .is_some_and(|kind| kind != "wasm")
    })
}

/// The admitted package behind a target: (package path, digest, binding id).
pub fn admitted_package(
    plan: &Value,
    target: &TargetRef,
) -> Option<(String, String, Option<String>)> {
    let lock = &plan["lock"];
    let (path, binding) = match target {
        TargetRef::Flow(path) => (path.clone(), None),
        TargetRef::Binding(id) => (
            lock["bindings"][id]["packagePath"].as_str()?.to_string(),
            Some(id.clone()),
        ),
    };
    let digest = lock["packages"][&path]["digest"].as_str()?.to_string();
    Some((path, digest, binding))
}

/// What a key is bound to, and the Run's input identity.
pub struct Identity {
    /// Recorded with the Run; a key replays only identical content.
    pub content: Value,
    /// The input digest and the attachment manifest (docs/src/runs.md,
    /// Files: attachments and the packet).
    pub input: Value,
}

/// What every door checks once a Run's target is resolved, before
/// anything is captured or recorded: the attachment roots asked and
/// `--out` against the attachments the target declares, and `--receive`
/// against the ports it sends on. Returns the writable attachment's name.
pub fn check_declared(
    package: &Package,
    request: &crate::files::Request,
    out: bool,
    receive: &[String],
) -> Result<Option<String>, Error> {
    let writable = crate::files::check_request(&package.metadata().attachments, request, out)?;
    super::receive::check(package, receive)?;
    Ok(writable)
}

/// The content identity of a Run: what, with which input and attachments,
/// delivered where, under which generation and deadline.
pub fn identity(
    asked: &Asked,
    generation: &Generation,
    input: &Value,
    attachments: Value,
    output: Option<&Path>,
) -> Identity {
    let input_digest = flow::digest::sha256_digest(&flow::json::canonical(input));
    let input_identity = json!({"digest": input_digest, "attachments": attachments});
    let content = json!({
        "target": asked.target.to_string(),
        "inputDigest": input_digest,
        "attachments": input_identity["attachments"],
        "output": output.map(|p| p.to_string_lossy().to_string()),
        "generation": generation.number,
        "timeoutMs": asked.timeout.as_millis() as u64,
    });
    Identity {
        content,
        input: input_identity,
    }
}

/// A recorded submission: a Run to dispatch (with what `reserve` held for
/// it), or one already submitted under the same key (nothing executes).
pub enum Recorded<H> {
    New(RunRecord, H),
    Replay(RunRecord),
}

/// The key already used with this content, if any (`SUBMISSION_CONFLICT`
/// when it was used with other content).
pub fn replayed(
    runs: &Runs,
    key: Option<&str>,
    content: &Value,
) -> Result<Option<RunRecord>, Error> {
    match key {
        None => Ok(None),
        Some(key) => Ok(runs.lookup(key, content)?),
    }
}

/// Record the Run durably before anything dispatches it. `reserve` runs
/// once the key is known to be new and may refuse (a daemon's bounds);
/// what it returns is dropped if the Run turns out not to be new.
pub fn record<H, E: From<Error>>(
    runs: &Runs,
    key: Option<&str>,
    content: Value,
    input: &Value,
    reserve: impl FnOnce() -> Result<H, E>,
) -> Result<Recorded<H>, E> {
    if let Some(record) = replayed(runs, key, &content)? {
        return Ok(Recorded::Replay(record));
    }
    let held = reserve()?;
    match runs
        .submit(key, content, Some(input))
        .map_err(Error::from)?
    {
        Submission::New(record) => Ok(Recorded::New(record, held)),
        Submission::Existing(record) => Ok(Recorded::Replay(record)),
    }
}

/// As [`record`], but the new Run's record is made durable on a thread of
/// its own while the caller prepares the Run (its directory, attachments,
/// envelope), and the caller gets the [`Commit`] that gates dispatch:
/// nothing of the Run starts before [`Commit::wait`] succeeds, and a Run
/// whose record failed was never recorded, so it is never settled.
pub(crate) fn record_committing<H, E: From<Error>>(
    runs: &Runs,
    key: Option<&str>,
    content: Value,
    input: &Value,
    reserve: impl FnOnce() -> Result<H, E>,
) -> Result<(Recorded<H>, Option<Arc<Commit>>), E> {
    if let Some(record) = replayed(runs, key, &content)? {
        return Ok((Recorded::Replay(record), None));
    }
    let held = reserve()?;
    match runs.prepare(key, content).map_err(Error::from)? {
        Submission::New(mut record) => {
            let kept = state::retain_input(&mut record, input);
            let (writer, committed) = (runs.clone(), record.clone());
            let handle = std::thread::spawn(move || {
                writer
                    .commit(&committed, kept.as_deref())
                    .map_err(|e| (e.code(), e.to_string()))
            });
            let commit = Commit {
                handle: std::sync::Mutex::new(Some(handle)),
                done: std::sync::OnceLock::new(),
            };
            Ok((Recorded::New(record, held), Some(Arc::new(commit))))
        }
        Submission::Existing(record) => Ok((Recorded::Replay(record), None)),
    }
}

/// Whether a Run's record became durable, or why not: its code and words.
type Committed = Result<(), (&'static str, String)>;

/// A Run's record being made durable (see [`record_committing`]).
pub struct Commit {
    handle: std::sync::Mutex<Option<std::thread::JoinHandle<Committed>>>,
    done: std::sync::OnceLock<Committed>,
}

impl Commit {
    /// Wait until the record is durable (at most its two syncs), or say
    /// why it could not be written ([`Error::NotRecorded`]). Answers the
    /// same every time.
    pub fn wait(&self) -> Result<(), Error> {
        self.done
            .get_or_init(|| {
                let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
                match handle.map(std::thread::JoinHandle::join) {
                    Some(Ok(result)) => result,
                    _ => Err(("INTERNAL", "recording the Run did not finish".into())),
                }
            })
            .clone()
            .map_err(|(code, message)| Error::NotRecorded { code, message })
    }
}

/// The terminal of a Run that was recorded but never dispatched: failed
/// (not lost), nothing of it ran.
pub fn undispatched(run_id: &str, message: &str) -> Terminal {
    Terminal::failed(flow::wire::ErrorCode::ExecutionFailed, message).with_run_id(run_id)
}

/// Settle a Run that was recorded but never dispatched ([`undispatched`]),
/// and return its terminal.
pub(crate) fn settle_undispatched(runs: &Runs, record: &mut RunRecord, message: &str) -> Terminal {
    let terminal = undispatched(&record.id, message);
    let _ = runs.settle(record, terminal.to_value());
    terminal
}

/// The executor one Run of `generation` uses, with its private tree under
/// `work_root`.
pub fn executor(
    state: &ProjectState,
    plan: Value,
    config: &HostConfig,
    providers: Arc<ProviderSet>,
    envelope: &crate::envelope::Envelope,
    work_root: PathBuf,
    loaded: Option<Arc<flow::package::Package>>,
) -> Executor {
    // Each invocation's directory (`<n>/`, its scratch inside) sits in the
    // Run's own directory beside its attachments and support files.
    let executor = Executor::new(
        state.store(),
        work_root.clone(),
        plan,
        providers,
        envelope,
        work_root,
    )
    .with_support_writer(super::sdk::write_runtime_support)
    .with_repository(Repository {
        root: state.root().to_path_buf(),
        secrets: config.secrets.clone(),
    })
    .with_agent(config.agent.table());
    // The package the caller just read and verified: the root Run does
    // not read and hash it a second time.
    match loaded {
        Some(package) => executor.with_loaded(package),
        None => executor,
    }
}

/// What a replayed or stored Run shows: its terminal, or pending.
pub fn shown_terminal(record: &RunRecord) -> Value {
    record
        .terminal()
        .cloned()
        .unwrap_or_else(|| Terminal::pending(&record.id).to_value())
}

/// Seal the captured roots read-only and create the empty writable
/// attachment, under the Run's private directory.
pub(crate) fn prepare_attachments(
    captured: &Captured,
    writable: Option<&str>,
    work_root: &Path,
) -> std::io::Result<Vec<AttachmentGrant>> {
    use std::os::unix::fs::DirBuilderExt;
    if captured.roots.is_empty() && writable.is_none() {
        return Ok(Vec::new());
    }
    let dir = work_root.join("attachments");
    std::fs::create_dir_all(&dir)?;
    let mut grants: Vec<AttachmentGrant> = crate::files::seal(captured, &dir)?
        .into_iter()
        .map(|(name, host)| AttachmentGrant {
            name,
            host,
            writable: false,
            output: None,
        })
        .collect();
    if let Some(name) = writable {
        let host: PathBuf = dir.join(name);
        std::fs::DirBuilder::new().mode(0o700).create(&host)?;
        grants.push(AttachmentGrant {
            name: name.to_string(),
            host,
            writable: true,
            output: Some(crate::files::Handoff::new()),
        });
    }
    Ok(grants)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The frame bound counts the Binding's settings: the largest input
    /// that fits is taken, one byte more is refused with its size and the
    /// bound.
    #[test]
    fn an_input_must_fit_the_frame_with_the_settings() {
        let settings = json!({"tone": "x".repeat(1000)});
        let resolved = |binding: Option<&str>| Resolved {
            generation: Generation {
                number: 1,
                plan: json!({"lock": {"bindings": {"b": {"settings": settings}}}}),
                plan_digest: "sha256:00".into(),
            },
            package_path: "flows/a".into(),
            package_digest: "sha256:11".into(),
            binding: binding.map(str::to_string),
            package: Arc::new(
                Package::from_files(BTreeMap::from([(
                    "FLOW.md".to_string(),
                    b"---\nname: a\ndescription: A test Flow.\n---\n".to_vec(),
                )]))
                .unwrap(),
            ),
            checkpointing: false,
        };
        let max = flow::wire::MAX_FRAME_BYTES
            - flow::json::canonical(&settings).len()
            - FRAME_HEADROOM_BYTES;
        // A JSON string of n bytes is n - 2 characters between its quotes.
        let input = |bytes: usize| json!("y".repeat(bytes - 2));
        let bound = resolved(Some("b"));
        assert!(bound.check_input_fits(&input(max)).is_ok());
        let refused = bound.check_input_fits(&input(max + 1)).unwrap_err();
        assert!(
            matches!(refused, Error::InputTooLarge { bytes, max: m } if bytes == max + 1 && m == max),
            "{refused:?}"
        );
        assert_eq!(refused.code(), "JIG_RUN_INPUT_INVALID");
        // A Flow target has no settings: its bound is the frame's alone.
        assert!(resolved(None).check_input_fits(&input(max + 1)).is_ok());
    }

    #[test]
    fn a_submission_reads_back_as_written_and_strictly() {
        let mut asked = RunRequest::new("flow:flows/a", json!({"n": 1}));
        assert_eq!(
            asked.to_value(),
            json!({"target": "flow:flows/a", "input": {"n": 1}})
        );
        asked.key = Some("k".into());
        asked.receive = vec!["progress".into()];
        asked.out = false;
        let bytes = flow::json::canonical(&asked.to_value());
        assert_eq!(RunRequest::parse(&bytes), Ok(asked));
        let refused = |b: &[u8]| RunRequest::parse(b).unwrap_err();
        assert_eq!(refused(br#"{"input":1}"#), "target is required");
        assert_eq!(
            refused(br#"{"target":"x","extra":1}"#),
            "unknown member \"extra\""
        );
        assert_eq!(
            refused(br#"{"target":"x","out":1}"#),
            "out must be a boolean"
        );
        assert_eq!(
            RunRequest::parse(br#"{"target":"x"}"#).unwrap().input,
            Value::Null
        );
    }

    #[test]
    fn a_root_runs_as_a_process_unless_its_recipe_is_wasm() {
        let plan = json!({
            "lock": {
                "packages": {
                    "flows/bin": {"digest": "sha256:b"},
                    "flows/py": {"digest": "sha256:p"},
                    "flows/wasm": {"digest": "sha256:w"},
                    "flows/unplanned": {"digest": "sha256:u"},
                },
                "bindings": {"intake": {"packagePath": "flows/wasm"}},
            },
            "execution": {
                "flows/bin": {"recipe": {"kind": "native"}},
                "flows/py": {"recipe": {"kind": "python"}},
                "flows/wasm": {"recipe": {"kind": "wasm"}},
            },
        });
        let flow = |p: &str| TargetRef::Flow(p.into());
        assert!(runs_a_process(&plan, &flow("flows/bin")));
        assert!(runs_a_process(&plan, &flow("flows/py")));
        assert!(!runs_a_process(&plan, &flow("flows/wasm")));
        assert!(!runs_a_process(&plan, &TargetRef::Binding("intake".into())));
        // No recipe, or no such target: nothing is made ahead.
        assert!(!runs_a_process(&plan, &flow("flows/unplanned")));
        assert!(!runs_a_process(&plan, &flow("flows/absent")));
    }

    #[test]
    fn a_key_of_the_longest_length_is_taken_and_one_byte_more_or_a_control_character_is_refused() {
        let at = "k".repeat(MAX_KEY_BYTES);
        let past = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(check("flow:flows/a", None, Some(&at)).is_ok());
        for key in [past.as_str(), "", "a\0b", "line\nbreak"] {
            let refusal = check("flow:flows/a", None, Some(key)).unwrap_err();
            // The HTTP door answers it 400 (`jig_server::serve::api::status`).
            assert!(matches!(refusal, Error::KeyInvalid { .. }), "{refusal:?}");
            assert_eq!(refusal.code(), "INVALID_REQUEST");
        }
    }

    #[test]
    fn targets_and_timeouts_are_checked_with_the_cli_codes() {
        let code = |target: &str, timeout: Option<&str>| {
            check(target, timeout, None)
                .map(|_| ())
                .map_err(|r| r.code())
        };
        assert_eq!(code("flow:flows/a", Some("90s")), Ok(()));
        assert_eq!(code("binding:b", None), Ok(()));
        assert_eq!(code("flows/a", None), Err("JIG_RUN_TARGET_INVALID"));
        assert_eq!(
            code("flow:flows/a", Some("soon")),
            Err("JIG_RUN_TIMEOUT_INVALID")
        );
        assert_eq!(
            code("flow:flows/a", Some("86400001ms")),
            Err("JIG_RUN_TIMEOUT_INVALID")
        );
        let asked = check("flow:flows/a", Some("2s"), Some("k")).unwrap();
        assert_eq!(asked.timeout, Duration::from_secs(2));
        assert_eq!(asked.key.as_deref(), Some("k"));
    }

    #[test]
    fn timeouts_at_24_hours_and_one_past() {
        assert_eq!(parse_timeout("24h"), Some(MAX_TIMEOUT));
        assert_eq!(parse_timeout("1440m"), Some(MAX_TIMEOUT));
        assert_eq!(parse_timeout("86400000ms"), Some(MAX_TIMEOUT));
        assert_eq!(parse_timeout("1ms"), Some(Duration::from_millis(1)));
        for past in ["25h", "1441m", "86401s", "86400001ms"] {
            assert_eq!(parse_timeout(past), None, "{past}");
        }
        for bad in ["", "0s", "05s", "1", "1d", "1.5s", "-1s"] {
            assert_eq!(parse_timeout(bad), None, "{bad}");
        }
    }
}
