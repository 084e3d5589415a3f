//! `jig run`, `jig runs` and `jig runs show` against a `jig serve` daemon:
//! named by `--server` / `JIG_SERVER` (`unix:/path/to.sock`, or
//! `http://host:port` or `https://host:port` with a bearer token from
//! `--token-file` / `JIG_SERVER_TOKEN_FILE`), or found through the
//! project's protected state while a local daemon holds it. An https://
//! daemon's certificate is checked against the system's roots, or only
//! against `--cacert` / `JIG_SERVER_CACERT` when given. Output and exit statuses are those of the
//! local commands: the daemon returns the same terminals and records.

use std::io::Write;
use std::path::{Path, PathBuf};

use flow::json::Value;
use http_body_util::BodyExt;
use hyper::body::Bytes;

use super::{exit, print_terminal, CliError, Code};
use jig_engine::exec::submit::RunRequest;
use jig_engine::terminal::{Delivery, Terminal};
use jig_server::serve::path_segment as segment;

/// The environment variable naming the daemon when `--server` is absent.
pub const SERVER_ENV: &str = "JIG_SERVER";
/// The environment variable naming the token file when `--token-file` is absent.
pub const TOKEN_FILE_ENV: &str = "JIG_SERVER_TOKEN_FILE";
/// The environment variable naming the CA certificates (PEM) an https://
/// daemon's certificate is checked against when `--cacert` is absent.
pub const CACERT_ENV: &str = "JIG_SERVER_CACERT";
/// A CA file larger than this is not one (a system bundle is about 200 KiB).
const MAX_CACERT_BYTES: u64 = 4 * 1024 * 1024;

/// Where the daemon listens.
#[derive(Debug, Clone)]
pub enum Endpoint {
    Unix(PathBuf),
    /// http:// or https://; `client` holds the roots an https:// daemon's
    /// certificate is checked against.
    Http {
        base: String,
        token: Vec<u8>,
        client: reqwest::Client,
    },
}

/// A daemon and the project it serves that these commands address.
pub struct Served {
    pub endpoint: Endpoint,
    /// `None`: the one project the daemon serves.
    pub project: Option<String>,
}

fn usage(message: impl Into<String>) -> CliError {
    CliError::new(Code::Usage, message)
}

fn unavailable(message: impl Into<String>) -> CliError {
    CliError::new(Code::Unavailable, message)
}

/// The daemon named by `--server` or `JIG_SERVER`, if any.
pub fn named(
    server: Option<&str>,
    token_file: Option<&Path>,
    cacert: Option<&Path>,
) -> Result<Option<Served>, CliError> {
    let text = match server {
        Some(text) => text.to_string(),
        None => match std::env::var(SERVER_ENV) {
            Ok(text) if !text.is_empty() => text,
            _ => return Ok(None),
        },
    };
    let endpoint = if let Some(path) = text.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(usage("--server unix: needs a socket path"));
        }
        Endpoint::Unix(PathBuf::from(path))
    } else if text.starts_with("http://") || text.starts_with("https://") {
        let file = token_file
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os(TOKEN_FILE_ENV).map(PathBuf::from))
            .ok_or_else(|| {
                usage(format!(
                    "--server {text} needs a bearer token: give --token-file or {TOKEN_FILE_ENV}"
                ))
            })?;
        let token = jig_server::serve::token::read_bytes(&file).map_err(CliError::from)?;
        let client = if text.starts_with("https://") {
            let cacert = cacert
                .map(Path::to_path_buf)
                .or_else(|| std::env::var_os(CACERT_ENV).map(PathBuf::from))
                .filter(|p| !p.as_os_str().is_empty());
            https_client(cacert.as_deref())?
        } else if cacert.is_some() {
            return Err(usage(format!(
                "--cacert checks an https:// daemon's certificate; {text} is plain HTTP"
            )));
        } else {
            reqwest::Client::new()
        };
        Endpoint::Http {
            base: text.trim_end_matches('/').to_string(),
            token,
            client,
        }
    } else {
        return Err(usage(format!(
            "--server {text:?} is not unix:/path/to.sock, http://host:port or https://host:port"
        )));
    };
    Ok(Some(Served {
        endpoint,
        project: None,
    }))
}

