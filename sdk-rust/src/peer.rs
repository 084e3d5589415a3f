//! The component side of one Run/1 channel: outbound call records, the
//! 64-on-the-wire window, the lifetime budget, tombstones, root cancellation
//! and response correlation. The executor in `run` feeds it frames; the call
//! futures in `context` poll it.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::task::{Context, Poll, Waker};

use flow::json::Value;
use flow::wire::{
    self, CapabilityResult, ChannelDirection, ChannelGrant, ChannelResult, ErrorCode,
    MAX_FRAME_BYTES, MAX_LIFETIME_REQUESTS, MAX_PENDING_REQUESTS, Message, Method, RpcError,
    RunResult,
};

use crate::error::OperationError;

/// The longest transport ID this SDK can emit, used to size-check a request
/// before it is admitted.
const LONGEST_TRANSPORT_ID: &str = "component:65536";

/// What the SDK knows about one receive endpoint this invocation holds.
#[derive(Debug, Clone)]
pub(crate) struct ReceiverState {
    /// The sequence the next item must carry.
    pub(crate) next_sequence: u64,
    /// Activated receivers must reach end, failure or disposal.
    pub(crate) activated: bool,
    /// A `channel/next` is outstanding.
    pub(crate) reading: bool,
    pub(crate) ended: bool,
    /// Sticky terminal failure of a read. It settles the receiver: the host
    /// already holds the cause, so no `channel/release` follows it unless
    /// the handler releases the receiver (then exactly one).
    pub(crate) failure: Option<OperationError>,
    /// Released (disposed) locally or on the wire.
    pub(crate) disposed: bool,
}

impl ReceiverState {
    fn finished(&self) -> bool {
        self.ended || self.failure.is_some() || self.disposed
    }
}

/// Whether a request settles an endpoint; such requests may use the
/// reserved window slot and lifetime IDs.
fn is_settlement(method: Method) -> bool {
    matches!(method, Method::ChannelClose | Method::ChannelRelease)
}

struct CallRecord {
    method: Method,
    /// The endpoint a `channel/*` request names.
    endpoint: Option<String>,
    params: Value,
    wire_id: Option<String>,
    response: Option<Result<Value, OperationError>>,
    waker: Option<Waker>,
    /// The local wait was cancelled (root cancellation); its future yields
    /// `CANCELLED` unless a response already won.
    cancelled: bool,
    /// No future observes this record any more; it is a tombstone kept until
    /// its response so a late response is not an unknown ID.
    detached: bool,
    cancel_sent: bool,
}

pub(crate) struct Peer {
    out: Box<dyn Write>,
    fatal: Option<OperationError>,
    next_wire: u64,
    admitted: u64,
    next_key: u64,
    records: BTreeMap<u64, CallRecord>,
    on_wire: BTreeMap<String, u64>,
    queue: VecDeque<u64>,
    settle_queue: VecDeque<u64>,
    receivers: BTreeMap<String, ReceiverState>,
    /// Send endpoints this invocation allocated and has not closed.
    open_senders: BTreeMap<String, ()>,
    root_cancelled: bool,
    cancel_wakers: Vec<Waker>,
    closed: bool,
    abandoned: bool,
}

impl Peer {
    pub(crate) fn new(out: Box<dyn Write>) -> Self {
        Peer {
            out,
            fatal: None,
            next_wire: 0,
            admitted: 0,
            next_key: 0,
            records: BTreeMap::new(),
            on_wire: BTreeMap::new(),
            queue: VecDeque::new(),
            settle_queue: VecDeque::new(),
            receivers: BTreeMap::new(),
            open_senders: BTreeMap::new(),
            root_cancelled: false,
            cancel_wakers: Vec::new(),
            closed: false,
            abandoned: false,
        }
    }

    pub(crate) fn fatal(&self) -> Option<&OperationError> {
        self.fatal.as_ref()
    }

