//! The host side of one Run/1 channel: send `flow/run`, serve what the
//! component asks for, and observe exactly how the channel ends.
//!
//! The peer classifies nothing on its own: it reports what it saw (the root
//! response, a protocol violation, transport loss, a recorded deadline or
//! cancellation) and the executor turns that, with the process exit status,
//! into one terminal.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::wire::{
    self, CancelParams, CapabilityCallParams, Direction, ErrorCode, FlowRunParams, FrameDecoder,
    FrameError, Message, Method, OperationalError, RpcError, RunChildParams,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use super::ledger::{Join, OperationLedger};

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The id the host uses for its one `flow/run` request.
pub(crate) const ROOT_REQUEST_ID: &str = "host:1";
/// How long a component may take to settle after the host asks it to stop.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_millis(250);
/// How long the host waits for stdout to end after the root response.
pub(crate) const POST_RESPONSE_DRAIN: Duration = Duration::from_secs(5);
/// How long a cancelled operation's work may take to stop (its future to be
/// dropped) before the cancellation is answered anyway.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// What the host offers a component while its root is pending.
pub trait Services: Send + Sync + 'static {
    fn run_child(&self, params: RunChildParams) -> BoxFuture<Result<Value, OperationalError>>;
    fn call_capability(
        &self,
        params: CapabilityCallParams,
    ) -> BoxFuture<Result<Value, OperationalError>>;
    /// Serve one `channel/*` request (§5.1). Invalid params are a JSON-RPC
    /// error now; a host without channels answers `-32601`.
    fn channel(
        &self,
        method: Method,
        params: &Value,
    ) -> Result<BoxFuture<Result<Value, OperationalError>>, RpcError> {
        let _ = (method, params);
        Err(RpcError::standard(
            wire::METHOD_NOT_FOUND,
            "channels are not offered here",
        ))
    }
}

/// Everything the peer observed on one channel.
#[derive(Debug, Default)]
pub struct PeerReport {
    /// The root response, when one arrived and was well formed.
    pub response: Option<Result<Value, RpcError>>,
    /// A detected peer-protocol violation (`PROTOCOL_ERROR`).
    pub violation: Option<String>,
    /// Transport loss without a violation (`CHANNEL_LOST` when no response).
    pub lost: Option<String>,
    /// The deadline was recorded before any root response.
    pub deadline: bool,
    /// Cancellation was recorded before any root response.
    pub cancelled: bool,
    /// The component still had requests pending when it answered the root.
    pub pending_at_response: usize,
    /// Stdout did not reach EOF within [`POST_RESPONSE_DRAIN`] after the response.
    pub drain_timed_out: bool,
}

pub struct PeerLimits {
    pub deadline: tokio::time::Instant,
    pub cancel: watch::Receiver<bool>,
}

enum Event {
    Bytes(std::io::Result<usize>),
    /// The writer task ended: `Err` when a write to the component failed.
    Written(std::io::Result<()>),
    Completion(String, Result<Value, OperationalError>),
    Deadline,
    Cancel,
    GraceOver,
}

