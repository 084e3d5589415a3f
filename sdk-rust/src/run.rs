//! The one-root executor: a single-threaded loop that polls the handler,
//! and when nothing can progress blocks on the next frame from the host.
//! No threads, no timers, so it runs unchanged on wasm32-wasip1.

use std::cell::RefCell;
use std::collections::HashSet;
use std::future::Future;
use std::io::{Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use flow::wire::{
    self, CancelParams, Direction, ErrorCode, FlowRunParams, FrameError, FrameReader,
    MAX_FRAME_BYTES, MAX_LIFETIME_REQUESTS, Message, Method, RpcError, RunResult, request_method,
};

use crate::context::RunContext;
use crate::error::{HandlerError, OperationError, root_error};
use crate::peer::Peer;

/// Process status after the root response was published.
pub const EXIT_ANSWERED: i32 = 0;
/// Process status when the channel ended without a root response (fatal
/// protocol error, lost channel, invalid root params).
pub const EXIT_UNANSWERED: i32 = 1;

/// Serves the one root Run of this process with `handler` over protocol
/// stdin/stdout, then exits: status 0 once the root response is written,
/// 1 when the channel failed first.
///
/// Natively (Unix) the SDK first moves protocol stdout and stdin to private
/// close-on-exec descriptors, points fd 1 at stderr and fd 0 at `/dev/null`,
/// so `println!` and child processes cannot corrupt or steal protocol
/// frames. On wasm32-wasip1 descriptors cannot be duplicated: fd 1 stays the
/// protocol stream, and handlers must log with `eprintln!` only.
pub fn handle<F, Fut, E>(handler: F) -> !
where
    F: FnOnce(RunContext) -> Fut,
    Fut: Future<Output = Result<RunResult, E>>,
    E: Into<HandlerError>,
{
    let (input, output) = crate::stdio::claim();
    let status = serve(input, output, handler);
    std::process::exit(status)
}

/// Serves one root Run over the given streams and returns the process status
/// [`handle`] would exit with. Useful for testing a handler in-process.
///
/// # Example
///
/// ```
/// # use flow_sdk::testing::*;
/// # use flow_sdk::*;
/// # use serde_json::json;
/// let input = format!("{}\n", root(json!("Ada")));
/// let status = serve(input.as_bytes(), Box::new(std::io::sink()), |ctx| async move {
///     Ok::<_, HandlerError>(RunResult::done(ctx.input().clone()))
/// });
/// assert_eq!(status, EXIT_ANSWERED);
/// // Without a root request there is nothing to answer.
/// let status = serve(&b""[..], Box::new(std::io::sink()), |ctx| async move {
///     Ok::<_, HandlerError>(RunResult::done(ctx.input().clone()))
/// });
/// assert_eq!(status, EXIT_UNANSWERED);
/// ```
pub fn serve<R, F, Fut, E>(input: R, output: Box<dyn Write>, handler: F) -> i32
where
    R: Read,
    F: FnOnce(RunContext) -> Fut,
    Fut: Future<Output = Result<RunResult, E>>,
    E: Into<HandlerError>,
{
    let peer = Rc::new(RefCell::new(Peer::new(output)));
    let mut frames = FrameReader::new(input);
    let mut host = HostRequests::default();

    let Some((root_id, params)) = await_root(&mut frames, &peer, &mut host) else {
        return EXIT_UNANSWERED;
    };

    let flag = Arc::new(WakeFlag(AtomicBool::new(true)));
    let waker = Waker::from(flag.clone());
    let ctx = RunContext::new(params, peer.clone());
    let mut verdict: Option<Result<RunResult, OperationError>> = None;
    let mut task: Option<Pin<Box<Fut>>> = match catch_unwind(AssertUnwindSafe(|| handler(ctx))) {
        Ok(fut) => Some(Box::pin(fut)),
        Err(_) => {
            verdict = Some(Err(panicked()));
            peer.borrow_mut().close();
            None
        }
    };

    loop {
        if peer.borrow().fatal().is_some() {
            return EXIT_UNANSWERED;
        }
        if let Some(fut) = task.as_mut() {
            if flag.0.swap(false, Ordering::SeqCst) {
                let mut cx = Context::from_waker(&waker);
                let polled = catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)));
                let settled = match polled {
                    Ok(Poll::Pending) => continue,
                    Ok(Poll::Ready(Ok(result))) => Ok(result),
                    Ok(Poll::Ready(Err(e))) => Err(root_error(&e.into())),
                    Err(_) => Err(panicked()),
                };
                verdict = Some(settled);
                // Abandonment is captured at handler settlement; later
                // cleanup does not erase it.
                peer.borrow_mut().note_unfinished_receivers();
                // Dropping the handler drops its unfinished calls: each sends
                // request/cancel once and stays a tombstone until answered.
                let dropped = task.take();
                if catch_unwind(AssertUnwindSafe(move || drop(dropped))).is_err() {
                    verdict = Some(Err(panicked()));
                }
                peer.borrow_mut().close();
                continue;
            }
        } else if peer.borrow().on_wire() == 0 {
            break;
        }
        let Some(message) = read_message(&mut frames, &peer) else {
            return EXIT_UNANSWERED;
        };
        dispatch(message, &root_id, &peer, &mut host);
    }

    let response = {
        let p = peer.borrow();
        let verdict = verdict.unwrap_or_else(|| Err(panicked()));
        if p.root_cancelled() {
            Err(OperationError::new(
                ErrorCode::Cancelled,
                "the Run was cancelled",
            ))
        } else {
            match verdict {
                Ok(_) if p.abandoned() => Err(OperationError::new(
                    ErrorCode::ExecutionFailed,
                    "the handler returned while owning an unfinished call",
                )),
                Ok(result) => check_result(&root_id, result),
                Err(e) => Err(e),
            }
        }
    };
    let message = match response {
        Ok(message) => message,
        Err(e) => Message::failure(Some(root_id), e.to_wire().to_rpc()),
    };
    let mut p = peer.borrow_mut();
    p.send(&message);
    if p.fatal().is_some() {
        EXIT_UNANSWERED
    } else {
        EXIT_ANSWERED
    }
}

