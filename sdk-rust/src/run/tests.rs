use super::*;
use crate::{CallError, CapabilityCall, ChildFlowRequest};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Sink(Rc<RefCell<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn root_params(input: Value) -> Value {
    json!({"protocol":"run/1","input":input,"settings":{},"attachments":{},"scratch":"/s","deadlineUnixMs":1})
}

fn root(input: Value) -> Value {
    json!({"jsonrpc":"2.0","id":"host:1","method":"flow/run","params":root_params(input)})
}

fn ok(id: &str, result: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":result})
}

fn cancel(id: &str) -> Value {
    json!({"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":id}})
}

fn script(frames: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for f in frames {
        bytes.extend(serde_json::to_vec(f).unwrap());
        bytes.push(b'\n');
    }
    bytes
}

/// Runs `handler` against scripted host bytes; returns the status and
/// every frame the component wrote.
fn exchange<F, Fut>(input: Vec<u8>, handler: F) -> (i32, Vec<Value>)
where
    F: FnOnce(RunContext) -> Fut,
    Fut: Future<Output = Result<RunResult, HandlerError>>,
{
    let sink = Sink::default();
    let status = serve(&input[..], Box::new(sink.clone()), handler);
    let bytes = sink.0.borrow().clone();
    assert!(bytes.is_empty() || bytes.ends_with(b"\n"));
    let frames = bytes
        .split(|b| *b == b'\n')
        .filter(|f| !f.is_empty())
        .map(|f| serde_json::from_slice(f).unwrap())
        .collect();
    (status, frames)
}

fn error_code(frame: &Value) -> &str {
    frame["error"]["data"]["code"].as_str().unwrap_or("")
}

async fn echo(ctx: RunContext) -> Result<RunResult, HandlerError> {
    Ok(RunResult::done(ctx.input().clone()))
}

fn store(id: &str) -> CapabilityCall {
    CapabilityCall {
        operation_id: id.into(),
        slot: "artifacts".into(),
        method: "write".into(),
        input: Value::Null,
        ..Default::default()
    }
}

fn research() -> ChildFlowRequest {
    ChildFlowRequest {
        operation_id: "research:1".into(),
        slot: "research".into(),
        ..Default::default()
    }
}

async fn two_calls(ctx: RunContext) -> Result<RunResult, HandlerError> {
    let child = ctx.run_child_flow(research());
    let stored = ctx.call_capability(store("store:1"));
    let (stored, child) = (stored.await, child.await);
    Ok(RunResult::done(
        json!({"child": child?.to_value(), "stored": stored?}),
    ))
}

#[test]
fn echo_answers_once_and_exits_zero() {
    let (status, out) = exchange(script(&[root(json!({"a": 1}))]), echo);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(
        out,
        vec![ok("host:1", json!({"outcome":"done","output":{"a":1}}))]
    );
}

#[test]
fn responses_in_any_order_settle_their_calls() {
    let input = script(&[
        root(Value::Null),
        ok("component:2", json!({"value": "v"})),
        ok("component:1", json!({"outcome": "done", "output": 7})),
    ]);
    let (status, out) = exchange(input, two_calls);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(out[0]["method"], "flow/run-child");
    assert_eq!(out[1]["method"], "capability/call");
    assert_eq!(
        out[2],
        ok(
            "host:1",
            json!({"outcome":"done","output":{"child":{"outcome":"done","output":7},"stored":"v"}})
        )
    );
}

#[test]
fn root_cancellation_cancels_each_open_call_then_fails_cancelled() {
    let input = script(&[
        root(Value::Null),
        cancel("host:1"),
        ok("component:1", json!({"outcome": "done", "output": null})),
        ok("component:2", json!({"value": null})),
    ]);
    let (status, out) = exchange(input, two_calls);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(out.len(), 5, "{out:?}");
    assert_eq!(out[2], cancel("component:1"));
    assert_eq!(out[3], cancel("component:2"));
    assert_eq!(out[4]["id"], "host:1");
    assert_eq!(error_code(&out[4]), "CANCELLED");
}

