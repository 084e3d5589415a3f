//! Project Command (docs/src/commands.md, seed 003), served for a Run: one
//! reviewed command of the calling Binding runs the installed Bun against
//! the candidate `files` in a separate keyless envelope (its own cgroup at
//! the command ceilings, no network, no credential, no PATH), while the
//! host collects its output outside it. The envelope, its files and its
//! budget share are released on every ending: by the code below when the
//! call settles, by the Drop guards when the call's future is dropped
//! (the component cancelled it or the Run ended).

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow::json::Value;
use jig_provider_api::CallError;
use jig_provider_builtin::command::{
    self as policy, Action, Entry, Evidence, SecretForm, StopReason, Tail,
};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::BuiltinCall;
use crate::exec::invocation::{EffectSlot, InvocationServices};
use crate::exec::peer::BoxFuture;
use crate::plan::Recipe;
use jig_sandbox::{Launch, Limits};

/// After the envelope is fenced every writer of its pipes is gone; the
/// readers get this long to hand over what was still buffered.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

pub(super) fn call(call: BuiltinCall) -> BoxFuture<Result<Value, CallError>> {
    Box::pin(run_candidate(call))
}

pub(super) fn call_credentialed(call: BuiltinCall) -> BoxFuture<Result<Value, CallError>> {
    Box::pin(run_credentialed(call))
}

fn failed(message: impl Into<String>) -> CallError {
    CallError::operational("EXECUTION_FAILED", message)
}

fn unavailable(message: impl Into<String>) -> CallError {
    CallError::operational("UNAVAILABLE", message)
}

/// The command's files, released when dropped: `work` is the working
/// directory, `package` the empty tree the envelope shows read-only.
fn effect_dir(services: &InvocationServices) -> Result<tempfile::TempDir, CallError> {
    let dir = tempfile::Builder::new()
        .prefix("command-")
        .tempdir_in(&services.executor.work_root)
        .map_err(|e| failed(format!("cannot prepare the command: {e}")))?;
    std::fs::create_dir(dir.path().join("package"))
        .and_then(|()| std::fs::create_dir(dir.path().join("work")))
        .map_err(|e| failed(format!("cannot prepare the command: {e}")))?;
    Ok(dir)
}

/// A candidate command (contract 1.0.0): the Flow's `files`, no secret.
async fn run_candidate(call: BuiltinCall) -> Result<Value, CallError> {
    let services = &call.services;
    let entry = policy::entry(services.resolved.commands.as_ref(), &call.input)?;
    policy::candidate_entry(&entry)?;
    let request = policy::request(&entry, &call.input)?;
    let bun = reviewed_bun(services, "project-command")?;
    // Refused before anything starts; held until the envelope is gone.
    let _effect = EffectSlot::take(&services.activity)?;
    let _reservation = reserve(services)?;
    let dir = effect_dir(services)?;
    materialise(&dir.path().join("work"), &request.files)
        .map_err(|e| failed(format!("cannot materialise the candidate: {e}")))?;
    let grant = Grant {
        env: Vec::new(),
        read_only: Vec::new(),
        network: false,
        secrets: Vec::new(),
    };
    let executed = execute(
        &call,
        &entry,
        &request.args,
        &request.stdin,
        dir,
        bun,
        grant,
    )
    .await?;
    let value = policy::result(&entry, &request, executed.evidence);
    settle(&entry, executed.stop, executed.callers_deadline, value)
}

