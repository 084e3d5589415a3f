//! The server's one error type: what the HTTP door, the queue and the
//! worker can meet, each with the specification's stable code
//! ([`Error::code`]). Decisions about a Run are the engine's and arrive as
//! [`Error::Engine`]; the HTTP status of every variant is decided in one
//! function ([`crate::serve::http::status`]).

use crate::queue::{BLOB_MISMATCH, SCHEMA_NEWER, UNAVAILABLE, URL_INVALID};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine refused or failed the request (its own codes).
    #[error(transparent)]
    Engine(#[from] jig_engine::Error),
    /// `INVALID_REQUEST`: a body or parameter that is not what the API takes.
    #[error("{0}")]
    RequestInvalid(String),
    /// `INVALID_REQUEST`: a JSON body over the JSON/1 limit.
    #[error("{0}")]
    BodyTooLarge(String),
    /// `JIG_REQUEST_TIMEOUT`: a request body that did not arrive within the
    /// body timeout.
    #[error("{0}")]
    BodyTimeout(String),
    /// `JIG_RUN_FILES_INVALID`: a file Run body over the input budget.
    #[error("{0}")]
    FilesTooLarge(String),
    /// `PROJECT_NOT_FOUND`: a name this daemon does not serve, or a served
    /// directory without `jig.ts`.
    #[error("{0}")]
    ProjectNotFound(String),
    /// `PROJECT_BUSY`: another `jig serve` listens on the socket.
    #[error("{0}")]
    Busy(String),
    /// `PROJECT_CLOSED`: the daemon is draining and takes no new Runs.
    #[error("the daemon is shutting down and accepts no new Runs")]
    Closed,
    /// `RESOURCE_EXHAUSTED`: the daemon's or the database's bound is full.
    #[error("{0}")]
    Exhausted(String),
    /// `SUBMISSION_CONFLICT`: a key the database holds for other content.
    #[error("{0}")]
    Conflict(String),
    /// `RUN_NOT_FOUND`: no such Run in the database.
    #[error("no Run {0}")]
    RunNotFound(String),
    /// `PACKET_NOT_FOUND`: the Run delivered no packet.
    #[error("Run {0} has no delivered packet")]
    PacketNotFound(String),
    /// `JIG_INPUT_NOT_RETAINED`: the Run's input was not kept (recorded
    /// before inputs were), only its digest.
    #[error("Run {0} has no kept input, only its inputDigest")]
    InputNotRetained(String),
    /// `ADMISSION_MISSING`: the generation a queued Run names was never
    /// published to the database.
    #[error("{0}")]
    NotPublished(String),
    /// `JIG_DELIVERY_FAILED`: a delivered packet cannot be read back.
    #[error("{0}")]
    Delivery(String),
    /// `UNAVAILABLE`: a listener or the execution envelope cannot be made.
    #[error("{0}")]
    Unavailable(String),
    /// `JIG_DATABASE_UNAVAILABLE`: the database cannot be reached or failed.
    #[error("{0}")]
    Database(String),
    /// `JIG_DATABASE_URL_INVALID`.
    #[error("{0}")]
    DatabaseUrl(String),
    /// `JIG_DATABASE_SCHEMA_NEWER`: written by a newer `jig`.
    #[error("{0}")]
    SchemaNewer(String),
    /// `JIG_BLOB_DIGEST_MISMATCH`: a blob missing or not its digest.
    #[error("{0}")]
    BlobMismatch(String),
    /// A served project's state cannot be opened at start-up (its own code).
    #[error("project {name}: {source}")]
    Project {
        name: String,
        source: jig_engine::Error,
    },
    /// `JIG_CONFIG_INVALID`: the server's own configuration (the bearer
    /// token file) cannot be used.
    #[error("{0}")]
    Config(String),
    /// `UNAUTHENTICATED`: a console request without a valid session, or a
    /// sign-in with a wrong or spent token.
    #[error("{0}")]
    Unauthenticated(String),
    /// `JIG_TOKEN_WEAK`: a bearer token shorter than the rule, or in a file
    /// group or others can read.
    #[error("{0}")]
    TokenWeak(String),
    /// `JIG_OUTPUT_EXISTS`: `--new-token` names a file that exists.
    #[error("{0}")]
    TokenExists(String),
    /// `JIG_AUTH_THROTTLED`: the peer failed to authenticate too often
    /// lately; its token was not compared.
    #[error("{message}")]
    Throttled {
        message: String,
        retry_after: std::time::Duration,
    },
    /// `JIG_CONSOLE_CSRF_INVALID`: a console action without the session's
    /// CSRF token (or from another origin).
    #[error("{0}")]
    CsrfInvalid(String),
    /// `INTERNAL`: a fault of this host (a cache, a runtime, a read).
    #[error("{0}")]
    Internal(String),
}

impl Error {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Engine(e) => e.code(),
            Error::RequestInvalid(_) | Error::BodyTooLarge(_) => "INVALID_REQUEST",
            Error::BodyTimeout(_) => "JIG_REQUEST_TIMEOUT",
            Error::FilesTooLarge(_) => "JIG_RUN_FILES_INVALID",
            Error::ProjectNotFound(_) => "PROJECT_NOT_FOUND",
            Error::Busy(_) => "PROJECT_BUSY",
            Error::Closed => "PROJECT_CLOSED",
            Error::Exhausted(_) => "RESOURCE_EXHAUSTED",
            Error::Conflict(_) => "SUBMISSION_CONFLICT",
            Error::RunNotFound(_) => "RUN_NOT_FOUND",
            Error::PacketNotFound(_) => "PACKET_NOT_FOUND",
            Error::InputNotRetained(_) => "JIG_INPUT_NOT_RETAINED",
            Error::NotPublished(_) => "ADMISSION_MISSING",
            Error::Delivery(_) => "JIG_DELIVERY_FAILED",
            Error::Unavailable(_) => "UNAVAILABLE",
            Error::Database(_) => UNAVAILABLE,
            Error::DatabaseUrl(_) => URL_INVALID,
            Error::SchemaNewer(_) => SCHEMA_NEWER,
            Error::BlobMismatch(_) => BLOB_MISMATCH,
            Error::Project { source, .. } => source.code(),
            Error::Config(_) => "JIG_CONFIG_INVALID",
            Error::Unauthenticated(_) => "UNAUTHENTICATED",
            Error::CsrfInvalid(_) => "JIG_CONSOLE_CSRF_INVALID",
            Error::TokenWeak(_) => "JIG_TOKEN_WEAK",
            Error::TokenExists(_) => "JIG_OUTPUT_EXISTS",
            Error::Throttled { .. } => "JIG_AUTH_THROTTLED",
            Error::Internal(_) => "INTERNAL",
        }
    }
}

jig_engine::from_engine_errors!(Error);
