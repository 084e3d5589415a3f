//! One component process driven from the host side: frames in, frames out,
//! with the host peer's checks on everything the component writes.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use flow::wire::{
    self, CapabilityCallParams, ChannelCreateParams, ChannelEndpointParams, ChannelSendParams,
    ChannelSubscribeParams, Direction, FrameDecoder, Message, Method, OperationalError,
    RunChildParams, RunResult, MAX_LIFETIME_REQUESTS, MAX_PENDING_REQUESTS,
};
use serde_json::{json, Value};

/// How long the runner waits for the component's next frame or exit.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a wire must stay silent to count as quiet.
pub const QUIET_WINDOW: Duration = Duration::from_millis(300);

/// The command that starts a component.
#[derive(Debug, Clone)]
pub struct Component {
    pub argv: Vec<String>,
}

enum Output {
    Frame(Vec<u8>),
    /// stdout ended; `incomplete` when bytes followed the last LF.
    End {
        incomplete: bool,
    },
    Broken(String),
}

/// One request the component sent.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: String,
    pub method: Method,
    pub params: Value,
}

impl Request {
    /// The `operationId` of a child or capability request.
    pub fn operation_id(&self) -> &str {
        self.params["operationId"].as_str().unwrap_or("")
    }
}

/// A live component process.
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Receiver<Output>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The thread draining stderr; joined once the component has exited so
    /// that everything it wrote is seen.
    stderr_reader: Mutex<Option<thread::JoinHandle<()>>>,
    ended: bool,
    seen_ids: HashSet<String>,
    pending: HashSet<String>,
}

type Step<T> = Result<T, String>;