    /// Records a fatal channel condition; nothing more is written.
    pub(crate) fn fail(&mut self, code: ErrorCode, message: impl Into<String>) {
        if self.fatal.is_none() {
            let e = OperationError::new(code, message);
            eprintln!("flow-sdk: {e}");
            self.fatal = Some(e);
            self.wake_all();
        }
    }

    /// Writes and flushes one frame; a failed write is `CHANNEL_LOST`.
    pub(crate) fn send(&mut self, message: &Message) {
        if self.fatal.is_some() {
            return;
        }
        let bytes = wire::encode(message);
        if let Err(e) = self.out.write_all(&bytes).and_then(|()| self.out.flush()) {
            self.fail(
                ErrorCode::ChannelLost,
                format!("protocol write failed: {e}"),
            );
        }
    }

    pub(crate) fn root_cancelled(&self) -> bool {
        self.root_cancelled
    }

    pub(crate) fn abandoned(&self) -> bool {
        self.abandoned
    }

    /// Stops admission: the handler has settled.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    /// Requests still awaiting their response on the wire (tombstones included).
    pub(crate) fn on_wire(&self) -> usize {
        self.on_wire.len()
    }

    pub(crate) fn register_cancel_waker(&mut self, waker: &Waker) {
        self.cancel_wakers.push(waker.clone());
    }

    fn wake_all(&mut self) {
        for w in self.cancel_wakers.drain(..) {
            w.wake();
        }
        for r in self.records.values_mut() {
            if let Some(w) = r.waker.take() {
                w.wake();
            }
        }
    }

    /// Admits one outbound call or refuses it locally without emitting a frame.
    pub(crate) fn admit(&mut self, method: Method, params: Value) -> Result<u64, OperationError> {
        self.admit_as(method, params, false)
    }

    /// `disposal`: the SDK's own release of a receiver, which root
    /// cancellation does not stop (cancelling an active read disposes its
    /// receiver, Run/1 §5.1).
    fn admit_as(
        &mut self,
        method: Method,
        params: Value,
        disposal: bool,
    ) -> Result<u64, OperationError> {
        if let Some(f) = &self.fatal {
            return Err(f.clone());
        }
        if self.closed && !is_settlement(method) {
            return Err(OperationError::new(
                ErrorCode::OwnerClosed,
                "the root handler has settled; no more calls are admitted",
            ));
        }
        if self.root_cancelled && !disposal {
            return Err(OperationError::cancelled());
        }
        let reserve = if is_settlement(method) {
            0
        } else {
            self.settlement_reserve()
        };
        if self.admitted + reserve >= MAX_LIFETIME_REQUESTS {
            return Err(OperationError::new(
                ErrorCode::ResourceExhausted,
                format!("this channel already carried {MAX_LIFETIME_REQUESTS} requests"),
            ));
        }
        let probe = Message::request(LONGEST_TRANSPORT_ID, method, params);
        if wire::encode(&probe).len() - 1 > MAX_FRAME_BYTES {
            return Err(OperationError::new(
                ErrorCode::InvalidInput,
                format!("the request would exceed {MAX_FRAME_BYTES} bytes"),
            ));
        }
        let Message::Request {
            params: Some(params),
            ..
        } = probe
        else {
            unreachable!("Message::request always carries params")
        };
        self.admitted += 1;
        let key = self.next_key;
        self.next_key += 1;
        let endpoint = params
            .get("endpoint")
            .and_then(Value::as_str)
            .map(str::to_string);
        self.records.insert(
            key,
            CallRecord {
                method,
                endpoint,
                params,
                wire_id: None,
                response: None,
                waker: None,
                cancelled: false,
                detached: false,
                cancel_sent: false,
            },
        );
        if is_settlement(method) {
            self.settle_queue.push_back(key);
        } else {
            self.queue.push_back(key);
        }
        self.pump();
        Ok(key)
    }

