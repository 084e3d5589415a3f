//! A minimal W3C WebDriver client over plain HTTP/1.1 (std only), enough to
//! drive Debian's headless chromium through chromedriver: sessions,
//! navigation, elements, script, cookies and screenshots.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// The W3C element reference key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The flags that work on this machine (and in CI).
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// Whether chromium and chromedriver are installed (`.ci/setup` installs them).
pub fn available() -> bool {
    Path::new("/usr/bin/chromedriver").exists() && Path::new("/usr/bin/chromium").exists()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP request to `port`: (status, JSON body).
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    // chromedriver may keep the connection open: read the head, then
    // exactly the body its length (or its chunks) says.
    let mut response = Vec::new();
    let mut buf = [0u8; 16384];
    let complete = |response: &[u8]| -> Option<(u16, String)> {
        let end = response.windows(4).position(|w| w == b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&response[..end]).to_ascii_lowercase();
        let rest = &response[end + 4..];
        let status = head.split_whitespace().nth(1)?.parse().ok()?;
        if head.contains("transfer-encoding: chunked") {
            let text = String::from_utf8_lossy(rest);
            return text
                .ends_with("0\r\n\r\n")
                .then(|| (status, dechunk(&text)));
        }
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        (rest.len() >= length).then(|| {
            (
                status,
                String::from_utf8_lossy(&rest[..length]).into_owned(),
            )
        })
    };
    loop {
        if let Some((status, body)) = complete(&response) {
            return (status, serde_json::from_str(&body).unwrap_or(Value::Null));
        }
        let n = stream.read(&mut buf).unwrap();
        if n == 0 {
            return (0, Value::Null);
        }
        response.extend_from_slice(&buf[..n]);
    }
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        text = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A chromedriver process and one browser session in it.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "no chromedriver"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = FLAGS.iter().map(|f| f.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        args.push("--window-size=1280,900".into());
        let (status, created) = http(
            port,
            "POST",
            "/session",
            Some(&json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
            }}})),
        );
        if status != 200 {
            let mut driver = driver;
            let _ = driver.kill();
            let _ = driver.wait();
            panic!("no browser session: {status} {created}");
        }
        Browser {
            driver,
            port,
            session: created["value"]["sessionId"].as_str().unwrap().to_string(),
            _profile: profile,
        }
    }

    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let (status, value) = http(self.port, method, &path, body.as_ref());
        assert_eq!(status, 200, "{method} {path}: {value}");
        value["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.command("POST", "/url", Some(json!({"url": url})));
    }

    pub fn url(&self) -> String {
        self.command("GET", "/url", None)
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Run `script` (a function body) with `args`; its return value.
    pub fn script(&self, script: &str, args: Value) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// The text of the first element matching `css`, if any.
    pub fn text(&self, css: &str) -> Option<String> {
        self.script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )
        .as_str()
        .map(str::to_string)
    }

    /// How many elements match `css`.
    pub fn count(&self, css: &str) -> usize {
        self.script(
            "return document.querySelectorAll(arguments[0]).length;",
            json!([css]),
        )
        .as_u64()
        .unwrap() as usize
    }

    fn element(&self, css: &str) -> String {
        let found = self.command(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_string()
    }

    pub fn click(&self, css: &str) {
        let id = self.element(css);
        self.command("POST", &format!("/element/{id}/click"), Some(json!({})));
    }

    /// Replace a field's value by typing `text` into it.
    pub fn fill(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.command("POST", &format!("/element/{id}/clear"), Some(json!({})));
        self.command(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        );
    }

    pub fn cookies(&self) -> Value {
        self.command("GET", "/cookie", None)
    }

    pub fn resize(&self, width: u32, height: u32) {
        self.command(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        );
    }

    /// Emulate a system that prefers dark colours (DevTools, through
    /// chromedriver).
    pub fn prefer_dark(&self) {
        self.command(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": "Emulation.setEmulatedMedia", "params": {
                "features": [{"name": "prefers-color-scheme", "value": "dark"}],
            }})),
        );
    }

    /// A PNG of the viewport, written to `path` (its directory made).
    pub fn screenshot(&self, path: &Path) {
        let data = self.command("GET", "/screenshot", None);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(path, base64(data.as_str().unwrap()));
    }

    /// Poll `check` until it holds or `limit` passes; whether it held.
    pub fn wait(&self, limit: Duration, mut check: impl FnMut(&Browser) -> bool) -> bool {
        let started = Instant::now();
        loop {
            if check(self) {
                return true;
            }
            if started.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = http(
            self.port,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Standard base64 to bytes.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits: Vec<u32> = text.bytes().filter_map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, d) in chunk.iter().enumerate() {
            n |= d << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}

#[test]
fn base64_decodes() {
    assert_eq!(base64("aGVsbG8="), b"hello");
    assert_eq!(base64("aGk="), b"hi");
    assert_eq!(base64("YWJj"), b"abc");
}
