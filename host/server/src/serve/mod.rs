//! `jig serve`: a long-running host that takes Runs over HTTP/1.1 + JSON on
//! a Unix socket (or, with a bearer token, TCP) for projects it holds open.
//!
//! It never reviews: each new Run reads the project's current admitted
//! generation, and a Run keeps the generation it started with. Every Run
//! goes through the same record-before-dispatch rules as `jig run`, and
//! the bounds (active Runs, a bounded queue, JSON/1 body limits) refuse
//! work before anything is recorded. TCP off loopback is served only over
//! TLS ([`tls`]) unless the operator says plain HTTP is meant.

mod api;
pub mod console;
mod http;
pub mod listen;
mod runner;
mod throttle;
pub mod tls;
pub mod token;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub use api::{MAX_BODY_BYTES, OPENAPI, ROUTES};
pub use http::TAR_TYPE;
pub use runner::{Limits, ServedRun, DEFAULT_ENVELOPES_AHEAD};
pub use token::{new_token, read_token};

use jig_engine::config::HostConfig;

use crate::Error;

/// Runs waiting for an active slot, when neither flag nor table says.
pub const DEFAULT_MAX_QUEUED_RUNS: usize = 64;
/// How long SIGTERM lets Runs finish before cancelling them.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// After the grace, how long cancelled Runs get to be fenced and cleaned
/// before the daemon exits anyway (their records are then fenced by the
/// next start, `COORDINATOR_LOST`).
pub const CANCEL_FENCE_BUDGET: Duration = Duration::from_secs(30);
/// systemd socket activation passes listening sockets from this descriptor.
pub const SD_LISTEN_FDS_START: i32 = 3;

/// What `jig serve` was asked, with the host configuration applied.
pub struct Options {
    /// (LocalName, project root).
    pub projects: Vec<(String, PathBuf)>,
    pub socket: PathBuf,
    pub tcp: Option<(String, PathBuf)>,
    pub limits: Limits,
    pub shutdown_grace: Duration,
    pub config: HostConfig,
    /// `--database`: enqueue Runs in PostgreSQL for `jig worker`s.
    pub database: Option<crate::queue::Database>,
    /// `--console`: serve the console on the TCP listener too (on the Unix
    /// socket it is always there, reached through `jig console`).
    pub console: bool,
    /// The TCP connection bound and the header and body timeouts.
    pub connections: listen::Bounds,
    /// `--tls-cert`/`--tls-key`: serve TCP over TLS with this pair,
    /// reloaded on SIGHUP.
    pub tls: Option<tls::Files>,
    /// `--insecure-plain-http`: serve TCP without TLS even off loopback.
    pub insecure_plain_http: bool,
}

/// What a URL path segment of the HTTP API leaves as it is: RFC 3986's
/// unreserved characters; every other byte is percent-encoded.
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `text` as one URL path segment (a project name, a Run ID), as the
/// console's links and the `--server` client spell it.
pub fn path_segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, PATH_SEGMENT).to_string()
}

/// The default socket: `$XDG_RUNTIME_DIR/jig/jig.sock`, else
/// `/run/jig/jig.sock`.
pub fn default_socket() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("jig").join("jig.sock"),
        None => PathBuf::from("/run/jig/jig.sock"),
    }
}

/// The Unix listener systemd passed this process, if `LISTEN_PID` names
/// it. The variables are removed so Runs never inherit them.
fn activated_listener() -> Option<std::os::unix::net::UnixListener> {
    use std::os::fd::FromRawFd;
    let pid = std::env::var("LISTEN_PID").ok()?.parse::<u32>().ok()?;
    let fds = std::env::var("LISTEN_FDS").ok()?.parse::<i32>().ok()?;
    std::env::remove_var("LISTEN_PID");
    std::env::remove_var("LISTEN_FDS");
    std::env::remove_var("LISTEN_FDNAMES");
    if pid != std::process::id() || fds < 1 {
        return None;
    }
    // SAFETY: systemd hands this process descriptor 3 as a listening
    // socket when LISTEN_PID names it; nothing else owns it.
    Some(unsafe { std::os::unix::net::UnixListener::from_raw_fd(SD_LISTEN_FDS_START) })
}

/// Bind `path` (mode 0600, in a 0700 directory created if missing). A
/// stale socket file from a killed daemon is replaced; anything else at
/// that path is refused.
fn bind_socket(path: &Path) -> Result<std::os::unix::net::UnixListener, Error> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
    let unavailable =
        |e: std::io::Error| Error::Unavailable(format!("cannot listen on {}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        if !parent.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(unavailable)?;
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(Error::Busy(format!(
                    "another jig serve listens on {}",
                    path.display()
                )));
            }
            std::fs::remove_file(path).map_err(unavailable)?;
        }
        Ok(_) => {
            return Err(Error::Unavailable(format!(
                "{} exists and is not a socket",
                path.display()
            )))
        }
        Err(_) => {}
    }
    let listener = std::os::unix::net::UnixListener::bind(path).map_err(unavailable)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(unavailable)?;
    Ok(listener)
}

/// Serve until SIGTERM or SIGINT, then drain (see [`runner::Server::drain`]).
pub fn serve(options: Options) -> Result<(), Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::Internal(e.to_string()))?;
    runtime.block_on(serve_async(options))
}

