//! Executing admitted targets: resolve a target in the admitted generation,
//! launch its component by recipe, serve it over Run/1, and classify how it
//! ended. Child Flows run through the same path with the Binding's slots;
//! capability calls go to the provider the review pinned.

mod builtin;
pub mod channels;
mod ledger;
pub mod peer;
pub mod receive;
mod provider_ports;
pub mod sdk;
pub mod submit;
pub mod wasm;

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::package::Package;
use flow::wire::{
    CapabilityCallParams, ErrorCode, FlowRunParams, OperationalError, RunChildParams, RunResult,
};
use jig_provider_api::{CallContext, CallError, ContractIdentity};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use crate::plan::{Recipe, RecipeKind};
use crate::providers::ProviderSet;
use jig_sandbox::{Launch, Sandbox};
use crate::state::Store;
use peer::{BoxFuture, PeerLimits, PeerReport, Services};

/// Where the bundled SDKs are written below a Run's support directory, which
/// is an ancestor of every package directory of that Run.
pub const PYTHON_SUPPORT: &str = "python";
pub const JS_SUPPORT: &str = "node_modules/@jigging/flow";
pub const DENO_IMPORT_MAP: &str = "import_map.json";

/// Diagnostics kept from a component's stderr (the tail, lossy UTF-8).
pub const MAX_STDERR_BYTES: usize = 64 * 1024;
/// Seed 002 §8: the root permits two active sibling Flow calls.
pub const MAX_ACTIVE_CHILDREN: usize = 2;
/// How long a component may take to exit after its root response.
pub const EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long a component whose stdout ended may take to report its exit status.
pub const EXIT_AFTER_EOF: Duration = Duration::from_secs(1);

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

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diagnostics {
    pub stderr: String,
    pub stderr_bytes: u64,
    pub stderr_truncated: bool,
}

impl Diagnostics {
    pub fn to_value(&self) -> Value {
        json!({ "stderr": self.stderr, "stderrBytes": self.stderr_bytes, "stderrTruncated": self.stderr_truncated })
    }
}

#[derive(Debug, Clone)]
pub struct Success {
    pub outcome: String,
    pub output: Value,
    pub diagnostics: Diagnostics,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub details: Option<Value>,
    pub diagnostics: Diagnostics,
}

impl Failure {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Failure {
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
        match ErrorCode::parse_wire(&self.code) {
            Some(code) => OperationalError {
                code,
                message: self.message.clone(),
                details: self.details.clone(),
            },
            None => OperationalError {
                code: ErrorCode::ExecutionFailed,
                message: self.message.clone(),
                details: Some(json!({ "code": self.code })),
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
    /// Writes the bundled SDKs into `support`: done once, and only when a
    /// recipe that loads them (Python, Bun, Deno, Node) first starts, so a
    /// `flow.bin` or `flow.wasm` Run never pays for it.
    support_writer: Option<SupportWriter>,
    support_written: std::sync::Mutex<Option<Result<(), String>>>,
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
}

/// The project's repository root and the operator's secret map.
#[derive(Debug, Clone)]
pub struct Repository {
    pub root: PathBuf,
    pub secrets: BTreeMap<String, PathBuf>,
}

/// Writes the bundled SDKs below a Run's support directory.
pub type SupportWriter = fn(&std::path::Path) -> std::io::Result<()>;

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
        sandbox: Arc<dyn Sandbox>,
        support: PathBuf,
    ) -> Executor {
        Executor {
            store,
            work_root,
            plan,
            providers,
            sandbox,
            support,
            counter: AtomicU64::new(0),
            budget: jig_sandbox::Budget::root(),
            agent: Default::default(),
            waiting: Arc::default(),
            support_writer: None,
            support_written: std::sync::Mutex::new(None),
            loaded: std::sync::Mutex::new(None),
            commit: None,
            repository: None,
        }
    }

    /// A package the caller has just read and verified from this store
    /// ([`Store::load_package`]); the first Run of its digest uses it.
    pub fn with_loaded(self, package: Arc<flow::package::Package>) -> Executor {
        *self.loaded.lock().unwrap_or_else(|e| e.into_inner()) = Some(package);
        self
    }

    /// Write the bundled SDKs with `writer` when a recipe first needs them.
    pub fn with_support_writer(mut self, writer: SupportWriter) -> Executor {
        self.support_writer = Some(writer);
        self
    }

