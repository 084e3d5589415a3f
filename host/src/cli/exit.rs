//! Every exit status `jig` uses, decided in one place (HOST-FACTS §5).

/// A failure the CLI reports as `CODE: message` on stderr.
#[derive(Debug)]
pub struct CliError {
    pub code: String,
    pub message: String,
}

impl CliError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> CliError {
        CliError {
            code: code.into(),
            message: message.into(),
        }
    }

    /// Add a project location to the message.
    pub fn with_location(mut self, at: &str) -> CliError {
        self.message = format!("{} (at {at})", self.message);
        self
    }

    /// The documented exit status of this code.
    pub fn exit_code(&self) -> u8 {
        exit_code(&self.code)
    }
}

impl From<jig_engine::exec::receive::ReceiveError> for CliError {
    fn from(e: jig_engine::exec::receive::ReceiveError) -> CliError {
        CliError::new(e.code, e.message)
    }
}

pub fn exit_code(code: &str) -> u8 {
    match code {
        // Refused before any work, or declined: the caller can fix the request.
        "INVALID_REQUEST"
        | "PROJECT_NOT_FOUND"
        | "PROJECT_UNSAFE"
        | "PROJECT_STATE_INVALID"
        | "INVALID_CANDIDATE"
        | "LOCK_MISMATCH"
        | "PLAN_NOT_FOUND"
        | "STALE_PLAN"
        | "JIG_CHANGES_DECLINED"
        | "JIG_RUN_TARGET_INVALID"
        | "JIG_RUN_INPUT_INVALID"
        | "JIG_RUN_FILES_INVALID"
        | "JIG_RUN_TIMEOUT_INVALID"
        | "JIG_OUTPUT_INVALID"
        | "JIG_OUTPUT_EXISTS"
        | "SUBMISSION_CONFLICT"
        | "RUN_NOT_FOUND"
        | "JIG_INIT_DESTINATION_EXISTS"
        | "JIG_CONFIG_INVALID"
        | "INVALID_SETTINGS" => 1,
        // An invalid package, descriptor, schema or provider file given to
        // an author command.
        code if [
            "PACKAGE_",
            "PROVIDER_",
            "METADATA_",
            "SCHEMA_",
            "CONTRACT_",
            "INVALID_INPUT",
        ]
        .iter()
        .any(|prefix| code.starts_with(prefix))
            && code != "PACKAGE_IO" =>
        {
            1
        }
        // Busy, unavailable, interrupted, lost or unknown: not the request's fault.
        _ => 2,
    }
}

/// `jig run`'s status from the printed terminal.
pub fn run_exit_code(status: &str) -> u8 {
    match status {
        "succeeded" => 0,
        "failed" => 1,
        _ => 2,
    }
}