/// Serve one component channel until it ends.
pub async fn serve<R, W>(
    mut stdout: R,
    stdin: W,
    params: FlowRunParams,
    services: Arc<dyn Services>,
    mut limits: PeerLimits,
) -> PeerReport
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let mut report = PeerReport::default();
    let (write_tx, write_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    // Watched by the loop: a failed write closes the channel at once (Run/1
    // §1), without waiting for another frame from the component.
    let mut writer = Some(tokio::spawn(write_frames(stdin, write_rx)));
    let mut writer_open = Some(write_tx);
    let send = |tx: &Option<mpsc::UnboundedSender<Vec<u8>>>, message: &Message| {
        if let Some(tx) = tx {
            let _ = tx.send(wire::encode(message));
        }
    };
    send(
        &writer_open,
        &Message::request(ROOT_REQUEST_ID, Method::FlowRun, params.to_value()),
    );

    let (done_tx, mut done_rx) =
        mpsc::unbounded_channel::<(String, Result<Value, OperationalError>)>();
    let mut ledger = OperationLedger::default();
    let mut pending: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    let mut seen_ids: HashSet<String> = HashSet::new();
    let mut lifetime_requests: u64 = 0;
    let mut decoder = FrameDecoder::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut grace: Option<tokio::time::Instant> = None;
    let mut drain_until: Option<tokio::time::Instant> = None;
    let mut root_settled = false;

    loop {
        let event = {
            let deadline_armed = !report.deadline && !report.cancelled && !root_settled;
            tokio::select! {
                n = stdout.read(&mut buf) => Event::Bytes(n),
                Some((id, result)) = done_rx.recv(), if !root_settled => Event::Completion(id, result),
                _ = tokio::time::sleep_until(limits.deadline), if deadline_armed => Event::Deadline,
                Ok(()) = limits.cancel.changed(), if deadline_armed => Event::Cancel,
                _ = sleep_until_opt(grace.or(drain_until)), if grace.is_some() || drain_until.is_some() => Event::GraceOver,
                written = writer_ended(&mut writer), if writer.is_some() => Event::Written(written),
            }
        };
        match event {
            Event::Written(written) => {
                writer = None;
                match written {
                    Err(e) if !root_settled => {
                        report
                            .lost
                            .get_or_insert(format!("writing to the component failed: {e}"));
                        break;
                    }
                    _ => {}
                }
            }
            Event::Deadline | Event::Cancel => {
                if matches!(event, Event::Deadline) {
                    report.deadline = true;
                } else if *limits.cancel.borrow() {
                    report.cancelled = true;
                } else {
                    continue;
                }
                // Owned calls stay answerable: the component cancels each one
                // and waits for its response before failing the root.
                send(&writer_open, &Message::cancel(ROOT_REQUEST_ID));
                grace = Some(tokio::time::Instant::now() + CANCEL_GRACE);
            }
            Event::GraceOver => {
                if drain_until.is_some() {
                    report.drain_timed_out = true;
                }
                break;
            }
            Event::Completion(id, result) => {
                if pending.remove(&id).is_some() {
                    let message = match result {
                        Ok(value) => Message::Success { id, result: value },
                        Err(e) => Message::failure(Some(id), e.to_rpc()),
                    };
                    send(&writer_open, &message);
                }
            }
            Event::Bytes(Err(e)) => {
                report
                    .lost
                    .get_or_insert(format!("reading component stdout failed: {e}"));
                break;
            }
            Event::Bytes(Ok(0)) => {
                if decoder.finish().is_err() {
                    report
                        .violation
                        .get_or_insert("component stdout ended inside a frame".into());
                } else if !root_settled {
                    report
                        .lost
                        .get_or_insert("component stdout ended before the root response".into());
                }
                break;
            }
            Event::Bytes(Ok(n)) => {
                decoder.push(&buf[..n]);
                loop {
                    let frame = match decoder.next_frame() {
                        Ok(Some(frame)) => frame,
                        Ok(None) => break,
                        Err(e) => {
                            // An empty frame is complete, LF-terminated and
                            // valid UTF-8, and it fails JSON/1: best-effort
                            // -32700 with id null before the close (Run/1
                            // §1). Oversized frames close silently.
                            if matches!(e, FrameError::Empty) {
                                if let Some(reply) = wire::decode(b"").err().and_then(|e| e.reply())
                                {
                                    send(&writer_open, &reply);
                                }
                            }
                            report
                                .violation
                                .get_or_insert(format!("invalid frame: {e}"));
                            break;
                        }
                    };
                    if root_settled {
                        report
                            .violation
                            .get_or_insert("component wrote after its root response".into());
                        break;
                    }
                    let message = match wire::decode(&frame) {
                        Ok(message) => message,
                        Err(e) => {
                            if let Some(reply) = e.reply() {
                                send(&writer_open, &reply);
                            }
                            report.violation.get_or_insert(e.to_string());
                            break;
                        }
                    };
                    let is_root_response = matches!(
                        &message,
                        Message::Success { id, .. } | Message::Failure { id: Some(id), .. }
                            if id == ROOT_REQUEST_ID
                    );
                    if is_root_response
                        && !report.deadline
                        && !report.cancelled
                        && tokio::time::Instant::now() >= limits.deadline
                    {
                        // The host's deadline wins unless a terminal response
                        // already did: one read after the deadline instant
                        // (the timer and the bytes became ready together)
                        // comes too late, whatever it says.
                        report.deadline = true;
                    }
                    match message {
                        Message::Success { id, result } if id == ROOT_REQUEST_ID => {
                            report.response = Some(Ok(result));
                        }
                        Message::Failure {
                            id: Some(id),
                            error,
                        } if id == ROOT_REQUEST_ID => {
                            report.response = Some(Err(error));
                        }
                        Message::Success { id, .. } | Message::Failure { id: Some(id), .. } => {
                            report
                                .violation
                                .get_or_insert(format!("response to unknown request {id:?}"));
                        }
                        Message::Failure { id: None, error } => {
                            report.violation.get_or_insert(format!(
                                "component reported {}: {}",
                                error.code, error.message
                            ));
                        }
                        Message::Notification { method, params } => {
                            if method == Method::RequestCancel.as_str() {
                                match params.as_ref().map(CancelParams::from_value) {
                                    Some(Ok(cancel)) => {
                                        if let Some(task) = pending.remove(&cancel.request_id) {
                                            task.abort();
                                            let stopped = ledger
                                                .leave(&cancel.request_id)
                                                .and_then(|op| ledger.abort_if_unwatched(&op));
                                            if let Some(stopped) = stopped {
                                                // What the call held (its
                                                // channel rights) is released
                                                // before the component hears
                                                // of the cancellation.
                                                let _ =
                                                    tokio::time::timeout(STOP_WAIT, stopped).await;
                                            }
                                            let e = OperationalError::new(
                                                ErrorCode::Cancelled,
                                                "cancelled by the component",
                                            );
                                            send(
                                                &writer_open,
                                                &Message::failure(
                                                    Some(cancel.request_id),
                                                    e.to_rpc(),
                                                ),
                                            );
                                        }
                                    }
                                    _ => {
                                        report
                                            .violation
                                            .get_or_insert("malformed request/cancel".into());
                                        break;
                                    }
                                }
                            }
                        }
                        Message::Request { id, method, params } => {
                            if !seen_ids.insert(id.clone()) {
                                report
                                    .violation
                                    .get_or_insert(format!("request id {id:?} reused"));
                                break;
                            }
                            lifetime_requests += 1;
                            if lifetime_requests > wire::MAX_LIFETIME_REQUESTS {
                                report.violation.get_or_insert(
                                    "more than 65,536 requests on one channel".into(),
                                );
                                break;
                            }
                            let Some(method) =
                                wire::request_method(Direction::ComponentToHost, &method)
                            else {
                                let e =
                                    RpcError::standard(wire::METHOD_NOT_FOUND, "method not found");
                                send(&writer_open, &Message::failure(Some(id), e));
                                continue;
                            };
                            if report.deadline || report.cancelled {
                                let e = OperationalError::new(
                                    ErrorCode::OwnerClosed,
                                    "the root is no longer admitting work",
                                );
                                send(&writer_open, &Message::failure(Some(id), e.to_rpc()));
                                continue;
                            }
                            if pending.len() >= wire::MAX_PENDING_REQUESTS {
                                let e = OperationalError::new(
                                    ErrorCode::ResourceExhausted,
                                    "64 requests are already pending",
                                );
                                send(&writer_open, &Message::failure(Some(id), e.to_rpc()));
                                continue;
                            }
                            let params = params.unwrap_or(Value::Null);
                            if is_channel(method) {
                                // Channel requests carry no operation id: no ledger.
                                match services.channel(method, &params) {
                                    Ok(future) => {
                                        let done = done_tx.clone();
                                        let request_id = id.clone();
                                        let task = tokio::spawn(async move {
                                            let result = future.await;
                                            let _ = done.send((request_id, result));
                                        });
                                        pending.insert(id, task);
                                    }
                                    Err(e) => send(&writer_open, &Message::failure(Some(id), e)),
                                }
                                continue;
                            }
                            let work = dispatch(services.as_ref(), method, &params);
                            let (operation_id, key, future) = match work {
                                Ok(work) => work,
                                Err(e) => {
                                    send(&writer_open, &Message::failure(Some(id), e));
                                    continue;
                                }
                            };
                            let receiver = match ledger.join(&operation_id, &key, &id, future) {
                                Join::Conflict => {
                                    let e = OperationalError::new(
                                        ErrorCode::OperationConflict,
                                        format!("operation {operation_id:?} was already used with different parameters"),
                                    );
                                    send(&writer_open, &Message::failure(Some(id), e.to_rpc()));
                                    continue;
                                }
                                Join::Waiter(receiver) => receiver,
                            };
                            let done = done_tx.clone();
                            let request_id = id.clone();
                            let waiter = tokio::spawn(async move {
                                let result = OperationLedger::wait(receiver).await;
                                let _ = done.send((request_id, result));
                            });
                            pending.insert(id, waiter);
                        }
                    }
                    if report.response.is_some() && !root_settled {
                        root_settled = true;
                        report.pending_at_response = pending.len();
                        for (_, task) in pending.drain() {
                            task.abort();
                        }
                        ledger.abort_all();
                        // The component may stop reading now: close our half.
                        writer_open = None;
                        grace = None;
                        drain_until = Some(tokio::time::Instant::now() + POST_RESPONSE_DRAIN);
                    }
                }
                if report.violation.is_some() {
                    break;
                }
            }
        }
    }
    for (_, task) in pending.drain() {
        task.abort();
    }
    ledger.abort_all();
    drop(writer_open);
    if let Some(writer) = writer {
        let _ = tokio::time::timeout(Duration::from_millis(100), writer).await;
    }
    report
}