/// A credentialed command (our contract): one commit of the project's
/// repository, read-only from the project's side, with the secrets its
/// entry names and the network; never the Flow's files.
async fn run_credentialed(call: BuiltinCall) -> Result<Value, CallError> {
    let services = &call.services;
    let entry = policy::entry(services.resolved.commands.as_ref(), &call.input)?;
    let credentialed = policy::credentialed_request(&entry, &call.input)?;
    let request = credentialed.request;
    let bun = reviewed_bun(services, "project-command-credentialed")?;
    let git = reviewed_git(services)?;
    let repository = services
        .executor
        .repository
        .clone()
        .ok_or_else(|| unavailable("this host reads no project repository"))?;
    let mut values = Vec::new();
    for (var, (name, form)) in &entry.env {
        let path = repository.secrets.get(name).ok_or_else(|| {
            unavailable(format!(
                "secret {name:?} is not mapped in the host configuration ([secrets])"
            ))
        })?;
        let value = read_secret(path)
            .map_err(|e| unavailable(format!("secret {name:?} cannot be read: {e}")))?;
        values.push((var.clone(), *form, value));
    }
    let _effect = EffectSlot::take(&services.activity)?;
    let _reservation = reserve(services)?;
    let dir = effect_dir(services)?;
    let work = dir.path().join("work");
    let git = Git {
        program: git,
        root: repository.root.clone(),
    };
    let commit = git.commit(credentialed.sha.as_deref()).await?;
    git.checkout(&commit, &work).await?;
    let entries = match &entry.action {
        Action::Run(path) => vec![path.clone()],
        Action::Test(paths) => paths.clone(),
    };
    if let Some(missing) = entries.iter().find(|p| !work.join(p).is_file()) {
        return Err(CallError::operational(
            "INVALID_INPUT",
            format!(
                "command {:?} runs {missing:?}, which commit {commit} does not contain",
                entry.name
            ),
        ));
    }
    let secrets_dir = dir.path().join("secrets");
    std::fs::create_dir(&secrets_dir)
        .map_err(|e| failed(format!("cannot prepare the secrets: {e}")))?;
    let mut grant = Grant {
        env: Vec::new(),
        read_only: Vec::new(),
        network: true,
        secrets: Vec::new(),
    };
    for (var, form, value) in values {
        match form {
            SecretForm::Value => grant.env.push((var, value.clone())),
            SecretForm::Path => {
                let file = secrets_dir.join(&var);
                write_private(&file, value.as_bytes())
                    .map_err(|e| failed(format!("cannot prepare the secrets: {e}")))?;
                grant.env.push((var, file.to_string_lossy().into_owned()));
            }
        }
        grant.secrets.push(value);
    }
    grant.read_only.push(secrets_dir);
    let executed = execute(
        &call,
        &entry,
        &request.args,
        &request.stdin,
        dir,
        bun,
        grant,
    )
    .await?;
    let value = policy::credentialed_result(&entry, &request, &commit, executed.evidence);
    settle(&entry, executed.stop, executed.callers_deadline, value)
}

/// Most bytes of one secret file.
const MAX_SECRET_BYTES: u64 = 64 * 1024;

fn read_secret(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    if bytes.len() as u64 > MAX_SECRET_BYTES || bytes.contains(&0) {
        return Err(std::io::Error::other(format!(
            "a secret is at most {MAX_SECRET_BYTES} bytes of text without NUL"
        )));
    }
    String::from_utf8(bytes).map_err(|_| std::io::Error::other("a secret must be UTF-8 text"))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(path)?
        .write_all(bytes)
}

fn reserve(services: &InvocationServices) -> Result<jig_sandbox::Reservation, CallError> {
    services
        .executor
        .budget
        .reserve_limits(Limits::COMMAND)
        .map_err(|e| CallError::operational(e.code(), e.to_string()))
}

/// What the envelope grants beyond the working directory.
struct Grant {
    env: Vec<(String, String)>,
    read_only: Vec<std::path::PathBuf>,
    network: bool,
    /// Values redacted from the collected output.
    secrets: Vec<String>,
}

struct Executed {
    evidence: Evidence,
    /// The caller's deadline (not the command's own timeout) ended it.
    callers_deadline: bool,
    stop: StopReason,
}

