//! The command line as a Run's door: the engine conducts one root invocation
//! ([`jig_engine::run::conduct`]) on a fresh runtime while this door turns
//! SIGINT/SIGTERM into its cancellation, shows the elapsed time on a
//! terminal stderr, writes `--receive` lines to stdout and publishes an
//! `--out` packet in its destination directory.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flow::json::Value;
use jig_engine::exec::receive;
use jig_engine::files::{self, Destination, FilesError, OutputFile};
use jig_engine::run::{self, Conducted, Door, NotConducted, Publishing};
use jig_engine::terminal::{Status, Terminal as Execution};

use super::{exit, terminal, CliError, Code};

/// What running one root invocation produced: the conducted Run (its
/// result, terminal, cleanup, delivery and the `--receive` stream still to
/// finish with the terminal line) or why it was not, and how long it was
/// pending when a terminal stderr showed it (the final status line
/// follows there).
pub struct Conduct {
    pub conducted: Result<Conducted, NotConducted>,
    pub shown: Option<Duration>,
}

/// What `jig run` does once its Run is fenced: its record must have been
/// written; a checkpointing Run's execution is noted.
pub(super) type Fenced<'a> = dyn Fn(&Execution, bool) -> Result<(), jig_engine::Error> + Sync + 'a;

/// The command line as a door: `--receive` lines go to stdout, a signal
/// interrupts the command, an `--out` packet is published in its
/// destination, and a checkpointing Run's execution is noted by `executed`.
pub(super) struct CommandLine<'a> {
    pub receiving: bool,
    pub destination: Option<Destination>,
    /// Called once the Run is fenced (see [`Door::fenced`]).
    pub fenced: Option<&'a Fenced<'a>>,
    interrupted: AtomicBool,
}

impl<'a> CommandLine<'a> {
    pub fn new(receiving: bool) -> CommandLine<'a> {
        CommandLine {
            receiving,
            destination: None,
            fenced: None,
            interrupted: AtomicBool::new(false),
        }
    }
}

impl Door for CommandLine<'_> {
    fn sink(&self) -> Option<Box<dyn Write + Send>> {
        self.receiving
            .then(|| Box::new(std::io::stdout()) as Box<dyn Write + Send>)
    }

    fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    fn fenced(&self, execution: &Execution, checkpointing: bool) -> Result<(), jig_engine::Error> {
        match self.fenced {
            Some(fenced) => fenced(execution, checkpointing),
            None => Ok(()),
        }
    }

    fn destination(&self) -> String {
        self.destination
            .as_ref()
            .map(|d| d.absolute.to_string_lossy().to_string())
            .unwrap_or_default()
    }

    fn publish(&self, output: Vec<OutputFile>, record: Value) -> Publishing<'_> {
        Box::pin(async move {
            let destination = self
                .destination
                .as_ref()
                .ok_or_else(|| FilesError::delivery("no --out destination"))?;
            files::publish(destination, &output, &record)
                .map(|()| destination.absolute.to_string_lossy().to_string())
        })
    }
}

/// On a terminal stderr (`shown` is [`Ran::shown`]), the final line:
/// execution status, outcome, delivery and cleanup reported apart.
pub(super) fn final_line(shown: Option<Duration>, terminal: &Value, cleanup_failed: bool) {
    if let Some(elapsed) = shown {
        eprint!(
            "{}",
            terminal::final_line(
                terminal,
                cleanup_failed,
                elapsed,
                &terminal::Style::terminal()
            )
        );
    }
}

/// Conduct one root invocation on a fresh runtime; SIGINT or SIGTERM
/// cancels it (the engine cancels it too when a `--receive` stdout stops
/// taking writes). Shows elapsed time on a terminal stderr.
pub(super) fn run_invocation(
    root: run::Root<'_>,
    door: &CommandLine<'_>,
) -> Result<Conduct, CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Code::Internal, e.to_string()))?;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let root = run::Root {
        cancel: Some(cancel_rx),
        ..root
    };
    let (conducted, shown) = runtime.block_on(async {
        // Both handlers are installed before the Run starts (a signal
        // stream is registered when it is made, not when first polled), so
        // a Ctrl-C the moment the Flow starts still cancels it.
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).ok();
        let mut term = signal(SignalKind::terminate()).ok();
        let interrupt = async {
            tokio::select! {
                _ = async { match int.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
                _ = async { match term.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => {}
            }
        };
        let executor = root.executor.clone();
        let live = terminal::LiveStatus::start(
            move || executor.waiting_on(),
            root.target.to_string(),
        );
        let conducting = run::conduct(root, door);
        tokio::pin!(conducting);
        tokio::pin!(interrupt);
        let mut interrupted = false;
        let conducted = loop {
            tokio::select! {
                conducted = &mut conducting => break conducted,
                _ = &mut interrupt, if !interrupted => {
                    interrupted = true;
                    door.interrupted.store(true, Ordering::SeqCst);
                    if let Some(live) = &live {
                        live.cancelling();
                    }
                    let _ = cancel_tx.send(true);
                }
            }
        };
        // Cleanup is confirmed once the Run has been conducted.
        (conducted, live.map(terminal::LiveStatus::stop))
    });
    drop(runtime);
    Ok(Conduct { conducted, shown })
}

/// Print the terminal: as the last NDJSON line when receiving, else as
/// [`print_terminal`] does. Returns the exit status.
pub(super) fn finish_output(
    terminal: &Value,
    json_output: bool,
    stream: Option<receive::Stream>,
) -> u8 {
    let Some(stream) = stream else {
        return print_terminal(terminal, json_output);
    };
    match stream.finish(terminal) {
        None => exit::run_exit_code(Execution::status_of(terminal)),
        Some(fault) => {
            let message = fault.message();
            eprintln!("{}: {message}", Code::OutputFailed.as_str());
            exit::exit_status(&CliError::new(Code::OutputFailed, message))
        }
    }
}

/// Print a terminal (JSON when redirected or asked for) and return the exit status.
pub(super) fn print_terminal(terminal: &Value, json_output: bool) -> u8 {
    let status = Execution::status_of(terminal);
    if json_output || !std::io::stdout().is_terminal() {
        outln!("{}", flow::json::canonical_string(terminal));
    } else {
        if let Some(stderr) = terminal
            .pointer("/diagnostics/stderr")
            .and_then(Value::as_str)
        {
            if !stderr.is_empty() && status != Status::Succeeded {
                eprintln!("component stderr:\n{}", terminal::escape_lines(stderr));
            }
        }
        out!(
            "{}",
            terminal::render_terminal(terminal, &terminal::Style::terminal())
        );
    }
    exit::run_exit_code(status)
}
