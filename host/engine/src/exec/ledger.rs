//! The operation ledger of one root Run (Run/1 §6): the same `operationId`
//! with the same canonical params joins or replays; different params conflict
//! before dispatch; work abandoned after dispatch is `UNCERTAIN`, never replayed.

use std::collections::HashMap;
use std::future::Future;

use flow::json::Value;
use flow::wire::{ErrorCode, OperationalError};
use tokio::sync::watch;

type Outcome = Option<Result<Value, OperationalError>>;

struct Operation {
    canonical: Vec<u8>,
    result: watch::Receiver<Outcome>,
    /// The work, until it is stopped.
    task: Option<tokio::task::JoinHandle<()>>,
    sender: std::sync::Arc<watch::Sender<Outcome>>,
    waiters: usize,
}

#[derive(Default)]
pub(crate) struct OperationLedger {
    operations: HashMap<String, Operation>,
    /// request id -> operation id
    waiters: HashMap<String, String>,
}

pub enum Join {
    Waiter(watch::Receiver<Outcome>),
    Conflict,
}

impl OperationLedger {
    /// Join `operation_id` as request `request_id`, dispatching `work` only if
    /// the operation is new.
    pub fn join(
        &mut self,
        operation_id: &str,
        key: &Value,
        request_id: &str,
        work: impl Future<Output = Result<Value, OperationalError>> + Send + 'static,
    ) -> Join {
        let canonical = flow::json::canonical(key);
        if let Some(op) = self.operations.get_mut(operation_id) {
            if op.canonical != canonical {
                return Join::Conflict;
            }
            op.waiters += 1;
            self.waiters
                .insert(request_id.to_string(), operation_id.to_string());
            return Join::Waiter(op.result.clone());
        }
        let (sender, result) = watch::channel(None);
        let sender = std::sync::Arc::new(sender);
        let publish = sender.clone();
        let task = tokio::spawn(async move {
            let outcome = work.await;
            publish.send_replace(Some(outcome));
        });
        self.operations.insert(
            operation_id.to_string(),
            Operation {
                canonical,
                result: result.clone(),
                task: Some(task),
                sender,
                waiters: 1,
            },
        );
        self.waiters
            .insert(request_id.to_string(), operation_id.to_string());
        Join::Waiter(result)
    }

    pub async fn wait(mut receiver: watch::Receiver<Outcome>) -> Result<Value, OperationalError> {
        loop {
            if let Some(outcome) = receiver.borrow_and_update().clone() {
                return outcome;
            }
            if receiver.changed().await.is_err() {
                return Err(uncertain());
            }
        }
    }

    /// A waiter left (its request was cancelled). Returns its operation.
    pub fn leave(&mut self, request_id: &str) -> Option<String> {
        let op_id = self.waiters.remove(request_id)?;
        if let Some(op) = self.operations.get_mut(&op_id) {
            op.waiters = op.waiters.saturating_sub(1);
        }
        Some(op_id)
    }

    /// Stop the underlying work once nobody waits for it. If it had not
    /// finished, its outcome becomes `UNCERTAIN` for any later replay.
    /// Returns the stopped work: it ends (its future dropped, what it held
    /// released) once the handle resolves.
    pub(crate) fn abort_if_unwatched(
        &mut self,
        op_id: &str,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let op = self.operations.get_mut(op_id)?;
        if op.waiters != 0 || op.result.borrow().is_some() {
            return None;
        }
        let task = op.task.take()?;
        task.abort();
        op.sender.send_replace(Some(Err(uncertain())));
        Some(task)
    }

    pub(crate) fn abort_all(&mut self) {
        for op in self.operations.values() {
            if op.result.borrow().is_none() {
                if let Some(task) = &op.task {
                    task.abort();
                }
                op.sender.send_replace(Some(Err(uncertain())));
            }
        }
    }
}

fn uncertain() -> OperationalError {
    OperationalError::new(
        ErrorCode::Uncertain,
        "the operation may have been dispatched and has no provable result",
    )
}
