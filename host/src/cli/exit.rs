//! Every failure `jig` reports, and the exit status of each, decided in one
//! place ([`exit_status`], docs/src/reference.md, Exit statuses) from what failed: the variant,
//! never a code's prefix or a message's words.

use jig_engine::terminal::Status;
use jig_project::{InitError, ProjectCode, ProjectError};

/// The codes of failures the command line finds itself (its arguments,
/// files it was given, its own output).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// `JIG_USAGE`: arguments that do not form a command.
    Usage,
    /// `INVALID_REQUEST`: an argument's value is not acceptable.
    InvalidRequest,
    /// `INVALID_SETTINGS`: `--settings` is not a JSON/1 object.
    InvalidSettings,
    /// `INVALID_CANDIDATE`: a package directory that cannot be staged.
    InvalidCandidate,
    /// `INVALID_INPUT`: an instance document that is not JSON/1.
    InvalidInput,
    /// `PROJECT_NOT_FOUND`: no `jig.ts` where a project must be.
    ProjectNotFound,
    /// `JIG_RUN_TIMEOUT_INVALID`.
    TimeoutInvalid,
    /// `JIG_RUN_FILES_INVALID`: attachments or `--out` that cannot be used.
    FilesInvalid,
    /// `JIG_CONFIG_INVALID`: a host configuration that `jig config check`
    /// or a command refuses.
    ConfigInvalid,
    /// `JIG_CHANGES_DECLINED`: the person answered no.
    ChangesDeclined,
    /// `JIG_APPROVAL_REQUIRED`: changes need an answer nobody can give.
    ApprovalRequired,
    /// `SCHEMA_LIMIT_EXCEEDED`: validation ran out of its work meter.
    SchemaLimitExceeded,
    /// `PROVIDER_LOAD_FAILED`: the file is not a provider `jig` can load.
    NotAProvider,
    /// `PROVIDER_CONFIG_INVALID`: `--grants` that cannot be granted.
    GrantsInvalid,
    /// `JIG_OUTPUT_FAILED`: printing or writing the command's own output.
    OutputFailed,
    /// `JIG_COMMAND_INTERRUPTED`: SIGINT or SIGTERM while a Run was pending.
    Interrupted,
    /// `JIG_CLEANUP_FAILED`: a Run's private files or processes could not
    /// be confirmed gone (its terminal, already shown, stands).
    CleanupFailed,
    /// `JIG_DELIVERY_FAILED`: a Run's packet could not be published (its
    /// terminal, already shown, stands).
    DeliveryFailed,
    /// `UNAVAILABLE`: something this command needs is not here now.
    Unavailable,
    /// `INTERNAL`: a fault of this host.
    Internal,
}

impl Code {
    /// Every code the command line finds itself, for the Reference's test
    /// (host/tests/all/reference.rs): each is documented with its status.
    pub const ALL: [Code; 20] = [
        Code::Usage,
        Code::InvalidRequest,
        Code::InvalidSettings,
        Code::InvalidCandidate,
        Code::InvalidInput,
        Code::ProjectNotFound,
        Code::TimeoutInvalid,
        Code::FilesInvalid,
        Code::ConfigInvalid,
        Code::ChangesDeclined,
        Code::ApprovalRequired,
        Code::SchemaLimitExceeded,
        Code::NotAProvider,
        Code::GrantsInvalid,
        Code::OutputFailed,
        Code::Interrupted,
        Code::CleanupFailed,
        Code::DeliveryFailed,
        Code::Unavailable,
        Code::Internal,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Code::Usage => "JIG_USAGE",
            Code::InvalidRequest => "INVALID_REQUEST",
            Code::InvalidSettings => "INVALID_SETTINGS",
            Code::InvalidCandidate => "INVALID_CANDIDATE",
            Code::InvalidInput => "INVALID_INPUT",
            Code::ProjectNotFound => "PROJECT_NOT_FOUND",
            Code::TimeoutInvalid => "JIG_RUN_TIMEOUT_INVALID",
            Code::FilesInvalid => "JIG_RUN_FILES_INVALID",
            Code::ConfigInvalid => "JIG_CONFIG_INVALID",
            Code::ChangesDeclined => "JIG_CHANGES_DECLINED",
            Code::ApprovalRequired => "JIG_APPROVAL_REQUIRED",
            Code::SchemaLimitExceeded => "SCHEMA_LIMIT_EXCEEDED",
            Code::NotAProvider => "PROVIDER_LOAD_FAILED",
            Code::GrantsInvalid => "PROVIDER_CONFIG_INVALID",
            Code::OutputFailed => "JIG_OUTPUT_FAILED",
            Code::Interrupted => "JIG_COMMAND_INTERRUPTED",
            Code::CleanupFailed => "JIG_CLEANUP_FAILED",
            Code::DeliveryFailed => "JIG_DELIVERY_FAILED",
            Code::Unavailable => "UNAVAILABLE",
            Code::Internal => "INTERNAL",
        }
    }
}

