//! Running a handler in-process against a scripted host, for unit tests of
//! components (and the examples in this crate's documentation).
//!
//! The SDK numbers its requests `component:1`, `component:2`, ... in the
//! order they reach the wire, so a script can answer them by id. The frames
//! are read only when every task of the handler waits, exactly as they would
//! arrive from a real host after the requests were written.
//!
//! ```
//! use flow_sdk::testing::{reply, root, run_scripted};
//! use flow_sdk::{CapabilityCall, RunResult};
//! use serde_json::json;
//!
//! let transcript = run_scripted(
//!     &[root(json!("k")), reply("component:1", json!({"value": 7}))],
//!     |ctx| async move {
//!         let value = ctx
//!             .call_capability(CapabilityCall {
//!                 operation_id: "get:1".into(),
//!                 slot: "store".into(),
//!                 method: "get".into(),
//!                 input: ctx.input().clone(),
//!                 ..Default::default()
//!             })
//!             .await?;
//!         Ok::<_, flow_sdk::CallError>(RunResult::done(value))
//!     },
//! );
//! assert_eq!(transcript.status, flow_sdk::EXIT_ANSWERED);
//! assert_eq!(transcript.requests()[0]["params"]["operationId"], "get:1");
//! assert_eq!(transcript.root_result(), Some(&json!({"outcome": "done", "output": 7})));
//! ```

use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::rc::Rc;

use flow::json::Value;
use flow::wire::RunResult;
use serde_json::json;

use crate::context::RunContext;
use crate::error::HandlerError;

/// The request id [`root`] gives the root `flow/run`.
pub const ROOT_ID: &str = "host:1";

/// What a scripted Run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    /// The status [`crate::handle`] would exit with.
    pub status: i32,
    /// Every frame the component wrote, in order.
    pub frames: Vec<Value>,
}

impl Transcript {
    /// The requests the component made (frames with a `method` and an `id`).
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let script = [root(json!(null)), reply("component:1", json!({"value": 1}))];
    /// let t = run_scripted(&script, |ctx| async move {
    ///     let call = CapabilityCall { operation_id: "a:1".into(), ..Default::default() };
    ///     let call = CapabilityCall { slot: "s".into(), method: "m".into(), ..call };
    ///     Ok::<_, HandlerError>(RunResult::done(ctx.call_capability(call).await?))
    /// });
    /// assert_eq!(t.requests().len(), 1);
    /// assert_eq!(t.requests()[0]["id"], "component:1");
    /// ```
    pub fn requests(&self) -> Vec<&Value> {
        self.frames
            .iter()
            .filter(|f| f.get("method").is_some() && f.get("id").is_some())
            .collect()
    }

    /// The `request/cancel` targets the component sent, in order.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!(null)), cancel_root()], |ctx| async move {
    ///     ctx.cancelled().await;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(null)))
    /// });
    /// assert!(t.cancels().is_empty());
    /// ```
    pub fn cancels(&self) -> Vec<&str> {
        self.frames
            .iter()
            .filter(|f| f["method"] == "request/cancel")
            .filter_map(|f| f["params"]["requestId"].as_str())
            .collect()
    }

    /// The root success result, if the root succeeded.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!(2))], |ctx| async move {
    ///     Ok::<_, HandlerError>(RunResult::done(ctx.input().clone()))
    /// });
    /// assert_eq!(t.root_result(), Some(&json!({"outcome": "done", "output": 2})));
    /// ```
    pub fn root_result(&self) -> Option<&Value> {
        self.root_response().and_then(|f| f.get("result"))
    }

    /// The root failure's Run/1 code (`error.data.code`), if the root failed.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!(null))], |_| async move {
    ///     Err::<RunResult, HandlerError>("not an operational error".into())
    /// });
    /// assert_eq!(t.root_error_code(), Some("EXECUTION_FAILED"));
    /// ```
    pub fn root_error_code(&self) -> Option<&str> {
        self.root_response()
            .and_then(|f| f.get("error"))
            .and_then(|e| e["data"]["code"].as_str())
    }

    fn root_response(&self) -> Option<&Value> {
        self.frames
            .iter()
            .find(|f| f["id"] == ROOT_ID && f.get("method").is_none())
    }
}

