//! `jig run`: parse what was asked, then either submit it to a daemon or
//! hand it to the engine (`jig_engine::run::local` submits, records and
//! settles it; `jig_engine::run::conduct` runs and delivers it) with this
//! command line as its door, and print.

use std::path::Path;
use std::time::Duration;

use flow::json::Value;
use serde_json::json;

use super::{
    client, finish_output, load_config, print_terminal, project_root, run_invocation, CliError,
    Code, CommandLine,
};
use jig_engine::config::HostConfig;
use jig_engine::exec::submit;
use jig_engine::files::{self, Request};
use jig_engine::run::ask::{Ask, Given};
use jig_engine::run::local::{self, Settled, Submitted};
use jig_engine::state::{self, ProjectState};
use jig_engine::terminal::Terminal as Execution;

/// Test-only: when set to a number of milliseconds, the coordinator aborts
/// itself that long after dispatching the Run, leaving its record pending,
/// so tests can observe `COORDINATOR_LOST`. Operators have no use for it.
pub const TEST_ABORT_AFTER_DISPATCH_ENV: &str = "JIG_TEST_ABORT_AFTER_DISPATCH";

/// Everything `jig run` was asked, parsed before any file is read.
pub struct RunArgs<'a> {
    pub dir: &'a Path,
    pub config: Option<&'a Path>,
    pub target: &'a str,
    pub input: Option<&'a str>,
    pub timeout: Option<&'a str>,
    pub key: Option<&'a str>,
    pub json: bool,
    pub attach: &'a [String],
    pub select: &'a [String],
    pub out: Option<&'a Path>,
    pub receive: &'a [String],
    /// `--server` / `--token-file`: submit to a daemon.
    pub server: Option<&'a str>,
    pub token_file: Option<&'a Path>,
    pub cacert: Option<&'a Path>,
}

pub fn run(args: RunArgs) -> Result<u8, CliError> {
    let ask = Ask::parse(&Given {
        target: args.target,
        timeout: args.timeout,
        key: args.key,
        input: args.input,
        attach: args.attach,
        select: args.select,
        receive: args.receive,
        base: args.dir,
    })?;
    if let Some(served) = client::named(args.server, args.token_file, args.cacert)? {
        let local = project_root(args.dir)
            .ok()
            .map(|r| super::serve::local_name(&r));
        return submit_to(&served, &args, &ask.request, ask.input, local);
    }
    let root = project_root(args.dir)?;
    let config = load_config(args.config)?;
    let state = match ProjectState::acquire(&root) {
        Ok(state) => state.with_settle_reserve(config.records.settle_reserve_bytes()),
        // A local daemon holds the project: submit to it.
        Err(e @ state::StateError::Busy { .. }) => match client::holding(&root) {
            Some(served) => return submit_to(&served, &args, &ask.request, ask.input, None),
            None => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    run_held(&state, &config, ask, &args)
}

/// A Run of the project `state` holds, to its printed terminal and exit
/// status: `jig run`'s local door, and `jig dev`'s after each admission.
pub(super) fn run_held(
    state: &ProjectState,
    config: &HostConfig,
    ask: Ask,
    args: &RunArgs,
) -> Result<u8, CliError> {
    let Ask {
        checked,
        receive,
        request,
        input,
    } = ask;
    let submitted = local::submit(
        state,
        local::Asked {
            checked,
            input,
            request: &request,
            dir: args.dir,
            out: args.out,
            receive: &receive,
            config,
        },
    )?;
    let mut local = match submitted {
        Submitted::Replay(record) => return Ok(replay(&record, args.json, !receive.is_empty())),
        Submitted::New(local) => local,
    };
    let source_changed = local.source_changed().to_vec();
    if !source_changed.is_empty() {
        eprintln!("{}", source_notice(&source_changed));
    }
    if let Some(ms) = state::fault_hook(TEST_ABORT_AFTER_DISPATCH_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            std::process::abort();
        });
    }
    let mut door = CommandLine::new(!receive.is_empty());
    door.destination = local.take_destination();
    let fenced =
        |execution: &Execution, checkpointing: bool| local.fenced(execution, checkpointing);
    door.fenced = Some(&fenced);
    let ran = run_invocation(local.root(), &door)?;
    drop(door);
    let (conducted, unsettled, checkpoint_kept) = match local.settle(ran.conducted)? {
        Settled::Conducted {
            conducted,
            unsettled,
            checkpoint_kept,
        } => (*conducted, unsettled, checkpoint_kept),
        Settled::Undispatched(failure) => {
            return Err(CliError::new(Code::Internal, failure.message))
        }
    };
    if let Some(e) = checkpoint_kept {
        super::report_error(
            Code::CleanupFailed.as_str(),
            &format!("the Run's checkpoint could not be removed: {e}"),
            &[],
        );
    }
    let mut terminal = conducted.terminal.to_value();
    if !source_changed.is_empty() {
        // Said in the terminal too, for a reader of the JSON alone.
        terminal["sourceChanged"] = serde_json::json!(source_changed);
    }
    let interrupted = conducted.interrupted;
    let status = match interrupted && !super::shows_interrupted(args.json, &conducted.stream) {
        // The reference prints nothing on stdout for an interrupted
        // command (docs/src/runs.md, The terminal and the exit status); the Run's record keeps its terminal.
        true => super::exit::exit_status(&super::exit::interrupted_error()),
        false => finish_output(&terminal, args.json, conducted.stream),
    };
    let cleanup = conducted.cleanup;
    super::final_line(ran.shown, &terminal, cleanup.is_err());
    // What went wrong after the terminal was known is reported after it:
    // first that its record could not be settled (it will read as lost).
    if let Some(e) = unsettled {
        return Err(e.into());
    }
    if let Err(e) = cleanup {
        return Err(CliError::new(
            Code::CleanupFailed,
            format!("the Run's private files could not be removed: {e}"),
        ));
    }
    if interrupted {
        return Err(super::exit::interrupted_error());
    }
    if let Some(e) = conducted.delivery {
        return Err(super::exit::delivery_error(&e));
    }
    Ok(status)
}

