//! The HTTP API: routes, request parsing and error bodies. Paths are
//! versioned (`/v1/...`); the OpenAPI document next to this file describes
//! every route and is checked against this router by the tests.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use flow::json::Value;
use serde_json::json;
use tokio_stream::StreamExt;

use super::console::Console;
use super::http::{challenge, public_message, read_body, status, MAX_LIST, TAR_TYPE};
use super::listen::Peer;
use super::runner::{Live, ServedRun, Server};
use super::token::Bearer;
use crate::Error;
use jig_engine::exec::submit;

/// Request bodies are JSON/1 documents, bounded by its document limit.
pub const MAX_BODY_BYTES: usize = flow::json::MAX_DOCUMENT_BYTES;
pub const DEFAULT_LIST: usize = 50;
/// Event lines buffered per client before its stream waits (the Run never does).
const CLIENT_BUFFER: usize = 64;

/// The OpenAPI document this router implements.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Every route this router serves (method, path in OpenAPI `{param}`
/// syntax); the test holds the OpenAPI document to exactly this list.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/v1/health"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/metrics"),
    ("POST", "/v1/projects/{project}/runs"),
    ("GET", "/v1/projects/{project}/runs"),
    ("GET", "/v1/projects/{project}/runs/{id}"),
    ("POST", "/v1/projects/{project}/runs/{id}/cancel"),
    ("GET", "/v1/projects/{project}/runs/{id}/events"),
    ("GET", "/v1/projects/{project}/runs/{id}/packet"),
    ("GET", "/v1/projects/{project}/runs/{id}/input"),
    ("POST", "/v1/console/tickets"),
];

fn handler(method: &str, path: &str, console: &Arc<Console>) -> MethodRouter<Arc<Server>> {
    match (method, path) {
        ("GET", "/v1/health") => get(health),
        ("GET", "/v1/openapi.json") => get(openapi),
        ("GET", "/metrics") => get(metrics),
        ("POST", "/v1/projects/{project}/runs") => post(submit),
        ("GET", "/v1/projects/{project}/runs") => get(list),
        ("GET", "/v1/projects/{project}/runs/{id}") => get(show),
        ("POST", "/v1/projects/{project}/runs/{id}/cancel") => post(cancel),
        ("GET", "/v1/projects/{project}/runs/{id}/events") => get(events),
        ("GET", "/v1/projects/{project}/runs/{id}/packet") => get(packet),
        ("GET", "/v1/projects/{project}/runs/{id}/input") => get(input),
        ("POST", "/v1/console/tickets") => {
            let console = console.clone();
            post(move || async move { ticket(&console) })
        }
        _ => unreachable!("every listed route has a handler"),
    }
}

/// What a listener serves beside the API.
#[derive(Debug, Clone, Copy)]
pub struct Exposure {
    /// The console's pages under `/console`.
    pub console: bool,
    /// The listener is TLS: the console's cookie is `Secure`.
    pub secure: bool,
}

/// The router over [`ROUTES`]; with a token, every request must bear it.
/// With `exposure.console`, the console's pages beside it under `/console`
/// (they take a session cookie instead, see [`super::console`]).
pub fn router(
    server: Arc<Server>,
    token: Option<Arc<Bearer>>,
    console: Arc<Console>,
    exposure: Exposure,
) -> Router {
    let mut routes = Router::new();
    for (method, path) in ROUTES {
        routes = routes.route(path, handler(method, path, &console));
    }
    let routes = routes
        .fallback(|| async { error(404, "NOT_FOUND", "no such route") })
        .with_state(server.clone());
    let api = match token.clone() {
        None => routes,
        Some(token) => routes.layer(axum::middleware::from_fn(
            move |req: Request, next: Next| {
                let token = token.clone();
                async move { authorize(&token, req, next).await }
            },
        )),
    };
    let api = api.layer(axum::middleware::from_fn(json_errors));
    if exposure.console {
        api.merge(super::console::router(
            server,
            console,
            token,
            exposure.secure,
        ))
    } else {
        api
    }
}

/// The longest text of axum's own refusal kept as a message.
const MAX_REJECTION_TEXT: usize = 1024;

/// axum's own refusals (a query string, path segment, method or body its
/// extractors cannot take) are plain text; here they become the API's
/// `{code, message}` too, so every API error reads alike.
async fn json_errors(req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let code = match status {
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::METHOD_NOT_ALLOWED => "METHOD_NOT_ALLOWED",
        s if s.is_client_error() => "INVALID_REQUEST",
        _ => "INTERNAL",
    };
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_REJECTION_TEXT)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = match text.is_empty() {
        true => status
            .canonical_reason()
            .unwrap_or("refused")
            .to_ascii_lowercase(),
        false => text,
    };
    let answer = error(status.as_u16(), code, &message);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, answer.into_body())
}

