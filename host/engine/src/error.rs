//! The engine's one error type: every failure a door can meet on the way
//! to a Run, each with the specification's stable code ([`Error::code`]).
//!
//! A door decides what a failure means to its caller (an exit status, an
//! HTTP status) from the variant, in one function of its own; it never
//! reads the code's text or the message's words to decide.

use crate::config::ConfigError;
use crate::files::FilesError;
use crate::plan::PlanError;
use crate::state::{RunsError, StateError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The host configuration cannot be read or is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The project's protected state: busy, unsafe, invalid or unreadable.
    #[error(transparent)]
    State(#[from] StateError),
    /// The Run records: a key reused with other content, a Run not found.
    #[error(transparent)]
    Runs(#[from] RunsError),
    /// Planning: an invalid candidate, or a target this host cannot run.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A file Run's attachments or destination.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// A `--receive` list the target cannot serve.
    #[error(transparent)]
    Receive(#[from] ReceiveError),
    /// `JIG_RUN_TARGET_INVALID`: not `flow:<path>` or `binding:<id>`.
    #[error("the target must be flow:<path> or binding:<id>")]
    TargetMalformed,
    /// `JIG_RUN_TARGET_INVALID`: well formed, but not an admitted target.
    #[error("{target} is not an admitted target; admitted: {admitted}")]
    TargetNotAdmitted { target: String, admitted: String },
    /// `JIG_RUN_TIMEOUT_INVALID`.
    #[error("--timeout must be a positive integer followed by ms, s, m, or h, up to 24h")]
    TimeoutInvalid,
    /// `INVALID_REQUEST`: an idempotency key of the wrong length (at most
    /// `max` bytes).
    #[error("--key must be 1 to {max} bytes, without control characters")]
    KeyInvalid { max: usize },
    /// `JIG_RUN_INPUT_INVALID`: the input (with the target's settings) would
    /// not fit the one Run/1 frame that carries it to the component.
    #[error(
        "the input is {bytes} bytes; with this target's settings at most {max} fit the Run/1 \
         frame that carries it"
    )]
    InputTooLarge { bytes: usize, max: usize },
    /// `JIG_RUN_INPUT_INVALID`: `--input` is not JSON/1, or its file
    /// cannot be read as one (the message names no host path).
    #[error("{0}")]
    InputInvalid(&'static str),
    /// `ADMISSION_MISSING`: nothing was ever admitted.
    #[error("the project has no usable reviewed revision; complete jig review before running")]
    AdmissionMissing,
    /// `PROJECT_STATE_INVALID`: an admitted target whose package the
    /// admitted generation does not name.
    #[error("{target} has no admitted package")]
    PackageMissing { target: String },
    /// The Run's record could not be made durable; it never ran. `code` is
    /// the cause's own ([`RunsError::code`]).
    #[error("the Run could not be recorded: {message}")]
    NotRecorded { code: &'static str, message: String },
    /// The execution envelope cannot be made here (its own code).
    #[error(transparent)]
    Envelope(#[from] jig_sandbox::Error),
}

impl Error {
    /// The stable code (seed 002 §12; docs/src/reference.md lists them).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Config(e) => e.code(),
            Error::State(e) => e.code(),
            Error::Runs(e) => e.code(),
            Error::Plan(e) => e.code(),
            Error::Files(e) => e.code(),
            Error::Receive(e) => e.code(),
            Error::TargetMalformed | Error::TargetNotAdmitted { .. } => "JIG_RUN_TARGET_INVALID",
            Error::TimeoutInvalid => "JIG_RUN_TIMEOUT_INVALID",
            Error::KeyInvalid { .. } => "INVALID_REQUEST",
            Error::InputTooLarge { .. } | Error::InputInvalid(_) => "JIG_RUN_INPUT_INVALID",
            Error::AdmissionMissing => "ADMISSION_MISSING",
            Error::PackageMissing { .. } => "PROJECT_STATE_INVALID",
            Error::NotRecorded { code, .. } => code,
            Error::Envelope(e) => e.code(),
        }
    }
}

/// `From` each of the engine's module errors for a door's error type
/// whose `Engine` variant holds an [`Error`], so `?` carries them through
/// the engine's own error.
#[macro_export]
macro_rules! from_engine_errors {
    ($door:ident) => {
        $crate::from_engine_errors!(
            $door: $crate::config::ConfigError,
            $crate::state::StateError,
            $crate::state::RunsError,
            $crate::plan::PlanError,
            $crate::files::FilesError,
            $crate::error::ReceiveError
        );
    };
    ($door:ident: $($error:ty),+) => {
        $(impl From<$error> for $door {
            fn from(e: $error) -> $door {
                $door::Engine(e.into())
            }
        })+
    };
}

/// A `--receive` list the target cannot serve: a usage error (`JIG_USAGE`),
/// found before anything runs.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ReceiveError {
    pub message: String,
}

impl ReceiveError {
    pub(crate) fn usage(message: String) -> ReceiveError {
        ReceiveError { message }
    }

    /// The stable code: a `--receive` list is part of the command line.
    pub fn code(&self) -> &'static str {
        "JIG_USAGE"
    }
}
