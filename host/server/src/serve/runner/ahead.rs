//! The next Run's envelope, made ahead: after a Run of a process target a
//! daemon makes that target's next envelope (within
//! [`super::Limits::envelopes_ahead`]) and hands it, with its work root, to
//! the next Run of the target; a daemon letting go of its envelope ends
//! them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flow::json::Value;
use flow::package::Package;
use jig_engine::exec::submit;
use jig_engine::exec::{Ahead, TargetRef};

use super::{Project, Server};

/// How long a Run waits for its target's envelope while it is being made
/// ahead, at most (making it costs about what the Run's own start would).
pub const AHEAD_WAIT: Duration = Duration::from_secs(1);

/// The envelopes made ahead, by (project, target).
#[derive(Default)]
pub(super) struct Aheads {
    made: BTreeMap<(String, String), Slot>,
    /// The daemon let go of its envelope: nothing more is made ahead.
    closed: bool,
}

/// One target's envelope made ahead.
enum Slot {
    /// Being made; woken when it is held (or was not made).
    Making(Arc<tokio::sync::Notify>),
    /// Held: when it was made (the oldest goes first when more are wanted
    /// than the limit), its work root, the envelope.
    Held(Instant, PathBuf, Box<Ahead>),
}

/// End a held envelope and remove its work root.
fn discard(slot: Slot) {
    if let Slot::Held(_, root, ahead) = slot {
        drop(ahead);
        let _ = jig_engine::files::remove_tree(&root);
    }
}

impl Server {
    /// Release what the envelope kept between Runs (after [`Server::drain`]):
    /// the envelopes made ahead end, and nothing more is made.
    pub fn release_envelope(&self) {
        let made = {
            let mut aheads = self.aheads.lock().unwrap();
            aheads.closed = true;
            std::mem::take(&mut aheads.made)
        };
        for slot in made.into_values() {
            if let Slot::Making(made) = &slot {
                made.notify_waiters();
            }
            discard(slot);
        }
        self.envelope.release();
    }

    /// The envelope made ahead for `target` of `project`, if it is held:
    /// (its work root, the envelope). One still being made (only ever on
    /// an otherwise idle daemon) is waited for, at most [`AHEAD_WAIT`]:
    /// making a second envelope beside it would cost the Run more.
    pub(super) async fn take_ahead(
        &self,
        project: &str,
        target: &TargetRef,
    ) -> Option<(PathBuf, Ahead)> {
        let key = (project.to_string(), target.to_string());
        let mut waited = false;
        loop {
            let being_made = {
                let mut aheads = self.aheads.lock().unwrap();
                match aheads.made.remove(&key)? {
                    Slot::Held(made, root, mut ahead) => {
                        drop(aheads);
                        if ahead.is_ready() {
                            return Some((root, *ahead));
                        }
                        discard(Slot::Held(made, root, ahead));
                        return None;
                    }
                    Slot::Making(made) => {
                        // Registered before the lock is let go: a wake-up
                        // in between is not missed.
                        let woken = made.clone().notified_owned();
                        aheads.made.insert(key.clone(), Slot::Making(made));
                        woken
                    }
                }
            };
            if waited {
                return None;
            }
            waited = true;
            let _ = tokio::time::timeout(AHEAD_WAIT, being_made).await;
        }
    }

    /// Make the envelope of the next Run of `target` ahead, after a Run of
    /// it answered (a target with one held already keeps it). Best effort:
    /// whatever fails here, the next Run starts its own envelope.
    pub(super) async fn make_ahead(
        &self,
        project: &Arc<Project>,
        target: TargetRef,
        plan: Value,
        package: Arc<Package>,
    ) {
        let key = (project.name.clone(), target.to_string());
        let making = Arc::new(tokio::sync::Notify::new());
        {
            let mut aheads = self.aheads.lock().unwrap();
            // Not while other Runs execute or wait for a slot: the CPU is
            // theirs (a busy daemon's next Run would not find it made in
            // time, and making it would cost every Run its share).
            if self.limits.envelopes_ahead == 0
                || aheads.closed
                || aheads.made.contains_key(&key)
                || !self.accepting.load(Ordering::SeqCst)
                || self.metrics.queued.get() > 0
                || self.metrics.active.get() > 0
            {
                return;
            }
            aheads
                .made
                .insert(key.clone(), Slot::Making(making.clone()));
        }
        // Whatever happens below, the slot stops being made.
        let made = self.hold_ahead(project, target, plan, package).await;
        let mut aheads = self.aheads.lock().unwrap();
        let ours =
            matches!(aheads.made.get(&key), Some(Slot::Making(m)) if Arc::ptr_eq(m, &making));
        let mut gone = Vec::new();
        match made {
            Some((root, ahead)) if ours && !aheads.closed => {
                aheads
                    .made
                    .insert(key, Slot::Held(Instant::now(), root, Box::new(ahead)));
            }
            Some((root, ahead)) => gone.push(Slot::Held(Instant::now(), root, Box::new(ahead))),
            None if ours => {
                aheads.made.remove(&key);
            }
            None => {}
        }
        while aheads.made.len() > self.limits.envelopes_ahead {
            let oldest = aheads
                .made
                .iter()
                .filter_map(|(key, slot)| match slot {
                    Slot::Held(made, ..) => Some((*made, key.clone())),
                    Slot::Making(_) => None,
                })
                .min();
            let Some((_, oldest)) = oldest else {
                break;
            };
            gone.extend(aheads.made.remove(&oldest));
        }
        drop(aheads);
        making.notify_waiters();
        gone.into_iter().for_each(discard);
    }

    /// Make and hold the envelope of the next Run of `target`: (its work
    /// root, the envelope), or `None` when it is not made.
    async fn hold_ahead(
        &self,
        project: &Arc<Project>,
        target: TargetRef,
        plan: Value,
        package: Arc<Package>,
    ) -> Option<(PathBuf, Ahead)> {
        let n = self.ahead_counter.fetch_add(1, Ordering::Relaxed);
        let root = project.state.run_dir(&format!("ahead-{n}")).ok()?;
        let executor = submit::executor(
            &project.state,
            plan,
            &self.config,
            self.providers.clone(),
            &self.envelope,
            root.clone(),
            Some(package),
        );
        // Hashing, trees and the runtime view: off the runtime's threads.
        let launch = tokio::task::spawn_blocking(move || executor.launch_ahead(&target)).await;
        // The envelope is spawned here, on a runtime worker: it lives as
        // long as the thread that spawned it.
        let ahead = match launch {
            Ok(Ok(Some(launch))) => Ahead::start(&self.envelope, launch).ok(),
            _ => None,
        };
        match ahead {
            Some(ahead) => Some((root, ahead)),
            None => {
                let _ = jig_engine::files::remove_tree(&root);
                None
            }
        }
    }
}
