//! One review, conducted: from a project's captured declarations to the
//! proposal a person approves, and on approval its admission. Stage the
//! candidate, plan it against the admitted generation, prepare its
//! dependencies, then either repair `jig.lock` (nothing else changed) or
//! retain the proposed Plan and form the review text; [`Changes::admit`]
//! makes it the current generation. The door (`jig review`) captures the
//! project, holds its state, shows the text and asks. Beside the text, a
//! proposal carries the files it changes and their diffs ([`files`]).

pub mod files;

use std::path::Path;

use flow::json::Value;
use jig_project::Declarations;

use crate::config::HostConfig;
use crate::plan;
use crate::providers::ProviderSet;
use crate::state::{ProjectState, Sources};
use crate::Error;

/// What a review was asked, beside the project.
pub struct Asked<'a> {
    pub root: &'a Path,
    pub config: &'a HostConfig,
    /// Dependency resolution may use the network (`--allow-resolution-network`).
    pub allow_resolution_network: bool,
    /// The review text lists every package's files (`--details`).
    pub details: bool,
    /// Where preparation's warnings go, as they happen.
    pub warn: &'a mut dyn FnMut(&str),
}

/// What a review proposes.
pub enum Proposal {
    /// The admitted project already matches the declarations; `jig.lock`
    /// was rewritten when it did not match the admitted one.
    Unchanged { lock_repaired: bool },
    /// Changes to approve.
    Changes(Changes),
}

/// A proposed Plan, retained, with the text a person approves.
pub struct Changes {
    /// The review text (seed 002 §7, local admission): what approval
    /// admits.
    pub text: String,
    /// Each package whose digest changes, with its files and diffs.
    pub files: Vec<files::PackageFiles>,
    /// With nothing admitted yet (a fresh clone), whether each proposed
    /// package matches the project's committed `jig.lock`.
    pub lock: Option<Vec<(String, files::LockMatch)>>,
    plan_digest: String,
    current: Option<u64>,
    /// What the proposal's sources were on disk, kept once it is admitted.
    sources: Sources,
}

/// Plan `declarations` against `state`'s admitted generation and propose
/// the result. The state's admission is held from here until it is
/// dropped, so no other review admits in between.
pub fn propose(
    state: &mut ProjectState,
    declarations: Declarations,
    asked: Asked<'_>,
) -> Result<Proposal, Error> {
    state.hold_admission()?;
    let candidate = plan::stage(asked.root, declarations)?;
    // What the captured bytes were on disk, so a Run can say when the
    // live source differs from what it runs (`state::Sources`).
    let sources = Sources::seen(asked.root, &candidate);
    let providers = ProviderSet::new(asked.config.providers.clone());
    let current = state.current()?;
    let mut proposed = plan::plan(
        &candidate,
        asked.config,
        &providers,
        current.as_ref().map(|g| g.number),
    )?;
    let store = state.store();
    let mut notes = Vec::new();
    let prepared = plan::prepare::prepare(
        &candidate.packages,
        &mut proposed,
        plan::prepare::Request {
            root: asked.root,
            config: asked.config,
            allow_resolution_network: asked.allow_resolution_network,
            admitted: current.as_ref().map(|g| &g.plan),
            store: &store,
            warn: asked.warn,
            note: &mut |note| notes.push(note),
        },
    )?;
    let lock_bytes = plan::lock_bytes(&proposed["lock"]);
    if let Some(current) = &current {
        if plan::meaning(&current.plan) == plan::meaning(&proposed) {
            let lock_repaired = state.read_lock().as_deref() != Some(&lock_bytes[..]);
            if lock_repaired {
                state.write_lock(&lock_bytes)?;
            }
            state.keep_sources(&sources.of_generation(current.number));
            return Ok(Proposal::Unchanged { lock_repaired });
        }
    }
    for package in candidate.packages.values().chain(&prepared) {
        store.put_package(package)?;
    }
    let plan_digest = state.retain_plan(&proposed)?;
    let mut providers_view = serde_json::Map::new();
    for (path, execution) in proposed["execution"].as_object().into_iter().flatten() {
        for (slot, pin) in execution["providers"].as_object().into_iter().flatten() {
            providers_view.insert(format!("{path}#{slot}"), pin.clone());
        }
    }
    let changed = current
        .as_ref()
        .map(|g| plan::changed_targets(&g.plan, &proposed))
        .unwrap_or_default();
    let files = files::compare(
        current.as_ref().map(|g| &g.plan["lock"]),
        &proposed["lock"],
        &candidate.packages,
        &store,
    );
    let lock = match &current {
        None => state
            .read_lock()
            .and_then(|committed| files::against_lock(&committed, &proposed["lock"])),
        Some(_) => None,
    };
    let text = plan::review_text(
        current.as_ref().map(|g| &g.plan["lock"]),
        &proposed["lock"],
        &changed,
        &Value::Object(providers_view),
        &notes,
        asked.details,
    );
    Ok(Proposal::Changes(Changes {
        text,
        files,
        lock,
        plan_digest,
        current: current.as_ref().map(|g| g.number),
        sources,
    }))
}

impl Changes {
    /// Admit the proposed Plan as the next generation. `beside_a_daemon`:
    /// a `jig serve` holds the project, and its Runs in flight of the old
    /// generation still run from that generation's package trees.
    pub fn admit(self, state: &ProjectState, beside_a_daemon: bool) -> Result<(), Error> {
        let generation = state.apply(&self.plan_digest, self.current)?;
        state.keep_sources(&self.sources.of_generation(generation));
        // The trees of packages the new generation no longer runs go with
        // the one they served (best effort: a tree left behind is only
        // disk). Beside a daemon, its retention removes them with their
        // packages instead.
        if let Some(admitted) = state.current().ok().flatten().filter(|_| !beside_a_daemon) {
            state
                .store()
                .prune_trees(&plan::package_digests(&admitted.plan));
        }
        Ok(())
    }
}
