//! Settling a Run a daemon conducted: its terminal written durably, or,
//! where the host cannot write it now (its disk full, the terminal larger
//! than the space set aside for it), kept in memory, answered from there
//! and written again, backing off, until it is durable.

use std::sync::Arc;
use std::time::Duration;

use jig_engine::state::RunRecord;
use jig_engine::terminal::{Status, Terminal};
use tracing::Instrument;

use super::{Held, Project, Server};
use crate::lifecycle;

/// How long [`Server::settle`] first waits before writing a terminal
/// again, doubled each time up to [`SETTLE_RETRY_MAX`].
const SETTLE_RETRY_FIRST: Duration = Duration::from_millis(100);
const SETTLE_RETRY_MAX: Duration = Duration::from_secs(10);

impl Server {
    /// Settle Run `record` with `terminal`, and count its status. A host
    /// that cannot write it now (its disk full, and the terminal larger
    /// than the space set aside for it) keeps it in memory, answers it
    /// from there ([`Server::record`]), and writes it again, backing off,
    /// until it is durable; the Run holds its place (`held`, returned once
    /// it is durable) and is counted, and logged settled, only then.
    pub(super) fn settle(
        self: &Arc<Self>,
        project: &Arc<Project>,
        record: &RunRecord,
        terminal: &Terminal,
        held: Held,
    ) -> Option<Held> {
        let terminal = terminal.to_value();
        let mut settled = record.clone();
        let e = match project.state.runs().settle(&mut settled, terminal.clone()) {
            Ok(()) => {
                self.metrics.count_settled(&terminal);
                lifecycle::settled(&terminal);
                return Some(held);
            }
            Err(e) => e,
        };
        eprintln!(
            "jig serve: Run {}: its terminal could not be written ({e}); it is kept in memory and \
             written again until it is durable",
            record.id
        );
        self.unsettled
            .lock()
            .unwrap()
            .insert(record.id.clone(), settled.value);
        let (this, project, record) = (self.clone(), project.clone(), record.clone());
        // In the Run's span, so its `settled` is logged as the Run's.
        tokio::spawn(
            async move {
                let mut wait = SETTLE_RETRY_FIRST;
                loop {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(SETTLE_RETRY_MAX);
                    let runs = project.state.runs();
                    let (mut again, written) = (record.clone(), terminal.clone());
                    let settled =
                        tokio::task::spawn_blocking(move || runs.settle(&mut again, written)).await;
                    if let Ok(Ok(())) = settled {
                        this.unsettled.lock().unwrap().remove(&record.id);
                        this.metrics.count_settled(&terminal);
                        lifecycle::settled(&terminal);
                        this.runs_changed(&project.name);
                        drop(held);
                        return;
                    }
                }
            }
            .in_current_span(),
        );
        None
    }

    /// A record as this daemon answers it: a pending one whose terminal is
    /// known but not yet durable ([`Server::settle`]) with that terminal.
    pub(super) fn known(&self, record: RunRecord) -> RunRecord {
        if record.status() != Status::Pending {
            return record;
        }
        match self.unsettled.lock().unwrap().get(&record.id) {
            Some(value) => RunRecord {
                id: record.id,
                value: value.clone(),
            },
            None => record,
        }
    }
}