/// A root `flow/run` request (id [`ROOT_ID`]) with `input`, no settings,
/// attachments or channels.
///
/// # Example
///
/// ```
/// # use flow_sdk::testing::*;
/// # use flow_sdk::*;
/// # use serde_json::json;
/// assert_eq!(root(json!(1))["params"]["input"], 1);
/// assert_eq!(root(json!(1))["id"], ROOT_ID);
/// ```
pub fn root(input: Value) -> Value {
    root_with_channels(input, json!({}))
}

/// A root `flow/run` whose invocation holds the given channel grants.
///
/// # Example
///
/// ```
/// # use flow_sdk::testing::*;
/// # use flow_sdk::*;
/// # use serde_json::json;
/// let grant = json!({"endpoint": "e:w", "direction": "send", "delivery": "direct"});
/// let run = root_with_channels(json!(null), json!({"events": grant}));
/// assert_eq!(run["params"]["channels"]["events"]["endpoint"], "e:w");
/// ```
pub fn root_with_channels(input: Value, channels: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": ROOT_ID, "method": "flow/run", "params": {
        "protocol": "run/1", "input": input, "settings": {}, "attachments": {},
        "channels": channels, "scratch": "/scratch", "deadlineUnixMs": 4_102_444_800_000u64,
    }})
}

/// A success response to the component request `id`.
///
/// # Example
///
/// ```
/// # use flow_sdk::testing::*;
/// # use flow_sdk::*;
/// # use serde_json::json;
/// assert_eq!(reply("component:1", json!(null))["result"], json!(null));
/// ```
pub fn reply(id: &str, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A `-32000` operational failure with Run/1 `code` for request `id`.
///
/// # Example
///
/// ```
/// # use flow_sdk::testing::*;
/// # use flow_sdk::*;
/// # use serde_json::json;
/// let script = [root(json!(null)), fail("component:1", "UNAVAILABLE")];
/// let t = run_scripted(&script, |ctx| async move {
///     let child = ctx.run_child_flow(ChildFlowRequest {
///         operation_id: "c:1".into(),
///         slot: "child".into(),
///         ..Default::default()
///     });
///     Ok::<_, HandlerError>(RunResult::done(json!(child.await.unwrap_err().code.as_str())))
/// });
/// assert_eq!(t.root_result().unwrap()["output"], "UNAVAILABLE");
/// ```
pub fn fail(id: &str, code: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {
        "code": -32000, "message": code, "data": {"code": code}}})
}

/// The host's root cancellation notification.
///
/// # Example
///
/// ```
/// # use flow_sdk::testing::*;
/// # use flow_sdk::*;
/// # use serde_json::json;
/// assert_eq!(cancel_root()["params"]["requestId"], ROOT_ID);
/// ```
pub fn cancel_root() -> Value {
    json!({"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": ROOT_ID}})
}

/// Serves `handler` with `host_frames` as the whole of protocol stdin and
/// returns what it wrote. Uses [`crate::serve`].
///
/// # Example
///
/// ```
/// # use flow_sdk::testing::*;
/// # use flow_sdk::*;
/// # use serde_json::json;
/// let t = run_scripted(&[root(json!(null))], |_| async move {
///     Ok::<_, HandlerError>(RunResult::done(json!("ok")))
/// });
/// assert_eq!(t.status, EXIT_ANSWERED);
/// assert_eq!(t.frames.len(), 1);
/// ```
pub fn run_scripted<F, Fut, E>(host_frames: &[Value], handler: F) -> Transcript
where
    F: FnOnce(RunContext) -> Fut,
    Fut: Future<Output = Result<RunResult, E>>,
    E: Into<HandlerError>,
{
    let mut input = Vec::new();
    for frame in host_frames {
        input.extend(frame.to_string().into_bytes());
        input.push(b'\n');
    }
    let out = Capture::default();
    let status = crate::serve(input.as_slice(), Box::new(out.clone()), handler);
    let bytes = out.0.borrow();
    let frames = bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap_or(Value::Null))
        .collect();
    Transcript { status, frames }
}

#[derive(Clone, Default)]
struct Capture(Rc<RefCell<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
