//! `jig serve --tcp` over TLS, through the real daemon and real TLS
//! clients (curl, `jig run --server https://`, and a rustls client here):
//! a self-signed certificate made by rcgen, its reload on SIGHUP, the
//! console's `Secure` cookie, and the refusals: plain HTTP off loopback,
//! and a certificate or key that cannot be used.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

use crate::serve::{served_project, Daemon};
use crate::serve_bounds::token_file;
use crate::support::*;

/// A self-signed leaf for 127.0.0.1 and localhost, written as
/// `<name>.pem` and `<name>.key`: (certificate, key).
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let made =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.key_pair.serialize_pem()).unwrap();
    (cert, key)
}

fn der(cert: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(cert).unwrap()
}

/// A project `p` and a token in a fresh directory.
fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let outer = tempfile::tempdir().unwrap();
    let project = outer.path().join("p");
    served_project(&project);
    let token = token_file(outer.path());
    (outer, project, token)
}

fn token_text(token: &Path) -> String {
    std::fs::read_to_string(token).unwrap().trim().to_string()
}

/// `curl` with `args` against `url`: (exit status, HTTP status, body).
fn curl(args: &[&str], url: &str) -> (i32, u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        out.status.code().unwrap_or(-1),
        status.trim().parse().unwrap_or(0),
        body.to_string(),
    )
}

