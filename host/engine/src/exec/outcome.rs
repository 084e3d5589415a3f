//! How a finished component's report, exit and stderr become its result or
//! its failure: the declared outcome and `result.schema.json` are checked
//! before anything counts as success.

use std::time::Duration;

use flow::json::Value;
use flow::package::Package;
use flow::wire::{ErrorCode, RunResult};
use serde_json::json;
use tokio::io::AsyncRead;
use tokio::io::AsyncReadExt;

use super::peer::PeerReport;
use super::{Diagnostics, Failure, EXIT_AFTER_EOF, EXIT_GRACE, MAX_STDERR_BYTES};

/// How the component process ended.
#[derive(Debug)]
pub(super) struct Exit {
    pub(super) code: Option<i32>,
    pub(super) killed: bool,
}

/// How long to wait for the component to exit on its own before killing
/// it: after a response, or after its stdout ended (the exit status then
/// decides between `EXECUTION_FAILED` and `CHANNEL_LOST`); not at all after a
/// deadline, a cancellation or a protocol violation.
pub(super) fn exit_wait(report: &PeerReport) -> Duration {
    if report.deadline || report.cancelled || report.violation.is_some() || report.drain_timed_out {
        Duration::ZERO
    } else if report.response.is_some() {
        EXIT_GRACE
    } else {
        EXIT_AFTER_EOF
    }
}

pub(super) async fn finish_guest(
    guest: tokio::task::JoinHandle<Result<i32, String>>,
    report: &PeerReport,
) -> Exit {
    if exit_wait(report).is_zero() {
        guest.abort();
        let _ = guest.await;
        return Exit {
            code: None,
            killed: true,
        };
    }
    let abort = guest.abort_handle();
    match tokio::time::timeout(exit_wait(report), guest).await {
        Ok(Ok(Ok(code))) => Exit {
            code: Some(code),
            killed: false,
        },
        Ok(Ok(Err(_))) | Ok(Err(_)) => Exit {
            code: Some(1),
            killed: false,
        },
        Err(_) => {
            abort.abort();
            Exit {
                code: None,
                killed: true,
            }
        }
    }
}

pub(super) async fn collect_stderr<R: AsyncRead + Unpin>(mut stderr: R) -> Diagnostics {
    let mut tail: Vec<u8> = Vec::new();
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > MAX_STDERR_BYTES {
                    tail.drain(..tail.len() - MAX_STDERR_BYTES);
                }
            }
        }
    }
    Diagnostics {
        stderr: String::from_utf8_lossy(&tail).into_owned(),
        stderr_bytes: total,
        stderr_truncated: total > tail.len() as u64,
    }
}

/// Run/1 §9: turn what the peer saw and how the process ended into the
/// request decision, or the failure that prevents acceptance.
pub(super) fn classify(report: &PeerReport, exit: &Exit) -> Result<Value, Failure> {
    if let Some(violation) = &report.violation {
        return Err(Failure::new(ErrorCode::ProtocolError, violation.clone()));
    }
    if report.deadline {
        return Err(Failure::new(
            ErrorCode::DeadlineExceeded,
            "the Run reached its deadline",
        ));
    }
    if report.cancelled {
        return Err(Failure::new(ErrorCode::Cancelled, "the Run was cancelled"));
    }
    let Some(response) = &report.response else {
        if let Some(code) = exit.code.filter(|c| *c != 0) {
            return Err(Failure::new(
                ErrorCode::ExecutionFailed,
                format!("the component exited with status {code} before responding"),
            ));
        }
        if exit.code.is_none() && !exit.killed {
            return Err(Failure::new(
                ErrorCode::ExecutionFailed,
                "the component was killed by a signal before responding",
            ));
        }
        return Err(Failure::new(
            ErrorCode::ChannelLost,
            report
                .lost
                .clone()
                .unwrap_or_else(|| "the component ended without a root response".into()),
        ));
    };
    if report.pending_at_response > 0 {
        return Err(Failure::new(
            ErrorCode::ProtocolError,
            "the component answered its root while its own requests were pending",
        ));
    }
    if exit.killed || report.drain_timed_out {
        return Err(Failure::new(
            ErrorCode::ExecutionFailed,
            "the component did not exit after responding and was killed",
        ));
    }
    if exit.code != Some(0) {
        return Err(Failure::new(
            ErrorCode::ExecutionFailed,
            match exit.code {
                Some(code) => format!("the component exited with status {code}"),
                None => "the component was killed by a signal".into(),
            },
        ));
    }
    match response {
        Ok(result) => Ok(result.clone()),
        Err(error) => match error.operational() {
            Some(op) => Err(Failure {
                code: op.code.into(),
                message: op.message,
                details: op.details,
                diagnostics: Diagnostics::default(),
            }),
            None => Err(Failure::new(
                ErrorCode::ProtocolError,
                format!(
                    "the component answered flow/run with JSON-RPC error {}: {}",
                    error.code, error.message
                ),
            )),
        },
    }
}

