//! `jig review`: capture the project, show what would change, ask, and
//! admit the reviewed Plan (or repair only the lock).

use std::io::{IsTerminal, Write};
use std::path::Path;

use jig_engine::config::HostConfig;
use jig_engine::review::Proposal;
use jig_engine::state::{self, ProjectState};
use jig_project::Declarations;

use super::exit::{CliError, Code};
use super::{client, load_config, terminal};

#[derive(Clone, Copy)]
pub(super) struct ReviewOptions {
    pub(super) yes: bool,
    pub(super) details: bool,
    pub(super) diff: bool,
    /// Show the changed packages' files and diffs even when redirected
    /// (`jig dev`).
    pub(super) files: bool,
    pub(super) allow_resolution_network: bool,
}

pub(super) fn review(
    root: &Path,
    config: Option<&Path>,
    options: ReviewOptions,
) -> Result<u8, CliError> {
    let config = load_config(config)?;
    let declarations = capture(root)?;
    let (mut state, beside_a_daemon) = match ProjectState::acquire(root) {
        Ok(state) => (state, false),
        // A `jig serve` holds the project: admit beside it (its new Runs
        // take the new generation; its in-flight Runs keep theirs).
        Err(e @ state::StateError::Busy { .. }) => match client::holding(root) {
            Some(_) => (
                ProjectState::beside_holder(root).map_err(CliError::from)?,
                true,
            ),
            None => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    review_held(
        &mut state,
        root,
        &config,
        declarations,
        &options,
        beside_a_daemon,
    )
}

/// The project's declarations as `jig.ts` proposes them now.
pub(super) fn capture(root: &Path) -> Result<Declarations, CliError> {
    jig_project::capture(root).map_err(|e| {
        if e.is_candidate_invalid() {
            CliError::Candidate(e)
        } else {
            CliError::Project(e)
        }
    })
}

/// Review `declarations` against the project `state` holds: show what
/// would change, ask (unless `yes`), and admit.
pub(super) fn review_held(
    state: &mut ProjectState,
    root: &Path,
    config: &HostConfig,
    declarations: Declarations,
    options: &ReviewOptions,
    beside_a_daemon: bool,
) -> Result<u8, CliError> {
    let ReviewOptions {
        yes,
        details,
        diff,
        files,
        allow_resolution_network,
    } = *options;
    let proposal = jig_engine::review::propose(
        state,
        declarations,
        jig_engine::review::Asked {
            root,
            config,
            allow_resolution_network,
            details,
            warn: &mut |text| eprintln!("{text}"),
        },
    )?;
    let changes = match proposal {
        Proposal::Changes(changes) => changes,
        Proposal::Unchanged { lock_repaired } => {
            if lock_repaired {
                outln!("jig.lock repaired to match the admitted project");
            }
            // The reference prints only the readiness line; a person on a
            // terminal is also told that nothing needed admission.
            if std::io::stderr().is_terminal() {
                eprintln!("unchanged: the admitted project already matches");
            }
            outln!("project is ready");
            return Ok(0);
        }
    };
    let text = &changes.text;
    let on_terminal = std::io::stdout().is_terminal();
    let style = match on_terminal {
        true => terminal::Style::terminal(),
        false => terminal::Style::PLAIN,
    };
    out!("{}", terminal::paint_review(text, &style));
    // What the bytes are: on a terminal always; redirected, when asked
    // (the reference's text alone otherwise).
    if on_terminal || diff || details || files {
        out!(
            "{}",
            terminal::review::review_files(&changes.files, changes.lock.as_deref(), diff, &style)
        );
    }
    let _ = std::io::stdout().flush();
    if !yes
        && !approved(
            "Approve this exact revision for execution? [y/N] ",
            "project changes require confirmation; rerun with --yes",
        )?
    {
        return Err(CliError::new(
            Code::ChangesDeclined,
            "project changes were not admitted",
        ));
    }
    changes.admit(state, beside_a_daemon)?;
    outln!("project is ready");
    Ok(0)
}

/// Ask a person `question` on the terminal: whether they answered `y` or
/// `yes` (any case, trimmed), the reference's rule. Without a terminal on
/// stdin and stdout nobody can answer: `JIG_APPROVAL_REQUIRED` with
/// `unattended`.
pub(super) fn approved(question: &str, unattended: &str) -> Result<bool, CliError> {
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(CliError::new(Code::ApprovalRequired, unattended));
    }
    out!("{question}");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    let answer = answer.trim().to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}
