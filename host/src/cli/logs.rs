//! The logs of the two long-running commands, `jig serve` and `jig worker`:
//! the `tracing` events of `jig_server` (each Run's lifecycle in a `run`
//! span with its `run_id`) on stderr, one JSON object a line when stderr
//! is not a terminal (a journal, a file), text on a terminal. `JIG_LOG`
//! sets what is logged (`info` by default; `warn`, `debug`,
//! `jig_server=debug,warn`, `off`).
//!
//! Only those two commands install it: a one-shot command's stderr is
//! exactly its diagnostics. The lines the daemons print themselves
//! (listening, refusals, the worker's `jig.worker.*` events) are not
//! routed through it and keep their words.

use std::io::IsTerminal;

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The environment variable that sets the daemons' log filter.
pub const LOG_ENV: &str = "JIG_LOG";

/// Install the daemon's subscriber; `command` names it in a warning about
/// an unreadable `JIG_LOG` (then `info` is used).
pub(super) fn install(command: &str) {
    let filter = match std::env::var(LOG_ENV) {
        Ok(text) if !text.trim().is_empty() => text.parse::<Targets>().unwrap_or_else(|e| {
            eprintln!(
                "jig {command}: {LOG_ENV}={text:?} is not a log filter ({e}); logging at info"
            );
            info()
        }),
        _ => info(),
    };
    let stderr = std::io::stderr;
    let _ = if std::io::stderr().is_terminal() {
        tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(stderr))
            .with(filter)
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .with_writer(stderr),
            )
            .with(filter)
            .try_init()
    };
}

fn info() -> Targets {
    Targets::new().with_default(LevelFilter::INFO)
}
