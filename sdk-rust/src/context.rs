//! What a handler sees: the invocation context, its cancellation signal,
//! and the two outbound calls.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use flow::json::Value;
use flow::wire::{
    Attachment, CapabilityCallParams, CapabilityResult, ChannelGrant, ErrorCode, FlowRunParams,
    MAX_INTENT_CHARS, Method, RunChildParams, RunResult, is_local_name, is_wire_id,
};
use serde_json::Map;

use crate::error::{CallError, CapabilityError, OperationError};
use crate::peer::Peer;

/// A request to run a Flow through an admitted child slot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChildFlowRequest {
    /// Stable semantic identity chosen by component code.
    pub operation_id: String,
    pub slot: String,
    pub input: Value,
    pub intent: Option<String>,
    /// Callee channel name -> held endpoint reference.
    pub channels: BTreeMap<String, String>,
}

/// A call of one method through a bound capability slot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapabilityCall {
    /// Stable semantic identity chosen by component code.
    pub operation_id: String,
    pub slot: String,
    pub method: String,
    pub input: Value,
    /// Callee channel name -> held endpoint reference.
    pub channels: BTreeMap<String, String>,
}

/// The context of the one root Run this process serves.
///
/// Cheap to clone; every clone talks to the same channel.
#[derive(Clone)]
pub struct RunContext {
    params: Rc<FlowRunParams>,
    pub(crate) peer: Rc<RefCell<Peer>>,
}

impl RunContext {
    pub(crate) fn new(params: FlowRunParams, peer: Rc<RefCell<Peer>>) -> Self {
        peer.borrow_mut().hold_granted(&params.channels);
        RunContext {
            params: Rc::new(params),
            peer,
        }
    }

    /// The invocation input.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!({"n": 1}))], |ctx| async move {
    ///     Ok::<_, HandlerError>(RunResult::done(ctx.input()["n"].clone()))
    /// });
    /// assert_eq!(t.root_result(), Some(&json!({"outcome": "done", "output": 1})));
    /// ```
    pub fn input(&self) -> &Value {
        &self.params.input
    }

