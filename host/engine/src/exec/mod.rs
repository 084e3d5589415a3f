//! Executing admitted targets: resolve a target in the admitted generation,
//! launch its component by recipe, serve it over Run/1, and classify how it
//! ended. Child Flows run through the same path with the Binding's slots;
//! capability calls go to the provider the review pinned.

mod ahead;
mod builtin;
pub mod channels;
mod invocation;
mod invoke;
mod ledger;
mod outcome;
pub mod peer;
mod provider_ports;
pub mod receive;
pub mod sdk;
mod services;
pub mod submit;
mod timeout;
pub mod wasm;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::wire::{ErrorCode, OperationalError};
use serde_json::json;
use tokio::sync::watch;

use crate::code::FailureCode;
use crate::plan::{Recipe, RecipeKind};
use crate::providers::ProviderSet;
use crate::state::Store;
pub use ahead::Ahead;
pub use invoke::ProcessLaunch;
use jig_sandbox::Sandbox;
use peer::BoxFuture;
pub(crate) use services::RootChannels;
use services::{ChannelLink, Ended, SettleInvocation};

/// Where the bundled SDKs are written below a Run's support directory, which
/// is an ancestor of every package directory of that Run.
pub(crate) const PYTHON_SUPPORT: &str = "python";
pub(crate) const JS_SUPPORT: &str = "node_modules/@jigging/flow";
/// The SDK's preloaded gate (`host/typescript/flow/gate.js`), in its tree.
pub(crate) const JS_GATE: &str = "gate.js";
/// The directory, in the Python SDK's tree, of its gate: a `sitecustomize`
/// (`host/python/jiggy/_gate/`), first on a gated Run's `PYTHONPATH`.
pub(crate) const PYTHON_GATE: &str = "jiggy/_gate";
pub(crate) const DENO_IMPORT_MAP: &str = "import_map.json";

/// Diagnostics kept from a component's stderr (the tail, lossy UTF-8).
pub(crate) const MAX_STDERR_BYTES: usize = 64 * 1024;
/// Seed 002 §8: the root permits two active sibling Flow calls.
pub(crate) const MAX_ACTIVE_CHILDREN: usize = 2;
/// How long a component may take to exit after its root response.
pub(crate) const EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long a component whose stdout ended may take to report its exit status.
pub(crate) const EXIT_AFTER_EOF: Duration = Duration::from_secs(1);

/// `flow:<path>` or `binding:<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetRef {
    Flow(String),
    Binding(String),
}

impl TargetRef {
    pub fn parse(text: &str) -> Option<TargetRef> {
        if let Some(path) = text.strip_prefix("flow:") {
            let path = path.strip_prefix("./").unwrap_or(path);
            // One trailing slash, as shell completion writes a directory,
            // names the same Flow; anything else stays the path it is.
            let path = path.strip_suffix('/').unwrap_or(path);
            return (!path.is_empty()).then(|| TargetRef::Flow(path.to_string()));
        }
        let id = text.strip_prefix("binding:")?;
        flow::wire::is_local_name(id).then(|| TargetRef::Binding(id.to_string()))
    }

    fn from_lock(value: &Value) -> Option<TargetRef> {
        match value.get("kind")?.as_str()? {
            "flow" => Some(TargetRef::Flow(value.get("path")?.as_str()?.to_string())),
            "binding" => Some(TargetRef::Binding(value.get("id")?.as_str()?.to_string())),
            _ => None,
        }
    }
}

impl std::fmt::Display for TargetRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetRef::Flow(path) => write!(f, "flow:{path}"),
            TargetRef::Binding(id) => write!(f, "binding:{id}"),
        }
    }
}

pub use crate::terminal::Diagnostics;

#[derive(Debug, Clone)]
pub struct Success {
    pub outcome: String,
    pub output: Value,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub code: FailureCode,
    pub message: String,
    pub details: Option<Value>,
    pub diagnostics: Diagnostics,
}

impl Failure {
    pub fn new(code: impl Into<FailureCode>, message: impl Into<String>) -> Failure {
        Failure {
            code: code.into(),
            message: message.into(),
            details: None,
            diagnostics: Diagnostics::default(),
        }
    }

    fn with_details(mut self, details: Value) -> Failure {
        self.details = Some(details);
        self
    }

    /// The same failure as a parent sees it on the wire: local-only and
    /// host-only codes become `EXECUTION_FAILED`, keeping the original.
    fn to_operational(&self) -> OperationalError {
        match self.code.wire() {
            Some(code) => OperationalError {
                code,
                message: self.message.clone(),
                details: self.details.clone(),
            },
            None => OperationalError {
                code: ErrorCode::ExecutionFailed,
                message: self.message.clone(),
                details: Some(json!({ "code": self.code.as_str() })),
            },
        }
    }
}