/// The result must be `{outcome, output}` with `done` or a declared outcome,
/// and valid against `result.schema.json`.
pub(super) fn check_result(package: &Package, result: &Value) -> Result<RunResult, Failure> {
    let run_result = RunResult::from_value(result).map_err(|e| {
        Failure::new(
            ErrorCode::InvalidResult,
            format!("the result is not a Run result: {}", e.0),
        )
    })?;
    if run_result.outcome != "done"
        && !package
            .metadata()
            .outcomes
            .contains_key(&run_result.outcome)
    {
        return Err(Failure::new(
            ErrorCode::InvalidResult,
            format!(
                "outcome {:?} is neither done nor declared in FLOW.md",
                run_result.outcome
            ),
        ));
    }
    if let Some(schema) = package.result_schema() {
        if let Err(invalid) = schema.validate(result) {
            return Err(Failure::new(
                ErrorCode::InvalidResult,
                format!("the result does not satisfy result.schema.json: {invalid}"),
            )
            .with_details(invalid_details(&invalid)));
        }
    }
    Ok(run_result)
}

pub(super) fn invalid_details(invalid: &flow::schema::Invalid) -> Value {
    match invalid {
        flow::schema::Invalid::Diagnostic(d) => json!({
            "instancePointer": d.instance_pointer,
            "schemaPointer": d.schema_pointer,
            "keyword": d.keyword,
            "message": d.message,
        }),
        flow::schema::Invalid::LimitExceeded => json!({ "code": "SCHEMA_LIMIT_EXCEEDED" }),
        flow::schema::Invalid::Json(e) => json!({ "message": e.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use flow::wire::{self, OperationalError, RpcError};

    use super::*;

    fn exited(code: i32) -> Exit {
        Exit {
            code: Some(code),
            killed: false,
        }
    }

    fn answered(response: Result<Value, RpcError>) -> PeerReport {
        PeerReport {
            response: Some(response),
            ..PeerReport::default()
        }
    }

    fn success() -> Result<Value, RpcError> {
        Ok(json!({"outcome": "done", "output": null}))
    }

    /// Run/1 §7: a component answers `flow/run` with a result or an
    /// operational error; a standard JSON-RPC error there is the
    /// component's protocol error, not its failure code.
    #[test]
    fn a_json_rpc_error_answering_flow_run_is_a_protocol_error() {
        for code in [
            wire::METHOD_NOT_FOUND,
            wire::INVALID_PARAMS,
            wire::PARSE_ERROR,
        ] {
            let report = answered(Err(RpcError::standard(code, "no")));
            let failure = classify(&report, &exited(0)).unwrap_err();
            assert_eq!(failure.code, ErrorCode::ProtocolError.into(), "{code}");
        }
        // The operational error keeps its own code.
        let operational = OperationalError::new(ErrorCode::InvalidInput, "bad input").to_rpc();
        let failure = classify(&answered(Err(operational)), &exited(0)).unwrap_err();
        assert_eq!(failure.code, ErrorCode::InvalidInput.into());
    }

    /// Run/1 §9: after its response the component must exit 0 on its own;
    /// one killed after it (it did not exit, or stdout did not drain in
    /// time) or exiting non-zero fails `EXECUTION_FAILED`, success or not.
    #[test]
    fn a_kill_or_a_drain_timeout_after_the_response_is_execution_failed() {
        let killed = Exit {
            code: None,
            killed: true,
        };
        let failure = classify(&answered(success()), &killed).unwrap_err();
        assert_eq!(failure.code, ErrorCode::ExecutionFailed.into());
        let drained_late = PeerReport {
            drain_timed_out: true,
            ..answered(success())
        };
        let failure = classify(&drained_late, &exited(0)).unwrap_err();
        assert_eq!(failure.code, ErrorCode::ExecutionFailed.into());
        let failure = classify(&answered(success()), &exited(3)).unwrap_err();
        assert_eq!(failure.code, ErrorCode::ExecutionFailed.into());
        // The same response with a clean exit is the result.
        assert!(classify(&answered(success()), &exited(0)).is_ok());
    }
}
