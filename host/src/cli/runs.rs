//! `jig runs`: list a project's Runs (a table on a terminal, else one line
//! each) or show one Run's record, from the project's records or through
//! the daemon that holds it.

use std::io::IsTerminal;
use std::path::Path;

use clap::Subcommand;
use flow::json::Value;

use jig_engine::state::{self, ProjectState};

use super::{client, project_root, report_error, serve, terminal, CliError, Code, ServerArgs};

/// How many Runs `jig runs` lists unless `--limit` says (as locally).
pub const LISTED_RUNS: usize = 50;
/// The most Runs `jig runs --limit` lists: the most a daemon lists at once.
pub const MAX_LISTED_RUNS: usize = 1000;

/// Which Runs `jig runs` lists: the newest `limit` of those with the
/// status and the target asked.
#[derive(clap::Args, Debug)]
pub(super) struct RunsFilter {
    /// List only the Runs with this status.
    #[arg(long, value_name = "STATUS", value_parser = ["pending", "succeeded", "failed", "lost"])]
    status: Option<String>,
    /// List only the Runs of this target (flow:<path> or binding:<id>).
    #[arg(long, value_name = "TARGET")]
    target: Option<String>,
    /// List at most N Runs, the newest (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = LISTED_RUNS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=MAX_LISTED_RUNS as u64))]
    pub(super) limit: usize,
}

impl RunsFilter {
    /// Whether it narrows the listing beyond its length.
    pub(super) fn narrows(&self) -> bool {
        self.status.is_some() || self.target.is_some()
    }

    /// The target as the records spell it, or a refusal of one that is
    /// not a target.
    pub(super) fn checked(mut self) -> Result<RunsFilter, CliError> {
        if let Some(text) = self.target.take() {
            let target = jig_engine::exec::TargetRef::parse(&text).ok_or_else(|| {
                CliError::new(Code::Usage, "--target must be flow:<path> or binding:<id>")
            })?;
            self.target = Some(target.to_string());
        }
        Ok(self)
    }

    /// The records it lists, newest first, from a listing newest first.
    pub(super) fn select<'a>(&self, listed: &'a [state::RunRecord]) -> Vec<&'a state::RunRecord> {
        listed
            .iter()
            .filter(|record| {
                self.status
                    .as_deref()
                    .is_none_or(|status| record.status().as_str() == status)
            })
            .filter(|record| {
                self.target
                    .as_deref()
                    .is_none_or(|target| record.value["target"].as_str() == Some(target))
            })
            .take(self.limit)
            .collect()
    }
}

#[derive(Subcommand, Debug)]
pub(super) enum RunsAction {
    /// Print one Run record.
    Show {
        /// The Run ID (run-…), as `jig runs` lists it.
        id: String,
    },
}

pub(super) fn runs(
    dir: &Path,
    action: Option<RunsAction>,
    filter: RunsFilter,
    server: ServerArgs,
) -> Result<u8, CliError> {
    let show = action.as_ref().map(|RunsAction::Show { id }| id.as_str());
    if show.is_some() && (filter.narrows() || filter.limit != LISTED_RUNS) {
        return Err(CliError::new(
            Code::Usage,
            "--status, --target and --limit choose what jig runs lists; jig runs show takes only the Run ID",
        ));
    }
    let filter = filter.checked()?;
    if let Some(served) = client::named(
        server.server.as_deref(),
        server.token_file.as_deref(),
        server.cacert.as_deref(),
    )? {
        let local = project_root(dir).ok().map(|root| serve::local_name(&root));
        return from_daemon(&served, show, &filter, local);
    }
    let root = project_root(dir)?;
    let state = match ProjectState::acquire(&root) {
        Ok(state) => state,
        Err(e @ state::StateError::Busy { .. }) => match client::holding(&root) {
            Some(daemon) => return from_daemon(&daemon, show, &filter, None),
            None => return Err(e.into()),
        },
        Err(e) => return Err(e.into()),
    };
    let runs = state.runs();
    runs.fence_lost().map_err(CliError::from)?;
    match show {
        None => {
            let listed = runs.list().map_err(CliError::from)?;
            print_runs(&filter.select(&listed.records));
            Ok(report_unreadable(&listed.unreadable))
        }
        Some(id) => {
            let record = runs.load(id).map_err(CliError::from)?;
            print_record(&record.value);
            Ok(0)
        }
    }
}