/// One execution request.
pub struct Invocation {
    pub target: TargetRef,
    pub input: Value,
    pub deadline_unix_ms: u64,
    pub cancel: watch::Receiver<bool>,
    /// The root Run's attachments (children always get none).
    pub attachments: Vec<AttachmentGrant>,
    /// The root Run's identity and checkpoint, for Run Checkpoint (a root
    /// delivered with `--out` only; children always get none).
    pub run: Option<Arc<RootRun>>,
}

pub use builtin::checkpoint::RootRun;

/// One attachment a root Run is given: a private host directory of sealed
/// read-only captured bytes, or the empty writable attachment. The
/// writable one is a bounded tmpfs the envelope creates at `host` (as the
/// Run sees it); its directory descriptor is put into `output` once the
/// Run is fenced, which is how delivery reads it.
#[derive(Debug, Clone)]
pub struct AttachmentGrant {
    pub name: String,
    pub host: PathBuf,
    pub writable: bool,
    pub output: Option<crate::files::Handoff>,
}

impl AttachmentGrant {
    fn access(&self) -> flow::wire::Access {
        if self.writable {
            flow::wire::Access::ReadWrite
        } else {
            flow::wire::Access::Read
        }
    }
}

/// A target resolved against the admitted generation.
struct Resolved {
    digest: String,
    settings: Value,
    slots: BTreeMap<String, TargetRef>,
    recipe: Recipe,
    providers: Value,
    /// The target's own reviewed Project Command policy (a Binding's
    /// `commands`); never inherited, so a `flow:` target has none.
    commands: Option<Value>,
    /// The target runs its prepared package (source plus dependencies).
    prepared: bool,
    /// The digest of the prepared package's workspace layout, if any.
    layout: Option<String>,
}

pub struct Executor {
    store: Store,
    work_root: PathBuf,
    plan: Value,
    providers: Arc<ProviderSet>,
    sandbox: Arc<dyn Sandbox>,
    /// The bound of each private writable space of a Flow.
    scratch_bytes: u64,
    support: PathBuf,
    counter: AtomicU64,
    /// The root's aggregate payload budget (seed 002 §8), shared by every
    /// envelope of this Run tree; a reservation is held until cleanup.
    budget: jig_sandbox::Budget,
    /// The host's `[agent]` table; with the process environment it is the
    /// Agent endpoint a builtin Agent Run pin is checked against.
    agent: jig_provider_builtin::agent::endpoint::Table,
    /// What the tree is waiting on now, for the live status line.
    waiting: Arc<Waiting>,
    /// Writes the bundled SDKs into `support`: each once, and only when a
    /// recipe that loads it (Python, Bun, Deno, Node) first starts, so a
    /// `flow.bin` or `flow.wasm` Run never pays for it, nor a Bun Run for
    /// Python's.
    support_writer: Option<SupportWriter>,
    support_written: std::sync::Mutex<BTreeMap<RecipeKind, Result<(), String>>>,
    /// The root's package, already read and verified by the caller in this
    /// process (`jig run` needs it before the Run is recorded): taken by the
    /// first Run of that digest instead of a second read and digest pass.
    loaded: std::sync::Mutex<Option<Arc<flow::package::Package>>>,
    /// What credentialed Project Commands read: the project's repository
    /// and the operator's secret files (absent: they are unavailable).
    repository: Option<Repository>,
    /// The root's record, still being made durable while the Run is
    /// prepared: nothing starts before it is (see [`Executor::dispatchable`]).
    commit: Option<Arc<submit::Commit>>,
    /// The root's envelope, made ahead by a daemon ([`Executor::with_ahead`]).
    ahead: std::sync::Mutex<Option<Ahead>>,
    started_ahead: std::sync::atomic::AtomicBool,
}

/// The project's repository root and the operator's secret map.
#[derive(Debug, Clone)]
pub(crate) struct Repository {
    pub root: PathBuf,
    pub secrets: BTreeMap<String, PathBuf>,
}

/// Writes the bundled SDK a runtime loads below a Run's support directory.
pub(crate) type SupportWriter = fn(&std::path::Path, RecipeKind) -> std::io::Result<()>;

/// Counts of what a Run tree waits on: child Flows, Agent calls, commands.
#[derive(Debug, Default)]
pub struct Waiting {
    children: AtomicUsize,
    agents: AtomicUsize,
    commands: AtomicUsize,
}

/// One thing a Run tree waits on, counted while it lasts.
pub(crate) struct Waited(Arc<Waiting>, fn(&Waiting) -> &AtomicUsize);

