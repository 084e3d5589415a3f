//! Dependency preparation at review (seed 002 §4 "Prepared execution and
//! limits"): a Bun package with runtime dependencies gets a prepared
//! Package/1 (its source plus the frozen production `node_modules`) made by
//! the fixed Bun installer inside the same envelope a Run uses, with network
//! only there. The admitted target pins that prepared package; `jig.lock`
//! keeps naming the source package.
//!
//! This room never repairs a lock, never trusts a development installation
//! (`node_modules` in the source is not captured) and never shows installer
//! output: refusals carry a `PACKAGE_BUN_*` code at the package's
//! `package.json` and fixed guidance.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flow::digest::sha256_digest;
use flow::json::{ascii_quote, Value};
use flow::package::Package;
use serde_json::json;

pub mod files_list;
pub mod layout;
mod manifest;
mod python;
pub use python::codes as python_codes;
mod workspace;

pub use layout::Layout;
pub(crate) use manifest::parse_lock;
use manifest::*;
pub(crate) use python::PYTHON_SITE;

use super::{Diagnostic, PlanError, Recipe, RecipeKind};
use crate::config::HostConfig;
use crate::state::Store;
use jig_sandbox::{Budget, Launch, Limits, Sandbox};

const MIB: u64 = 1024 * 1024;

/// Each contained preparation's hard deadline (docs/src/containment.md, Ceilings: 60 s).
pub(crate) const PREPARATION_DEADLINE: Duration = Duration::from_secs(60);
/// The whole dependency-planning phase of one review (seed 002 §4: 180 s).
pub(crate) const PLANNING_DEADLINE: Duration = Duration::from_secs(180);
/// Distinct actual preparations per review; reuse counts none.
pub const MAX_PREPARATIONS: usize = 16;
/// Aggregate prepared content per review; reuse counts none.
pub(crate) const MAX_PREPARED_TOTAL_BYTES: u64 = 256 * MIB;
/// One package before installation: files and bytes.
pub const MAX_SOURCE_FILES: usize = 4096;
pub(crate) const MAX_SOURCE_BYTES: u64 = 16 * MIB;
/// One package after installation: files and bytes.
pub const MAX_PREPARED_FILES: usize = 4096;
pub(crate) const MAX_PREPARED_BYTES: u64 = 32 * MIB;
/// Metadata bounds: one manifest, the root lock.
pub const MAX_MANIFEST_BYTES: usize = MIB as usize;
pub const MAX_LOCK_BYTES: usize = 2 * MIB as usize;

/// The registry Bun is given when the host configuration names none.
pub(crate) const DEFAULT_NPM_REGISTRY: &str = "https://registry.npmjs.org/";
/// The Run SDK this jig bundles: a manifest dependency on it is satisfied
/// by the bundled copy, never fetched.
pub(crate) const BUNDLED_SDK: &str = "@jigging/flow";
/// The exact revision the bundled SDK reports (its package.json version).
pub const BUNDLED_SDK_VERSION: &str = "1.0.0";
/// The `workspace:` forms of the bundled SDK it satisfies when no captured
/// workspace member has its name: any revision of the member, or its
/// exact one (`workspace:2.0.0` asks for a revision this jig does not
/// bundle).
pub const BUNDLED_SDK_WORKSPACE_SPECS: [&str; 4] = [
    "workspace:*",
    "workspace:^",
    "workspace:~",
    "workspace:1.0.0",
];
/// Bumped whenever the installer arguments or capture rules change, so an
/// admitted preparation made another way is not reused.
const PREPARATION_RECIPE: &str = "jig-bun-preparation/3";

pub(crate) const MANIFEST: &str = "package.json";
pub const LOCK: &str = "bun.lock";
const BINARY_LOCK: &str = "bun.lockb";
const NPMRC: &str = ".npmrc";

/// The manifest fields a standalone preparation does not support.
const UNSUPPORTED_MANIFEST_FIELDS: [&str; 6] = [
    "workspaces",
    "patchedDependencies",
    "overrides",
    "resolutions",
    "catalog",
    "catalogs",
];
/// Dependency maps recorded for the root in `bun.lock`.
const DEPENDENCY_MAPS: [&str; 4] = [
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
];
/// The maps a production install brings into the prepared tree.
const RUNTIME_MAPS: [&str; 3] = ["dependencies", "optionalDependencies", "peerDependencies"];

