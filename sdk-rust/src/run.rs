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
    watch_panics();
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

/// The characters of a panic's message kept in the root error's details.
pub(crate) const MAX_PANIC_MESSAGE_CHARS: usize = 1_024;

thread_local! {
    /// The last panic on this thread: its message and `file:line:column`.
    static LAST_PANIC: RefCell<Option<(String, Option<String>)>> = const { RefCell::new(None) };
}

/// Records each panic's message and place for [`panicked`], then lets the
/// hook that was installed before (by default the one printing
/// `thread '…' panicked at …` to stderr) run as it would have.
fn watch_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let place = info
                .location()
                .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()));
            LAST_PANIC.with(|last| *last.borrow_mut() = Some((message, place)));
            previous(info);
        }));
    });
}

/// `EXECUTION_FAILED`, reading `panicked at src/main.rs:10:5: the message`,
/// with the message and place in `details.exception` as the Python and
/// TypeScript SDKs give theirs (a backtrace is not captured: in an
/// envelope it has no symbols to read, and it is not cheap).
fn panicked() -> OperationError {
    let Some((message, place)) = LAST_PANIC.with(|last| last.borrow_mut().take()) else {
        return OperationError::new(ErrorCode::ExecutionFailed, "the handler panicked");
    };
    let message: String = message.chars().take(MAX_PANIC_MESSAGE_CHARS).collect();
    let text = match (&place, message.is_empty()) {
        (Some(place), false) => format!("panicked at {place}: {message}"),
        (Some(place), true) => format!("panicked at {place}"),
        (None, false) => format!("panicked: {message}"),
        (None, true) => "the handler panicked".into(),
    };
    OperationError::new(ErrorCode::ExecutionFailed, text).with_details(serde_json::json!({
        "exception": {
            "type": "panic",
            "message": message,
            "stack": place.into_iter().collect::<Vec<_>>(),
            "framesOmitted": 0,
        }
    }))
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
mod tests;
