//! A typed `save` for the Jig Run Checkpoint capability
//! (`https://jig.md/contracts/run-checkpoint` 1.0.0): an ordinary
//! capability call with the contract's input and receipt as Rust types.
//! The host decides what it accepts (sequence, sizes, paths); this only
//! shapes the call.

use std::collections::BTreeMap;

use flow::json::Value;
use flow::wire::ErrorCode;
use serde_json::json;

use crate::context::{CapabilityCall, RunContext};
use crate::error::{CallError, OperationError};

/// One save: the sequence (1, 2, 3, … at most 16), evidence of the
/// progress made, and the files (relative path → text) delivered if the
/// Run does not succeed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckpointSave {
    pub sequence: u64,
    pub evidence: Value,
    pub files: BTreeMap<String, String>,
}

/// The receipt of an accepted save.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointReceipt {
    pub sequence: u64,
    /// `sha256:<64 hex>` over the Run's identity and the saved aggregate.
    pub digest: String,
}

impl RunContext {
    /// Save `save` through the Run Checkpoint capability bound to `slot`,
    /// as the operation `operation_id`. Await it: dropping the future
    /// abandons the call like dropping any unsettled [`crate::Call`].
    ///
    /// # Example
    ///
    /// ```
    /// use flow_sdk::testing::{reply, root, run_scripted};
    /// use flow_sdk::{CheckpointSave, RunResult};
    /// use serde_json::json;
    ///
    /// let receipt = json!({"value": {"sequence": 1, "digest": format!("sha256:{}", "0".repeat(64))}});
    /// let t = run_scripted(&[root(json!(null)), reply("component:1", receipt)], |ctx| async move {
    ///     let save = CheckpointSave {
    ///         sequence: 1,
    ///         evidence: json!({"step": 1}),
    ///         files: [("notes.md".to_string(), "half way\n".to_string())].into(),
    ///     };
    ///     let receipt = ctx.save_checkpoint("save-1", "progress", save).await?;
    ///     Ok::<_, flow_sdk::CallError>(RunResult::done(json!(receipt.sequence)))
    /// });
    /// assert_eq!(t.requests()[0]["params"]["method"], "save");
    /// assert_eq!(t.requests()[0]["params"]["input"]["files"], json!({"notes.md": "half way\n"}));
    /// assert_eq!(t.root_result(), Some(&json!({"outcome": "done", "output": 1})));
    /// ```
    pub async fn save_checkpoint(
        &self,
        operation_id: &str,
        slot: &str,
        save: CheckpointSave,
    ) -> Result<CheckpointReceipt, CallError> {
        let value = self
            .call_capability(CapabilityCall {
                operation_id: operation_id.into(),
                slot: slot.into(),
                method: "save".into(),
                input: json!({
                    "sequence": save.sequence,
                    "evidence": save.evidence,
                    "files": save.files,
                }),
                ..Default::default()
            })
            .await?;
        let sequence = value.get("sequence").and_then(Value::as_u64);
        let digest = value.get("digest").and_then(Value::as_str);
        match (sequence, digest) {
            (Some(sequence), Some(digest)) => Ok(CheckpointReceipt {
                sequence,
                digest: digest.to_string(),
            }),
            _ => Err(CallError::Operation(OperationError::new(
                ErrorCode::InvalidResult,
                "the Run Checkpoint receipt is not {sequence, digest}",
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{reply, root, run_scripted};
    use flow::wire::RunResult;

    #[test]
    fn a_receipt_that_is_not_sequence_and_digest_is_an_invalid_result() {
        let t = run_scripted(
            &[
                root(json!(null)),
                reply("component:1", json!({"value": {"sequence": 1}})),
            ],
            |ctx| async move {
                let save = CheckpointSave {
                    sequence: 1,
                    ..Default::default()
                };
                let receipt = ctx.save_checkpoint("save-1", "progress", save).await;
                match receipt {
                    Err(CallError::Operation(e)) => {
                        Ok::<_, CallError>(RunResult::done(json!(e.code.as_str())))
                    }
                    other => Ok(RunResult::done(json!(format!("{other:?}")))),
                }
            },
        );
        assert_eq!(
            t.root_result(),
            Some(&json!({"outcome": "done", "output": "INVALID_RESULT"}))
        );
        assert_eq!(
            t.requests()[0]["params"]["input"],
            json!({"sequence": 1, "evidence": null, "files": {}})
        );
    }
}