/// The codes of this room.
pub mod codes {
    pub(crate) const PREPARATION_FAILED: &str = "PACKAGE_BUN_PREPARATION_FAILED";
    pub(crate) const PERMISSION_REQUIRED: &str = "PACKAGE_BUN_RESOLUTION_PERMISSION_REQUIRED";
    pub(crate) const LOCK_INVALID: &str = "PACKAGE_BUN_LOCK_INVALID";
    pub(crate) const LOCK_STALE: &str = "PACKAGE_BUN_LOCK_STALE";
    pub(crate) const SOURCE_UNSUPPORTED: &str = "PACKAGE_BUN_SOURCE_UNSUPPORTED";
    pub(crate) const CONFIG_UNSUPPORTED: &str = "PACKAGE_BUN_CONFIG_UNSUPPORTED";
    pub(crate) const MANIFEST_INVALID: &str = "PACKAGE_BUN_MANIFEST_INVALID";
    pub(crate) const MANIFEST_UNSUPPORTED: &str = "PACKAGE_BUN_MANIFEST_UNSUPPORTED";
    pub(crate) const LIMIT_EXCEEDED: &str = "PACKAGE_BUN_LIMIT_EXCEEDED";
    pub(crate) const WORKSPACE_INVALID: &str = "PACKAGE_BUN_WORKSPACE_INVALID";
    pub(crate) const PREPARED_MISSING: &str = "PROJECT_STATE_INVALID";
}

/// The stderr text before each new resolution, `path` already escaped: the
/// reference's words, then the two facts seed 002 §5 adds (loopback
/// services too; the flag filters no destination).
pub(crate) fn resolution_warning(quoted_path: &str) -> String {
    format!(
        "Resolving dependencies for {quoted_path}. Bun may contact dependency-selected public or \
         private-network services before graph validation; requests cannot be undone, and \
         unsupported dependencies may still fail. Applies only to this review; Runs gain no \
         network access. {RESOLUTION_REACH}"
    )
}

/// What a resolution may reach beyond the reference's words (seed 002 §5).
pub const RESOLUTION_REACH: &str = "Loopback services reachable from the host may be \
     contacted too. The flag is not a network destination filter.";

/// What one review asks of preparation.
pub struct Request<'a> {
    /// The project root: Flow paths are relative to it, and an ancestor Bun
    /// workspace is looked for above each Flow.
    pub root: &'a Path,
    pub config: &'a HostConfig,
    /// `jig review --allow-resolution-network`: local to this review.
    pub allow_resolution_network: bool,
    /// The active admission's Plan: its preparations may be reused exactly.
    pub admitted: Option<&'a Value>,
    pub store: &'a Store,
    /// Where the per-package resolution warning goes (stderr).
    pub warn: &'a mut dyn FnMut(&str),
    /// Where the review's notes go (the review text): each names a
    /// package's manifest, already escaped, and what this host made of it.
    pub note: &'a mut dyn FnMut(String),
}

/// The note of a package whose manifest names the bundled SDK from a
/// workspace that has no member of that name.
fn bundled_sdk_note(at: &str, spec: &str) -> String {
    format!(
        "{} names {BUNDLED_SDK} {}: the bundled SDK {BUNDLED_SDK_VERSION} is used",
        ascii_quote(at),
        ascii_quote(spec)
    )
}

/// A refusal and whether it makes the candidate invalid or this host unable.
enum Refusal {
    Invalid(Diagnostic),
    Unavailable(Diagnostic),
}

fn refusal(code: &str, at: &str, pointer: Option<String>, message: &str) -> Refusal {
    let diagnostic = Diagnostic {
        code: code.into(),
        path: Some(at.into()),
        pointer,
        message: message.into(),
    };
    match code {
        codes::PREPARATION_FAILED
        | codes::PERMISSION_REQUIRED
        | python::codes::PREPARATION_FAILED
        | python::codes::PERMISSION_REQUIRED
        | python::codes::RESOLUTION_UNSUPPORTED => Refusal::Unavailable(diagnostic),
        _ => Refusal::Invalid(diagnostic),
    }
}

