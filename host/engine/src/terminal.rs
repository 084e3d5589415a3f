//! A root Run's terminal as one typed value: what `jig run` prints, what a
//! Run's record keeps, what `jig serve` answers, what the queue settles
//! and what the `--server` client reads. Every door forms its terminal
//! here; its JSON (canonical, absent members left out) is the bytes the
//! suite and the reference's CLI texts pin.

use flow::json::Value;
use serde::{Deserialize, Deserializer, Serialize};

use crate::code::{FailureCode, HostCode};

/// A component's captured stderr, as a terminal reports it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Diagnostics {
    pub stderr: String,
    pub stderr_bytes: u64,
    pub stderr_truncated: bool,
}

/// Where a Run stands, as its terminal (or a pending record) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Recorded, not settled (what a stored or replayed Run shows).
    Pending,
    Succeeded,
    Failed,
    /// Its coordinator ended before it settled (seed 002 §8).
    Lost,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Lost => "lost",
        }
    }
}

/// Where a packet's Flow files came from (seed 002 §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The writable attachment of a Run that succeeded.
    Final,
    /// The latest accepted Run Checkpoint of a Run that did not.
    Checkpoint,
    /// No files: the bare record.
    None,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Final => "final",
            Source::Checkpoint => "checkpoint",
            Source::None => "none",
        }
    }
}

/// A file Run's packet delivery, as its terminal reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Delivery {
    /// Published at `destination` (a directory, the packet store).
    Written { destination: String, source: Source },
    /// Not published; `code` says why (`JIG_DELIVERY_FAILED`, …).
    Failed { destination: String, code: String },
}

/// A root Run's terminal. The members a door adds (the Run ID, and for a
/// Run with a packet what ran, its input identity, checkpoint and
/// delivery) are set by the `with_…` steps; nothing else writes one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Terminal {
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub details: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics: Option<Diagnostics>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What ran (a file Run with a packet).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub method: Option<Value>,
    /// The input identity a packet names.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub input: Option<Value>,
    /// The delivered checkpoint's record, `null` when none was.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub checkpoint: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
}

/// A member that is present is `Some`, even when it is `null`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Terminal {
    fn bare(status: Status) -> Terminal {
        Terminal {
            status,
            outcome: None,
            output: None,
            code: None,
            message: None,
            details: None,
            diagnostics: None,
            run_id: None,
            method: None,
            input: None,
            checkpoint: None,
            delivery: None,
        }
    }

    /// An execution that succeeded.
    pub fn succeeded(outcome: String, output: Value, diagnostics: Diagnostics) -> Terminal {
        Terminal {
            outcome: Some(outcome),
            output: Some(output),
            diagnostics: Some(diagnostics),
            ..Terminal::bare(Status::Succeeded)
        }
    }

    /// An execution that failed with `code`.
    pub fn failure(
        code: FailureCode,
        message: String,
        details: Option<Value>,
        diagnostics: Diagnostics,
    ) -> Terminal {
        Terminal {
            code: Some(code.as_str().to_string()),
            message: Some(message),
            details,
            diagnostics: Some(diagnostics),
            ..Terminal::bare(Status::Failed)
        }
    }

    /// A Run that failed before anything of it ran.
    pub fn failed(code: impl Into<FailureCode>, message: impl Into<String>) -> Terminal {
        Terminal::failure(code.into(), message.into(), None, Diagnostics::default())
    }

    /// A Run whose coordinator ended before it settled (seed 002 §8):
    /// `COORDINATOR_LOST`, with why.
    pub fn lost(message: impl Into<String>) -> Terminal {
        Terminal {
            code: Some(HostCode::CoordinatorLost.as_str().to_string()),
            message: Some(message.into()),
            ..Terminal::bare(Status::Lost)
        }
    }

    /// What a recorded Run that has not settled shows.
    pub fn pending(run_id: &str) -> Terminal {
        Terminal::bare(Status::Pending).with_run_id(run_id)
    }

    pub fn with_run_id(mut self, run_id: &str) -> Terminal {
        self.run_id = Some(run_id.to_string());
        self
    }

    /// A file Run's packet: what ran, its input identity, the delivered
    /// checkpoint's record (`null`: none) and the delivery.
    pub fn with_packet(
        mut self,
        method: &Value,
        input: &Value,
        checkpoint: &Value,
        delivery: Delivery,
    ) -> Terminal {
        self.method = Some(method.clone());
        self.input = Some(input.clone());
        self.checkpoint = Some(checkpoint.clone());
        self.delivery = Some(delivery);
        self
    }

    /// The terminal as JSON (as recorded, answered and printed).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a terminal is plain JSON")
    }

    /// Read a terminal from JSON (a record, an answer); `None` when it is
    /// not one.
    pub fn from_value(value: &Value) -> Option<Terminal> {
        Terminal::deserialize(value).ok()
    }

    /// The status a terminal's JSON names; `lost` when it names none (a
    /// terminal that cannot be read is not trusted to have succeeded).
    pub fn status_of(value: &Value) -> Status {
        value
            .get("status")
            .and_then(|s| Status::deserialize(s).ok())
            .unwrap_or(Status::Lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_execution_terminal_is_the_json_every_door_printed() {
        let success = Terminal::succeeded("ok".into(), Value::Null, Diagnostics::default());
        assert_eq!(
            success.with_run_id("r").to_value(),
            json!({"status": "succeeded", "outcome": "ok", "output": null, "runId": "r",
                   "diagnostics": {"stderr": "", "stderrBytes": 0, "stderrTruncated": false}})
        );
        assert_eq!(
            Terminal::failed(flow::wire::ErrorCode::Cancelled, "stop").to_value(),
            json!({"status": "failed", "code": "CANCELLED", "message": "stop",
                   "diagnostics": {"stderr": "", "stderrBytes": 0, "stderrTruncated": false}})
        );
    }

    #[test]
    fn a_packet_terminal_keeps_a_null_checkpoint_and_reads_back_unchanged() {
        let terminal = Terminal::lost("gone").with_run_id("r").with_packet(
            &json!({"kind": "flow"}),
            &json!("sha256:1"),
            &Value::Null,
            Delivery::Failed {
                destination: "/out".into(),
                code: "JIG_DELIVERY_FAILED".into(),
            },
        );
        let value = terminal.to_value();
        assert_eq!(value["checkpoint"], Value::Null);
        assert!(value.as_object().unwrap().contains_key("checkpoint"));
        assert_eq!(
            value["delivery"],
            json!({"status": "failed", "destination": "/out", "code": "JIG_DELIVERY_FAILED"})
        );
        assert_eq!(Terminal::from_value(&value), Some(terminal));
        let written = Delivery::Written {
            destination: "/out".into(),
            source: Source::Checkpoint,
        };
        assert_eq!(
            serde_json::to_value(written).unwrap(),
            json!({"status": "written", "destination": "/out", "source": "checkpoint"})
        );
    }

    #[test]
    fn a_status_that_cannot_be_read_is_lost() {
        assert_eq!(
            Terminal::status_of(&json!({"status": "failed"})),
            Status::Failed
        );
        assert_eq!(Terminal::status_of(&json!({"status": "odd"})), Status::Lost);
        assert_eq!(Terminal::status_of(&json!({})), Status::Lost);
        assert_eq!(
            Terminal::pending("r").to_value(),
            json!({"status": "pending", "runId": "r"})
        );
    }
}
