//! The operator console: server-rendered pages over the same [`Server`]
//! methods the JSON API calls (submit, record, list, cancel, the event
//! logs), so nothing here decides what runs. Every page and action needs a
//! session ([`session`]); every state-changing request also needs the
//! session's CSRF token and a same-origin fetch; every response carries a
//! strict Content-Security-Policy. The script and the stylesheet are
//! embedded in the binary.

mod pages;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use flow::json::Value;
use serde_json::json;

pub use session::Console;
use session::Session;

use super::http::{challenge, public_message, read_body, status, MAX_LIST, TAR_TYPE};
use super::listen::Peer;
use super::runner::{ServedRun, Server};
use super::token::{self, Bearer};
use crate::Error;
use jig_engine::exec::submit::RunRequest;

/// The Content-Security-Policy of every console response: only this
/// origin's script, style and connections; no frames, plugins or inline
/// code.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// Runs on one page of the list.
pub const PAGE_SIZE: usize = 50;
/// The sign-in form's body: a token and its field name fit many times over.
/// A longer one is refused (413) before more of it is read.
pub const LOGIN_BODY_BYTES: usize = 4096;
/// How often a Run page without a held event log re-reads its record.
const RECORD_POLL: Duration = Duration::from_millis(500);

const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

#[derive(Clone)]
struct Door {
    server: Arc<Server>,
    console: Arc<Console>,
    /// TCP: the API's bearer token signs in (the login form).
    bearer: Option<Arc<Bearer>>,
    /// The listener is TLS, so the session cookie is `Secure` (never on
    /// plain HTTP, where a browser would drop it).
    secure: bool,
}

/// The console's routes under `/console`, for one listener.
pub fn router(
    server: Arc<Server>,
    console: Arc<Console>,
    bearer: Option<Arc<Bearer>>,
    secure: bool,
) -> Router {
    let door = Door {
        server,
        console,
        bearer,
        secure,
    };
    Router::new()
        .route("/console", get(|| async { see_other("/console/") }))
        .route("/console/", get(projects))
        .route("/console/login", get(login_page).post(login))
        .route("/console/logout", post(logout))
        .route("/console/assets/{name}", get(asset))
        .route("/console/projects/{project}/runs", get(runs).post(submit))
        .route("/console/projects/{project}/runs/rows", get(rows))
        .route("/console/projects/{project}/runs/live", get(list_live))
        .route("/console/projects/{project}/submit", get(submit_page))
        .route("/console/projects/{project}/runs/{id}", get(run))
        .route("/console/projects/{project}/runs/{id}/cancel", post(cancel))
        .route("/console/projects/{project}/runs/{id}/events", get(events))
        .route("/console/projects/{project}/runs/{id}/packet", get(packet))
        .route(
            "/console/projects/{project}/runs/{id}/packet/files/{*path}",
            get(packet_file),
        )
        .route_layer(axum::middleware::from_fn_with_state(door.clone(), gate))
        .with_state(door)
        .layer(axum::middleware::from_fn(headers))
}