#[test]
fn cancellation_signal_reaches_the_handler() {
    async fn wait(ctx: RunContext) -> Result<RunResult, HandlerError> {
        ctx.cancelled().await;
        assert!(ctx.is_cancelled());
        Ok(RunResult::done(Value::Null))
    }
    let (status, out) = exchange(script(&[root(Value::Null), cancel("host:1")]), wait);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(error_code(&out[0]), "CANCELLED");
}

#[test]
fn invalid_root_params_get_32602_and_end() {
    let mut bad = root(Value::Null);
    bad["params"]["runId"] = json!("forbidden");
    let (status, out) = exchange(script(&[bad, root(Value::Null)]), echo);
    assert_eq!(status, EXIT_UNANSWERED);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["error"]["code"], -32602);
    assert_eq!(out[0]["id"], "host:1");
}

#[test]
fn component_methods_from_the_host_get_32601_and_the_channel_goes_on() {
    let input = script(&[
        json!({"jsonrpc":"2.0","id":"h:0","method":"capability/call","params":{}}),
        json!({"jsonrpc":"2.0","id":"h:00","method":"request/cancel","params":{"requestId":"x"}}),
        json!({"jsonrpc":"2.0","method":"something/else","params":{}}),
        json!({"jsonrpc":"2.0","method":"flow/run","params":{}}),
        root(json!(1)),
    ]);
    let (status, out) = exchange(input, echo);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(out.len(), 3);
    assert_eq!(out[0]["error"]["code"], -32601);
    assert_eq!(out[0]["id"], "h:0");
    assert_eq!(out[1]["error"]["code"], -32601);
    assert_eq!(out[2], ok("host:1", json!({"outcome":"done","output":1})));
}

#[test]
fn second_root_gets_32600_then_the_channel_closes() {
    async fn forever(ctx: RunContext) -> Result<RunResult, HandlerError> {
        ctx.cancelled().await;
        Ok(RunResult::done(Value::Null))
    }
    let mut second = root(Value::Null);
    second["id"] = json!("host:2");
    let (status, out) = exchange(script(&[root(Value::Null), second]), forever);
    assert_eq!(status, EXIT_UNANSWERED);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["error"]["code"], -32600);
    assert_eq!(out[0]["id"], "host:2");
}

#[test]
fn fatal_inputs_close_without_a_root_response() {
    let pending = |extra: &[u8]| {
        let mut input = script(&[root(Value::Null)]);
        input.extend_from_slice(extra);
        exchange(input, two_calls)
    };
    let cases: Vec<(&str, Vec<u8>, Option<i64>)> = vec![
        (
            "malformed cancel",
            script(&[json!({"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":7}})]),
            None,
        ),
        (
            "unknown response",
            script(&[ok("component:9", json!({"value":1}))]),
            None,
        ),
        (
            "standard error reply",
            script(&[
                json!({"jsonrpc":"2.0","id":"component:2","error":{"code":-32601,"message":"no"}}),
            ]),
            None,
        ),
        (
            "child result without output",
            script(&[ok("component:1", json!({"outcome":"done"}))]),
            None,
        ),
        (
            "two-armed capability result",
            script(&[ok(
                "component:2",
                json!({"value":1,"error":{"name":"x","data":null}}),
            )]),
            None,
        ),
        ("invalid json", b"{\"a\":\n".to_vec(), Some(-32700)),
        ("batch", b"[]\n".to_vec(), Some(-32600)),
        ("invalid utf-8", b"{\"a\":\"\xff\"}\n".to_vec(), None),
        ("eof inside a frame", b"{}".to_vec(), None),
        ("eof", Vec::new(), None),
        // Complete, valid UTF-8, not JSON/1 (Run/1 §1).
        ("empty frame", b"\n".to_vec(), Some(-32700)),
    ];
    for (name, extra, reply) in cases {
        let (status, out) = pending(&extra);
        assert_eq!(status, EXIT_UNANSWERED, "{name}");
        assert!(
            out.iter().all(|f| f["id"] != "host:1"),
            "{name}: no root response"
        );
        let errors: Vec<_> = out.iter().filter(|f| f.get("error").is_some()).collect();
        match reply {
            Some(code) => {
                assert_eq!(errors.len(), 1, "{name}");
                assert_eq!(errors[0]["error"]["code"], code, "{name}");
                assert_eq!(errors[0]["id"], Value::Null, "{name}");
            }
            None => assert!(errors.is_empty(), "{name}"),
        }
    }
}