/// Prepare every Bun target of `plan` that has runtime dependencies, and pin
/// each prepared package as `execution.<path>.prepared`. Returns the newly
/// prepared packages, which the caller retains in the store.
pub fn prepare(
    packages: &BTreeMap<String, Package>,
    plan: &mut Value,
    request: Request,
) -> Result<Vec<Package>, PlanError> {
    let registry = registry(request.config);
    let mut session = Session {
        request,
        registry,
        sandbox: None,
        budget: Budget::root(),
        started: std::time::Instant::now(),
        prepared_count: 0,
        prepared_bytes: 0,
    };
    let mut invalid = Vec::new();
    let mut unavailable = Vec::new();
    let mut made = Vec::new();
    for (path, package) in packages {
        let recipe = match Recipe::from_value(&plan["execution"][path]["recipe"]) {
            Some(recipe) if recipe.kind == RecipeKind::Bun => recipe,
            Some(recipe) if recipe.kind == RecipeKind::Python => {
                match session.python_package(path, package, &recipe) {
                    Ok(None) => {}
                    Ok(Some((evidence, fresh))) => {
                        plan["execution"][path]["prepared"] = evidence;
                        made.extend(fresh);
                    }
                    Err(Refusal::Invalid(d)) => invalid.push(d),
                    Err(Refusal::Unavailable(d)) => unavailable.push(d),
                }
                continue;
            }
            Some(recipe) if matches!(recipe.kind, RecipeKind::Deno | RecipeKind::Node) => {
                // Only Bun prepares dependencies; another runtime would run
                // the package without them.
                if has_runtime_dependencies(package) {
                    unavailable.push(Diagnostic {
                        code: codes::PREPARATION_FAILED.into(),
                        path: Some(format!("{path}/{MANIFEST}")),
                        pointer: None,
                        message: "runtime dependencies are prepared by Bun, and this host runs \
                                  the package with another runtime; configure Bun"
                            .into(),
                    });
                }
                continue;
            }
            _ => continue,
        };
        match session.package(path, package, &recipe) {
            Ok(None) => {}
            Ok(Some((evidence, fresh))) => {
                plan["execution"][path]["prepared"] = evidence;
                made.extend(fresh);
            }
            Err(Refusal::Invalid(d)) => invalid.push(d),
            Err(Refusal::Unavailable(d)) => unavailable.push(d),
        }
    }
    if !invalid.is_empty() {
        invalid.extend(unavailable);
        return Err(PlanError::Invalid(invalid));
    }
    if !unavailable.is_empty() {
        return Err(PlanError::Unavailable(unavailable));
    }
    Ok(made)
}

/// A package's source before installation: at most [`MAX_SOURCE_FILES`]
/// files and [`MAX_SOURCE_BYTES`]; past it, `code` at `at`.
fn check_source_size(
    files: &BTreeMap<String, Vec<u8>>,
    code: &str,
    at: &str,
) -> Result<(), Refusal> {
    check_size(
        files,
        (MAX_SOURCE_FILES, MAX_SOURCE_BYTES),
        code,
        at,
        "the package has more than 4096 files or 16 MiB before installation",
    )
}

/// A prepared package: at most [`MAX_PREPARED_FILES`] files and
/// [`MAX_PREPARED_BYTES`]; past it, `code` at `at`.
fn check_prepared_size(
    files: &BTreeMap<String, Vec<u8>>,
    code: &str,
    at: &str,
) -> Result<(), Refusal> {
    check_size(
        files,
        (MAX_PREPARED_FILES, MAX_PREPARED_BYTES),
        code,
        at,
        "the prepared package has more than 4096 files or 32 MiB after installation",
    )
}

/// At most `max_files` files and `max_bytes` of content; past either,
/// `code` at `at` with `message`.
fn check_size(
    files: &BTreeMap<String, Vec<u8>>,
    (max_files, max_bytes): (usize, u64),
    code: &str,
    at: &str,
    message: &str,
) -> Result<(), Refusal> {
    let bytes: u64 = files.values().map(|c| c.len() as u64).sum();
    if files.len() > max_files || bytes > max_bytes {
        return Err(refusal(code, at, None, message));
    }
    Ok(())
}

fn fits_aggregate(used: u64, bytes: u64) -> bool {
    used.saturating_add(bytes) <= MAX_PREPARED_TOTAL_BYTES
}

/// The installer's deadline after `elapsed` of dependency planning: its own
/// 60 s, cut to what is left of the review's 180 s; `None` when none is.
fn installer_deadline(elapsed: Duration) -> Option<Duration> {
    let left = PLANNING_DEADLINE.saturating_sub(elapsed);
    (!left.is_zero()).then(|| left.min(PREPARATION_DEADLINE))
}

fn has_runtime_dependencies(package: &Package) -> bool {
    package
        .files()
        .get(MANIFEST)
        .and_then(|bytes| parse_manifest(bytes, "").ok())
        .is_some_and(|m| !m.runtime_dependencies().is_empty())
}

