//! The console's HTML, rendered on the server with maud: every value from
//! a project, a Run or a request is interpolated as escaped text (maud
//! escapes by default; nothing here uses `PreEscaped` on such a value), and
//! control characters are shown as `\u{..}` escapes rather than passed on.

use flow::json::Value;
use maud::{html, Markup, DOCTYPE};

/// What every page needs: its title, the session's CSRF token (absent on
/// the sign-in page) and the served projects for the navigation.
pub struct Frame<'a> {
    pub title: &'a str,
    pub csrf: Option<&'a str>,
    pub projects: &'a [String],
}

/// A string with its control characters (other than newline and tab)
/// written as visible escapes.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:04x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON value as canonical JSON/1 text (its escapes keep control
/// characters visible).
pub fn json_text(value: &Value) -> String {
    flow::json::canonical_string(value)
}

pub use crate::serve::path_segment as segment;

pub fn page(frame: &Frame, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                @if let Some(csrf) = frame.csrf {
                    meta name="jig-csrf" content=(csrf);
                }
                title { (visible(frame.title)) " · jig console" }
                link rel="stylesheet" href="/console/assets/console.css";
                script src="/console/assets/console.js" defer {}
            }
            body {
                header {
                    a.brand href="/console/" { "jig console" }
                    nav {
                        @for name in frame.projects {
                            a href={ "/console/projects/" (segment(name)) "/runs" } { (visible(name)) }
                        }
                    }
                    @if let Some(csrf) = frame.csrf {
                        form.signout method="post" action="/console/logout" {
                            input type="hidden" name="csrf" value=(csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// The sign-in page: the bearer token form (TCP), or how to get a link.
pub fn login(bearer: bool, message: Option<&str>) -> Markup {
    let body = html! {
        h1 { "Sign in" }
        @if let Some(message) = message {
            p.error role="alert" { (visible(message)) }
        }
        @if bearer {
            form method="post" action="/console/login" {
                label for="token" { "Bearer token" }
                input #token type="password" name="token" autocomplete="off" required;
                button type="submit" { "Sign in" }
            }
        } @else {
            p { "Run " code { "jig console" } " on the server and open the link it prints." }
        }
    };
    page(
        &Frame {
            title: "Sign in",
            csrf: None,
            projects: &[],
        },
        body,
    )
}

/// A refusal as a page: the code and message of the error.
pub fn refusal(frame: &Frame, code: &str, message: &str) -> Markup {
    page(
        frame,
        html! {
            h1 { "Refused" }
            p.error role="alert" { code.code { (code) } ": " (visible(message)) }
        },
    )
}

/// One project on the projects page.
pub struct ProjectView {
    pub name: String,
    pub generation: Option<(u64, String)>,
    pub plan: Option<Value>,
    /// (target, Flow name, description)
    pub targets: Vec<(String, String, String)>,
    pub pending: usize,
    /// The files whose live source differs from the admitted bytes.
    pub source_changed: Vec<String>,
}

/// How many changed files the projects page names before "and N more".
const SOURCE_NAMED: usize = 5;

pub fn projects(frame: &Frame, views: &[ProjectView], occupancy: (usize, usize)) -> Markup {
    page(
        frame,
        html! {
            h1 { "Projects" }
            p.meta { "Daemon: " strong #active { (occupancy.0) } " active, "
                strong #queued { (occupancy.1) } " queued" }
            @for view in views {
                section.project {
                    h2 { (visible(&view.name)) }
                    p.links {
                        a href={ "/console/projects/" (segment(&view.name)) "/runs" } { "Runs" }
                        " · "
                        a href={ "/console/projects/" (segment(&view.name)) "/submit" } { "Submit a Run" }
                        " · pending: " span.pending { (view.pending) }
                    }
                    @if !view.source_changed.is_empty() {
                        p.banner.source-changed {
                            "The live source differs from what runs: "
                            @for (i, path) in view.source_changed.iter().take(SOURCE_NAMED).enumerate() {
                                @if i > 0 { ", " }
                                code { (visible(path)) }
                            }
                            @if view.source_changed.len() > SOURCE_NAMED {
                                " and " (view.source_changed.len() - SOURCE_NAMED) " more"
                            }
                            ". Runs run the admitted version until "
                            code { "jig review" } " admits the change."
                        }
                    }
                    @match &view.generation {
                        None => p { "Not admitted: run " code { "jig review" } "." },
                        Some((number, digest)) => p.meta { "Generation " (number) " · plan " code { (digest) } },
                    }
                    @if !view.targets.is_empty() {
                        h3 { "Targets" }
                        table {
                            thead { tr { th { "target" } th { "Flow" } th { "description" } } }
                            tbody {
                                @for (target, name, description) in &view.targets {
                                    tr {
                                        td { code { (visible(target)) } }
                                        td.flow-name { (visible(name)) }
                                        td { (visible(description)) }
                                    }
                                }
                            }
                        }
                    }
                    @if let Some(plan) = &view.plan { (admitted(plan)) }
                }
            }
        },
    )
}

/// The admitted generation's non-secret policy, as review shows it:
/// packages with their digests and pinned providers, Bindings and slots.
fn admitted(plan: &Value) -> Markup {
    let packages = plan.pointer("/lock/packages").and_then(Value::as_object);
    let bindings = plan.pointer("/lock/bindings").and_then(Value::as_object);
    let execution = plan.get("execution").and_then(Value::as_object);
    html! {
        h3 { "Packages" }
        table {
            thead { tr { th { "package" } th { "Package/1 digest" } th { "recipe" } th { "providers" } } }
            tbody {
                @for (path, package) in packages.into_iter().flatten() {
                    @let exec = execution.and_then(|e| e.get(path));
                    tr {
                        td { code { (visible(path)) } }
                        td { code.digest { (package.get("digest").and_then(Value::as_str).unwrap_or("")) } }
                        td { (exec.and_then(|e| e.pointer("/recipe/kind")).and_then(Value::as_str).unwrap_or("")) }
                        td {
                            @if let Some(providers) = exec.and_then(|e| e.get("providers")).and_then(Value::as_object) {
                                @for (slot, provider) in providers {
                                    div.provider { code { (visible(slot)) } " → " (provider_line(provider)) }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(bindings) = bindings.filter(|b| !b.is_empty()) {
            h3 { "Bindings" }
            table {
                thead { tr { th { "Binding" } th { "package" } th { "slots" } } }
                tbody {
                    @for (id, binding) in bindings {
                        tr {
                            td { code { (visible(id)) } }
                            td { code { (binding.get("package").and_then(Value::as_str).unwrap_or("")) } }
                            td {
                                @if let Some(slots) = binding.get("slots").and_then(Value::as_object) {
                                    @for (slot, to) in slots {
                                        div { code { (visible(slot)) } " → " code { (json_text(to)) } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A pinned provider as review shows it: its name and kind, the Agent
/// client's non-secret allowlist (client, API, endpoint, model) and the
/// names of its grants; never a key, a key file or another private path.
fn provider_line(provider: &Value) -> String {
    let text = |field: &str| provider.get(field).and_then(Value::as_str).unwrap_or("");
    let mut line = format!("{} ({})", visible(text("name")), visible(text("kind")));
    for field in ["client", "api", "endpoint", "model"] {
        if let Some(value) = provider.get(field).and_then(Value::as_str) {
            line.push_str(&format!(" {field} {}", visible(value)));
        }
    }
    if let Some(grants) = provider.get("grants").and_then(Value::as_array) {
        let names: Vec<&str> = grants.iter().filter_map(Value::as_str).collect();
        line.push_str(&format!(" grants {}", visible(&names.join(","))));
    }
    line
}

/// The filters and page of a Runs list.
pub struct RunsQuery {
    pub status: Option<String>,
    pub target: Option<String>,
    pub page: usize,
}

impl RunsQuery {
    pub fn href(&self, project: &str, page: usize) -> String {
        let mut href = format!("/console/projects/{}/runs?page={page}", segment(project));
        if let Some(status) = &self.status {
            href.push_str(&format!("&status={}", segment(status)));
        }
        if let Some(target) = &self.target {
            href.push_str(&format!("&target={}", segment(target)));
        }
        href
    }
}

/// A Run's terminal status, outcome or code, submission time and duration.
pub fn run_cells(record: &Value) -> (String, String, String, String) {
    let status = record
        .pointer("/terminal/status")
        .and_then(Value::as_str)
        .unwrap_or("pending")
        .to_string();
    let outcome = record
        .pointer("/terminal/outcome")
        .or_else(|| record.pointer("/terminal/code"))
        .or_else(|| record.pointer("/terminal/error/code"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let submitted = record.get("submittedAtUnixMs").and_then(Value::as_u64);
    let settled = record.get("settledAtUnixMs").and_then(Value::as_u64);
    let start = submitted.map(utc).unwrap_or_default();
    let duration = match (submitted, settled) {
        (Some(a), Some(b)) if b >= a => format!("{:.3}s", (b - a) as f64 / 1000.0),
        _ => String::new(),
    };
    (status, outcome, start, duration)
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(ms: u64) -> String {
    jig_engine::state::utc_text(ms)
}

/// The rows of a Runs table (also served alone for live updates).
pub fn run_rows(project: &str, records: &[Value]) -> Markup {
    html! {
        @for record in records {
            @let id = record.get("id").and_then(Value::as_str).unwrap_or("");
            @let (status, outcome, start, duration) = run_cells(record);
            tr data-run=(id) {
                td { a href={ "/console/projects/" (segment(project)) "/runs/" (segment(id)) } { code { (visible(id)) } } }
                td { span class={ "status " (status) } { (status) } }
                td { (visible(&outcome)) }
                td { code { (visible(record.get("target").and_then(Value::as_str).unwrap_or(""))) } }
                td { (start) }
                td { (duration) }
            }
        }
    }
}

pub fn runs(
    frame: &Frame,
    project: &str,
    query: &RunsQuery,
    targets: &[String],
    records: &[Value],
    more: bool,
) -> Markup {
    let statuses = ["pending", "succeeded", "failed", "lost"];
    page(
        frame,
        html! {
            h1 { "Runs of " (visible(project)) }
            p.links { a href={ "/console/projects/" (segment(project)) "/submit" } { "Submit a Run" } }
            form.filters method="get" {
                label { "Status "
                    select name="status" {
                        option value="" { "any" }
                        @for s in statuses {
                            option value=(s) selected[query.status.as_deref() == Some(s)] { (s) }
                        }
                    }
                }
                label { "Target "
                    select name="target" {
                        option value="" { "any" }
                        @for t in targets {
                            option value=(t) selected[query.target.as_deref() == Some(t.as_str())] { (visible(t)) }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            div.scroll {
                table.runs {
                    thead { tr { th { "Run" } th { "status" } th { "outcome / code" } th { "target" } th { "started (UTC)" } th { "duration" } } }
                    tbody #runs data-live=(query.href(project, query.page).replacen("/runs?", "/runs/rows?", 1)) {
                        (run_rows(project, records))
                    }
                }
            }
            nav.pager {
                @if query.page > 0 {
                    a rel="prev" href=(query.href(project, query.page - 1)) { "← newer" }
                }
                " page " (query.page + 1) " "
                @if more {
                    a rel="next" href=(query.href(project, query.page + 1)) { "older →" }
                }
            }
        },
    )
}

/// A delivered file: its path in the packet, its size and digest.
pub type PacketFile = (String, usize, String);

/// A Run's page: its summary, input (when kept), live events, terminal,
/// delivery, packet files and record.
pub fn run(
    frame: &Frame,
    project: &str,
    record: &Value,
    input: Option<&Value>,
    files: Option<&[PacketFile]>,
) -> Markup {
    let id = record.get("id").and_then(Value::as_str).unwrap_or("");
    let (status, outcome, start, duration) = run_cells(record);
    let base = format!(
        "/console/projects/{}/runs/{}",
        segment(project),
        segment(id)
    );
    let terminal = record.get("terminal");
    page(
        frame,
        html! {
            h1 { "Run " code { (visible(id)) } }
            dl.summary {
                dt { "status" } dd { span #status class={ "status " (status) } { (status) } }
                dt { "outcome / code" } dd #outcome { (visible(&outcome)) }
                dt { "target" } dd { code { (visible(record.get("target").and_then(Value::as_str).unwrap_or(""))) } }
                dt { "started (UTC)" } dd { (start) }
                dt { "duration" } dd { (duration) }
                dt { "generation" } dd { (record.get("generation").map(json_text).unwrap_or_default()) }
                dt { "input digest" } dd { code { (record.get("inputDigest").and_then(Value::as_str).unwrap_or("")) } }
                @if let Some(key) = record.get("key").and_then(Value::as_str) {
                    dt { "key" } dd { code { (visible(key)) } }
                }
                @if let Some(waits) = queue_text(record) {
                    dt { "queue" } dd #queue { (waits) }
                }
            }
            @if terminal.is_none() {
                form #cancel method="post" action={ (base) "/cancel" } {
                    input type="hidden" name="csrf" value=(frame.csrf.unwrap_or(""));
                    button.danger type="submit" { "Cancel this Run" }
                }
            }
            h2 { "Input" }
            @match input {
                Some(input) => pre #input { (json_text(input)) },
                None => p #input.meta { "Input not retained (recorded before jig kept inputs); its digest is above." },
            }
            h2 { "Events" }
            p.meta { "Channel items the submission asked to receive, and status changes, as they arrive." }
            ol #events data-src={ (base) "/events" } {}
            h2 { "Terminal" }
            pre #terminal { @if let Some(t) = terminal { (json_text(t)) } @else { "(pending)" } }
            @if let Some(diagnostics) = terminal.and_then(|t| t.get("diagnostics")) {
                h2 { "Diagnostics" }
                pre #diagnostics { (json_text(diagnostics)) }
            }
            @if let Some(delivery) = terminal.and_then(|t| t.get("delivery").or_else(|| t.get("packet"))) {
                h2 { "Delivery" }
                pre #delivery { (json_text(delivery)) }
            }
            @if let Some(files) = files {
                h2 { "Packet" }
                p { a #packet href={ (base) "/packet" } download { "Download the packet (tar)" } }
                table.files {
                    thead { tr { th { "file" } th { "bytes" } th { "sha256" } } }
                    tbody {
                        @for (path, size, sha256) in files {
                            tr {
                                td { a href={ (base) "/packet/files/" (path.split('/').map(segment).collect::<Vec<_>>().join("/")) } download { (visible(path)) } }
                                td { (size) }
                                td { code.digest { (sha256) } }
                            }
                        }
                    }
                }
            }
            h2 { "Record" }
            pre #record { (json_text(record)) }
        },
    )
}

/// A target on the submit form: its Flow's name and description, its
/// input schema text (checked in the page) and the channels it sends on.
pub struct TargetView {
    pub target: String,
    pub name: String,
    pub description: String,
    pub schema: Option<String>,
    pub channels: Vec<String>,
}

pub fn submit(
    frame: &Frame,
    project: &str,
    targets: &[TargetView],
    message: Option<&str>,
) -> Markup {
    page(
        frame,
        html! {
            h1 { "Submit a Run to " (visible(project)) }
            @if let Some(message) = message {
                p.error role="alert" { (visible(message)) }
            }
            @if targets.is_empty() {
                p { "No admitted targets." }
            } @else {
                form #submit method="post" action={ "/console/projects/" (segment(project)) "/runs" } {
                    input type="hidden" name="csrf" value=(frame.csrf.unwrap_or(""));
                    label for="target" { "Target" }
                    select #target name="target" {
                        @for t in targets {
                            option value=(t.target) data-schema=[t.schema.as_deref()]
                                data-channels=(t.channels.join(",")) {
                                (visible(&t.target)) " — " (visible(&t.name))
                            }
                        }
                    }
                    label for="input" { "Input (JSON)" }
                    textarea #input name="input" rows="8" spellcheck="false" { "null" }
                    label for="timeout" { "Timeout (optional, like 30s or 5m)" }
                    input #timeout name="timeout" type="text";
                    p #input-error.error role="alert" hidden {}
                    button type="submit" { "Submit" }
                }
                h2 { "Targets" }
                dl.targets {
                    @for t in targets {
                        dt { code { (visible(&t.target)) } " — " span.flow-name { (visible(&t.name)) } }
                        dd.description { (visible(&t.description)) }
                    }
                }
            }
        },
    )
}

/// Where a pending Run waits, with a database (its record's `queue`):
/// above all, that no worker has claimed it yet.
fn queue_text(record: &Value) -> Option<String> {
    let queue = record.get("queue")?;
    let claims = queue["claims"].as_i64().unwrap_or(0);
    Some(match (queue["status"].as_str()?, claims) {
        ("queued", 0) => "waiting for a worker: none has claimed it yet (is a jig worker running on this database?)".into(),
        ("queued", n) => format!("waiting for a worker (claimed {n} times before, then given back)"),
        ("claimed", _) => "claimed by a worker, not yet started".into(),
        (status, _) => format!("{status} on a worker"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_project_whose_live_source_differs_says_so_in_a_banner() {
        let frame = Frame {
            title: "t",
            csrf: None,
            projects: &[],
        };
        let view = |changed: Vec<String>| ProjectView {
            name: "p".into(),
            generation: Some((1, "sha256:00".into())),
            plan: None,
            targets: Vec::new(),
            pending: 0,
            source_changed: changed,
        };
        let quiet = projects(&frame, &[view(Vec::new())], (0, 0)).into_string();
        assert!(!quiet.contains("source-changed"), "{quiet}");
        let changed: Vec<String> = (0..7).map(|i| format!("flows/f{i}/<flow>.ts")).collect();
        let page = projects(&frame, &[view(changed)], (0, 0)).into_string();
        assert!(
            page.contains("The live source differs from what runs"),
            "{page}"
        );
        assert!(page.contains("flows/f0/&lt;flow&gt;.ts"), "{page}");
        assert!(page.contains(" and 2 more"), "{page}");
        assert!(!page.contains("flows/f5"), "{page}");
    }

    #[test]
    fn a_queued_run_says_whether_a_worker_has_claimed_it() {
        let frame = Frame {
            title: "t",
            csrf: None,
            projects: &[],
        };
        let page = |queue: Value| {
            run(
                &frame,
                "p",
                &json!({"id": "run-1", "queue": queue}),
                None,
                None,
            )
            .into_string()
        };
        let unclaimed = page(json!({"status": "queued", "claims": 0}));
        assert!(
            unclaimed.contains("waiting for a worker: none has claimed it yet"),
            "{unclaimed}"
        );
        assert!(page(json!({"status": "running", "claims": 1})).contains("running on a worker"));
        let local = run(&frame, "p", &json!({"id": "run-1"}), None, None).into_string();
        assert!(!local.contains("id=\"queue\""), "{local}");
    }

    #[test]
    fn project_strings_are_text_and_control_characters_visible() {
        assert_eq!(visible("a\u{7}b\nc"), "a\\u{0007}b\nc");
        let rows = run_rows(
            "p",
            &[json!({"id": "r<1>", "target": "flow:<script>x</script>",
                "terminal": {"status": "failed", "code": "<b>X\u{1}</b>"}})],
        )
        .into_string();
        assert!(!rows.contains("<script>"), "{rows}");
        assert!(!rows.contains("<b>"), "{rows}");
        assert!(rows.contains("&lt;script&gt;"), "{rows}");
        assert!(rows.contains("\\u{0001}"), "{rows}");
        assert!(rows.contains("/runs/r%3C1%3E"), "{rows}");
    }

    #[test]
    fn providers_show_only_what_review_shows() {
        let line = provider_line(&json!({
            "kind": "builtin", "name": "agent-run", "endpoint": "http://127.0.0.1:9/v1",
            "model": "m", "apiKeyFile": "/secret/key", "settings": {"token": "t"},
            "grants": ["cache"], "directories": ["/private"],
        }));
        assert_eq!(
            line,
            "agent-run (builtin) endpoint http://127.0.0.1:9/v1 model m grants cache"
        );
    }

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_796_316_716_507), "2026-12-03 16:51:56");
    }
}
