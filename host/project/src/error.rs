//! Errors of this crate. Each carries the specification's stable code; human
//! wording may change and must never be matched on.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A project capture failure: a stable diagnostic code, optionally located at
/// a project path and a JSON pointer into that file's declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectError {
    /// `PROJECT_NOT_FOUND`, `PROJECT_DECLARATION_INVALID`, `PROJECT_EVALUATION_FAILED`,
    /// `PROJECT_MEMBER_MISSING`, `PROJECT_MEMBER_COLLISION`, `PROJECT_BUSY`, `PROJECT_UNSAFE`,
    /// `PROJECT_BINDING_PACKAGE_MISSING`, `PROJECT_BINDING_SLOT_MISSING` or `PROJECT_UNAVAILABLE`.
    pub code: &'static str,
    /// Canonical project path the diagnostic is about (`jig.ts`, `bindings/intake.ts`).
    pub path: Option<String>,
    /// JSON pointer into the evaluated declaration of `path`.
    pub pointer: Option<String>,
    pub message: String,
}

impl ProjectError {
    pub(crate) fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            path: None,
            pointer: None,
            message: message.into(),
        }
    }

    /// Sets the path unless one is already known (the innermost location wins).
    pub(crate) fn at(mut self, path: &str) -> Self {
        if self.path.is_none() {
            self.path = Some(path.to_owned());
        }
        self
    }

    /// Sets the pointer unless one is already known.
    pub(crate) fn pointer(mut self, pointer: impl Into<String>) -> Self {
        if self.pointer.is_none() {
            self.pointer = Some(pointer.into());
        }
        self
    }

    /// Whether this failure belongs to the candidate (exit 1 under `INVALID_CANDIDATE`)
    /// rather than to the host or the moment (`PROJECT_BUSY`, `PROJECT_UNAVAILABLE`).
    pub fn is_candidate_invalid(&self) -> bool {
        !matches!(
            self.code,
            "PROJECT_NOT_FOUND" | "PROJECT_UNSAFE" | "PROJECT_BUSY" | "PROJECT_UNAVAILABLE"
        )
    }

    pub(crate) fn io(path: &str, error: &io::Error) -> Self {
        Self::new(
            "PROJECT_UNAVAILABLE",
            format!("cannot read {}: {error}", crate::paths::escape(path)),
        )
        .at(path)
    }
}

impl fmt::Display for ProjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(path) = &self.path {
            write!(f, " at {}", crate::paths::escape(path))?;
        }
        if let Some(pointer) = &self.pointer {
            write!(f, " pointer {}", crate::paths::escape(pointer))?;
        }
        Ok(())
    }
}

impl std::error::Error for ProjectError {}

/// A `jig init` failure.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The destination already exists (or appeared while we worked); nothing was replaced.
    #[error("the destination already exists")]
    DestinationExists(PathBuf),
    /// The project could not be created; nothing was left behind.
    #[error("the destination cannot be initialized")]
    Unavailable {
        destination: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Creation failed and so did removing our partial output. Both are kept.
    #[error("cannot create the project ({failure}); removing the partial output at {} also failed: {cleanup}", .leftover.display())]
    CleanupFailed {
        failure: Box<InitError>,
        leftover: PathBuf,
        cleanup: io::Error,
    },
}

impl InitError {
    /// The stable diagnostic code.
    pub fn code(&self) -> &'static str {
        match self {
            InitError::DestinationExists(_) => "JIG_INIT_DESTINATION_EXISTS",
            InitError::Unavailable { .. } => "JIG_INIT_UNAVAILABLE",
            InitError::CleanupFailed { .. } => "JIG_INIT_CLEANUP_FAILED",
        }
    }

    /// The documented `jig init` exit status: 1 for an existing destination, 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            InitError::DestinationExists(_) => 1,
            _ => 2,
        }
    }
}