#[test]
fn duplicate_response_is_fatal() {
    let input = script(&[
        root(Value::Null),
        ok("component:2", json!({"value": 1})),
        ok("component:2", json!({"value": 1})),
        ok("component:1", json!({"outcome": "done", "output": null})),
    ]);
    let (status, out) = exchange(input, two_calls);
    assert_eq!(status, EXIT_UNANSWERED);
    assert_eq!(out.len(), 2);
}

#[test]
fn operational_errors_reach_the_caller_and_wire_codes_are_preserved() {
    async fn propagate(ctx: RunContext) -> Result<RunResult, HandlerError> {
        ctx.call_capability(store("s:1")).await?;
        Ok(RunResult::done(Value::Null))
    }
    let input = script(&[
        root(Value::Null),
        json!({"jsonrpc":"2.0","id":"component:1","error":{"code":-32000,"message":"gone","data":{"code":"UNAVAILABLE","details":{"slot":"artifacts"}}}}),
    ]);
    let (status, out) = exchange(input, propagate);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(error_code(&out[1]), "UNAVAILABLE");
}

#[test]
fn declared_capability_errors_keep_their_name() {
    async fn catch(ctx: RunContext) -> Result<RunResult, HandlerError> {
        match ctx.call_capability(store("s:1")).await {
            Err(CallError::Capability(e)) => Ok(RunResult::done(
                json!({"name": e.error_name, "data": e.data}),
            )),
            other => Err(format!("unexpected {other:?}").into()),
        }
    }
    let input = script(&[
        root(Value::Null),
        ok(
            "component:1",
            json!({"error":{"name":"not-found","data":{"k":1}}}),
        ),
    ]);
    let (_, out) = exchange(input, catch);
    assert_eq!(
        out[1]["result"]["output"],
        json!({"name":"not-found","data":{"k":1}})
    );
}

#[test]
fn abandoned_call_refuses_success_after_its_tombstone_settles() {
    async fn abandon(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let _open = ctx.run_child_flow(research());
        Ok(RunResult::done(Value::Null))
    }
    let input = script(&[
        root(Value::Null),
        ok("component:1", json!({"outcome": "done", "output": null})),
    ]);
    let (status, out) = exchange(input, abandon);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(out[1], cancel("component:1"));
    assert_eq!(error_code(&out[2]), "EXECUTION_FAILED");
}

#[test]
fn explicit_cancel_is_not_abandonment() {
    async fn cancel_one(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let mut child = ctx.run_child_flow(research());
        child.cancel();
        let code = child.await.unwrap_err().code;
        Ok(RunResult::done(json!(code.as_str())))
    }
    let input = script(&[
        root(Value::Null),
        ok("component:1", json!({"outcome": "done", "output": null})),
    ]);
    let (status, out) = exchange(input, cancel_one);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(out[1], cancel("component:1"));
    assert_eq!(
        out[2],
        ok("host:1", json!({"outcome":"done","output":"CANCELLED"}))
    );
}

#[test]
fn panics_and_invalid_results_are_classified() {
    async fn panics(_: RunContext) -> Result<RunResult, HandlerError> {
        panic!("boom")
    }
    async fn bad_outcome(_: RunContext) -> Result<RunResult, HandlerError> {
        Ok(RunResult {
            outcome: "Not A LocalName".into(),
            output: Value::Null,
        })
    }
    async fn plain_error(_: RunContext) -> Result<RunResult, HandlerError> {
        Err("nope".into())
    }
    let (_, out) = exchange(script(&[root(Value::Null)]), panics);
    assert_eq!(error_code(&out[0]), "EXECUTION_FAILED");
    // The panic's message and place, in the message and the details.
    let message = out[0]["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("panicked at ") && message.ends_with(": boom"),
        "{message}"
    );
    assert!(message.contains("src/run/tests.rs:"), "{message}");
    let exception = &out[0]["error"]["data"]["details"]["exception"];
    assert_eq!(exception["type"], "panic");
    assert_eq!(exception["message"], "boom");
    assert!(
        exception["stack"][0]
            .as_str()
            .unwrap()
            .starts_with("sdk-rust/src/run/tests.rs:")
            || exception["stack"][0]
                .as_str()
                .unwrap()
                .starts_with("src/run/tests.rs:"),
        "{exception}"
    );
    let (_, out) = exchange(script(&[root(Value::Null)]), bad_outcome);
    assert_eq!(error_code(&out[0]), "INVALID_RESULT");
    let (_, out) = exchange(script(&[root(Value::Null)]), plain_error);
    assert_eq!(error_code(&out[0]), "EXECUTION_FAILED");
}