async fn serve_async(options: Options) -> Result<(), Error> {
    // The TCP listener's token, TLS and address are judged before any
    // project is opened: a refusal leaves nothing behind.
    let tcp = match &options.tcp {
        None => None,
        Some((address, token_file)) => {
            let token = token::read_token(token_file)?;
            let tls = options.tls.clone().map(tls::Tls::load).transpose()?;
            if tls.is_none() && !options.insecure_plain_http {
                refuse_plain_off_loopback(address).await?;
            }
            listen::check_descriptors(options.connections.max_connections)?;
            Some((address, token, tls))
        }
    };
    let mut server = runner::Server::open(&options.projects, options.config, options.limits)?;
    if let Some(database) = options.database {
        let queue = crate::queue::Queue::open(database).await?;
        server = server.with_queue(queue);
    }
    let server = Arc::new(server);
    server.start_listening();
    server.start_retention();
    let (listener, bound) = match activated_listener() {
        Some(listener) => (listener, None),
        None => (bind_socket(&options.socket)?, Some(options.socket.clone())),
    };
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::Unavailable(e.to_string()))?;
    let listener = tokio::net::UnixListener::from_std(listener)
        .map_err(|e| Error::Unavailable(e.to_string()))?;
    let tcp = match tcp {
        None => None,
        Some((address, token, tls)) => {
            let tcp = tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| Error::Unavailable(format!("cannot listen on {address}: {e}")))?;
            Some((tcp, token, tls.map(Arc::new)))
        }
    };
    let tls = tcp.as_ref().and_then(|(_, _, tls)| tls.clone());
    if let Some(path) = &bound {
        server.publish_socket(path);
    }
    // Installed before the daemon says it listens, so a SIGHUP from then
    // on reloads and never ends it.
    let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| Error::Internal(format!("cannot handle SIGHUP: {e}")))?;
    let reloading = tokio::spawn(reload_on_hangup(hangup, tls));
    let console = Arc::new(console::Console::default());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let bounds = options.connections;
    let unix = tokio::spawn(listen::unix(
        listener,
        api::router(
            server.clone(),
            None,
            console.clone(),
            api::Exposure {
                console: true,
                secure: false,
            },
        ),
        bounds,
        stop_rx.clone(),
    ));
    let tcp = tcp.map(|(tcp, token, tls)| {
        tokio::spawn(listen::tcp(
            tcp,
            tls.as_ref().map(|tls| tls.acceptor()),
            api::router(
                server.clone(),
                Some(token),
                console.clone(),
                api::Exposure {
                    console: options.console,
                    secure: tls.is_some(),
                },
            ),
            bounds,
            stop_rx.clone(),
        ))
    });
    eprintln!(
        "jig serve: listening on {} for {}",
        bound
            .as_deref()
            .map_or("the activated socket".to_string(), |p| p
                .display()
                .to_string()),
        options
            .projects
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    wait_for_signal().await;
    reloading.abort();
    server.drain(options.shutdown_grace).await;
    server.release_envelope();
    let _ = stop_tx.send(true);
    // Open keep-alive connections and finished streams end promptly.
    let _ = tokio::time::timeout(Duration::from_secs(5), unix).await;
    if let Some(tcp) = tcp {
        let _ = tokio::time::timeout(Duration::from_secs(5), tcp).await;
    }
    if let Some(path) = bound {
        server.withdraw_socket();
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Refuse plain HTTP on `address` unless every address it names is
/// loopback: off loopback, the bearer token and the console's cookie would
/// cross the network in clear.
async fn refuse_plain_off_loopback(address: &str) -> Result<(), Error> {
    let resolved = tokio::net::lookup_host(address)
        .await
        .map_err(|e| Error::Unavailable(format!("cannot listen on {address}: {e}")))?;
    if let Some(open) = resolved.map(|a| a.ip()).find(|ip| !ip.is_loopback()) {
        return Err(Error::Config(format!(
            "--tcp {address} ({open}) is not a loopback address, and plain HTTP would carry the \
             bearer token and the console's cookie in clear: serve TLS with --tls-cert and \
             --tls-key ([serve] tls-cert, tls-key), or listen on loopback behind a reverse proxy \
             that terminates TLS; --insecure-plain-http ([serve] insecure-plain-http = true) \
             serves plain HTTP anyway"
        )));
    }
    Ok(())
}

/// On each SIGHUP, read the TLS pair again (a failed reload keeps the one
/// in use and says why). Without TLS there is nothing to reload, and the
/// signal still does not end the daemon.
async fn reload_on_hangup(mut hangup: tokio::signal::unix::Signal, tls: Option<Arc<tls::Tls>>) {
    while hangup.recv().await.is_some() {
        match &tls {
            None => eprintln!("jig serve: SIGHUP: no TLS certificate to reload"),
            Some(tls) => match tls.reload() {
                Ok(()) => eprintln!(
                    "jig serve: SIGHUP: reloaded the TLS certificate {} and key {}",
                    tls.files().cert.display(),
                    tls.files().key.display()
                ),
                Err(e) => eprintln!(
                    "jig serve: SIGHUP: kept the TLS certificate in use: {} {e}",
                    e.code()
                ),
            },
        }
    }
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    tokio::select! {
        _ = received(term.as_mut()) => {}
        _ = received(int.as_mut()) => {}
    }
}

/// The next delivery of `signal` (never, if it could not be installed).
async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::path_segment;

    #[test]
    fn a_path_segment_keeps_the_unreserved_and_encodes_every_other_byte() {
        assert_eq!(path_segment("run-1-0a_B.~"), "run-1-0a_B.~");
        assert_eq!(path_segment("a b/c?d%"), "a%20b%2Fc%3Fd%25");
        assert_eq!(path_segment("ü"), "%C3%BC");
        assert_eq!(path_segment(""), "");
    }
}
