//! The Run lifecycle a daemon logs: each Run's events (`accepted`,
//! `claimed`, `dispatched`, `settled`) inside a `run` span that carries its
//! `run_id`, as `tracing` events. Where they go (JSON lines, a terminal's
//! text, the level) is the binary's choice; this crate never installs a
//! subscriber, so a library user or a test without one sees nothing.

use serde_json::Value;
use tracing::Span;

/// The span every event of Run `run_id` is logged in.
pub(crate) fn span(run_id: &str, project: &str) -> Span {
    tracing::info_span!("run", run_id = %run_id, project = %project)
}

/// Recorded: a local Run waits for a slot; a queued one for a worker.
pub(crate) fn accepted(target: &str, queued: bool) {
    tracing::info!(run_target = %target, queued, "accepted");
}

/// Claimed by this worker (`epoch` fences its writes).
pub(crate) fn claimed(worker: &str, epoch: i64) {
    tracing::info!(worker = %worker, epoch, "claimed");
}

/// Handed to the conductor: from here on it is executed, once.
pub(crate) fn dispatched() {
    tracing::info!("dispatched");
}

/// Its terminal written: the status and, as the terminal has them, the
/// outcome of a success or the code of a failure.
pub(crate) fn settled(terminal: &Value) {
    let text = |key: &str| terminal.get(key).and_then(Value::as_str);
    let status = text("status").unwrap_or("lost");
    match (text("outcome"), text("code")) {
        (Some(outcome), _) => tracing::info!(status = %status, outcome = %outcome, "settled"),
        (None, Some(code)) => tracing::info!(status = %status, code = %code, "settled"),
        (None, None) => tracing::info!(status = %status, "settled"),
    }
}