#[test]
fn invalid_call_arguments_fail_locally_without_a_frame() {
    async fn bad_args(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let mut c = store("not a token");
        let e1 = ctx.call_capability(c.clone()).await.unwrap_err();
        c.operation_id = "ok:1".into();
        c.slot = "Bad".into();
        let e2 = ctx.call_capability(c).await.unwrap_err();
        let e3 = ctx
            .run_child_flow(ChildFlowRequest {
                intent: Some(String::new()),
                ..research()
            })
            .await
            .unwrap_err();
        Ok(RunResult::done(json!([
            e1.code().unwrap().as_str(),
            e2.code().unwrap().as_str(),
            e3.code.as_str()
        ])))
    }
    let (_, out) = exchange(script(&[root(Value::Null)]), bad_args);
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0]["result"]["output"],
        json!(["INVALID_INPUT", "INVALID_INPUT", "INVALID_INPUT"])
    );
}

#[test]
fn host_request_id_reuse_is_fatal() {
    let input = script(&[
        json!({"jsonrpc":"2.0","id":"host:1","method":"x/y","params":{}}),
        root(Value::Null),
    ]);
    let (status, out) = exchange(input, echo);
    assert_eq!(status, EXIT_UNANSWERED);
    assert_eq!(out.len(), 1);
}

#[test]
fn the_hosts_65537th_request_is_fatal() {
    let mut frames: Vec<Value> = (1..MAX_LIFETIME_REQUESTS)
        .map(|i| json!({"jsonrpc":"2.0","id":format!("h:{i}"),"method":"x/y","params":{}}))
        .collect();
    frames.push(root(Value::Null));
    // The root was the 65,536th; this one is the 65,537th.
    frames.push(json!({"jsonrpc":"2.0","id":"h:last","method":"x/y","params":{}}));
    async fn wait(ctx: RunContext) -> Result<RunResult, HandlerError> {
        ctx.cancelled().await;
        Ok(RunResult::done(Value::Null))
    }
    let (status, out) = exchange(script(&frames), wait);
    assert_eq!(status, EXIT_UNANSWERED);
    assert_eq!(
        out.len() as u64,
        MAX_LIFETIME_REQUESTS - 1,
        "only the -32601 replies"
    );

    // One fewer host request leaves the channel healthy.
    frames.pop();
    frames.push(cancel("host:1"));
    let (status, out) = exchange(script(&frames), wait);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(error_code(out.last().unwrap()), "CANCELLED");
}

fn pair_result() -> Value {
    json!({
        "send": {"endpoint": "w", "direction": "send", "delivery": "direct"},
        "receive": {"endpoint": "r", "direction": "receive", "delivery": "direct", "startSequence": 1}
    })
}

#[test]
fn an_activated_receiver_left_unfinished_refuses_success() {
    async fn read_one(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let pair = ctx.channel(Default::default()).await?.into_pair().unwrap();
        let first = pair.receiver.next().await?;
        Ok(RunResult::done(json!(first)))
    }
    let input = script(&[
        root(Value::Null),
        ok("component:1", pair_result()),
        ok(
            "component:2",
            json!({"item": {"sequence": 1, "value": "a"}}),
        ),
    ]);
    let (status, out) = exchange(input, read_one);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(out.len(), 3);
    assert_eq!(error_code(&out[2]), "EXECUTION_FAILED");
}

