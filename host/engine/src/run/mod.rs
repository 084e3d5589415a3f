//! One recorded root Run, conducted from its sealed attachments to its
//! delivered terminal: the same steps whichever door carried it in.
//!
//! After a door has checked, resolved and recorded a Run (`exec::submit`),
//! [`conduct`] takes it the rest of the way: seal the captured attachments,
//! connect the `--receive` channels, fix the deadline, execute the root
//! under the door's cancellation and the output's faults, fail the writers
//! the root never received, read the writable attachment once the tree is
//! fenced, take the latest checkpoint, remove the Run's private files, form
//! the terminal and deliver its packet under seed 002 §8's one rule
//! ([`delivery`]). What differs per door is a [`Door`]: where channel
//! lines go, how cancellation arrives, where a packet is published, and
//! whether the command itself was interrupted. Recording and settling stay
//! with the door (a file, or a PostgreSQL row), as does printing.

pub mod ask;
pub mod fixture;
pub mod local;
pub mod trial;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::package::Package;
use flow::wire::ErrorCode;
use tokio::sync::watch;

use crate::exec::receive::{self, Stream};
use crate::exec::submit;
use crate::exec::{Executor, Failure, Invocation, RootChannels, RootRun, Success, TargetRef};
use crate::files::{self, Captured, FilesError, OutputFile};
use crate::state::Aggregate;
use crate::terminal::{Delivery, Source, Terminal};

/// When a root Run's execution must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    /// `--timeout` after the Run is dispatched (seed 002 §9: the deadline
    /// begins with the accepted root Run).
    After(Duration),
    /// An absolute deadline already fixed (the queue's, recorded at
    /// submission), in Unix milliseconds on this host's clock.
    At(u64),
}

impl Deadline {
    /// The deadline of a Run dispatched now.
    pub fn unix_ms(self) -> u64 {
        match self {
            Deadline::After(timeout) => after(timeout),
            Deadline::At(at) => at,
        }
    }
}

/// `timeout` from now, in Unix milliseconds: the one place a timeout
/// becomes a deadline.
pub fn after(timeout: Duration) -> u64 {
    jig_provider_api::dispatch::now_unix_ms()
        .saturating_add(timeout.as_millis().min(u64::MAX as u128) as u64)
}

/// A door's publication of a packet, under way.
pub type Publishing<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, FilesError>> + Send + 'a>>;

/// What a door supplies to a Run it carries.
pub trait Door: Sync {
    /// Where the `--receive` stream's lines go (the channel items, then the
    /// terminal line when the door finishes the stream); `None`: no stream
    /// (the CLI prints its terminal instead).
    fn sink(&self) -> Option<Box<dyn Write + Send>>;

    /// Did the command carrying the Run stop before publication (a signal
    /// to `jig run`)? Then final files are not published (seed 002 §8).
    fn interrupted(&self) -> bool {
        false
    }

    /// The Run is fenced and its execution's terminal known, before
    /// anything is delivered: the door may make it durable (a Run keeping
    /// Run Checkpoints, so a later coordinator loss never downgrades it,
    /// seed 002 §8), or refuse to go on (its record was never written).
    fn fenced(&self, _execution: &Terminal, _checkpointing: bool) -> Result<(), crate::Error> {
        Ok(())
    }

    /// Where a packet goes, as the terminal names it when delivery fails.
    fn destination(&self) -> String;

    /// Publish a packet: the Flow's files and its `result.json` record.
    /// Returns where it was published, as the terminal names it.
    fn publish(&self, files: Vec<OutputFile>, record: Value) -> Publishing<'_>;
}

/// A file Run's attachments as captured, and whether a packet is wanted.
pub struct Files<'a> {
    pub captured: &'a Captured,
    /// The name of the declared writable attachment, if any.
    pub writable: Option<&'a str>,
    /// Deliver a packet (`--out`, a served file Run's packet): what ran
    /// and the input identity it names. `None`: nothing is published.
    pub packet: Option<Packet>,
}

/// What a packet's record says ran, and with which input (docs/src/runs.md,
/// Files: attachments and the packet).
#[derive(Debug, Clone)]
pub struct Packet {
    pub method: Value,
    pub input: Value,
}

/// One recorded root Run to conduct.
pub struct Root<'a> {
    /// The recorded Run's ID (`jig exec` records none).
    pub run_id: Option<&'a str>,
    pub executor: Arc<Executor>,
    pub target: TargetRef,
    pub input: Value,
    pub deadline: Deadline,
    /// The door's cancellation (an API cancel, a signal, a lost lease).
    pub cancel: Option<watch::Receiver<bool>>,
    /// The Run's private directory: attachments, scratch, support files.
    pub work_root: &'a Path,
    pub files: Option<Files<'a>>,
    /// The target's package, whose declared send ports `receive` names.
    pub package: &'a Package,
    pub receive: &'a [String],
    /// Run Checkpoint's view of this Run (a checkpointing root with a packet).
    pub checkpoint: Option<Arc<RootRun>>,
}