/// `jig run` through a daemon: a direct Run as JSON, a file Run
/// (`--attach`, `--out`) as a tar with its packet downloaded to `--out`.
fn submit_to(
    served: &client::Served,
    args: &RunArgs,
    request: &Request,
    input: Value,
    local: Option<String>,
) -> Result<u8, CliError> {
    let submitted = client::Submitted {
        target: args.target,
        input,
        key: args.key,
        timeout: args.timeout,
        receive: args.receive,
        json: args.json,
        local,
    };
    if request.roots.is_empty() && args.out.is_none() {
        return client::run(served, submitted);
    }
    // The same capture and `--out` checks as a local file Run, here,
    // before anything is sent.
    let captured = files::capture(request, args.dir).map_err(CliError::from)?;
    let destination = args
        .out
        .map(|out| files::prepare_destination(&args.dir.join(out), &captured.real_roots()))
        .transpose()
        .map_err(CliError::from)?;
    client::run_files(
        served,
        submitted,
        client::FileRun {
            captured: &captured,
            destination,
        },
    )
}

/// Print a Run already submitted under the same key; nothing executes.
/// With `--receive` it is the NDJSON terminal line alone: channel items
/// are not kept, so a replay has none to show.
fn replay(record: &state::RunRecord, json_output: bool, receiving: bool) -> u8 {
    let terminal = submit::shown_terminal(record);
    let status = if receiving {
        outln!(
            "{}",
            flow::json::canonical_string(&json!({"type": "terminal", "result": terminal}))
        );
        super::exit::run_exit_code(Execution::status_of(&terminal))
    } else {
        print_terminal(&terminal, json_output)
    };
    super::exit::shown_exit_code(&terminal, status)
}

/// How many changed files the notice names before "and N more".
const NOTICE_NAMED: usize = 3;

/// The one line that says the live source of what a Run uses differs
/// from the admitted bytes it runs, naming what changed (the first few)
/// and what admits it.
fn source_notice(changed: &[String]) -> String {
    let mut named = changed
        .iter()
        .take(NOTICE_NAMED)
        .map(|p| super::terminal::escape(p))
        .collect::<Vec<_>>()
        .join(", ");
    if changed.len() > NOTICE_NAMED {
        named.push_str(&format!(" and {} more", changed.len() - NOTICE_NAMED));
    }
    format!(
        "note: {named} changed since review; this Run runs the admitted version (jig review admits the change)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The notice names [`NOTICE_NAMED`] files, and counts the rest.
    #[test]
    fn the_notice_names_three_files_and_counts_the_rest() {
        let files = |n: usize| {
            (0..n)
                .map(|i| format!("flows/f/{i}.py"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            source_notice(&files(NOTICE_NAMED)),
            "note: flows/f/0.py, flows/f/1.py, flows/f/2.py changed since review; this Run runs \
             the admitted version (jig review admits the change)"
        );
        assert_eq!(
            source_notice(&files(NOTICE_NAMED + 1)),
            "note: flows/f/0.py, flows/f/1.py, flows/f/2.py and 1 more changed since review; \
             this Run runs the admitted version (jig review admits the change)"
        );
    }
}
