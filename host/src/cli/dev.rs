//! `jig dev TARGET`: the author's loop on the project this process holds.
//! It reviews the project (showing each changed file and its diff), admits
//! it with the consent the author gave when it started (`--yes`, or the
//! answer at its prompt: for this session of the command, never stored),
//! runs the target and prints its terminal; then it watches the project
//! and does it again after each save, until Ctrl-C. A review or a Run that
//! fails is reported and the loop goes on. It is local only: it refuses a
//! project a daemon holds.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc::UnboundedReceiver;

use jig_engine::run::ask::{Ask, Given};
use jig_engine::state::{self, ProjectState};

use super::review::{approved, capture, review_held, ReviewOptions};
use super::run::{run_held, RunArgs};
use super::{client, load_config, project_root, report_error, CliError, Code};

/// How long the project must be quiet after a change before the loop
/// reviews it: an editor's save is often several writes.
const SETTLE: Duration = Duration::from_millis(200);

pub struct DevArgs<'a> {
    pub target: &'a str,
    pub input: Option<&'a str>,
    pub timeout: Option<&'a str>,
    /// The author's standing consent for this session.
    pub yes: bool,
    pub dir: &'a Path,
    pub config: Option<&'a Path>,
}

pub fn dev(args: DevArgs<'_>) -> Result<u8, CliError> {
    let given = Given {
        target: args.target,
        timeout: args.timeout,
        key: None,
        input: args.input,
        attach: &[],
        select: &[],
        receive: &[],
        base: args.dir,
    };
    // What each Run is asked is refused now, as jig run would, not after
    // the first review.
    Ask::parse(&given)?;
    let root = project_root(args.dir)?;
    let config = load_config(args.config)?;
    let mut state =
        match ProjectState::acquire(&root) {
            Ok(state) => state.with_settle_reserve(config.records.settle_reserve_bytes()),
            Err(e @ state::StateError::Busy { .. }) => return Err(match client::holding(&root) {
                Some(_) => CliError::new(
                    Code::Unavailable,
                    "a jig serve holds this project, and jig dev admits and runs only a project \
                     it holds itself: stop the daemon, or use jig review and jig run, which \
                     submit to it",
                ),
                None => e.into(),
            }),
            Err(e) => return Err(e.into()),
        };
    if !args.yes && !consented(args.target)? {
        return Err(CliError::new(
            Code::ChangesDeclined,
            "jig dev admits each saved change; nothing was admitted",
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(Code::Internal, e.to_string()))?;
    // Ctrl-C is heard from here on, also while a review or a Run goes on
    // (a Run's own door cancels it; the loop then ends).
    let (mut interrupt, mut terminate) = runtime
        .block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            Ok::<_, std::io::Error>((
                signal(SignalKind::interrupt())?,
                signal(SignalKind::terminate())?,
            ))
        })
        .map_err(|e| CliError::new(Code::Internal, e.to_string()))?;
    let (tx, mut changes) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .and_then(|mut w| w.watch(&root, RecursiveMode::Recursive).map(|()| w))
    .map_err(|e| {
        CliError::new(
            Code::Unavailable,
            format!("{}: cannot watch the project: {e}", root.display()),
        )
    })?;
    let run_args = RunArgs {
        dir: args.dir,
        config: args.config,
        target: args.target,
        input: args.input,
        timeout: args.timeout,
        key: None,
        json: false,
        attach: &[],
        select: &[],
        out: None,
        receive: &[],
        server: None,
        token_file: None,
        cacert: None,
    };
    let options = ReviewOptions {
        yes: true,
        details: false,
        diff: false,
        files: true,
        allow_resolution_network: false,
    };
    loop {
        let reviewed = capture(&root)
            .and_then(|declarations| {
                review_held(&mut state, &root, &config, declarations, &options, false)
            })
            .and_then(|_| Ask::parse(&given).map_err(CliError::from))
            .and_then(|ask| run_held(&state, &config, ask, &run_args));
        if let Err(e) = reviewed {
            report_error(e.code(), &e.to_string(), &[]);
        }
        let _ = std::io::stdout().flush();
        eprintln!(
            "jig dev: watching {} for changes (Ctrl-C stops)",
            super::terminal::escape(&root.display().to_string())
        );
        let next = runtime.block_on(async {
            tokio::select! {
                changed = next_change(&mut changes, &root) => changed,
                _ = interrupt.recv() => false,
                _ = terminate.recv() => false,
            }
        });
        if !next {
            drop(watcher.unwatch(&root));
            return Ok(0);
        }
    }
}

/// Ask, on a terminal, for consent to admit each saved change for this
/// session; `false` when declined. Without a terminal there is nobody to
/// ask: `--yes` says it.
fn consented(target: &str) -> Result<bool, CliError> {
    approved(
        &format!(
            "jig dev reviews and admits each change you save, then runs {} again, until Ctrl-C. \
             Consent for this session? [y/N] ",
            super::terminal::escape(target)
        ),
        "jig dev admits each saved change; rerun with --yes to consent for this session",
    )
}

/// Wait for a change to the project's source (not its `.jig/` state or
/// the `jig.lock` review writes), then for the project to be quiet for
/// [`SETTLE`]. `false` when the watcher has stopped.
async fn next_change(
    changes: &mut UnboundedReceiver<notify::Result<notify::Event>>,
    root: &Path,
) -> bool {
    loop {
        match changes.recv().await {
            None => return false,
            Some(Ok(event)) if is_source_change(&event, root) => break,
            Some(_) => continue,
        }
    }
    loop {
        match tokio::time::timeout(SETTLE, changes.recv()).await {
            Err(_) => return true,
            Ok(None) => return false,
            Ok(Some(_)) => continue,
        }
    }
}

/// Whether `event` changes what review captures: a write, a creation, a
/// removal or a rename of a path outside `.jig/`, other than `jig.lock`
/// and the temporary file review writes it through (`.jig-write-…`).
fn is_source_change(event: &notify::Event, root: &Path) -> bool {
    let writes = matches!(
        event.kind,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_)
    );
    writes
        && event.paths.iter().any(|path| {
            let relative = path.strip_prefix(root).unwrap_or(path);
            let lock_write = relative.components().count() == 1
                && relative.to_string_lossy().starts_with(".jig-write-");
            !(relative.starts_with(".jig") || relative == Path::new("jig.lock") || lock_write)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{AccessKind, CreateKind, ModifyKind};

    #[test]
    fn only_source_changes_wake_the_loop() {
        let root = Path::new("/p");
        let event = |kind, path: &str| notify::Event::new(kind).add_path(root.join(path));
        let write = EventKind::Modify(ModifyKind::Any);
        assert!(is_source_change(&event(write, "flows/a/flow.py"), root));
        assert!(is_source_change(
            &event(EventKind::Create(CreateKind::File), "jig.ts"),
            root
        ));
        assert!(!is_source_change(&event(write, "jig.lock"), root));
        assert!(!is_source_change(&event(write, ".jig/runs/x.json"), root));
        assert!(!is_source_change(&event(write, ".jig-write-Ab12"), root));
        assert!(is_source_change(
            &event(write, "flows/a/.jig-write-x"),
            root
        ));
        assert!(!is_source_change(
            &event(EventKind::Access(AccessKind::Any), "flows/a/flow.py"),
            root
        ));
    }
}
