//! Run Checkpoint (docs/src/runs.md, Checkpoints), served for a root Run: each accepted
//! `save` durably replaces the Run's aggregate before its receipt is sent.
//! It is served from its own control capacity (one save in flight per
//! Run), never from the exclusive effect slot, and starts no process.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use flow::json::Value;
use jig_provider_api::CallError;
use jig_provider_builtin::checkpoint as policy;

use super::BuiltinCall;
use crate::exec::peer::BoxFuture;
use crate::state::{Aggregate, Checkpoints};

/// How long the end of a Run waits for a save still writing.
pub(crate) const SAVE_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// What a root Run lends Run Checkpoint: its Run ID and identity (method
/// and configuration, input digest, attachment identities), where its
/// aggregate is kept, and the latest accepted one. Children have none.
pub struct RootRun {
    pub id: String,
    pub identity: Value,
    checkpoints: Checkpoints,
    latest: Mutex<Option<Aggregate>>,
    /// The control capacity: at most one save in flight.
    saving: AtomicBool,
}

impl RootRun {
    /// A root Run's checkpoint view, bound to what its checkpoints name
    /// (docs/src/runs.md, Checkpoints): this Run, what ran under which
    /// admitted configuration, and its input identity.
    pub fn bound(
        id: String,
        method: &Value,
        configuration: &Value,
        input: &Value,
        checkpoints: Checkpoints,
    ) -> RootRun {
        let identity = serde_json::json!({
            "runId": id,
            "method": method,
            "configuration": configuration,
            "input": input,
        });
        RootRun::new(id, identity, checkpoints)
    }

    pub fn new(id: String, identity: Value, checkpoints: Checkpoints) -> RootRun {
        RootRun {
            id,
            identity,
            checkpoints,
            latest: Mutex::new(None),
            saving: AtomicBool::new(false),
        }
    }

    /// The latest accepted aggregate, if any save was accepted. Called
    /// once the Run is fenced: a save whose call was dropped with the Run
    /// may still be finishing its durable write, so this waits for it (at
    /// most [`SAVE_SETTLE`]) and the packet never lags the durable state.
    pub fn latest(&self) -> Option<Aggregate> {
        let until = std::time::Instant::now() + SAVE_SETTLE;
        while self.saving.load(Ordering::SeqCst) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn last_sequence(&self) -> u64 {
        self.latest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map_or(0, |a| a.save.sequence)
    }
}

/// The one save in flight, released on drop (also when the call's future
/// is dropped because the Run was cancelled).
struct InFlight(Arc<RootRun>);

impl InFlight {
    fn take(run: &Arc<RootRun>) -> Result<InFlight, CallError> {
        if run.saving.swap(true, Ordering::SeqCst) {
            return Err(CallError::operational(
                "RESOURCE_EXHAUSTED",
                "another Run Checkpoint save is in flight; a Run has one at a time",
            ));
        }
        Ok(InFlight(run.clone()))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.saving.store(false, Ordering::SeqCst);
    }
}

pub(super) fn call(call: BuiltinCall) -> BoxFuture<Result<Value, CallError>> {
    Box::pin(async move {
        let Some(run) = call.services.run.clone() else {
            return Err(CallError::operational(
                "UNAVAILABLE",
                "Run Checkpoint serves only a root Run delivered with --out",
            ));
        };
        if call.method != policy::METHOD {
            return Err(CallError::operational(
                "INVALID_INPUT",
                format!("Run Checkpoint has no method {:?}", call.method),
            ));
        }
        let flight = InFlight::take(&run)?;
        let save = policy::check(
            &call.input,
            run.last_sequence(),
            crate::files::check_relative,
        )
        .map_err(|r| CallError::operational(r.code, r.message))?;
        crate::files::check_entries(save.files.keys().map(String::as_str))
            .map_err(|m| CallError::operational("INVALID_INPUT", m))?;
        let digest = policy::digest(&run.identity, &save);
        let receipt = policy::receipt(&save, &digest);
        let aggregate = Aggregate {
            identity: run.identity.clone(),
            save,
            digest,
        };
        // Durable before the receipt: the write runs to its end even if
        // this call is dropped meanwhile, and the in-flight mark is held
        // until then.
        let written = tokio::task::spawn_blocking(move || {
            let written = flight.0.checkpoints.save(&flight.0.id, &aggregate);
            if written.is_ok() {
                *flight.0.latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(aggregate);
            }
            drop(flight);
            written
        })
        .await;
        match written {
            Ok(Ok(())) => Ok(receipt),
            Ok(Err(e)) => Err(CallError::operational(
                "EXECUTION_FAILED",
                format!("the checkpoint could not be kept: {e}"),
            )),
            Err(_) => Err(CallError::operational(
                "EXECUTION_FAILED",
                "the checkpoint write did not finish",
            )),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_save_in_flight_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let run = Arc::new(RootRun::new(
            "run-1".into(),
            serde_json::json!({}),
            Checkpoints::new(dir.path().to_path_buf()),
        ));
        let first = InFlight::take(&run).unwrap();
        let second = InFlight::take(&run).err().unwrap();
        match second {
            CallError::Operational { code, .. } => assert_eq!(code, "RESOURCE_EXHAUSTED"),
            other => panic!("{other:?}"),
        }
        drop(first);
        assert!(InFlight::take(&run).is_ok(), "released on drop");
    }
}