    /// The bundled SDKs are in place (written now if this is the first
    /// recipe that loads them).
    fn ensure_support(&self) -> Result<(), Failure> {
        let Some(writer) = self.support_writer else {
            return Ok(());
        };
        let mut written = self
            .support_written
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let result = written
            .get_or_insert_with(|| writer(&self.support).map_err(|e| e.to_string()))
            .clone();
        result.map_err(|e| {
            Failure::new(
                "EXECUTION_FAILED",
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
    pub fn with_repository(mut self, repository: Repository) -> Executor {
        self.repository = Some(repository);
        self
    }

    /// Start nothing before `commit` made the root's record durable.
    pub fn with_commit(mut self, commit: Option<Arc<submit::Commit>>) -> Executor {
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
        commit.wait().map_err(|(code, message)| {
            Failure::new(code, format!("the Run could not be recorded: {message}"))
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
    pub fn is_target(plan: &Value, target: &TargetRef) -> bool {
        Self::targets(plan).contains(&target.to_string())
    }

    fn resolve(&self, target: &TargetRef, with_slots: bool) -> Result<Resolved, Failure> {
        let lock = &self.plan["lock"];
        let unknown = || Failure::new("UNAVAILABLE", format!("{target} is not an admitted target"));
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
                "UNAVAILABLE",
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
    pub fn run_root(
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
            Err(f) if f.code == "CANCELLED" || f.code == "DEADLINE_EXCEEDED" => Ended::Stopped,
            Err(_) => Ended::Failed,
        });
        result
    }

    async fn run_inner(
        self: Arc<Self>,
        invocation: Invocation,
        root: bool,
        link: ChannelLink,
    ) -> Result<Success, Failure> {
        let resolved = self.resolve(&invocation.target, root)?;
        let verified = resolved
            .recipe
            .verify()
            .and_then(|()| crate::plan::builtin::verify(&resolved.providers, &self.agent))
            .and_then(|()| self.providers.verify_grants(&resolved.providers));
        if let Err(reason) = verified {
            return Err(Failure::new(
                "REVIEW_REQUIRED",
                format!("the admitted execution environment changed ({reason}); run jig review"),
            )
            .with_details(
                json!({ "reason": "EXECUTION_ENVIRONMENT_CHANGED", "flowStarted": false }),
            ));
        }
        // One read and one digest pass per command (the caller's, when it
        // loaded the root's package): the package tree below is made from,
        // or checked against, these same verified bytes.
        let loaded = {
            let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
            match loaded.as_ref() {
                Some(p) if p.digest() == resolved.digest => loaded.take(),
                _ => None,
            }
        };
        let package = match loaded {
            Some(package) => package,
            None => Arc::new(
                self.store
                    .load_package(&resolved.digest)
                    .map_err(|e| Failure::new(e.code(), e.to_string()))?,
            ),
        };
        if let Some(schema) = package.input_schema() {
            if let Err(invalid) = schema.validate(&invocation.input) {
                return Err(Failure::new(
                    "INVALID_INPUT",
                    format!("input does not satisfy input.schema.json: {invalid}"),
                )
                .with_details(invalid_details(&invalid)));
            }
        }
        let grants = match &link.transfer {
            None => BTreeMap::new(),
            Some((from, refs)) => link
                .broker
                .transfer(*from, link.holder, refs, &package)
                .map_err(|e| Failure {
                    code: e.code.as_str().into(),
                    message: e.message,
                    details: e.details,
                    diagnostics: Diagnostics::default(),
                })?,
        };
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let dir = self.work_root.join(format!("{n}"));
        let scratch = dir.join("scratch");
        // A workspace preparation's retained layout, verified before any
        // byte is written: a missing or corrupt one fails closed.
        let retained = match &resolved.layout {
            None => None,
            Some(digest) => Some(
                crate::plan::prepare::retained_layout(&self.store, Some(digest), package.files())
                    .map_err(|e| Failure::new("PROJECT_STATE_INVALID", e))?,
            ),
        };
        // A workspace Flow runs from its retained member path: the Run's
        // tree has the workspace's shape, and `layout` is its links.
        let entrypoint = match &retained {
            Some(retained) => retained.run_path(&resolved.recipe.entrypoint),
            None => resolved.recipe.entrypoint.clone(),
        };
        let (run_files, layout) = match retained.map(|r| r.run_tree(package.files())) {
            Some((files, layout)) => (Some(files), Some(layout)),
            None => (None, None),
        };
        // (where the package appears to the Run, where its shared tree is
        // when that is elsewhere)
        let prepared = (|| -> Result<(PathBuf, Option<PathBuf>), Failure> {
            let failed = |e: String| {
                Failure::new("EXECUTION_FAILED", format!("cannot prepare the Run: {e}"))
            };
            std::fs::create_dir_all(&scratch).map_err(|e| failed(e.to_string()))?;
            let private = dir.join("package");
            match resolved.recipe.kind {
                // An in-process flow.wasm runs from the verified bytes and
                // sees no package tree.
                RecipeKind::Wasm => Ok((private, None)),
                // Bun, Node and Deno find the bundled SDK by walking up from
                // the package directory: shown where a private copy below
                // the Run's support directory would be, they share the tree;
                // an envelope that cannot show it there gets the copy. A
                // workspace preparation's recorded aliases are made in a
                // private copy after the regular bytes.
                kind if layout.is_some()
                    || (matches!(kind, RecipeKind::Bun | RecipeKind::Node | RecipeKind::Deno)
                        && !self.sandbox.shows_elsewhere()) =>
                {
                    let files = run_files.as_ref().unwrap_or(package.files());
                    crate::state::Store::write_tree(files, &private)
                        .map_err(|e| failed(e.to_string()))?;
                    if let Some(layout) = &layout {
                        crate::plan::prepare::layout::materialize(&private, layout)
                            .map_err(|e| failed(e.to_string()))?;
                        crate::plan::prepare::layout::verify(&private, layout)
                            .map_err(|e| Failure::new("PROJECT_STATE_INVALID", e))?;
                    }
                    Ok((private, None))
                }
                // Native, Python and (shown elsewhere) the JavaScript
                // runtimes share one read-only tree per digest, checked
                // against the verified bytes on every use, and shown where
                // the private copy would be.
                _ => {
                    let tree = self
                        .store
                        .package_tree(&package)
                        .map_err(|e| Failure::new(e.code(), e.to_string()))?;
                    if self.sandbox.shows_elsewhere() {
                        Ok((private, Some(tree)))
                    } else {
                        Ok((tree, None))
                    }
                }
            }
        })();
        let (package_dir, package_tree) = match prepared {
            Ok(path) => path,
            Err(e) => {
                if let Some(layout) = &layout {
                    let _ = crate::plan::prepare::layout::unlink(&dir.join("package"), layout);
                }
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        // Written: the copy is not held for the Run's length.
        drop(run_files);
        let services = Arc::new_cyclic(|me| InvocationServices {
            me: me.clone(),
            executor: self.clone(),
            resolved: Arc::new(resolved),
            package: package.clone(),
            deadline_unix_ms: invocation.deadline_unix_ms,
            cancel: invocation.cancel.clone(),
            activity: Arc::new(std::sync::Mutex::new(Activity::default())),
            broker: link.broker.clone(),
            holder: link.holder,
            grants,
            run: invocation.run.clone(),
        });
        // Reserve this branch's envelope before dispatch; the reservation
        // is returned only after the envelope was fenced and cleaned.
        let reservation = match self.budget.reserve() {
            Ok(reservation) => reservation,
            Err(exhausted) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(Failure::new("RESOURCE_EXHAUSTED", exhausted.to_string()));
            }
        };
        let outcome = self
            .launch(
                &services,
                (&package_dir, package_tree.as_deref(), &entrypoint),
                &scratch,
                &invocation,
            )
            .await;
        drop(reservation);
        // Aliases are unlinked without following their targets.
        let unlinked = match &layout {
            Some(layout) => crate::plan::prepare::layout::unlink(&package_dir, layout),
            None => Ok(()),
        };
        let cleanup = unlinked.and_then(|()| std::fs::remove_dir_all(&dir));
        let (report, exit, diagnostics) = outcome?;
        if let Err(e) = cleanup {
            return Err(Failure {
                code: "JIG_CLEANUP_FAILED".into(),
                message: format!("the Run ended but its private files could not be removed: {e}"),
                details: None,
                diagnostics,
            });
        }
        let result = classify(&report, &exit).map_err(|mut f| {
            f.diagnostics = diagnostics.clone();
            f
        })?;
        check_result(&package, &result)
            .map(|r| Success {
                outcome: r.outcome,
                output: r.output,
                diagnostics: diagnostics.clone(),
            })
            .map_err(|mut f| {
                f.diagnostics = diagnostics;
                f
            })
    }

    async fn launch(
        &self,
        services: &Arc<InvocationServices>,
        (package_dir, package_tree, entrypoint): (&std::path::Path, Option<&std::path::Path>, &str),
        scratch: &std::path::Path,
        invocation: &Invocation,
    ) -> Result<(PeerReport, Exit, Diagnostics), Failure> {
        let recipe = &services.resolved.recipe;
        // Measured below the millisecond, so a parent and its children,
        // which share one deadline, also share one instant.
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let left = Duration::from_millis(invocation.deadline_unix_ms).saturating_sub(since_epoch);
        // Fixed now, not when the peer starts serving: starting the
        // process must not move the deadline later (a parent whose start
        // took longer than its child's would otherwise outlive it).
        let deadline = tokio::time::Instant::now() + left;
        let limits = || PeerLimits {
            deadline,
            cancel: invocation.cancel.clone(),
        };
        let mut params = FlowRunParams {
            protocol: flow::wire::PROTOCOL.into(),
            input: invocation.input.clone(),
            settings: services
                .resolved
                .settings
                .as_object()
                .cloned()
                .unwrap_or_default(),
            attachments: invocation
                .attachments
                .iter()
                .map(|a| {
                    let path = a.host.to_string_lossy().to_string();
                    let access = a.access();
                    (a.name.clone(), flow::wire::Attachment { path, access })
                })
                .collect(),
            scratch: scratch.to_string_lossy().to_string(),
            deadline_unix_ms: invocation.deadline_unix_ms,
            channels: services.grants.clone(),
        };
        let entry = package_dir.join(entrypoint);
        if recipe.kind == RecipeKind::Wasm {
            params.scratch = "/scratch".into();
            // The bytes verified when the package was loaded, not a re-read
            // (nor a copy).
            if !services.package.files().contains_key(&recipe.entrypoint) {
                return Err(Failure::new(
                    "EXECUTION_FAILED",
                    "the package has no flow.wasm",
                ));
            }
            let mut preopens = vec![wasm::Preopen {
                host: scratch.to_path_buf(),
                guest: "/scratch".into(),
                writable: true,
            }];
            // The writable attachment: the same bounded tmpfs a process
            // recipe gets, held by descriptor and preopened through it.
            let mut held = Vec::new();
            for grant in &invocation.attachments {
                let guest = format!("/attachments/{}", grant.name);
                if let Some(a) = params.attachments.get_mut(&grant.name) {
                    a.path = guest.clone();
                }
                let host = if grant.writable {
                    let fd = self.sandbox.bounded_output(&grant.host).map_err(|e| {
                        Failure::new(
                            "EXECUTION_FAILED",
                            format!("cannot create the writable attachment: {e}"),
                        )
                    })?;
                    let path = PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()));
                    held.push((grant.host.clone(), fd));
                    path
                } else {
                    grant.host.clone()
                };
                preopens.push(wasm::Preopen {
                    host,
                    guest,
                    writable: grant.writable,
                });
            }
            let launch = wasm::WasmLaunch {
                package: services.package.clone(),
                entrypoint: recipe.entrypoint.clone(),
                preopens,
            };
            let (host_in, guest_in) = tokio::io::duplex(64 * 1024);
            let (guest_out, host_out) = tokio::io::duplex(64 * 1024);
            let (guest_err, host_err) = tokio::io::duplex(64 * 1024);
            self.dispatchable()?;
            let guest = tokio::spawn(wasm::run(launch, guest_in, guest_out, guest_err));
            let stderr = tokio::spawn(collect_stderr(host_err));
            let services: Arc<dyn Services> = services.clone();
            let report = peer::serve(host_out, host_in, params, services, limits()).await;
            let exit = finish_guest(guest, &report).await;
            hand_back(&invocation.attachments, held);
            let diagnostics = stderr.await.unwrap_or_default();
            return Ok((report, exit, diagnostics));
        }
        // Python imports its SDK from the shared compiled tree (below) of a
        // lasting store; a throwaway store (`jig exec`) would compile it for
        // one command, so there, like the JavaScript runtimes, it gets the
        // sources in the Run's support directory.
        let compiled_sdk = recipe.kind == RecipeKind::Python && self.store.is_durable();
        if recipe.kind != RecipeKind::Native && !compiled_sdk {
            self.ensure_support()?;
        }
        let js_support = self.support.join(JS_SUPPORT);
        let (program, args): (PathBuf, Vec<std::ffi::OsString>) =
            match (recipe.kind, &recipe.runtime) {
                (RecipeKind::Native, _) => (entry.clone(), vec![]),
                (RecipeKind::Python, Some(runtime)) => {
                    (runtime.clone(), vec![entry.clone().into()])
                }
                // Bun must never install: the bundled SDK is found by walking up.
                (RecipeKind::Bun, Some(runtime)) => (
                    runtime.clone(),
                    vec!["--no-install".into(), entry.clone().into()],
                ),
                (RecipeKind::Node, Some(runtime)) => (
                    runtime.clone(),
                    vec!["--experimental-detect-module".into(), entry.clone().into()],
                ),
                (RecipeKind::Deno, Some(runtime)) => (
                    runtime.clone(),
                    vec![
                        "run".into(),
                        "--no-prompt".into(),
                        "--no-config".into(),
                        "--no-lock".into(),
                        "--no-remote".into(),
                        format!(
                            "--import-map={}",
                            self.support.join(DENO_IMPORT_MAP).display()
                        )
                        .into(),
                        format!(
                            "--allow-read={},{},{}{}",
                            package_dir.display(),
                            scratch.display(),
                            js_support.display(),
                            deno_paths(&invocation.attachments, false)
                        )
                        .into(),
                        format!(
                            "--allow-write={}{}",
                            scratch.display(),
                            deno_paths(&invocation.attachments, true)
                        )
                        .into(),
                        entry.clone().into(),
                    ],
                ),
                _ => {
                    return Err(Failure::new(
                        "UNAVAILABLE",
                        "the recipe has no runtime on this host",
                    ))
                }
            };
        let mut env = vec![("LANG".to_string(), "C.UTF-8".to_string())];
        let mut read_only = Vec::new();
        let mut shown: Vec<(PathBuf, PathBuf)> = package_tree
            .map(|tree| (tree.to_path_buf(), package_dir.to_path_buf()))
            .into_iter()
            .collect();
        match recipe.kind {
            RecipeKind::Python => {
                let python = if compiled_sdk {
                    let compiled =
                        sdk::python(&self.store.support_dir(), &program, sdk::PYTHON_SDK)
                            .map_err(|e| Failure::new("EXECUTION_FAILED", e))?;
                    if self.sandbox.shows_elsewhere() {
                        // Shown where the per-Run support directory had it.
                        let inside = self.support.join(PYTHON_SUPPORT);
                        shown.push((compiled, inside.clone()));
                        inside
                    } else {
                        read_only.push(compiled.clone());
                        compiled
                    }
                } else {
                    let python = self.support.join(PYTHON_SUPPORT);
                    read_only.push(python.clone());
                    python
                };
                let mut path = python.into_os_string();
                if services.resolved.prepared {
                    // The reviewed wheels, after the bundled SDK.
                    path.push(":");
                    path.push(package_dir.join(crate::plan::prepare::PYTHON_SITE));
                }
                env.push(("PYTHONPATH".into(), path.to_string_lossy().to_string()));
                env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
                env.push(("PYTHONUNBUFFERED".into(), "1".into()));
            }
            RecipeKind::Bun | RecipeKind::Node => read_only.push(js_support.clone()),
            RecipeKind::Deno => {
                read_only.push(js_support.clone());
                read_only.push(self.support.join(DENO_IMPORT_MAP));
                env.push((
                    "DENO_DIR".into(),
                    scratch.join(".deno").to_string_lossy().to_string(),
                ));
                env.push(("DENO_NO_UPDATE_CHECK".into(), "1".into()));
            }
            RecipeKind::Native | RecipeKind::Wasm => {}
        }
        let view = if self.sandbox.shows_elsewhere() {
            Some(runtime_view(
                services,
                &program,
                package_tree.unwrap_or(package_dir),
            )?)
        } else {
            None
        };
        let launch = Launch {
            view,
            program,
            args,
            env,
            cwd: scratch.to_path_buf(),
            package: package_dir.to_path_buf(),
            scratch: scratch.to_path_buf(),
            read_only,
            shown,
            attachments: invocation
                .attachments
                .iter()
                .map(|a| (a.host.clone(), a.writable))
                .collect(),
            limits: jig_sandbox::Limits::FLOW,
            network: false,
        };
        self.dispatchable()?;
        let mut contained = self.sandbox.spawn(&launch).map_err(|e| {
            Failure::new(
                "EXECUTION_FAILED",
                format!("cannot start {}: {e}", launch.program.display()),
            )
        })?;
        let stdin = contained.child.stdin.take().expect("piped stdin");
        let stdout = contained.child.stdout.take().expect("piped stdout");
        let stderr = tokio::spawn(collect_stderr(
            contained.child.stderr.take().expect("piped stderr"),
        ));
        let services: Arc<dyn Services> = services.clone();
        let report = peer::serve(stdout, stdin, params, services, limits()).await;
        let wait_for = exit_wait(&report);
        let exit = match tokio::time::timeout(wait_for, contained.child.wait()).await {
            Ok(Ok(status)) => Exit {
                code: status.code(),
                killed: false,
            },
            _ => {
                // SIGTERM, the kill grace, then SIGKILL to what remains.
                contained.terminate().await;
                Exit {
                    code: None,
                    killed: true,
                }
            }
        };
        let fenced = contained.cleanup();
        // Fenced: the writable attachment can no longer change.
        hand_back(&invocation.attachments, contained.take_outputs());
        let diagnostics = match tokio::time::timeout(Duration::from_secs(1), stderr).await {
            Ok(Ok(d)) => d,
            _ => Diagnostics::default(),
        };
        if let Err(e) = fenced {
            return Err(Failure {
                code: "JIG_CLEANUP_FAILED".into(),
                message: format!("the Run's processes could not be fenced and removed: {e}"),
                details: None,
                diagnostics,
            });
        }
        Ok((report, exit, diagnostics))
    }
}

/// The proved runtime closure a process recipe is shown instead of the
/// host's `/usr` (seed 002 §9); unprovable fails closed, before launch.
fn runtime_view(
    services: &InvocationServices,
    program: &std::path::Path,
    tree: &std::path::Path,
) -> Result<Arc<jig_sandbox::closure::View>, Failure> {
    use jig_sandbox::closure::{self, Stdlib};
    let recipe = &services.resolved.recipe;
    let proved = match (recipe.kind, &recipe.runtime_digest) {
        (RecipeKind::Native, _) => match services.package.files().get(&recipe.entrypoint) {
            Some(bytes) => {
                closure::native(bytes, &services.resolved.digest, &recipe.entrypoint, tree)
            }
            None => Err(format!("the package has no {}", recipe.entrypoint)),
        },
        (kind, Some(digest)) => {
            let stdlib = match kind {
                RecipeKind::Python => Stdlib::Python,
                _ => Stdlib::None,
            };
            closure::runtime(program, digest, stdlib)
        }
        (_, None) => Err("the recipe has no verified runtime".into()),
    };
    // The ELF files the package carries beside a runtime (extension
    // modules of prepared wheels, Node addons) bring their libraries too.
    let proved = proved.and_then(|view| {
        if recipe.kind == RecipeKind::Native {
            return Ok(view);
        }
        let files = services.package.files();
        Ok(
            match closure::package(files, &services.resolved.digest, tree, program)? {
                Some(carried) => Arc::new(view.with(&carried)),
                None => view,
            },
        )
    });
    proved.map_err(|reason| {
        Failure::new(
            "UNAVAILABLE",
            format!(
                "the runtime files of {} cannot be proved ({reason}); a process recipe needs an ELF executable whose loader and shared libraries are all installed: install them, or configure another runtime in [runtimes] and run jig review",
                program.display()
            ),
        )
        .with_details(json!({ "reason": "RUNTIME_VIEW_UNPROVABLE", "flowStarted": false }))
    })
}

/// Put each retained writable attachment into its grant's handoff.
fn hand_back(grants: &[AttachmentGrant], held: Vec<(PathBuf, std::os::fd::OwnedFd)>) {
    for (path, fd) in held {
        let handoff = grants
            .iter()
            .find(|g| g.writable && g.host == path)
            .and_then(|g| g.output.as_ref());
        if let Some(handoff) = handoff {
            handoff.put(fd);
        }
    }
}

/// `,path` for each attachment (only the writable ones when `writable`).
fn deno_paths(attachments: &[AttachmentGrant], writable: bool) -> String {
    attachments
        .iter()
        .filter(|a| a.writable || !writable)
        .map(|a| format!(",{}", a.host.display()))
        .collect()
}

/// How the component process ended.
#[derive(Debug)]
struct Exit {
    code: Option<i32>,
    killed: bool,
}

/// How long to wait for the component to exit on its own before killing
/// it: after a response, or after its stdout ended (the exit status then
/// decides between `EXECUTION_FAILED` and `CHANNEL_LOST`); not at all after a
/// deadline, a cancellation or a protocol violation.
fn exit_wait(report: &PeerReport) -> Duration {
    if report.deadline || report.cancelled || report.violation.is_some() || report.drain_timed_out {
        Duration::ZERO
    } else if report.response.is_some() {
        EXIT_GRACE
    } else {
        EXIT_AFTER_EOF
    }
}

async fn finish_guest(
    guest: tokio::task::JoinHandle<Result<i32, String>>,
    report: &PeerReport,
) -> Exit {
    if exit_wait(report).is_zero() {
        guest.abort();
        let _ = guest.await;
        return Exit {
            code: None,
            killed: true,
        };
    }
    let abort = guest.abort_handle();
    match tokio::time::timeout(exit_wait(report), guest).await {
        Ok(Ok(Ok(code))) => Exit {
            code: Some(code),
            killed: false,
        },
        Ok(Ok(Err(_))) | Ok(Err(_)) => Exit {
            code: Some(1),
            killed: false,
        },
        Err(_) => {
            abort.abort();
            Exit {
                code: None,
                killed: true,
            }
        }
    }
}

async fn collect_stderr<R: AsyncRead + Unpin>(mut stderr: R) -> Diagnostics {
    let mut tail: Vec<u8> = Vec::new();
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > MAX_STDERR_BYTES {
                    tail.drain(..tail.len() - MAX_STDERR_BYTES);
                }
            }
        }
    }
    Diagnostics {
        stderr: String::from_utf8_lossy(&tail).into_owned(),
        stderr_bytes: total,
        stderr_truncated: total > tail.len() as u64,
    }
}

/// Run/1 §9: turn what the peer saw and how the process ended into the
/// request decision, or the failure that prevents acceptance.
fn classify(report: &PeerReport, exit: &Exit) -> Result<Value, Failure> {
    if let Some(violation) = &report.violation {
        return Err(Failure::new("PROTOCOL_ERROR", violation.clone()));
    }
    if report.deadline {
        return Err(Failure::new(
            "DEADLINE_EXCEEDED",
            "the Run reached its deadline",
        ));
    }
    if report.cancelled {
        return Err(Failure::new("CANCELLED", "the Run was cancelled"));
    }
    let Some(response) = &report.response else {
        if let Some(code) = exit.code.filter(|c| *c != 0) {
            return Err(Failure::new(
                "EXECUTION_FAILED",
                format!("the component exited with status {code} before responding"),
            ));
        }
        if exit.code.is_none() && !exit.killed {
            return Err(Failure::new(
                "EXECUTION_FAILED",
                "the component was killed by a signal before responding",
            ));
        }
        return Err(Failure::new(
            "CHANNEL_LOST",
            report
                .lost
                .clone()
                .unwrap_or_else(|| "the component ended without a root response".into()),
        ));
    };
    if report.pending_at_response > 0 {
        return Err(Failure::new(
            "PROTOCOL_ERROR",
            "the component answered its root while its own requests were pending",
        ));
    }
    if exit.killed || report.drain_timed_out {
        return Err(Failure::new(
            "EXECUTION_FAILED",
            "the component did not exit after responding and was killed",
        ));
    }
    if exit.code != Some(0) {
        return Err(Failure::new(
            "EXECUTION_FAILED",
            match exit.code {
                Some(code) => format!("the component exited with status {code}"),
                None => "the component was killed by a signal".into(),
            },
        ));
    }
    match response {
        Ok(result) => Ok(result.clone()),
        Err(error) => match error.operational() {
            Some(op) => Err(Failure {
                code: op.code.as_str().into(),
                message: op.message,
                details: op.details,
                diagnostics: Diagnostics::default(),
            }),
            None => Err(Failure::new(
                "PROTOCOL_ERROR",
                format!(
                    "the component answered flow/run with JSON-RPC error {}: {}",
                    error.code, error.message
                ),
            )),
        },
    }
}

/// The result must be `{outcome, output}` with `done` or a declared outcome,
/// and valid against `result.schema.json`.
fn check_result(package: &Package, result: &Value) -> Result<RunResult, Failure> {
    let run_result = RunResult::from_value(result).map_err(|e| {
        Failure::new(
            "INVALID_RESULT",
            format!("the result is not a Run result: {}", e.0),
        )
    })?;
    if run_result.outcome != "done"
        && !package
            .metadata()
            .outcomes
            .contains_key(&run_result.outcome)
    {
        return Err(Failure::new(
            "INVALID_RESULT",
            format!(
                "outcome {:?} is neither done nor declared in FLOW.md",
                run_result.outcome
            ),
        ));
    }
    if let Some(schema) = package.result_schema() {
        if let Err(invalid) = schema.validate(result) {
            return Err(Failure::new(
                "INVALID_RESULT",
                format!("the result does not satisfy result.schema.json: {invalid}"),
            )
            .with_details(invalid_details(&invalid)));
        }
    }
    Ok(run_result)
}

fn invalid_details(invalid: &flow::schema::Invalid) -> Value {
    match invalid {
        flow::schema::Invalid::Diagnostic(d) => json!({
            "instancePointer": d.instance_pointer,
            "schemaPointer": d.schema_pointer,
            "keyword": d.keyword,
        }),
        flow::schema::Invalid::LimitExceeded => json!({ "code": "SCHEMA_LIMIT_EXCEEDED" }),
        flow::schema::Invalid::Json(e) => json!({ "message": e.to_string() }),
    }
}

/// What one running component may ask of its host.
struct InvocationServices {
    /// This value itself, for the builtin calls that outlive `&self`.
    me: std::sync::Weak<InvocationServices>,
    executor: Arc<Executor>,
    resolved: Arc<Resolved>,
    package: Arc<Package>,
    deadline_unix_ms: u64,
    cancel: watch::Receiver<bool>,
    /// Its active child Flows and effects (seed 002 §8).
    activity: Arc<std::sync::Mutex<Activity>>,
    broker: Arc<channels::Broker>,
    /// This invocation's identity in the tree's channel broker.
    holder: channels::HolderId,
    /// The channel endpoints granted in `flow/run`.
    grants: BTreeMap<String, flow::wire::ChannelGrant>,
    /// The root Run Run Checkpoint saves for (none for a child).
    run: Option<Arc<RootRun>>,
}

/// The channels of one root Run tree as the host connects them: the tree's
/// broker (one per root Run), the host's own holder in it, and the writers
/// (root port → host-held token) it maps into the root.
pub struct RootChannels {
    pub broker: Arc<channels::Broker>,
    pub host: channels::HolderId,
    pub writers: BTreeMap<String, String>,
}

impl RootChannels {
    /// A fresh tree whose root the host connects to no port.
    pub fn none() -> RootChannels {
        let broker = channels::Broker::new();
        RootChannels {
            host: broker.new_holder(),
            broker,
            writers: BTreeMap::new(),
        }
    }
}

/// Where an invocation sits in its tree's channel broker, and the rights a
/// caller maps into it (`(caller, port → caller token)`).
struct ChannelLink {
    broker: Arc<channels::Broker>,
    holder: channels::HolderId,
    transfer: Option<(channels::HolderId, BTreeMap<String, String>)>,
}

/// Settles an invocation's channel rights when it ends, also when its
/// future is dropped (cancelled with its owner).
struct SettleRights {
    broker: Arc<channels::Broker>,
    holder: channels::HolderId,
    healthy: bool,
}

impl Drop for SettleRights {
    fn drop(&mut self) {
        self.broker.finish(self.holder, self.healthy);
    }
}

/// How an invocation ended, for the channel rights it held.
#[derive(Clone, Copy)]
enum Ended {
    Healthy,
    Failed,
    /// Cancelled or past its deadline: its writers' rights ended unsealed.
    Stopped,
}

/// Settles a Flow invocation's channel rights when it ends; a future
/// dropped before its result was cancelled with its owner (stopped).
struct SettleInvocation {
    broker: Arc<channels::Broker>,
    holder: channels::HolderId,
    ended: Option<Ended>,
}

impl Drop for SettleInvocation {
    fn drop(&mut self) {
        match self.ended.unwrap_or(Ended::Stopped) {
            Ended::Healthy => self.broker.finish(self.holder, true),
            Ended::Failed => self.broker.finish(self.holder, false),
            Ended::Stopped => self.broker.finish_stopped(self.holder),
        }
    }
}

/// What an invocation has in flight (seed 002 §8): the root permits two
/// active sibling Flow calls or one exclusive Agent or command effect; a
/// leaf (which has no slots) one effect. Run Checkpoint is served from its
/// own control capacity and does not count here.
#[derive(Debug, Default)]
struct Activity {
    children: usize,
    effect: bool,
}

/// One active child Flow call, released on drop.
struct ChildSlot(Arc<std::sync::Mutex<Activity>>);

impl ChildSlot {
    fn take(activity: &Arc<std::sync::Mutex<Activity>>) -> Result<ChildSlot, OperationalError> {
        let mut a = activity.lock().unwrap_or_else(|e| e.into_inner());
        if a.effect {
            return Err(OperationalError::new(
                ErrorCode::ResourceExhausted,
                "an exclusive Agent or command effect is active",
            ));
        }
        if a.children >= MAX_ACTIVE_CHILDREN {
            return Err(OperationalError::new(
                ErrorCode::ResourceExhausted,
                "two sibling Flow calls are already active",
            ));
        }
        a.children += 1;
        Ok(ChildSlot(activity.clone()))
    }
}

impl Drop for ChildSlot {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).children -= 1;
    }
}

/// The one active exclusive effect (an Agent or command call), released on
/// drop. Refused `RESOURCE_EXHAUSTED` before dispatch while another effect
/// or any child Flow call is active.
pub(crate) struct EffectSlot(Arc<std::sync::Mutex<Activity>>);

#[allow(dead_code)]
impl EffectSlot {
    fn take(activity: &Arc<std::sync::Mutex<Activity>>) -> Result<EffectSlot, CallError> {
        let mut a = activity.lock().unwrap_or_else(|e| e.into_inner());
        if a.effect || a.children > 0 {
            return Err(CallError::operational(
                "RESOURCE_EXHAUSTED",
                "another effect or a child Flow call is active; an Agent or command effect is exclusive",
            ));
        }
        a.effect = true;
        Ok(EffectSlot(activity.clone()))
    }
}

impl Drop for EffectSlot {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).effect = false;
    }
}