impl Waited {
    fn new(waiting: &Arc<Waiting>, which: fn(&Waiting) -> &AtomicUsize) -> Waited {
        which(waiting).fetch_add(1, Ordering::SeqCst);
        Waited(waiting.clone(), which)
    }
}

impl Drop for Waited {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::SeqCst);
    }
}

impl Executor {
    pub fn new(
        store: Store,
        work_root: PathBuf,
        plan: Value,
        providers: Arc<ProviderSet>,
        envelope: &crate::envelope::Envelope,
        support: PathBuf,
    ) -> Executor {
        Executor {
            store,
            work_root,
            plan,
            providers,
            sandbox: envelope.sandbox().clone(),
            scratch_bytes: envelope.scratch_bytes(),
            support,
            counter: AtomicU64::new(0),
            budget: jig_sandbox::Budget::root(),
            agent: Default::default(),
            waiting: Arc::default(),
            support_writer: None,
            support_written: std::sync::Mutex::default(),
            loaded: std::sync::Mutex::new(None),
            commit: None,
            repository: None,
            ahead: std::sync::Mutex::new(None),
            started_ahead: Default::default(),
        }
    }

    /// A package the caller has just read and verified from this store
    /// ([`Store::load_package`]); the first Run of its digest uses it.
    pub(crate) fn with_loaded(self, package: Arc<flow::package::Package>) -> Executor {
        *self.loaded.lock().unwrap_or_else(|e| e.into_inner()) = Some(package);
        self
    }

    /// Write the bundled SDKs with `writer` when a recipe first needs them.
    pub fn with_support_writer(mut self, writer: SupportWriter) -> Executor {
        self.support_writer = Some(writer);
        self
    }

    /// The bundled SDK `kind` loads is in place (written now if this is
    /// the first recipe of that kind).
    fn ensure_support(&self, kind: RecipeKind) -> Result<(), Failure> {
        let Some(writer) = self.support_writer else {
            return Ok(());
        };
        let mut written = self
            .support_written
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let result = written
            .entry(kind)
            .or_insert_with(|| writer(&self.support, kind).map_err(|e| e.to_string()))
            .clone();
        result.map_err(|e| {
            Failure::new(
                ErrorCode::ExecutionFailed,
                format!("cannot stage the bundled SDKs: {e}"),
            )
        })
    }

    /// What the Run tree waits on now, in words ("a child Flow", "2 Agent
    /// calls", "a command"); empty while only package code runs.
    pub fn waiting_on(&self) -> Vec<String> {
        let count = |n: &AtomicUsize| n.load(Ordering::SeqCst);
        let mut out = Vec::new();
        for (n, one, many) in [
            (count(&self.waiting.children), "a child Flow", "child Flows"),
            (count(&self.waiting.agents), "an Agent", "Agent calls"),
            (count(&self.waiting.commands), "a command", "commands"),
        ] {
            match n {
                0 => {}
                1 => out.push(one.to_string()),
                n => out.push(format!("{n} {many}")),
            }
        }
        out
    }

    /// Let credentialed Project Commands read this repository and secrets.
    pub(crate) fn with_repository(mut self, repository: Repository) -> Executor {
        self.repository = Some(repository);
        self
    }

    /// Start nothing before `commit` made the root's record durable.
    pub(crate) fn with_commit(mut self, commit: Option<Arc<submit::Commit>>) -> Executor {
        self.commit = commit;
        self
    }

    /// The last step before package code starts: the Run's record must be
    /// durable (seed 002 §8), else nothing starts. Waits at most for the
    /// record's two syncs, once; later dispatches find it done.
    fn dispatchable(&self) -> Result<(), Failure> {
        let Some(commit) = &self.commit else {
            return Ok(());
        };
        commit.wait().map_err(|e| {
            Failure::new(FailureCode::raised(e.code()), e.to_string())
                .with_details(json!({ "flowStarted": false }))
        })
    }

    /// The same, with the host configuration's `[agent]` table.
    pub fn with_agent(mut self, agent: jig_provider_builtin::agent::endpoint::Table) -> Executor {
        self.agent = agent;
        self
    }