/// One Run's record: on a terminal a summary with RFC 3339 times, then
/// the record indented; redirected, its canonical JSON line.
pub(super) fn print_record(record: &Value) {
    if std::io::stdout().is_terminal() {
        out!(
            "{}",
            terminal::render_record(record, &terminal::Style::terminal())
        );
    } else {
        outln!("{}", flow::json::canonical_string(record));
    }
}

/// After the Runs listed: each record that cannot be read, named by its
/// file in the project (`PROJECT_STATE_INVALID` on stderr). The status:
/// 2 when there is one (the listing is not whole), else 0.
pub(super) fn report_unreadable(unreadable: &[state::Unreadable]) -> u8 {
    for u in unreadable {
        report_error(
            "PROJECT_STATE_INVALID",
            &format!(
                "Run {} cannot be listed: its record is not readable; look at {}",
                u.id, u.file
            ),
            &[],
        );
    }
    match unreadable.is_empty() {
        true => 0,
        false => 2,
    }
}

/// The Runs listed: a table on a terminal, else one tab-separated line each.
pub(super) fn print_runs(listed: &[&state::RunRecord]) {
    if std::io::stdout().is_terminal() {
        let rows: Vec<terminal::RunRow> = listed
            .iter()
            .map(|record| {
                let at = |key: &str| record.value.get(key).and_then(Value::as_u64);
                let text = |pointer: &str| {
                    record
                        .value
                        .pointer(pointer)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                let submitted = at("submittedAtUnixMs");
                terminal::RunRow {
                    id: record.id.clone(),
                    created_unix_ms: submitted,
                    status: record.status().as_str().to_string(),
                    outcome: text("/terminal/outcome"),
                    target: text("/target"),
                    duration_ms: submitted
                        .zip(at("settledAtUnixMs"))
                        .map(|(from, to)| to.saturating_sub(from)),
                    code: text("/terminal/code"),
                }
            })
            .collect();
        out!(
            "{}",
            terminal::runs_table(&rows, &terminal::Style::terminal())
        );
        return;
    }
    for record in listed {
        let target = record.value["target"].as_str().unwrap_or("");
        let status = record.status().as_str();
        let code = record
            .value
            .pointer("/terminal/code")
            .and_then(Value::as_str)
            .unwrap_or("");
        outln!("{}\t{status}\t{target}\t{code}", record.id);
    }
}

/// `jig runs` and `jig runs show ID` from the daemon. The daemon lists
/// its newest Runs; `--status` and `--target` choose among its newest
/// [`MAX_LISTED_RUNS`].
fn from_daemon(
    served: &client::Served,
    show: Option<&str>,
    filter: &RunsFilter,
    local: Option<String>,
) -> Result<u8, CliError> {
    client::runtime()?.block_on(async {
        let project = served.project_path(local.as_deref()).await?;
        match show {
            Some(id) => {
                let record = served
                    .endpoint
                    .call(
                        "GET",
                        &format!("{project}/runs/{}", jig_server::serve::path_segment(id)),
                        None,
                    )
                    .await?;
                print_record(&record);
            }
            None => {
                let limit = match filter.narrows() {
                    true => MAX_LISTED_RUNS,
                    false => filter.limit,
                };
                let listed = served
                    .endpoint
                    .call("GET", &format!("{project}/runs?limit={limit}"), None)
                    .await?;
                let records: Vec<jig_engine::state::RunRecord> = listed["runs"]
                    .as_array()
                    .map(|runs| {
                        runs.iter()
                            .map(|value| jig_engine::state::RunRecord {
                                id: value["id"].as_str().unwrap_or_default().to_string(),
                                value: value.clone(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                print_runs(&filter.select(&records));
                let unreadable: Vec<jig_engine::state::Unreadable> = listed["unreadable"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|u| jig_engine::state::Unreadable {
                        id: u["id"].as_str().unwrap_or_default().to_string(),
                        file: u["file"].as_str().unwrap_or_default().to_string(),
                    })
                    .collect();
                return Ok(report_unreadable(&unreadable));
            }
        }
        Ok(0)
    })
}
