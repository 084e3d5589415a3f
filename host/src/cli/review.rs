//! `jig review`: capture the project, show what would change, ask, and
//! admit the reviewed Plan (or repair only the lock).

use std::io::{IsTerminal, Write};
use std::path::Path;

use flow::json::Value;
use jig_engine::plan;
use jig_engine::providers::ProviderSet;
use jig_engine::state::{self, ProjectState};

use super::exit::{CliError, Code};
use super::{client, load_config, project_root, terminal};

pub(super) struct ReviewOptions {
    pub(super) yes: bool,
    pub(super) details: bool,
    pub(super) allow_resolution_network: bool,
}

pub(super) fn review(
    dir: &Path,
    config: Option<&Path>,
    options: ReviewOptions,
) -> Result<u8, CliError> {
    let ReviewOptions {
        yes,
        details,
        allow_resolution_network,
    } = options;
    let root = project_root(dir)?;
    let config = load_config(config)?;
    let declarations = jig_project::capture(&root).map_err(|e| {
        if e.is_candidate_invalid() {
            CliError::Candidate(e)
        } else {
            CliError::Project(e)
        }
    })?;
    let (mut state, beside_a_daemon) = match ProjectState::acquire(&root) {
        Ok(state) => (state, false),
        // A `jig serve` holds the project: admit beside it (its new Runs
        // take the new generation; its in-flight Runs keep theirs).
        Err(e @ state::StateError::Busy { .. }) => match client::holding(&root) {
            Some(_) => (
                ProjectState::beside_holder(&root).map_err(CliError::from)?,
                true,
            ),
            None => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    state.hold_admission().map_err(CliError::from)?;
    let candidate = plan::stage(&root, declarations).map_err(CliError::from)?;
    let providers = ProviderSet::new(config.providers.clone());
    let current = state.current().map_err(CliError::from)?;
    let mut proposed = plan::plan(
        &candidate,
        &config,
        &providers,
        current.as_ref().map(|g| g.number),
    )
    .map_err(CliError::from)?;
    let store = state.store();
    let mut notes = Vec::new();
    let prepared = plan::prepare::prepare(
        &candidate.packages,
        &mut proposed,
        plan::prepare::Request {
            root: &root,
            config: &config,
            allow_resolution_network,
            admitted: current.as_ref().map(|g| &g.plan),
            store: &store,
            warn: &mut |text| eprintln!("{text}"),
            note: &mut |note| notes.push(note),
        },
    )
    .map_err(CliError::from)?;
    let lock_bytes = plan::lock_bytes(&proposed["lock"]);
    if let Some(current) = &current {
        if plan::meaning(&current.plan) == plan::meaning(&proposed) {
            if state.read_lock().as_deref() != Some(&lock_bytes[..]) {
                state.write_lock(&lock_bytes).map_err(CliError::from)?;
                println!("jig.lock repaired to match the admitted project");
            }
            // The reference prints only the readiness line; a person on a
            // terminal is also told that nothing needed admission.
            if std::io::stderr().is_terminal() {
                eprintln!("unchanged: the admitted project already matches");
            }
            println!("project is ready");
            return Ok(0);
        }
    }
    for package in candidate.packages.values().chain(&prepared) {
        store.put_package(package).map_err(CliError::from)?;
    }
    let plan_digest = state.retain_plan(&proposed).map_err(CliError::from)?;
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
    let text = plan::review_text(
        current.as_ref().map(|g| &g.plan["lock"]),
        &proposed["lock"],
        &changed,
        &Value::Object(providers_view),
        &notes,
        details,
    );
    if std::io::stdout().is_terminal() {
        print!(
            "{}",
            terminal::paint_review(&text, &terminal::Style::terminal())
        );
    } else {
        print!("{text}");
    }
    let _ = std::io::stdout().flush();
    if !yes {
        let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
        if !interactive {
            return Err(CliError::new(
                Code::ApprovalRequired,
                "project changes require confirmation; rerun with --yes",
            ));
        }
        print!("Approve this exact revision for execution? [y/N] ");
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        let answer = answer.trim().to_ascii_lowercase();
        if answer != "y" && answer != "yes" {
            return Err(CliError::new(
                Code::ChangesDeclined,
                "project changes were not admitted",
            ));
        }
    }
    state
        .apply(&plan_digest, current.as_ref().map(|g| g.number))
        .map_err(CliError::from)?;
    // The trees of packages the new generation no longer runs go with the
    // one they served (best effort: a tree left behind is only disk). Not
    // beside a daemon: its Runs in flight of the old generation run from
    // those trees; its retention removes them with their packages.
    if let Some(admitted) = state.current().ok().flatten().filter(|_| !beside_a_daemon) {
        state
            .store()
            .prune_trees(&jig_engine::plan::package_digests(&admitted.plan));
    }
    println!("project is ready");
    Ok(0)
}