/// The npm registry Bun is given: the configured one, else the public
/// registry, with a trailing `/`.
pub fn registry(config: &HostConfig) -> String {
    let mut registry = config
        .dependencies
        .npm_registry
        .clone()
        .unwrap_or_else(|| DEFAULT_NPM_REGISTRY.into());
    if !registry.ends_with('/') {
        registry.push('/');
    }
    registry
}

struct Session<'a> {
    request: Request<'a>,
    registry: String,
    sandbox: Option<Arc<dyn Sandbox>>,
    budget: Budget,
    started: std::time::Instant,
    prepared_count: usize,
    prepared_bytes: u64,
}

impl Session<'_> {
    /// Count one actual preparation against the review's
    /// [`MAX_PREPARATIONS`]; past it, `code` at `at`.
    fn take_preparation(&mut self, code: &str, at: &str) -> Result<(), Refusal> {
        if self.prepared_count >= MAX_PREPARATIONS {
            return Err(refusal(
                code,
                at,
                None,
                "one review prepares at most 16 packages",
            ));
        }
        self.prepared_count += 1;
        Ok(())
    }

    /// Count `prepared` against the review's aggregate of prepared content;
    /// past it, `code` at `at`.
    fn take_prepared_bytes(
        &mut self,
        prepared: &Package,
        code: &str,
        at: &str,
    ) -> Result<(), Refusal> {
        let bytes: u64 = prepared.files().values().map(|c| c.len() as u64).sum();
        if !fits_aggregate(self.prepared_bytes, bytes) {
            return Err(refusal(
                code,
                at,
                None,
                "one review prepares at most 256 MiB of content",
            ));
        }
        self.prepared_bytes += bytes;
        Ok(())
    }

    /// Prepare or reuse one package: `None` when it needs no preparation.
    fn package(
        &mut self,
        path: &str,
        package: &Package,
        recipe: &Recipe,
    ) -> Result<Option<(Value, Option<Package>)>, Refusal> {
        let at = format!("{path}/{MANIFEST}");
        let files = package.files();
        let Some(manifest_bytes) = files.get(MANIFEST) else {
            return Ok(None);
        };
        let manifest = parse_manifest(manifest_bytes, &at)?;
        check_bundled_sdk(&manifest, &at)?;
        let sdk_spec = manifest.sdk_workspace_spec();
        if manifest.runtime_dependencies().is_empty() {
            if let Some(spec) = &sdk_spec {
                (self.request.note)(bundled_sdk_note(&at, spec));
            }
            return Ok(None);
        }
        if files.contains_key(NPMRC) {
            return Err(refusal(
                codes::CONFIG_UNSUPPORTED,
                &at,
                None,
                "a package-local .npmrc is a separate Bun configuration input; remove it \
                 (the host configuration names the registry)",
            ));
        }
        let inputs = if manifest.uses_workspace() {
            workspace::inputs(self.request.root, path, package, &self.registry, &at)?
        } else {
            standalone_inputs(package, &manifest, &self.registry, &at)?
        };
        // A workspace that has the SDK as a member prepares it as one.
        if let Some(spec) = &sdk_spec {
            if !inputs.members.values().any(|name| name == BUNDLED_SDK) {
                (self.request.note)(bundled_sdk_note(&at, spec));
            }
        }
        let recipe_digest = self.recipe_digest(recipe);
        let evidence = |digest: &str, lock: &str| {
            json!({
                "digest": digest,
                "source": inputs.digest,
                "recipe": recipe_digest,
                "lock": lock,
            })
        };
        let lock_kind = if inputs.lock.is_some() {
            "authored"
        } else {
            "resolved"
        };
        if let Some(previous) = self.reuse(path, &inputs.digest, &recipe_digest, &at)? {
            return Ok(Some((previous, None)));
        }
        if inputs.lock.is_none() && !self.request.allow_resolution_network {
            return Err(refusal(
                codes::PERMISSION_REQUIRED,
                &at,
                None,
                "the package has runtime dependencies and no bun.lock; supply a bun.lock, or \
                 rerun jig review --allow-resolution-network to let Bun resolve one",
            ));
        }
        self.take_preparation(codes::LIMIT_EXCEEDED, &at)?;
        let runtime = recipe
            .runtime
            .clone()
            .ok_or_else(|| refusal(codes::PREPARATION_FAILED, &at, None, "no Bun on this host"))?;
        let (prepared, layout) = self.install(path, package, &inputs, &runtime, &at)?;
        self.take_prepared_bytes(&prepared, codes::LIMIT_EXCEEDED, &at)?;
        let mut evidence = evidence(prepared.digest(), lock_kind);
        if !layout.is_empty() {
            // Retained beside the prepared package; its digest is part of
            // the prepared identity, so a changed layout is a changed target.
            let digest = self
                .request
                .store
                .put_blob(&layout.to_json())
                .map_err(|e| refusal(e.code(), &at, None, &e.to_string()))?;
            evidence["layout"] = json!(digest);
        }
        Ok(Some((evidence, Some(prepared))))
    }

    /// Exact reuse of the admitted preparation of `path`: same source, same
    /// recipe. Its retained bytes must be intact; they are never refetched.
    fn reuse(
        &self,
        path: &str,
        source: &str,
        recipe_digest: &str,
        at: &str,
    ) -> Result<Option<Value>, Refusal> {
        let Some(previous) = self
            .request
            .admitted
            .and_then(|plan| plan.pointer(&format!("/execution/{}/prepared", pointer_token(path))))
        else {
            return Ok(None);
        };
        if previous["source"] != json!(source) || previous["recipe"] != json!(recipe_digest) {
            return Ok(None);
        }
        let digest = previous["digest"].as_str().unwrap_or_default();
        let retained = self.request.store.get_package(digest).ok().filter(|files| {
            previous.get("layout").is_none_or(|layout| {
                retained_layout(self.request.store, layout.as_str(), files).is_ok()
            })
        });
        match retained {
            Some(_) => Ok(Some(previous.clone())),
            None => Err(refusal(
                codes::PREPARED_MISSING,
                at,
                None,
                "the admitted prepared package is missing or corrupt in .jig; it is not \
                 fetched again; remove the project's .jig state to start over",
            )),
        }
    }

    /// The reviewed identity of how preparation runs here: the installer's
    /// bytes, the registry, the arguments and the containment mode.
    fn recipe_digest(&self, recipe: &Recipe) -> String {
        let identity = json!({
            "recipe": PREPARATION_RECIPE,
            "installer": recipe.runtime_digest,
            "registry": self.registry,
            "containment": format!("{:?}", self.request.config.containment.mode),
        });
        sha256_digest(&flow::json::canonical(&identity))
    }

    fn sandbox(&mut self, at: &str) -> Result<Arc<dyn Sandbox>, Refusal> {
        self.sandbox_for(codes::PREPARATION_FAILED, at)
    }

    /// The envelope the installers run in, made once per review; a host
    /// that cannot make one refuses with `code`.
    fn sandbox_for(&mut self, code: &str, at: &str) -> Result<Arc<dyn Sandbox>, Refusal> {
        if let Some(sandbox) = &self.sandbox {
            return Ok(sandbox.clone());
        }
        let sandbox = jig_sandbox::select(&self.request.config.containment).map_err(|_| {
            refusal(
                code,
                at,
                None,
                "this host cannot start the contained installer; see jig doctor",
            )
        })?;
        self.sandbox = Some(sandbox.clone());
        Ok(sandbox)
    }

    /// Stage the manifests and lock only, resolve when permitted, install
    /// frozen, then materialise the authored files over the installed tree.
    fn install(
        &mut self,
        path: &str,
        package: &Package,
        inputs: &Inputs,
        runtime: &Path,
        at: &str,
    ) -> Result<(Package, Layout), Refusal> {
        let failed = |message: &str| refusal(codes::PREPARATION_FAILED, at, None, message);
        let sandbox = self.sandbox(at)?;
        let work =
            Workspace::new().map_err(|_| failed("cannot create the preparation directory"))?;
        for (name, bytes) in &inputs.staged {
            let target = work.package.join(name);
            std::fs::create_dir_all(target.parent().expect("inside the staging root"))
                .and_then(|()| std::fs::write(&target, bytes))
                .map_err(|_| failed("cannot stage the manifests"))?;
        }
        let lock_bytes = match &inputs.lock {
            Some(bytes) => {
                std::fs::write(work.package.join(LOCK), bytes)
                    .map_err(|_| failed("cannot stage bun.lock"))?;
                bytes.clone()
            }
            None => {
                (self.request.warn)(&resolution_warning(&ascii_quote(path)));
                self.run_installer(&sandbox, runtime, &work, Step::Resolve, None, at)?;
                let bytes = std::fs::read(work.package.join(LOCK))
                    .map_err(|_| failed("Bun resolved no bun.lock"))?;
                let lock = parse_lock(&bytes)
                    .map_err(|_| failed("Bun resolved an unreadable bun.lock"))?;
                check_lock_sources(&lock, &self.registry, &inputs.members, at)?;
                bytes
            }
        };
        let filter = inputs.filter.as_deref();
        self.run_installer(&sandbox, runtime, &work, Step::Install, filter, at)?;
        // Frozen: the installer must not have rewritten the lock.
        if std::fs::read(work.package.join(LOCK)).ok().as_deref() != Some(&lock_bytes[..]) {
            return Err(failed("the frozen install changed bun.lock"));
        }
        let (mut files, aliases) = if inputs.member.is_empty() {
            let mut files = BTreeMap::new();
            capture_tree(
                &work.package.join("node_modules"),
                "node_modules",
                &mut files,
            )
            .map_err(|why| refusal(codes::PREPARATION_FAILED, at, None, why))?;
            (files, Vec::new())
        } else {
            workspace::flatten(&work.package, inputs)
                .map_err(|why| refusal(codes::PREPARATION_FAILED, at, None, why))?
        };
        for (name, content) in package.files() {
            files.insert(name.clone(), content.clone());
        }
        if inputs.lock.is_none() {
            // The generated lock lives only in the retained execution package.
            files.insert(LOCK.into(), lock_bytes);
        }
        check_prepared_size(&files, codes::LIMIT_EXCEEDED, at)?;
        // Files and aliases share the record and content bounds; any other
        // fault of the installer's links fails closed.
        // The Flow's member path is part of the layout, so a moved member
        // is a changed target.
        let layout = Layout::new(aliases, &files)
            .and_then(|layout| match inputs.member.as_str() {
                "" => Ok(layout),
                member => layout.with_member(member, &files),
            })
            .map_err(|why| {
                let code = if why.starts_with("the prepared package has more")
                    || why.starts_with("the workspace layout is larger")
                {
                    codes::LIMIT_EXCEEDED
                } else {
                    codes::PREPARATION_FAILED
                };
                refusal(code, at, None, why)
            })?;
        let package = Package::from_files(files)
            .map_err(|_| failed("the installed tree is not a valid Package/1 tree"))?;
        Ok((package, layout))
    }

    fn run_installer(
        &mut self,
        sandbox: &Arc<dyn Sandbox>,
        runtime: &Path,
        work: &Workspace,
        step: Step,
        filter: Option<&str>,
        at: &str,
    ) -> Result<(), Refusal> {
        let launch = installer_launch(runtime, work, step, filter, &self.registry);
        let exit_failure = match step {
            Step::Resolve => {
                "Bun could not resolve the dependencies; check the manifest's \
                 dependency names and versions against the registry"
            }
            Step::Install => {
                "Bun could not install the locked dependencies from the registry; \
                 check that the lock matches the manifest and the registry serves it"
            }
        };
        self.run_contained(
            &launch,
            sandbox,
            codes::PREPARATION_FAILED,
            exit_failure,
            at,
        )
    }

    /// Run one installer `launch` in the preparation envelope within this
    /// review's deadlines; its output is drained, never shown. A refusal is
    /// `code` at `at`, `exit_failure` when the installer itself failed.
    fn run_contained(
        &mut self,
        launch: &Launch,
        sandbox: &Arc<dyn Sandbox>,
        code: &str,
        exit_failure: &str,
        at: &str,
    ) -> Result<(), Refusal> {
        let failed = |message: &str| refusal(code, at, None, message);
        let Some(deadline) = installer_deadline(self.started.elapsed()) else {
            return Err(failed("dependency planning exceeded its 180 s deadline"));
        };
        let _reservation = self
            .budget
            .reserve_limits(Limits::PREPARATION)
            .map_err(|_| failed("no envelope is free for the installer"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|_| failed("cannot start the installer"))?;
        runtime.block_on(async {
            let mut contained = sandbox
                .spawn(launch)
                .map_err(|_| failed("cannot start the contained installer"))?;
            drop(contained.child.stdin.take());
            // Installer output is drained, never shown.
            let drains: Vec<_> = [
                contained.child.stdout.take().map(boxed),
                contained.child.stderr.take().map(boxed),
            ]
            .into_iter()
            .flatten()
            .map(|mut out| {
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut out, &mut tokio::io::sink()).await;
                })
            })
            .collect();
            let status = tokio::time::timeout(deadline, contained.child.wait()).await;
            if status.is_err() {
                contained.terminate().await;
            }
            let cleaned = contained.cleanup();
            for drain in drains {
                drain.abort();
            }
            match status {
                Err(_) if deadline < PREPARATION_DEADLINE => {
                    Err(failed("dependency planning exceeded its 180 s deadline"))
                }
                Err(_) => Err(failed("the installer did not finish within 60 s")),
                Ok(Err(_)) => Err(failed("the installer could not be waited for")),
                Ok(Ok(status)) if !status.success() => Err(failed(exit_failure)),
                Ok(Ok(_)) => {
                    cleaned.map_err(|_| failed("the installer's envelope was not cleaned up"))
                }
            }
        })
    }
}