/// Run the entry in its own envelope over `dir/work`, collect its output,
/// fence and remove everything, and return the evidence.
async fn execute(
    call: &BuiltinCall,
    entry: &Entry,
    args: &[String],
    stdin_text: &str,
    dir: tempfile::TempDir,
    bun: std::path::PathBuf,
    grant: Grant,
) -> Result<Executed, CallError> {
    let services = &call.services;
    let work = dir.path().join("work");
    let left = Duration::from_millis(
        call.ctx
            .deadline_unix_ms
            .saturating_sub(jig_provider_api::dispatch::now_unix_ms()),
    );
    // The caller's deadline cuts the command's own timeout (seed 003).
    let (limit, callers_deadline) = if left <= entry.timeout {
        (left, true)
    } else {
        (entry.timeout, false)
    };
    // No PATH and nothing of the host's environment; HOME and TMPDIR are
    // the envelope's private /tmp.
    let mut env: Vec<(String, String)> = vec![
        ("HOME".into(), "/tmp".into()),
        ("TMPDIR".into(), "/tmp".into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("NO_COLOR".into(), "1".into()),
    ];
    env.extend(grant.env);
    let launch = Launch {
        program: bun,
        args: bun_arguments(entry, args),
        env,
        cwd: work.clone(),
        package: dir.path().join("package"),
        scratch: work,
        // The host writes the command's files there before it starts.
        scratch_bytes: None,
        read_only: grant.read_only,
        shown: Vec::new(),
        attachments: Vec::new(),
        limits: Limits::COMMAND,
        network: grant.network,
        view: None,
    };
    let mut contained = services
        .executor
        .sandbox
        .spawn(&launch)
        .map_err(|e| failed(format!("cannot start the command: {e}")))?;
    let stdout = collect(contained.child.stdout.take(), entry.tail);
    let stderr = collect(contained.child.stderr.take(), entry.tail);
    if let Some(mut stdin) = contained.child.stdin.take() {
        let bytes = stdin_text.as_bytes().to_vec();
        // A command that never reads its stdin must not hold the call.
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let mut cancel = services.cancel.clone();
    let ended = tokio::select! {
        status = contained.child.wait() => Ok(status),
        _ = tokio::time::sleep(limit) => Err(StopReason::Deadline),
        _ = cancelled(&mut cancel) => Err(StopReason::Cancelled),
    };
    let (stop, exit_code, signal) = match ended {
        Ok(Ok(status)) => (
            StopReason::Exited,
            status.code(),
            status.signal().map(signal_name),
        ),
        Ok(Err(e)) => return Err(failed(format!("cannot wait for the command: {e}"))),
        Err(stop) => {
            // SIGTERM to the whole tree, the kill grace, then SIGKILL.
            contained.terminate().await;
            (stop, None, Some("SIGKILL".to_string()))
        }
    };
    contained
        .cleanup()
        .map_err(|e| failed(format!("the command's processes could not be fenced: {e}")))?;
    drop(contained);
    let mut stdout = drained(stdout).await;
    let mut stderr = drained(stderr).await;
    policy::redact(&mut stdout, &grant.secrets, entry.tail);
    policy::redact(&mut stderr, &grant.secrets, entry.tail);
    dir.close()
        .map_err(|e| failed(format!("the command's files could not be removed: {e}")))?;
    Ok(Executed {
        evidence: Evidence {
            stdout,
            stderr,
            exit_code,
            signal,
            stop,
        },
        callers_deadline,
        stop,
    })
}

/// The call's answer: evidence, or the operational error carrying it.
fn settle(
    entry: &Entry,
    stop: StopReason,
    callers_deadline: bool,
    value: Value,
) -> Result<Value, CallError> {
    match stop {
        StopReason::Exited => Ok(value),
        // The command's own timeout ended it: evidence, not a failure.
        StopReason::Deadline if !callers_deadline => Ok(value),
        StopReason::Deadline => Err(CallError::Operational {
            code: "DEADLINE_EXCEEDED".into(),
            message: format!("command {:?} reached the caller's deadline", entry.name),
            details: Some(json!({ "command": value })),
        }),
        StopReason::Cancelled => Err(CallError::Operational {
            code: "CANCELLED".into(),
            message: format!("command {:?} was cancelled with its Run", entry.name),
            details: Some(json!({ "command": value })),
        }),
    }
}

/// The git the review pinned for credentialed commands.
fn reviewed_git(services: &InvocationServices) -> Result<std::path::PathBuf, CallError> {
    pin(services, "project-command-credentialed")
        .and_then(|pin| {
            pin.get("git")
                .and_then(Value::as_str)
                .map(std::path::PathBuf::from)
        })
        .ok_or_else(|| unavailable("no git was reviewed for credentialed commands"))
}

fn pin<'a>(services: &'a InvocationServices, name: &str) -> Option<&'a Value> {
    services
        .resolved
        .providers
        .as_object()?
        .values()
        .find(|pin| crate::providers::builtin_pin(pin) == Some(name))
}

