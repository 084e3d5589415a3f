//! Test fixture serving `https://example.org/contracts/grants-probe` 1.0.0:
//! each method uses one thing an operator may grant a WASM provider.
//!
//! - `fetch {"url"}`: a GET through `wasi:http`; the status and body, or
//!   the application error `http-error` with the `wasi:http` error code
//!   (`HttpRequestDenied` when the host's allowlist refuses the origin).
//! - `write {"name", "text"}` / `read {"name"}`: a file in the private
//!   directory the host preopens at `/data`; `read` of a missing file
//!   answers `{}`, and no `/data` at all is `UNAVAILABLE`.
//! - `allocate {"mebibytes"}`: grows memory by that much and answers the
//!   bytes touched.

use jig_provider_sdk::{serde_json::json, CallError, Channels, Config, Context, Provider, Value};

pub struct Probe;

impl Provider for Probe {
    fn contracts() -> Vec<&'static str> {
        vec![include_str!("../../contracts/probe.capability.json")]
    }

    fn call(
        _: &Context,
        method: &str,
        input: Value,
        _: &Config,
        _: &Channels,
    ) -> Result<Value, CallError> {
        let text = |field: &str| input.get(field).and_then(Value::as_str).unwrap_or_default();
        match method {
            "fetch" => fetch(text("url")),
            "write" => {
                std::fs::write(data_path(text("name"))?, text("text")).map_err(unavailable)?;
                Ok(json!({}))
            }
            "read" => match std::fs::read_to_string(data_path(text("name"))?) {
                Ok(text) => Ok(json!({ "text": text })),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && has_data_dir() => {
                    Ok(json!({}))
                }
                Err(e) => Err(unavailable(e)),
            },
            "allocate" => {
                let mib = input.get("mebibytes").and_then(Value::as_u64).unwrap_or(0);
                let block = vec![1u8; (mib as usize) << 20];
                Ok(json!(block.iter().map(|b| *b as u64).sum::<u64>()))
            }
            other => Err(CallError::unknown_method(other)),
        }
    }
}

fn has_data_dir() -> bool {
    std::fs::metadata("/data").is_ok_and(|m| m.is_dir())
}

fn data_path(name: &str) -> Result<String, CallError> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') {
        return Err(CallError::operational(
            "INVALID_INPUT",
            "name must be a plain file name",
        ));
    }
    Ok(format!("/data/{name}"))
}

fn unavailable(error: std::io::Error) -> CallError {
    CallError::operational("UNAVAILABLE", format!("/data: {error}"))
}

#[cfg(target_arch = "wasm32")]
fn fetch(url: &str) -> Result<Value, CallError> {
    use wasi::http::outgoing_handler;
    use wasi::http::types::{ErrorCode, Fields, OutgoingRequest, Scheme};
    use wasi::io::streams::StreamError;

    let http_error = |code: ErrorCode| {
        let name = match code {
            ErrorCode::HttpRequestDenied => "HttpRequestDenied".to_owned(),
            other => format!("{other:?}"),
        };
        CallError::application("http-error", json!({ "code": name }))
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| CallError::operational("INVALID_INPUT", "url has no scheme"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let request = OutgoingRequest::new(Fields::new());
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_owned()),
    };
    let invalid = |_| CallError::operational("INVALID_INPUT", "url is not valid for wasi:http");
    request.set_scheme(Some(&scheme)).map_err(invalid)?;
    request.set_authority(Some(authority)).map_err(invalid)?;
    request.set_path_with_query(Some(path)).map_err(invalid)?;
    let pending = outgoing_handler::handle(request, None).map_err(http_error)?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(http_error(code)),
        _ => {
            return Err(CallError::operational(
                "EXECUTION_FAILED",
                "the response future settled twice",
            ))
        }
    };
    let status = response.status();
    let body = response
        .consume()
        .map_err(|_| CallError::operational("EXECUTION_FAILED", "no response body"))?;
    let stream = body
        .stream()
        .map_err(|_| CallError::operational("EXECUTION_FAILED", "no body stream"))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(CallError::operational(
                    "UNAVAILABLE",
                    format!("reading the body failed: {}", e.to_debug_string()),
                ))
            }
        }
    }
    Ok(json!({ "status": status, "body": String::from_utf8_lossy(&bytes) }))
}

#[cfg(not(target_arch = "wasm32"))]
fn fetch(_: &str) -> Result<Value, CallError> {
    Err(CallError::operational(
        "UNAVAILABLE",
        "outbound HTTP exists only in the component build",
    ))
}

jig_provider_sdk::export_provider!(Probe);