/// The layout retained under `digest` for the prepared `files`, verified
/// by digest and checked as when it was made.
pub fn retained_layout(
    store: &Store,
    digest: Option<&str>,
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<Layout, String> {
    let digest = digest.ok_or("the prepared layout digest is not a string")?;
    let bytes = store.get_blob(digest).map_err(|e| e.to_string())?;
    Layout::from_json(&bytes, files).map_err(|why| format!("prepared layout {digest}: {why}"))
}

/// What a standalone package stages: its manifest and supplied lock, checked.
fn standalone_inputs(
    package: &Package,
    manifest: &Manifest,
    registry: &str,
    at: &str,
) -> Result<Inputs, Refusal> {
    let files = package.files();
    for field in UNSUPPORTED_MANIFEST_FIELDS {
        if manifest.value.contains_key(field) {
            return Err(refusal(
                codes::MANIFEST_UNSUPPORTED,
                at,
                Some(format!("/{field}")),
                "workspaces, patches, overrides, resolutions and catalogs are not \
                     supported in a standalone package manifest",
            ));
        }
    }
    check_manifest_sources(manifest, at)?;
    check_source_size(files, codes::LIMIT_EXCEEDED, at)?;
    if files.contains_key(BINARY_LOCK) {
        return Err(refusal(
                codes::LOCK_INVALID,
                at,
                None,
                "bun.lockb is not supported; supply the text bun.lock (bun install --save-text-lockfile)",
            ));
    }
    let authored = match files.get(LOCK) {
        None => None,
        Some(bytes) if bytes.len() > MAX_LOCK_BYTES => {
            return Err(refusal(
                codes::LIMIT_EXCEEDED,
                at,
                None,
                "bun.lock is larger than 2 MiB",
            ))
        }
        Some(bytes) => {
            let lock = parse_lock(bytes).map_err(|why| {
                refusal(codes::LOCK_INVALID, at, None, &format!("bun.lock {why}"))
            })?;
            check_lock_sources(&lock, registry, &BTreeMap::new(), at)?;
            check_lock_current(&lock, "", manifest, at)?;
            Some(lock)
        }
    };
    let lock = authored
        .as_ref()
        .map(|lock| staged_lock(lock, &files[LOCK]));
    Ok(Inputs {
        staged: BTreeMap::from([(MANIFEST.to_string(), staged_manifest(manifest))]),
        lock,
        member: String::new(),
        filter: None,
        libraries: BTreeMap::new(),
        members: BTreeMap::new(),
        digest: package.digest().to_string(),
    })
}

/// Everything one preparation stages and captures, already checked.
pub(super) struct Inputs {
    /// Manifests as Bun sees them, by staged path (`package.json`,
    /// `libs/util/package.json`, ...).
    staged: BTreeMap<String, Vec<u8>>,
    /// The supplied lock as staged; `None` when resolution is needed.
    lock: Option<Vec<u8>>,
    /// The Flow's directory in the staged tree (`""` standalone).
    member: String,
    /// `--filter` for a workspace install: the Flow member's name.
    filter: Option<String>,
    /// Selected library members: staged path → (name, captured files).
    libraries: BTreeMap<String, (String, BTreeMap<String, Vec<u8>>)>,
    /// Declared workspace members: staged path → name.
    members: BTreeMap<String, String>,
    /// Digest of every captured input: reuse needs it to match exactly.
    digest: String,
}

fn boxed<R: tokio::io::AsyncRead + Send + Unpin + 'static>(
    r: R,
) -> Box<dyn tokio::io::AsyncRead + Send + Unpin> {
    Box::new(r)
}