/// A client for an https:// daemon that trusts only `cacert`'s
/// certificates (PEM), or else the system's roots.
fn https_client(cacert: Option<&Path>) -> Result<reqwest::Client, CliError> {
    let mut builder = reqwest::Client::builder().tls_built_in_root_certs(false);
    match cacert {
        Some(path) => {
            let invalid = |m: String| {
                CliError::new(
                    Code::ConfigInvalid,
                    format!("CA file {}: {m}", path.display()),
                )
            };
            let meta = std::fs::metadata(path).map_err(|e| invalid(e.to_string()))?;
            if meta.len() > MAX_CACERT_BYTES {
                return Err(invalid(format!("larger than {MAX_CACERT_BYTES} bytes")));
            }
            let pem = std::fs::read(path).map_err(|e| invalid(e.to_string()))?;
            let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| invalid(format!("not PEM certificates: {e}")))?;
            if certificates.is_empty() {
                return Err(invalid("holds no PEM CERTIFICATE block".into()));
            }
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        None => {
            // Certificates the system lists but rustls cannot read are
            // skipped, as a browser would; none at all fails the handshake.
            for der in rustls_native_certs::load_native_certs().certs {
                if let Ok(certificate) = reqwest::Certificate::from_der(&der) {
                    builder = builder.add_root_certificate(certificate);
                }
            }
        }
    }
    builder
        .build()
        .map_err(|e| CliError::new(Code::Internal, format!("an HTTPS client: {e}")))
}

/// An error and its causes, as one line (reqwest's own text leaves out
/// why a request failed: a refused certificate, a reset).
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = e.source();
    }
    text
}

/// Whether the daemon's certificate was what failed the request.
fn refused_certificate(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(rustls::Error::InvalidCertificate(_)) = e.downcast_ref::<rustls::Error>() {
            return true;
        }
        // An io::Error's source skips the error it wraps: look inside it.
        cause = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}

/// The daemon holding the project at `root`, when its entry names a socket
/// that answers (a stale entry, with no listener, is ignored).
pub fn holding(root: &Path) -> Option<Served> {
    let entry = jig_engine::state::served_entry(root)?;
    let socket = PathBuf::from(entry["socket"].as_str()?);
    std::os::unix::net::UnixStream::connect(&socket).ok()?;
    Some(Served {
        endpoint: Endpoint::Unix(socket),
        project: entry["project"].as_str().map(str::to_string),
    })
}

/// One response: its status and its body, read as it arrives.
struct Response {
    status: u16,
    body: Body,
}

enum Body {
    Unix(hyper::body::Incoming),
    Http(reqwest::Response),
}

impl Response {
    /// The next piece of the body; `None` at its end.
    async fn chunk(&mut self) -> Result<Option<Bytes>, CliError> {
        let lost = |e: String| unavailable(format!("the daemon's response broke off: {e}"));
        match &mut self.body {
            Body::Unix(body) => loop {
                match body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(lost(e.to_string())),
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                }
            },
            Body::Http(response) => response.chunk().await.map_err(|e| lost(e.to_string())),
        }
    }

    /// The whole body, at most `limit` bytes.
    async fn bytes(mut self, limit: usize) -> Result<Vec<u8>, CliError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > limit {
                return Err(unavailable(format!(
                    "the daemon's response is larger than {limit} bytes"
                )));
            }
        }
        Ok(bytes)
    }

    /// The whole body, parsed as JSON/1 (bounded as the daemon bounds it).
    async fn json(mut self) -> Result<(u16, Value), CliError> {
        let mut bytes = Vec::new();
        while let Some(chunk) = self.chunk().await? {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > jig_server::serve::MAX_BODY_BYTES {
                return Err(unavailable(
                    "the daemon's response is larger than JSON/1 allows",
                ));
            }
        }
        let value = flow::json::parse(&bytes)
            .map_err(|e| unavailable(format!("the daemon's response is not JSON/1: {e}")))?;
        Ok((self.status, value))
    }
}

/// A non-success response as the CLI error it carries.
fn refusal(status: u16, value: &Value) -> CliError {
    match (value["code"].as_str(), value["message"].as_str()) {
        (Some(code), Some(message)) => CliError::Answered {
            code: code.to_string(),
            message: message.to_string(),
        },
        _ => unavailable(format!(
            "the daemon answered HTTP {status} without an error body"
        )),
    }
}

impl Endpoint {
    async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Response, CliError> {
        self.send_typed(method, path, body, "application/json")
            .await
    }

