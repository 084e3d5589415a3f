//! A trial of a package directory (`jig exec`): the author's own code run
//! once in the same envelope and under the same Run/1 host as an admitted
//! Run, and forgotten. Nothing is admitted: the packages are staged into a
//! private store, planned like a project of one Binding (its slots bound to
//! the child directories), and the directory is removed with the trial.
//! [`super::conduct`] runs it like any root Run, without a record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use flow::json::Value;
use flow::package::{Package, PackageError};
use jig_project::{BindingDecl, Declarations, SlotTarget};

use super::Packet;
use crate::config::HostConfig;
use crate::envelope::Envelope;
use crate::exec::{sdk, submit, Executor, TargetRef};
use crate::files::{self, Captured, Destination, Request};
use crate::plan::{self, Candidate};
use crate::providers::ProviderSet;
use crate::state::Store;
use crate::Error;

/// Where the root package appears in the trial's plan; a child of slot
/// `s` appears at `exec/child/s`.
const ROOT_PATH: &str = "exec/root";
/// The one Binding the trial's plan holds.
const BINDING_ID: &str = "exec";

/// Why a trial could not be prepared; nothing ran.
#[derive(Debug, thiserror::Error)]
pub enum TrialError {
    /// A package directory is not a package; `at` is where the trial's
    /// plan would have put it.
    #[error("{}: {error}", dir.display())]
    Unstaged {
        dir: PathBuf,
        at: String,
        error: Box<PackageError>,
    },
    /// The private directory could not be made.
    #[error("cannot create a private directory: {0}")]
    Private(std::io::Error),
    /// Planning, the private store or the envelope refused (boxed: an
    /// engine error is large beside the others).
    #[error(transparent)]
    Engine(Box<Error>),
}

impl From<Error> for TrialError {
    fn from(e: Error) -> TrialError {
        TrialError::Engine(Box::new(e))
    }
}

impl From<crate::plan::PlanError> for TrialError {
    fn from(e: crate::plan::PlanError) -> TrialError {
        Error::from(e).into()
    }
}

impl From<crate::state::StateError> for TrialError {
    fn from(e: crate::state::StateError) -> TrialError {
        Error::from(e).into()
    }
}

/// A package directory staged, planned and ready to conduct once.
pub struct Trial {
    pub executor: Arc<Executor>,
    /// The staged root package.
    pub root: Package,
    /// Where the trial's Run keeps its private files.
    pub work_root: PathBuf,
    private: tempfile::TempDir,
}

impl Trial {
    /// The target the trial runs: its one Binding.
    pub fn target() -> TargetRef {
        TargetRef::Binding(BINDING_ID.into())
    }

    /// The trial's files, as `jig run` takes them: the attachments,
    /// `--out` and `--receive` checked against what the package declares,
    /// the attachments captured (relative to `base`), the `--out`
    /// destination prepared, and the packet it will receive (what ran,
    /// and the input's identity). Refused before anything runs.
    pub fn files(
        &self,
        request: &Request,
        base: &Path,
        out: Option<&Path>,
        receive: &[String],
        input: &Value,
    ) -> Result<TrialFiles, Error> {
        let writable = submit::check_declared(&self.root, request, out.is_some(), receive)?;
        let captured = files::capture(request, base)?;
        let destination = out
            .map(|out| files::prepare_destination(&base.join(out), &captured.real_roots()))
            .transpose()?;
        let packet = destination.is_some().then(|| Packet {
            method: serde_json::json!({
                "target": Trial::target().to_string(),
                "package": {"path": ROOT_PATH, "digest": self.root.digest()},
                "binding": BINDING_ID,
            }),
            input: serde_json::json!({
                "digest": flow::digest::sha256_digest(&flow::json::canonical(input)),
                "attachments": captured.manifest(),
            }),
        });
        Ok(TrialFiles {
            captured,
            writable,
            destination,
            packet,
        })
    }

    /// Remove the private directory (the store, the plan's packages and
    /// whatever the Run left).
    pub fn close(self) -> std::io::Result<()> {
        drop(self.executor);
        self.private.close()
    }
}

/// A trial's attachments and packet ([`Trial::files`]).
pub struct TrialFiles {
    pub captured: Captured,
    /// The declared writable attachment, if any.
    pub writable: Option<String>,
    /// Where `--out` publishes the packet.
    pub destination: Option<Destination>,
    pub packet: Option<Packet>,
}

