//! Change notices for the Run lists: a counter per served project, bumped
//! when one of its Runs is recorded, settles or is removed, which the
//! console's live lists wait on (no viewer polls). Locally the daemon bumps
//! it where it records, settles and sweeps. With a database, where workers
//! in other processes settle Runs, one watcher shared by every viewer reads
//! each watched project's [`Tally`](crate::queue::Tally) on each NOTIFY
//! (and at least every [`FALLBACK_POLL`](crate::queue::FALLBACK_POLL)
//! should a NOTIFY be lost) and bumps on a difference; with no viewer it
//! reads nothing.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::Semaphore;

use super::Server;
use crate::Error;

/// Live Run lists the daemon feeds at once (each holds one open response);
/// one more is `RESOURCE_EXHAUSTED` until one closes.
pub const MAX_LIST_VIEWERS: usize = 64;

pub(super) struct Changes {
    projects: BTreeMap<String, watch::Sender<u64>>,
    viewers: Arc<Semaphore>,
    watching: AtomicBool,
}

impl Changes {
    pub(super) fn new<'a>(names: impl Iterator<Item = &'a String>) -> Changes {
        Changes {
            projects: names
                .map(|name| (name.clone(), watch::channel(0).0))
                .collect(),
            viewers: Arc::new(Semaphore::new(MAX_LIST_VIEWERS)),
            watching: AtomicBool::new(false),
        }
    }
}

/// One live list's notices and its place among the [`MAX_LIST_VIEWERS`]
/// (given back when this is dropped).
pub struct ListChanges {
    pub notices: watch::Receiver<u64>,
    _viewer: OwnedSemaphorePermit,
}

impl Server {
    /// Follow the changes of `project`'s Runs, one of at most
    /// [`MAX_LIST_VIEWERS`].
    pub fn watch_runs(self: &Arc<Self>, project: &str) -> Result<ListChanges, Error> {
        self.project(project)?;
        let viewer = self
            .changes
            .viewers
            .clone()
            .try_acquire_owned()
            .map_err(|_| {
                Error::Exhausted(format!(
                    "{MAX_LIST_VIEWERS} live Run lists are open, the most this daemon feeds; close one"
                ))
            })?;
        let notices = self.changes.projects[project].subscribe();
        if self.queue.is_some() && !self.changes.watching.swap(true, Ordering::SeqCst) {
            self.start_watching();
        }
        Ok(ListChanges {
            notices,
            _viewer: viewer,
        })
    }

    /// One of `project`'s Runs was recorded, settled or removed here.
    pub(super) fn runs_changed(&self, project: &str) {
        if let Some(sender) = self.changes.projects.get(project) {
            sender.send_modify(|n| *n += 1);
        }
    }

    /// `--database`: the watcher every viewer shares (see the module).
    fn start_watching(self: &Arc<Self>) {
        let Some((queue, bump)) = &self.queue else {
            return;
        };
        let (queue, mut woken, this) = (queue.clone(), bump.subscribe(), self.clone());
        tokio::spawn(async move {
            let mut seen: HashMap<String, crate::queue::Tally> = HashMap::new();
            loop {
                for (name, sender) in &this.changes.projects {
                    if sender.receiver_count() == 0 {
                        seen.remove(name);
                        continue;
                    }
                    let Ok(tally) = queue.tally(name).await else {
                        continue;
                    };
                    if seen.insert(name.clone(), tally).is_some_and(|t| t != tally) {
                        sender.send_modify(|n| *n += 1);
                    }
                }
                let _ = tokio::time::timeout(crate::queue::FALLBACK_POLL, woken.changed()).await;
            }
        });
    }
}
