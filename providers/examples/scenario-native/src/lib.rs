//! Test provider for the capability slots of the Run/1 conformance
//! scenarios (the FLOW reference's Run/1 conformance scenarios). One source, two forms: a
//! native `cdylib`, and a `wasm32-wasip2` component (where the latch below
//! cannot work: a component instance lives for one call).
//!
//! It serves five exact contracts from `../contracts/`:
//!
//! - `artifacts` 1.0.0: `write {"source"}` answers `{"uri":"artifact://<source>"}`;
//!   `read {"uri"}` always answers the declared error `not-found` `{"uri"}`.
//! - `sink` 1.0.0: `write <any>` answers `{"written": <input>}`, except that
//!   `{"value":"shared"}` first blocks until `control.release` has been
//!   called, and `{"value":"uncertain"}` fails with the operational code
//!   `UNCERTAIN`.
//! - `control` 1.0.0: `release null` opens the latch blocked writes wait on.
//! - `worker` 1.0.0 (the channels scenario's `worker` slot): `run <input>`
//!   sends [`WORKER_STEPS`] items `{"step": i, "input": <input>}` on its
//!   `events` send port and answers `{"steps": 3}`; with input
//!   `{"fail": true}` it sends the first item and then fails
//!   `EXECUTION_FAILED`, so the caller's reader fails too. `drain` reads
//!   its `inbox` receive port to the end and answers the items' values.
//! - `agent-run` 1.0.0 (`https://jig.md/contracts/agent-run`, the
//!   channel-wiring scenario's `agent` slot): `run {"instructions": t}`
//!   sends ACP public updates on the optional `events` port when connected
//!   (a `plan` with one completed entry `t`, then two
//!   `agent_message_chunk` texts `"Done: "` and `t`) and answers
//!   `{"outcome": "completed", "text": "Done: <t>"}`.
//!
//! The latch is process-wide state, which is why this provider is native
//! (a WASM provider gets a fresh instance per call). When the settings hold
//! `{"journal": "<path>"}`, every dispatch appends one line
//! `<contract> <method> <operationId> <input>` there, so tests can count how
//! often the host really dispatched (joins and replays never reach here).

use std::io::Write;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jig_provider_sdk::{serde_json::json, CallError, Channels, Config, Context, Provider, Value};

pub const ARTIFACTS: &str = "https://example.org/contracts/artifacts";
pub const SINK: &str = "https://example.org/contracts/sink";
pub const CONTROL: &str = "https://example.org/contracts/control";
pub const WORKER: &str = "https://example.org/contracts/worker";
pub const AGENT_RUN: &str = "https://jig.md/contracts/agent-run";

/// Items the worker sends on `events` before answering.
pub const WORKER_STEPS: u64 = 3;

/// After the latch opens, a blocked write keeps running this long, so that
/// a waiter cancelled right after `control.release` answers is cancelled
/// while the shared operation is still in flight, not after it settled.
pub const SETTLE_AFTER_RELEASE: Duration = Duration::from_millis(300);

/// Without a usable deadline a blocked write gives up after this long.
pub const MAX_BLOCK: Duration = Duration::from_secs(60);

struct Latch {
    open: Mutex<bool>,
    opened: Condvar,
}

static LATCH: Latch = Latch {
    open: Mutex::new(false),
    opened: Condvar::new(),
};

impl Latch {
    fn release(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.opened.notify_all();
    }

