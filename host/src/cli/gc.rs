//! `jig gc [--dry-run]`: apply the host configuration's `[retention]` to
//! the project now, and say what went and the bytes freed. Without the
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
        println!("no [retention] table in the host configuration; nothing is removed");
        return Ok(0);
    };
    let verb = if dry_run { "would remove" } else { "removed" };
    let (mut runs, mut packets, mut checkpoints, mut freed) = (0, 0, 0, 0);
    let now = state::now_unix_ms();
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
            println!("{verb} run {id}");
        }
        for id in &report.packets {
            println!("{verb} packet {id}");
        }
        runs += report.runs.len();
        packets += report.packets.len();
        checkpoints += report.checkpoints;
        freed += report.freed_bytes;
        if !report.more {
            break;
        }
    }
    println!(
        "{verb} {runs} Run(s), {packets} packet(s), {checkpoints} checkpoint(s); {} {freed} bytes",
        if dry_run { "would free" } else { "freed" }
    );
    Ok(0)
}