/// How the writer task ended; a task that panicked or was aborted counts as
/// a failed write.
async fn writer_ended(
    writer: &mut Option<tokio::task::JoinHandle<std::io::Result<()>>>,
) -> std::io::Result<()> {
    match writer {
        Some(task) => task.await.unwrap_or_else(|e| Err(std::io::Error::other(e))),
        None => std::future::pending().await,
    }
}

/// One admitted component request, ready for the ledger: its operation id,
/// the canonical identity it is compared by, and the work to run if new.
type Dispatch = (String, Value, BoxFuture<Result<Value, OperationalError>>);

fn dispatch(services: &dyn Services, method: Method, params: &Value) -> Result<Dispatch, RpcError> {
    match method {
        Method::RunChild => {
            let p = RunChildParams::from_value(params).map_err(|e| e.to_rpc())?;
            let key = serde_json::json!({"method": "flow/run-child", "slot": p.slot, "intent": p.intent, "input": p.input, "channels": p.channels});
            Ok((p.operation_id.clone(), key, services.run_child(p)))
        }
        Method::CapabilityCall => {
            let p = CapabilityCallParams::from_value(params).map_err(|e| e.to_rpc())?;
            let key = serde_json::json!({"method": "capability/call", "slot": p.slot, "capabilityMethod": p.method, "input": p.input, "channels": p.channels});
            Ok((p.operation_id.clone(), key, services.call_capability(p)))
        }
        _ => Err(RpcError::standard(
            wire::METHOD_NOT_FOUND,
            "channels are not offered by this host yet",
        )),
    }
}