    /// The complete configured settings object.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let mut run = root(json!(null));
    /// run["params"]["settings"] = json!({"model": "small"});
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     Ok::<_, HandlerError>(RunResult::done(ctx.settings()["model"].clone()))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "small");
    /// ```
    pub fn settings(&self) -> &Map<String, Value> {
        &self.params.settings
    }

    /// Attachment name -> sandbox-local root and access mode.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let mut run = root(json!(null));
    /// run["params"]["attachments"] = json!({"docs": {"path": "/in/docs", "access": "read"}});
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let docs = &ctx.attachments()["docs"];
    ///     assert_eq!(docs.access, Access::Read);
    ///     Ok::<_, HandlerError>(RunResult::done(json!(docs.path)))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "/in/docs");
    /// ```
    pub fn attachments(&self) -> &BTreeMap<String, Attachment> {
        &self.params.attachments
    }

    /// Host-granted channel endpoints by name.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let events = json!({"endpoint": "e:1", "direction": "send", "delivery": "direct"});
    /// let run = root_with_channels(json!(null), json!({"events": events}));
    /// let t = run_scripted(&[run], |ctx| async move {
    ///     let names: Vec<&String> = ctx.channels().keys().collect();
    ///     Ok::<_, HandlerError>(RunResult::done(json!(names)))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], json!(["events"]));
    /// ```
    pub fn channels(&self) -> &BTreeMap<String, ChannelGrant> {
        &self.params.channels
    }

    /// The private read-write scratch root.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!(null))], |ctx| async move {
    ///     Ok::<_, HandlerError>(RunResult::done(json!(ctx.scratch())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "/scratch");
    /// ```
    pub fn scratch(&self) -> &str {
        &self.params.scratch
    }

    /// The host-enforced deadline (UTC Unix milliseconds). Advisory: the SDK
    /// runs no timer; the host enforces it.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!(null))], |ctx| async move {
    ///     Ok::<_, HandlerError>(RunResult::done(json!(ctx.deadline_unix_ms())))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], 4_102_444_800_000u64);
    /// ```
    pub fn deadline_unix_ms(&self) -> u64 {
        self.params.deadline_unix_ms
    }

    /// Whether the host cancelled the root Run.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let script = [root(json!(null)), cancel_root(), reply("component:1", json!({"value": 1}))];
    /// let t = run_scripted(&script, |ctx| async move {
    ///     let call = ctx.call_capability(CapabilityCall {
    ///         operation_id: "slow:1".into(),
    ///         slot: "sink".into(),
    ///         method: "write".into(),
    ///         ..Default::default()
    ///     });
    ///     let outcome = call.await;
    ///     assert!(ctx.is_cancelled());
    ///     assert_eq!(outcome.unwrap_err().code(), Some(ErrorCode::Cancelled));
    ///     Ok::<_, HandlerError>(RunResult::done(json!(null)))
    /// });
    /// // The SDK cancelled the open call once and answered the root CANCELLED.
    /// assert_eq!(t.cancels(), ["component:1"]);
    /// assert_eq!(t.root_error_code(), Some("CANCELLED"));
    /// ```
    pub fn is_cancelled(&self) -> bool {
        self.peer.borrow().root_cancelled()
    }

    /// Resolves when the host cancels the root Run.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let t = run_scripted(&[root(json!(null)), cancel_root()], |ctx| async move {
    ///     ctx.cancelled().await;
    ///     Ok::<_, HandlerError>(RunResult::done(json!("stopped")))
    /// });
    /// assert_eq!(t.root_error_code(), Some("CANCELLED"));
    /// ```
    pub fn cancelled(&self) -> Cancelled {
        Cancelled {
            peer: self.peer.clone(),
        }
    }

    /// Runs a Flow through an admitted child slot and returns its complete
    /// result. The request is admitted (and, window permitting, written) when
    /// this is called, not when it is first awaited.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let child = json!({"outcome": "done", "output": {"target": "rugby"}});
    /// let t = run_scripted(&[root(json!("football")), reply("component:1", child)], |ctx| async move {
    ///     let research = ctx
    ///         .run_child_flow(ChildFlowRequest {
    ///             operation_id: "research:1".into(),
    ///             slot: "research".into(),
    ///             input: ctx.input().clone(),
    ///             intent: Some("Find a useful comparison target.".into()),
    ///             ..Default::default()
    ///         })
    ///         .await?;
    ///     Ok::<_, HandlerError>(RunResult::done(research.output))
    /// });
    /// assert_eq!(t.requests()[0]["method"], "flow/run-child");
    /// assert_eq!(t.root_result().unwrap()["output"], json!({"target": "rugby"}));
    /// ```
    pub fn run_child_flow(&self, request: ChildFlowRequest) -> ChildFlowCall {
        let checked = check_call(&request.operation_id, &request.slot, None, &request.input)
            .and_then(|()| match &request.intent {
                Some(i) if i.is_empty() || i.chars().count() > MAX_INTENT_CHARS => Err(invalid(
                    format!("intent must have 1-{MAX_INTENT_CHARS} characters"),
                )),
                _ => Ok(()),
            })
            .and_then(|()| check_refs(&request.channels));
        let params = RunChildParams {
            operation_id: request.operation_id,
            slot: request.slot,
            intent: request.intent,
            input: request.input,
            channels: request.channels,
        };
        Call::start(
            &self.peer,
            checked.map(|()| (Method::RunChild, params.to_value())),
            child_result,
        )
    }

    /// Calls one capability method and unwraps its `{value}`. A declared
    /// application error is [`CallError::Capability`].
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let missing = json!({"error": {"name": "not-found", "data": null}});
    /// let t = run_scripted(&[root(json!(null)), reply("component:1", missing)], |ctx| async move {
    ///     let read = ctx
    ///         .call_capability(CapabilityCall {
    ///             operation_id: "missing:1".into(),
    ///             slot: "artifacts".into(),
    ///             method: "read".into(),
    ///             input: json!({"uri": "artifact://missing"}),
    ///             ..Default::default()
    ///         })
    ///         .await;
    ///     let name = match read {
    ///         Err(CallError::Capability(e)) => e.error_name,
    ///         other => panic!("unexpected {other:?}"),
    ///     };
    ///     Ok::<_, HandlerError>(RunResult::done(json!(name)))
    /// });
    /// assert_eq!(t.root_result().unwrap()["output"], "not-found");
    /// ```
    pub fn call_capability(&self, call: CapabilityCall) -> CapabilityCallFuture {
        let checked = check_call(
            &call.operation_id,
            &call.slot,
            Some(&call.method),
            &call.input,
        )
        .and_then(|()| check_refs(&call.channels));
        let params = CapabilityCallParams {
            operation_id: call.operation_id,
            slot: call.slot,
            method: call.method,
            input: call.input,
            channels: call.channels,
        };
        Call::start(
            &self.peer,
            checked.map(|()| (Method::CapabilityCall, params.to_value())),
            capability_result,
        )
    }
}