    /// Waits for the latch; false when `limit` passed first.
    fn wait(&self, limit: Duration) -> bool {
        let guard = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .opened
            .wait_timeout_while(guard, limit, |open| !*open)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

/// The scenario provider.
pub struct Scenario;

impl Provider for Scenario {
    fn contracts() -> Vec<&'static str> {
        vec![
            include_str!("../../contracts/artifacts.capability.json"),
            include_str!("../../contracts/sink.capability.json"),
            include_str!("../../contracts/control.capability.json"),
            include_str!("../../contracts/worker.capability.json"),
            include_str!("../../contracts/agent-run.capability.json"),
        ]
    }

    fn call(
        ctx: &Context,
        method: &str,
        input: Value,
        config: &Config,
        channels: &Channels,
    ) -> Result<Value, CallError> {
        journal(ctx, method, &input, config);
        match (ctx.contract_id.as_str(), method) {
            (ARTIFACTS, "write") => artifacts_write(&input),
            (ARTIFACTS, "read") => Err(CallError::application(
                "not-found",
                json!({ "uri": input.get("uri").cloned().unwrap_or(Value::Null) }),
            )),
            (SINK, "write") => sink_write(ctx, input),
            (CONTROL, "release") => {
                LATCH.release();
                Ok(json!({ "released": true }))
            }
            (WORKER, "run") => worker_run(input, channels),
            (WORKER, "drain") => {
                let mut values = Vec::new();
                while let Some(item) = channels.next("inbox")? {
                    values.push(item.value);
                }
                Ok(Value::Array(values))
            }
            (AGENT_RUN, "run") => agent_run(&input, channels),
            (_, other) => Err(CallError::unknown_method(other)),
        }
    }
}

fn artifacts_write(input: &Value) -> Result<Value, CallError> {
    let source = input.get("source").and_then(Value::as_str).unwrap_or("");
    Ok(json!({ "uri": format!("artifact://{source}") }))
}

fn sink_write(ctx: &Context, input: Value) -> Result<Value, CallError> {
    match input.get("value").and_then(Value::as_str) {
        Some("uncertain") => {
            return Err(CallError::operational(
                "UNCERTAIN",
                "the write may or may not have happened",
            ))
        }
        Some("shared") => {
            if !LATCH.wait(until_deadline(ctx.deadline_unix_ms)) {
                return Err(CallError::operational(
                    "DEADLINE_EXCEEDED",
                    "control.release was never called",
                ));
            }
            std::thread::sleep(SETTLE_AFTER_RELEASE);
        }
        _ => {}
    }
    Ok(json!({ "written": input }))
}

fn worker_run(input: Value, channels: &Channels) -> Result<Value, CallError> {
    let fail = input.get("fail") == Some(&Value::Bool(true));
    for step in 1..=WORKER_STEPS {
        channels.send("events", &json!({ "step": step, "input": input }))?;
        if fail {
            return Err(CallError::operational(
                "EXECUTION_FAILED",
                "the worker failed after its first step",
            ));
        }
    }
    // The host seals `events` when this call succeeds.
    Ok(json!({ "steps": WORKER_STEPS }))
}

fn agent_run(input: &Value, channels: &Channels) -> Result<Value, CallError> {
    let instructions = input
        .get("instructions")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = format!("Done: {instructions}");
    if channels.has("events") {
        let chunk = |text: &str| {
            json!({
                "sessionUpdate": "agent_message_chunk",
                "content": { "type": "text", "text": text },
            })
        };
        let plan = json!({
            "sessionUpdate": "plan",
            "entries": [{ "content": instructions, "priority": "high", "status": "completed" }],
        });
        channels.send("events", &plan)?;
        channels.send("events", &chunk("Done: "))?;
        channels.send("events", &chunk(instructions))?;
        channels.close("events")?;
    }
    Ok(json!({ "outcome": "completed", "text": text }))
}

fn until_deadline(deadline_unix_ms: u64) -> Duration {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    Duration::from_millis(deadline_unix_ms.saturating_sub(now)).min(MAX_BLOCK)
}

fn journal(ctx: &Context, method: &str, input: &Value, config: &Config) {
    let Some(path) = config.settings.get("journal").and_then(Value::as_str) else {
        return;
    };
    let contract = ctx.contract_id.rsplit('/').next().unwrap_or("");
    let line = format!("{contract} {method} {} {input}\n", ctx.operation_id);
    // One write per line on an O_APPEND file: concurrent calls never interleave.
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}

jig_provider_sdk::export_provider!(Scenario);

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(contract: &str, deadline_unix_ms: u64) -> Context {
        Context {
            contract_id: contract.into(),
            contract_version: "1.0.0".into(),
            contract_digest: String::new(),
            operation_id: "op:1".into(),
            deadline_unix_ms,
        }
    }

    fn call(contract: &str, method: &str, input: Value) -> Result<Value, CallError> {
        Scenario::call(
            &ctx(contract, u64::MAX),
            method,
            input,
            &Config::default(),
            &Channels::none(),
        )
    }

    #[test]
    fn sink_write_echoes_and_uncertain_fails() {
        assert_eq!(
            call(SINK, "write", json!({"index": 3})),
            Ok(json!({"written": {"index": 3}}))
        );
        assert_eq!(
            call(SINK, "write", json!({"value": "uncertain"})),
            Err(CallError::operational(
                "UNCERTAIN",
                "the write may or may not have happened"
            ))
        );
    }

    #[test]
    fn artifacts_read_is_not_found_and_unknown_methods_unavailable() {
        assert_eq!(
            call(ARTIFACTS, "read", json!({"uri": "artifact://x"})),
            Err(CallError::application(
                "not-found",
                json!({"uri": "artifact://x"})
            ))
        );
        assert_eq!(
            call(ARTIFACTS, "write", json!({"source": "research"})),
            Ok(json!({"uri": "artifact://research"}))
        );
        assert_eq!(
            call(CONTROL, "write", Value::Null),
            Err(CallError::unknown_method("write"))
        );
    }

    #[test]
    fn channel_methods_need_their_ports() {
        // Without a connected `events` port the worker cannot send; the
        // agent's port is optional and it answers without it.
        let err = call(WORKER, "run", json!({"task": "t"})).unwrap_err();
        let CallError::Operational { code, .. } = err else {
            panic!("operational expected")
        };
        assert_eq!(code, "PERMISSION_DENIED");
        assert_eq!(
            call(AGENT_RUN, "run", json!({"instructions": "plan it"})),
            Ok(json!({"outcome": "completed", "text": "Done: plan it"}))
        );
    }

    #[test]
    fn a_shared_write_waits_for_release() {
        let blocked = std::thread::spawn(|| call(SINK, "write", json!({"value": "shared"})));
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !blocked.is_finished(),
            "the shared write waits for the latch"
        );
        assert_eq!(
            call(CONTROL, "release", Value::Null),
            Ok(json!({"released": true}))
        );
        assert_eq!(
            blocked.join().unwrap(),
            Ok(json!({"written": {"value": "shared"}}))
        );
    }
}