fn panicked() -> OperationError {
    OperationError::new(ErrorCode::ExecutionFailed, "the handler panicked")
}

/// Checks a handler's result and builds the root success frame.
fn check_result(root_id: &str, result: RunResult) -> Result<Message, OperationError> {
    let invalid = |m: String| OperationError::new(ErrorCode::InvalidResult, m);
    if !wire::is_local_name(&result.outcome) {
        return Err(invalid(format!(
            "outcome {:?} is not a LocalName",
            result.outcome
        )));
    }
    flow::json::check(&result.output).map_err(|e| invalid(format!("output is not JSON/1: {e}")))?;
    let message = Message::Success {
        id: root_id.to_string(),
        result: result.to_value(),
    };
    if wire::encode(&message).len() - 1 > MAX_FRAME_BYTES {
        return Err(invalid(format!(
            "the result frame would exceed {MAX_FRAME_BYTES} bytes"
        )));
    }
    Ok(message)
}

struct WakeFlag(AtomicBool);

impl Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Host-originated request IDs: never reused, at most 65,536 per channel.
#[derive(Default)]
struct HostRequests {
    seen: HashSet<String>,
}

impl HostRequests {
    fn admit(&mut self, id: &str, peer: &RefCell<Peer>) -> bool {
        if self.seen.len() as u64 >= MAX_LIFETIME_REQUESTS {
            peer.borrow_mut().fail(
                ErrorCode::ProtocolError,
                "the host exceeded its lifetime request budget",
            );
            return false;
        }
        if !self.seen.insert(id.to_string()) {
            peer.borrow_mut().fail(
                ErrorCode::ProtocolError,
                format!("the host reused request id {id:?}"),
            );
            return false;
        }
        true
    }
}

/// Reads and decodes the next frame; every failure is fatal (after the
/// best-effort `-32700`/`-32600` reply where one applies).
fn read_message<R: Read>(frames: &mut FrameReader<R>, peer: &RefCell<Peer>) -> Option<Message> {
    let mut p = peer.borrow_mut();
    match frames.read_frame() {
        Ok(Some(frame)) => match wire::decode(&frame) {
            Ok(m) => Some(m),
            Err(e) => {
                if let Some(reply) = e.reply() {
                    p.send(&reply);
                }
                p.fail(ErrorCode::ProtocolError, e.to_string());
                None
            }
        },
        // An empty frame is complete, LF-terminated and valid UTF-8, and it
        // fails JSON/1: best-effort -32700 with id null, then the close
        // (Run/1 §1). Oversized and incomplete frames close silently.
        Err(FrameError::Empty) => {
            if let Some(reply) = wire::decode(b"").err().and_then(|e| e.reply()) {
                p.send(&reply);
            }
            p.fail(ErrorCode::ProtocolError, FrameError::Empty.to_string());
            None
        }
        Ok(None) => {
            p.fail(
                ErrorCode::ChannelLost,
                "stdin ended before the root response",
            );
            None
        }
        Err(FrameError::Io(e)) => {
            p.fail(ErrorCode::ChannelLost, format!("stdin failed: {e}"));
            None
        }
        Err(e) => {
            p.fail(ErrorCode::ProtocolError, e.to_string());
            None
        }
    }
}

/// Handles a `request/cancel` notification; `Some(target)` when well formed.
fn cancel_target(params: Option<&serde_json::Value>, peer: &RefCell<Peer>) -> Option<String> {
    let parsed = params
        .ok_or_else(|| "request/cancel without params".to_string())
        .and_then(|p| CancelParams::from_value(p).map_err(|e| e.to_string()));
    match parsed {
        Ok(c) => Some(c.request_id),
        Err(e) => {
            peer.borrow_mut().fail(
                ErrorCode::ProtocolError,
                format!("malformed cancellation: {e}"),
            );
            None
        }
    }
}