fn invalid(message: impl Into<String>) -> OperationError {
    OperationError::new(ErrorCode::InvalidInput, message)
}

fn check_call(
    operation_id: &str,
    slot: &str,
    method: Option<&str>,
    input: &Value,
) -> Result<(), OperationError> {
    if !is_wire_id(operation_id) {
        return Err(invalid(format!(
            "operationId {operation_id:?} is not a valid token"
        )));
    }
    if !is_local_name(slot) {
        return Err(invalid(format!("slot {slot:?} is not a LocalName")));
    }
    if let Some(m) = method
        && !is_local_name(m)
    {
        return Err(invalid(format!("method {m:?} is not a LocalName")));
    }
    flow::json::check(input).map_err(|e| invalid(format!("input is not JSON/1: {e}")))
}

fn check_refs(refs: &BTreeMap<String, String>) -> Result<(), OperationError> {
    if refs.len() > flow::wire::MAX_CHANNELS {
        return Err(invalid("too many channel mappings"));
    }
    match refs
        .iter()
        .find(|(k, v)| !is_local_name(k) || !is_wire_id(v))
    {
        Some((k, _)) => Err(invalid(format!("channel mapping {k:?} is invalid"))),
        None => Ok(()),
    }
}

fn child_result(
    r: Result<Value, OperationError>,
    _: &Rc<RefCell<Peer>>,
) -> Result<RunResult, OperationError> {
    let v = r?;
    // The peer validated the shape before settling the call.
    RunResult::from_value(&v)
        .map_err(|e| OperationError::new(ErrorCode::InvalidResult, e.to_string()))
}

fn capability_result(
    r: Result<Value, OperationError>,
    _: &Rc<RefCell<Peer>>,
) -> Result<Value, CallError> {
    let v = r?;
    match CapabilityResult::from_value(&v) {
        Ok(CapabilityResult::Value(v)) => Ok(v),
        Ok(CapabilityResult::Error { name, data }) => Err(CallError::Capability(CapabilityError {
            error_name: name,
            data,
        })),
        Err(e) => Err(OperationError::new(ErrorCode::InvalidResult, e.to_string()).into()),
    }
}

/// The future of `run_child_flow`.
pub type ChildFlowCall = Call<Result<RunResult, OperationError>>;
/// The future of `call_capability`.
pub type CapabilityCallFuture = Call<Result<Value, CallError>>;

/// Turns a settled wire outcome into the call's output.
pub(crate) type Finish<O> = fn(Result<Value, OperationError>, &Rc<RefCell<Peer>>) -> O;

enum CallState<O> {
    Ready(Option<O>),
    Live(u64),
}

/// One outbound call. Await it for the result, or [`Call::cancel`] it to stop
/// waiting.
///
/// Dropping a call that has neither settled nor been cancelled abandons owned
/// work: the SDK still sends `request/cancel` and waits for the response, but
/// the root Run can then no longer succeed (`EXECUTION_FAILED`). Cancel first
/// when you stop waiting on purpose (for example the loser of a race).
#[must_use = "a call that is dropped unfinished abandons owned work"]
pub struct Call<O> {
    peer: Rc<RefCell<Peer>>,
    state: CallState<O>,
    finish: Finish<O>,
}