/// Most files and bytes of the commit a credentialed command runs on.
const MAX_COMMIT_FILES: usize = 4096;
const MAX_COMMIT_BYTES: usize = 64 * 1024 * 1024;

/// The project's repository, read with a fixed-path git that runs no hook,
/// reads neither the user's nor the system's configuration, and never
/// applies a filter (blobs are read raw with `cat-file`).
struct Git {
    program: std::path::PathBuf,
    root: std::path::PathBuf,
}

impl Git {
    async fn run(&self, args: &[&str]) -> Result<Vec<u8>, CallError> {
        let ceiling = self.root.parent().unwrap_or(Path::new("/"));
        let out = tokio::process::Command::new(&self.program)
            .arg("-C")
            .arg(&self.root)
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
            ])
            .args(args)
            .env_clear()
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CEILING_DIRECTORIES", ceiling)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("HOME", "/nonexistent")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .await
            .map_err(|e| unavailable(format!("cannot run git: {e}")))?;
        if !out.status.success() {
            return Err(unavailable(format!(
                "git {} failed in the project's repository",
                args.first().copied().unwrap_or_default()
            )));
        }
        Ok(out.stdout)
    }

    /// The full id of `HEAD` now, or of the pinned `sha` (which must name
    /// a commit of the repository).
    async fn commit(&self, sha: Option<&str>) -> Result<String, CallError> {
        let rev = format!("{}^{{commit}}", sha.unwrap_or("HEAD"));
        let out = self
            .run(&["rev-parse", "--verify", "--quiet", "--end-of-options", &rev])
            .await
            .map_err(|_| match sha {
                Some(sha) => CallError::operational(
                    "INVALID_INPUT",
                    format!("commit {sha} is not in the project's repository"),
                ),
                None => unavailable("the project's repository has no HEAD commit"),
            })?;
        let id = String::from_utf8_lossy(&out).trim().to_string();
        if !policy::full_commit_id(&id) {
            return Err(unavailable("git named no full commit id"));
        }
        Ok(id)
    }

    /// Write the tree of `commit` under `work` (regular files, executable
    /// bits, then symbolic links, so no file is written through a link;
    /// submodules are left out).
    async fn checkout(&self, commit: &str, work: &Path) -> Result<(), CallError> {
        let listing = self
            .run(&["ls-tree", "-r", "-z", "--full-tree", commit])
            .await?;
        let mut links = Vec::new();
        let mut count = 0usize;
        let mut total = 0usize;
        for record in listing.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let record = String::from_utf8_lossy(record);
            let Some((meta, path)) = record.split_once('\t') else {
                return Err(unavailable("git ls-tree output is malformed"));
            };
            let mut meta = meta.split(' ');
            let (Some(mode), Some(kind), Some(oid)) = (meta.next(), meta.next(), meta.next())
            else {
                return Err(unavailable("git ls-tree output is malformed"));
            };
            if kind != "blob" {
                continue;
            }
            if path.starts_with('/')
                || path
                    .split('/')
                    .any(|c| matches!(c, "" | "." | ".." | ".git"))
            {
                return Err(unavailable(format!(
                    "the commit holds an unsafe path {path:?}"
                )));
            }
            count += 1;
            if count > MAX_COMMIT_FILES {
                return Err(unavailable(format!(
                    "the commit holds more than {MAX_COMMIT_FILES} files"
                )));
            }
            let bytes = self.run(&["cat-file", "blob", oid]).await?;
            total += bytes.len();
            if total > MAX_COMMIT_BYTES {
                return Err(unavailable(format!(
                    "the commit holds more than {MAX_COMMIT_BYTES} bytes"
                )));
            }
            let target = work.join(path);
            if mode == "120000" {
                links.push((target, bytes));
                continue;
            }
            write_file(&target, &bytes, mode == "100755")
                .map_err(|e| failed(format!("cannot write {path:?}: {e}")))?;
        }
        for (target, bytes) in links {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| failed(format!("cannot write a link: {e}")))?;
            }
            let to = std::ffi::OsStr::from_bytes(&bytes);
            std::os::unix::fs::symlink(to, &target)
                .map_err(|e| failed(format!("cannot write a link: {e}")))?;
        }
        Ok(())
    }
}