/// A Run conducted to its terminal.
pub struct Conducted {
    pub result: Result<Success, Failure>,
    /// The terminal as recorded and shown: the execution, its Run ID, and
    /// for a Run with a packet what ran, its input, checkpoint and delivery.
    pub terminal: Terminal,
    /// Removing the Run's private files (seed 002 §8: reported apart,
    /// never changing the terminal).
    pub cleanup: std::io::Result<()>,
    /// Why the packet could not be delivered, if it could not.
    pub delivery: Option<FilesError>,
    /// The door's stream, to be finished with the terminal line once the
    /// door has settled the Run.
    pub stream: Option<Stream>,
    /// What [`Door::interrupted`] said once the execution had ended: the
    /// answer delivery was decided by.
    pub interrupted: bool,
}

/// Conduct `root` to its terminal through `door`. `Err` is a Run that
/// never dispatched (its attachments could not be sealed, its receivers
/// not connected): the door settles it failed with that failure, and
/// nothing of it ran.
pub async fn conduct(root: Root<'_>, door: &dyn Door) -> Result<Conducted, NotConducted> {
    let grants = match &root.files {
        Some(f) => {
            submit::prepare_attachments(f.captured, f.writable, root.work_root).map_err(|e| {
                let _ = files::remove_tree(root.work_root);
                NotConducted::undispatched(
                    ErrorCode::ExecutionFailed,
                    format!("cannot seal the attachments: {e}"),
                )
            })?
        }
        None => Vec::new(),
    };
    let mut channels = RootChannels::none();
    let (broker, host) = (channels.broker.clone(), channels.host);
    let mut receivers = Vec::new();
    if !root.receive.is_empty() {
        let (writers, created) = broker
            .host_receivers(host, root.package, root.receive)
            .map_err(|e| {
                let _ = files::remove_tree(root.work_root);
                NotConducted::undispatched(e.code, format!("--receive: {}", e.message))
            })?;
        channels.writers = writers;
        receivers = created;
    }
    // The envelope hands the writable attachment back by descriptor.
    let handoff = grants.iter().find_map(|g| g.output.clone());
    let stream = door.sink().map(|sink| Arc::new(Stream::start(sink)));
    let pump = stream.as_ref().map(|stream| {
        tokio::spawn(receive::pump(
            broker.clone(),
            host,
            receivers,
            stream.clone(),
        ))
    });
    let (stop, stopped) = watch::channel(false);
    let run = root.executor.run_root(
        Invocation {
            target: root.target,
            input: root.input,
            deadline_unix_ms: root.deadline.unix_ms(),
            cancel: stopped,
            attachments: grants,
            run: root.checkpoint.clone(),
        },
        channels,
    );
    tokio::pin!(run);
    let (mut cancel, mut cancelled) = match root.cancel {
        Some(cancel) => (cancel, false),
        None => (watch::channel(false).1, true),
    };
    // A stuck or over-budget output stream cancels the Run, as the door's
    // own cancellation does.
    let result = {
        let output_fault = async {
            match &stream {
                Some(stream) => receive::watch(stream).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(output_fault);
        let mut faulted = false;
        loop {
            tokio::select! {
                result = &mut run => break result,
                asked = cancel.wait_for(|c| *c), if !cancelled => {
                    // A door whose cancellation went away never cancels.
                    cancelled = true;
                    if asked.is_ok() {
                        stop.send_replace(true);
                    }
                }
                _ = &mut output_fault, if !faulted => {
                    faulted = true;
                    stop.send_replace(true);
                }
            }
        }
    };
    // Writers the root never received end here; the rest were settled
    // when their holders ended. The receivers drain as fast as the output
    // takes them; an output fault ends them at once.
    broker.fail_held_writers(host);
    if let (Some(mut pump), Some(stream)) = (pump, &stream) {
        tokio::select! {
            _ = &mut pump => {}
            _ = receive::watch(stream) => {
                broker.finish(host, true);
                let _ = pump.await;
            }
        }
    }
    broker.finish(host, true);
    let stream = stream.map(|s| Arc::try_unwrap(s).ok().expect("the pump has ended"));
    let interrupted = door.interrupted();
    // The Run is fenced: its writable attachment can no longer change.
    let wanted = root.files.as_ref().and_then(|f| f.packet.clone());
    let read = match (&handoff, &wanted, &result) {
        (Some(handoff), Some(_), Ok(_)) => Some(files::read_handoff(handoff)),
        _ => None,
    };
    // Release the bounded filesystem whatever happened.
    drop(handoff.and_then(|h| h.take()));
    let execution = Terminal::of(&result);
    if let Err(e) = door.fenced(&execution, root.checkpoint.is_some()) {
        let _ = files::remove_tree(root.work_root);
        return Err(NotConducted::Stopped(e));
    }
    // The latest accepted checkpoint, once the Run is fenced (no save can
    // be in flight any more).
    let checkpoint = match root.checkpoint {
        Some(root_run) => tokio::task::spawn_blocking(move || root_run.latest())
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let cleanup = files::remove_tree(root.work_root);
    let mut terminal = execution.clone();
    if let Some(id) = root.run_id {
        terminal = terminal.with_run_id(id);
    }
    let mut failed = None;
    if let Some(packet) = wanted {
        let chosen = delivery(read, checkpoint.as_ref(), interrupted);
        let checkpoint_record = checkpoint.as_ref().map_or(Value::Null, Aggregate::record);
        let published = match chosen {
            Ok((output, source)) => {
                let record = files::packet_record(
                    root.run_id.unwrap_or_default(),
                    &packet.method,
                    &execution.to_value(),
                    &packet.input,
                    source.as_str(),
                    &output,
                    &checkpoint_record,
                );
                door.publish(output, record)
                    .await
                    .map(|shown| (shown, source))
            }
            Err(e) => Err(e),
        };
        let delivered = match published {
            Ok((destination, source)) => Delivery::Written {
                destination,
                source,
            },
            Err(e) => {
                let value = Delivery::Failed {
                    destination: door.destination(),
                    code: e.code().to_string(),
                };
                failed = Some(e);
                value
            }
        };
        terminal =
            terminal.with_packet(&packet.method, &packet.input, &checkpoint_record, delivered);
    }
    Ok(Conducted {
        result,
        terminal,
        cleanup,
        delivery: failed,
        stream,
        interrupted,
    })
}

/// A Run [`conduct`] did not take to a delivered terminal.
#[derive(Debug)]
pub enum NotConducted {
    /// It never dispatched (its attachments could not be sealed, its
    /// receivers not connected): the door settles it failed with this
    /// failure; nothing of it ran.
    Undispatched(Failure),
    /// It ended, but the door refused to go on ([`Door::fenced`]): nothing
    /// was delivered, and its record stays as the door left it.
    Stopped(crate::Error),
}

impl NotConducted {
    fn undispatched(code: ErrorCode, message: String) -> NotConducted {
        NotConducted::Undispatched(Failure::new(code, message))
    }
}

/// Seed 002 §8, decided once for every door: a success publishes its
/// final files (`read`, the fenced writable attachment); anything else (a
/// failure, cancellation, deadline, an invalid result, an interrupted
/// command) publishes the latest accepted checkpoint, or the bare record,
/// or, for an interrupted command with no checkpoint, nothing. Unfinished
/// scratch of a Run that did not succeed is never read.
pub fn delivery(
    read: Option<Result<Vec<OutputFile>, FilesError>>,
    checkpoint: Option<&Aggregate>,
    interrupted: bool,
) -> Result<(Vec<OutputFile>, Source), FilesError> {
    match (read, checkpoint) {
        (Some(Ok(files)), _) if !interrupted => Ok((files, Source::Final)),
        (Some(Err(e)), _) if !interrupted => Err(e),
        (_, Some(checkpoint)) => {
            let mut files = checkpoint.output_files();
            files.sort_by(|a, b| a.path.cmp(&b.path));
            Ok((files, Source::Checkpoint))
        }
        (_, None) if interrupted => Err(FilesError::delivery(
            "the command was interrupted before publication; nothing was published",
        )),
        (_, None) => Ok((Vec::new(), Source::None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> OutputFile {
        OutputFile {
            path: path.into(),
            bytes: b"x".to_vec(),
            sha256: String::new(),
        }
    }

    #[test]
    fn a_success_delivers_its_final_files_unless_the_command_was_interrupted() {
        let (files, source) = delivery(Some(Ok(vec![file("a")])), None, false).unwrap();
        assert_eq!((files.len(), source), (1, Source::Final));
        let refused = delivery(Some(Ok(vec![file("a")])), None, true).unwrap_err();
        assert_eq!(refused.code(), "JIG_DELIVERY_FAILED");
        let read_failed = delivery(Some(Err(FilesError::delivery("x"))), None, false);
        assert_eq!(read_failed.unwrap_err().code(), "JIG_DELIVERY_FAILED");
    }

    #[test]
    fn anything_but_a_success_delivers_the_bare_record_without_a_checkpoint() {
        let (files, source) = delivery(None, None, false).unwrap();
        assert!(files.is_empty());
        assert_eq!(source, Source::None);
    }

    #[test]
    fn a_timeout_becomes_a_deadline_in_one_place() {
        let before = jig_provider_api::dispatch::now_unix_ms();
        let at = Deadline::After(Duration::from_secs(2)).unix_ms();
        assert!(at >= before + 2000 && at <= jig_provider_api::dispatch::now_unix_ms() + 2000);
        assert_eq!(Deadline::At(7).unix_ms(), 7);
    }
}