    async fn send_typed(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        content_type: &str,
    ) -> Result<Response, CliError> {
        match self {
            Endpoint::Unix(socket) => {
                let cannot = |e: String| {
                    unavailable(format!(
                        "cannot reach jig serve at {}: {e}",
                        socket.display()
                    ))
                };
                let stream = tokio::net::UnixStream::connect(socket)
                    .await
                    .map_err(|e| cannot(e.to_string()))?;
                let (mut sender, connection) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                        .await
                        .map_err(|e| cannot(e.to_string()))?;
                tokio::spawn(connection);
                let request = hyper::Request::builder()
                    .method(method)
                    .uri(path)
                    .header(hyper::header::HOST, "localhost")
                    .header(hyper::header::CONTENT_TYPE, content_type)
                    .body(http_body_util::Full::new(Bytes::from(
                        body.unwrap_or_default(),
                    )))
                    .map_err(|e| cannot(e.to_string()))?;
                let response = sender
                    .send_request(request)
                    .await
                    .map_err(|e| cannot(e.to_string()))?;
                Ok(Response {
                    status: response.status().as_u16(),
                    body: Body::Unix(response.into_body()),
                })
            }
            Endpoint::Http {
                base,
                token,
                client,
            } => {
                let cannot =
                    |e: String| unavailable(format!("cannot reach jig serve at {base}: {e}"));
                let method = reqwest::Method::from_bytes(method.as_bytes())
                    .map_err(|e| cannot(e.to_string()))?;
                let token = String::from_utf8_lossy(token);
                let mut request = client
                    .request(method, format!("{base}{path}"))
                    .bearer_auth(token)
                    .header(reqwest::header::CONTENT_TYPE, content_type);
                if let Some(body) = body {
                    request = request.body(body);
                }
                let response = request.send().await.map_err(|e| {
                    let mut text = causes(&e);
                    if refused_certificate(&e) {
                        text.push_str(&format!(
                            " (a certificate the system's roots do not sign needs --cacert FILE \
                             or {CACERT_ENV})"
                        ));
                    }
                    cannot(text)
                })?;
                Ok(Response {
                    status: response.status().as_u16(),
                    body: Body::Http(response),
                })
            }
        }
    }

    pub(super) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, CliError> {
        let body = body.map(|b| flow::json::canonical(&b));
        let (status, value) = self.send(method, path, body).await?.json().await?;
        if !(200..300).contains(&status) {
            return Err(refusal(status, &value));
        }
        Ok(value)
    }
}

/// A one-time console sign-in ticket from the daemon (`jig console`).
pub async fn console_ticket(endpoint: &Endpoint) -> Result<String, CliError> {
    let value = endpoint.call("POST", "/v1/console/tickets", None).await?;
    value["token"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| unavailable("the daemon answered a console ticket without a token"))
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Code::Internal, e.to_string()))
}

impl Served {
    /// The project's path prefix: the named one, else the daemon's only one.
    pub(super) async fn project_path(&self, local: Option<&str>) -> Result<String, CliError> {
        let name = match (&self.project, local) {
            (Some(name), _) => name.clone(),
            (None, local) => {
                let health = self.endpoint.call("GET", "/v1/health", None).await?;
                let served: Vec<&str> = health["projects"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                match (local, served.as_slice()) {
                    (Some(local), _) if served.contains(&local) => local.to_string(),
                    (_, [only]) => only.to_string(),
                    _ => {
                        return Err(CliError::new(
                            Code::ProjectNotFound,
                            format!(
                                "the daemon serves {}; run from one of those projects",
                                served.join(", ")
                            ),
                        ))
                    }
                }
            }
        };
        Ok(format!("/v1/projects/{}", segment(&name)))
    }
}

/// What `jig run` sends.
pub struct Submitted<'a> {
    pub target: &'a str,
    pub input: Value,
    pub key: Option<&'a str>,
    pub timeout: Option<&'a str>,
    pub receive: &'a [String],
    pub json: bool,
    /// The local project's name, to pick it among the daemon's.
    pub local: Option<String>,
}

impl Submitted<'_> {
    /// The JSON submission the daemon takes (`POST …/runs`).
    fn body(&self) -> RunRequest {
        RunRequest {
            key: self.key.map(str::to_string),
            timeout: self.timeout.map(str::to_string),
            ..RunRequest::new(self.target, self.input.clone())
        }
    }
}

/// Submit one Run and print it as `jig run` does; returns the exit status.
pub fn run(served: &Served, asked: Submitted) -> Result<u8, CliError> {
    runtime()?.block_on(async {
        let project = served.project_path(asked.local.as_deref()).await?;
        let mut body = asked.body();
        if asked.receive.is_empty() && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            let terminal = watched(served, &project, &body, asked.target).await?;
            return Ok(shown(&terminal, print_terminal(&terminal, asked.json)));
        }
        if asked.receive.is_empty() {
            let terminal = served
                .endpoint
                .call("POST", &format!("{project}/runs"), Some(body.to_value()))
                .await?;
            return Ok(shown(&terminal, print_terminal(&terminal, asked.json)));
        }
        body.receive = asked.receive.to_vec();
        let id = submit_unwaited(served, &project, &body).await?;
        receive(served, &format!("{project}/runs/{}/events", segment(&id))).await
    })
}

