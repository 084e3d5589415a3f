//! The sandbox's one error type: why an envelope cannot be made, shown or
//! released here, each with its stable code ([`Error::code`]). The words
//! name what this machine lacks; no caller decides anything from them.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `UNAVAILABLE`: the contained envelope cannot be made on this machine
    /// (bubblewrap, namespaces or cgroups missing or unusable).
    #[error("{0}")]
    Unavailable(String),
    /// `UNAVAILABLE`: the minimal view of a runtime or native executable
    /// cannot be built.
    #[error("{0}")]
    View(String),
    /// `RESOURCE_EXHAUSTED`: the root's budget holds no further envelope.
    #[error(transparent)]
    Exhausted(#[from] crate::budget::Exhausted),
    /// `JIG_CLEANUP_FAILED`: an envelope's processes or cgroup could not be
    /// confirmed gone.
    #[error("{0}")]
    Cleanup(String),
}

impl Error {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Unavailable(_) | Error::View(_) => "UNAVAILABLE",
            Error::Exhausted(e) => e.code,
            Error::Cleanup(_) => "JIG_CLEANUP_FAILED",
        }
    }
}
