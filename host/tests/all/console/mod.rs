//! The web console of `jig serve` in a real browser: Debian's headless
//! chromium driven through chromedriver (WebDriver, [`webdriver`]) against a
//! real daemon, reached through `jig console` (the Unix socket) or the TCP
//! listener with `--console`. Screenshots of the main pages go to
//! `$JIG_CONSOLE_SHOTS` when it is set.

mod schema_corpus;
mod webdriver;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;
use webdriver::Browser;

/// Answers with its input.
const ECHO_PY: &str = "from jiggy.flow import handle\n\
async def run(context):\n    return {'outcome': 'done', 'output': context.input}\n\
handle(run)\n";

/// Sends three hostile items on `events` 0.4 s apart, then sleeps `input`
/// seconds and answers.
const SLOW_PY: &str = "import asyncio\nfrom jiggy.flow import handle\n\
async def run(context):\n    events = context.channels['events']\n    \
for i in range(3):\n        await asyncio.sleep(0.4)\n        \
await events.send({'i': i, 'text': '<script>window.pwned=3</script>\\u0007'})\n    \
await asyncio.sleep(context.input)\n    return {'outcome': 'done', 'output': 'slept'}\n\
handle(run)\n";

/// Doubles `n`; its input schema takes only `{"n": integer}`.
const TYPED_PY: &str = "from jiggy.flow import handle\n\
async def run(context):\n    return {'outcome': 'done', 'output': context.input['n'] * 2}\n\
handle(run)\n";

const TYPED_SCHEMA: &str = r#"{"$schema":"https://flow.jig.md/schemas/schema-1.json","type":"object","required":["n"],"properties":{"n":{"type":"integer"}},"additionalProperties":false}"#;

/// A Flow description no page may run.
const HOSTILE: &str = "<script>window.pwned=1</script><img src=x> & co";

/// A reviewed project named `p` (its directory's name).
fn console_project() -> (tempfile::TempDir, PathBuf) {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("p");
    let md = |name: &str, description: &str, extra: &str| {
        format!("---\nname: {name}\ndescription: '{description}'\n{extra}---\n")
    };
    write_files(
        &root,
        &[
            ("jig.ts", JIG_TS),
            ("flows/echo/FLOW.md", &md("echo", HOSTILE, "")),
            ("flows/echo/flow.py", ECHO_PY),
            (
                "flows/slow/FLOW.md",
                &md(
                    "slow",
                    "Talks, then sleeps.",
                    "channels:\n  events:\n    direction: send\n",
                ),
            ),
            ("flows/slow/flow.py", SLOW_PY),
            ("flows/typed/FLOW.md", &md("typed", "Doubles n.", "")),
            ("flows/typed/flow.py", TYPED_PY),
            ("flows/typed/input.schema.json", TYPED_SCHEMA),
            (
                "flows/copy/FLOW.md",
                &md(
                    "copy",
                    "Copies its source, reversed.",
                    "attachments:\n  source: read\n  deliverables: read-write\n",
                ),
            ),
            ("flows/copy/flow.py", crate::serve::COPY_PY),
        ],
    );
    let reviewed = review(&root);
    assert_eq!(reviewed.status, 0, "{reviewed:?}");
    (outer, root)
}

