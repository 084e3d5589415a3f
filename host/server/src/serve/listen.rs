//! The listeners: how a connection is accepted and served. TCP
//! connections count against `max-connections` (one past it is answered
//! 503 and closed as soon as it is accepted); the Unix socket's are counted
//! apart, so a TCP flood never takes the socket's turn. On both, a
//! request's head must arrive within the header timeout (which is also how
//! long an idle keep-alive connection is kept) and its body within the
//! body timeout, counted from its head. Under TLS the handshake is held to
//! the header timeout as well, and a connection past the bound is closed
//! without a word (a plain-text answer would not be TLS).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::Router;
use futures_util::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use tower_service::Service;

use crate::Error;

/// TCP connections served at once, when neither flag nor table says.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// How long a request's head may take, when neither flag nor table says.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's body may take from its head, when neither flag
/// nor table says (a file Run's tar is uploaded within it).
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// File descriptors kept for all but TCP connections: the Unix socket's
/// clients, Runs (pipes, envelopes, records), the database. `jig serve`
/// refuses a `max-connections` that leaves fewer under `RLIMIT_NOFILE`.
pub const RESERVED_DESCRIPTORS: u64 = 512;
/// After a failed accept (out of descriptors), the listener waits this
/// long before accepting again, instead of spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// What a TCP connection past the bound is told before it is closed.
const FULL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
connection: close\r\ncontent-length: 79\r\n\r\n\
{\"code\":\"RESOURCE_EXHAUSTED\",\"message\":\"too many connections; try again later\"}";

/// The bounds of a listener's connections.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// TCP connections served at once (the Unix socket has no such bound).
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
        }
    }
}

/// The TCP peer a request came from (the authentication brake's key).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub IpAddr);

/// A request body that did not arrive within the body timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {}s", .0.as_secs_f64())]
pub struct BodyTimedOut(Duration);

/// Whether reading a body failed because it timed out (anywhere in the
/// error's chain: extractors wrap what the body raised).
pub fn timed_out(error: &(dyn std::error::Error + 'static)) -> Option<Error> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(timed) = e.downcast_ref::<BodyTimedOut>() {
            return Some(Error::BodyTimeout(timed.to_string()));
        }
        cause = e.source();
    }
    None
}

/// Raise the soft descriptor limit to the hard one, then refuse a
/// `max-connections` that would leave fewer than [`RESERVED_DESCRIPTORS`].
pub fn check_descriptors(max_connections: usize) -> Result<(), Error> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| Error::Internal(format!("cannot read the descriptor limit: {e}")))?;
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let needed = max_connections as u64 + RESERVED_DESCRIPTORS;
    if needed > limit {
        return Err(Error::Config(format!(
            "max-connections {max_connections} and the {RESERVED_DESCRIPTORS} descriptors kept for \
             the Unix socket and Runs need {needed} open files, but the limit (RLIMIT_NOFILE) is \
             {limit}: lower max-connections or raise the limit (LimitNOFILE= under systemd)"
        )));
    }
    Ok(())
}

/// Serve `router` on TCP until `stop`, at most `bounds.max_connections`
/// connections at once, each through `tls` when it is given; then let
/// open connections finish their requests.
pub async fn tcp(
    listener: tokio::net::TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    bounds: Bounds,
    stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(bounds.max_connections));
    let (open, mut closed) = mpsc::channel::<()>(1);
    let mut stopping = stop.clone();
    loop {
        let (stream, address) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => { backoff(&e).await; continue }
            },
            _ = stopped(&mut stopping) => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            // Past the bound: told so at once (best effort), then closed.
            if tls.is_none() {
                let _ = stream.try_write(FULL);
            }
            continue;
        };
        let router = router.clone();
        let (stop, open, tls) = (stop.clone(), open.clone(), tls.clone());
        tokio::spawn(async move {
            let peer = Some(Peer(address.ip()));
            match tls {
                None => connection(stream, router, peer, bounds, stop).await,
                Some(tls) => {
                    let handshake = tokio::time::timeout(bounds.header_timeout, tls.accept(stream));
                    // A failed or slow handshake (a plain-HTTP client, a
                    // certificate the client refuses) just closes.
                    if let Ok(Ok(stream)) = handshake.await {
                        connection(stream, router, peer, bounds, stop).await;
                    }
                }
            }
            drop((slot, open));
        });
    }
    drop(open);
    let _ = closed.recv().await;
}

/// Serve `router` on the Unix socket until `stop`, then let open
/// connections finish their requests.
pub async fn unix(
    listener: tokio::net::UnixListener,
    router: Router,
    bounds: Bounds,
    stop: watch::Receiver<bool>,
) {
    let (open, mut closed) = mpsc::channel::<()>(1);
    let mut stopping = stop.clone();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => { backoff(&e).await; continue }
            },
            _ = stopped(&mut stopping) => break,
        };
        let router = router.clone();
        let (stop, open) = (stop.clone(), open.clone());
        tokio::spawn(async move {
            connection(stream, router, None, bounds, stop).await;
            drop(open);
        });
    }
    drop(open);
    let _ = closed.recv().await;
}

/// Once `stop` says so (its borrow is not held across an await).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// A failed accept: out of descriptors (or memory) waits a little so the
/// loop does not spin; a connection reset before it was accepted does not.
async fn backoff(error: &std::io::Error) {
    use std::io::ErrorKind;
    if !matches!(
        error.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::Interrupted
    ) {
        tokio::time::sleep(ACCEPT_BACKOFF).await;
    }
}

/// One HTTP/1.1 connection under the header and body timeouts; on `stop`
/// it finishes the request in flight and closes.
async fn connection<I>(
    io: I,
    router: Router,
    peer: Option<Peer>,
    bounds: Bounds,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
        let mut request: Request = request.map(|body| timed(Body::new(body), bounds.body_timeout));
        if let Some(peer) = peer {
            request.extensions_mut().insert(peer);
        }
        let mut router = router.clone();
        async move { router.call(request).await }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bounds.header_timeout);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stopped(&mut stop) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// `body`, failing with [`BodyTimedOut`] unless all of it arrives within
/// `within` from now.
fn timed(body: Body, within: Duration) -> Body {
    if body.is_end_stream() {
        return body;
    }
    let deadline = tokio::time::Instant::now() + within;
    let chunks =
        futures_util::stream::unfold(Some(body.into_data_stream()), move |chunks| async move {
            let mut chunks = chunks?;
            match tokio::time::timeout_at(deadline, chunks.next()).await {
                Ok(Some(chunk)) => Some((chunk.map_err(axum::BoxError::from), Some(chunks))),
                Ok(None) => None,
                Err(_) => Some((Err(BodyTimedOut(within).into()), None)),
            }
        });
    Body::from_stream(chunks)
}
