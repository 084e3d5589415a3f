//! A root Run of the project this process holds (`jig run` without a
//! daemon): submitted against the project's records on disk, handed to
//! [`super::conduct`] by the door, and settled in its record.
//!
//! [`submit`] takes a checked request the rest of the way to a Run ready
//! to conduct: resolve the target in the admitted generation while the
//! envelope is probed, check the attachments, `--out` and `--receive`
//! against what the target declares, capture the attachments, form the
//! content identity, and record the Run (or find the Run a key already
//! names). Everything that can refuse a Run does so before it is
//! recorded. The door shows what happens and says how the command ends.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow::json::Value;
use flow::package::Package;

use super::{Conducted, Deadline, Files, NotConducted, Packet, Root};
use crate::config::HostConfig;
use crate::envelope;
use crate::exec::submit::{self, Commit, Recorded};
use crate::exec::{Executor, Failure, RootRun, TargetRef};
use crate::files::{self, Captured, Destination, FilesError, Request};
use crate::providers::ProviderSet;
use crate::state::{self, ProjectState, RunRecord, Runs};
use crate::terminal::Terminal;
use crate::Error;

/// A Run asked of this project, its request already checked
/// ([`submit::check`]) and its input read.
pub struct Asked<'a> {
    pub checked: submit::Asked,
    pub input: Value,
    /// `--attach` / `--select`.
    pub request: &'a Request,
    /// Where attachment roots and `--out` are relative to.
    pub dir: &'a Path,
    pub out: Option<&'a Path>,
    /// `--receive`, parsed.
    pub receive: &'a [String],
    pub config: &'a HostConfig,
}

/// What submitting found.
pub enum Submitted<'s> {
    /// A key already names this content: that Run, nothing executes.
    Replay(RunRecord),
    /// A new Run, recorded (durably by the time it dispatches).
    New(Box<Local<'s>>),
}

/// A recorded Run of this project, ready to conduct.
pub struct Local<'s> {
    state: &'s ProjectState,
    run_id: String,
    runs: Runs,
    /// The record as last written (a checkpointing Run notes its
    /// execution in it before it settles).
    record: Mutex<RunRecord>,
    commit: Option<Arc<Commit>>,
    work_root: PathBuf,
    executor: Arc<Executor>,
    captured: Captured,
    writable: Option<String>,
    destination: Option<Destination>,
    packet: Option<Packet>,
    root_run: Option<Arc<RootRun>>,
    package: Arc<Package>,
    target: TargetRef,
    input: Value,
    timeout: Duration,
    receive: Vec<String>,
    /// The project paths whose live source differs from the admitted
    /// bytes this Run uses ([`state::Sources::changed`]).
    source_changed: Vec<String>,
}

/// A Run taken to its end in its record.
pub enum Settled {
    /// Conducted with its terminal. `unsettled`: the terminal could not be
    /// written (the host cannot write even in the space set aside for it):
    /// the door still shows it, then reports why; the record stays pending
    /// and the next start fences it lost. `checkpoint_kept`: its aggregate
    /// could not be removed after it settled (reported apart).
    Conducted {
        conducted: Box<Conducted>,
        unsettled: Option<state::RunsError>,
        checkpoint_kept: Option<state::StateError>,
    },
    /// Recorded but never dispatched (its attachments could not be
    /// sealed, its receivers not connected): settled failed, not lost.
    Undispatched(Failure),
}

