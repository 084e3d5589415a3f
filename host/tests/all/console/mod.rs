//! The web console of `jig serve` in a real browser: Debian's headless
//! chromium driven through chromedriver (WebDriver, [`webdriver`]) against a
//! real daemon, reached through `jig console` (the Unix socket) or the TCP
//! listener with `--console`. Screenshots of the main pages go to
//! `$JIG_CONSOLE_SHOTS` when it is set.

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

    // Its page: the output as text, control character escaped.
    browser.click("#runs a");
    assert!(browser.wait(5 * SECOND, |b| b.text("#terminal").is_some()));
    let terminal = browser.text("#terminal").unwrap();
    assert!(
        terminal.contains(r#""output":"<script>window.pwned=2</script>\u0007""#),
        "{terminal}"
    );
    not_pwned(&browser);

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
    browser.goto(&format!("{base}/console/projects/p/submit"));
    browser.script(
        "document.getElementById('target').value = 'flow:flows/slow';",
        serde_json::json!([]),
    );
    browser.fill("#input", "1");
    browser.click("#submit button[type=submit]");
    assert!(browser.wait(5 * SECOND, |b| b.url().contains("/runs/run-")));
    let data = |b: &Browser| {
        b.script(
            "return [...document.querySelectorAll('#events strong')].filter(e => e.textContent === 'data').length;",
            serde_json::json!([]),
        )
        .as_u64()
        .unwrap()
    };
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
    browser.goto(&format!("{base}/console/projects/p/submit"));
    browser.script(
        "document.getElementById('target').value = 'flow:flows/slow';",
        serde_json::json!([]),
    );
    browser.fill("#input", "120");
    browser.click("#submit button[type=submit]");
    assert!(browser.wait(5 * SECOND, |b| b.count("#cancel button") == 1));
    let id = browser.url().rsplit('/').next().unwrap().to_string();
    assert!(browser.wait(5 * SECOND, |b| data(b) >= 1));
    browser.click("#cancel button");
    assert!(
        browser.wait(15 * SECOND, |b| b
            .text("#status")
            .is_some_and(|s| s != "pending")),
        "the cancelled Run did not settle"
    );
    let (_, record) = served.api("GET", &format!("/v1/projects/p/runs/{id}"));
    assert_ne!(record["terminal"]["status"], "succeeded", "{record}");

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
    std::fs::write(&token, "console-s3cret\n").unwrap();
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
    browser.fill("#token", "console-s3creX");
    browser.click("form button[type=submit]");
    assert!(browser.wait(5 * SECOND, |b| b
        .text(".error")
        .is_some_and(|t| t.contains("bearer token"))));
    browser.fill("#token", "console-s3cret");
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