#[derive(Clone, Copy)]
enum Step {
    /// `--lockfile-only`: resolve, write bun.lock, fetch no tarball.
    Resolve,
    /// The frozen production install.
    Install,
}

/// The preparation's private directories: an empty read-only "package"
/// and the writable scratch holding the staged package, cache and home.
struct Workspace {
    _dir: tempfile::TempDir,
    empty: PathBuf,
    scratch: PathBuf,
    package: PathBuf,
}

impl Workspace {
    fn new() -> std::io::Result<Workspace> {
        let dir = tempfile::Builder::new().prefix("jig-prepare-").tempdir()?;
        let empty = dir.path().join("empty");
        let scratch = dir.path().join("scratch");
        let package = scratch.join("package");
        for d in [
            &empty,
            &package,
            &scratch.join("cache"),
            &scratch.join("home"),
        ] {
            std::fs::create_dir_all(d)?;
        }
        Ok(Workspace {
            _dir: dir,
            empty,
            scratch,
            package,
        })
    }
}

/// Files the installer needs to reach a registry by name; bound read-only
/// when present, nothing else of the host's /etc.
const NETWORK_FILES: [&str; 5] = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
];

fn installer_launch(
    runtime: &Path,
    work: &Workspace,
    step: Step,
    filter: Option<&str>,
    registry: &str,
) -> Launch {
    let mut args: Vec<std::ffi::OsString> = vec!["install".into()];
    if let Some(name) = filter {
        args.push(format!("--filter={name}").into());
    }
    match step {
        Step::Resolve => args.push("--lockfile-only".into()),
        Step::Install => {
            args.push("--frozen-lockfile".into());
            args.push("--production".into());
        }
    }
    for fixed in [
        "--ignore-scripts",
        "--config=/dev/null",
        "--linker=hoisted",
        "--backend=copyfile",
        "--no-progress",
        "--no-summary",
    ] {
        args.push(fixed.into());
    }
    args.push(format!("--registry={registry}").into());
    args.push(format!("--cache-dir={}", work.scratch.join("cache").display()).into());
    Launch {
        program: runtime.to_path_buf(),
        args,
        env: vec![
            (
                "HOME".into(),
                work.scratch.join("home").display().to_string(),
            ),
            ("LANG".into(), "C.UTF-8".into()),
            ("NO_COLOR".into(), "1".into()),
            ("DO_NOT_TRACK".into(), "1".into()),
        ],
        cwd: work.package.clone(),
        package: work.empty.clone(),
        scratch: work.scratch.clone(),
        // The prepared package is read back from it.
        scratch_bytes: None,
        read_only: NETWORK_FILES
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.exists())
            .collect(),
        shown: Vec::new(),
        attachments: Vec::new(),
        limits: Limits::PREPARATION,
        network: true,
        view: None,
    }
}