/// Submit `asked` to the project `state` holds: everything that can
/// refuse the Run does so here, before it is recorded.
pub fn submit<'s>(state: &'s ProjectState, asked: Asked<'_>) -> Result<Submitted<'s>, Error> {
    let target = asked.checked.target.clone();
    // The envelope is probed (containment tools verified, cgroups found,
    // stale ones swept) while the package is read and verified below; the
    // Run is still refused before it is recorded if there is none. For a
    // root that runs as a process, its cgroups are made there too.
    let current = state.current();
    let process = current
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .is_some_and(|g| submit::runs_a_process(&g.plan, &target));
    let probing = envelope::probe(&asked.config.containment, process);
    let runs = state.runs();
    runs.fence_lost()?;
    let resolved = submit::resolve_in(state, current, &target)?;
    resolved.check_input_fits(&asked.input)?;
    let package = resolved.package.clone();
    let generation = &resolved.generation;
    // Seed 002 §4: Run Checkpoint needs the installed command's `--out`
    // owner, refused before anything is read or recorded.
    if resolved.checkpointing && asked.out.is_none() {
        return Err(FilesError::invalid(format!(
            "{target} keeps Run Checkpoints, which are delivered with --out DIR; give --out DIR"
        ))
        .into());
    }
    let writable =
        submit::check_declared(&package, asked.request, asked.out.is_some(), asked.receive)?;
    let captured = files::capture(asked.request, asked.dir)?;
    let out = asked.out.map(|out| asked.dir.join(out));
    let destination = out
        .as_ref()
        .map(|out| files::prepare_destination(out, &captured.real_roots()));
    // The output intent as recorded: a replay names a destination that
    // the first Run may have published already.
    let output_intent = match &destination {
        None => None,
        Some(Ok(d)) => Some(d.absolute.clone()),
        Some(Err(_)) => out.as_deref().and_then(intended_destination),
    };
    let identity = submit::identity(
        &asked.checked,
        generation,
        &asked.input,
        captured.manifest(),
        output_intent.as_deref(),
    );
    // The record becomes durable while the Run is prepared below; nothing
    // of it starts before (the executor waits on `commit`).
    let (recorded, commit) = submit::record_committing(
        &runs,
        asked.checked.key.as_deref(),
        identity.content,
        &asked.input,
        || {
            let destination = destination.transpose()?;
            let envelope = probing.join()?;
            Ok::<_, Error>((destination, envelope))
        },
    )?;
    let (record, (destination, envelope)) = match recorded {
        Recorded::Replay(record) => return Ok(Submitted::Replay(record)),
        Recorded::New(record, held) => (record, held),
    };
    let work_root = state.run_dir(&record.id)?;
    // What of the live source differs from the admitted bytes this Run
    // runs: the door says so (metadata first; only a moved file is read).
    let source_changed = state
        .admitted_sources()
        .map(|sources| sources.changed(state.root(), &target))
        .unwrap_or_default();
    let method = resolved.method(&target);
    let root_run = (resolved.checkpointing && destination.is_some()).then(|| {
        Arc::new(RootRun::bound(
            record.id.clone(),
            &method,
            &generation.configuration(),
            &identity.input,
            state.checkpoints(),
        ))
    });
    let executor = Arc::new(
        submit::executor(
            state,
            generation.plan.clone(),
            asked.config,
            Arc::new(ProviderSet::new(asked.config.providers.clone())),
            &envelope,
            work_root.clone(),
            Some(Arc::clone(&package)),
        )
        .with_commit(commit.clone()),
    );
    let packet = destination.is_some().then_some(Packet {
        method,
        input: identity.input,
    });
    Ok(Submitted::New(Box::new(Local {
        state,
        run_id: record.id.clone(),
        runs,
        record: Mutex::new(record),
        commit,
        work_root,
        executor,
        captured,
        writable,
        destination,
        packet,
        root_run,
        package,
        target,
        input: asked.input,
        timeout: asked.checked.timeout,
        receive: asked.receive.to_vec(),
        source_changed,
    })))
}

impl Local<'_> {
    /// The files of what this Run uses whose live source differs from the
    /// admitted bytes it runs (changed, added or removed since review).
    pub fn source_changed(&self) -> &[String] {
        &self.source_changed
    }

    fn record(&self) -> std::sync::MutexGuard<'_, RunRecord> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The checked `--out` destination, for the door that publishes there.
    pub fn take_destination(&mut self) -> Option<Destination> {
        self.destination.take()
    }

    /// The Run as [`super::conduct`] takes it (the door adds its
    /// cancellation).
    pub fn root(&self) -> Root<'_> {
        Root {
            run_id: Some(&self.run_id),
            executor: self.executor.clone(),
            target: self.target.clone(),
            input: self.input.clone(),
            deadline: Deadline::After(self.timeout),
            cancel: None,
            work_root: &self.work_root,
            files: Some(Files {
                captured: &self.captured,
                writable: self.writable.as_deref(),
                packet: self.packet.clone(),
            }),
            package: &self.package,
            receive: &self.receive,
            checkpoint: self.root_run.clone(),
        }
    }

    /// Wait until the record is durable: a Run whose record could not be
    /// written was never recorded, and is never settled.
    fn recorded(&self) -> Result<(), Error> {
        self.commit.as_ref().map_or(Ok(()), |c| c.wait())
    }

    /// [`super::Door::fenced`] for this Run: its record must be durable;
    /// a checkpointing Run's execution is noted in it, so a later
    /// coordinator loss never downgrades a known terminal (seed 002 §8:
    /// recovery then delivers the checkpoint under it).
    pub fn fenced(&self, execution: &Terminal, checkpointing: bool) -> Result<(), Error> {
        self.recorded()?;
        if checkpointing {
            self.runs
                .note_execution(&mut self.record(), execution.to_value())?;
            state::crash_point("run-executed");
        }
        Ok(())
    }

    /// Settle the Run in its record with what conducting it gave.
    pub fn settle(self, conducted: Result<Conducted, NotConducted>) -> Result<Settled, Error> {
        let conducted = match conducted {
            Ok(conducted) => conducted,
            Err(NotConducted::Stopped(e)) => return Err(e),
            Err(NotConducted::Undispatched(failure)) => {
                self.recorded()?;
                submit::settle_undispatched(&self.runs, &mut self.record(), &failure.message);
                return Ok(Settled::Undispatched(failure));
            }
        };
        let mut record = self.record.into_inner().unwrap_or_else(|e| e.into_inner());
        let unsettled = self
            .runs
            .settle(&mut record, conducted.terminal.to_value())
            .err();
        // Settled: the aggregate is delivered (or never will be) and is not
        // kept past its Run.
        let checkpoint_kept = match (&self.root_run, &unsettled) {
            (Some(_), None) => self.state.checkpoints().remove(&record.id).err(),
            _ => None,
        };
        Ok(Settled::Conducted {
            conducted: Box::new(conducted),
            unsettled,
            checkpoint_kept,
        })
    }
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
