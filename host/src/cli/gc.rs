//! `jig gc [--dry-run]`: apply the host configuration's `[retention]` to
//! the project now, then collect the store of what nothing names any more
//! (and the bundled SDK trees of other jig builds no Run has used within
//! their grace), and say what went and the bytes freed. Without the
//! table nothing is removed. While `jig serve` holds the project it applies
//! retention itself, and `jig gc` is refused `PROJECT_BUSY`.

use std::path::Path;

use jig_engine::config::HostConfig;
use jig_engine::state::{self, retention, ProjectState};

use super::{client, project_root, CliError, Code};

pub(super) fn gc(dir: &Path, config: &HostConfig, dry_run: bool) -> Result<u8, CliError> {
    let root = project_root(dir)?;
    let policy = config
        .retention_policy()
        .map_err(|message| CliError::new(Code::ConfigInvalid, message))?;
    let state = match ProjectState::acquire(&root) {
        Ok(state) => state,
        Err(state::StateError::Busy { .. }) if client::holding(&root).is_some() => {
            return Err(state::StateError::Busy {
                message: "jig serve holds this project and applies [retention] itself".into(),
            }
            .into())
        }
        Err(e) => return Err(e.into()),
    };
    let Some(policy) = policy else {
        outln!("no [retention] table in the host configuration; nothing is removed");
        return Ok(0);
    };
    let verb = if dry_run { "would remove" } else { "removed" };
    let (mut runs, mut packets, mut checkpoints, mut freed) = (0, 0, 0, 0);
    let mut removed_runs = Vec::new();
    let now = jig_provider_api::dispatch::now_unix_ms();
    loop {
        // The same batches `jig serve` sweeps in; a dry run sees them all
        // at once, since it removes nothing between batches.
        let budget = if dry_run {
            usize::MAX
        } else {
            retention::SWEEP_BATCH
        };
        let report = retention::sweep(&state, &policy, now, dry_run, budget)?;
        for id in &report.runs {
            outln!("{verb} run {id}");
        }
        for id in &report.packets {
            outln!("{verb} packet {id}");
        }
        runs += report.runs.len();
        removed_runs.extend(report.runs);
        packets += report.packets.len();
        checkpoints += report.checkpoints;
        freed += report.freed_bytes;
        if !report.more {
            break;
        }
    }
    // Then the store: what no admitted generation or remaining Run names.
    let store = retention::collect_store(&state, dry_run, &removed_runs)?;
    for digest in &store.plans {
        outln!("{verb} plan {digest}");
    }
    for digest in &store.packages {
        outln!("{verb} package {digest}");
    }
    if store.deferred {
        outln!("the store was left as it is: a review is admitting this project");
    }
    // The bundled SDK trees of other jig builds, idle past their grace.
    let sdk = jig_engine::exec::sdk::collect_support(&state.store(), dry_run)?;
    for name in &sdk.trees {
        outln!("{verb} SDK tree {name}");
    }
    freed += store.freed_bytes + sdk.freed_bytes;
    outln!(
        "{verb} {runs} Run(s), {packets} packet(s), {checkpoints} checkpoint(s); \
         {} Plan(s), {} package(s), {} blob(s), {} SDK tree(s) of the store; {} {freed} bytes",
        store.plans.len(),
        store.packages.len(),
        store.blobs,
        sdk.trees.len(),
        if dry_run { "would free" } else { "freed" }
    );
    Ok(0)
}