impl Session {
    /// Starts the component with piped stdio.
    pub fn spawn(component: &Component) -> Step<Session> {
        let (program, args) = component.argv.split_first().ok_or("no component command")?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().ok_or("no stdout")?;
        let mut stderr_pipe = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut decoder = FrameDecoder::new();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = match stdout.read(&mut chunk) {
                    Ok(0) => {
                        let _ = tx.send(Output::End {
                            incomplete: decoder.finish().is_err(),
                        });
                        return;
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let _ = tx.send(Output::Broken(format!("stdout read failed: {e}")));
                        return;
                    }
                };
                decoder.push(&chunk[..n]);
                loop {
                    match decoder.next_frame() {
                        Ok(Some(frame)) => {
                            if tx.send(Output::Frame(frame)).is_err() {
                                return;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let _ = tx.send(Output::Broken(format!("component framing: {e}")));
                            return;
                        }
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let stderr_reader = thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            loop {
                match stderr_pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if let Ok(mut s) = sink.lock() {
                            s.extend_from_slice(&chunk[..n]);
                        }
                    }
                }
            }
        });
        Ok(Session {
            child,
            stdin,
            out: rx,
            stderr,
            stderr_reader: Mutex::new(Some(stderr_reader)),
            ended: false,
            seen_ids: HashSet::new(),
            pending: HashSet::new(),
        })
    }

    /// What the component wrote to stderr so far; after the process has
    /// exited (e.g. after [`Session::finish_clean`]), all of it.
    pub fn stderr(&self) -> String {
        if let Ok(mut reader) = self.stderr_reader.lock() {
            if let Some(handle) = reader.take() {
                // The pipe closes when the process and its children exit; wait
                // a bounded time for the drain, never forever.
                let deadline = Instant::now() + STEP_TIMEOUT;
                while !handle.is_finished() && Instant::now() < deadline {
                    thread::sleep(Duration::from_millis(2));
                }
                if handle.is_finished() {
                    let _ = handle.join();
                } else {
                    *reader = Some(handle);
                }
            }
        }
        self.stderr
            .lock()
            .map(|s| String::from_utf8_lossy(&s).into_owned())
            .unwrap_or_default()
    }

    /// Writes raw bytes to the component's stdin. Errors are returned, not
    /// fatal: a component may legitimately have closed its input.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Step<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin
            .write_all(bytes)
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("write to component failed: {e}"))
    }

    /// Writes one JSON value as a frame.
    pub fn send(&mut self, value: &Value) -> Step<()> {
        let mut bytes = serde_json::to_vec(value).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        self.send_raw(&bytes)
    }

    /// Sends the root `flow/run` with `host:1`.
    pub fn send_root(&mut self, input: Value) -> Step<()> {
        self.send(&root_request("host:1", input))
    }

    /// Answers a component request with a result.
    pub fn reply(&mut self, id: &str, result: Value) -> Step<()> {
        self.pending.remove(id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    /// Answers a component request with a `-32000` error.
    pub fn reply_error(&mut self, id: &str, code: &str) -> Step<()> {
        self.pending.remove(id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": {
            "code": -32000, "message": format!("host says {code}"), "data": {"code": code}
        }}))
    }

    /// Marks requests answered by bytes written with [`Session::send_raw`].
    pub fn mark_answered(&mut self, ids: &[&str]) {
        for id in ids {
            self.pending.remove(*id);
        }
    }

    /// Closes the component's stdin (half-close).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn next_output(&mut self, timeout: Duration) -> Result<Option<Output>, String> {
        if self.ended {
            return Ok(Some(Output::End { incomplete: false }));
        }
        match self.out.recv_timeout(timeout) {
            Ok(o) => {
                if matches!(o, Output::End { .. } | Output::Broken(_)) {
                    self.ended = true;
                }
                Ok(Some(o))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                self.ended = true;
                Ok(Some(Output::End { incomplete: false }))
            }
        }
    }

    /// The next message the component writes, checked as the host peer
    /// checks it: valid frame, valid envelope, a component-direction
    /// request method with closed params, fresh IDs, at most 64 unanswered
    /// and 65,536 in total.
    pub fn recv(&mut self) -> Step<Message> {
        let frame = match self.next_output(STEP_TIMEOUT)? {
            None => return Err(format!("no frame within {STEP_TIMEOUT:?}")),
            Some(Output::Frame(f)) => f,
            Some(Output::End { .. }) => return Err("component stdout ended".into()),
            Some(Output::Broken(e)) => return Err(e),
        };
        self.inspect(&frame)
    }

    /// The host peer's checks on one frame the component wrote.
    fn inspect(&mut self, frame: &[u8]) -> Step<Message> {
        let message = wire::decode(frame).map_err(|e| format!("component sent {e}"))?;
        if let Message::Request { id, method, params } = &message {
            let m = wire::request_method(Direction::ComponentToHost, method)
                .ok_or_else(|| format!("component sent request method {method:?}"))?;
            let params = params.clone().unwrap_or(Value::Null);
            let shape = match m {
                Method::RunChild => RunChildParams::from_value(&params).map(|_| ()),
                Method::CapabilityCall => CapabilityCallParams::from_value(&params).map(|_| ()),
                Method::ChannelCreate => ChannelCreateParams::from_value(&params).map(|_| ()),
                Method::ChannelSubscribe => ChannelSubscribeParams::from_value(&params).map(|_| ()),
                Method::ChannelSend => ChannelSendParams::from_value(&params).map(|_| ()),
                Method::ChannelNext | Method::ChannelClose | Method::ChannelRelease => {
                    ChannelEndpointParams::from_value(&params).map(|_| ())
                }
                Method::FlowRun | Method::RequestCancel => Ok(()),
            };
            shape.map_err(|e| format!("{method} {e}"))?;
            if !self.seen_ids.insert(id.clone()) {
                return Err(format!("component reused request id {id:?}"));
            }
            if self.seen_ids.len() as u64 > MAX_LIFETIME_REQUESTS {
                return Err("component exceeded 65,536 requests".into());
            }
            self.pending.insert(id.clone());
            if self.pending.len() > MAX_PENDING_REQUESTS {
                return Err(format!(
                    "component has {} unanswered requests",
                    self.pending.len()
                ));
            }
        }
        Ok(message)
    }

    /// The next message within `wait`, checked like [`Session::recv`];
    /// `None` when nothing arrived. For a runner serving several components
    /// at once.
    pub fn poll(&mut self, wait: Duration) -> Step<Option<Message>> {
        match self.next_output(wait)? {
            None => Ok(None),
            Some(Output::Frame(f)) => self.inspect(&f).map(Some),
            Some(Output::End { .. }) => Err("component stdout ended".into()),
            Some(Output::Broken(e)) => Err(e),
        }
    }

    /// The next message must be a component request.
    pub fn expect_request(&mut self) -> Step<Request> {
        match self.recv()? {
            Message::Request { id, method, params } => Ok(Request {
                id,
                method: Method::parse(&method).ok_or("unknown method")?,
                params: params.unwrap_or(Value::Null),
            }),
            other => Err(format!("expected a request, got {}", other.to_value())),
        }
    }

    /// The next message must be a `request/cancel` notification; returns its target.
    pub fn expect_cancel(&mut self) -> Step<String> {
        match self.recv()? {
            Message::Notification { method, params } if method == "request/cancel" => {
                let p = wire::CancelParams::from_value(&params.unwrap_or(Value::Null))
                    .map_err(|e| format!("malformed request/cancel: {e}"))?;
                Ok(p.request_id)
            }
            other => Err(format!("expected request/cancel, got {}", other.to_value())),
        }
    }

    /// The next message must be the root response for `host:1`.
    pub fn expect_root(&mut self) -> Step<Result<RunResult, OperationalError>> {
        match self.recv()? {
            Message::Success { id, result } if id == "host:1" => RunResult::from_value(&result)
                .map(Ok)
                .map_err(|e| format!("root result: {e}")),
            Message::Failure {
                id: Some(id),
                error,
            } if id == "host:1" => error
                .operational()
                .map(Err)
                .ok_or_else(|| format!("root failed with non-operational error {}", error.code)),
            other => Err(format!(
                "expected the root response, got {}",
                other.to_value()
            )),
        }
    }

    /// The next message must be a standard JSON-RPC error with `code`.
    pub fn expect_standard_error(&mut self, code: i64) -> Step<Option<String>> {
        match self.recv()? {
            Message::Failure { id, error } if error.code == code => Ok(id),
            other => Err(format!("expected error {code}, got {}", other.to_value())),
        }
    }

    /// Nothing arrives for [`QUIET_WINDOW`].
    pub fn expect_quiet(&mut self) -> Step<()> {
        match self.next_output(QUIET_WINDOW)? {
            None => Ok(()),
            // A frame that breaks a rule is reported as that rule.
            Some(Output::Frame(f)) => Err(self.inspect(&f).map_or_else(
                |broken| broken,
                |_| format!("expected a quiet wire, got {}", String::from_utf8_lossy(&f)),
            )),
            Some(Output::End { .. }) => Err("component stdout ended".into()),
            Some(Output::Broken(e)) => Err(e),
        }
    }

    /// stdout must end on a frame boundary with no further frames.
    pub fn expect_stdout_end(&mut self) -> Step<()> {
        match self.next_output(STEP_TIMEOUT)? {
            None => Err("stdout did not end".into()),
            Some(Output::Frame(f)) => {
                Err(format!("unexpected frame: {}", String::from_utf8_lossy(&f)))
            }
            Some(Output::End { incomplete: true }) => {
                Err("stdout ended inside a frame (trailing bytes)".into())
            }
            Some(Output::End { incomplete: false }) => Ok(()),
            Some(Output::Broken(e)) => Err(e),
        }
    }

    /// Waits for the process to exit (killing it after the step timeout).
    pub fn wait_exit(&mut self) -> Step<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                return Ok(status);
            }
            if start.elapsed() > STEP_TIMEOUT {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(format!("component did not exit within {STEP_TIMEOUT:?}"));
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// After the root response: close stdin, stdout ends cleanly, exit 0.
    pub fn finish_clean(&mut self) -> Step<()> {
        self.close_stdin();
        self.expect_stdout_end()?;
        let status = self.wait_exit()?;
        if !status.success() {
            return Err(format!(
                "component exited with {status} after its root response"
            ));
        }
        if !self.pending.is_empty() {
            return Err(format!("requests still unanswered: {:?}", self.pending));
        }
        Ok(())
    }

    /// The channel closes without a root response: stdout ends (no frame)
    /// and the process exits on its own.
    pub fn expect_closed(&mut self) -> Step<ExitStatus> {
        self.expect_stdout_end()?;
        self.wait_exit()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.stdin = None;
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A `flow/run` request with empty settings and attachments.
pub fn root_request(id: &str, input: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "flow/run", "params": {
        "protocol": "run/1",
        "input": input,
        "settings": {},
        "attachments": {},
        "scratch": "/tmp",
        "deadlineUnixMs": 4_102_444_800_000u64,
    }})
}