fn write_file(target: &Path, bytes: &[u8], executable: bool) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if executable { 0o755 } else { 0o644 })
        .open(target)?
        .write_all(bytes)
}

/// The Bun the review pinned for this package's command slot, if this
/// host still has exactly those bytes.
fn reviewed_bun(
    services: &InvocationServices,
    name: &str,
) -> Result<std::path::PathBuf, CallError> {
    let recipe = pin(services, name)
        .and_then(|pin| Recipe::from_value(&pin["bun"]))
        .ok_or_else(|| unavailable("no Bun was reviewed for Project Command"))?;
    // The caller's own recipe was verified when it started: the same Bun
    // (path and digest) need not be read and hashed again per call.
    let caller = &services.resolved.recipe;
    let verified =
        caller.runtime == recipe.runtime && caller.runtime_digest == recipe.runtime_digest;
    if !verified {
        recipe.verify().map_err(|reason| CallError::Operational {
            code: "UNAVAILABLE".into(),
            message: format!(
                "the admitted execution environment changed ({reason}); run jig review"
            ),
            details: Some(json!({ "reason": "EXECUTION_ENVIRONMENT_CHANGED" })),
        })?;
    }
    recipe
        .runtime
        .ok_or_else(|| CallError::operational("UNAVAILABLE", "no Bun was reviewed"))
}

/// The real argv after `bun`: never installing, test paths as paths.
fn bun_arguments(entry: &Entry, args: &[String]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    match &entry.action {
        Action::Run(path) => {
            argv.push("--no-install".into());
            argv.push(format!("./{path}").into());
            argv.extend(args.iter().map(OsString::from));
        }
        Action::Test(paths) => {
            argv.push("test".into());
            argv.push("--no-install".into());
            argv.extend(paths.iter().map(|p| OsString::from(format!("./{p}"))));
        }
    }
    argv
}

/// Write the candidate under `root` (paths were checked: relative,
/// canonical, no collisions), refusing to follow or replace anything.
fn materialise(
    root: &Path,
    files: &std::collections::BTreeMap<String, String>,
) -> std::io::Result<()> {
    use std::io::Write;
    for (path, text) in files {
        let target = root.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&target)?
            .write_all(text.as_bytes())?;
    }
    Ok(())
}

type Collected = (Arc<Mutex<Option<Tail>>>, tokio::task::JoinHandle<()>);

/// Read one output stream into its tail, outside the command's processes.
fn collect<R: AsyncRead + Unpin + Send + 'static>(stream: Option<R>, tail: u64) -> Collected {
    let kept = Arc::new(Mutex::new(Some(Tail::new(tail))));
    let into = kept.clone();
    let task = tokio::spawn(async move {
        let Some(mut stream) = stream else { return };
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if let Some(tail) = into.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
                tail.push(&buf[..n]);
            }
        }
    });
    (kept, task)
}

/// The collected tail, once the reader is done (or [`DRAIN_WAIT`] passed).
async fn drained((kept, task): Collected) -> Value {
    if tokio::time::timeout(DRAIN_WAIT, task).await.is_err() {
        // Unreachable once the envelope is fenced; what was read stays.
    }
    let tail = kept.lock().unwrap_or_else(|e| e.into_inner()).take();
    tail.unwrap_or_else(|| Tail::new(0)).finish()
}

/// Resolves when the Run is cancelled (never, if it cannot be anymore).
async fn cancelled(cancel: &mut tokio::sync::watch::Receiver<bool>) {
    loop {
        if *cancel.borrow() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("SIG{signal}"))
}