/// A `jig serve` of the project, and `jig console` in front of its socket.
struct Served {
    socket: PathBuf,
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start(root: &Path, extra: &[&str]) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("jig.sock");
        let daemon = jig(root)
            .args(["-C", root.to_str().unwrap(), "serve", "--socket"])
            .arg(&socket)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let served = Served {
            socket,
            children: vec![daemon],
            _dir: dir,
        };
        let started = Instant::now();
        while served.api("GET", "/v1/health").0 != 200 {
            assert!(started.elapsed() < Duration::from_secs(30), "no daemon");
            std::thread::sleep(Duration::from_millis(50));
        }
        served
    }

    /// `jig console`: its sign-in link.
    fn console(&mut self, root: &Path) -> String {
        let mut console = jig(root)
            .args(["console", "--server"])
            .arg(format!("unix:{}", self.socket.display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(console.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        self.children.push(console);
        line.trim().to_string()
    }

    /// One API request over the socket: (status, body).
    fn api(&self, method: &str, path: &str) -> (u16, Value) {
        let out = Command::new("curl")
            .args(["-sS", "-X", method, "-w", "\n%{http_code}", "--unix-socket"])
            .arg(&self.socket)
            .arg(format!("http://jig{path}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        (
            status.trim().parse().unwrap_or(0),
            serde_json::from_str(body).unwrap_or(Value::Null),
        )
    }

    fn runs(&self) -> Vec<Value> {
        let (status, list) = self.api("GET", "/v1/projects/p/runs?limit=1000");
        assert_eq!(status, 200, "{list}");
        list["runs"].as_array().unwrap().clone()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Where screenshots go, if anywhere.
fn shot(browser: &Browser, name: &str) {
    if let Some(dir) = std::env::var_os("JIG_CONSOLE_SHOTS") {
        browser.screenshot(&Path::new(&dir).join(format!("{name}.png")));
    }
}

/// The origin of a console link.
fn origin(link: &str) -> String {
    let rest = link.strip_prefix("http://").unwrap();
    format!("http://{}", rest.split('/').next().unwrap())
}

fn not_pwned(browser: &Browser) {
    assert_eq!(
        browser.script("return typeof window.pwned;", serde_json::json!([])),
        "undefined",
        "a project-controlled string ran as script"
    );
    assert_eq!(browser.count("main script, main img"), 0);
}

const SECOND: Duration = Duration::from_secs(1);

/// One browser at a time: two cores run one chromium and a daemon well,
/// three of each at once miss the console's one-second promise.
static ONE_BROWSER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_browser() -> std::sync::MutexGuard<'static, ()> {
    ONE_BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The browser tests need Debian's chromium and chromedriver; without
/// them they fail (never pass unseen): .ci/setup installs both.
fn needs_a_browser() {
    assert!(
        webdriver::available(),
        "chromium and chromedriver are not installed (.ci/setup installs them)"
    );
}

#[test]
fn a_signed_in_browser_follows_runs_live_submits_and_cancels() {
    needs_a_browser();
    let _one = one_browser();
    let (_outer, root) = console_project();
    let mut served = Served::start(&root, &[]);
    let link = served.console(&root);
    let base = origin(&link);
    let browser = Browser::start();

    // The link signs in once, to an HttpOnly, SameSite=Strict cookie.
    browser.goto(&link);
    assert_eq!(browser.url(), format!("{base}/console/"));
    let cookies = browser.cookies();
    let cookie = &cookies[0];
    assert_eq!(cookie["httpOnly"], true, "{cookies}");
    assert_eq!(cookie["sameSite"], "Strict", "{cookies}");
    // The projects page: the admitted targets and packages with digests;
    // the hostile description is text.
    assert_eq!(browser.text("h1").as_deref(), Some("Projects"));
    assert_eq!(browser.count("code.digest"), 4);
    let descriptions = browser.script(
        "return [...document.querySelectorAll('td')].map(e => e.textContent).join('|');",
        serde_json::json!([]),
    );
    assert!(
        descriptions.as_str().unwrap().contains(HOSTILE),
        "{descriptions}"
    );
    not_pwned(&browser);
    shot(&browser, "projects");

    // A Run submitted by the CLI shows in the list within a second, and its
    // status follows.
    browser.goto(&format!("{base}/console/projects/p/runs"));
    assert_eq!(browser.count("#runs tr"), 0);
    let submitted = Instant::now();
    let mut cli = jig(&root)
        .args(["run", "--server"])
        .arg(format!("unix:{}", served.socket.display()))
        .args([
            "flow:flows/echo",
            "--input",
            r#""<script>window.pwned=2</script>\u0007""#,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        browser.wait(SECOND, |b| b.count("#runs tr") == 1),
        "the CLI's Run did not show within a second"
    );
    eprintln!("listed after {:?}", submitted.elapsed());
    cli.wait().unwrap();
    assert!(
        browser.wait(10 * SECOND, |b| b.text("#runs .status").as_deref()
            == Some("succeeded"))
    );
    shot(&browser, "runs");

    // Its page: the input and the output as text, control character
    // escaped; the input kept is also the API's.
    browser.click("#runs a");
    assert!(browser.wait(5 * SECOND, |b| b.text("#terminal").is_some()));
    let terminal = browser.text("#terminal").unwrap();
    assert!(
        terminal.contains(r#""output":"<script>window.pwned=2</script>\u0007""#),
        "{terminal}"
    );
    assert_eq!(
        browser.text("#input").as_deref(),
        Some(r#""<script>window.pwned=2</script>\u0007""#)
    );
    not_pwned(&browser);
    let id = browser.url().rsplit('/').next().unwrap().to_string();
    let (status, input) = served.api("GET", &format!("/v1/projects/p/runs/{id}/input"));
    assert_eq!(status, 200, "{input}");
    assert_eq!(input, "<script>window.pwned=2</script>\u{7}");
    shot(&browser, "run-input");

    // The submit form refuses input that is not JSON, or not the target's
    // input schema, before anything is sent.
    let before = served.runs().len();
    browser.goto(&format!("{base}/console/projects/p/submit"));
    browser.script(
        "document.getElementById('target').value = 'flow:flows/typed';",
        serde_json::json!([]),
    );
    for bad in ["{", r#"{"n":"two"}"#, r#"{"n":2,"x":1}"#, "[]"] {
        browser.fill("#input", bad);
        browser.click("#submit button[type=submit]");
        assert!(
            browser.wait(SECOND, |b| b.script(
                "return !document.getElementById('input-error').hidden;",
                serde_json::json!([])
            ) == true),
            "{bad} was not refused in the page"
        );
        assert!(browser.url().ends_with("/console/projects/p/submit"));
    }
    shot(&browser, "submit-refused");
    assert_eq!(served.runs().len(), before, "an invalid input was sent");
    // A valid input runs the target.
    browser.fill("#input", r#"{"n":21}"#);
    browser.click("#submit button[type=submit]");
    assert!(browser.wait(10 * SECOND, |b| b
        .text("#terminal")
        .is_some_and(|t| t.contains(r#""output":42"#))));
    assert_eq!(served.runs().len(), before + 1);

    // A pending Run's page shows its events as they arrive, then its terminal.
    submit_slow(&browser, &base);
    let data = data_events;
    assert!(browser.wait(5 * SECOND, |b| data(b) >= 1));
    let first = data(&browser);
    assert!(first < 3, "the events did not arrive one by one");
    let status = browser.text("#status").unwrap();
    assert!(
        ["pending", "running"].contains(&status.as_str()),
        "{status}"
    );
    shot(&browser, "run-pending");
    assert!(browser.wait(5 * SECOND, |b| data(b) == 3));
    assert!(browser.wait(10 * SECOND, |b| b.text("#status").as_deref()
        == Some("succeeded")));
    let terminal = browser.text("#terminal").unwrap();
    assert!(terminal.contains(r#""output":"slept""#), "{terminal}");
    assert_eq!(
        browser.script(
            "return document.getElementById('cancel').offsetParent === null;",
            serde_json::json!([])
        ),
        true,
        "a settled Run still offers its cancel button"
    );
    let events = browser.text("#events").unwrap();
    assert!(
        events.contains("<script>window.pwned=3</script>"),
        "{events}"
    );
    not_pwned(&browser);
    shot(&browser, "run-settled");

    // Cancel a pending Run from its page.
    fill_slow(&browser, &base, "120");
    assert!(browser.wait(5 * SECOND, |b| b.count("#cancel button") == 1));
    let id = browser.url().rsplit('/').next().unwrap().to_string();
    assert!(browser.wait(5 * SECOND, |b| data(b) >= 1));
    browser.click("#cancel button");
    assert!(
        browser.wait(15 * SECOND, |b| b
            .text("#terminal")
            .is_some_and(|t| t.contains(r#""status""#))),
        "the cancelled Run did not settle"
    );
    assert_eq!(browser.text("#status").as_deref(), Some("failed"));
    // The daemon writes the record after the event log's terminal line,
    // which the page showed: wait for the record's terminal.
    let settled = Instant::now();
    let record = loop {
        let (_, record) = served.api("GET", &format!("/v1/projects/p/runs/{id}"));
        if !record["terminal"].is_null() {
            break record;
        }
        assert!(
            settled.elapsed() < 10 * SECOND,
            "the record never settled: {record}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(record["terminal"]["status"], "failed", "{record}");
    assert_eq!(record["terminal"]["code"], "CANCELLED", "{record}");

    // A file Run's packet: its files listed, each one a download.
    let source = root.parent().unwrap().join("source");
    write_files(&source, &[("notes/a.txt", "one\n"), ("b.txt", "bee")]);
    let out = root.parent().unwrap().join("out");
    let run = run_jig(
        &root,
        &[
            "run",
            "--server",
            &format!("unix:{}", served.socket.display()),
            "flow:flows/copy",
            "--attach",
            &format!("source={}", source.display()),
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let id = run.json()["runId"].as_str().unwrap().to_string();
    browser.goto(&format!("{base}/console/projects/p/runs/{id}"));
    assert_eq!(browser.count("table.files a[download]"), 2);
    let fetched = browser.script(
        "return fetch(document.querySelector('table.files a[href$=\"/b.txt\"]').href).then(r => r.text());",
        serde_json::json!([]),
    );
    assert_eq!(fetched, "eeb");
    browser.script(
        "document.getElementById('packet').scrollIntoView();",
        serde_json::json!([]),
    );
    shot(&browser, "run-packet");

    // Phone-sized: the list still reads.
    browser.goto(&format!("{base}/console/projects/p/runs"));
    browser.resize(390, 844);
    shot(&browser, "runs-phone");
    // Dark when the system is.
    browser.prefer_dark();
    let background = browser.script(
        "return getComputedStyle(document.body).backgroundColor;",
        serde_json::json!([]),
    );
    assert_eq!(background, "rgb(22, 24, 28)", "not dark: {background}");
    shot(&browser, "runs-phone-dark");
}

/// `curl` through the console's listener: (status, body).
fn fetch(url: &str, extra: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}"])
        .args(extra)
        .arg(url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn without_a_session_every_page_and_action_is_refused() {
    needs_a_browser();
    let _one = one_browser();
    let (outer, root) = console_project();
    let mut served = Served::start(&root, &[]);
    let link = served.console(&root);
    let base = origin(&link);
    let id = {
        let run = run_jig(
            &root,
            &[
                "run",
                "--server",
                &format!("unix:{}", served.socket.display()),
                "flow:flows/echo",
                "--input",
                "1",
                "--json",
            ],
        );
        assert_eq!(run.status, 0, "{run:?}");
        run.json()["runId"].as_str().unwrap().to_string()
    };
    let run = format!("{base}/console/projects/p/runs/{id}");
    let pages = [
        format!("{base}/console/"),
        format!("{base}/console/projects/p/runs"),
        format!("{base}/console/projects/p/runs/rows"),
        format!("{base}/console/projects/p/runs/live"),
        format!("{base}/console/projects/p/submit"),
        run.clone(),
        format!("{run}/events"),
        format!("{run}/packet"),
        format!("{run}/packet/files/b.txt"),
    ];
    for page in &pages {
        let (status, body) = fetch(page, &[]);
        assert_eq!(status, 401, "{page}: {body}");
        assert!(!body.contains(&id), "{page} leaked: {body}");
    }
    let actions = [
        (
            format!("{base}/console/projects/p/runs"),
            "csrf=x&target=flow:flows/echo&input=1",
        ),
        (format!("{run}/cancel"), "csrf=x"),
        (format!("{base}/console/logout"), "csrf=x"),
    ];
    for (action, form) in &actions {
        let (status, body) = fetch(action, &["--data", form]);
        assert_eq!(status, 401, "{action}: {body}");
    }
    assert_eq!(served.runs().len(), 1, "an action without a session ran");
    // Only /console/ passes through, and only for this listener's name.
    assert_eq!(fetch(&format!("{base}/v1/projects/p/runs"), &[]).0, 404);
    assert_eq!(
        fetch(&format!("{base}/console/"), &["-H", "Host: evil.example"]).0,
        421
    );

    // The link works once; the session it makes needs its CSRF token and a
    // same-origin request for every action.
    let jar = outer.path().join("jar");
    let jar = jar.to_str().unwrap();
    assert_eq!(fetch(&link, &["-c", jar]).0, 303);
    assert_eq!(fetch(&link, &[]).0, 401);
    let (status, page) = fetch(&format!("{base}/console/"), &["-b", jar]);
    assert_eq!(status, 200);
    let csrf = page
        .split("name=\"jig-csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let submit = format!("{base}/console/projects/p/runs");
    for (form, headers) in [
        ("target=flow:flows/echo&input=1".to_string(), vec![]),
        (
            "csrf=wrong&target=flow:flows/echo&input=1".to_string(),
            vec![],
        ),
        (
            format!("csrf={csrf}&target=flow:flows/echo&input=1"),
            vec!["-H", "Sec-Fetch-Site: cross-site"],
        ),
    ] {
        let mut extra = vec!["-b", jar, "--data", &form];
        extra.extend(headers);
        let (status, body) = fetch(&submit, &extra);
        assert_eq!(status, 403, "{form}: {body}");
        assert!(body.contains("JIG_CONSOLE_CSRF_INVALID"), "{body}");
    }
    assert_eq!(
        served.runs().len(),
        1,
        "an action without its CSRF token ran"
    );
    let (status, _) = fetch(
        &submit,
        &[
            "-b",
            jar,
            "--data",
            &format!("csrf={csrf}&target=flow:flows/echo&input=1"),
        ],
    );
    assert_eq!(status, 303);
    assert_eq!(served.runs().len(), 2);

    // In the browser: a page without the session is the sign-in page.
    let browser = Browser::start();
    browser.goto(&format!("{base}/console/projects/p/runs"));
    assert_eq!(browser.text("h1").as_deref(), Some("Sign in"));
    assert_eq!(browser.count("#runs"), 0);
    shot(&browser, "refused");

    // After a restart the Run's event log is gone; its page's stream is
    // its record's terminal.
    drop(browser);
    drop(served);
    let mut again = Served::start(&root, &[]);
    let link = again.console(&root);
    let base = origin(&link);
    assert_eq!(fetch(&link, &["-c", jar]).0, 303);
    let (status, body) = fetch(
        &format!("{base}/console/projects/p/runs/{id}/events"),
        &["-b", jar, "-m", "10"],
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""type":"terminal""#), "{body}");
    assert!(!body.contains("pending"), "{body}");
}

#[test]
fn on_tcp_the_console_signs_in_with_the_bearer_token() {
    needs_a_browser();
    let _one = one_browser();
    let (outer, root) = console_project();
    let token = outer.path().join("token");
    write_token(&token, "console-s3cret-0123456789abcdefghij");
    let port = free_port();
    let address = format!("127.0.0.1:{port}");
    let _served = Served::start(
        &root,
        &[
            "--tcp",
            &address,
            "--token-file",
            token.to_str().unwrap(),
            "--console",
        ],
    );
    let base = format!("http://{address}");
    // The API still takes only the bearer token.
    assert_eq!(fetch(&format!("{base}/v1/projects/p/runs"), &[]).0, 401);
    let browser = Browser::start();
    browser.goto(&format!("{base}/console/"));
    assert_eq!(browser.text("h1").as_deref(), Some("Sign in"));
    shot(&browser, "login");
    browser.fill("#token", "console-s3cret-0123456789abcdefghiX");
    browser.click("form button[type=submit]");
    assert!(browser.wait(5 * SECOND, |b| b
        .text(".error")
        .is_some_and(|t| t.contains("bearer token"))));
    browser.fill("#token", "console-s3cret-0123456789abcdefghij");
    browser.click("form button[type=submit]");
    assert!(browser.wait(5 * SECOND, |b| b.text("h1").as_deref() == Some("Projects")));
    // Signing out ends the session.
    browser.click("form.signout button");
    assert!(browser.wait(5 * SECOND, |b| b.text("h1").as_deref() == Some("Sign in")));
    browser.goto(&format!("{base}/console/"));
    assert_eq!(browser.text("h1").as_deref(), Some("Sign in"));
    // The console on TCP needs the TCP listener.
    let run = run_jig(&root, &["-C", root.to_str().unwrap(), "serve", "--console"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("JIG_USAGE: "), "{run:?}");
}

#[test]
fn the_page_checks_input_against_schema_1_as_the_host_does() {
    needs_a_browser();
    let _one = one_browser();
    let (_outer, root) = console_project();
    let mut served = Served::start(&root, &[]);
    let link = served.console(&root);
    let base = origin(&link);
    let browser = Browser::start();
    browser.goto(&link);
    browser.goto(&format!("{base}/console/projects/p/submit"));
    let corpus = schema_corpus::corpus();
    let started = Instant::now();
    let mut answers = Vec::new();
    for chunk in corpus.chunks(400) {
        let cases: Vec<Value> = chunk
            .iter()
            .map(|c| serde_json::json!([c.schema, c.value]))
            .collect();
        let got = browser.script(
            "return arguments[0].map(([schema, value]) => { \
               try { return window.jigSchema1.validate(schema, value) === null; } \
               catch (e) { return 'thrown: ' + e.message; } });",
            serde_json::json!([cases]),
        );
        answers.extend(got.as_array().unwrap().iter().cloned());
    }
    assert_eq!(answers.len(), corpus.len());
    let shown = |v: &Value| {
        let text = v.to_string();
        match text.char_indices().nth(200) {
            Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
            None => text,
        }
    };
    let differ: Vec<String> = corpus
        .iter()
        .zip(&answers)
        .filter(|(case, page)| **page != Value::Bool(case.accepted))
        .map(|(case, page)| {
            format!(
                "{} with {}: flow {}, the page {page}",
                shown(&case.schema),
                shown(&case.value),
                case.accepted
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} cases differ:\n{}",
        differ.len(),
        corpus.len(),
        differ.join("\n")
    );
    let accepted = corpus.iter().filter(|c| c.accepted).count();
    assert!(
        accepted > 1000 && corpus.len() - accepted > 1000,
        "a corpus that is mostly one answer proves little: {accepted} of {} accepted",
        corpus.len()
    );
    eprintln!(
        "{} cases ({accepted} accepted) agree, checked in {:?}",
        corpus.len(),
        started.elapsed()
    );
    // The form uses the same validator: refused at the failing place.
    browser.script(
        "document.getElementById('target').value = 'flow:flows/typed';",
        serde_json::json!([]),
    );
    browser.fill("#input", r#"{"n":2.5}"#);
    browser.click("#submit button[type=submit]");
    assert!(browser.wait(SECOND, |b| b
        .text("#input-error")
        .is_some_and(|t| t.contains("at /n (type)"))));
}

/// The session cookie `jig console`'s link sets, as `name=value`.
fn session_cookie(link: &str, jar: &Path) -> String {
    assert_eq!(fetch(link, &["-c", jar.to_str().unwrap()]).0, 303);
    let jar = std::fs::read_to_string(jar).unwrap();
    let line = jar
        .lines()
        .find(|l| l.contains("jig_console"))
        .expect("a session cookie");
    let fields: Vec<&str> = line.split('\t').collect();
    format!("{}={}", fields[5], fields[6])
}

/// Open the live Run list of `p` through the console's listener and
/// read its answer's head: its status.
fn open_live_list(base: &str, cookie: &str) -> (u16, std::net::TcpStream) {
    use std::io::{Read, Write};
    let address = base.strip_prefix("http://").unwrap();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /console/projects/p/runs/live HTTP/1.1\r\nHost: {address}\r\nCookie: {cookie}\r\n\r\n"
    )
    .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "the answer ended early");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, stream)
}

#[test]
fn live_run_lists_are_bounded_and_a_closed_one_frees_its_place() {
    // Without a browser: the daemon's bound on open live lists, through
    // `jig console`, at the bound and one past it.
    const MAX_LIST_VIEWERS: usize = 64;
    let (outer, root) = console_project();
    let mut served = Served::start(&root, &[]);
    let link = served.console(&root);
    let base = origin(&link);
    let cookie = session_cookie(&link, &outer.path().join("jar"));
    let mut open = Vec::new();
    for n in 0..MAX_LIST_VIEWERS {
        let (status, stream) = open_live_list(&base, &cookie);
        assert_eq!(status, 200, "live list {n}");
        open.push(stream);
    }
    let (status, mut refused) = open_live_list(&base, &cookie);
    assert_eq!(status, 429);
    let mut body = String::new();
    let _ = std::io::Read::read_to_string(&mut refused, &mut body);
    assert!(body.contains("RESOURCE_EXHAUSTED"), "{body}");
    // A list whose browser went away gives its place back.
    drop(open.pop());
    let started = Instant::now();
    loop {
        let (status, stream) = open_live_list(&base, &cookie);
        if status == 200 {
            open.push(stream);
            break;
        }
        assert!(
            started.elapsed() < 5 * SECOND,
            "the closed list's place was kept"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Each open list hears of a new Run, pushed.
    let run = run_jig(
        &root,
        &[
            "run",
            "--server",
            &format!("unix:{}", served.socket.display()),
            "flow:flows/echo",
            "--input",
            "1",
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    for stream in open.iter_mut().take(3) {
        let mut seen = String::new();
        let mut buf = [0u8; 256];
        while seen.matches("event: changed").count() < 2 {
            let n = std::io::Read::read(stream, &mut buf).unwrap();
            assert!(n > 0, "the list closed: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
}

#[test]
fn a_run_recorded_before_inputs_were_kept_shows_its_digest() {
    let (outer, root) = console_project();
    // A Run recorded locally, then made what an older jig wrote: no
    // inputRetained, no input beside it.
    let run = run_jig(
        &root,
        &[
            "run",
            "flow:flows/echo",
            "--input",
            r#"{"old":true}"#,
            "--json",
        ],
    );
    assert_eq!(run.status, 0, "{run:?}");
    let id = run.json()["runId"].as_str().unwrap().to_string();
    let record_path = root.join(format!(".jig/runs/{id}.json"));
    let mut record: Value = serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    assert_eq!(record["inputRetained"], true, "{record}");
    let input_path = root.join(format!(".jig/runs/inputs/{id}.json"));
    assert_eq!(std::fs::read(&input_path).unwrap(), br#"{"old":true}"#);
    // A second Run keeps its input across the daemon's start.
    let kept = run_jig(
        &root,
        &[
            "run",
            "flow:flows/echo",
            "--input",
            r#"{"new":1}"#,
            "--json",
        ],
    );
    let kept = kept.json()["runId"].as_str().unwrap().to_string();
    record.as_object_mut().unwrap().remove("inputRetained");
    std::fs::write(&record_path, record.to_string()).unwrap();
    std::fs::remove_file(&input_path).unwrap();

    let mut served = Served::start(&root, &[]);
    let (status, body) = served.api("GET", &format!("/v1/projects/p/runs/{id}/input"));
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["code"], "JIG_INPUT_NOT_RETAINED", "{body}");
    let (status, body) = served.api("GET", &format!("/v1/projects/p/runs/{kept}/input"));
    assert_eq!((status, body), (200, serde_json::json!({"new": 1})));
    let link = served.console(&root);
    let base = origin(&link);
    let jar = outer.path().join("jar");
    session_cookie(&link, &jar);
    let jar = jar.to_str().unwrap();
    let (status, page) = fetch(
        &format!("{base}/console/projects/p/runs/{id}"),
        &["-b", jar],
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Input not retained"), "{page}");
    assert!(
        page.contains(record["inputDigest"].as_str().unwrap()),
        "{page}"
    );
    let (status, page) = fetch(
        &format!("{base}/console/projects/p/runs/{kept}"),
        &["-b", jar],
    );
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(r#"<pre id="input">{&quot;new&quot;:1}</pre>"#),
        "{page}"
    );
    // Without a session neither the page nor its input is shown.
    let (status, page) = fetch(&format!("{base}/console/projects/p/runs/{kept}"), &[]);
    assert_eq!(status, 401);
    assert!(!page.contains("new"), "{page}");
}

#[test]
fn with_a_database_and_a_worker_the_console_lists_follows_and_cancels() {
    needs_a_browser();
    let _one = one_browser();
    let pg = Postgres::start();
    let (outer, root) = console_project();
    let logs = outer.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut served = Served::start(&root, &["--database", &pg.url()]);
    let _worker = crate::queue::worker(&root, &pg, &logs, 1, "2");
    let link = served.console(&root);
    let base = origin(&link);
    let browser = Browser::start();
    browser.goto(&link);

    // A Run submitted by the CLI is listed, pushed, and its status
    // follows what the worker (another process) records.
    browser.goto(&format!("{base}/console/projects/p/runs"));
    assert_eq!(browser.count("#runs tr"), 0);
    let submitted = Instant::now();
    let mut cli = jig(&root)
        .args(["run", "--server"])
        .arg(format!("unix:{}", served.socket.display()))
        .args(["flow:flows/echo", "--input", r#"{"from":"<i>cli</i>"}"#])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        browser.wait(SECOND, |b| b.count("#runs tr") == 1),
        "the CLI's Run did not show within a second"
    );
    eprintln!("listed after {:?}", submitted.elapsed());
    assert!(
        browser.wait(30 * SECOND, |b| b.text("#runs .status").as_deref()
            == Some("succeeded")),
        "the worker's terminal did not reach the list"
    );
    cli.wait().unwrap();
    shot(&browser, "database-runs");
    browser.click("#runs a");
    assert!(browser.wait(5 * SECOND, |b| b
        .text("#terminal")
        .is_some_and(|t| t.contains(r#""output":{"from":"<i>cli</i>"}"#))));
    assert_eq!(
        browser.text("#input").as_deref(),
        Some(r#"{"from":"<i>cli</i>"}"#)
    );
    assert_eq!(browser.count("main i"), 0);
    let id = browser.url().rsplit('/').next().unwrap().to_string();
    let (status, input) = served.api("GET", &format!("/v1/projects/p/runs/{id}/input"));
    assert_eq!(
        (status, input),
        (200, serde_json::json!({"from": "<i>cli</i>"}))
    );

    // A pending Run's events arrive live from the database, then its terminal.
    submit_slow(&browser, &base);
    let data = data_events;
    assert!(browser.wait(30 * SECOND, |b| data(b) >= 1));
    assert!(data(&browser) < 3, "the events did not arrive one by one");
    shot(&browser, "database-run-pending");
    assert!(browser.wait(10 * SECOND, |b| data(b) == 3));
    assert!(browser.wait(15 * SECOND, |b| b.text("#status").as_deref()
        == Some("succeeded")));
    assert!(browser
        .text("#terminal")
        .unwrap()
        .contains(r#""output":"slept""#));
    assert_eq!(browser.text("#input").as_deref(), Some("1"));
    not_pwned(&browser);

    // Cancel a pending Run the worker holds.
    fill_slow(&browser, &base, "120");
    assert!(browser.wait(5 * SECOND, |b| b.count("#cancel button") == 1));
    let id = browser.url().rsplit('/').next().unwrap().to_string();
    assert!(browser.wait(30 * SECOND, |b| data(b) >= 1));
    browser.click("#cancel button");
    // Settled means its terminal arrived (a replayed "queued" status is
    // not settled).
    assert!(
        browser.wait(30 * SECOND, |b| b
            .text("#terminal")
            .is_some_and(|t| t.contains(r#""status""#))),
        "the cancelled Run did not settle"
    );
    assert_eq!(browser.text("#status").as_deref(), Some("failed"));
    let (_, record) = served.api("GET", &format!("/v1/projects/p/runs/{id}"));
    assert_eq!(record["terminal"]["status"], "failed", "{record}");
    assert_eq!(record["terminal"]["code"], "CANCELLED", "{record}");
    shot(&browser, "database-run-cancelled");
}

/// Submit `flow:flows/slow` with `input` from the console's form.
fn fill_slow(browser: &Browser, base: &str, input: &str) {
    browser.goto(&format!("{base}/console/projects/p/submit"));
    browser.script(
        "document.getElementById('target').value = 'flow:flows/slow';",
        serde_json::json!([]),
    );
    browser.fill("#input", input);
    browser.click("#submit button[type=submit]");
}

/// Submit `flow:flows/slow` from the console's form and wait for its page.
fn submit_slow(browser: &Browser, base: &str) {
    fill_slow(browser, base, "1");
    assert!(browser.wait(5 * SECOND, |b| b.url().contains("/runs/run-")));
}

/// The `data` events a Run's page shows so far.
fn data_events(b: &Browser) -> u64 {
    b.script(
        "return [...document.querySelectorAll('#events strong')].filter(e => e.textContent === 'data').length;",
        serde_json::json!([]),
    )
    .as_u64()
    .unwrap()
}
