//! What the API and the console answer alike: the HTTP status of every
//! failure, what a client is told of it and the headers it carries, how a
//! body is read, the bound of a Run list, the content type of a tar body.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, HeaderValue};

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
            | Engine::InputInvalid(_)
            | Engine::Receive(_) => 400,
            Engine::InputTooLarge { .. } => 413,
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

/// What a client is told of a failure: its own message, except where that
/// message is the host's own business: a fault of this host (500: it may
/// name a host path) and an unreachable database (its server's own text).
/// Those are written whole to the daemon's stderr under a reference, and
/// the client is told the reference.
pub fn public_message(e: &Error) -> String {
    static REFERENCE: AtomicU64 = AtomicU64::new(1);
    let database = matches!(e, Error::Database(_));
    if !database && status(e) != 500 {
        return e.to_string();
    }
    let reference = REFERENCE.fetch_add(1, Ordering::Relaxed);
    eprintln!("jig serve: ref {reference}: {}: {e}", e.code());
    match database {
        true => format!("the database is unavailable (ref {reference} in the daemon's log)"),
        false => format!(
            "the daemon could not complete the request (ref {reference} in the daemon's log)"
        ),
    }
}

/// The headers a refusal carries beside its body: how to authenticate,
/// when to try again, and that a body refused unread ends the connection.
pub fn challenge(refusal: &Error, headers: &mut HeaderMap) {
    match refusal {
        Error::Unauthenticated(_) => {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        Error::Throttled { retry_after, .. } => {
            let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        Error::BodyTooLarge(_) | Error::BodyTimeout(_) => {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        _ => {}
    }
}

/// A body read whole, at most `limit` bytes: past it `too_large`; cut off
/// by the body timeout, `JIG_REQUEST_TIMEOUT`.
pub async fn read_body(
    body: Body,
    limit: usize,
    too_large: impl FnOnce() -> Error,
) -> Result<Bytes, Error> {
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|e| super::listen::timed_out(&e).unwrap_or_else(too_large))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_fault_and_the_database_text_stay_in_the_log() {
        let internal = Error::Internal("cannot read /srv/p/.jig/runs/x.json".into());
        let told = public_message(&internal);
        assert!(!told.contains("/srv"), "{told}");
        assert!(told.contains("ref "), "{told}");
        let database = Error::Database("db error: FATAL: role \"jig\" does not exist".into());
        let told = public_message(&database);
        assert!(!told.contains("role"), "{told}");
        assert!(told.starts_with("the database is unavailable"), "{told}");
        // A refusal meant for the client keeps its words.
        let refused = Error::RunNotFound("run-1".into());
        assert_eq!(public_message(&refused), refused.to_string());
    }
}