    /// Lifetime request IDs held back so every allocated endpoint can still
    /// be closed or released.
    fn settlement_reserve(&self) -> u64 {
        let receivers = self.receivers.values().filter(|r| !r.finished()).count();
        (receivers + self.open_senders.len()) as u64
    }

    /// Whether any endpoint still needs settlement; then one window slot is
    /// kept for close/release.
    fn holds_endpoints(&self) -> bool {
        self.settlement_reserve() > 0
    }

    /// The receiver state for an endpoint, if this invocation holds it.
    pub(crate) fn receiver(&mut self, endpoint: &str) -> Option<&mut ReceiverState> {
        self.receivers.get_mut(endpoint)
    }

    /// Records a receive grant this invocation now holds.
    pub(crate) fn hold_receiver(&mut self, grant: &ChannelGrant, activated: bool) {
        self.receivers
            .entry(grant.endpoint.clone())
            .or_insert(ReceiverState {
                next_sequence: grant.start_sequence.unwrap_or(1),
                activated,
                reading: false,
                ended: false,
                failure: None,
                disposed: false,
            });
    }

    /// An activated receiver left unfinished at handler settlement is
    /// abandonment.
    pub(crate) fn note_unfinished_receivers(&mut self) {
        if self
            .receivers
            .values()
            .any(|r| r.activated && !r.finished())
        {
            self.abandoned = true;
        }
    }

    /// Moves queued calls onto the wire while the window has room.
    fn pump(&mut self) {
        // After root cancellation only settlement (receiver disposal) is
        // still written; the ordinary queue was cleared.
        while self.fatal.is_none() && self.on_wire.len() < MAX_PENDING_REQUESTS {
            let ordinary_room = !self.root_cancelled
                && self.on_wire.len() + usize::from(self.holds_endpoints()) < MAX_PENDING_REQUESTS;
            let next = match self.settle_queue.pop_front() {
                Some(key) => Some(key),
                None if ordinary_room => self.queue.pop_front(),
                None => None,
            };
            let Some(key) = next else {
                break;
            };
            let Some(rec) = self.records.get_mut(&key) else {
                continue;
            };
            self.next_wire += 1;
            let id = format!("component:{}", self.next_wire);
            rec.wire_id = Some(id.clone());
            let params = std::mem::replace(&mut rec.params, Value::Null);
            let message = Message::request(id.clone(), rec.method, params);
            self.on_wire.insert(id, key);
            self.send(&message);
        }
    }

