//! Agent Run (docs/src/agents.md), served for a Run: the one exclusive effect
//! of the calling invocation (seed 002 §8). Everything that can be checked
//! is checked before dispatch (`INVALID_INPUT`, nothing sent): the skills
//! of the calling package, the responseSchema profile and its Schema/1
//! compilation. The request itself is sent by the Agent worker, a
//! separate process in its own envelope (seed 002 §9: the parent's
//! remaining deadline, 256 MiB, 128 tasks, 0.5 CPU, network), which alone
//! gets the key. The Flow's envelope stays keyless and networkless.
//!
//! Possibly dispatched work is never resent: once the worker said it is
//! dispatching, a worker that ends without a verdict is `UNCERTAIN`.
//! Deadline and cancellation end the worker's envelope (its Drop fences
//! it when this future is dropped).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use flow::json::Value;
use jig_provider_api::CallError;
use jig_provider_builtin::agent::values::KeySource;
use jig_provider_builtin::agent::wire::Ask;
use jig_provider_builtin::agent::{acp, profile, skills, worker};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::BuiltinCall;
use crate::exec::invocation::EffectSlot;
use crate::exec::outcome::invalid_details;
use crate::exec::peer::BoxFuture;
use jig_sandbox::{Launch, Limits};

/// The longest line the host reads from the worker: a verdict carries at
/// most the worker's answer body twice (text and structured), escaped.
pub(crate) const MAX_WORKER_LINE_BYTES: usize = 128 * 1024 * 1024;
/// How long a worker that printed its verdict may take to exit before its
/// envelope is ended.
const WORKER_EXIT_GRACE: Duration = Duration::from_secs(2);
/// Host files the worker needs to resolve a host name, shown read-only
/// when present. TLS roots are built into the client, so no CA files.
const RESOLVER_FILES: [&str; 4] = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
];

static WORKERS: AtomicU64 = AtomicU64::new(0);

pub(super) fn call(call: BuiltinCall) -> BoxFuture<Result<Value, CallError>> {
    Box::pin(run(call))
}

fn invalid_input(code: &str, message: impl Into<String>) -> CallError {
    CallError::Operational {
        code: "INVALID_INPUT".into(),
        message: message.into(),
        details: Some(json!({ "code": code })),
    }
}

/// The input, checked: what the worker is asked, and the compiled
/// responseSchema the structured result must satisfy.
struct Prepared {
    instructions: String,
    skills: Option<String>,
    /// The schema as sent, and compiled for validating the result.
    schema: Option<(Value, flow::schema::Schema)>,
}

