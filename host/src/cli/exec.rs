//! `jig exec <package-dir>`: run one package directory directly, in the same
//! envelope and with the same Run/1 host as `jig run`, for local testing of
//! your own code. It admits nothing: the engine stages and plans it as a
//! trial (`jig_engine::run::trial`), conducts it once, and forgets it. It is
//! not a way to run someone else's package.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flow::json::Value;

use serde_json::json;

use super::{finish_output, load_config, receive, run_invocation, CliError, Code, CommandLine};
use jig_engine::files::Request;
use jig_engine::run::ask;
use jig_engine::run::trial::{self, Trial, TrialError, TrialFiles};
use jig_engine::run::{self, Conducted, NotConducted};

pub struct ExecArgs<'a> {
    pub package: &'a Path,
    pub input: Option<&'a str>,
    pub settings: Option<&'a str>,
    pub children: &'a [String],
    pub timeout: Option<&'a str>,
    pub json: bool,
    pub receive: &'a [String],
    /// `--attach NAME=DIR`, `--select NAME=PATTERN`, `--out DIR`: as `jig run`.
    pub attach: &'a [String],
    pub select: &'a [String],
    pub out: Option<&'a Path>,
    pub config: Option<&'a Path>,
    pub base: &'a Path,
}

pub fn exec(args: ExecArgs<'_>) -> Result<u8, CliError> {
    let usage = |m: String| CliError::new(Code::Usage, m);
    let mut slots = BTreeMap::new();
    for child in args.children {
        let (slot, dir) = child
            .split_once('=')
            .ok_or_else(|| usage(format!("--child {child:?} is not SLOT=DIR")))?;
        if !flow::wire::is_local_name(slot) || slots.contains_key(slot) {
            return Err(usage(format!(
                "--child slot {slot:?} is not a unique LocalName"
            )));
        }
        slots.insert(slot.to_string(), args.base.join(dir));
    }
    let receive = receive::parse(args.receive)?;
    let request = Request::parse(args.attach, args.select).map_err(CliError::from)?;
    let timeout = ask::timeout(args.timeout)?;
    let input = ask::input(args.input, args.base)?;
    let settings = match args.settings {
        None => json!({}),
        Some(text) => flow::json::parse(text.as_bytes())
            .ok()
            .filter(|v| v.is_object())
            .ok_or_else(|| {
                CliError::new(Code::InvalidSettings, "--settings must be a JSON/1 object")
            })?,
    };
    let config = load_config(args.config)?;
    let trial = trial::prepare(&args.base.join(args.package), &slots, settings, &config)
        .map_err(trial_error)?;
    let mut files = trial.files(&request, args.base, args.out, &receive, &input)?;
    let mut door = CommandLine::new(!receive.is_empty());
    door.destination = files.destination.take();
    let (conducted, shown) = conduct_trial(&trial, &files, input, timeout, &receive, &door)?;
    let interrupted = conducted.interrupted;
    let terminal = conducted.terminal.to_value();
    let cleanup = conducted
        .cleanup
        .and_then(|()| trial.close())
        .map(|()| PathBuf::new());
    let status = finish_output(&terminal, args.json, conducted.stream);
    super::final_line(shown, &terminal, cleanup.is_err());
    if let Err(e) = cleanup {
        return Err(CliError::new(
            Code::CleanupFailed,
            format!("the private directory could not be removed: {e}"),
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

/// Conduct `trial` once through the command line's `door`: its root with
/// `files`, `input`, `timeout` and `receive` (`jig exec`, and each case of
/// `jig test`). The conducted Run, and how long a terminal showed it
/// pending.
pub(super) fn conduct_trial(
    trial: &Trial,
    files: &TrialFiles,
    input: Value,
    timeout: Duration,
    receive: &[String],
    door: &CommandLine<'_>,
) -> Result<(Conducted, Option<Duration>), CliError> {
    let ran = run_invocation(
        run::Root {
            run_id: None,
            executor: trial.executor.clone(),
            target: Trial::target(),
            input,
            deadline: run::Deadline::After(timeout),
            cancel: None,
            work_root: &trial.work_root,
            files: Some(run::Files {
                captured: &files.captured,
                writable: files.writable.as_deref(),
                packet: files.packet.clone(),
            }),
            package: &trial.root,
            receive,
            checkpoint: None,
        },
        door,
    )?;
    match ran.conducted {
        Ok(conducted) => Ok((conducted, ran.shown)),
        Err(NotConducted::Stopped(e)) => Err(e.into()),
        Err(NotConducted::Undispatched(failure)) => {
            Err(CliError::new(Code::Internal, failure.message))
        }
    }
}

/// Why a trial could not be prepared, as the command line reports it.
pub(super) fn trial_error(e: TrialError) -> CliError {
    match e {
        TrialError::Unstaged { dir, at, error } => CliError::new(
            Code::InvalidCandidate,
            format!("{}: {error}", dir.display()),
        )
        .with_location(&at),
        TrialError::Private(_) => CliError::new(Code::Internal, e.to_string()),
        TrialError::Engine(e) => (*e).into(),
    }
}
