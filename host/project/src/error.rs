//! Errors of this crate. Each carries the specification's stable code; human
//! wording may change and must never be matched on.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// The stable code of a project capture failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectCode {
    /// `PROJECT_NOT_FOUND`.
    NotFound,
    /// `PROJECT_DECLARATION_INVALID`.
    DeclarationInvalid,
    /// `PROJECT_EVALUATION_FAILED`.
    EvaluationFailed,
    /// `PROJECT_MEMBER_MISSING`.
    MemberMissing,
    /// `PROJECT_MEMBER_COLLISION`.
    MemberCollision,
    /// `PROJECT_BUSY`.
    Busy,
    /// `PROJECT_UNSAFE`.
    Unsafe,
    /// `PROJECT_BINDING_PACKAGE_MISSING`.
    BindingPackageMissing,
    /// `PROJECT_BINDING_SLOT_MISSING`.
    BindingSlotMissing,
    /// `PROJECT_UNAVAILABLE`.
    Unavailable,
}

impl ProjectCode {
    pub const fn as_str(self) -> &'static str {
        match self {
            ProjectCode::NotFound => "PROJECT_NOT_FOUND",
            ProjectCode::DeclarationInvalid => "PROJECT_DECLARATION_INVALID",
            ProjectCode::EvaluationFailed => "PROJECT_EVALUATION_FAILED",
            ProjectCode::MemberMissing => "PROJECT_MEMBER_MISSING",
            ProjectCode::MemberCollision => "PROJECT_MEMBER_COLLISION",
            ProjectCode::Busy => "PROJECT_BUSY",
            ProjectCode::Unsafe => "PROJECT_UNSAFE",
            ProjectCode::BindingPackageMissing => "PROJECT_BINDING_PACKAGE_MISSING",
            ProjectCode::BindingSlotMissing => "PROJECT_BINDING_SLOT_MISSING",
            ProjectCode::Unavailable => "PROJECT_UNAVAILABLE",
        }
    }
}

impl fmt::Display for ProjectCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tests and callers may compare a code with its text.
impl PartialEq<&str> for ProjectCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A project capture failure: a stable diagnostic code, optionally located at
/// a project path and a JSON pointer into that file's declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectError {
    pub code: ProjectCode,
    /// Canonical project path the diagnostic is about (`jig.ts`, `bindings/intake.ts`).
    pub path: Option<String>,
    /// JSON pointer into the evaluated declaration of `path`.
    pub pointer: Option<String>,
    pub message: String,
}

impl ProjectError {
    pub(crate) fn new(code: ProjectCode, message: impl Into<String>) -> Self {
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
            ProjectCode::NotFound
                | ProjectCode::Unsafe
                | ProjectCode::Busy
                | ProjectCode::Unavailable
        )
    }

    pub(crate) fn io(path: &str, error: &io::Error) -> Self {
        Self::new(
            ProjectCode::Unavailable,
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