/// Waits for the root `flow/run`, answering anything else that comes first.
fn await_root<R: Read>(
    frames: &mut FrameReader<R>,
    peer: &RefCell<Peer>,
    host: &mut HostRequests,
) -> Option<(String, FlowRunParams)> {
    loop {
        match read_message(frames, peer)? {
            Message::Request { id, method, params } => {
                if !host.admit(&id, peer) {
                    return None;
                }
                if request_method(Direction::HostToComponent, &method) != Some(Method::FlowRun) {
                    peer.borrow_mut().send(&method_not_found(id, &method));
                    continue;
                }
                let parsed = match &params {
                    Some(p) => FlowRunParams::from_value(p),
                    None => Err(wire::InvalidParams("flow/run needs params".into())),
                };
                match parsed {
                    Ok(p) => return Some((id, p)),
                    Err(e) => {
                        let mut p = peer.borrow_mut();
                        p.send(&Message::failure(Some(id), e.to_rpc()));
                        eprintln!("flow-sdk: invalid root params: {e}");
                        return None;
                    }
                }
            }
            Message::Notification { method, params } => {
                if method == Method::RequestCancel.as_str() {
                    cancel_target(params.as_ref(), peer)?;
                }
            }
            Message::Success { id, .. } | Message::Failure { id: Some(id), .. } => {
                peer.borrow_mut()
                    .on_response(Some(&id), Ok(serde_json::Value::Null));
                return None;
            }
            Message::Failure { id: None, error } => {
                peer.borrow_mut().on_response(None, Err(error));
                return None;
            }
        }
    }
}

fn method_not_found(id: String, method: &str) -> Message {
    Message::failure(
        Some(id),
        RpcError::standard(
            wire::METHOD_NOT_FOUND,
            format!("method {method:?} is not served by a component"),
        ),
    )
}

/// Handles one host frame while the root is pending.
fn dispatch(message: Message, root_id: &str, peer: &RefCell<Peer>, host: &mut HostRequests) {
    match message {
        Message::Request { id, method, .. } => {
            if !host.admit(&id, peer) {
                return;
            }
            let mut p = peer.borrow_mut();
            if method == Method::FlowRun.as_str() {
                p.send(&Message::failure(
                    Some(id),
                    RpcError::standard(wire::INVALID_REQUEST, "a second flow/run on one channel"),
                ));
                p.fail(ErrorCode::ProtocolError, "the host sent a second flow/run");
            } else {
                p.send(&method_not_found(id, &method));
            }
        }
        Message::Notification { method, params } => {
            if method == Method::RequestCancel.as_str()
                && let Some(target) = cancel_target(params.as_ref(), peer)
                && target == root_id
            {
                peer.borrow_mut().cancel_root();
            }
        }
        Message::Success { id, result } => peer.borrow_mut().on_response(Some(&id), Ok(result)),
        Message::Failure { id, error } => peer.borrow_mut().on_response(id.as_deref(), Err(error)),
    }
}

#[cfg(test)]
mod tests {
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
                script(&[
                    json!({"jsonrpc":"2.0","method":"request/cancel","params":{"requestId":7}}),
                ]),
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

    #[test]
    fn a_failed_read_settles_the_receiver_and_the_run_keeps_its_partial_values() {
        async fn read_until_lagged(ctx: RunContext) -> Result<RunResult, HandlerError> {
            let pair = ctx.channel(Default::default()).await?.into_pair().unwrap();
            let mut values = Vec::new();
            let code = loop {
                match pair.receiver.next().await {
                    Ok(Some(v)) => values.push(v),
                    Ok(None) => break "ended".to_string(),
                    Err(e) => break e.code.as_str().to_string(),
                }
            };
            // Settled by the failure: both answer locally.
            let again = pair.receiver.next().await.unwrap_err().code;
            let status = pair.receiver.release().await?;
            Ok(RunResult::done(json!({
                "values": values,
                "read": code,
                "again": again.as_str(),
                "release": format!("{status:?}"),
            })))
        }
        let input = script(&[
            root(Value::Null),
            ok("component:1", pair_result()),
            ok(
                "component:2",
                json!({"item": {"sequence": 1, "value": "a"}}),
            ),
            json!({"jsonrpc":"2.0","id":"component:3","error":
                {"code":-32000,"message":"behind","data":{"code":"LAGGED"}}}),
        ]);
        let (status, out) = exchange(input, read_until_lagged);
        assert_eq!(status, EXIT_ANSWERED);
        assert!(
            out.iter().all(|f| f["method"] != "channel/release"),
            "{out:?}"
        );
        assert_eq!(out.len(), 4, "create, two reads, the root result");
        assert_eq!(
            out[3]["result"]["output"],
            json!({"values": ["a"], "read": "LAGGED", "again": "LAGGED",
                   "release": "Failed { code: Lagged, details: None }"})
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
}
