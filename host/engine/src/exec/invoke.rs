//! One invocation, root or child: resolve it, check its input, launch it
//! (a contained process or `flow.wasm` under wasmtime), serve it, and settle
//! what it returned.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use flow::package::Package;
use flow::wire::{ErrorCode, FlowRunParams};
use jig_sandbox::Contained;
use jig_sandbox::Hold;
use jig_sandbox::Launch;
use serde_json::json;

use super::invocation::{Activity, InvocationServices};
use super::outcome::{
    check_result, classify, collect_stderr, exit_wait, finish_guest, invalid_details, Exit,
};
use super::peer::PeerLimits;
use super::peer::PeerReport;
use super::peer::Services;
use super::services::ChannelLink;
use super::{
    peer, sdk, wasm, AttachmentGrant, Diagnostics, Executor, Failure, Invocation, Resolved,
    Success, DENO_IMPORT_MAP, JS_GATE, JS_SUPPORT, PYTHON_GATE, PYTHON_SUPPORT,
};
use crate::code::{FailureCode, HostCode};
use crate::plan::RecipeKind;

impl Executor {
    pub(super) async fn run_inner(
        self: Arc<Self>,
        invocation: Invocation,
        root: bool,
        link: ChannelLink,
    ) -> Result<Success, Failure> {
        let resolved = self.resolve(&invocation.target, root)?;
        if let Err(reason) = self.verify_environment(&resolved) {
            return Err(Failure::new(
                HostCode::ReviewRequired,
                format!("the admitted execution environment changed ({reason}); run jig review"),
            )
            .with_details(
                json!({ "reason": "EXECUTION_ENVIRONMENT_CHANGED", "flowStarted": false }),
            ));
        }
        let package = self.package(&resolved)?;
        if let Some(schema) = package.input_schema() {
            if let Err(invalid) = schema.validate(&invocation.input) {
                return Err(Failure::new(
                    ErrorCode::InvalidInput,
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
                    code: e.code.into(),
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
                    .map_err(|e| Failure::new(HostCode::ProjectStateInvalid, e))?,
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
                Failure::new(
                    ErrorCode::ExecutionFailed,
                    format!("cannot prepare the Run: {e}"),
                )
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
                            .map_err(|e| Failure::new(HostCode::ProjectStateInvalid, e))?;
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
                        .map_err(|e| Failure::new(FailureCode::raised(e.code()), e.to_string()))?;
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
                return Err(Failure::new(
                    FailureCode::raised(exhausted.code()),
                    exhausted.to_string(),
                ));
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
                code: HostCode::CleanupFailed.into(),
                message: format!("the Run ended but its private files could not be removed: {e}"),
                details: None,
                diagnostics,
            });
        }
        let result = classify(&report, &exit).map_err(|mut f| {
            // An envelope that never started (bubblewrap failed before the
            // program ran) says why where jig knows the cause.
            if f.code == FailureCode::Run(ErrorCode::ExecutionFailed) {
                if let Some(why) = jig_sandbox::bwrap::known_failure(&diagnostics.stderr) {
                    f.message = format!("{}: {why}", f.message);
                }
            }
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

    /// Is the admitted execution environment of `resolved` (its recipe,
    /// builtin providers and grants) still the one this host has?
    pub(super) fn verify_environment(&self, resolved: &Resolved) -> Result<(), String> {
        resolved
            .recipe
            .verify()
            .and_then(|()| crate::plan::builtin::verify(&resolved.providers, &self.agent))
            .and_then(|()| self.providers.verify_grants(&resolved.providers))
    }

    /// The verified package of `resolved`. One read and one digest pass
    /// per command (the caller's, when it loaded the root's package): the
    /// package tree is made from, or checked against, these same bytes.
    pub(super) fn package(&self, resolved: &Resolved) -> Result<Arc<Package>, Failure> {
        let loaded = {
            let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
            match loaded.as_ref() {
                Some(p) if p.digest() == resolved.digest => loaded.take(),
                _ => None,
            }
        };
        match loaded {
            Some(package) => Ok(package),
            None => Ok(Arc::new(
                self.store
                    .load_package(&resolved.digest)
                    .map_err(|e| Failure::new(FailureCode::raised(e.code()), e.to_string()))?,
            )),
        }
    }

    pub(super) async fn launch(
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
        if recipe.kind == RecipeKind::Wasm {
            params.scratch = "/scratch".into();
            // The bytes verified when the package was loaded, not a re-read
            // (nor a copy).
            if !services.package.files().contains_key(&recipe.entrypoint) {
                return Err(Failure::new(
                    ErrorCode::ExecutionFailed,
                    "the package has no flow.wasm",
                ));
            }
            // The scratch and the writable attachment: the same bounded
            // tmpfs a process recipe gets, held by descriptor and preopened
            // through it.
            let bounded = |path: &std::path::Path, bytes: u64, what: &str| {
                self.sandbox.bounded_tmpfs(path, bytes).map_err(|e| {
                    Failure::new(
                        ErrorCode::ExecutionFailed,
                        format!("cannot create the {what}: {e}"),
                    )
                })
            };
            let scratch_fd = bounded(scratch, self.scratch_bytes, "scratch directory")?;
            let mut preopens = vec![wasm::Preopen {
                host: PathBuf::from(format!("/proc/self/fd/{}", scratch_fd.as_raw_fd())),
                guest: "/scratch".into(),
                writable: true,
            }];
            let mut held = Vec::new();
            for grant in &invocation.attachments {
                let guest = format!("/attachments/{}", grant.name);
                if let Some(a) = params.attachments.get_mut(&grant.name) {
                    a.path = guest.clone();
                }
                let host = if grant.writable {
                    let fd = bounded(
                        &grant.host,
                        jig_sandbox::OUTPUT_TMPFS_BYTES,
                        "writable attachment",
                    )?;
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
            drop(scratch_fd);
            let diagnostics = stderr.await.unwrap_or_default();
            return Ok((report, exit, diagnostics));
        }
        let process = self.process_launch(
            &services.resolved,
            &services.package,
            (package_dir, package_tree, entrypoint),
            scratch,
            &invocation.attachments,
        )?;
        self.dispatchable()?;
        let mut contained = match self.take_ahead(&process) {
            Some(contained) => contained,
            None => self.start_process(&process).map_err(|e| {
                Failure::new(
                    ErrorCode::ExecutionFailed,
                    format!("cannot start {}: {e}", process.launch.program.display()),
                )
            })?,
        };
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
                code: HostCode::CleanupFailed.into(),
                message: format!("the Run's processes could not be fenced and removed: {e}"),
                details: None,
                diagnostics,
            });
        }
        Ok((report, exit, diagnostics))
    }

    /// The envelope a process recipe runs in: its program and arguments,
    /// environment, SDK, package tree and runtime view. A Run made ahead
    /// ([`Executor::launch_ahead`]) is the same launch, so its envelope is
    /// the one this Run would have started.
    pub(super) fn process_launch(
        &self,
        resolved: &Resolved,
        package: &Package,
        (package_dir, package_tree, entrypoint): (&std::path::Path, Option<&std::path::Path>, &str),
        scratch: &std::path::Path,
        attachments: &[AttachmentGrant],
    ) -> Result<ProcessLaunch, Failure> {
        let recipe = &resolved.recipe;
        let entry = package_dir.join(entrypoint);
        // Python imports its SDK from the shared compiled tree (below) of a
        // lasting store; a throwaway store (`jig exec`) would compile it for
        // one command, so there, like the JavaScript runtimes, it gets the
        // sources in the Run's support directory.
        let compiled_sdk = recipe.kind == RecipeKind::Python && self.store.is_durable();
        // Bun and Node find `@jigging/flow` by walking up from the package:
        // a lasting store keeps one shared tree of it, shown at the Run's
        // `node_modules/@jigging/flow`, where an envelope can show a tree
        // elsewhere; otherwise the Run's support directory gets the files.
        let shared_js = matches!(recipe.kind, RecipeKind::Bun | RecipeKind::Node)
            && self.store.is_durable()
            && self.sandbox.shows_elsewhere();
        // A Python Run waits at the SDK's gate (a `sitecustomize`) where the
        // envelope can be made ahead with the interpreter started.
        let python_gate = compiled_sdk && self.sandbox.shows_elsewhere() && !resolved.prepared;
        if recipe.kind != RecipeKind::Native && !compiled_sdk && !shared_js {
            self.ensure_support(recipe.kind)?;
        }
        let js_support = self.support.join(JS_SUPPORT);
        let (program, args): (PathBuf, Vec<std::ffi::OsString>) =
            match (recipe.kind, &recipe.runtime) {
                (RecipeKind::Native, _) => (entry.clone(), vec![]),
                (RecipeKind::Python, Some(runtime)) => {
                    (runtime.clone(), vec![entry.clone().into()])
                }
                // Bun must never install: the bundled SDK is found by walking up.
                // With the shared SDK tree, the SDK's gate is preloaded:
                // the runtime may be started ahead of its Run (`gate.js`).
                (RecipeKind::Bun, Some(runtime)) if shared_js => (
                    runtime.clone(),
                    vec![
                        "--no-install".into(),
                        "--preload".into(),
                        js_support.join(JS_GATE).into(),
                        entry.clone().into(),
                    ],
                ),
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
                            deno_paths(attachments, false)
                        )
                        .into(),
                        format!(
                            "--allow-write={}{}",
                            scratch.display(),
                            deno_paths(attachments, true)
                        )
                        .into(),
                        entry.clone().into(),
                    ],
                ),
                _ => {
                    return Err(Failure::new(
                        ErrorCode::Unavailable,
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
                            .map_err(|e| Failure::new(ErrorCode::ExecutionFailed, e))?;
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
                // The SDK's gate first (see `PYTHON_GATE`), with the shared
                // compiled SDK and no reviewed wheels (their modules must
                // not be importable before the Run).
                let mut path = std::ffi::OsString::new();
                if python_gate {
                    path.push(python.join(PYTHON_GATE));
                    path.push(":");
                }
                path.push(python);
                if resolved.prepared {
                    // The reviewed wheels, after the bundled SDK.
                    path.push(":");
                    path.push(package_dir.join(crate::plan::prepare::PYTHON_SITE));
                }
                env.push(("PYTHONPATH".into(), path.to_string_lossy().to_string()));
                env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
                env.push(("PYTHONUNBUFFERED".into(), "1".into()));
            }
            RecipeKind::Bun | RecipeKind::Node if shared_js => {
                let tree = sdk::javascript(&self.store.support_dir(), sdk::JS_SDK)
                    .map_err(|e| Failure::new(ErrorCode::ExecutionFailed, e))?;
                shown.push((tree, js_support.clone()));
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
                resolved,
                package,
                &program,
                package_tree.unwrap_or(package_dir),
            )?)
        } else {
            None
        };
        let gate =
            ((recipe.kind == RecipeKind::Bun && shared_js) || python_gate).then_some(Hold::Payload);
        let launch = Launch {
            view,
            program,
            args,
            env,
            cwd: scratch.to_path_buf(),
            package: package_dir.to_path_buf(),
            scratch: scratch.to_path_buf(),
            scratch_bytes: Some(self.scratch_bytes),
            read_only,
            shown,
            attachments: attachments
                .iter()
                .map(|a| (a.host.clone(), a.writable))
                .collect(),
            limits: jig_sandbox::Limits::FLOW,
            network: false,
        };
        Ok(ProcessLaunch { launch, gate })
    }

    /// Start `process` now: at once, or, for a program that waits on its
    /// gate, held and opened at once.
    pub(super) fn start_process(&self, process: &ProcessLaunch) -> std::io::Result<Contained> {
        match process.gate {
            None => self.sandbox.spawn(&process.launch),
            Some(hold) => {
                let mut contained = self.sandbox.spawn_held(&process.launch, hold)?;
                contained.open_gate()?;
                Ok(contained)
            }
        }
    }
}

/// A process recipe's launch, and the gate its program waits on itself
/// ([`Hold::Payload`]: a runtime with the SDK's preloaded gate), if any.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessLaunch {
    pub(super) launch: Launch,
    pub(super) gate: Option<Hold>,
}