/// Read an installed `node_modules` at `root` into `files` under `prefix`
/// without following links: regular files only, `.bin` links and caches
/// skipped, any other link fails closed.
fn capture_tree(
    root: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), &'static str> {
    if std::fs::symlink_metadata(root).is_err() {
        return Ok(());
    }
    let mut pending = vec![(root.to_path_buf(), prefix.to_string())];
    while let Some((dir, name)) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|_| "cannot read the installed tree")?;
        for entry in entries {
            let entry = entry.map_err(|_| "cannot read the installed tree")?;
            let file_name = entry.file_name();
            let file_name = file_name
                .to_str()
                .ok_or("the installed tree has a file name that is not UTF-8")?;
            let relative = format!("{name}/{file_name}");
            let kind = entry
                .file_type()
                .map_err(|_| "cannot read the installed tree")?;
            if kind.is_dir() {
                if matches!(file_name, ".bin" | ".cache") && name.ends_with("node_modules") {
                    continue;
                }
                pending.push((entry.path(), relative));
            } else if kind.is_file() {
                let content =
                    std::fs::read(entry.path()).map_err(|_| "cannot read the installed tree")?;
                add_file(files, relative, content)?;
            } else if kind.is_symlink() && name.ends_with("/.bin") {
                continue;
            } else {
                return Err("the installed tree has a link or special file");
            }
        }
    }
    Ok(())
}

/// Add one prepared file; a second file at the same path is a collision.
fn add_file(
    files: &mut BTreeMap<String, Vec<u8>>,
    path: String,
    content: Vec<u8>,
) -> Result<(), &'static str> {
    let bytes: u64 = files.values().map(|c| c.len() as u64).sum::<u64>() + content.len() as u64;
    if files.len() >= MAX_PREPARED_FILES || bytes > MAX_PREPARED_BYTES {
        return Err("the prepared package has more than 4096 files or 32 MiB after installation");
    }
    if files.insert(path, content).is_some() {
        return Err("two installed files share one prepared path");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