/// Submit `body` without waiting for its Run: its ID.
async fn submit_unwaited(
    served: &Served,
    project: &str,
    body: &RunRequest,
) -> Result<String, CliError> {
    let accepted = served
        .endpoint
        .call(
            "POST",
            &format!("{project}/runs?wait=false"),
            Some(body.to_value()),
        )
        .await?;
    Ok(accepted["runId"].as_str().unwrap_or_default().to_string())
}

/// How often a person's `jig run --server` asks how its Run is doing.
const WATCH_PERIOD: std::time::Duration = std::time::Duration::from_millis(200);
/// How long a Run waits queued before its status line says that no
/// worker has claimed it.
const UNCLAIMED_AFTER: std::time::Duration = std::time::Duration::from_secs(3);

/// Submit `body` and follow its Run to its terminal with the live status
/// line a person sees on a terminal: what it waits on, and, queued with
/// a database, that no worker has claimed it yet.
async fn watched(
    served: &Served,
    project: &str,
    body: &RunRequest,
    target: &str,
) -> Result<Value, CliError> {
    let id = submit_unwaited(served, project, body).await?;
    let waiting = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let shown = waiting.clone();
    let live = super::terminal::LiveStatus::start(
        move || shown.lock().unwrap().clone(),
        target.to_string(),
    );
    let started = std::time::Instant::now();
    let path = format!("{project}/runs/{}", segment(&id));
    let terminal = loop {
        let record = served.endpoint.call("GET", &path, None).await?;
        if let Some(terminal) = record.get("terminal").filter(|t| !t.is_null()) {
            break terminal.clone();
        }
        *waiting.lock().unwrap() = waits_on(&record, started.elapsed());
        tokio::time::sleep(WATCH_PERIOD).await;
    };
    if let Some(live) = live {
        live.stop();
    }
    Ok(terminal)
}

/// What a pending Run's record says it waits on: with a database, a
/// worker to claim it (none has, after [`UNCLAIMED_AFTER`]), or its
/// worker to start it; nothing once it runs.
fn waits_on(record: &Value, waited: std::time::Duration) -> Vec<String> {
    let queue = &record["queue"];
    let what = match (queue["status"].as_str(), queue["claims"].as_i64()) {
        (Some("queued"), Some(0)) if waited >= UNCLAIMED_AFTER => {
            "a worker: none has claimed it yet"
        }
        (Some("queued"), _) => "a worker",
        (Some("claimed"), _) => "its worker to start it",
        _ => return Vec::new(),
    };
    vec![what.to_string()]
}

/// A file Run for the daemon: the attachments captured here (by the same
/// capture as a local Run) and the checked `--out` destination, if any.
pub struct FileRun<'a> {
    pub captured: &'a jig_engine::files::Captured,
    pub destination: Option<jig_engine::files::Destination>,
}