#[test]
fn a_released_or_drained_receiver_allows_success() {
    async fn read_then_release(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let pair = ctx.channel(Default::default()).await?.into_pair().unwrap();
        let first = pair.receiver.next().await?;
        let status = pair.receiver.release().await?;
        let after = pair.receiver.next().await.unwrap_err().code;
        Ok(RunResult::done(json!([
            first,
            format!("{status:?}"),
            after.as_str()
        ])))
    }
    let input = script(&[
        root(Value::Null),
        ok("component:1", pair_result()),
        ok(
            "component:2",
            json!({"item": {"sequence": 1, "value": "a"}}),
        ),
        ok("component:3", json!({"status": "released"})),
    ]);
    let (status, out) = exchange(input, read_then_release);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(
        out[3]["result"]["output"],
        json!(["a", "Released", "DISCONNECTED"])
    );
}

/// Host frames up to a read of the pair's receiver failing `LAGGED` after
/// one item (`component:1` creates, `component:2` and `:3` read).
fn lagged_after_one_item() -> Vec<Value> {
    vec![
        root(Value::Null),
        ok("component:1", pair_result()),
        ok(
            "component:2",
            json!({"item": {"sequence": 1, "value": "a"}}),
        ),
        json!({"jsonrpc":"2.0","id":"component:3","error":
                {"code":-32000,"message":"behind","data":{"code":"LAGGED"}}}),
    ]
}

/// Reads the pair's receiver until it ends or fails; the values and the
/// failure's code (or "ended").
async fn read_to_failure(receiver: &crate::ChannelReceiver) -> (Vec<Value>, String) {
    let mut values = Vec::new();
    loop {
        match receiver.next().await {
            Ok(Some(v)) => values.push(v),
            Ok(None) => return (values, "ended".into()),
            Err(e) => return (values, e.code.as_str().into()),
        }
    }
}

#[test]
fn a_failed_read_settles_the_receiver_and_sends_nothing_unless_it_is_released() {
    async fn read_until_lagged(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let pair = ctx.channel(Default::default()).await?.into_pair().unwrap();
        let (values, code) = read_to_failure(&pair.receiver).await;
        // Settled by the failure: a second read answers locally.
        let again = pair.receiver.next().await.unwrap_err().code;
        Ok(RunResult::done(json!({
            "values": values,
            "read": code,
            "again": again.as_str(),
        })))
    }
    let (status, out) = exchange(script(&lagged_after_one_item()), read_until_lagged);
    assert_eq!(status, EXIT_ANSWERED);
    assert!(
        out.iter().all(|f| f["method"] != "channel/release"),
        "{out:?}"
    );
    assert_eq!(out.len(), 4, "create, two reads, the root result");
    assert_eq!(
        out[3]["result"]["output"],
        json!({"values": ["a"], "read": "LAGGED", "again": "LAGGED"})
    );
}

#[test]
fn releasing_a_receiver_after_its_failed_read_sends_one_release_and_accepts_failed() {
    async fn read_then_release(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let pair = ctx.channel(Default::default()).await?.into_pair().unwrap();
        let (values, code) = read_to_failure(&pair.receiver).await;
        // The host's answer is the disposition, not a new error.
        let first = pair.receiver.release().await?;
        let second = pair.receiver.release().await?;
        Ok(RunResult::done(json!({
            "values": values,
            "read": code,
            "release": format!("{first:?}"),
            "again": format!("{second:?}"),
        })))
    }
    let mut frames = lagged_after_one_item();
    frames.push(ok(
        "component:4",
        json!({"status": "failed", "code": "LAGGED"}),
    ));
    let (status, out) = exchange(script(&frames), read_then_release);
    assert_eq!(status, EXIT_ANSWERED);
    let releases: Vec<_> = out
        .iter()
        .filter(|f| f["method"] == "channel/release")
        .collect();
    assert_eq!(releases.len(), 1, "{out:?}");
    assert_eq!(releases[0]["id"], "component:4");
    assert_eq!(releases[0]["params"], json!({"endpoint": "r"}));
    assert_eq!(
        out.len(),
        5,
        "create, two reads, one release, the root result"
    );
    assert_eq!(
        out[4]["result"]["output"],
        json!({"values": ["a"], "read": "LAGGED",
               "release": "Failed { code: Lagged, details: None }",
               "again": "Failed { code: Lagged, details: None }"})
    );
}

