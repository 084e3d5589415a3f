//! What a failed Run's terminal says went wrong, typed: a code of
//! Run/1's registry, one of the few the executor spells itself, or the code
//! of a typed refusal raised on the way (each error type's `code()` is the
//! registry of its own). The guide's Reference lists every spelling; the
//! terminal carries [`FailureCode::as_str`] unchanged.

use std::fmt;

use flow::wire::ErrorCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureCode {
    /// A code of Run/1's registry (wire-visible or local-only).
    Run(ErrorCode),
    /// A failure of the executor's own (seed 002 §12).
    Host(HostCode),
    /// A refusal raised by one of the host's typed errors, in that error's
    /// own spelling. Made only by [`FailureCode::raised`], so a registry
    /// code raised this way is still [`FailureCode::Run`].
    Raised(&'static str),
}

/// The host codes a terminal carries that no error type raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostCode {
    /// The admitted generation's execution identity no longer matches this
    /// host: the target must be reviewed again.
    ReviewRequired,
    /// The project's admitted state cannot be read or is inconsistent.
    ProjectStateInvalid,
    /// The envelope of a finished component could not be removed.
    CleanupFailed,
    /// The Run's coordinator ended before it settled (seed 002 §8).
    CoordinatorLost,
}

impl HostCode {
    pub const ALL: [HostCode; 4] = [
        HostCode::ReviewRequired,
        HostCode::ProjectStateInvalid,
        HostCode::CleanupFailed,
        HostCode::CoordinatorLost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HostCode::ReviewRequired => "REVIEW_REQUIRED",
            HostCode::ProjectStateInvalid => "PROJECT_STATE_INVALID",
            HostCode::CleanupFailed => "JIG_CLEANUP_FAILED",
            HostCode::CoordinatorLost => "COORDINATOR_LOST",
        }
    }
}

impl FailureCode {
    /// The code of a typed refusal: a registry spelling becomes its
    /// [`ErrorCode`], any other stays the error's own.
    pub fn raised(code: &'static str) -> FailureCode {
        match ErrorCode::parse(code) {
            Some(code) => FailureCode::Run(code),
            None => FailureCode::Raised(code),
        }
    }

    /// The spelling a terminal carries.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::Run(code) => code.as_str(),
            FailureCode::Host(code) => code.as_str(),
            FailureCode::Raised(code) => code,
        }
    }

    /// The registry code a parent may see on the wire, if this is one.
    pub fn wire(self) -> Option<ErrorCode> {
        match self {
            FailureCode::Run(code) if code.is_wire() => Some(code),
            _ => None,
        }
    }

    /// A Run stopped from outside (cancelled, or its deadline passed).
    pub(crate) fn is_stop(self) -> bool {
        matches!(
            self,
            FailureCode::Run(ErrorCode::Cancelled | ErrorCode::DeadlineExceeded)
        )
    }
}

impl From<ErrorCode> for FailureCode {
    fn from(code: ErrorCode) -> FailureCode {
        FailureCode::Run(code)
    }
}

impl From<HostCode> for FailureCode {
    fn from(code: HostCode) -> FailureCode {
        FailureCode::Host(code)
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_registry_code_is_the_registry_code() {
        assert_eq!(
            FailureCode::raised("INVALID_INPUT"),
            FailureCode::Run(ErrorCode::InvalidInput)
        );
        assert_eq!(
            FailureCode::raised("JIG_RUN_FILES_INVALID"),
            FailureCode::Raised("JIG_RUN_FILES_INVALID")
        );
    }

    #[test]
    fn only_wire_registry_codes_reach_a_parent() {
        assert_eq!(
            FailureCode::Run(ErrorCode::Unavailable).wire(),
            Some(ErrorCode::Unavailable)
        );
        assert_eq!(FailureCode::Run(ErrorCode::ProtocolError).wire(), None);
        assert_eq!(FailureCode::Host(HostCode::CleanupFailed).wire(), None);
        assert_eq!(FailureCode::raised("JIG_OUTPUT_INVALID").wire(), None);
    }

    #[test]
    fn stops_are_cancellation_and_the_deadline() {
        assert!(FailureCode::Run(ErrorCode::Cancelled).is_stop());
        assert!(FailureCode::Run(ErrorCode::DeadlineExceeded).is_stop());
        assert!(!FailureCode::Run(ErrorCode::Unavailable).is_stop());
        assert!(!FailureCode::Host(HostCode::ProjectStateInvalid).is_stop());
    }
}
