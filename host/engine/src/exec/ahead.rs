//! A root Run's envelope made ahead of the Run. A daemon that has just run
//! a target makes the envelope its next Run of that target would start (the
//! same [`Launch`]: program, arguments, environment, package and SDK trees,
//! runtime view, a private scratch in a work root of its own) and holds it
//! ([`Sandbox::spawn_held`]): before the program is executed, or, for Bun,
//! in the runtime's preload of the SDK's gate, which has loaded the SDK and
//! waits before the package's entrypoint is loaded. The next Run takes it
//! with that work root: when its own launch is equal, the gate is opened
//! once the Run's record is durable, and the Run pays for neither the
//! namespaces, the mounts, the cgroup nor (Bun) the runtime's start.
//!
//! Nothing of the package runs ahead. The Run's
//! checks (admitted target, execution environment, input) are all made
//! again at the Run, before the gate opens; a launch that differs in any
//! way (a new generation, another runtime) ends the held envelope and
//! starts a fresh one.

use std::sync::atomic::Ordering;

use jig_sandbox::Contained;

use super::invoke::ProcessLaunch;
use flow::wire::ErrorCode;

use super::{Executor, Failure, TargetRef};
use crate::code::FailureCode;
use crate::plan::RecipeKind;

/// A held envelope and the launch it was made for.
pub struct Ahead {
    process: ProcessLaunch,
    contained: Contained,
}

impl Ahead {
    /// Make `launch`'s envelope in `envelope` and hold it. Call it from a
    /// thread that lives as long as the daemon (a runtime worker, never a
    /// blocking-pool thread): the envelope dies with the thread that
    /// spawned it.
    pub fn start(
        envelope: &crate::envelope::Envelope,
        process: ProcessLaunch,
    ) -> std::io::Result<Ahead> {
        let contained = envelope
            .sandbox()
            .spawn_held(&process.launch, process.hold())?;
        Ok(Ahead { process, contained })
    }

    /// Is it still held, and its envelope still there?
    pub fn is_ready(&mut self) -> bool {
        self.contained.is_held() && matches!(self.contained.child.try_wait(), Ok(None))
    }
}

impl Executor {
    /// The launch the next root Run of `target` would start, with its
    /// private directories made in this executor's work root: exactly what
    /// that Run's executor, made with the same work root, builds at launch.
    /// `None` for a target whose envelope is not made ahead: `flow.wasm`
    /// (in-process), Deno, a workspace layout, a private package copy, an
    /// envelope that cannot show a shared tree elsewhere, or a target whose
    /// execution environment no longer verifies (its Run will say so).
    pub fn launch_ahead(&self, target: &TargetRef) -> Result<Option<ProcessLaunch>, Failure> {
        let resolved = self.resolve(target, true)?;
        let kind = resolved.recipe.kind;
        let shared = matches!(
            kind,
            RecipeKind::Native | RecipeKind::Python | RecipeKind::Bun | RecipeKind::Node
        );
        if !shared
            || resolved.layout.is_some()
            || !self.store.is_durable()
            || !self.sandbox.shows_elsewhere()
        {
            return Ok(None);
        }
        if self.verify_environment(&resolved).is_err() {
            return Ok(None);
        }
        let package = self.package(&resolved)?;
        // The root invocation's directory: the first of this work root.
        let dir = self.work_root.join("0");
        let scratch = dir.join("scratch");
        std::fs::create_dir_all(&scratch).map_err(|e| {
            Failure::new(
                ErrorCode::ExecutionFailed,
                format!("cannot prepare the Run ahead: {e}"),
            )
        })?;
        let tree = self
            .store
            .package_tree(&package)
            .map_err(|e| Failure::new(FailureCode::raised(e.code()), e.to_string()))?;
        let launch = self.process_launch(
            &resolved,
            &package,
            (
                &dir.join("package"),
                Some(&tree),
                &resolved.recipe.entrypoint,
            ),
            &scratch,
            &[],
        )?;
        Ok(Some(launch))
    }

    /// Start the root's process in `ahead` when the launch is the same.
    pub fn with_ahead(self, ahead: Ahead) -> Executor {
        *self.ahead.lock().unwrap_or_else(|e| e.into_inner()) = Some(ahead);
        self
    }

    /// The held envelope made for exactly `process`, opened; `None` (and
    /// the held one ended) when there is none, it differs, or it cannot be
    /// opened.
    pub(super) fn take_ahead(&self, process: &ProcessLaunch) -> Option<Contained> {
        let ahead = self
            .ahead
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        if ahead.process != *process {
            return None;
        }
        let mut contained = ahead.contained;
        contained.open_gate().ok()?;
        self.started_ahead.store(true, Ordering::SeqCst);
        Some(contained)
    }

    /// Did the root start in the envelope made ahead of it?
    pub fn started_ahead(&self) -> bool {
        self.started_ahead.load(Ordering::SeqCst)
    }
}