impl Services for InvocationServices {
    fn channel(
        &self,
        method: flow::wire::Method,
        params: &Value,
    ) -> Result<BoxFuture<Result<Value, OperationalError>>, flow::wire::RpcError> {
        self.broker
            .request(self.holder, &self.package, method, params)
    }

    fn run_child(&self, params: RunChildParams) -> BoxFuture<Result<Value, OperationalError>> {
        let Some(target) = self.resolved.slots.get(&params.slot).cloned() else {
            let e = OperationalError::new(
                ErrorCode::Unavailable,
                format!("no child slot {:?} is admitted here", params.slot),
            );
            return Box::pin(async move { Err(e) });
        };
        let slot = match ChildSlot::take(&self.activity) {
            Ok(slot) => slot,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        let invocation = Invocation {
            target,
            input: params.input,
            deadline_unix_ms: self.deadline_unix_ms,
            cancel: self.cancel.clone(),
            attachments: Vec::new(),
            run: None,
        };
        let link = ChannelLink {
            broker: self.broker.clone(),
            holder: self.broker.new_holder(),
            transfer: Some((self.holder, params.channels)),
        };
        let child = self.executor.run_child(invocation, link);
        let waited = Waited::new(&self.executor.waiting, |w| &w.children);
        Box::pin(async move {
            let _slot = slot;
            let _waited = waited;
            match child.await {
                Ok(success) => Ok(json!({ "outcome": success.outcome, "output": success.output })),
                Err(failure) => Err(failure.to_operational()),
            }
        })
    }

    fn call_capability(
        &self,
        params: CapabilityCallParams,
    ) -> BoxFuture<Result<Value, OperationalError>> {
        let prepared = self.prepare_call(&params);
        let deadline_unix_ms = self.deadline_unix_ms;
        let broker = self.broker.clone();
        let caller = self.holder;
        let package = self.package.clone();
        let run_cancel = self.cancel.clone();
        let me = self.me.upgrade();
        Box::pin(async move {
            let (target, method, identity, declared_channels) = prepared?;
            // The provider call is its own holder: the mapped rights move
            // into it (all validated first against the method's declared
            // ports, else nothing moves and nothing dispatches), and are
            // settled when the call ends, also when this future is dropped.
            let holder = broker.new_holder();
            let grants = broker.transfer_to_method(
                caller,
                holder,
                &params.channels,
                declared_channels.as_ref(),
                &package,
            )?;
            let mut settle = SettleRights {
                broker: broker.clone(),
                holder,
                healthy: false,
            };
            let (ports, _call_over) = provider_ports::ProviderPorts::new(
                broker,
                holder,
                package,
                grants,
                deadline_unix_ms,
                run_cancel,
            );
            let ports: Arc<dyn jig_provider_api::ChannelPorts> = Arc::new(ports);
            let ctx = CallContext {
                contract: identity,
                operation_id: params.operation_id.clone(),
                deadline_unix_ms,
            };
            let name = params.method.clone();
            let input = params.input.clone();
            let left =
                Duration::from_millis(deadline_unix_ms.saturating_sub(crate::state::now_unix_ms()));
            let deadline = || {
                OperationalError::new(
                    ErrorCode::DeadlineExceeded,
                    "the capability call reached the deadline",
                )
            };
            let outcome = match target {
                CallTarget::Provider(provider) => {
                    let call = tokio::task::spawn_blocking(move || {
                        provider.call(&ctx, &name, &input, ports)
                    });
                    match tokio::time::timeout(left, call).await {
                        Err(_) => return Err(deadline()),
                        Ok(Err(_)) => {
                            return Err(OperationalError::new(
                                ErrorCode::ExecutionFailed,
                                "the provider failed",
                            ))
                        }
                        Ok(Ok(outcome)) => outcome,
                    }
                }
                CallTarget::Builtin(builtin_name) => {
                    let Some(services) = me else {
                        return Err(OperationalError::new(
                            ErrorCode::OwnerClosed,
                            "the invocation has ended",
                        ));
                    };
                    let call = builtin::BuiltinCall {
                        services,
                        ctx,
                        method: name,
                        input,
                        ports,
                    };
                    // A builtin ends its own effect at the deadline (with
                    // its evidence); this bound only backs that up.
                    let backstop = left + jig_sandbox::KILL_GRACE * 4;
                    match tokio::time::timeout(backstop, builtin::call(&builtin_name, call)).await {
                        Err(_) => return Err(deadline()),
                        Ok(outcome) => outcome,
                    }
                }
            };
            let answer = match outcome {
                Ok(value) => match method.output.validate(&value) {
                    Ok(()) => Ok(json!({ "value": value })),
                    Err(invalid) => Err(OperationalError {
                        code: ErrorCode::InvalidResult,
                        message: format!(
                            "the provider's value does not satisfy the contract: {invalid}"
                        ),
                        details: Some(invalid_details(&invalid)),
                    }),
                },
                Err(CallError::Application { name, data }) => match method.errors.get(&name) {
                    Some(schema) if schema.validate(&data).is_ok() => {
                        Ok(json!({ "error": { "name": name, "data": data } }))
                    }
                    _ => Err(OperationalError::new(
                        ErrorCode::InvalidResult,
                        format!("the provider returned undeclared or invalid error {name:?}"),
                    )),
                },
                Err(CallError::Operational {
                    code,
                    message,
                    details,
                }) => Err(OperationalError {
                    code: ErrorCode::parse_wire(&code).unwrap_or(ErrorCode::ExecutionFailed),
                    message,
                    details,
                }),
            };
            // A value or a declared error is a settled call: its writers
            // are sealed. Anything else fails the channels it wrote.
            settle.healthy = answer.is_ok();
            answer
        })
    }
}

/// Who serves a capability call: a loaded provider, or a builtin by name.
enum CallTarget {
    Provider(Arc<dyn jig_provider_api::Provider>),
    Builtin(String),
}

/// The target, the method, the exact contract identity, and the
/// method's raw `channels` declarations (when it has any).
type PreparedCall = (
    CallTarget,
    flow::contract::Method,
    ContractIdentity,
    Option<Value>,
);

impl InvocationServices {
    fn prepare_call(
        &self,
        params: &CapabilityCallParams,
    ) -> Result<PreparedCall, OperationalError> {
        let unavailable = |m: String| OperationalError::new(ErrorCode::Unavailable, m);
        let contract = self.package.contract(&params.slot).ok_or_else(|| {
            unavailable(format!(
                "no capability slot {:?} is bound here",
                params.slot
            ))
        })?;
        let method = contract.method(&params.method).cloned().ok_or_else(|| {
            OperationalError::new(
                ErrorCode::InvalidInput,
                format!("the contract has no method {:?}", params.method),
            )
        })?;
        if let Err(invalid) = method.input.validate(&params.input) {
            return Err(OperationalError {
                code: ErrorCode::InvalidInput,
                message: format!("the input does not satisfy the contract: {invalid}"),
                details: Some(invalid_details(&invalid)),
            });
        }
        let identity = ContractIdentity {
            id: contract.id.clone(),
            version: contract.version.clone(),
            digest: contract.digest.clone(),
        };
        let pin = self.resolved.providers.get(&params.slot).ok_or_else(|| {
            unavailable(format!(
                "no provider was admitted for slot {:?}",
                params.slot
            ))
        })?;
        let target = match crate::providers::builtin_pin(pin) {
            Some(name) => CallTarget::Builtin(name.to_string()),
            None => CallTarget::Provider(
                self.executor
                    .providers
                    .resolve(pin, &identity)
                    .map_err(unavailable)?,
            ),
        };
        let declared_channels = contract
            .descriptor
            .get("methods")
            .and_then(|m| m.get(&params.method))
            .and_then(|m| m.get("channels"))
            .cloned();
        Ok((target, method, identity, declared_channels))
    }
}