/// Submit a file Run as a tar, wait for its terminal, download its packet
/// and publish it at `--out` as a local Run would; returns the exit status.
pub fn run_files(served: &Served, asked: Submitted, files: FileRun) -> Result<u8, CliError> {
    use jig_engine::files::archive;
    if !asked.receive.is_empty() {
        return Err(CliError::new(
            Code::FilesInvalid,
            "--receive is not carried with a file Run to a daemon yet; run it without --server",
        ));
    }
    runtime()?.block_on(async {
        let project = served.project_path(asked.local.as_deref()).await?;
        let mut body = asked.body();
        body.out = files.destination.is_some();
        let tar =
            archive::write_submission(&flow::json::canonical(&body.to_value()), files.captured)
                .map_err(|e| CliError::new(Code::Internal, format!("cannot write the tar: {e}")))?;
        let (status, terminal) = served
            .endpoint
            .send_typed(
                "POST",
                &format!("{project}/runs"),
                Some(tar),
                jig_server::serve::TAR_TYPE,
            )
            .await?
            .json()
            .await?;
        if !(200..300).contains(&status) {
            return Err(refusal(status, &terminal));
        }
        let mut answered = Terminal::from_value(&terminal).ok_or_else(|| {
            CliError::new(
                Code::Internal,
                "the daemon answered with a terminal this client cannot read",
            )
        })?;
        let mut failure = None;
        if let Some(destination) = &files.destination {
            let shown = destination.absolute.to_string_lossy().to_string();
            let published = match &answered.delivery {
                Some(Delivery::Written { .. }) => {
                    let id = answered.run_id.as_deref().unwrap_or_default();
                    let response = served
                        .endpoint
                        .send(
                            "GET",
                            &format!("{project}/runs/{}/packet", segment(id)),
                            None,
                        )
                        .await?;
                    if !(200..300).contains(&response.status) {
                        let (status, value) = response.json().await?;
                        return Err(refusal(status, &value));
                    }
                    let bytes = response.bytes(archive::MAX_PACKET_BYTES).await?;
                    archive::read_packet(&bytes).and_then(|(output, record)| {
                        jig_engine::files::publish(destination, &output, &record)
                    })
                }
                _ => Err(jig_engine::files::FilesError::delivery(
                    "the daemon did not deliver the packet",
                )),
            };
            // What a local Run shows: the delivery to this `--out`.
            if let Some(delivery) = answered.delivery.as_mut() {
                match published {
                    Ok(()) => {
                        if let Delivery::Written { destination, .. } = delivery {
                            *destination = shown;
                        }
                    }
                    Err(e) => {
                        *delivery = Delivery::Failed {
                            destination: shown,
                            code: e.code().to_string(),
                        };
                        failure = Some(e);
                    }
                }
            }
        }
        let terminal = answered.to_value();
        let status = shown(&terminal, print_terminal(&terminal, asked.json));
        if let Some(e) = failure {
            return Err(super::exit::delivery_error(&e));
        }
        Ok(status)
    })
}

/// A delivery that did not complete makes the Run's exit 2, as locally.
fn shown(terminal: &Value, status: u8) -> u8 {
    exit::shown_exit_code(terminal, status)
}

/// Copy a Run's channel lines and its terminal line to stdout (NDJSON, as
/// `--receive` prints locally; the daemon's status lines are not shown).
async fn receive(served: &Served, path: &str) -> Result<u8, CliError> {
    let mut response = served.endpoint.send("GET", path, None).await?;
    if !(200..300).contains(&response.status) {
        let (status, value) = response.json().await?;
        return Err(refusal(status, &value));
    }
    let mut stdout = std::io::stdout().lock();
    let mut pending: Vec<u8> = Vec::new();
    let mut terminal = None;
    while let Some(chunk) = response.chunk().await? {
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Ok(event) = flow::json::parse(&line[..line.len() - 1]) else {
                continue;
            };
            match event["type"].as_str() {
                Some("status") => continue,
                Some("terminal") => terminal = Some(event["result"].clone()),
                // Retention removed the Run before its terminal was read.
                Some("removed") => return Err(refusal(404, &event)),
                _ => {}
            }
            if stdout
                .write_all(&line)
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return Err(CliError::new(
                    Code::OutputFailed,
                    "stdout stopped taking the Run's items",
                ));
            }
        }
    }
    let terminal = terminal
        .ok_or_else(|| unavailable("the daemon's event stream ended before the terminal"))?;
    Ok(exit::run_exit_code(Terminal::status_of(&terminal)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A queued Run no worker ever claimed says so from
    /// [`UNCLAIMED_AFTER`] on, not before; one claimed before, or running,
    /// says what it waits on instead.
    #[test]
    fn a_queued_run_says_no_worker_claimed_it_from_the_bound_on() {
        let queued = json!({"queue": {"status": "queued", "claims": 0}});
        let just_before = UNCLAIMED_AFTER - std::time::Duration::from_millis(1);
        assert_eq!(waits_on(&queued, just_before), ["a worker"]);
        assert_eq!(
            waits_on(&queued, UNCLAIMED_AFTER),
            ["a worker: none has claimed it yet"]
        );
        let again = json!({"queue": {"status": "queued", "claims": 1}});
        assert_eq!(waits_on(&again, UNCLAIMED_AFTER), ["a worker"]);
        let claimed = json!({"queue": {"status": "claimed", "claims": 1}});
        assert_eq!(
            waits_on(&claimed, UNCLAIMED_AFTER),
            ["its worker to start it"]
        );
        assert!(waits_on(&json!({"queue": {"status": "running"}}), UNCLAIMED_AFTER).is_empty());
        assert!(waits_on(&json!({}), UNCLAIMED_AFTER).is_empty());
    }
}