/// Stage `package` (and each child directory for its slot), plan them as
/// one Binding with `settings`, and make the executor that runs it under
/// `config`'s containment.
pub fn prepare(
    package: &Path,
    children: &BTreeMap<String, PathBuf>,
    settings: Value,
    config: &HostConfig,
) -> Result<Trial, TrialError> {
    let (candidate, planned, providers) =
        plan_trial(package, children, settings, config, &|_| false)?;
    let private = tempfile::Builder::new()
        .prefix("jig-exec-")
        .tempdir()
        .map_err(TrialError::Private)?;
    let store = Store::throwaway(private.path().join("store"));
    for package in candidate.packages.values() {
        store.put_package(package)?;
    }
    let work_root = private.path().join("runs");
    let executor = Executor::new(
        store,
        work_root.clone(),
        planned,
        providers,
        &Envelope::select(&config.containment)?,
        private.path().to_path_buf(),
    )
    .with_support_writer(sdk::write_runtime_support)
    .with_agent(config.agent.table());
    let mut packages = candidate.packages;
    Ok(Trial {
        executor: Arc::new(executor),
        root: packages.remove(ROOT_PATH).expect("the root was staged"),
        work_root,
        private,
    })
}

/// Resolve the npm dependencies of the package at `package` into a new
/// `bun.lock` (`jig lock`): the package without the lock it may have
/// (nor `node_modules`) is planned as a trial and prepared as review
/// prepares with resolution allowed: Bun in the envelope, reaching only
/// the configured registry, the bundled SDK left out. Returns the lock the
/// preparation then installed from, frozen; `None` when the package has no
/// runtime dependencies to lock. `warn` hears review's resolution warning.
pub fn lock(
    package: &Path,
    config: &HostConfig,
    warn: &mut dyn FnMut(&str),
) -> Result<Option<Vec<u8>>, TrialError> {
    let leave_out = |p: &str| p == LOCK_FILE;
    let (candidate, mut planned, _) = plan_trial(
        package,
        &BTreeMap::new(),
        Value::Object(Default::default()),
        config,
        &leave_out,
    )?;
    let private = tempfile::Builder::new()
        .prefix("jig-lock-")
        .tempdir()
        .map_err(TrialError::Private)?;
    let store = Store::throwaway(private.path().join("store"));
    let prepared = plan::prepare::prepare(
        &candidate.packages,
        &mut planned,
        plan::prepare::Request {
            root: private.path(),
            config,
            allow_resolution_network: true,
            admitted: None,
            store: &store,
            warn,
            note: &mut |_| {},
        },
    )?;
    Ok(prepared
        .iter()
        .find_map(|p| p.files().get(LOCK_FILE).cloned()))
}

/// The Bun lock a package keeps beside its `package.json`.
const LOCK_FILE: &str = "bun.lock";

/// Stage `package` (less what `leave_out` names, and `node_modules`, as
/// review stages a Flow) and each child directory for its slot, and plan
/// them as one Binding with `settings`.
fn plan_trial(
    package: &Path,
    children: &BTreeMap<String, PathBuf>,
    settings: Value,
    config: &HostConfig,
    leave_out: &dyn Fn(&str) -> bool,
) -> Result<(Candidate, Value, Arc<ProviderSet>), TrialError> {
    let stage = |dir: &Path, at: &str, leave_out: &dyn Fn(&str) -> bool| {
        let exclude =
            |p: &str| p == "node_modules" || p.starts_with("node_modules/") || leave_out(p);
        Package::stage_dir_excluding(dir, &exclude).map_err(|error| TrialError::Unstaged {
            dir: dir.to_path_buf(),
            at: at.to_string(),
            error: Box::new(error),
        })
    };
    let mut packages =
        BTreeMap::from([(ROOT_PATH.to_string(), stage(package, ROOT_PATH, leave_out)?)]);
    let mut slots = BTreeMap::new();
    for (slot, dir) in children {
        let path = format!("exec/child/{slot}");
        packages.insert(path.clone(), stage(dir, &path, &|_| false)?);
        slots.insert(slot.clone(), SlotTarget::Flow(path));
    }
    let binding = BindingDecl {
        file: "jig exec".into(),
        package: ROOT_PATH.into(),
        settings,
        slots,
        commands: None,
    };
    let candidate = Candidate {
        declarations: Declarations {
            flows: packages.keys().cloned().collect(),
            bindings: BTreeMap::from([(BINDING_ID.to_string(), binding)]),
            project: Value::Null,
            sources: BTreeMap::new(),
        },
        packages,
    };
    let providers = Arc::new(ProviderSet::new(config.providers.clone()));
    let planned = plan::plan(&candidate, config, &providers, None)?;
    Ok((candidate, planned, providers))
}