/// `POST /v1/console/tickets`: a one-time console sign-in link's token,
/// for a client the API already trusts (`jig console` does this).
fn ticket(console: &Console) -> Response {
    match console.mint_ticket() {
        Ok(ticket) => json_response(
            201,
            &json!({
                "token": ticket,
                "path": format!("/console/login?token={ticket}"),
                "expiresInSeconds": super::console::session::TICKET_TTL.as_secs(),
            }),
        ),
        Err(refusal) => refused(refusal),
    }
}

async fn authorize(bearer: &Bearer, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
    let peer = req.extensions().get::<Peer>().copied();
    match bearer.check(peer, given) {
        Ok(()) => next.run(req).await,
        Err(refusal) => refused(refusal),
    }
}

fn json_response(status: u16, value: &Value) -> Response {
    let mut body = flow::json::canonical(value);
    body.push(b'\n');
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

fn error(status: u16, code: &str, message: &str) -> Response {
    json_response(status, &json!({"code": code, "message": message}))
}

/// A refused request as its HTTP answer: [`status`], code and message.
/// A body refused unread (too large, too slow) also ends the connection.
fn refused(refusal: Error) -> Response {
    let mut response = error(status(&refusal), refusal.code(), &public_message(&refusal));
    challenge(&refusal, response.headers_mut());
    response
}

async fn health(State(server): State<Arc<Server>>) -> Response {
    json_response(
        200,
        &json!({
            "status": if server.accepting() { "ok" } else { "draining" },
            "projects": server.project_names(),
        }),
    )
}

async fn openapi() -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        OPENAPI.as_bytes(),
    )
        .into_response()
}

async fn metrics(State(server): State<Arc<Server>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        server.metrics_text().await,
    )
        .into_response()
}

/// The submission body ([`submit::RunRequest`]), read strictly.
pub(super) fn parse_submission(bytes: &[u8]) -> Result<ServedRun, Error> {
    let run = submit::RunRequest::parse(bytes).map_err(Error::RequestInvalid)?;
    Ok(ServedRun { run, files: None })
}

#[derive(serde::Deserialize)]
struct SubmitQuery {
    /// `false`: answer 202 at once instead of waiting for the terminal.
    wait: Option<bool>,
}

/// A file Run's body: a tar of `request.json` (the JSON submission) and
/// `attachments/NAME/...`, held to the capture limits with their codes.
async fn parse_file_submission(body: Body) -> Result<ServedRun, Error> {
    use jig_engine::files::archive::{read_submission, MAX_SUBMISSION_BYTES};
    let bytes = read_body(body, MAX_SUBMISSION_BYTES, || {
        Error::FilesTooLarge(format!(
            "the tar is larger than the file Run limit of {MAX_SUBMISSION_BYTES} bytes"
        ))
    })
    .await?;
    let (request, captured) = read_submission(&bytes)?;
    let mut request = parse_submission(&request)?;
    request.files = Some(captured);
    Ok(request)
}

async fn submit(
    State(server): State<Arc<Server>>,
    UrlPath(project): UrlPath<String>,
    Query(query): Query<SubmitQuery>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let is_tar = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(TAR_TYPE));
    let parsed = if is_tar {
        parse_file_submission(body).await
    } else {
        read_body(body, MAX_BODY_BYTES, || {
            Error::BodyTooLarge(format!(
                "the body is larger than the JSON/1 limit of {MAX_BODY_BYTES} bytes"
            ))
        })
        .await
        .and_then(|bytes| parse_submission(&bytes))
    };
    let request = match parsed {
        Ok(request) => request,
        Err(refusal) => return refused(refusal),
    };
    let (record, live) = match server.submit(&project, request).await {
        Ok(submitted) => submitted,
        Err(refusal) => return refused(refusal),
    };
    if query.wait == Some(false) {
        let mut response = json_response(
            202,
            &json!({"runId": record.id, "status": record.status().as_str()}),
        );
        if let Ok(location) =
            HeaderValue::from_str(&format!("/v1/projects/{project}/runs/{}", record.id))
        {
            response.headers_mut().insert(header::LOCATION, location);
        }
        return response;
    }
    // A replay of a Run still in flight here waits for it too.
    if let Some(live) = live.or_else(|| server.live(&record.id)) {
        wait_finished(&live).await;
    }
    match server.record(&project, &record.id).await {
        Ok(record) => json_response(200, &submit::shown_terminal(&record)),
        Err(refusal) => refused(refusal),
    }
}