    /// Polls the local wait of one call.
    pub(crate) fn poll_call(
        &mut self,
        key: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Value, OperationError>> {
        if let Some(f) = &self.fatal {
            return Poll::Ready(Err(f.clone()));
        }
        let Some(rec) = self.records.get_mut(&key) else {
            return Poll::Ready(Err(OperationError::cancelled()));
        };
        if let Some(response) = rec.response.take() {
            self.records.remove(&key);
            return Poll::Ready(response);
        }
        if rec.cancelled {
            self.release(key);
            return Poll::Ready(Err(OperationError::cancelled()));
        }
        rec.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Takes a response that already settled the call, if any.
    pub(crate) fn poll_settled(&mut self, key: u64) -> Option<Result<Value, OperationError>> {
        let response = self.records.get_mut(&key)?.response.take()?;
        self.records.remove(&key);
        Some(response)
    }

    /// Explicit local cancellation by the caller: not abandonment.
    pub(crate) fn cancel_call(&mut self, key: u64) {
        self.release(key);
    }

    /// The caller dropped its wait. Dropping an unsettled call that was not
    /// cancelled first abandons owned work, which refuses root success.
    pub(crate) fn drop_call(&mut self, key: u64) {
        if let Some(rec) = self.records.get(&key)
            && rec.response.is_none()
            && !rec.cancelled
            && !rec.detached
        {
            self.abandoned = true;
        }
        self.release(key);
    }

    /// Detaches the observer: a queued call disappears, a call on the wire is
    /// cancelled once and kept as a tombstone until its response.
    fn release(&mut self, key: u64) {
        let Some(rec) = self.records.get_mut(&key) else {
            return;
        };
        if rec.response.is_some() {
            self.records.remove(&key);
            return;
        }
        match rec.wire_id.clone() {
            None => {
                self.records.remove(&key);
                self.queue.retain(|k| *k != key);
            }
            Some(id) => {
                rec.detached = true;
                rec.waker = None;
                let dispose = (rec.method == Method::ChannelNext)
                    .then(|| rec.endpoint.clone())
                    .flatten();
                if !rec.cancel_sent {
                    rec.cancel_sent = true;
                    self.send(&Message::cancel(id));
                }
                // Cancelling an active read disposes its receiver; the read
                // and the disposal responses are drained as tombstones.
                if let Some(endpoint) = dispose {
                    self.dispose_receiver(&endpoint);
                }
            }
        }
    }

    /// Sends `channel/release` for a receiver once, as a detached request.
    pub(crate) fn dispose_receiver(&mut self, endpoint: &str) {
        let Some(r) = self.receivers.get_mut(endpoint) else {
            return;
        };
        if r.disposed {
            return;
        }
        r.disposed = true;
        let params = serde_json::json!({ "endpoint": endpoint });
        if let Ok(key) = self.admit_as(Method::ChannelRelease, params, true)
            && let Some(rec) = self.records.get_mut(&key)
        {
            rec.detached = true;
            rec.cancelled = true;
        }
    }

    /// Root cancellation: one `request/cancel` per open call, queued calls
    /// never reach the wire, every local wait resolves `CANCELLED`.
    pub(crate) fn cancel_root(&mut self) {
        if self.root_cancelled {
            return;
        }
        self.root_cancelled = true;
        let mut cancels = Vec::new();
        let mut reading = Vec::new();
        for rec in self.records.values_mut() {
            if rec.response.is_some() {
                continue;
            }
            rec.cancelled = true;
            if let Some(id) = &rec.wire_id
                && !rec.cancel_sent
            {
                rec.cancel_sent = true;
                cancels.push(id.clone());
                if rec.method == Method::ChannelNext {
                    reading.extend(rec.endpoint.clone());
                }
            }
        }
        self.queue.clear();
        for id in cancels {
            self.send(&Message::cancel(id));
        }
        // Each cancelled active read disposes its receiver; the read and
        // release responses are drained before the root answers.
        for endpoint in reading {
            self.dispose_receiver(&endpoint);
        }
        self.wake_all();
    }

    /// Correlates one response from the host. An unknown ID, a malformed
    /// result or a standard JSON-RPC error is fatal.
    pub(crate) fn on_response(&mut self, id: Option<&str>, outcome: Result<Value, RpcError>) {
        let Some(id) = id else {
            let detail = match &outcome {
                Err(e) => format!("{} {}", e.code, e.message),
                Ok(_) => "result".into(),
            };
            self.fail(
                ErrorCode::ProtocolError,
                format!("the host rejected a frame: {detail}"),
            );
            return;
        };
        let Some(key) = self.on_wire.remove(id) else {
            self.fail(
                ErrorCode::ProtocolError,
                format!("response for unknown or settled request {id:?}"),
            );
            return;
        };
        let Some(rec) = self.records.get_mut(&key) else {
            return;
        };
        let settled = match outcome {
            Ok(result) => {
                let valid = match rec.method {
                    Method::RunChild => RunResult::from_value(&result).map(|_| ()),
                    Method::CapabilityCall => CapabilityResult::from_value(&result).map(|_| ()),
                    m => match ChannelResult::from_value(&result) {
                        Ok(r) if r.fits(m) => Ok(()),
                        Ok(_) => Err(wire::InvalidParams(format!(
                            "result shape does not answer {}",
                            m.as_str()
                        ))),
                        Err(e) => Err(e),
                    },
                };
                match valid {
                    Ok(()) => Ok(result),
                    Err(e) => {
                        self.fail(
                            ErrorCode::ProtocolError,
                            format!("invalid result for {id:?}: {e}"),
                        );
                        return;
                    }
                }
            }
            Err(rpc) => match rpc.operational() {
                Some(op) => Err(OperationError::from_wire(op)),
                None => {
                    self.fail(
                        ErrorCode::ProtocolError,
                        format!(
                            "standard JSON-RPC error {} for {id:?}: the peers disagree about Run/1",
                            rpc.code
                        ),
                    );
                    return;
                }
            },
        };
        let (method, endpoint) = (rec.method, rec.endpoint.clone());
        if let Err(reason) = self.track_channel(method, endpoint.as_deref(), &settled) {
            self.fail(ErrorCode::ProtocolError, format!("{id:?}: {reason}"));
            return;
        }
        let Some(rec) = self.records.get_mut(&key) else {
            return;
        };
        if rec.detached {
            self.records.remove(&key);
        } else {
            rec.response = Some(settled);
            if let Some(w) = rec.waker.take() {
                w.wake();
            }
        }
        self.pump();
    }
}

impl Peer {
    /// Keeps endpoint state in step with a settled `channel/*` request.
    fn track_channel(
        &mut self,
        method: Method,
        endpoint: Option<&str>,
        settled: &Result<Value, OperationError>,
    ) -> Result<(), String> {
        let result = match settled {
            Ok(v) => ChannelResult::from_value(v).ok(),
            Err(_) => None,
        };
        match (method, result) {
            (Method::ChannelCreate, Some(ChannelResult::Pair { send, receive })) => {
                self.open_senders.insert(send.endpoint, ());
                self.hold_receiver(&receive, false);
            }
            (Method::ChannelCreate, Some(ChannelResult::Broadcast { send, .. })) => {
                self.open_senders.insert(send.endpoint, ());
            }
            (Method::ChannelSubscribe, Some(ChannelResult::Subscription(grant))) => {
                // A new broadcast reader is active owned work even if never read.
                self.hold_receiver(&grant, true);
            }
            (Method::ChannelClose, _) => {
                if let Some(e) = endpoint {
                    self.open_senders.remove(e);
                }
            }
            (Method::ChannelNext, r) => {
                let Some(state) = endpoint.and_then(|e| self.receivers.get_mut(e)) else {
                    return Ok(());
                };
                state.reading = false;
                match (r, settled) {
                    (Some(ChannelResult::Item { sequence, .. }), _) => {
                        if sequence != state.next_sequence {
                            return Err(format!(
                                "item sequence {sequence}, expected {}",
                                state.next_sequence
                            ));
                        }
                        state.next_sequence += 1;
                    }
                    (Some(ChannelResult::End { last_sequence }), _) => {
                        if last_sequence + 1 != state.next_sequence {
                            return Err(format!(
                                "end at {last_sequence}, expected {}",
                                state.next_sequence - 1
                            ));
                        }
                        state.ended = true;
                    }
                    (_, Err(e)) => state.failure = Some(e.clone()),
                    _ => {}
                }
            }
            (Method::ChannelRelease, _) => {
                if let Some(state) = endpoint.and_then(|e| self.receivers.get_mut(e)) {
                    state.disposed = true;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Receive grants handed in by `flow/run`.
    pub(crate) fn hold_granted(&mut self, grants: &BTreeMap<String, ChannelGrant>) {
        for g in grants.values() {
            if g.direction == ChannelDirection::Receive {
                self.hold_receiver(g, false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

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

    fn sent(sink: &Sink) -> Vec<Message> {
        let bytes = sink.0.borrow();
        bytes
            .split(|b| *b == b'\n')
            .filter(|f| !f.is_empty())
            .map(|f| wire::decode(f).unwrap())
            .collect()
    }

    fn params(i: usize) -> Value {
        serde_json::json!({"operationId": format!("op:{i}"), "slot": "sink", "method": "write", "input": i})
    }

    #[test]
    fn window_holds_at_most_64_requests_on_the_wire() {
        let sink = Sink::default();
        let mut peer = Peer::new(Box::new(sink.clone()));
        for i in 0..=MAX_PENDING_REQUESTS {
            peer.admit(Method::CapabilityCall, params(i)).unwrap();
        }
        assert_eq!(sent(&sink).len(), MAX_PENDING_REQUESTS);
        assert_eq!(peer.on_wire(), MAX_PENDING_REQUESTS);
        peer.on_response(Some("component:1"), Ok(serde_json::json!({"value": 1})));
        let all = sent(&sink);
        assert_eq!(all.len(), MAX_PENDING_REQUESTS + 1);
        assert!(
            matches!(&all[MAX_PENDING_REQUESTS], Message::Request { id, .. } if id == "component:65")
        );
        assert!(peer.fatal().is_none());
    }

    #[test]
    fn lifetime_budget_refuses_the_65537th_request_locally() {
        let sink = Sink::default();
        let mut peer = Peer::new(Box::new(sink.clone()));
        for i in 0..MAX_LIFETIME_REQUESTS {
            let key = peer
                .admit(Method::CapabilityCall, params(i as usize))
                .unwrap();
            let id = format!("component:{}", i + 1);
            peer.on_response(Some(&id), Ok(serde_json::json!({"value": null})));
            peer.records.remove(&key);
        }
        let before = sink.0.borrow().len();
        let e = peer.admit(Method::CapabilityCall, params(0)).unwrap_err();
        assert_eq!(e.code, ErrorCode::ResourceExhausted);
        assert_eq!(sink.0.borrow().len(), before, "nothing is emitted");
    }

    #[test]
    fn unknown_response_and_standard_errors_are_fatal() {
        let mut peer = Peer::new(Box::new(Sink::default()));
        peer.on_response(Some("component:9"), Ok(Value::Null));
        assert_eq!(peer.fatal().unwrap().code, ErrorCode::ProtocolError);

        let mut peer = Peer::new(Box::new(Sink::default()));
        peer.admit(Method::CapabilityCall, params(0)).unwrap();
        peer.on_response(
            Some("component:1"),
            Err(RpcError::standard(wire::METHOD_NOT_FOUND, "nope")),
        );
        assert_eq!(peer.fatal().unwrap().code, ErrorCode::ProtocolError);

        let mut peer = Peer::new(Box::new(Sink::default()));
        peer.admit(Method::RunChild, params(0)).unwrap();
        peer.on_response(
            Some("component:1"),
            Ok(serde_json::json!({"outcome": "done"})),
        );
        assert_eq!(peer.fatal().unwrap().code, ErrorCode::ProtocolError);
    }

    #[test]
    fn dropping_a_live_call_cancels_once_and_keeps_a_tombstone() {
        let sink = Sink::default();
        let mut peer = Peer::new(Box::new(sink.clone()));
        let key = peer.admit(Method::CapabilityCall, params(0)).unwrap();
        peer.drop_call(key);
        assert!(peer.abandoned());
        assert_eq!(peer.on_wire(), 1);
        let msgs = sent(&sink);
        assert_eq!(msgs[1], Message::cancel("component:1"));
        peer.cancel_root();
        assert_eq!(sent(&sink).len(), 2, "no second cancel for the same call");
        peer.on_response(Some("component:1"), Ok(serde_json::json!({"value": 1})));
        assert_eq!(peer.on_wire(), 0);
        assert!(
            peer.fatal().is_none(),
            "a late response to a tombstone is not unknown"
        );
    }

    /// A peer holding the direct pair `w` -> `r` (created as `component:1`).
    fn holding_a_pair(sink: &Sink) -> Peer {
        let mut peer = Peer::new(Box::new(sink.clone()));
        peer.admit(Method::ChannelCreate, serde_json::json!({}))
            .unwrap();
        peer.on_response(
            Some("component:1"),
            Ok(serde_json::json!({
                "send": {"endpoint": "w", "direction": "send", "delivery": "direct"},
                "receive": {"endpoint": "r", "direction": "receive", "delivery": "direct", "startSequence": 1}
            })),
        );
        peer
    }

    fn requests(sink: &Sink) -> Vec<(String, Value)> {
        sent(sink)
            .into_iter()
            .filter_map(|m| match m {
                Message::Request { method, params, .. } => Some((method, params.unwrap())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_failed_read_settles_its_receiver_without_a_release() {
        let sink = Sink::default();
        let mut peer = holding_a_pair(&sink);
        let read = peer
            .admit(Method::ChannelNext, serde_json::json!({"endpoint": "r"}))
            .unwrap();
        if let Some(r) = peer.receiver("r") {
            r.activated = true;
        }
        peer.on_response(
            Some("component:2"),
            Err(OperationError::new(ErrorCode::Lagged, "behind")
                .to_wire()
                .to_rpc()),
        );
        let waker = Waker::noop();
        let got = peer.poll_call(read, &mut Context::from_waker(waker));
        assert!(matches!(got, Poll::Ready(Err(e)) if e.code == ErrorCode::Lagged));
        // The host holds the sticky cause; it expects the component's next
        // request or its root result, never a release of this receiver.
        assert!(
            requests(&sink)
                .iter()
                .all(|(method, _)| method != "channel/release"),
            "{:?}",
            requests(&sink)
        );
        assert_eq!(peer.on_wire(), 0, "nothing left for the root to wait for");
        // Settled: not unfinished work, and only the writer keeps a
        // settlement reserve.
        peer.note_unfinished_receivers();
        assert!(!peer.abandoned());
        assert_eq!(peer.settlement_reserve(), 1);
        assert!(peer.fatal().is_none());
    }

    #[test]
    fn root_cancellation_disposes_a_receiver_with_an_active_read() {
        let sink = Sink::default();
        let mut peer = holding_a_pair(&sink);
        peer.admit(Method::ChannelNext, serde_json::json!({"endpoint": "r"}))
            .unwrap();
        peer.cancel_root();
        let msgs = sent(&sink);
        assert_eq!(msgs[msgs.len() - 2], Message::cancel("component:2"));
        assert_eq!(
            requests(&sink).last(),
            Some(&(
                "channel/release".to_string(),
                serde_json::json!({"endpoint": "r"})
            ))
        );
        // Ordinary calls stay refused after root cancellation.
        let e = peer.admit(Method::CapabilityCall, params(0)).unwrap_err();
        assert_eq!(e.code, ErrorCode::Cancelled);
    }

    #[test]
    fn held_endpoints_keep_one_window_slot_for_settlement() {
        let sink = Sink::default();
        let mut peer = Peer::new(Box::new(sink.clone()));
        peer.admit(Method::ChannelCreate, serde_json::json!({}))
            .unwrap();
        peer.on_response(
            Some("component:1"),
            Ok(serde_json::json!({
                "send": {"endpoint": "w", "direction": "send", "delivery": "direct"},
                "receive": {"endpoint": "r", "direction": "receive", "delivery": "direct", "startSequence": 1}
            })),
        );
        for i in 0..MAX_PENDING_REQUESTS {
            peer.admit(Method::CapabilityCall, params(i)).unwrap();
        }
        assert_eq!(peer.on_wire(), MAX_PENDING_REQUESTS - 1);
        peer.admit(Method::ChannelClose, serde_json::json!({"endpoint": "w"}))
            .unwrap();
        assert_eq!(peer.on_wire(), MAX_PENDING_REQUESTS);
        let last = sent(&sink).pop().unwrap();
        assert!(matches!(last, Message::Request { method, .. } if method == "channel/close"));
    }
}