    /// Every target of the admitted generation, for messages.
    pub fn targets(plan: &Value) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(packages) = plan.pointer("/lock/packages").and_then(Value::as_object) {
            for (path, p) in packages {
                if p.get("directRun") == Some(&Value::Bool(true)) {
                    out.push(format!("flow:{path}"));
                }
            }
        }
        if let Some(bindings) = plan.pointer("/lock/bindings").and_then(Value::as_object) {
            out.extend(bindings.keys().map(|id| format!("binding:{id}")));
        }
        out
    }

    /// Is `target` a target of the admitted generation?
    pub(crate) fn is_target(plan: &Value, target: &TargetRef) -> bool {
        Self::targets(plan).contains(&target.to_string())
    }

    fn resolve(&self, target: &TargetRef, with_slots: bool) -> Result<Resolved, Failure> {
        let lock = &self.plan["lock"];
        let unknown = || {
            Failure::new(
                ErrorCode::Unavailable,
                format!("{target} is not an admitted target"),
            )
        };
        let (package_path, settings, slots, commands) = match target {
            TargetRef::Flow(path) => {
                let entry = lock["packages"].get(path).ok_or_else(unknown)?;
                if entry["directRun"] != json!(true) {
                    return Err(unknown());
                }
                (path.clone(), json!({}), BTreeMap::new(), None)
            }
            TargetRef::Binding(id) => {
                let entry = lock["bindings"].get(id).ok_or_else(unknown)?;
                let path = entry["packagePath"]
                    .as_str()
                    .ok_or_else(unknown)?
                    .to_string();
                let mut slots = BTreeMap::new();
                if with_slots {
                    for (slot, value) in entry["slots"].as_object().into_iter().flatten() {
                        slots.insert(
                            slot.clone(),
                            TargetRef::from_lock(value).ok_or_else(unknown)?,
                        );
                    }
                }
                (
                    path,
                    entry["settings"].clone(),
                    slots,
                    entry.get("commands").cloned(),
                )
            }
        };
        let execution = &self.plan["execution"][&package_path];
        // A prepared package (source plus its reviewed dependencies) runs in
        // place of the source package the portable lock names.
        let digest = execution["prepared"]["digest"]
            .as_str()
            .or(lock["packages"][&package_path]["digest"].as_str())
            .ok_or_else(unknown)?
            .to_string();
        let recipe = Recipe::from_value(&execution["recipe"]).ok_or_else(|| {
            Failure::new(
                ErrorCode::Unavailable,
                format!("{target} has no recipe on this host"),
            )
        })?;
        Ok(Resolved {
            digest,
            settings,
            slots,
            recipe,
            providers: execution["providers"].clone(),
            commands,
            prepared: execution["prepared"].is_object(),
            layout: execution["prepared"]["layout"].as_str().map(str::to_string),
        })
    }

    /// Run one invocation to its terminal. Boxed because child Flows recurse.
    pub fn run(self: &Arc<Self>, invocation: Invocation) -> BoxFuture<Result<Success, Failure>> {
        self.run_root(invocation, RootChannels::none())
    }

    /// Run a root invocation with the channels the host connects to its
    /// declared ports. Before launch, the root's required ports must all
    /// be connected (else `INVALID_INPUT`), exactly as for a child.
    pub(crate) fn run_root(
        self: &Arc<Self>,
        invocation: Invocation,
        channels: RootChannels,
    ) -> BoxFuture<Result<Success, Failure>> {
        let this = self.clone();
        let link = ChannelLink {
            holder: channels.broker.new_holder(),
            broker: channels.broker,
            transfer: Some((channels.host, channels.writers)),
        };
        Box::pin(async move { this.run_linked(invocation, true, link).await })
    }

    fn run_child(
        self: &Arc<Self>,
        invocation: Invocation,
        link: ChannelLink,
    ) -> BoxFuture<Result<Success, Failure>> {
        let this = self.clone();
        Box::pin(async move { this.run_linked(invocation, false, link).await })
    }

    /// Run one invocation and settle the channel rights it holds: healthy
    /// held writers are sealed after success, anything else fails them.
    async fn run_linked(
        self: Arc<Self>,
        invocation: Invocation,
        root: bool,
        link: ChannelLink,
    ) -> Result<Success, Failure> {
        let mut settle = SettleInvocation {
            broker: link.broker.clone(),
            holder: link.holder,
            ended: None,
        };
        let result = self.run_inner(invocation, root, link).await;
        settle.ended = Some(match &result {
            Ok(_) => Ended::Healthy,
            Err(f) if f.code.is_stop() => Ended::Stopped,
            Err(_) => Ended::Failed,
        });
        result
    }
}

impl crate::terminal::Terminal {
    /// An execution's own terminal (no Run ID, no delivery).
    pub fn of(result: &Result<Success, Failure>) -> crate::terminal::Terminal {
        use crate::terminal::Terminal;
        match result {
            Ok(success) => Terminal::succeeded(
                success.outcome.clone(),
                success.output.clone(),
                success.diagnostics.clone(),
            ),
            Err(failure) => Terminal::failure(
                failure.code,
                failure.message.clone(),
                failure.details.clone(),
                failure.diagnostics.clone(),
            ),
        }
    }
}