#[test]
fn an_unread_broadcast_subscription_is_owned_work() {
    async fn subscribe_only(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let b = ctx
            .channel(crate::ChannelOptions {
                delivery: Some(crate::Delivery::Broadcast),
                ..Default::default()
            })
            .await?
            .into_broadcast()
            .unwrap();
        let _reader = b.subscribe().await?;
        Ok(RunResult::done(Value::Null))
    }
    let input = script(&[
        root(Value::Null),
        ok(
            "component:1",
            json!({"send": {"endpoint": "w", "direction": "send", "delivery": "broadcast"}, "source": "s"}),
        ),
        ok(
            "component:2",
            json!({"endpoint": "r", "direction": "receive", "delivery": "broadcast", "startSequence": 4}),
        ),
    ]);
    let (_, out) = exchange(input, subscribe_only);
    assert_eq!(out[1]["params"], json!({"source": "s"}));
    assert_eq!(error_code(&out[2]), "EXECUTION_FAILED");
}

#[test]
fn a_wrong_channel_result_shape_is_fatal() {
    async fn create(ctx: RunContext) -> Result<RunResult, HandlerError> {
        ctx.channel(Default::default()).await?;
        Ok(RunResult::done(Value::Null))
    }
    let input = script(&[root(Value::Null), ok("component:1", Value::Null)]);
    let (status, out) = exchange(input, create);
    assert_eq!(status, EXIT_UNANSWERED);
    assert_eq!(out.len(), 1);
}

#[test]
fn cancelling_a_read_disposes_the_receiver_and_drains_both_responses() {
    async fn cancel_read(ctx: RunContext) -> Result<RunResult, HandlerError> {
        let pair = ctx.channel(Default::default()).await?.into_pair().unwrap();
        let mut read = pair.receiver.next();
        read.cancel();
        let code = read.await.unwrap_err().code;
        let again = pair.receiver.next().await.unwrap_err().code;
        Ok(RunResult::done(json!([code.as_str(), again.as_str()])))
    }
    let input = script(&[
        root(Value::Null),
        ok("component:1", pair_result()),
        ok(
            "component:2",
            json!({"item": {"sequence": 1, "value": "committed"}}),
        ),
        ok("component:3", json!({"status": "released"})),
    ]);
    let (status, out) = exchange(input, cancel_read);
    assert_eq!(status, EXIT_ANSWERED);
    assert_eq!(out[1]["method"], "channel/next");
    assert_eq!(out[2], cancel("component:2"));
    assert_eq!(out[3]["method"], "channel/release");
    assert_eq!(out[3]["params"], json!({"endpoint": "r"}));
    assert_eq!(
        out[4],
        ok(
            "host:1",
            json!({"outcome":"done","output":["CANCELLED","DISCONNECTED"]})
        )
    );
}

#[test]
fn a_panic_message_is_bounded_in_the_details() {
    for (len, kept) in [
        (MAX_PANIC_MESSAGE_CHARS, MAX_PANIC_MESSAGE_CHARS),
        (MAX_PANIC_MESSAGE_CHARS + 1, MAX_PANIC_MESSAGE_CHARS),
    ] {
        let text = "é".repeat(len);
        let (_, out) = exchange(script(&[root(json!(text))]), |ctx: RunContext| async move {
            let text = ctx.input().as_str().unwrap().to_string();
            if !text.is_empty() {
                panic!("{text}");
            }
            Ok::<_, HandlerError>(RunResult::done(Value::Null))
        });
        let exception = &out[0]["error"]["data"]["details"]["exception"];
        assert_eq!(exception["message"].as_str().unwrap().chars().count(), kept);
        let message = out[0]["error"]["message"].as_str().unwrap();
        assert_eq!(
            message.chars().count(),
            1_024,
            "the wire clamps the message"
        );
    }
}