impl<O> Call<O> {
    pub(crate) fn start(
        peer: &Rc<RefCell<Peer>>,
        request: Result<(Method, Value), OperationError>,
        finish: Finish<O>,
    ) -> Self {
        let admitted = request.and_then(|(m, p)| peer.borrow_mut().admit(m, p));
        Call::from_admission(peer, admitted, finish)
    }

    /// A call for an already made admission decision.
    pub(crate) fn from_admission(
        peer: &Rc<RefCell<Peer>>,
        admitted: Result<u64, OperationError>,
        finish: Finish<O>,
    ) -> Self {
        let state = match admitted {
            Ok(key) => CallState::Live(key),
            Err(e) => CallState::Ready(Some(finish(Err(e), peer))),
        };
        Call {
            peer: peer.clone(),
            state,
            finish,
        }
    }

    /// A call that is already settled locally; nothing reaches the wire.
    pub(crate) fn ready(peer: &Rc<RefCell<Peer>>, out: O) -> Self {
        Call {
            peer: peer.clone(),
            state: CallState::Ready(Some(out)),
            finish: |_, _| unreachable!("a ready call is never finished again"),
        }
    }

    /// Cancels this local wait. If the request reached the wire the SDK sends
    /// `request/cancel` and keeps waiting for its response internally; the
    /// call itself now resolves to `CANCELLED` unless it already settled.
    /// This is deliberate cancellation, not abandonment.
    ///
    /// # Example
    ///
    /// ```
    /// # use flow_sdk::testing::*;
    /// # use flow_sdk::*;
    /// # use serde_json::json;
    /// let late = json!({"outcome": "done", "output": null});
    /// let t = run_scripted(&[root(json!(null)), reply("component:1", late)], |ctx| async move {
    ///     let mut child = ctx.run_child_flow(ChildFlowRequest {
    ///         operation_id: "child:1".into(),
    ///         slot: "child".into(),
    ///         ..Default::default()
    ///     });
    ///     child.cancel();
    ///     let code = child.await.unwrap_err().code;
    ///     Ok::<_, HandlerError>(RunResult::done(json!(code.as_str())))
    /// });
    /// // request/cancel went out; the late response was absorbed by the SDK.
    /// assert_eq!(t.cancels(), ["component:1"]);
    /// assert_eq!(t.root_result().unwrap()["output"], "CANCELLED");
    /// ```
    pub fn cancel(&mut self) {
        if let CallState::Live(key) = self.state {
            let settled = self.peer.borrow_mut().poll_settled(key);
            let out = match settled {
                Some(r) => (self.finish)(r, &self.peer),
                None => {
                    self.peer.borrow_mut().cancel_call(key);
                    (self.finish)(Err(OperationError::cancelled()), &self.peer)
                }
            };
            self.state = CallState::Ready(Some(out));
        }
    }
}

// The output is only ever moved out whole, never pinned in place.
impl<O> Unpin for Call<O> {}

impl<O> Future for Call<O> {
    type Output = O;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        let this = self.get_mut();
        match &mut this.state {
            CallState::Ready(out) => match out.take() {
                Some(o) => Poll::Ready(o),
                None => panic!("a flow-sdk call was polled after it completed"),
            },
            CallState::Live(key) => {
                let key = *key;
                let polled = this.peer.borrow_mut().poll_call(key, cx);
                match polled {
                    Poll::Ready(r) => {
                        this.state = CallState::Ready(None);
                        Poll::Ready((this.finish)(r, &this.peer))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<O> Drop for Call<O> {
    fn drop(&mut self) {
        if let CallState::Live(key) = self.state
            && let Ok(mut peer) = self.peer.try_borrow_mut()
        {
            peer.drop_call(key);
        }
    }
}

/// Resolves when the root Run is cancelled.
pub struct Cancelled {
    peer: Rc<RefCell<Peer>>,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut peer = self.peer.borrow_mut();
        if peer.root_cancelled() {
            Poll::Ready(())
        } else {
            peer.register_cancel_waker(cx.waker());
            Poll::Pending
        }
    }
}