/// A TLS connection to `address` trusting exactly `roots`.
type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn connect(address: &str, roots: &[CertificateDer<'static>]) -> Result<Tls, std::io::Error> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add(root.clone()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(address)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// The leaf certificate the daemon presents to a new handshake.
fn presented(address: &str, roots: &[CertificateDer<'static>]) -> CertificateDer<'static> {
    let tls = connect(address, roots).unwrap();
    tls.conn.peer_certificates().unwrap()[0].clone()
}

/// One keep-alive GET on an open TLS connection: (status, body).
fn get(tls: &mut Tls, path: &str, token: &str) -> (u16, String) {
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .unwrap();
    tls.flush().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        tls.read_exact(&mut byte).unwrap();
        seen.push(byte[0]);
    }
    let head = String::from_utf8(seen).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap();
    let mut body = vec![0u8; length];
    tls.read_exact(&mut body).unwrap();
    (status, String::from_utf8(body).unwrap())
}

#[test]
fn tls_serves_the_api_to_curl_and_jig_run_and_the_console_cookie_is_secure() {
    let (outer, project, token) = setup();
    let (cert, key) = certificate(outer.path(), "server");
    let address = format!("127.0.0.1:{}", free_port());
    let daemon = Daemon::start(
        &project,
        &[
            "--tcp",
            &address,
            "--token-file",
            token.to_str().unwrap(),
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--console",
        ],
    );
    let base = format!("https://{address}");
    let bearer = format!("authorization: Bearer {}", token_text(&token));
    let cacert = ["--cacert", cert.to_str().unwrap()];

    // curl trusting the self-signed certificate, with the token.
    let (exit, status, body) = curl(
        &[&cacert[..], &["-H", &bearer]].concat(),
        &format!("{base}/v1/projects/p/runs"),
    );
    assert_eq!((exit, status), (0, 200), "{body}");
    assert!(serde_json::from_str::<Value>(&body).unwrap()["runs"].is_array());
    // Without the token, TLS still answers 401.
    let (_, status, body) = curl(&cacert, &format!("{base}/v1/projects/p/runs"));
    assert_eq!(status, 401, "{body}");
    // curl not given the certificate refuses it (exit 60: peer certificate).
    let (exit, status, _) = curl(&[], &format!("{base}/v1/health"));
    assert_eq!((exit, status), (60, 0));
    // Plain HTTP to the TLS port gets no HTTP answer.
    let (exit, status, _) = curl(&["-H", &bearer], &format!("http://{address}/v1/health"));
    assert_ne!(exit, 0);
    assert_eq!(status, 0);

    // jig run --server https:// --cacert, end to end, then jig runs.
    let server = ["--server", &base, "--token-file", token.to_str().unwrap()];
    let run = run_jig(
        &project,
        &[
            &[
                "run",
                "flow:flows/echo",
                "--input",
                "{\"over\":\"tls\"}",
                "--json",
            ][..],
            &server[..],
            &cacert[..],
        ]
        .concat(),
    );
    assert_eq!(run.status, 0, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["status"], "succeeded", "{run:?}");
    assert_eq!(terminal["output"], json!({"over": "tls"}));
    // The same CA through the environment, for jig runs.
    let listed = output(
        jig(&project)
            .arg("runs")
            .args(server)
            .env("JIG_SERVER_CACERT", &cert)
            .output()
            .unwrap(),
    );
    assert_eq!(listed.status, 0, "{listed:?}");
    assert!(listed.stdout.contains(terminal["runId"].as_str().unwrap()));
    // Without --cacert the system's roots do not sign it: refused, and told
    // how to trust it.
    let refused = run_jig(
        &project,
        &[&["run", "flow:flows/echo", "--input", "1"][..], &server[..]].concat(),
    );
    assert_eq!(refused.status, 2, "{refused:?}");
    assert!(refused.stderr.starts_with("UNAVAILABLE: "), "{refused:?}");
    assert!(refused.stderr.contains("--cacert"), "{refused:?}");
    // --cacert means nothing to a plain http:// server.
    let plain = run_jig(
        &project,
        &[
            "run",
            "flow:flows/echo",
            "--input",
            "1",
            "--server",
            &format!("http://{address}"),
            "--token-file",
            token.to_str().unwrap(),
            "--cacert",
            cert.to_str().unwrap(),
        ],
    );
    assert!(plain.stderr.starts_with("JIG_USAGE: "), "{plain:?}");

    // The console's session cookie is Secure under TLS.
    let (status, cookie) = sign_in(&base, &token, &cacert);
    assert_eq!(status, 303);
    assert!(cookie.starts_with("jig_console="), "{cookie}");
    assert!(
        cookie.split("; ").any(|a| a == "Secure"),
        "the cookie is not Secure: {cookie}"
    );
    drop(daemon);
}

/// Sign in to the console at `base` with the bearer token: (status, the
/// Set-Cookie header's value).
fn sign_in(base: &str, token: &Path, extra: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-o", "/dev/null", "-D", "-"])
        .args(extra)
        .args(["-H", &format!("Origin: {base}")])
        .args(["--data-urlencode", &format!("token={}", token_text(token))])
        .arg(format!("{base}/console/login"))
        .output()
        .unwrap();
    let head = String::from_utf8_lossy(&out.stdout).into_owned();
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let cookie = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("set-cookie")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    (status, cookie)
}

#[test]
fn sighup_reloads_the_certificate_for_new_handshakes_and_keeps_open_connections() {
    let (outer, project, token) = setup();
    let (first, first_key) = certificate(outer.path(), "first");
    let (second, second_key) = certificate(outer.path(), "second");
    let (cert, key) = (outer.path().join("cert.pem"), outer.path().join("key.pem"));
    std::fs::copy(&first, &cert).unwrap();
    std::fs::copy(&first_key, &key).unwrap();
    // This daemon takes its TCP listener and TLS from [serve] in host.toml.
    let address = format!("127.0.0.1:{}", free_port());
    let config = outer.path().join("host.toml");
    std::fs::write(
        &config,
        format!(
            "[serve]\ntcp = \"{address}\"\ntoken-file = \"{}\"\ntls-cert = \"{}\"\ntls-key = \"{}\"\n",
            token.display(),
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let mut daemon = Daemon::start(&project, &["--config", config.to_str().unwrap()]);
    let token = token_text(&token);
    let both = [der(&first), der(&second)];
    assert_eq!(presented(&address, &both), der(&first));
    // A connection opened before the reload.
    let mut open = connect(&address, &[der(&first)]).unwrap();
    assert_eq!(get(&mut open, "/v1/health", &token).0, 200);

    // A key that is not the certificate's: the reload is refused and the
    // certificate in use stays.
    std::fs::copy(&second, &cert).unwrap();
    daemon.signal(nix::sys::signal::Signal::SIGHUP);
    let log = wait_for_log(&daemon, "kept the TLS certificate in use");
    assert!(log.contains("JIG_CONFIG_INVALID"), "{log}");
    assert!(log.contains("does not belong to the certificate"), "{log}");
    assert_eq!(presented(&address, &both), der(&first));

    // Both files replaced: the next handshake presents the new one.
    std::fs::copy(&second_key, &key).unwrap();
    let started = Instant::now();
    daemon.signal(nix::sys::signal::Signal::SIGHUP);
    wait_for_log(&daemon, "reloaded the TLS certificate");
    eprintln!("SIGHUP to reloaded: {:?}", started.elapsed());
    assert_eq!(presented(&address, &both), der(&second));
    // A client that trusts only the old certificate now refuses the new.
    assert!(connect(&address, &[der(&first)]).is_err());
    // The connection opened before is still served, on the old certificate.
    assert_eq!(get(&mut open, "/v1/projects/p/runs", &token).0, 200);
    assert_eq!(open.conn.peer_certificates().unwrap()[0], der(&first));
    // The daemon was not ended by the signals.
    assert_eq!(daemon.call("GET", "/v1/health", None).0, 200);
}

/// The daemon's log once it contains `text` (within 10 s).
fn wait_for_log(daemon: &Daemon, text: &str) -> String {
    let started = Instant::now();
    loop {
        let log = daemon.log();
        if log.contains(text) {
            return log;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no {text:?} in the log: {log}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn plain_http_off_loopback_is_refused_unless_the_operator_says_so() {
    let (_outer, project, token) = setup();
    let port = free_port();
    let open = format!("0.0.0.0:{port}");
    let serve = |extra: &[&str]| {
        run_jig(
            &project,
            &[
                &[
                    "-C",
                    project.to_str().unwrap(),
                    "serve",
                    "--token-file",
                    token.to_str().unwrap(),
                ][..],
                extra,
            ]
            .concat(),
        )
    };
    for address in [open.as_str(), &format!("[::]:{port}")] {
        let refused = serve(&["--tcp", address]);
        assert_eq!(refused.status, 1, "{refused:?}");
        assert!(
            refused.stderr.starts_with("JIG_CONFIG_INVALID: "),
            "{refused:?}"
        );
        for way_out in ["--tls-cert", "reverse proxy", "--insecure-plain-http"] {
            assert!(refused.stderr.contains(way_out), "{refused:?}");
        }
    }
    // The same through host.toml, and the flag's table twin lets it through.
    let config = project.parent().unwrap().join("host.toml");
    let table = format!(
        "[serve]\ntcp = \"{open}\"\ntoken-file = \"{}\"\n",
        token.display()
    );
    std::fs::write(&config, &table).unwrap();
    let refused = run_jig(
        &project,
        &[
            "-C",
            project.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "serve",
        ],
    );
    assert!(
        refused.stderr.starts_with("JIG_CONFIG_INVALID: "),
        "{refused:?}"
    );
    std::fs::write(&config, format!("{table}insecure-plain-http = true\n")).unwrap();
    let daemon = Daemon::start(&project, &["--config", config.to_str().unwrap()]);
    let base = format!("http://127.0.0.1:{port}");
    let (exit, status, body) = curl(
        &[
            "-H",
            &format!("authorization: Bearer {}", token_text(&token)),
        ],
        &format!("{base}/v1/health"),
    );
    assert_eq!((exit, status), (0, 200), "{body}");
    drop(daemon);
    // The flag itself, with the console: its cookie is not Secure on plain
    // HTTP (a browser would drop a Secure cookie there).
    let daemon = Daemon::start(
        &project,
        &[
            "--tcp",
            &open,
            "--token-file",
            token.to_str().unwrap(),
            "--insecure-plain-http",
            "--console",
        ],
    );
    let (status, cookie) = sign_in(&base, &token, &[]);
    assert_eq!(status, 303, "{}", daemon.log());
    assert!(cookie.starts_with("jig_console="), "{cookie}");
    assert!(!cookie.contains("Secure"), "{cookie}");
    drop(daemon);
    // Loopback plain HTTP needs no flag.
    let loopback = format!("127.0.0.1:{}", free_port());
    let daemon = Daemon::start(
        &project,
        &["--tcp", &loopback, "--token-file", token.to_str().unwrap()],
    );
    let (exit, status, _) = curl(
        &[
            "-H",
            &format!("authorization: Bearer {}", token_text(&token)),
        ],
        &format!("http://{loopback}/v1/health"),
    );
    assert_eq!((exit, status), (0, 200));
    drop(daemon);
}

#[test]
fn a_certificate_or_key_that_cannot_be_used_refuses_the_start() {
    let (outer, project, token) = setup();
    let dir = outer.path();
    let (cert, key) = certificate(dir, "good");
    let (_, other_key) = certificate(dir, "other");
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let address = format!("127.0.0.1:{}", free_port());
    let serve = |extra: &[&str]| {
        run_jig(
            &project,
            &[
                &[
                    "-C",
                    project.to_str().unwrap(),
                    "serve",
                    "--tcp",
                    &address,
                    "--token-file",
                    token.to_str().unwrap(),
                ][..],
                extra,
            ]
            .concat(),
        )
    };
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let missing = dir.join("missing.pem");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--tls-cert".into(), path(&cert)],
            "--tls-cert requires --tls-key",
        ),
        (
            vec!["--tls-key".into(), path(&key)],
            "--tls-key requires --tls-cert",
        ),
        (
            vec![
                "--tls-cert".into(),
                path(&missing),
                "--tls-key".into(),
                path(&key),
            ],
            "No such file",
        ),
        (
            vec![
                "--tls-cert".into(),
                path(&garbage),
                "--tls-key".into(),
                path(&key),
            ],
            "holds no PEM CERTIFICATE block",
        ),
        (
            vec![
                "--tls-cert".into(),
                path(&cert),
                "--tls-key".into(),
                path(&cert),
            ],
            "not a PEM private key",
        ),
        (
            vec![
                "--tls-cert".into(),
                path(&cert),
                "--tls-key".into(),
                path(&other_key),
            ],
            "does not belong to the certificate",
        ),
        (
            vec![
                "--tls-cert".into(),
                path(&cert),
                "--tls-key".into(),
                path(&key),
                "--insecure-plain-http".into(),
            ],
            "contradict",
        ),
    ];
    for (extra, says) in &cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let refused = serve(&extra);
        assert_eq!(refused.status, 1, "{extra:?}: {refused:?}");
        assert!(
            refused.stderr.starts_with("JIG_CONFIG_INVALID: ") && refused.stderr.contains(says),
            "{extra:?}: {refused:?}"
        );
        // Nothing listens after a refusal.
        assert!(TcpStream::connect(&address).is_err(), "{extra:?}");
    }
    // TLS flags without --tcp.
    let alone = run_jig(
        &project,
        &[
            "-C",
            project.to_str().unwrap(),
            "serve",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    assert!(
        alone.stderr.starts_with("JIG_CONFIG_INVALID: ") && alone.stderr.contains("require --tcp"),
        "{alone:?}"
    );
}