fn prepare(
    input: &Value,
    files: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Result<Prepared, CallError> {
    let instructions = input
        .get("instructions")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let names: Vec<String> = input
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    let rendered = skills::render(&names, files).map_err(|e| invalid_input(e.code, e.message))?;
    skills::check_rendered(&instructions, rendered.as_deref())
        .map_err(|e| invalid_input(e.code, e.message))?;
    let schema = match input.get("responseSchema") {
        None => None,
        Some(schema) => {
            profile::check(schema)
                .map_err(|e| invalid_input("AGENT_RUN_INPUT_INVALID", e.to_string()))?;
            let compiled = flow::schema::Schema::compile_value(schema).map_err(|e| {
                invalid_input(
                    "AGENT_RUN_INPUT_INVALID",
                    format!("responseSchema is not a valid Schema/1 schema: {e}"),
                )
            })?;
            Some((profile::wire_schema(schema), compiled))
        }
    };
    Ok(Prepared {
        instructions,
        skills: rendered,
        schema,
    })
}

async fn run(call: BuiltinCall) -> Result<Value, CallError> {
    if call.method != "run" {
        return Err(invalid_input(
            "AGENT_RUN_CONTRACT_MISMATCH",
            format!("Agent Run has no method {:?}", call.method),
        ));
    }
    let services = &call.services;
    let Prepared {
        instructions,
        skills: rendered,
        schema,
    } = prepare(&call.input, services.package.files())?;
    // With the optional `events` port connected the answer is streamed
    // and its text pieces feed the port (beyond the reference).
    let stream = call.ports.ports().iter().any(|p| p.name == EVENTS_PORT);
    let _effect = EffectSlot::take(&services.activity)?;
    let executor = &services.executor;
    let endpoint = crate::config::agent_endpoint(&executor.agent).map_err(|e| {
        CallError::operational("UNAVAILABLE", format!("no usable Agent endpoint: {e}"))
    })?;
    let body = match &endpoint.native {
        // A native ACP client: the `jig-agent-acp` worker starts it inside
        // its own envelope and speaks ACP to it (providers/acp).
        Some(native) => acp::WorkerRequest {
            program: native.program.clone(),
            env: native.env.clone(),
            prompt: acp::prompt(
                &instructions,
                rendered.as_deref(),
                schema.as_ref().map(|(wire, _)| wire),
            ),
        }
        .to_value(),
        None => worker::Request {
            url: endpoint.url(),
            key: endpoint.key.clone(),
            ask: Ask {
                api: endpoint.api,
                model: endpoint.model.clone(),
                instructions,
                skills: rendered,
                schema: schema.as_ref().map(|(wire, _)| wire.clone()),
                stream,
            },
        }
        .to_value(),
    };
    // Reserved before the envelope exists, returned after it is fenced
    // (locals drop in reverse order: the envelope, the files, then this).
    let _reservation = executor
        .budget
        .reserve_limits(Limits::AGENT)
        .map_err(|e| CallError::operational("RESOURCE_EXHAUSTED", e.to_string()))?;
    let n = WORKERS.fetch_add(1, Ordering::Relaxed);
    let files = WorkerFiles(
        executor
            .work_root
            .join(format!("agent-{}-{n}", std::process::id())),
    );
    let (package, scratch) = files.create().map_err(|e| {
        CallError::operational(
            "EXECUTION_FAILED",
            format!("cannot prepare the Agent worker: {e}"),
        )
    })?;
    // The HTTP worker is `jig` itself; an ACP client's worker is the
    // separately built `jig-agent-acp` installed beside it.
    let (program, args) = match &endpoint.native {
        Some(_) => (
            jig_verify::installed(acp::WORKER_PROGRAM)
                .map_err(|e| CallError::operational(e.code(), e.to_string()))?,
            Vec::new(),
        ),
        None => (
            std::env::current_exe().map_err(|e| {
                CallError::operational(
                    "UNAVAILABLE",
                    format!("cannot find the jig executable: {e}"),
                )
            })?,
            vec![worker::WORKER_ARG.into()],
        ),
    };
    let mut read_only: Vec<PathBuf> = RESOLVER_FILES
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    match &endpoint.native {
        Some(native) => {
            read_only.extend(program_dirs(&native.program));
            read_only.extend(native.read_only.iter().cloned());
        }
        None => {
            if let KeySource::File(path) = &endpoint.key {
                read_only.push(path.clone());
            }
        }
    }
    let launch = Launch {
        program,
        args,
        env: vec![("LANG".into(), "C.UTF-8".into())],
        cwd: scratch.clone(),
        package,
        scratch,
        // The host's own worker: its working files stay on the host.
        scratch_bytes: None,
        read_only,
        shown: Vec::new(),
        attachments: Vec::new(),
        limits: Limits::AGENT,
        network: true,
        view: None,
    };
    let mut contained = executor.sandbox.spawn(&launch).map_err(|e| {
        CallError::operational("UNAVAILABLE", format!("cannot start the Agent worker: {e}"))
    })?;
    let mut stdin = contained.child.stdin.take().expect("piped stdin");
    let stdout = contained.child.stdout.take().expect("piped stdout");
    // The worker's stderr is never shown: drain it so it cannot block.
    if let Some(mut stderr) = contained.child.stderr.take() {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
        });
    }
    let mut body = body.to_string().into_bytes();
    body.push(b'\n');
    let written = async {
        stdin.write_all(&body).await?;
        stdin.shutdown().await
    }
    .await;
    drop(stdin);
    drop(body);
    if written.is_err() {
        contained.terminate().await;
        let _ = contained.cleanup();
        return Err(CallError::operational(
            "EXECUTION_FAILED",
            "the Agent worker did not take its request (nothing was sent)",
        ));
    }

    let left = Duration::from_millis(
        services
            .deadline_unix_ms
            .saturating_sub(jig_provider_api::dispatch::now_unix_ms()),
    );
    let deadline = tokio::time::Instant::now() + left;
    let mut cancel = services.cancel.clone();
    let mut lines = tokio::io::BufReader::new(stdout);
    let mut dispatched = false;
    let mut verdict: Option<Value> = None;
    let mut ingress = stream.then(|| Ingress::start(call.ports.clone()));
    let stopped = loop {
        let mut line = Vec::new();
        let read = async {
            let mut limited = (&mut lines).take(MAX_WORKER_LINE_BYTES as u64 + 1);
            limited.read_until(b'\n', &mut line).await
        };
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break Some("DEADLINE_EXCEEDED"),
            _ = cancel.wait_for(|c| *c) => break Some("CANCELLED"),
            read = read => match read {
                Ok(0) | Err(_) => break None,
                Ok(_) if line.len() > MAX_WORKER_LINE_BYTES => break None,
                Ok(_) => {
                    let Ok(value) = serde_json::from_slice::<Value>(&line) else { break None };
                    if value.get("dispatching") == Some(&Value::Bool(true)) {
                        dispatched = true;
                    } else if let Some(item) = value.get("event") {
                        if let Some(ingress) = ingress.as_mut() {
                            ingress.offer(item.clone());
                        }
                    } else {
                        verdict = Some(value);
                        break None;
                    }
                }
            },
        }
    };
    // The items already taken are delivered before the result settles
    // (within the same deadline); after that the call's end seals the port.
    if let (None, Some(ingress)) = (stopped, ingress.take()) {
        ingress.drain(deadline).await;
    }
    match stopped {
        Some(_) => contained.terminate().await,
        None => {
            if tokio::time::timeout(WORKER_EXIT_GRACE, contained.child.wait())
                .await
                .is_err()
            {
                contained.terminate().await;
            }
        }
    }
    let fenced = contained.cleanup();
    drop(contained);
    drop(files);
    if let Some(code) = stopped {
        let message = if code == "CANCELLED" {
            "the Agent call was cancelled"
        } else {
            "the Agent call reached the deadline"
        };
        let message = if dispatched {
            format!("{message}; the request may have reached the endpoint and is not resent")
        } else {
            format!("{message} before the request was sent")
        };
        return Err(CallError::operational(code, message));
    }
    if fenced.is_err() {
        return Err(CallError::operational(
            if dispatched {
                "UNCERTAIN"
            } else {
                "EXECUTION_FAILED"
            },
            "the Agent worker's envelope could not be fenced and removed",
        ));
    }
    let Some(verdict) = verdict else {
        return Err(if dispatched {
            CallError::operational(
                "UNCERTAIN",
                "the Agent worker ended without a verdict after the request may have reached the endpoint; it is not resent",
            )
        } else {
            CallError::operational(
                "EXECUTION_FAILED",
                "the Agent worker ended before sending the request",
            )
        });
    };
    // The ACP worker's answer is judged here, like the HTTP worker's own.
    let verdict = match &endpoint.native {
        Some(_) => {
            acp::judge_line(schema.as_ref().map(|(wire, _)| wire), &verdict).unwrap_or(verdict)
        }
        None => verdict,
    };
    settle(verdict, schema.as_ref().map(|(_, compiled)| compiled))
}

