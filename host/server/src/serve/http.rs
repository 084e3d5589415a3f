//! What the API and the console answer alike: the HTTP status of every
//! failure, the bound of a Run list, the content type of a tar body.

use crate::Error;

/// `GET .../runs` lists at most this many records (newest first).
pub const MAX_LIST: usize = 1000;
/// The content type of a file Run submission.
pub const TAR_TYPE: &str = "application/x-tar";

/// The HTTP status of every failure the API and the console answer, decided here and
/// only here, from what failed (never from the code's text).
pub fn status(e: &Error) -> u16 {
    use jig_engine::files::FilesErrorKind;
    use jig_engine::state::{RunsError, StateError};
    use jig_engine::Error as Engine;
    match e {
        Error::Engine(e) => match e {
            Engine::TargetMalformed
            | Engine::TimeoutInvalid
            | Engine::KeyInvalid { .. }
            | Engine::Receive(_) => 400,
            Engine::Files(e) => match e.kind {
                FilesErrorKind::Delivery => 500,
                FilesErrorKind::Invalid
                | FilesErrorKind::OutputInvalid
                | FilesErrorKind::OutputExists => 400,
            },
            Engine::TargetNotAdmitted { .. } | Engine::Runs(RunsError::NotFound(_)) => 404,
            Engine::AdmissionMissing | Engine::Runs(RunsError::Conflict) => 409,
            Engine::Envelope(_) | Engine::Plan(_) => 503,
            // Nothing was kept: try again once the host can write.
            Engine::State(StateError::Unwritable { .. })
            | Engine::Runs(RunsError::State(StateError::Unwritable { .. })) => 503,
            Engine::Config(_)
            | Engine::State(_)
            | Engine::Runs(RunsError::State(_))
            | Engine::PackageMissing { .. }
            | Engine::NotRecorded { .. } => 500,
        },
        Error::RequestInvalid(_) => 400,
        Error::BodyTooLarge(_) | Error::FilesTooLarge(_) => 413,
        Error::BodyTimeout(_) => 408,
        Error::Unauthenticated(_) => 401,
        Error::CsrfInvalid(_) => 403,
        Error::ProjectNotFound(_)
        | Error::RunNotFound(_)
        | Error::PacketNotFound(_)
        | Error::InputNotRetained(_) => 404,
        Error::Conflict(_) => 409,
        Error::Exhausted(_) | Error::Throttled { .. } => 429,
        Error::Closed
        | Error::Busy(_)
        | Error::NotPublished(_)
        | Error::Unavailable(_)
        | Error::Database(_) => 503,
        Error::Project { .. }
        | Error::Config(_)
        | Error::TokenWeak(_)
        | Error::TokenExists(_)
        | Error::DatabaseUrl(_)
        | Error::SchemaNewer(_)
        | Error::BlobMismatch(_)
        | Error::Delivery(_)
        | Error::Internal(_) => 500,
    }
}
