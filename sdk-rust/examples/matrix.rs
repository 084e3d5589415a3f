//! The "matrix component" of the Run/1 conformance scenarios: `input.case`
//! selects one behaviour; any other case returns `{"outcome":"done","output":null}`.

use flow_sdk::{
    CallError, CapabilityCall, ChildFlowRequest, ErrorCode, HandlerError, RunContext, RunResult,
    Value, handle,
};
use serde_json::json;

fn sink(operation_id: &str, input: Value) -> CapabilityCall {
    CapabilityCall {
        operation_id: operation_id.into(),
        slot: "sink".into(),
        method: "write".into(),
        input,
        ..Default::default()
    }
}

fn control(operation_id: &str) -> CapabilityCall {
    CapabilityCall {
        operation_id: operation_id.into(),
        slot: "control".into(),
        method: "release".into(),
        input: Value::Null,
        ..Default::default()
    }
}

fn child(operation_id: &str) -> ChildFlowRequest {
    ChildFlowRequest {
        operation_id: operation_id.into(),
        slot: "child".into(),
        input: Value::Null,
        ..Default::default()
    }
}

/// A call's value, or its operational code as a string.
fn value_or_code(r: Result<Value, CallError>) -> Result<Value, HandlerError> {
    match r {
        Ok(v) => Ok(v),
        Err(CallError::Operation(e)) => Ok(json!(e.code.as_str())),
        Err(e) => Err(e.into()),
    }
}

async fn run(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let case = ctx
        .input()
        .get("case")
        .and_then(Value::as_str)
        .unwrap_or("");
    let output = match case {
        "fanout-65" => {
            // All 65 are admitted at once; the SDK keeps 64 on the wire.
            let calls: Vec<_> = (0..65)
                .map(|i| {
                    ctx.call_capability(sink(&format!("fanout:{}", i + 1), json!({ "index": i })))
                })
                .collect();
            let mut settled = 0;
            for call in calls {
                call.await?;
                settled += 1;
            }
            json!({ "settled": settled })
        }
        "operation-identity" => {
            let same = || sink("shared:1", json!({ "value": "same" }));
            let (a, b) = (ctx.call_capability(same()), ctx.call_capability(same()));
            let (first, second) = (a.await?, b.await?);
            let replay = ctx.call_capability(same()).await?;
            let conflict = match ctx
                .call_capability(sink("shared:1", json!({ "value": "different" })))
                .await
            {
                Err(CallError::Operation(e)) => json!(e.code.as_str()),
                Ok(_) => return Err("a changed operation was not refused".into()),
                Err(e) => return Err(e.into()),
            };
            json!({ "first": first, "second": second, "replay": replay, "conflict": conflict })
        }
        "cancel-shared-waiter" => {
            let shared = || sink("shared-cancel:1", json!({ "value": "shared" }));
            let mut first = ctx.call_capability(shared());
            let second = ctx.call_capability(shared());
            ctx.call_capability(control("release-shared-cancel:1"))
                .await?;
            first.cancel();
            let cancellation = match first.await {
                Err(CallError::Operation(e)) => json!(e.code.as_str()),
                other => json!(format!("{other:?}")),
            };
            json!({ "cancellation": cancellation, "survivor": second.await? })
        }
        "uncertain-replay" => {
            let call = |id: &str| ctx.call_capability(sink(id, json!({ "value": "uncertain" })));
            let first = value_or_code(call("uncertain:1").await)?;
            let replay = value_or_code(call("uncertain:1").await)?;
            let fresh = value_or_code(call("uncertain:2").await)?;
            json!({ "first": first, "replay": replay, "fresh": fresh })
        }
        "request-lifetime" => {
            let mut accepted = 0u64;
            let mut rejected = Value::Null;
            for i in 1..=65_537u64 {
                match ctx
                    .call_capability(sink(&format!("lifetime:{i}"), Value::Null))
                    .await
                {
                    Err(CallError::Operation(e)) if e.code == ErrorCode::ResourceExhausted => {
                        rejected = json!(e.code.as_str());
                    }
                    Err(e) => return Err(e.into()),
                    Ok(_) => accepted += 1,
                }
            }
            json!({ "accepted": accepted, "rejected": rejected })
        }
        "one-flow" => ctx.run_child_flow(child("child:1")).await?.to_value(),
        "two-effects" => {
            let first = ctx
                .call_capability(sink("first:1", json!({ "sequence": 1 })))
                .await?;
            let second = ctx
                .call_capability(sink("second:1", json!({ "sequence": 2 })))
                .await?;
            json!({ "first": first, "second": second })
        }
        "cancel-one-call" => {
            let mut pending = ctx.run_child_flow(child("cancelled-child:1"));
            ctx.call_capability(control("release-cancel:1")).await?;
            pending.cancel();
            match pending.await {
                Err(e) if e.code == ErrorCode::Cancelled => json!("cancelled-locally"),
                other => return Err(format!("expected a local cancellation, got {other:?}").into()),
            }
        }
        "abandoned-call" => {
            let abandoned = ctx.run_child_flow(child("abandoned-child:1"));
            ctx.call_capability(control("release-abandon:1")).await?;
            // Returning while `abandoned` is unfinished: the SDK must refuse success.
            drop(abandoned);
            Value::Null
        }
        _ => Value::Null,
    };
    Ok(RunResult::done(output))
}

fn main() {
    handle(run)
}
