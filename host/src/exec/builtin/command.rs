//! Project Command (HOST-FACTS §2, seed 003), served for a Run: one
//! reviewed command of the calling Binding runs the installed Bun against
//! the candidate `files` in a separate keyless envelope (its own cgroup at
//! the command ceilings, no network, no credential, no PATH), while the
//! host collects its output outside it. The envelope, its files and its
//! budget share are released on every ending: by the code below when the
//! call settles, by the Drop guards when the call's future is dropped
//! (the component cancelled it or the Run ended).

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow::json::Value;
use jig_provider_api::CallError;
use jig_provider_builtin::command::{self as policy, Action, Entry, Evidence, StopReason, Tail};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::BuiltinCall;
use crate::exec::peer::BoxFuture;
use crate::exec::{EffectSlot, InvocationServices};
use crate::plan::Recipe;
use crate::sandbox::{Launch, Limits};

/// After the envelope is fenced every writer of its pipes is gone; the
/// readers get this long to hand over what was still buffered.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

pub(super) fn call(call: BuiltinCall) -> BoxFuture<Result<Value, CallError>> {
    Box::pin(run(call))
}

fn failed(message: impl Into<String>) -> CallError {
    CallError::operational("EXECUTION_FAILED", message)
}

async fn run(call: BuiltinCall) -> Result<Value, CallError> {
    let services = &call.services;
    let entry = policy::entry(services.resolved.commands.as_ref(), &call.input)?;
    if !entry.env.is_empty() {
        return Err(CallError::operational(
            "UNAVAILABLE",
            format!(
                "command {:?} names a secret; credentialed commands are not served by this build",
                entry.name
            ),
        ));
    }
    let request = policy::request(&entry, &call.input)?;
    let bun = reviewed_bun(services)?;
    // Refused before anything starts; held until the envelope is gone.
    let _effect = EffectSlot::take(&services.activity)?;
    let _reservation = services
        .executor
        .budget
        .reserve_limits(Limits::COMMAND)
        .map_err(|e| CallError::operational("RESOURCE_EXHAUSTED", e.to_string()))?;
    let dir = tempfile::Builder::new()
        .prefix("command-")
        .tempdir_in(&services.executor.work_root)
        .map_err(|e| failed(format!("cannot prepare the command: {e}")))?;
    let work = dir.path().join("work");
    let empty = dir.path().join("package");
    materialise(&work, &request.files)
        .and_then(|()| std::fs::create_dir(&empty))
        .map_err(|e| failed(format!("cannot materialise the candidate: {e}")))?;

    let left = Duration::from_millis(
        call.ctx
            .deadline_unix_ms
            .saturating_sub(crate::state::now_unix_ms()),
    );
    // The caller's deadline cuts the command's own timeout (seed 003).
    let (limit, callers_deadline) = if left <= entry.timeout {
        (left, true)
    } else {
        (entry.timeout, false)
    };
    let launch = Launch {
        program: bun,
        args: bun_arguments(&entry, &request.args),
        // No PATH, no credential, nothing of the host's environment; HOME
        // and TMPDIR are the envelope's private /tmp.
        env: vec![
            ("HOME".into(), "/tmp".into()),
            ("TMPDIR".into(), "/tmp".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("NO_COLOR".into(), "1".into()),
        ],
        cwd: work.clone(),
        package: empty,
        scratch: work,
        read_only: Vec::new(),
        attachments: Vec::new(),
        limits: Limits::COMMAND,
        network: false,
    };
    let mut contained = services
        .executor
        .sandbox
        .spawn(&launch)
        .map_err(|e| failed(format!("cannot start the command: {e}")))?;
    let stdout = collect(contained.child.stdout.take(), entry.tail);
    let stderr = collect(contained.child.stderr.take(), entry.tail);
    if let Some(mut stdin) = contained.child.stdin.take() {
        let bytes = request.stdin.clone().into_bytes();
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
    let stdout = drained(stdout).await;
    let stderr = drained(stderr).await;
    dir.close()
        .map_err(|e| failed(format!("the command's files could not be removed: {e}")))?;
    let value = policy::result(
        &entry,
        &request,
        Evidence {
            stdout,
            stderr,
            exit_code,
            signal,
            stop,
        },
    );
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

/// The Bun the review pinned for this package's command slot, if this
/// host still has exactly those bytes.
fn reviewed_bun(services: &InvocationServices) -> Result<std::path::PathBuf, CallError> {
    let recipe = services
        .resolved
        .providers
        .as_object()
        .into_iter()
        .flat_map(|pins| pins.values())
        .find(|pin| crate::providers::builtin_pin(pin) == Some("project-command"))
        .and_then(|pin| Recipe::from_value(&pin["bun"]))
        .ok_or_else(|| {
            CallError::operational("UNAVAILABLE", "no Bun was reviewed for Project Command")
        })?;
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
    std::fs::create_dir(root)?;
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