/// A failure the CLI reports as `CODE: message` on stderr.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The engine refused or failed (planning, state, Runs, files).
    #[error(transparent)]
    Engine(#[from] jig_engine::Error),
    /// `jig serve` or `jig worker` could not start or went on failing.
    #[error(transparent)]
    Server(#[from] jig_server::Error),
    /// The project could not be captured: not a candidate at all
    /// (`PROJECT_NOT_FOUND`, `PROJECT_UNSAFE`, `PROJECT_BUSY`,
    /// `PROJECT_UNAVAILABLE`); an invalid candidate is [`Code::InvalidCandidate`].
    #[error("{}", .0.message)]
    Project(ProjectError),
    /// `INVALID_CANDIDATE`: the project was captured, and its definition
    /// is invalid where the diagnostic says.
    #[error(
        "the project definition is invalid; {}",
        jig_engine::plan::locate(.0.code.as_str(), .0.path.as_deref(), .0.pointer.as_deref())
    )]
    Candidate(ProjectError),
    /// `jig init` could not create the project.
    #[error(transparent)]
    Init(#[from] InitError),
    /// A package, descriptor, schema or provider file given to an author
    /// command is invalid: its own code (`PACKAGE_…`, `CONTRACT_…`,
    /// `SCHEMA_…`, `METADATA_…`, `PROVIDER_…`).
    #[error("{message}")]
    Artifact { code: &'static str, message: String },
    /// Such a file could not be read (`PACKAGE_IO`, `PROVIDER_…`): its code.
    #[error("{message}")]
    ArtifactUnreadable { code: &'static str, message: String },
    /// The code another party answered with: the daemon's HTTP refusal or a
    /// provider's operational error, as it arrived on the wire.
    #[error("{message}")]
    Answered { code: String, message: String },
    /// A failure the command line finds itself.
    #[error("{message}")]
    Command { code: Code, message: String },
}

impl CliError {
    /// A failure the command line finds itself.
    pub fn new(code: Code, message: impl Into<String>) -> CliError {
        CliError::Command {
            code,
            message: message.into(),
        }
    }

    /// The stable code.
    pub fn code(&self) -> &str {
        match self {
            CliError::Engine(e) => e.code(),
            CliError::Server(e) => e.code(),
            CliError::Project(e) => e.code.as_str(),
            CliError::Candidate(_) => Code::InvalidCandidate.as_str(),
            CliError::Init(e) => e.code(),
            CliError::Artifact { code, .. } | CliError::ArtifactUnreadable { code, .. } => code,
            CliError::Answered { code, .. } => code,
            CliError::Command { code, .. } => code.as_str(),
        }
    }

    /// Add a project location to the message.
    pub fn with_location(self, at: &str) -> CliError {
        let code = self.code().to_string();
        let message = format!("{self} (at {at})");
        match self {
            CliError::Command { code, .. } => CliError::Command { code, message },
            _ => CliError::Answered { code, message },
        }
    }

    /// Each diagnostic's own explanation, for a person on a terminal: the
    /// redirected form ([`std::fmt::Display`]) names only where they are.
    pub fn details(&self) -> Vec<String> {
        let located = |code: &str, path: Option<&str>, pointer: Option<&str>, message: &str| {
            format!(
                "{}: {message}",
                jig_engine::plan::locate(code, path, pointer)
            )
        };
        match self {
            CliError::Engine(jig_engine::Error::Plan(e)) => e
                .diagnostics()
                .iter()
                .map(|d| located(&d.code, d.path.as_deref(), d.pointer.as_deref(), &d.message))
                .collect(),
            CliError::Candidate(e) => vec![located(
                e.code.as_str(),
                e.path.as_deref(),
                e.pointer.as_deref(),
                &e.message,
            )],
            _ => Vec::new(),
        }
    }

    /// The documented exit status.
    pub fn exit_code(&self) -> u8 {
        exit_status(self)
    }
}

jig_engine::from_engine_errors!(CliError);

/// The command was interrupted (its Run's record keeps the terminal).
pub fn interrupted_error() -> CliError {
    CliError::new(Code::Interrupted, "the command was interrupted")
}

/// A packet that could not be published, after its terminal was shown.
pub fn delivery_error(e: &jig_engine::files::FilesError) -> CliError {
    CliError::new(
        Code::DeliveryFailed,
        format!("{} ({})", e.message, e.code()),
    )
}

/// The exit status of every failure: 1 when the request was refused or
/// declined and the caller can fix it; 2 when it was not the request's
/// fault (busy, unavailable, interrupted, lost, internal).
pub fn exit_status(e: &CliError) -> u8 {
    use jig_server::Error as Server;
    match e {
        CliError::Engine(e) => engine_status(e),
        CliError::Server(e) => match e {
            Server::Engine(e) | Server::Project { source: e, .. } => engine_status(e),
            Server::RequestInvalid(_)
            | Server::BodyTooLarge(_)
            | Server::FilesTooLarge(_)
            | Server::ProjectNotFound(_)
            | Server::Conflict(_)
            | Server::RunNotFound(_)
            | Server::InputNotRetained(_)
            | Server::Unauthenticated(_)
            | Server::CsrfInvalid(_)
            | Server::TokenWeak(_)
            | Server::TokenExists(_)
            | Server::Config(_) => 1,
            Server::Busy(_)
            | Server::BodyTimeout(_)
            | Server::Throttled { .. }
            | Server::Closed
            | Server::Exhausted(_)
            | Server::PacketNotFound(_)
            | Server::NotPublished(_)
            | Server::Delivery(_)
            | Server::Unavailable(_)
            | Server::Database(_)
            | Server::DatabaseUrl(_)
            | Server::SchemaNewer(_)
            | Server::BlobMismatch(_)
            | Server::Internal(_) => 2,
        },
        CliError::Project(e) => match e.code {
            ProjectCode::NotFound | ProjectCode::Unsafe => 1,
            ProjectCode::Busy | ProjectCode::Unavailable => 2,
            // A captured candidate that is invalid is `Candidate`; these
            // codes reach here only if a caller wraps one as `Project`.
            ProjectCode::DeclarationInvalid
            | ProjectCode::EvaluationFailed
            | ProjectCode::MemberMissing
            | ProjectCode::MemberCollision
            | ProjectCode::BindingPackageMissing
            | ProjectCode::BindingSlotMissing => 1,
        },
        CliError::Candidate(_) => 1,
        CliError::Init(InitError::DestinationExists(_)) => 1,
        CliError::Init(_) => 2,
        CliError::Artifact { .. } => 1,
        CliError::ArtifactUnreadable { .. } => 2,
        CliError::Answered { code, .. } => answered_status(code),
        CliError::Command { code, .. } => match code {
            Code::InvalidRequest
            | Code::InvalidSettings
            | Code::InvalidCandidate
            | Code::InvalidInput
            | Code::ProjectNotFound
            | Code::TimeoutInvalid
            | Code::FilesInvalid
            | Code::ConfigInvalid
            | Code::ChangesDeclined
            | Code::SchemaLimitExceeded
            | Code::NotAProvider
            | Code::GrantsInvalid => 1,
            Code::Usage
            | Code::ApprovalRequired
            | Code::OutputFailed
            | Code::Interrupted
            | Code::CleanupFailed
            | Code::DeliveryFailed
            | Code::Unavailable
            | Code::Internal => 2,
        },
    }
}

/// [`exit_status`] of the engine's failures.
fn engine_status(e: &jig_engine::Error) -> u8 {
    use jig_engine::files::FilesErrorKind;
    use jig_engine::plan::PlanError;
    use jig_engine::state::{RunsError, StateError};
    use jig_engine::Error as Engine;
    match e {
        Engine::Files(e) => match e.kind {
            FilesErrorKind::Delivery => 2,
            FilesErrorKind::Invalid
            | FilesErrorKind::OutputInvalid
            | FilesErrorKind::OutputExists => 1,
        },
        Engine::Config(_)
        | Engine::Plan(PlanError::Invalid(_))
        | Engine::TargetMalformed
        | Engine::TargetNotAdmitted { .. }
        | Engine::TimeoutInvalid
        | Engine::KeyInvalid { .. }
        | Engine::InputTooLarge { .. }
        | Engine::InputInvalid(_)
        | Engine::PackageMissing { .. }
        | Engine::Runs(RunsError::Conflict | RunsError::NotFound(_)) => 1,
        Engine::State(e) | Engine::Runs(RunsError::State(e)) => match e {
            StateError::Invalid { .. }
            | StateError::Unsafe { .. }
            | StateError::StalePlan { .. }
            | StateError::PlanNotFound { .. } => 1,
            StateError::Busy { .. } | StateError::Io { .. } | StateError::Unwritable { .. } => 2,
        },
        Engine::Plan(PlanError::Unavailable(_))
        | Engine::Receive(_)
        | Engine::AdmissionMissing
        | Engine::NotRecorded { .. }
        | Engine::Envelope(_) => 2,
    }
}

/// [`exit_status`] of a code another party answered with (the daemon's
/// refusals, a provider's operational errors): the codes that mean the
/// request was at fault, exactly; anything else was not.
fn answered_status(code: &str) -> u8 {
    if REQUEST_FAULT_CODES.contains(&code) {
        1
    } else {
        2
    }
}

/// The codes another party may answer with that mean the request was at
/// fault (exit status 1); every other answered code exits 2.
pub const REQUEST_FAULT_CODES: [&str; 20] = [
    "INVALID_REQUEST",
    "INVALID_INPUT",
    "PROJECT_NOT_FOUND",
    "PROJECT_UNSAFE",
    "PROJECT_STATE_INVALID",
    "INVALID_CANDIDATE",
    "LOCK_MISMATCH",
    "PLAN_NOT_FOUND",
    "STALE_PLAN",
    "JIG_RUN_TARGET_INVALID",
    "JIG_RUN_INPUT_INVALID",
    "JIG_RUN_FILES_INVALID",
    "JIG_RUN_TIMEOUT_INVALID",
    "JIG_OUTPUT_INVALID",
    "JIG_OUTPUT_EXISTS",
    "SUBMISSION_CONFLICT",
    "RUN_NOT_FOUND",
    "JIG_CONFIG_INVALID",
    "JIG_TOKEN_WEAK",
    "INVALID_SETTINGS",
];

/// A shown Run's exit status: its execution's ([`run_exit_code`]), unless
/// its packet was not delivered, which is 2 as [`Code::DeliveryFailed`].
pub fn shown_exit_code(terminal: &serde_json::Value, status: u8) -> u8 {
    match terminal
        .pointer("/delivery/status")
        .and_then(serde_json::Value::as_str)
    {
        Some("written") | None => status,
        Some(_) => exit_status(&CliError::new(Code::DeliveryFailed, "")),
    }
}

/// `jig run`'s status from the printed terminal's: 0 succeeded, 1 failed,
/// 2 lost or still pending.
pub fn run_exit_code(status: Status) -> u8 {
    match status {
        Status::Succeeded => 0,
        Status::Failed => 1,
        Status::Lost | Status::Pending => 2,
    }
}
