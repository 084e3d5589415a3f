//! Retention in `jig serve`: the operator's `[retention]` applied by a
//! background sweep, and the disk each project's `.jig/` holds, measured
//! for `/metrics`.
//!
//! A sweep runs on a blocking thread beside the Runs: removing Runs, it
//! never takes the submission lock (what it removes is settled and
//! immutable, and a key is removed before its record, so a submission
//! finds the Run or makes a new one) and removes at most
//! [`retention::SWEEP_BATCH`] Runs at a time. Collecting the store, it
//! holds the submission lock (no Run resolves a package or is recorded
//! meanwhile) and the admission lock (skipped this time while a review
//! beside the daemon admits).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jig_engine::state;
use jig_engine::state::retention;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Server;

/// After a sweep that left Runs due (a backlog), the next one comes this soon.
const BACKLOG_PAUSE: Duration = Duration::from_secs(1);

/// Gauges of what each served project keeps on disk, by project.
pub(super) struct Disk {
    runs: Family<Vec<(String, String)>, Gauge>,
    run_bytes: Family<Vec<(String, String)>, Gauge>,
    packets: Family<Vec<(String, String)>, Gauge>,
    packet_bytes: Family<Vec<(String, String)>, Gauge>,
    store: Family<Vec<(String, String)>, Gauge>,
    store_bytes: Family<Vec<(String, String)>, Gauge>,
    removed: Family<Vec<(String, String)>, Counter>,
    freed: Family<Vec<(String, String)>, Counter>,
}

impl Disk {
    pub(super) fn register(registry: &mut Registry) -> Disk {
        let disk = Disk {
            runs: Family::default(),
            run_bytes: Family::default(),
            packets: Family::default(),
            packet_bytes: Family::default(),
            store: Family::default(),
            store_bytes: Family::default(),
            removed: Family::default(),
            freed: Family::default(),
        };
        let gauges = [
            (
                "jig_retained_runs",
                "Run records kept, pending ones included",
                &disk.runs,
            ),
            (
                "jig_retained_run_bytes",
                "Bytes of Run records, keys and checkpoints",
                &disk.run_bytes,
            ),
            (
                "jig_retained_packets",
                "Delivered packets kept",
                &disk.packets,
            ),
            (
                "jig_retained_packet_bytes",
                "Bytes of delivered packets",
                &disk.packet_bytes,
            ),
            (
                "jig_store_artifacts",
                "Packages and blobs in the project store",
                &disk.store,
            ),
            (
                "jig_store_bytes",
                "Bytes of the project store, shared trees included",
                &disk.store_bytes,
            ),
        ];
        for (name, help, family) in gauges {
            registry.register(name, help, family.clone());
        }
        registry.register(
            "jig_retention_removed_runs",
            "Runs removed by [retention]",
            disk.removed.clone(),
        );
        registry.register(
            "jig_retention_freed_bytes",
            "Bytes freed by [retention]",
            disk.freed.clone(),
        );
        disk
    }
}

fn label(project: &str) -> Vec<(String, String)> {
    vec![("project".to_string(), project.to_string())]
}