/// The worker's verdict as the call's answer: a structured result is
/// validated with Schema/1 before the Flow sees it.
fn settle(verdict: Value, schema: Option<&flow::schema::Schema>) -> Result<Value, CallError> {
    if let Some(error) = verdict.get("error") {
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or("EXECUTION_FAILED");
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("the Agent worker failed");
        return Err(CallError::Operational {
            code: code.to_string(),
            message: message
                .chars()
                .take(jig_provider_api::MAX_MESSAGE_CHARS)
                .collect(),
            details: error.get("details").cloned(),
        });
    }
    let Some(result) = verdict.get("result").cloned() else {
        return Err(CallError::operational(
            "UNCERTAIN",
            "the Agent worker's verdict is not readable; the request is not resent",
        ));
    };
    if let Some(schema) = schema {
        if result.get("outcome").and_then(Value::as_str) == Some("completed") {
            let Some(structured) = result.get("structured") else {
                return Err(CallError::Operational {
                    code: "INVALID_RESULT".into(),
                    message: "the completed Agent result carries no structured value".into(),
                    details: Some(json!({ "code": "AGENT_RUN_STRUCTURED_REQUIRED" })),
                });
            };
            if let Err(invalid) = schema.validate(structured) {
                let mut details = invalid_details(&invalid);
                details["code"] = json!("AGENT_RUN_STRUCTURED_INVALID");
                return Err(CallError::Operational {
                    code: "INVALID_RESULT".into(),
                    message: format!("the Agent's structured result does not satisfy the responseSchema: {invalid}"),
                    details: Some(details),
                });
            }
        }
    }
    Ok(result)
}

/// The method's optional progress port (the ACP public-updates channel).
pub const EVENTS_PORT: &str = "events";
/// Items the host holds for `events` before they are delivered: past 16
/// items or 256 KiB the port fails `LAGGED` while the result settles.
pub(crate) const EVENTS_INGRESS_ITEMS: usize = 16;
pub(crate) const EVENTS_INGRESS_BYTES: usize = 256 * 1024;