async fn wait_finished(live: &Live) {
    let mut changes = live.subscribe();
    loop {
        if live.read_from(usize::MAX).1 {
            return;
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}

#[derive(serde::Deserialize)]
struct ListQuery {
    limit: Option<usize>,
}

async fn list(
    State(server): State<Arc<Server>>,
    UrlPath(project): UrlPath<String>,
    Query(query): Query<ListQuery>,
) -> Response {
    let limit = query.limit.unwrap_or(DEFAULT_LIST).min(MAX_LIST);
    match server.list(&project, limit).await {
        Ok(listing) => {
            let runs: Vec<Value> = listing.records.into_iter().map(|r| r.value).collect();
            let mut body = json!({ "runs": runs });
            // Only when there are any: a record that cannot be read, by its
            // id and its file in the project, for the operator.
            if !listing.unreadable.is_empty() {
                body["unreadable"] = listing
                    .unreadable
                    .iter()
                    .map(|u| json!({"id": u.id, "file": u.file}))
                    .collect();
            }
            json_response(200, &body)
        }
        Err(refusal) => refused(refusal),
    }
}

async fn show(
    State(server): State<Arc<Server>>,
    UrlPath((project, id)): UrlPath<(String, String)>,
) -> Response {
    match server.record(&project, &id).await {
        Ok(record) => json_response(200, &record.value),
        Err(refusal) => refused(refusal),
    }
}

/// The Run's input, its canonical bytes as kept.
async fn input(
    State(server): State<Arc<Server>>,
    UrlPath((project, id)): UrlPath<(String, String)>,
) -> Response {
    match server.input(&project, &id).await {
        Ok((_, Some(input))) => json_response(200, &input),
        Ok((record, None)) => refused(Error::InputNotRetained(record.id)),
        Err(refusal) => refused(refusal),
    }
}

async fn cancel(
    State(server): State<Arc<Server>>,
    UrlPath((project, id)): UrlPath<(String, String)>,
) -> Response {
    match server.cancel(&project, &id).await {
        Ok((record, true)) => {
            json_response(202, &json!({"runId": record.id, "status": "cancelling"}))
        }
        Ok((record, false)) => json_response(
            200,
            &json!({"runId": record.id, "status": record.status().as_str()}),
        ),
        Err(refusal) => refused(refusal),
    }
}

async fn events(
    State(server): State<Arc<Server>>,
    UrlPath((project, id)): UrlPath<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let record = match server.record(&project, &id).await {
        Ok(record) => record,
        Err(refusal) => return refused(refusal),
    };
    let sse = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(CLIENT_BUFFER);
    match server.live(&id) {
        Some(live) => {
            tokio::spawn(async move {
                live.forward(|line| {
                    let tx = tx.clone();
                    let line = Bytes::copy_from_slice(&line);
                    async move { tx.send(line).await.is_ok() }
                })
                .await;
            });
        }
        None => {
            // Not held in memory (settled long ago, or before a restart):
            // the recorded terminal is the whole stream.
            let line = match record.terminal() {
                Some(terminal) => json!({"type": "terminal", "result": terminal}),
                None => json!({"type": "status", "status": "pending", "runId": record.id}),
            };
            let mut bytes = flow::json::canonical(&line);
            bytes.push(b'\n');
            let _ = tx.try_send(Bytes::from(bytes));
        }
    }
    let lines = tokio_stream::wrappers::ReceiverStream::new(rx);
    if sse {
        return sse_events(lines, SSE_KEEP_ALIVE);
    }
    // NDJSON has no comment line: an empty or extra line would be a line
    // every reader must know to skip, so a quiet NDJSON stream stays quiet
    // (docs/src/serving.md); a client behind an idle timeout asks for SSE.
    (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(lines.map(Ok::<_, std::convert::Infallible>)),
    )
        .into_response()
}

/// How often a quiet SSE event stream sends a `: keep-alive` comment, so a
/// proxy with an idle timeout does not cut it.
pub const SSE_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// Event lines (NDJSON, one per item) as Server-Sent Events, one `data:`
/// line each, with a `: keep-alive` comment after `keep_alive` of quiet.
fn sse_events(
    lines: impl tokio_stream::Stream<Item = Bytes> + Send + 'static,
    keep_alive: std::time::Duration,
) -> Response {
    let events = lines.map(|line| {
        let line = line.strip_suffix(b"\n").unwrap_or(&line);
        Ok::<_, std::convert::Infallible>(Event::default().data(String::from_utf8_lossy(line)))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
        .into_response()
}

/// A file Run's published packet as a tar (`result.json`, `files/...`);
/// 404 `PACKET_NOT_FOUND` until it is delivered, or for a direct Run.
async fn packet(
    State(server): State<Arc<Server>>,
    UrlPath((project, id)): UrlPath<(String, String)>,
) -> Response {
    let packet = match server.packet(&project, &id).await {
        Ok(packet) => packet,
        Err(refusal) => return refused(refusal),
    };
    ([(header::CONTENT_TYPE, TAR_TYPE)], packet).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_quiet_sse_stream_carries_a_keep_alive_comment_within_the_interval() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let interval = std::time::Duration::from_millis(50);
        let response = sse_events(tokio_stream::wrappers::ReceiverStream::new(rx), interval);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        let mut body = response.into_body().into_data_stream();
        tx.send(Bytes::from_static(b"{\"type\":\"status\"}\n"))
            .await
            .unwrap();
        async fn next(body: &mut axum::body::BodyDataStream) -> Bytes {
            let frame = tokio::time::timeout(std::time::Duration::from_secs(1), body.next());
            frame.await.unwrap().unwrap().unwrap()
        }
        assert_eq!(next(&mut body).await, "data: {\"type\":\"status\"}\n\n");
        // Then nothing for a while: a comment line, which SSE readers skip.
        let started = std::time::Instant::now();
        assert_eq!(next(&mut body).await, ": keep-alive\n\n");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(next(&mut body).await, ": keep-alive\n\n");
        drop(tx);
        assert!(body.next().await.is_none());
        assert_eq!(SSE_KEEP_ALIVE, std::time::Duration::from_secs(15));
    }

    #[test]
    fn submission_bodies_are_strict() {
        assert!(parse_submission(br#"{"target":"flow:flows/a","input":1}"#).is_ok());
        let code = |b: &[u8]| parse_submission(b).err().unwrap().code();
        assert_eq!(code(b"{"), "INVALID_REQUEST");
        assert_eq!(code(b"[]"), "INVALID_REQUEST");
        assert_eq!(code(br#"{"input":1}"#), "INVALID_REQUEST");
        assert_eq!(code(br#"{"target":"x","extra":1}"#), "INVALID_REQUEST");
        assert_eq!(code(br#"{"target":"x","receive":[1]}"#), "INVALID_REQUEST");
        assert_eq!(code(br#"{"target":"x","a":1,"a":2}"#), "INVALID_REQUEST");
    }

    #[test]
    fn each_refusal_has_the_status_of_what_failed() {
        use jig_engine::files::FilesError;
        use jig_engine::state::RunsError;
        use jig_engine::Error as Engine;
        let cases: Vec<(Error, u16, &str)> = vec![
            (
                Engine::TargetMalformed.into(),
                400,
                "JIG_RUN_TARGET_INVALID",
            ),
            (
                Engine::TargetNotAdmitted {
                    target: "flow:x".into(),
                    admitted: "none".into(),
                }
                .into(),
                404,
                "JIG_RUN_TARGET_INVALID",
            ),
            (
                Engine::KeyInvalid {
                    max: submit::MAX_KEY_BYTES,
                }
                .into(),
                400,
                "INVALID_REQUEST",
            ),
            (Engine::AdmissionMissing.into(), 409, "ADMISSION_MISSING"),
            (RunsError::Conflict.into(), 409, "SUBMISSION_CONFLICT"),
            (RunsError::NotFound("r".into()).into(), 404, "RUN_NOT_FOUND"),
            (
                FilesError::invalid("x").into(),
                400,
                "JIG_RUN_FILES_INVALID",
            ),
            (FilesError::delivery("x").into(), 500, "JIG_DELIVERY_FAILED"),
            (Error::BodyTooLarge("x".into()), 413, "INVALID_REQUEST"),
            (
                Error::FilesTooLarge("x".into()),
                413,
                "JIG_RUN_FILES_INVALID",
            ),
            (Error::Exhausted("x".into()), 429, "RESOURCE_EXHAUSTED"),
            (Error::Closed, 503, "PROJECT_CLOSED"),
            (Error::Database("x".into()), 503, "JIG_DATABASE_UNAVAILABLE"),
            (Error::PacketNotFound("r".into()), 404, "PACKET_NOT_FOUND"),
            (Error::Unauthenticated("x".into()), 401, "UNAUTHENTICATED"),
            (
                Error::CsrfInvalid("x".into()),
                403,
                "JIG_CONSOLE_CSRF_INVALID",
            ),
        ];
        for (error, expected, code) in cases {
            assert_eq!(
                (status(&error), error.code()),
                (expected, code),
                "{error:?}"
            );
        }
    }
}