/// The headers every console response carries.
async fn headers(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: under it a browser sends `Origin: null` even on
    // the console's own forms, which `same_origin` refuses. `same-origin`
    // still sends no referrer anywhere else.
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn cookie_header(req: &Request) -> Option<&str> {
    req.headers()
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
}

/// Every route but sign-in and the static assets needs a session; every
/// state-changing request, sign-in included, must come from this origin
/// ([`same_origin`]); its CSRF token is checked by the handler, which
/// reads the form.
async fn gate(State(door): State<Door>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let open = path == "/console/login" || path.starts_with("/console/assets/");
    let session = door.console.session(cookie_header(&req));
    let changes = req.method() != Method::GET && req.method() != Method::HEAD;
    if changes && !same_origin(req.headers()) {
        return refuse(
            &door,
            session.as_ref(),
            Error::CsrfInvalid("a console action must come from the console's own pages".into()),
        );
    }
    if open {
        return next.run(req).await;
    }
    let Some(session) = session else {
        return refuse(
            &door,
            None,
            Error::Unauthenticated("sign in to the console first".into()),
        );
    };
    req.extensions_mut().insert(session);
    next.run(req).await
}

/// Whether a request comes from the console's own pages: `Sec-Fetch-Site`,
/// when the browser sends it, says `same-origin`, and `Origin`, when
/// sent, names this very host (`null`, another host or another port is
/// refused, whatever CSRF token the form carries).
fn same_origin(headers: &axum::http::HeaderMap) -> bool {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if text(header::HeaderName::from_static("sec-fetch-site")).is_some_and(|s| s != "same-origin") {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let authority = origin.to_str().ok().and_then(|o| {
        o.strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
    });
    match (authority, text(header::HOST)) {
        (Some(authority), Some(host)) => authority.eq_ignore_ascii_case(host),
        _ => false,
    }
}

fn see_other(to: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

fn html(status: u16, markup: maud::Markup) -> Response {
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// A refusal as a page, with the API's status for the same error.
fn refuse(door: &Door, session: Option<&Session>, refusal: Error) -> Response {
    let status = status(&refusal);
    // Without a session, the sign-in page: nothing of the projects shows.
    let mut response = match session {
        None => html(
            status,
            pages::login(door.bearer.is_some(), Some(&public_message(&refusal))),
        ),
        Some(session) => {
            let projects = door.server.project_names();
            let frame = pages::Frame {
                title: "Refused",
                csrf: Some(session.csrf.as_str()),
                projects: &projects,
            };
            html(
                status,
                pages::refusal(&frame, refusal.code(), &public_message(&refusal)),
            )
        }
    };
    if !matches!(refusal, Error::Unauthenticated(_)) {
        challenge(&refusal, response.headers_mut());
    }
    response
}

/// The session's CSRF token must come back with every action.
fn check_csrf(session: &Session, given: &str) -> Result<(), Error> {
    if token::same(session.csrf.as_bytes(), given.as_bytes()) {
        Ok(())
    } else {
        Err(Error::CsrfInvalid(
            "the console action lacks this session's CSRF token; reload the page".into(),
        ))
    }
}

fn signed_in(door: &Door, session_id: &str) -> Response {
    let mut response = see_other("/console/");
    let cookie = format!(
        "{}={session_id}; {}",
        session::COOKIE,
        cookie_attributes(door)
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The session cookie's attributes: `Secure` only on a TLS listener.
fn cookie_attributes(door: &Door) -> &'static str {
    if door.secure {
        "Path=/console; HttpOnly; SameSite=Strict; Secure"
    } else {
        "Path=/console; HttpOnly; SameSite=Strict"
    }
}

#[derive(serde::Deserialize)]
struct TicketQuery {
    token: Option<String>,
}

/// `GET /console/login?token=T`: spend a one-time ticket from `jig
/// console`; without one, the sign-in page.
async fn login_page(State(door): State<Door>, Query(q): Query<TicketQuery>) -> Response {
    match q.token {
        None => html(200, pages::login(door.bearer.is_some(), None)),
        Some(ticket) => match door.console.redeem(&ticket) {
            Ok(id) => signed_in(&door, &id),
            Err(refusal) => refuse(&door, None, refusal),
        },
    }
}

#[derive(serde::Deserialize)]
struct LoginForm {
    token: String,
}

/// The sign-in form, read only up to [`LOGIN_BODY_BYTES`] and within the
/// body timeout.
async fn login_form(req: Request) -> Result<LoginForm, Error> {
    let too_large = || {
        Error::BodyTooLarge(format!(
            "the sign-in form is larger than {LOGIN_BODY_BYTES} bytes"
        ))
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > LOGIN_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let bytes = read_body(req.into_body(), LOGIN_BODY_BYTES, too_large).await?;
    serde_urlencoded::from_bytes(&bytes)
        .map_err(|e| Error::RequestInvalid(format!("the sign-in form is malformed: {e}")))
}

/// `POST /console/login`: the listener's bearer token (TCP only).
async fn login(State(door): State<Door>, req: Request) -> Response {
    let peer = req.extensions().get::<Peer>().copied();
    let form = match login_form(req).await {
        Ok(form) => form,
        Err(refusal) => return refuse(&door, None, refusal),
    };
    let given = form.token.trim().as_bytes();
    let checked = match &door.bearer {
        Some(bearer) => bearer.check(peer, Some(given)),
        None => Err(Error::Unauthenticated(String::new())),
    };
    if let Err(refusal) = checked {
        let refusal = match refusal {
            Error::Unauthenticated(_) => {
                Error::Unauthenticated("that is not this server's bearer token".into())
            }
            other => other,
        };
        return refuse(&door, None, refusal);
    }
    match door.console.open_session() {
        Ok(id) => signed_in(&door, &id),
        Err(refusal) => refuse(&door, None, refusal),
    }
}

#[derive(serde::Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    headers: axum::http::HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refusal) = check_csrf(&session, &form.csrf) {
        return refuse(&door, Some(&session), refusal);
    }
    door.console
        .close(headers.get(header::COOKIE).and_then(|v| v.to_str().ok()));
    let mut response = see_other("/console/login");
    let gone = format!(
        "{}=; {}; Max-Age=0",
        session::COOKIE,
        cookie_attributes(&door)
    );
    if let Ok(value) = HeaderValue::from_str(&gone) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

async fn asset(UrlPath(name): UrlPath<String>) -> Response {
    let (body, kind) = match name.as_str() {
        "console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "console.css" => (STYLE, "text/css; charset=utf-8"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn frame<'a>(title: &'a str, session: &'a Session, projects: &'a [String]) -> pages::Frame<'a> {
    pages::Frame {
        title,
        csrf: Some(&session.csrf),
        projects,
    }
}

async fn projects(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
) -> Response {
    let names = door.server.project_names();
    let mut views = Vec::new();
    for name in &names {
        let generation = match door.server.generation(name) {
            Ok(g) => g,
            Err(refusal) => return refuse(&door, Some(&session), refusal),
        };
        let targets = match door.server.targets(name).await {
            Ok(t) => t,
            Err(refusal) => return refuse(&door, Some(&session), refusal),
        };
        let pending = match door.server.list(name, MAX_LIST).await {
            Ok(listing) => listing
                .records
                .iter()
                .filter(|r| r.terminal().is_none())
                .count(),
            Err(refusal) => return refuse(&door, Some(&session), refusal),
        };
        let source_changed = match door.server.source_changed(name).await {
            Ok(changed) => changed,
            Err(refusal) => return refuse(&door, Some(&session), refusal),
        };
        views.push(pages::ProjectView {
            name: name.clone(),
            source_changed,
            generation: generation
                .as_ref()
                .map(|g| (g.number, g.plan_digest.clone())),
            plan: generation.map(|g| g.plan),
            targets: targets
                .into_iter()
                .map(|(t, p)| {
                    let m = p.metadata();
                    (t, m.name.clone(), m.description.clone())
                })
                .collect(),
            pending,
        });
    }
    html(
        200,
        pages::projects(
            &frame("Projects", &session, &names),
            &views,
            door.server.occupancy(),
        ),
    )
}

#[derive(serde::Deserialize, Default)]
struct ListQuery {
    status: Option<String>,
    target: Option<String>,
    page: Option<usize>,
}

impl ListQuery {
    fn parsed(self) -> pages::RunsQuery {
        pages::RunsQuery {
            status: self.status.filter(|s| !s.is_empty()),
            target: self.target.filter(|s| !s.is_empty()),
            page: self.page.unwrap_or(0).min(MAX_LIST / PAGE_SIZE),
        }
    }
}

/// One page of the newest Runs (of the newest [`MAX_LIST`])
/// that pass the filters, and whether an older page exists.
async fn page_of(
    server: &Server,
    project: &str,
    query: &pages::RunsQuery,
) -> Result<(Vec<Value>, bool), Error> {
    let listing = server.list(project, MAX_LIST).await?;
    // A record that cannot be read is listed first, as `unreadable`, with
    // its file where the target would be: the rest is listed as ever.
    let unreadable = listing.unreadable.into_iter().map(|u| {
        json!({
            "id": u.id,
            "target": format!("(record not readable: {})", u.file),
            "terminal": {"status": "unreadable", "code": "PROJECT_STATE_INVALID"},
        })
    });
    let records = listing.records.into_iter().map(|r| r.value);
    let mut kept = unreadable.chain(records).filter(|v| {
        let (status, ..) = pages::run_cells(v);
        query.status.as_ref().is_none_or(|s| *s == status)
            && query
                .target
                .as_ref()
                .is_none_or(|t| v.get("target").and_then(Value::as_str) == Some(t.as_str()))
    });
    let page: Vec<Value> = kept
        .by_ref()
        .skip(query.page * PAGE_SIZE)
        .take(PAGE_SIZE)
        .collect();
    let more = kept.next().is_some();
    Ok((page, more))
}

async fn runs(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath(project): UrlPath<String>,
    Query(q): Query<ListQuery>,
) -> Response {
    let query = q.parsed();
    let (records, more) = match page_of(&door.server, &project, &query).await {
        Ok(found) => found,
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    let targets = match door.server.generation(&project) {
        Ok(Some(g)) => jig_engine::exec::Executor::targets(&g.plan),
        Ok(None) => Vec::new(),
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    let names = door.server.project_names();
    html(
        200,
        pages::runs(
            &frame("Runs", &session, &names),
            &project,
            &query,
            &targets,
            &records,
            more,
        ),
    )
}

/// The rows of a Runs page alone (the live list swaps them in).
async fn rows(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath(project): UrlPath<String>,
    Query(q): Query<ListQuery>,
) -> Response {
    let query = q.parsed();
    match page_of(&door.server, &project, &query).await {
        Ok((records, _)) => html(200, pages::run_rows(&project, &records)),
        Err(refusal) => refuse(&door, Some(&session), refusal),
    }
}

/// Server-Sent Events: `changed` once at the start (what changed between
/// the page and this stream) and whenever one of the project's Runs is
/// recorded, settles or is removed ([`Server::watch_runs`]; at most
/// `MAX_LIST_VIEWERS` lists at once).
async fn list_live(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath(project): UrlPath<String>,
) -> Response {
    let changes = match door.server.watch_runs(&project) {
        Ok(changes) => changes,
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(4);
    tokio::spawn(async move {
        // The whole subscription moves here, its place among the viewers
        // with it (a field alone would leave the place behind).
        let mut changes = changes;
        let changed = || Ok(Bytes::from_static(b"event: changed\ndata: {}\n\n"));
        loop {
            if tx.send(changed()).await.is_err() {
                return;
            }
            // The viewer's place is held until its browser goes away.
            tokio::select! {
                _ = tx.closed() => return,
                moved = changes.notices.changed() => if moved.is_err() { return },
            }
        }
    });
    sse(rx)
}

fn sse(rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::convert::Infallible>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx)),
    )
        .into_response()
}

async fn run(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath((project, id)): UrlPath<(String, String)>,
) -> Response {
    let (record, input) = match door.server.input(&project, &id).await {
        Ok(found) => found,
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    // A settled file Run's delivered files, when its packet was published.
    let files = match record.terminal().is_some() && has_attachments(&record.value) {
        true => packet_files(&door.server, &project, &id)
            .await
            .ok()
            .map(|files| {
                files
                    .into_iter()
                    .map(|f| (f.path, f.bytes.len(), f.sha256))
                    .collect::<Vec<_>>()
            }),
        false => None,
    };
    let names = door.server.project_names();
    html(
        200,
        pages::run(
            &frame("Run", &session, &names),
            &project,
            &record.value,
            input.as_ref(),
            files.as_deref(),
        ),
    )
}

fn has_attachments(record: &Value) -> bool {
    record
        .get("attachments")
        .and_then(Value::as_object)
        .is_some_and(|a| !a.is_empty())
}

/// The files of a Run's published packet ([`Server::packet`], read back
/// under the delivery limits).
async fn packet_files(
    server: &Arc<Server>,
    project: &str,
    id: &str,
) -> Result<Vec<jig_engine::files::CapturedFile>, Error> {
    let tar = server.packet(project, id).await?;
    let (files, _) = jig_engine::files::archive::read_packet(&tar)?;
    Ok(files)
}

/// One file of a Run's packet, always as a download (never rendered here).
async fn packet_file(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath((project, id, path)): UrlPath<(String, String, String)>,
) -> Response {
    let files = match packet_files(&door.server, &project, &id).await {
        Ok(files) => files,
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    let Some(file) = files.into_iter().find(|f| f.path == path) else {
        return refuse(
            &door,
            Some(&session),
            Error::PacketNotFound(format!("{id}/{path}")),
        );
    };
    let name = path.rsplit('/').next().unwrap_or("file");
    let disposition = format!("attachment; filename*=UTF-8''{}", pages::segment(name));
    let mut response = (
        [(header::CONTENT_TYPE, "application/octet-stream")],
        file.bytes,
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        response
            .headers_mut()
            .insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// The Run's event log as Server-Sent Events: the same lines
/// `GET /v1/.../events` streams, each one `data:` line.
async fn events(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath((project, id)): UrlPath<(String, String)>,
) -> Response {
    let record = match door.server.record(&project, &id).await {
        Ok(record) => record,
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let frame = |line: &[u8]| {
        let mut out = b"data: ".to_vec();
        out.extend_from_slice(line.strip_suffix(b"\n").unwrap_or(line));
        out.extend_from_slice(b"\n\n");
        Ok(Bytes::from(out))
    };
    match door.server.live(&id) {
        Some(live) => {
            tokio::spawn(async move {
                let finished = live
                    .forward(|line| {
                        let tx = tx.clone();
                        let framed = frame(&line);
                        async move { tx.send(framed).await.is_ok() }
                    })
                    .await;
                if finished {
                    let _ = tx
                        .send(Ok(Bytes::from_static(b"event: end\ndata: {}\n\n")))
                        .await;
                }
            });
        }
        None => {
            // No log held here (settled long ago, before a restart, or a
            // worker's): the record, read again until it settles.
            tokio::spawn(async move {
                let mut record = record;
                if record.terminal().is_none() {
                    let pending =
                        json!({"type": "status", "status": "pending", "runId": record.id});
                    if tx
                        .send(frame(&flow::json::canonical(&pending)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                loop {
                    if let Some(terminal) = record.terminal() {
                        let line = json!({"type": "terminal", "result": terminal});
                        let _ = tx.send(frame(&flow::json::canonical(&line))).await;
                        let _ = tx
                            .send(Ok(Bytes::from_static(b"event: end\ndata: {}\n\n")))
                            .await;
                        return;
                    }
                    tokio::time::sleep(RECORD_POLL).await;
                    if tx.is_closed() {
                        return;
                    }
                    record = match door.server.record(&project, &id).await {
                        Ok(record) => record,
                        Err(_) => return,
                    };
                }
            });
        }
    }
    sse(rx)
}

async fn packet(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath((project, id)): UrlPath<(String, String)>,
) -> Response {
    match door.server.packet(&project, &id).await {
        Ok(tar) => {
            let disposition = format!("attachment; filename=\"{}.tar\"", pages::segment(&id));
            let mut response = ([(header::CONTENT_TYPE, TAR_TYPE)], tar).into_response();
            if let Ok(value) = HeaderValue::from_str(&disposition) {
                response
                    .headers_mut()
                    .insert(header::CONTENT_DISPOSITION, value);
            }
            response
        }
        Err(refusal) => refuse(&door, Some(&session), refusal),
    }
}

async fn cancel(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath((project, id)): UrlPath<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Err(refusal) = check_csrf(&session, &form.csrf) {
        return refuse(&door, Some(&session), refusal);
    }
    match door.server.cancel(&project, &id).await {
        Ok(_) => see_other(&format!(
            "/console/projects/{}/runs/{}",
            pages::segment(&project),
            pages::segment(&id)
        )),
        Err(refusal) => refuse(&door, Some(&session), refusal),
    }
}

/// The admitted targets with what the submit form shows of them.
async fn target_views(
    server: &Arc<Server>,
    project: &str,
) -> Result<Vec<pages::TargetView>, Error> {
    let targets = server.targets(project).await?;
    Ok(targets
        .into_iter()
        .map(|(target, package)| {
            let metadata = package.metadata();
            pages::TargetView {
                target,
                name: metadata.name.clone(),
                description: metadata.description.clone(),
                schema: package
                    .files()
                    .get("input.schema.json")
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
                // The channels the Flow sends on: what a receive names.
                channels: metadata
                    .channels
                    .iter()
                    .filter(|(_, d)| d.get("direction").and_then(Value::as_str) == Some("send"))
                    .map(|(name, _)| name.clone())
                    .collect(),
            }
        })
        .collect())
}

async fn submit_page(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath(project): UrlPath<String>,
) -> Response {
    let targets = match target_views(&door.server, &project).await {
        Ok(t) => t,
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    let names = door.server.project_names();
    html(
        200,
        pages::submit(&frame("Submit", &session, &names), &project, &targets, None),
    )
}

#[derive(serde::Deserialize)]
struct SubmitForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    target: String,
    #[serde(default)]
    input: String,
    timeout: Option<String>,
}

/// `POST /console/projects/{p}/runs`: the form's Run through
/// [`Server::submit`], receiving the target's channels so its page can show
/// them; then its page.
async fn submit(
    State(door): State<Door>,
    axum::Extension(session): axum::Extension<Session>,
    UrlPath(project): UrlPath<String>,
    Form(form): Form<SubmitForm>,
) -> Response {
    if let Err(refusal) = check_csrf(&session, &form.csrf) {
        return refuse(&door, Some(&session), refusal);
    }
    let input = match flow::json::parse(form.input.as_bytes()) {
        Ok(input) => input,
        Err(e) => {
            return refuse(
                &door,
                Some(&session),
                Error::RequestInvalid(format!("the input is not a JSON/1 document: {e}")),
            )
        }
    };
    let channels = match target_views(&door.server, &project).await {
        Ok(views) => views
            .into_iter()
            .find(|v| v.target == form.target)
            .map(|v| v.channels)
            .unwrap_or_default(),
        Err(refusal) => return refuse(&door, Some(&session), refusal),
    };
    let request = ServedRun {
        run: RunRequest {
            timeout: form.timeout.filter(|t| !t.trim().is_empty()),
            receive: channels,
            ..RunRequest::new(form.target, input)
        },
        files: None,
    };
    match door.server.submit(&project, request).await {
        Ok((record, _)) => see_other(&format!(
            "/console/projects/{}/runs/{}",
            pages::segment(&project),
            pages::segment(&record.id)
        )),
        Err(refusal) => refuse(&door, Some(&session), refusal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_csrf_token_one_byte_off_or_of_another_length_is_refused() {
        let console = Console::default();
        let id = console.open_session().unwrap();
        let session = console
            .session(Some(&format!("{}={id}", session::COOKIE)))
            .unwrap();
        let csrf = session.csrf.clone();
        let mut off = csrf.clone().into_bytes();
        off[0] = if off[0] == b'a' { b'b' } else { b'a' };
        let off = String::from_utf8(off).unwrap();
        for wrong in [
            off.as_str(),
            &csrf[..csrf.len() - 1],
            &format!("{csrf}a"),
            "",
        ] {
            assert_eq!(
                check_csrf(&session, wrong).unwrap_err().code(),
                "JIG_CONSOLE_CSRF_INVALID",
                "{wrong}"
            );
        }
        assert!(check_csrf(&session, &csrf).is_ok());
    }
}
