//! What a client that never authenticates can take from `jig serve --tcp`:
//! a bounded number of connections, each for a bounded time, a bounded
//! body, a few guesses of the token; never the Unix socket's turn. And what
//! every client is answered: the console's actions only from its own
//! origin, and every API error as `{code, message}`. Real daemon, real
//! sockets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::serve::{served_project, Daemon};
use crate::support::*;

/// A token file as `jig serve --new-token` writes it.
pub(crate) fn token_file(dir: &Path) -> PathBuf {
    let path = dir.join("token");
    let run = run_jig(dir, &["serve", "--new-token", path.to_str().unwrap()]);
    assert_eq!(run.status, 0, "{run:?}");
    path
}

fn tcp_daemon(extra: &[&str]) -> (tempfile::TempDir, String, PathBuf, Daemon) {
    let outer = tempfile::tempdir().unwrap();
    let project = outer.path().join("p");
    served_project(&project);
    let token = token_file(outer.path());
    let address = format!("127.0.0.1:{}", free_port());
    let mut args = vec!["--tcp", &address, "--token-file", token.to_str().unwrap()];
    args.extend_from_slice(extra);
    let daemon = Daemon::start(&project, &args);
    (outer, address, token, daemon)
}

/// Read until the server closes or `within` passes: (bytes read, closed).
fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (Vec<u8>, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < within {
        match stream.read(&mut buf) {
            Ok(0) => return (seen, true),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (seen, true),
        }
    }
    (seen, false)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_half_header_flood_is_bounded_timed_out_and_never_delays_the_unix_socket() {
    let (_outer, address, _token, daemon) =
        tcp_daemon(&["--max-connections", "32", "--header-timeout", "2s"]);
    // A Run through the socket before the flood, so the one measured under
    // it is a warm Run like any other.
    let (status, terminal) = daemon.submit(json!({"target": "flow:flows/echo", "input": 0}));
    assert_eq!(status, 200, "{terminal}");
    let started = Instant::now();
    let quiet = daemon.submit(json!({"target": "flow:flows/echo", "input": 1}));
    let quiet_time = started.elapsed();
    assert_eq!(quiet.0, 200, "{}", quiet.1);

    // 200 connections, each sending half a request head and then nothing.
    let mut flood: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut s = TcpStream::connect(&address).unwrap();
            s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            s
        })
        .collect();
    let started = Instant::now();
    let flooded = daemon.submit(json!({"target": "flow:flows/echo", "input": 2}));
    let flooded_time = started.elapsed();
    assert_eq!(flooded.0, 200, "{}", flooded.1);
    assert_eq!(daemon.call("GET", "/v1/health", None).0, 200);
    eprintln!("a Unix-socket Run: {quiet_time:?} quiet, {flooded_time:?} under the TCP flood");
    assert!(
        flooded_time < quiet_time + Duration::from_secs(1),
        "the flood delayed the socket: {flooded_time:?} against {quiet_time:?}"
    );

    // Past the bound of 32, a connection is told 503 and closed at once.
    let refused = flood
        .iter_mut()
        .skip(32)
        .map(|s| read_until_closed(s, Duration::from_millis(500)))
        .filter(|(bytes, closed)| *closed && bytes.starts_with(b"HTTP/1.1 503"))
        .count();
    assert!(refused >= 150, "only {refused} of 168 were refused");
    // The 32 held are closed by the header timeout (2 s), not by their client.
    let closed = flood
        .iter_mut()
        .take(32)
        .map(|s| read_until_closed(s, Duration::from_secs(4)).1)
        .filter(|closed| *closed)
        .count();
    assert_eq!(
        closed, 32,
        "a half-header connection outlived the header timeout"
    );
    assert!(started.elapsed() < Duration::from_secs(6));
    drop(flood);
    // Their slots are free again.
    let mut again = TcpStream::connect(&address).unwrap();
    again
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (answer, _) = read_until_closed(&mut again, Duration::from_secs(2));
    assert!(
        answer.starts_with(b"HTTP/1.1 401"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[test]
fn an_unfinished_login_body_is_dropped_and_an_oversized_one_refused_unread() {
    let (_outer, address, _token, daemon) = tcp_daemon(&["--console", "--body-timeout", "1s"]);
    // A sign-in from another origin is refused before its form is read.
    let (status, page) = tcp_request(
        &address,
        &format!(
            "POST /console/login HTTP/1.1\r\nHost: {address}\r\nOrigin: null\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\
             Connection: close\r\n\r\ntoken=x"
        ),
    );
    assert_eq!(status, 403, "{page}");
    let login = |declared: usize, sent: &[u8]| {
        let mut s = TcpStream::connect(&address).unwrap();
        let head = format!(
            "POST /console/login HTTP/1.1\r\nHost: {address}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {declared}\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        s.write_all(sent).unwrap();
        s
    };
    // Declared larger than the form's bound: 413 before a byte of it is read.
    let started = Instant::now();
    let mut big = login(10 << 20, b"");
    let (answer, closed) = read_until_closed(&mut big, Duration::from_secs(3));
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(
        closed && started.elapsed() < Duration::from_millis(900),
        "{text}"
    );
    // Within the bound but never finished: 408 once the body timeout passes.
    let started = Instant::now();
    let mut slow = login(3000, b"token=abc");
    let (answer, closed) = read_until_closed(&mut slow, Duration::from_secs(4));
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("did not arrive within 1s"), "{text}");
    assert!(
        closed,
        "the connection stayed open after its body timed out"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(3),
        "{took:?}"
    );

    // 100 unfinished sign-ins at once cost the daemon little memory.
    let before = rss_kib(daemon.pid());
    let held: Vec<TcpStream> = (0..100).map(|_| login(4000, &[b'a'; 3000])).collect();
    std::thread::sleep(Duration::from_millis(500));
    let during = rss_kib(daemon.pid());
    eprintln!("RSS: {before} KiB before, {during} KiB with 100 unfinished sign-ins");
    assert!(during < before + 16 * 1024, "{before} KiB -> {during} KiB");
    drop(held);
}

#[test]
fn a_short_or_shared_token_is_refused_and_new_token_makes_one() {
    use std::os::unix::fs::PermissionsExt;
    let outer = tempfile::tempdir().unwrap();
    let project = outer.path().join("p");
    served_project(&project);
    let address = format!("127.0.0.1:{}", free_port());
    let serve = |token: &Path| {
        let socket = outer.path().join("s.sock");
        run_jig(
            &project,
            &[
                "-C",
                project.to_str().unwrap(),
                "serve",
                "--socket",
                socket.to_str().unwrap(),
                "--tcp",
                &address,
                "--token-file",
                token.to_str().unwrap(),
            ],
        )
    };
    let short = outer.path().join("short");
    write_token(&short, "k");
    let shared = outer.path().join("shared");
    write_token(&shared, &"k".repeat(64));
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
    for token in [&short, &shared] {
        let refused = serve(token);
        assert_eq!(refused.status, 1, "{refused:?}");
        assert!(
            refused.stderr.starts_with("JIG_TOKEN_WEAK: "),
            "{refused:?}"
        );
        assert!(
            refused.stderr.contains("jig serve --new-token FILE"),
            "{refused:?}"
        );
    }
    // --new-token: 32 random bytes as hex, mode 0600, never over a file.
    let made = token_file(outer.path());
    let text = std::fs::read_to_string(&made).unwrap();
    assert_eq!(text.trim().len(), 64, "{text}");
    assert!(text.trim().bytes().all(|b| b.is_ascii_hexdigit()));
    let mode = std::fs::metadata(&made).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = run_jig(
        outer.path(),
        &["serve", "--new-token", made.to_str().unwrap()],
    );
    assert_eq!(again.status, 1, "{again:?}");
    assert!(again.stderr.starts_with("JIG_OUTPUT_EXISTS: "), "{again:?}");
    assert_eq!(std::fs::read_to_string(&made).unwrap(), text);
    let other = token_file(&outer.path().join("p"));
    assert_ne!(std::fs::read_to_string(other).unwrap(), text);
}

/// One request over TCP: (status, headers and body as text).
fn tcp_request(address: &str, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(address).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let (answer, _) = read_until_closed(&mut s, Duration::from_secs(5));
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

#[test]
fn wrong_tokens_are_braked_per_peer_on_the_api_and_the_console_sign_in() {
    let (_outer, address, token, daemon) = tcp_daemon(&["--console"]);
    let token = std::fs::read_to_string(token).unwrap().trim().to_string();
    let api = |bearer: &str| {
        tcp_request(
            &address,
            &format!(
                "GET /v1/health HTTP/1.1\r\nHost: {address}\r\n\
                 Authorization: Bearer {bearer}\r\nConnection: close\r\n\r\n"
            ),
        )
    };
    assert_eq!(api(&token).0, 200);
    // Ten wrong guesses are answered 401; then the address waits.
    let started = Instant::now();
    for _ in 0..10 {
        let (status, text) = api("guess");
        assert_eq!(status, 401, "{text}");
    }
    let (status, text) = api("guess");
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("JIG_AUTH_THROTTLED"), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("retry-after: 1"),
        "{text}"
    );
    // While it waits, even the right token is not compared.
    assert_eq!(api(&token).0, 429);
    // The console's sign-in shares the brake.
    let form = format!("token={token}");
    let (status, page) = tcp_request(
        &address,
        &format!(
            "POST /console/login HTTP/1.1\r\nHost: {address}\r\nOrigin: http://{address}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{form}",
            form.len()
        ),
    );
    assert_eq!(status, 429, "{page}");
    // Guessing as fast as it can for two seconds, one address is compared
    // about once a second.
    let mut compared = 0;
    while started.elapsed() < Duration::from_secs(3) {
        match api("guess").0 {
            401 => compared += 1,
            429 => {}
            other => panic!("{other}"),
        }
    }
    eprintln!("wrong tokens compared in 3 s from one address: 10 + {compared}");
    assert!((1..=4).contains(&compared), "{compared}");
    // The Unix socket asks no token and is never braked.
    assert_eq!(daemon.call("GET", "/v1/health", None).0, 200);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(api(&token).0, 200);
}

#[test]
fn a_console_action_from_a_foreign_or_null_origin_is_refused_even_with_its_csrf_token() {
    let outer = tempfile::tempdir().unwrap();
    let project = outer.path().join("p");
    served_project(&project);
    let daemon = Daemon::start(&project, &[]);
    let (status, ticket) = daemon.call("POST", "/v1/console/tickets", None);
    assert_eq!(status, 201, "{ticket}");
    let curl = |path: &str, extra: &[&str]| {
        let out = Command::new("curl")
            .args(["-sS", "-w", "\n%{http_code}", "--unix-socket"])
            .arg(daemon.socket())
            .args(extra)
            .arg(format!("http://jig{path}"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        (status.trim().parse::<u16>().unwrap_or(0), body.to_string())
    };
    let jar = outer.path().join("jar");
    let jar = jar.to_str().unwrap();
    let link = ticket["path"].as_str().unwrap();
    assert_eq!(curl(link, &["-c", jar]).0, 303);
    let (status, page) = curl("/console/", &["-b", jar]);
    assert_eq!(status, 200);
    let csrf = page
        .split("name=\"jig-csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let form = format!("csrf={csrf}&target=flow:flows/echo&input=1");
    for origin in [
        "http://evil.example",
        "null",
        "http://jig:8080",
        "https://jig.evil",
    ] {
        let (status, body) = curl(
            "/console/projects/p/runs",
            &[
                "-b",
                jar,
                "--data",
                &form,
                "-H",
                &format!("Origin: {origin}"),
            ],
        );
        assert_eq!(status, 403, "{origin}: {body}");
        assert!(body.contains("JIG_CONSOLE_CSRF_INVALID"), "{body}");
    }
    assert!(
        daemon.runs().is_empty(),
        "an action from another origin ran"
    );
    let (status, body) = curl(
        "/console/projects/p/runs",
        &["-b", jar, "--data", &form, "-H", "Origin: http://jig"],
    );
    assert_eq!(status, 303, "{body}");
    assert_eq!(daemon.runs().len(), 1);
}

#[test]
fn every_api_error_is_code_and_message_json() {
    let outer = tempfile::tempdir().unwrap();
    let project = outer.path().join("p");
    served_project(&project);
    let daemon = Daemon::start(&project, &[]);
    for (method, path, body, status, code) in [
        (
            "GET",
            "/v1/projects/p/runs?limit=many",
            None,
            400,
            "INVALID_REQUEST",
        ),
        (
            "POST",
            "/v1/projects/p/runs?wait=maybe",
            Some(&b"{}"[..]),
            400,
            "INVALID_REQUEST",
        ),
        ("DELETE", "/v1/health", None, 405, "METHOD_NOT_ALLOWED"),
        (
            "PUT",
            "/v1/projects/p/runs",
            Some(&b"{}"[..]),
            405,
            "METHOD_NOT_ALLOWED",
        ),
        (
            "GET",
            "/v1/projects/p/runs/%FF",
            None,
            400,
            "INVALID_REQUEST",
        ),
        ("GET", "/v1/nothing", None, 404, "NOT_FOUND"),
        (
            "POST",
            "/v1/projects/p/runs",
            Some(&b"not json"[..]),
            400,
            "INVALID_REQUEST",
        ),
    ] {
        let (got, text) = daemon.raw(method, path, body, &[]);
        let value: Value = serde_json::from_str(text.trim())
            .unwrap_or_else(|_| panic!("{method} {path}: not JSON: {text}"));
        assert_eq!(got, status, "{method} {path}: {text}");
        assert_eq!(value["code"], code, "{method} {path}: {text}");
        assert!(
            value["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{text}"
        );
        assert_eq!(value.as_object().unwrap().len(), 2, "{text}");
    }
}