impl Server {
    /// Measure every project's `.jig/` (off the async workers) into the
    /// disk gauges.
    pub(super) async fn measure_disk(&self) {
        let roots: Vec<(String, PathBuf)> = self
            .projects
            .iter()
            .map(|(name, p)| (name.clone(), p.state.root().to_path_buf()))
            .collect();
        let measured = tokio::task::spawn_blocking(move || {
            roots
                .into_iter()
                .map(|(name, root)| (name, retention::usage(&root)))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let disk = &self.metrics.disk;
        let set = |family: &Family<Vec<(String, String)>, Gauge>, name: &str, n: u64| {
            family
                .get_or_create(&label(name))
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        };
        for (name, used) in measured {
            set(&disk.runs, &name, used.runs.count);
            set(&disk.run_bytes, &name, used.runs.bytes);
            set(&disk.packets, &name, used.packets.count);
            set(&disk.packet_bytes, &name, used.packets.bytes);
            set(&disk.store, &name, used.store.count);
            set(&disk.store_bytes, &name, used.store.bytes);
        }
    }

    /// Apply `[retention]` every `interval` (sooner while a backlog is
    /// due), for as long as the daemon runs. Without the table, nothing.
    pub fn start_retention(self: &Arc<Self>) {
        let Ok(Some(policy)) = self.config.retention_policy() else {
            return;
        };
        if self.queue.is_some() {
            // The Runs are the database's: its own sweep applies the policy.
            return self.start_queue_retention(policy);
        }
        let this = self.clone();
        tokio::spawn(async move {
            let mut pause = policy.interval;
            loop {
                tokio::time::sleep(pause).await;
                pause = policy.interval;
                for (name, project) in &this.projects {
                    let (project, swept_policy) = (project.clone(), policy.clone());
                    let swept = tokio::task::spawn_blocking(move || {
                        let mut report = retention::sweep(
                            &project.state,
                            &swept_policy,
                            jig_provider_api::dispatch::now_unix_ms(),
                            false,
                            retention::SWEEP_BATCH,
                        )?;
                        // The store, while no submission resolves a
                        // package or records a Run.
                        let _one_at_a_time = project.submitting.lock().unwrap();
                        let collected = retention::collect_store(&project.state, false, &[])?;
                        report.freed_bytes += collected.freed_bytes;
                        // Other jig builds' SDK trees, idle past their grace.
                        let store = project.state.store();
                        let sdk = jig_engine::exec::sdk::collect_support(&store, false)?;
                        report.freed_bytes += sdk.freed_bytes;
                        Ok::<_, state::StateError>(report)
                    })
                    .await;
                    match swept {
                        Ok(Ok(report)) => {
                            if report.more {
                                pause = BACKLOG_PAUSE;
                            }
                            this.forget(name, &report);
                        }
                        Ok(Err(e)) => eprintln!("jig serve: project {name}: retention: {e}"),
                        Err(e) => eprintln!("jig serve: project {name}: retention: {e}"),
                    }
                }
            }
        });
    }

    /// Drop what the daemon remembers of removed Runs, and count them.
    fn forget(&self, project: &str, report: &retention::Report) {
        if report.runs.is_empty() && report.packets.is_empty() {
            return;
        }
        let mut live = self.live.lock().unwrap();
        for id in &report.runs {
            live.remove(id);
        }
        drop(live);
        self.runs_changed(project);
        self.metrics
            .disk
            .removed
            .get_or_create(&label(project))
            .inc_by(report.runs.len() as u64);
        self.metrics
            .disk
            .freed
            .get_or_create(&label(project))
            .inc_by(report.freed_bytes);
    }

    /// `--database`: the same policy over the project's Runs in the
    /// database, one bounded batch per project and sweep.
    fn start_queue_retention(self: &Arc<Self>, policy: jig_engine::config::retention::Policy) {
        let this = self.clone();
        tokio::spawn(async move {
            let Some((queue, _)) = &this.queue else {
                return;
            };
            let mut pause = policy.interval;
            loop {
                tokio::time::sleep(pause).await;
                pause = policy.interval;
                for name in this.projects.keys() {
                    let batch = crate::queue::RETENTION_BATCH;
                    match queue.retain(name, &policy, batch).await {
                        Ok(removed) => {
                            if removed.runs.len() as i64 >= batch {
                                pause = BACKLOG_PAUSE;
                            }
                            this.forget(
                                name,
                                &retention::Report {
                                    runs: removed.runs,
                                    freed_bytes: removed.freed_bytes,
                                    ..Default::default()
                                },
                            );
                        }
                        Err(e) => eprintln!("jig serve: project {name}: retention: {e}"),
                    }
                }
                // The store is the database's, shared by every project.
                let batch = crate::queue::STORE_BATCH;
                match queue.collect_store(crate::queue::STORE_GRACE, batch).await {
                    Ok(collected) if collected.blobs as i64 >= batch => pause = BACKLOG_PAUSE,
                    Ok(_) => {}
                    Err(e) => eprintln!("jig serve: retention of the store: {e}"),
                }
            }
        });
    }
}