/// How long, after the verdict, the items still held may take to reach
/// the reader before the port fails `LAGGED` and the result settles.
const EVENTS_DRAIN_GRACE: Duration = Duration::from_secs(1);
const LAGGED_MESSAGE: &str = "the Agent's progress outran the events reader (16 items / 256 KiB)";

enum Forward {
    Item(Value, usize),
}

/// The bounded ingress of the `events` port: items wait here until the
/// blocking port accepts them; an overflow fails the port `LAGGED` and
/// drops everything after it, and never delays the Agent's result.
struct Ingress {
    ports: std::sync::Arc<dyn jig_provider_api::ChannelPorts>,
    tx: Option<std::sync::mpsc::Sender<Forward>>,
    pending: std::sync::Arc<std::sync::Mutex<(usize, usize)>>,
    ended: bool,
    forwarder: tokio::task::JoinHandle<()>,
}

impl Ingress {
    fn start(ports: std::sync::Arc<dyn jig_provider_api::ChannelPorts>) -> Ingress {
        let (tx, rx) = std::sync::mpsc::channel::<Forward>();
        let forwarding = ports.clone();
        let pending = std::sync::Arc::new(std::sync::Mutex::new((0usize, 0usize)));
        let held = pending.clone();
        let forwarder = tokio::task::spawn_blocking(move || {
            while let Ok(forward) = rx.recv() {
                match forward {
                    Forward::Item(item, bytes) => {
                        let sent = forwarding.send(EVENTS_PORT, item);
                        let mut p = held.lock().unwrap_or_else(|e| e.into_inner());
                        p.0 -= 1;
                        p.1 -= bytes;
                        if sent.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ingress {
            ports,
            tx: Some(tx),
            pending,
            ended: false,
            forwarder,
        }
    }

    /// Take one item, or fail the port `LAGGED` when it would not fit.
    fn offer(&mut self, item: Value) {
        if self.ended {
            return;
        }
        let Some(tx) = &self.tx else { return };
        let bytes = flow::json::canonical(&item).len();
        let fits = {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            let fits = p.0 < EVENTS_INGRESS_ITEMS && p.1 + bytes <= EVENTS_INGRESS_BYTES;
            if fits {
                p.0 += 1;
                p.1 += bytes;
            }
            fits
        };
        if !fits {
            // Failed here, not behind the held items: the forwarder may be
            // blocked on a reader that never reads.
            self.lag();
            return;
        }
        if tx.send(Forward::Item(item, bytes)).is_err() {
            self.ended = true;
        }
    }

    fn lag(&mut self) {
        self.ended = true;
        self.tx = None;
        let _ = self.ports.fail(EVENTS_PORT, "LAGGED", LAGGED_MESSAGE);
    }

    /// Let the forwarder deliver what it took, within the grace (and the
    /// deadline); what it could not deliver by then fails the port `LAGGED`.
    async fn drain(mut self, deadline: tokio::time::Instant) {
        self.tx = None;
        let until = deadline.min(tokio::time::Instant::now() + EVENTS_DRAIN_GRACE);
        if tokio::time::timeout_at(until, &mut self.forwarder)
            .await
            .is_err()
            && !self.ended
        {
            self.lag();
        }
    }
}

/// The directories a native client's executable needs to be seen inside
/// the worker's envelope (beyond `/usr`, which every envelope shows): the
/// directory of its resolved file, or the prefix above a `bin/`, and the
/// directory of the named path when that is a link. Those runtime files
/// are shown read-only.
fn program_dirs(program: &Path) -> Vec<PathBuf> {
    let Ok(real) = program.canonicalize() else {
        return Vec::new();
    };
    if real.starts_with("/usr") {
        return Vec::new();
    }
    if real.starts_with("/nix/store") {
        return vec![PathBuf::from("/nix/store")];
    }
    let mut dirs = Vec::new();
    if program != real {
        dirs.extend(program.parent().map(Path::to_path_buf));
    }
    let prefix = real
        .parent()
        .filter(|bin| bin.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
        .or_else(|| real.parent())
        .filter(|p| *p != Path::new("/"))
        .map(Path::to_path_buf);
    dirs.extend(prefix);
    dirs
}

/// The worker's private files: an empty package view and its scratch,
/// removed when dropped (after the envelope is fenced).
struct WorkerFiles(PathBuf);

impl WorkerFiles {
    fn create(&self) -> std::io::Result<(PathBuf, PathBuf)> {
        let package = self.0.join("package");
        let scratch = self.0.join("scratch");
        std::fs::create_dir_all(&package)?;
        std::fs::create_dir_all(&scratch)?;
        Ok((package, scratch))
    }
}

impl Drop for WorkerFiles {
    fn drop(&mut self) {
        if Path::new(&self.0).exists() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jig_provider_api::{ChannelItem, ChannelPorts, GrantedPort, PortDirection};
    use jig_provider_builtin::agent::stream::chunk_item;
    use std::sync::{Arc, Condvar, Mutex};

    /// The events port of a reader that does not read until `open`:
    /// records what was sent and how the port was failed.
    struct HeldReader {
        ports: Vec<GrantedPort>,
        open: Mutex<bool>,
        opened: Condvar,
        sent: Mutex<Vec<Value>>,
        failed: Mutex<Vec<String>>,
    }

    impl HeldReader {
        fn new() -> Arc<HeldReader> {
            Arc::new(HeldReader {
                ports: vec![GrantedPort {
                    name: EVENTS_PORT.into(),
                    direction: PortDirection::Send,
                }],
                open: Mutex::new(false),
                opened: Condvar::new(),
                sent: Mutex::new(Vec::new()),
                failed: Mutex::new(Vec::new()),
            })
        }

        fn open(&self) {
            *self.open.lock().unwrap() = true;
            self.opened.notify_all();
        }
    }

    impl ChannelPorts for HeldReader {
        fn ports(&self) -> &[GrantedPort] {
            &self.ports
        }
        fn send(&self, _port: &str, item: Value) -> Result<(), CallError> {
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
            self.sent.lock().unwrap().push(item);
            Ok(())
        }
        fn next(&self, port: &str) -> Result<Option<ChannelItem>, CallError> {
            Err(jig_provider_api::not_granted(port))
        }
        fn close(&self, _port: &str) -> Result<(), CallError> {
            Ok(())
        }
        fn fail(&self, _port: &str, code: &str, _message: &str) -> Result<(), CallError> {
            self.failed.lock().unwrap().push(code.to_string());
            Ok(())
        }
    }

    fn item_of_bytes(bytes: usize) -> Value {
        let overhead = flow::json::canonical(&chunk_item("")).len();
        let item = chunk_item(&"x".repeat(bytes - overhead));
        assert_eq!(flow::json::canonical(&item).len(), bytes);
        item
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_ingress_holds_16_items_and_fails_lagged_on_the_17th() {
        let reader = HeldReader::new();
        let mut ingress = Ingress::start(reader.clone());
        for i in 0..EVENTS_INGRESS_ITEMS {
            ingress.offer(chunk_item(&format!("{i}")));
        }
        assert!(reader.failed.lock().unwrap().is_empty());
        ingress.offer(chunk_item("past"));
        assert_eq!(*reader.failed.lock().unwrap(), vec!["LAGGED".to_string()]);
        // What was held still reaches the reader; nothing after the overflow.
        reader.open();
        ingress
            .drain(tokio::time::Instant::now() + Duration::from_secs(5))
            .await;
        let sent = reader.sent.lock().unwrap().clone();
        assert!(sent.len() <= EVENTS_INGRESS_ITEMS);
        assert!(!sent.contains(&chunk_item("past")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_ingress_holds_256_kib_and_fails_lagged_one_byte_past() {
        let quarter = EVENTS_INGRESS_BYTES / 4;
        let at = HeldReader::new();
        let mut ingress = Ingress::start(at.clone());
        for _ in 0..4 {
            ingress.offer(item_of_bytes(quarter));
        }
        assert!(at.failed.lock().unwrap().is_empty());
        at.open();
        ingress
            .drain(tokio::time::Instant::now() + Duration::from_secs(5))
            .await;
        assert_eq!(at.sent.lock().unwrap().len(), 4);
        assert!(at.failed.lock().unwrap().is_empty());

        let past = HeldReader::new();
        let mut ingress = Ingress::start(past.clone());
        for _ in 0..3 {
            ingress.offer(item_of_bytes(quarter));
        }
        ingress.offer(item_of_bytes(quarter + 1));
        assert_eq!(*past.failed.lock().unwrap(), vec!["LAGGED".to_string()]);
        past.open();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_cannot_reach_the_reader_after_the_verdict_fails_lagged() {
        let reader = HeldReader::new();
        let mut ingress = Ingress::start(reader.clone());
        ingress.offer(chunk_item("held"));
        ingress
            .drain(tokio::time::Instant::now() + Duration::from_secs(5))
            .await;
        assert_eq!(*reader.failed.lock().unwrap(), vec!["LAGGED".to_string()]);
        reader.open();
    }
}
