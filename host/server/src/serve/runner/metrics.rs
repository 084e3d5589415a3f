//! A daemon's OpenMetrics: Runs settled by status, their durations, the
//! active and queued gauges (with a database, the oldest queued Run's
//! wait too), Runs started ahead, and the disk `.jig/` uses.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::retention;

pub(super) struct Metrics {
    pub(super) registry: Registry,
    pub(super) runs: Family<Vec<(String, String)>, Counter>,
    pub(super) durations: Histogram,
    pub(super) active: Gauge,
    pub(super) queued: Gauge,
    /// With a database: how long the oldest queued Run has waited for a
    /// worker (0 when none waits).
    pub(super) oldest_queued: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Runs whose envelope was made ahead of them and used.
    pub(super) ahead: Counter,
    pub(super) disk: retention::Disk,
}

impl Metrics {
    pub(super) fn new() -> Metrics {
        let mut registry = Registry::default();
        let runs = Family::<Vec<(String, String)>, Counter>::default();
        let durations = Histogram::new([
            0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
        ]);
        let active = Gauge::default();
        let queued = Gauge::default();
        registry.register(
            "jig_runs",
            "Runs settled by this daemon, by terminal status",
            runs.clone(),
        );
        registry.register(
            "jig_run_duration_seconds",
            "Time from submission to terminal",
            durations.clone(),
        );
        registry.register("jig_active_runs", "Runs executing now", active.clone());
        registry.register(
            "jig_queued_runs",
            "Runs accepted and waiting for a slot",
            queued.clone(),
        );
        let oldest_queued = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        registry.register(
            "jig_oldest_queued_seconds",
            "With a database: how long the oldest queued Run has waited for a worker to claim it",
            oldest_queued.clone(),
        );
        let ahead = Counter::default();
        registry.register(
            "jig_runs_started_ahead",
            "Runs that started in an envelope made ahead of them",
            ahead.clone(),
        );
        let disk = retention::Disk::register(&mut registry);
        Metrics {
            ahead,
            disk,
            registry,
            runs,
            durations,
            active,
            queued,
            oldest_queued,
        }
    }

    /// Count a settled Run by its terminal's status, once it is durable.
    pub(super) fn count_settled(&self, terminal: &serde_json::Value) {
        let status = jig_engine::terminal::Terminal::status_of(terminal)
            .as_str()
            .to_string();
        self.runs
            .get_or_create(&vec![("status".to_string(), status)])
            .inc();
    }
}
