//! The values an Agent endpoint is made of (docs/src/agents.md): the wire API,
//! where the key is, the key, the model and the base URL, each with its
//! rule, and [`EndpointError`], why a configuration is refused. A native
//! ACP client's credentials keep the same rules, so `endpoint` and `acp`
//! (and the worker, for a key file's content) read them from here.

use std::path::PathBuf;

/// The largest key, in bytes (docs/src/agents.md).
pub const MAX_KEY_BYTES: usize = 16384;
/// The longest base URL, in characters (docs/src/agents.md).
pub const MAX_BASE_URL_CHARS: usize = 4096;
/// The longest model name: one leading alphanumeric plus up to 255 more
/// (`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}$`).
pub const MAX_MODEL_CHARS: usize = 256;

/// The wire shape of the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST {base}/responses` with `store: false` (the default).
    Responses,
    /// `POST {base}/chat/completions`.
    ChatCompletions,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Responses => "responses",
            Api::ChatCompletions => "chat-completions",
        }
    }

    pub fn parse(text: &str) -> Option<Api> {
        match text {
            "responses" => Some(Api::Responses),
            "chat-completions" => Some(Api::ChatCompletions),
            _ => None,
        }
    }

    /// The path below the base URL a request goes to.
    pub fn path(self) -> &'static str {
        match self {
            Api::Responses => "/responses",
            Api::ChatCompletions => "/chat/completions",
        }
    }
}

/// Where the worker finds the key. `Debug` never shows an environment key.
#[derive(Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The value of `OPENAI_API_KEY` / `OPENROUTER_API_KEY`, already
    /// validated; handed to the worker on its standard input.
    Env(String),
    /// The `[agent]` table's `api-key-file`: shown read-only to the worker,
    /// which reads and validates it. The host only checks its metadata.
    File(PathBuf),
}

impl std::fmt::Debug for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Env(_) => f.write_str("Env(<redacted>)"),
            KeySource::File(path) => f.debug_tuple("File").field(path).finish(),
        }
    }
}

/// Why there is no usable endpoint. The messages name variables and rules,
/// never a value (a misplaced key must not be echoed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("no Agent endpoint is configured: set OPENAI_API_KEY and OPENAI_MODEL (or OPENROUTER_API_KEY and OPENROUTER_MODEL), or the [agent] table of host.toml")]
    Missing,
    #[error("{0} is required")]
    Required(&'static str),
    #[error("{0} is invalid: {1}")]
    Invalid(&'static str, &'static str),
    #[error("OPENROUTER_* and OPENAI_* are both set; choose one endpoint")]
    Mixed,
    #[error("the [agent] table of host.toml is incomplete ({0} is missing) and Agent environment variables are set; the table never borrows from the environment: complete the table or remove it")]
    Ambiguous(&'static str),
    #[error("JIG_AGENT_CLIENT is set but the [agent] table of host.toml configures the API client; remove one")]
    ClientWithTable,
}

/// A key: non-blank, at most [`MAX_KEY_BYTES`], no NUL. The worker applies
/// the same rule to a key file's content.
pub fn check_key(name: &'static str, key: &str) -> Result<String, EndpointError> {
    if key.trim().is_empty() {
        return Err(EndpointError::Invalid(name, "it is blank"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(EndpointError::Invalid(
            name,
            "it is longer than 16384 bytes",
        ));
    }
    if key.contains('\0') {
        return Err(EndpointError::Invalid(name, "it contains NUL"));
    }
    Ok(key.to_string())
}

/// `^[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}$`
pub fn check_model(name: &'static str, model: &str) -> Result<String, EndpointError> {
    let mut chars = model.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || "._:/-".contains(c));
    if !first_ok || !rest_ok {
        return Err(EndpointError::Invalid(
            name,
            "it must match ^[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}$",
        ));
    }
    if model.len() > MAX_MODEL_CHARS {
        return Err(EndpointError::Invalid(
            name,
            "it is longer than 256 characters",
        ));
    }
    Ok(model.to_string())
}

/// An absolute `https://` URL (or `http://` to a loopback host, for local
/// inference servers), at most [`MAX_BASE_URL_CHARS`], with no userinfo,
/// query or fragment. Returned without a trailing `/`.
pub fn check_base_url(name: &'static str, text: &str) -> Result<String, EndpointError> {
    if text.chars().count() > MAX_BASE_URL_CHARS {
        return Err(EndpointError::Invalid(
            name,
            "it is longer than 4096 characters",
        ));
    }
    let url = reqwest::Url::parse(text)
        .map_err(|_| EndpointError::Invalid(name, "it is not an absolute URL"))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        "http" => {
            return Err(EndpointError::Invalid(
                name,
                "http:// is accepted only for a loopback host (127.0.0.0/8, ::1, localhost); use https://",
            ))
        }
        _ => return Err(EndpointError::Invalid(name, "it must be an https:// URL")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EndpointError::Invalid(name, "it must not carry userinfo"));
    }
    if url.query().is_some() || text.contains('?') {
        return Err(EndpointError::Invalid(name, "it must not carry a query"));
    }
    if url.fragment().is_some() || text.contains('#') {
        return Err(EndpointError::Invalid(name, "it must not carry a fragment"));
    }
    if url.host().is_none() {
        return Err(EndpointError::Invalid(name, "it has no host"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}