fn is_channel(method: Method) -> bool {
    matches!(
        method,
        Method::ChannelCreate
            | Method::ChannelSubscribe
            | Method::ChannelSend
            | Method::ChannelNext
            | Method::ChannelClose
            | Method::ChannelRelease
    )
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Writes the host's frames in order until the sender is dropped, then
/// closes the component's stdin; the first failed write ends it with `Err`.
async fn write_frames<W: AsyncWrite + Unpin>(
    mut stdin: W,
    mut frames: mpsc::UnboundedReceiver<Vec<u8>>,
) -> std::io::Result<()> {
    while let Some(frame) = frames.recv().await {
        stdin.write_all(&frame).await?;
        stdin.flush().await?;
    }
    // The component may already have closed its stdin after answering.
    let _ = stdin.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host that is never asked for anything.
    struct NoServices;

    impl Services for NoServices {
        fn run_child(&self, _: RunChildParams) -> BoxFuture<Result<Value, OperationalError>> {
            unreachable!("no child call is made")
        }
        fn call_capability(
            &self,
            _: CapabilityCallParams,
        ) -> BoxFuture<Result<Value, OperationalError>> {
            unreachable!("no capability call is made")
        }
    }

    fn params() -> FlowRunParams {
        FlowRunParams {
            protocol: wire::PROTOCOL.into(),
            input: Value::Null,
            settings: Default::default(),
            attachments: Default::default(),
            scratch: "/scratch".into(),
            deadline_unix_ms: 0,
            channels: Default::default(),
        }
    }

    /// Serve a component whose successful root answer is readable at once,
    /// under `deadline`.
    async fn serve_ready_answer(deadline: tokio::time::Instant) -> PeerReport {
        let (mut component_out, host_in) = tokio::io::duplex(64 * 1024);
        let (host_out, _component_in) = tokio::io::duplex(64 * 1024);
        let answer = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":\"{ROOT_REQUEST_ID}\",\"result\":{{\"outcome\":\"done\",\"output\":null}}}}\n"
        );
        component_out.write_all(answer.as_bytes()).await.unwrap();
        drop(component_out);
        let (_cancel_tx, cancel) = watch::channel(false);
        let limits = PeerLimits { deadline, cancel };
        serve(host_in, host_out, params(), Arc::new(NoServices), limits).await
    }

    /// A root answer that is already readable when the deadline has
    /// passed: the deadline timer and the bytes are ready together, and
    /// the deadline must win every time (Run/1: the host's deadline wins
    /// unless a terminal response already did).
    #[tokio::test]
    async fn a_root_answer_read_after_the_deadline_loses_to_it() {
        for _ in 0..64 {
            let past = tokio::time::Instant::now() - Duration::from_millis(1);
            let report = serve_ready_answer(past).await;
            assert!(report.deadline, "{report:?}");
        }
    }

    /// The component's side of a scripted channel: the frames the host
    /// writes, and the component's stdout.
    struct Component {
        from_host: tokio::io::Lines<tokio::io::BufReader<tokio::io::DuplexStream>>,
        to_host: tokio::io::DuplexStream,
    }

    impl Component {
        /// The next frame the host wrote, `None` once the host closed stdin.
        async fn recv(&mut self) -> Option<Value> {
            let line = self.from_host.next_line().await.unwrap()?;
            Some(serde_json::from_str(&line).unwrap())
        }

        /// Writes one frame. A failed write is not the script's failure:
        /// the host may have closed the channel already, and what it did is
        /// asserted from its report.
        async fn send(&mut self, frame: &Value) {
            let mut bytes = serde_json::to_vec(frame).unwrap();
            bytes.push(b'\n');
            let _ = self.to_host.write_all(&bytes).await;
        }

        /// Writes `bytes` as they are, then closes stdout.
        async fn send_raw(mut self, bytes: &[u8]) {
            self.to_host.write_all(bytes).await.unwrap();
            // The host may already have ended the channel.
            let _ = self.to_host.shutdown().await;
        }

        /// Reads the host's `flow/run`.
        async fn root(&mut self) {
            let run = self.recv().await.unwrap();
            assert_eq!(run["method"], "flow/run", "{run}");
        }

        /// Answers the root and reads what the host wrote after it.
        async fn answer(mut self, result: Value) -> Vec<Value> {
            let id = ROOT_REQUEST_ID;
            self.send(&serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}))
                .await;
            self.to_host.shutdown().await.unwrap();
            let mut rest = Vec::new();
            while let Some(frame) = self.recv().await {
                rest.push(frame);
            }
            rest
        }
    }

    /// Serves a component played by `script` under `deadline` and `cancel`;
    /// the report and what the script returned.
    async fn serve_scripted<T, F, Fut>(
        deadline: tokio::time::Instant,
        cancel: watch::Receiver<bool>,
        script: F,
    ) -> (PeerReport, T)
    where
        T: Send + 'static,
        F: FnOnce(Component) -> Fut,
        Fut: Future<Output = T> + Send + 'static,
    {
        use tokio::io::AsyncBufReadExt;
        let (to_host, host_out) = tokio::io::duplex(64 * 1024);
        let (host_in, from_host) = tokio::io::duplex(64 * 1024);
        let component = Component {
            from_host: tokio::io::BufReader::new(from_host).lines(),
            to_host,
        };
        let played = tokio::spawn(script(component));
        let limits = PeerLimits { deadline, cancel };
        let report = tokio::time::timeout(
            Duration::from_secs(60),
            serve(host_out, host_in, params(), Arc::new(NoServices), limits),
        )
        .await
        .expect("the channel ended");
        let played = tokio::time::timeout(Duration::from_secs(60), played)
            .await
            .expect("the script ended")
            .expect("the script did not panic");
        (report, played)
    }

    fn later() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(30)
    }

    fn not_cancelled() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    fn request(id: &str, method: &str, params: Value) -> Value {
        serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    fn capability_call(id: &str) -> Value {
        request(
            id,
            "capability/call",
            serde_json::json!({"operationId": "late:1", "slot": "sink", "method": "write", "input": null}),
        )
    }

    /// Run/1 §1: an empty frame is a complete, valid-UTF-8 frame that fails
    /// JSON/1, so the host answers `-32700` with id null, then closes.
    #[tokio::test]
    async fn an_empty_frame_gets_a_parse_error_with_a_null_id_then_the_close() {
        let (report, after) = serve_scripted(later(), not_cancelled(), |mut c| async move {
            c.root().await;
            c.to_host.write_all(b"\n").await.unwrap();
            let mut after = Vec::new();
            while let Some(frame) = c.recv().await {
                after.push(frame);
            }
            after
        })
        .await;
        assert_eq!(after.len(), 1, "{after:?}");
        assert_eq!(after[0]["id"], Value::Null);
        assert_eq!(after[0]["error"]["code"], wire::PARSE_ERROR);
        assert_eq!(
            report.violation.as_deref(),
            Some("invalid frame: empty frame")
        );
        assert!(report.response.is_none());
    }

    /// Run/1 §1: a failed write closes the channel without waiting for
    /// another frame, and it ends as `CHANNEL_LOST`.
    #[tokio::test]
    async fn a_failed_write_to_the_component_closes_the_channel_as_lost() {
        let (report, _stdout) = serve_scripted(later(), not_cancelled(), |mut c| async move {
            // The component stops reading after `flow/run`, asks for
            // something, and keeps its stdout open (it is returned, so it
            // lives until the channel ended): only the failed write of the
            // answer can end the channel.
            c.root().await;
            drop(c.from_host);
            let mut bytes =
                serde_json::to_vec(&request("c:1", "x/unknown", serde_json::json!({}))).unwrap();
            bytes.push(b'\n');
            c.to_host.write_all(&bytes).await.unwrap();
            c.to_host
        })
        .await;
        assert!(
            report
                .lost
                .as_deref()
                .is_some_and(|l| l.starts_with("writing to the component failed")),
            "{report:?}"
        );
        assert!(report.response.is_none() && report.violation.is_none() && !report.deadline);
        let exit = super::super::outcome::Exit {
            code: None,
            killed: true,
        };
        let failure = super::super::outcome::classify(&report, &exit).unwrap_err();
        assert_eq!(failure.code, ErrorCode::ChannelLost.into());
    }

    /// A request read after root cancellation or after the deadline gets
    /// `OWNER_CLOSED` and is never dispatched (`NoServices` would panic).
    #[tokio::test]
    async fn a_request_after_cancellation_or_the_deadline_is_owner_closed() {
        let soon = tokio::time::Instant::now() + Duration::from_millis(200);
        for (deadline, cancelled) in [(later(), true), (soon, false)] {
            let (cancel_tx, cancel) = watch::channel(false);
            let (report, answer) = serve_scripted(deadline, cancel, |mut c| async move {
                c.root().await;
                if cancelled {
                    cancel_tx.send(true).unwrap();
                }
                let stop = c.recv().await.unwrap();
                assert_eq!(stop["method"], "request/cancel", "{stop}");
                c.send(&capability_call("c:1")).await;
                let answer = c.recv().await.unwrap();
                let failure = serde_json::json!({"jsonrpc": "2.0", "id": ROOT_REQUEST_ID,
                    "error": {"code": -32000, "message": "cancelled", "data": {"code": "CANCELLED"}}});
                c.send(&failure).await;
                answer
            })
            .await;
            assert_eq!((report.cancelled, report.deadline), (cancelled, !cancelled));
            assert_eq!(answer["id"], "c:1");
            assert_eq!(answer["error"]["data"]["code"], "OWNER_CLOSED", "{answer}");
        }
    }

    /// The 65,537th component request on one channel is fatal; the 65,536
    /// before it are served (here each answered `-32601` at once).
    #[tokio::test]
    async fn the_65537th_component_request_is_a_protocol_error() {
        let (report, answered) = serve_scripted(later(), not_cancelled(), |mut c| async move {
            c.root().await;
            let mut from_host = c.from_host;
            let reader = tokio::spawn(async move {
                let mut answered = 0u64;
                while let Some(line) = from_host.next_line().await.unwrap() {
                    let frame: Value = serde_json::from_str(&line).unwrap();
                    assert_eq!(frame["error"]["code"], wire::METHOD_NOT_FOUND, "{frame}");
                    answered += 1;
                }
                answered
            });
            let mut batch = Vec::new();
            for n in 1..=wire::MAX_LIFETIME_REQUESTS + 1 {
                let frame = request(&format!("c:{n}"), "x/unknown", serde_json::json!({}));
                batch.extend(serde_json::to_vec(&frame).unwrap());
                batch.push(b'\n');
                if batch.len() > 32 * 1024 {
                    c.to_host.write_all(&batch).await.unwrap();
                    batch.clear();
                }
            }
            // The host may already have closed the channel: a failed write
            // of the last bytes is expected.
            let _ = c.to_host.write_all(&batch).await;
            drop(c.to_host);
            reader.await.unwrap()
        })
        .await;
        assert_eq!(
            report.violation.as_deref(),
            Some("more than 65,536 requests on one channel")
        );
        assert_eq!(answered, wire::MAX_LIFETIME_REQUESTS);
    }

    /// A request id the component already used is fatal, even after the
    /// first request was answered.
    #[tokio::test]
    async fn a_reused_component_request_id_is_a_protocol_error() {
        let (report, first) = serve_scripted(later(), not_cancelled(), |mut c| async move {
            c.root().await;
            c.send(&request("c:1", "x/unknown", serde_json::json!({})))
                .await;
            let first = c.recv().await.unwrap();
            c.send(&request("c:1", "x/unknown", serde_json::json!({})))
                .await;
            assert_eq!(c.recv().await, None, "the host closes without an answer");
            first
        })
        .await;
        assert_eq!(first["error"]["code"], wire::METHOD_NOT_FOUND);
        assert_eq!(
            report.violation.as_deref(),
            Some("request id \"c:1\" reused")
        );
    }

    /// A `request/cancel` notification without a valid `requestId` is fatal.
    #[tokio::test]
    async fn a_malformed_request_cancel_is_a_protocol_error() {
        for params in [serde_json::json!({}), serde_json::json!({"requestId": 1})] {
            let (report, ()) = serve_scripted(later(), not_cancelled(), |mut c| async move {
                c.root().await;
                c.send(&serde_json::json!({"jsonrpc": "2.0", "method": "request/cancel", "params": params}))
                    .await;
                assert_eq!(c.recv().await, None, "the host closes without an answer");
            })
            .await;
            assert_eq!(
                report.violation.as_deref(),
                Some("malformed request/cancel")
            );
        }
    }

    /// Unknown methods, host-only methods sent by the component and
    /// `request/cancel` sent as a request get `-32601`; the channel goes on
    /// and the root answer is still the response.
    #[tokio::test]
    async fn wrong_direction_and_unknown_methods_get_method_not_found() {
        let (report, answers) = serve_scripted(later(), not_cancelled(), |mut c| async move {
            c.root().await;
            let mut answers = Vec::new();
            for (n, method) in ["flow/run", "request/cancel", "x/unknown"]
                .iter()
                .enumerate()
            {
                let params = serde_json::json!({"requestId": "host:1"});
                c.send(&request(&format!("c:{n}"), method, params)).await;
                answers.push(c.recv().await.unwrap());
            }
            let rest = c
                .answer(serde_json::json!({"outcome": "done", "output": null}))
                .await;
            assert!(rest.is_empty(), "{rest:?}");
            answers
        })
        .await;
        for (n, answer) in answers.iter().enumerate() {
            assert_eq!(answer["id"], format!("c:{n}"));
            assert_eq!(answer["error"]["code"], wire::METHOD_NOT_FOUND, "{answer}");
        }
        assert!(report.violation.is_none(), "{report:?}");
        assert!(matches!(report.response, Some(Ok(_))), "{report:?}");
    }

    /// After its root response the component writes nothing more: a whole
    /// frame, or bytes without their LF at the end of stdout, is a protocol
    /// error (and the executor classifies a violation before the response).
    #[tokio::test]
    async fn output_after_the_root_response_is_a_protocol_error() {
        for (trailing, violation) in [
            (&b"{}\n"[..], "component wrote after its root response"),
            (&b"{"[..], "component stdout ended inside a frame"),
        ] {
            let (report, ()) = serve_scripted(later(), not_cancelled(), |mut c| async move {
                c.root().await;
                let answer = serde_json::json!({"jsonrpc": "2.0", "id": ROOT_REQUEST_ID,
                    "result": {"outcome": "done", "output": null}});
                let mut bytes = serde_json::to_vec(&answer).unwrap();
                bytes.push(b'\n');
                bytes.extend_from_slice(trailing);
                c.send_raw(&bytes).await;
            })
            .await;
            assert_eq!(report.violation.as_deref(), Some(violation));
            let exit = super::super::outcome::Exit {
                code: Some(0),
                killed: false,
            };
            let failure = super::super::outcome::classify(&report, &exit).unwrap_err();
            assert_eq!(failure.code, ErrorCode::ProtocolError.into());
        }
    }

    /// Before the deadline the same answer is accepted.
    #[tokio::test]
    async fn a_root_answer_before_the_deadline_is_the_response() {
        let later = tokio::time::Instant::now() + Duration::from_secs(30);
        let report = serve_ready_answer(later).await;
        assert!(!report.deadline, "{report:?}");
        assert!(matches!(report.response, Some(Ok(_))), "{report:?}");
    }
}