impl ProcessLaunch {
    /// How it is held when made ahead: at its own gate, else before exec.
    pub(super) fn hold(&self) -> Hold {
        self.gate.unwrap_or(Hold::Envelope)
    }
}

/// The proved runtime closure a process recipe is shown instead of the
/// host's `/usr` (seed 002 §9); unprovable fails closed, before launch.
pub(super) fn runtime_view(
    resolved: &Resolved,
    package: &Package,
    program: &std::path::Path,
    tree: &std::path::Path,
) -> Result<Arc<jig_sandbox::closure::View>, Failure> {
    use jig_sandbox::closure::{self, Stdlib};
    let recipe = &resolved.recipe;
    let proved = match (recipe.kind, &recipe.runtime_digest) {
        (RecipeKind::Native, _) => match package.files().get(&recipe.entrypoint) {
            Some(bytes) => closure::native(bytes, &resolved.digest, &recipe.entrypoint, tree),
            None => Err(jig_sandbox::Error::View(format!(
                "the package has no {}",
                recipe.entrypoint
            ))),
        },
        (kind, Some(digest)) => {
            let stdlib = match kind {
                RecipeKind::Python => Stdlib::Python,
                _ => Stdlib::None,
            };
            closure::runtime(program, digest, stdlib)
        }
        (_, None) => Err(jig_sandbox::Error::View(
            "the recipe has no verified runtime".into(),
        )),
    };
    // The ELF files the package carries beside a runtime (extension
    // modules of prepared wheels, Node addons) bring their libraries too.
    let proved = proved.and_then(|view| {
        if recipe.kind == RecipeKind::Native {
            return Ok(view);
        }
        let files = package.files();
        Ok(
            match closure::package(files, &resolved.digest, tree, program)? {
                Some(carried) => Arc::new(view.with(&carried)),
                None => view,
            },
        )
    });
    proved.map_err(|reason| {
        Failure::new(
            ErrorCode::Unavailable,
            format!(
                "the runtime files of {} cannot be proved ({reason}); a process recipe needs an ELF executable whose loader and shared libraries are all installed: install them, or configure another runtime in [runtimes] and run jig review",
                program.display()
            ),
        )
        .with_details(json!({ "reason": "RUNTIME_VIEW_UNPROVABLE", "flowStarted": false }))
    })
}

/// Put each retained writable attachment into its grant's handoff.
pub(super) fn hand_back(grants: &[AttachmentGrant], held: Vec<(PathBuf, std::os::fd::OwnedFd)>) {
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
pub(super) fn deno_paths(attachments: &[AttachmentGrant], writable: bool) -> String {
    attachments
        .iter()
        .filter(|a| a.writable || !writable)
        .map(|a| format!(",{}", a.host.display()))
        .collect()
}
