//! `jig run`: resolve an admitted target, capture its attachments, record
//! the Run before dispatch, execute it, deliver the packet, and print.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use serde_json::json;

use super::{
    client, finish_output, load_config, print_terminal, project_root, read_input, receive,
    run_invocation, CliError, Code, Terminal,
};
use jig_engine::envelope;
use jig_engine::exec::submit::{self, Recorded};
use jig_engine::exec::RootRun;
use jig_engine::files::{self, Request};
use jig_engine::providers::ProviderSet;
use jig_engine::run::{self, NotConducted};
use jig_engine::state::{self, ProjectState};

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
}

pub fn run(args: RunArgs) -> Result<u8, CliError> {
    let asked = submit::check(args.target, args.timeout, args.key).map_err(CliError::from)?;
    let target_ref = asked.target.clone();
    let timeout = asked.timeout;
    let receive = receive::parse(args.receive)?;
    let request = Request::parse(args.attach, args.select).map_err(CliError::from)?;
    let input = read_input(args.input, args.dir)?;
    if let Some(served) = client::named(args.server, args.token_file)? {
        let local = project_root(args.dir)
            .ok()
            .map(|r| super::serve::local_name(&r));
        return submit_to(&served, &args, &request, input, local);
    }
    let root = project_root(args.dir)?;
    let config = load_config(args.config)?;
    let state = match ProjectState::acquire(&root) {
        Ok(state) => state,
        // A local daemon holds the project: submit to it.
        Err(e @ state::StateError::Busy { .. }) => match client::holding(&root) {
            Some(served) => return submit_to(&served, &args, &request, input, None),
            None => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    // The envelope is probed (containment tools verified, cgroups found,
    // stale ones swept) while the package is read and verified below; the
    // Run is still refused before it is recorded if there is none. For a
    // root that runs as a process, its cgroups are made there too.
    let current = state.current();
    let process = current
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .is_some_and(|g| submit::runs_a_process(&g.plan, &target_ref));
    let envelope = envelope::probe(&config.containment, process);
    let runs = state.runs();
    runs.fence_lost().map_err(CliError::from)?;
    let resolved = submit::resolve_in(&state, current, &target_ref).map_err(CliError::from)?;
    let package = &resolved.package;
    let generation = &resolved.generation;
    // Seed 002 §4: Run Checkpoint needs the installed command's `--out`
    // owner, refused before anything is read or recorded.
    let checkpointing = resolved.checkpointing;
    if checkpointing && args.out.is_none() {
        return Err(CliError::new(
            Code::FilesInvalid,
            format!("{target_ref} keeps Run Checkpoints, which are delivered with --out DIR; give --out DIR"),
        ));
    }
    let writable = files::check_request(
        &package.metadata().attachments,
        &request,
        args.out.is_some(),
    )
    .map_err(CliError::from)?;
    receive::check(package, &receive)?;
    let captured = files::capture(&request, args.dir).map_err(CliError::from)?;
    let destination = args
        .out
        .map(|out| files::prepare_destination(&args.dir.join(out), &captured.real_roots()));
    // The output intent as recorded: a replay names a destination that
    // the first Run may have published already.
    let output_intent = match &destination {
        None => None,
        Some(Ok(d)) => Some(d.absolute.clone()),
        Some(Err(_)) => args
            .out
            .and_then(|out| intended_destination(&args.dir.join(out))),
    };
    let identity = submit::identity(
        &asked,
        generation,
        &input,
        captured.manifest(),
        output_intent.as_deref(),
    );
    let input_identity = identity.input;
    // Everything that can refuse the Run does so before it is recorded.
    // The record becomes durable while the Run is prepared below; nothing
    // of it starts before (the executor waits on `commit`).
    let (recorded, commit) =
        submit::record_committing(&runs, args.key, identity.content, &input, || {
            let destination = destination.transpose().map_err(jig_engine::Error::from)?;
            let envelope = envelope.join()?;
            Ok::<_, CliError>((destination, envelope))
        })?;
    let (mut record, (destination, envelope)) = match recorded {
        Recorded::Replay(record) => return Ok(replay(&record, args.json, !receive.is_empty())),
        Recorded::New(record, held) => (record, held),
    };
    // A Run whose record could not be written was never recorded: its
    // private work goes and nothing is settled (stale work a crash leaves
    // before the record is durable is removed by the next fence).
    let recorded = || commit.as_ref().map_or(Ok(()), |c| c.wait());
    let work_root = state.run_dir(&record.id).map_err(CliError::from)?;
    let method = resolved.method(&target_ref);
    // What a checkpoint is bound to (HOST-FACTS §3): this Run, what ran
    // under which admitted configuration, and its input identity.
    let root_run = (checkpointing && destination.is_some()).then(|| {
        Arc::new(RootRun::new(
            record.id.clone(),
            json!({
                "runId": record.id,
                "method": method,
                "configuration": {"generation": generation.number, "plan": generation.plan_digest},
                "input": input_identity,
            }),
            state.checkpoints(),
        ))
    });
    let executor = Arc::new(
        submit::executor(
            &state,
            generation.plan.clone(),
            &config,
            Arc::new(ProviderSet::new(config.providers.clone())),
            &envelope,
            work_root.clone(),
            Some(Arc::clone(package)),
        )
        .with_commit(commit.clone()),
    );
    if let Some(ms) = state::fault_hook(TEST_ABORT_AFTER_DISPATCH_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            std::process::abort();
        });
    }
    let noted = std::sync::Mutex::new(record.clone());
    let fenced = |execution: &Value, checkpointing: bool| {
        recorded()?;
        if checkpointing {
            // Seed 002 §8: a known terminal is never downgraded by a later
            // coordinator loss; recovery then delivers the checkpoint under it.
            let mut record = noted.lock().unwrap_or_else(|e| e.into_inner());
            runs.note_execution(&mut record, execution.clone())?;
            state::crash_point("run-executed");
        }
        Ok(())
    };
    let mut door = Terminal::new(!receive.is_empty());
    door.destination = destination;
    door.fenced = Some(&fenced);
    let ran = run_invocation(
        run::Root {
            run_id: Some(&record.id),
            executor,
            target: target_ref.clone(),
            input,
            deadline: run::Deadline::After(timeout),
            cancel: None,
            work_root: &work_root,
            files: Some(run::Files {
                captured: &captured,
                writable: writable.as_deref(),
                packet: door.destination.is_some().then(|| run::Packet {
                    method: method.clone(),
                    input: input_identity.clone(),
                }),
            }),
            package,
            receive: &receive,
            checkpoint: root_run.clone(),
        },
        &door,
    )?;
    drop(captured);
    let conducted = match ran.conducted {
        Ok(conducted) => conducted,
        Err(NotConducted::Stopped(e)) => return Err(e.into()),
        Err(NotConducted::Undispatched(failure)) => {
            recorded()?;
            // Recorded but never dispatched: settle it as failed, not lost.
            submit::settle_undispatched(&runs, &mut record, &failure.message);
            return Err(CliError::new(Code::Internal, failure.message));
        }
    };
    let mut record = noted.into_inner().unwrap_or_else(|e| e.into_inner());
    let terminal = conducted.terminal;
    runs.settle(&mut record, terminal.clone())
        .map_err(CliError::from)?;
    if root_run.is_some() {
        // Settled: the aggregate is delivered (or never will be) and is
        // not kept past its Run.
        if let Err(e) = state.checkpoints().remove(&record.id) {
            super::report_error(
                Code::CleanupFailed.as_str(),
                &format!("the Run's checkpoint could not be removed: {e}"),
                &[],
            );
        }
    }
    let interrupted = conducted.interrupted;
    let status = match interrupted && !super::shows_interrupted(args.json, &conducted.stream) {
        // The reference prints nothing on stdout for an interrupted
        // command (HOST-FACTS §7); the Run's record keeps its terminal.
        true => 2,
        false => finish_output(&terminal, args.json, conducted.stream),
    };
    let cleanup = conducted.cleanup;
    super::final_line(ran.shown, &terminal, cleanup.is_err());
    // What went wrong after the terminal was known is reported after it.
    if let Err(e) = cleanup {
        return Err(CliError::new(
            Code::CleanupFailed,
            format!("the Run's private files could not be removed: {e}"),
        ));
    }
    if interrupted {
        return Err(interrupted_error());
    }
    if let Some(e) = conducted.delivery {
        return Err(delivery_error(&e));
    }
    Ok(status)
}

/// The command was interrupted (its Run's record keeps the terminal).
pub(super) fn interrupted_error() -> CliError {
    CliError::new(Code::Interrupted, "the command was interrupted")
}

/// A packet that could not be published, after its terminal was shown.
pub(super) fn delivery_error(e: &files::FilesError) -> CliError {
    CliError::new(
        Code::DeliveryFailed,
        format!("{} ({})", e.message, e.code()),
    )
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
        println!(
            "{}",
            flow::json::canonical_string(&json!({"type": "terminal", "result": terminal}))
        );
        super::exit::run_exit_code(terminal["status"].as_str().unwrap_or("lost"))
    } else {
        print_terminal(&terminal, json_output)
    };
    super::exit::shown_exit_code(&terminal, status)
}

/// Where `--out` points, when the leaf may already exist.
fn intended_destination(out: &Path) -> Option<PathBuf> {
    let leaf = out.file_name()?;
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Some(std::fs::canonicalize(parent).ok()?.join(leaf))
}
