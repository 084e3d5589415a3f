//! `jig console`: open the daemon's web console to a browser on this
//! machine. The console lives in the daemon (`jig_server::serve::console`);
//! a browser cannot reach its Unix socket, so this command listens on a
//! loopback port, asks the daemon (over the socket, which already trusts
//! this user) for a one-time sign-in ticket, prints the link, and passes
//! `/console/...` requests through to the socket, and nothing else.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::client::{self, Endpoint};
use super::{CliError, Code};

#[derive(clap::Args, Debug)]
pub struct ConsoleArgs {
    /// The loopback address to listen on (default 127.0.0.1 on a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The daemon's socket: unix:/path/to.sock (default $JIG_SERVER, else the
    /// daemon holding the project here, else the default socket).
    #[arg(long, value_name = "URL")]
    server: Option<String>,
}

fn usage(message: impl Into<String>) -> CliError {
    CliError::new(Code::Usage, message)
}

fn unavailable(message: impl Into<String>) -> CliError {
    CliError::new(Code::Unavailable, message)
}

/// The daemon's Unix socket this console talks to.
fn socket(dir: &Path, server: Option<&str>) -> Result<PathBuf, CliError> {
    if let Some(served) = client::named(server, None, None)? {
        return match served.endpoint {
            Endpoint::Unix(path) => Ok(path),
            Endpoint::Http { base, .. } => Err(usage(format!(
                "{base} is a TCP listener: open {base}/console/ (started with --console) and sign in with its token"
            ))),
        };
    }
    if let Some(served) = super::project_root(dir)
        .ok()
        .and_then(|r| client::holding(&r))
    {
        if let Endpoint::Unix(path) = served.endpoint {
            return Ok(path);
        }
    }
    Ok(jig_server::serve::default_socket())
}

pub fn console(dir: &Path, args: ConsoleArgs) -> Result<u8, CliError> {
    if !args.listen.ip().is_loopback() {
        return Err(usage(format!(
            "--listen {} is not a loopback address; the console link is for this machine only",
            args.listen
        )));
    }
    let socket = socket(dir, args.server.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| unavailable(e.to_string()))?;
    runtime.block_on(serve(socket, args.listen))
}

async fn serve(socket: PathBuf, listen: SocketAddr) -> Result<u8, CliError> {
    let ticket = client::console_ticket(&Endpoint::Unix(socket.clone())).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| unavailable(format!("cannot listen on {listen}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| unavailable(e.to_string()))?;
    outln!("http://{bound}/console/login?token={ticket}");
    eprintln!(
        "jig console: open the link above (it works once, for five minutes); Ctrl-C stops the console"
    );
    let hosts = [format!("{bound}"), format!("localhost:{}", bound.port())];
    let app = axum::Router::new().fallback(move |req: Request| {
        let socket = socket.clone();
        let hosts = hosts.clone();
        async move { pass(&socket, &hosts, req).await }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| unavailable(e.to_string()))?;
    Ok(0)
}

/// Pass one `/console/...` request to the daemon and its answer back. The
/// `Host` must be this listener (no other name can be rebound to it).
async fn pass(socket: &Path, hosts: &[String], req: Request) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !hosts.iter().any(|h| h == host) {
        return (StatusCode::MISDIRECTED_REQUEST, "not this console's host\n").into_response();
    }
    let path = req.uri().path();
    if path != "/console" && !path.starts_with("/console/") {
        return (StatusCode::NOT_FOUND, "only /console/ is served here\n").into_response();
    }
    let stream = match tokio::net::UnixStream::connect(socket).await {
        Ok(stream) => stream,
        Err(e) => {
            return (
                StatusCode::BAD_GATEWAY,
                format!("jig serve at {} cannot be reached: {e}\n", socket.display()),
            )
                .into_response()
        }
    };
    let (mut sender, connection) = match hyper::client::conn::http1::handshake::<_, Body>(
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    {
        Ok(pair) => pair,
        Err(e) => return (StatusCode::BAD_GATEWAY, format!("{e}\n")).into_response(),
    };
    tokio::spawn(connection);
    let (mut parts, body) = req.into_parts();
    for hop in [
        header::CONNECTION,
        header::UPGRADE,
        header::TE,
        header::TRAILER,
    ] {
        parts.headers.remove(hop);
    }
    match sender
        .send_request(hyper::Request::from_parts(parts, body))
        .await
    {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            Response::from_parts(parts, Body::new(body))
        }
        Err(e) => (StatusCode::BAD_GATEWAY, format!("{e}\n")).into_response(),
    }
}
