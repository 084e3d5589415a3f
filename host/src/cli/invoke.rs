//! One root invocation on the terminal: run it on a fresh runtime with
//! SIGINT/SIGTERM and a stuck `--receive` stdout cancelling it, show the
//! elapsed time on a terminal stderr, and print its terminal.

use super::*;

/// The channels a root Run's `--receive` names, in its package.
pub struct Receive<'a> {
    pub package: &'a flow::package::Package,
    pub names: Vec<String>,
}

/// What running one root invocation produced: its result, whether the
/// command was interrupted, and the `--receive` stream still to finish
/// with the terminal line.
pub struct Ran {
    pub result: Result<Success, Failure>,
    pub interrupted: bool,
    pub stream: Option<receive::Stream>,
    /// How long the Run was pending, when a terminal stderr showed it
    /// (the final status line follows the result there).
    pub shown: Option<Duration>,
}

/// On a terminal stderr (`shown` is [`Ran::shown`]), the final line:
/// execution status, outcome, delivery and cleanup reported apart.
pub(super) fn final_line(shown: Option<Duration>, terminal: &Value, cleanup_failed: bool) {
    {
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
}

/// Run one root invocation on a fresh runtime; SIGINT or SIGTERM cancels
/// it, as does a `--receive` stdout that stops taking writes. Shows
/// elapsed time on a terminal stderr.
pub(super) fn run_invocation(
    executor: &Arc<Executor>,
    target: TargetRef,
    input: Value,
    timeout: Duration,
    attachments: Vec<jig_engine::exec::AttachmentGrant>,
    run: Option<Arc<jig_engine::exec::RootRun>>,
    receive: Option<Receive<'_>>,
) -> Result<Ran, CliError> {
    let deadline_unix_ms = state::now_unix_ms() + timeout.as_millis() as u64;
    let mut channels = RootChannels::none();
    let broker = channels.broker.clone();
    let host = channels.host;
    let mut receivers = Vec::new();
    if let Some(receive) = &receive {
        let (writers, created) = broker
            .host_receivers(host, receive.package, &receive.names)
            .map_err(|e| CliError::new(Code::Usage, format!("--receive: {}", e.message)))?;
        channels.writers = writers;
        receivers = created;
    }
    let stream = receive
        .is_some()
        .then(|| Arc::new(receive::Stream::start(std::io::stdout())));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Code::Internal, e.to_string()))?;
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let (result, interrupted, shown) = runtime.block_on(async {
        let interrupt = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
        };
        let pump = stream.as_ref().map(|stream| {
            tokio::spawn(receive::pump(broker.clone(), host, receivers, stream.clone()))
        });
        // A stuck or over-budget stdout cancels the Run.
        let output_fault = async {
            match &stream {
                Some(stream) => receive::watch(stream).await,
                None => std::future::pending().await,
            }
        };
        let live = terminal::LiveStatus::start(executor.clone(), target.to_string());
        let run = executor.run_root(
            Invocation { target, input, deadline_unix_ms, cancel: cancel_rx, attachments, run },
            channels,
        );
        tokio::pin!(run);
        tokio::pin!(interrupt);
        tokio::pin!(output_fault);
        let mut interrupted = false;
        let mut faulted = false;
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                _ = &mut interrupt, if !interrupted => {
                    interrupted = true;
                    if let Some(live) = &live {
                        live.cancelling();
                    }
                    let _ = cancel_tx.send(true);
                }
                _ = &mut output_fault, if !faulted => {
                    faulted = true;
                    let _ = cancel_tx.send(true);
                }
            }
        };
        if let Some(mut pump) = pump {
            // Writers the root never received end here; the rest were
            // settled when their holders ended.
            broker.fail_held_writers(host);
            // The receivers drain as fast as stdout takes them; a stdout
            // fault ends them at once.
            let stream = stream.as_ref().expect("receiving");
            tokio::select! {
                _ = &mut pump => {}
                _ = receive::watch(stream) => {
                    broker.finish(host, true);
                    let _ = pump.await;
                }
            }
        }
        broker.finish(host, true);
        // Cleanup is confirmed once the Run's future has returned.
        let shown = live.map(terminal::LiveStatus::stop);
        (result, interrupted, shown)
    });
    drop(runtime);
    let stream = stream.map(|s| Arc::try_unwrap(s).ok().expect("the readers ended"));
    Ok(Ran {
        result,
        interrupted,
        stream,
        shown,
    })
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
        None => exit::run_exit_code(terminal["status"].as_str().unwrap_or("lost")),
        Some(fault) => {
            eprintln!("JIG_OUTPUT_FAILED: {}", fault.message());
            2
        }
    }
}

/// Print a terminal (JSON when redirected or asked for) and return the exit status.
pub(super) fn print_terminal(terminal: &Value, json_output: bool) -> u8 {
    let status = terminal["status"].as_str().unwrap_or("lost");
    if json_output || !std::io::stdout().is_terminal() {
        println!("{}", flow::json::canonical_string(terminal));
    } else {
        if let Some(stderr) = terminal
            .pointer("/diagnostics/stderr")
            .and_then(Value::as_str)
        {
            if !stderr.is_empty() && status != "succeeded" {
                eprintln!("component stderr:\n{}", terminal::escape_lines(stderr));
            }
        }
        print!(
            "{}",
            terminal::render_terminal(terminal, &terminal::Style::terminal())
        );
    }
    exit::run_exit_code(status)
}
