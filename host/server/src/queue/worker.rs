//! `jig worker`: claim Runs from the database and execute each inside this
//! host's own envelope, from the verified cache of admitted bytes.
//!
//! Per Run: claim (epoch + 1, lease) → fetch and verify the generation →
//! record dispatch → execute with heartbeats → write the terminal. Any
//! write the database refuses (the lease expired and the Run was
//! requeued or fenced `COORDINATOR_LOST`) is reported on stderr as one
//! JSON line `{"event":"jig.worker.refused",...}` and counted in
//! `jig_refused_writes`; it is never retried. A lost heartbeat cancels
//! the local Run: another node now decides its end.
//!
//! A Run whose deadline (recorded at submission) has passed when it is
//! claimed is settled `DEADLINE_EXCEEDED` before dispatch: nothing runs.
//!
//! Its cache of admitted bytes is bounded: collected at start and every
//! `--cache-interval` of what neither a Run executing here nor the
//! database's current generations name ([`super::cache`]), each collection
//! that removes something reported as one JSON line
//! `{"event":"jig.worker.cache",...}` with the bytes it freed. A worker
//! holds its cache alone (a second one on the same directory is refused).
//!
//! On SIGTERM/SIGINT a worker stops claiming, gives back claims it has not
//! dispatched, lets its dispatched Runs finish within the shutdown grace,
//! then cancels them and writes their terminals (fenced) before it exits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{watch, Semaphore};
use tracing::Instrument;

use super::blobs::Cache;
use super::cache::{CacheCollected, Kept};
use super::{Claim, Queue, Write, FALLBACK_POLL, HEARTBEAT_DIVISOR};
use crate::{lifecycle, Error};
use jig_engine::code::FailureCode;
use jig_engine::config::HostConfig;
use jig_engine::envelope::Envelope;
use jig_engine::exec::{Executor, TargetRef};
use jig_engine::providers::ProviderSet;
use jig_engine::run::{self, NotConducted};
use jig_engine::terminal::Terminal;

/// Generations whose published provider sets a worker keeps loaded.
pub const MAX_PUBLISHED_SETS: usize = 16;

/// How long a worker waits before reconnecting after a database error.
pub const RECONNECT_DELAY: Duration = Duration::from_millis(500);

pub struct Options {
    pub concurrency: usize,
    pub lease: Duration,
    pub cache: std::path::PathBuf,
    pub config: HostConfig,
    /// After a stop signal, how long dispatched Runs may still finish.
    pub shutdown_grace: Duration,
    /// How often the cache is collected (and once at start).
    pub cache_interval: Duration,
}

struct Worker {
    name: String,
    queue: Queue,
    cache: Cache,
    lease: Duration,
    config: Arc<HostConfig>,
    providers: Arc<ProviderSet>,
    /// Provider sets with the files published by a generation, by
    /// (project, generation).
    published: std::sync::Mutex<std::collections::HashMap<(String, i64), Arc<ProviderSet>>>,
    envelope: Envelope,
    /// A stop signal arrived: claim nothing, dispatch nothing new.
    stopping: AtomicBool,
    /// The shutdown grace is over: cancel every Run held here.
    cancel_all: watch::Sender<bool>,
    /// The Runs executing here, by (Run ID, epoch): the generation each
    /// runs. The cache keeps what they use.
    executing: std::sync::Mutex<std::collections::HashMap<(String, i64), (String, i64)>>,
    /// Held whole by a cache collection from reading [`Worker::executing`]
    /// to its last removal; shared by each Run from joining that set until
    /// what it fetched into the cache is whole ([`Worker::join_executing`]).
    /// No collection lists the cache while a Run writes into it: one that
    /// did could miss a package whose manifest is not written yet and
    /// remove the blobs it shares with an older one.
    cache_gate: Arc<tokio::sync::RwLock<()>>,
}

/// A Run's share of [`Worker::cache_gate`] while it fetches.
type Fetching = tokio::sync::OwnedRwLockReadGuard<()>;

/// A Run's place in [`Worker::executing`], left when dropped.
struct Executing {
    worker: Arc<Worker>,
    key: (String, i64),
}

impl Drop for Executing {
    fn drop(&mut self) {
        self.worker.executing.lock().unwrap().remove(&self.key);
    }
}

/// The machine-readable line for a refused late write.
fn report_refused(worker: &str, claim: &Claim, write: &str) {
    eprintln!(
        "{}",
        json!({"event": "jig.worker.refused", "worker": worker, "runId": claim.id, "epoch": claim.epoch, "write": write})
    );
}

/// Run until SIGTERM/SIGINT: at most `concurrency` Runs at once.
pub async fn run(queue: Queue, options: Options) -> Result<(), Error> {
    // Its parent cgroup is made once, not again for every Run.
    let envelope = Envelope::for_daemon(&options.config.containment)?;
    let worker = Arc::new(Worker {
        name: format!(
            "{}-{}",
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "host".into()),
            std::process::id()
        ),
        cache: Cache::open(&options.cache)?,
        providers: Arc::new(ProviderSet::new(options.config.providers.clone())),
        published: Default::default(),
        config: Arc::new(options.config),
        envelope,
        queue,
        lease: options.lease,
        stopping: AtomicBool::new(false),
        cancel_all: watch::channel(false).0,
        executing: Default::default(),
        cache_gate: Default::default(),
    });
    let _alone = worker.cache.lock()?;
    eprintln!(
        "{}",
        json!({"event": "jig.worker.started", "worker": worker.name, "concurrency": options.concurrency})
    );
    // The cache: leftovers of an earlier worker go before any claim, then
    // what no current generation names, every interval.
    worker.collect_cache().await;
    let (collector, interval) = (worker.clone(), options.cache_interval);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            collector.collect_cache().await;
        }
    });
    // Any worker sweeps expired leases; the statements are idempotent.
    let sweeper = worker.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(sweeper.lease / HEARTBEAT_DIVISOR).await;
            if let Err(e) = sweeper.queue.sweep().await {
                eprintln!("jig worker: sweep: {e}");
            }
        }
    });
    let slots = Arc::new(Semaphore::new(options.concurrency.max(1)));
    let mut wakeups: Option<tokio::sync::mpsc::Receiver<()>> = None;
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            biased;
            _ = &mut stop => break,
            permit = slots.clone().acquire_owned() => permit.expect("never closed"),
        };
        if wakeups.is_none() {
            wakeups = worker.queue.listen().await.ok();
        }
        match worker.queue.claim(&worker.name, worker.lease).await {
            Ok(Some(claim)) => {
                let worker = worker.clone();
                tokio::spawn(async move {
                    worker.execute(claim).await;
                    drop(permit);
                });
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("jig worker: {e}");
                wakeups = None;
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        }
        drop(permit);
        let woken = async {
            match wakeups.as_mut() {
                Some(rx) => rx.recv().await.is_some(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            _ = &mut stop => break,
            alive = woken => if !alive { wakeups = None },
            _ = tokio::time::sleep(FALLBACK_POLL) => {}
        }
    }
    // Stop claiming; let the Runs held here finish (they are ours) within
    // the grace, then cancel them; each still writes its own terminal.
    worker.stopping.store(true, Ordering::SeqCst);
    let all = options.concurrency.max(1) as u32;
    eprintln!(
        "{}",
        json!({"event": "jig.worker.stopping", "worker": worker.name, "held": all as usize - slots.available_permits(), "graceMs": options.shutdown_grace.as_millis() as u64})
    );
    if tokio::time::timeout(options.shutdown_grace, slots.acquire_many(all))
        .await
        .is_err()
    {
        eprintln!(
            "{}",
            json!({"event": "jig.worker.cancelling", "worker": worker.name, "held": all as usize - slots.available_permits()})
        );
        worker.cancel_all.send_replace(true);
        let _ = slots.acquire_many(all).await;
    }
    worker.envelope.release();
    eprintln!(
        "{}",
        json!({"event": "jig.worker.stopped", "worker": worker.name})
    );
    Ok(())
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("signal handler");
    let mut int = signal(SignalKind::interrupt()).expect("signal handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

impl Worker {
    /// Join the Runs executing here, under the cache gate, which the Run
    /// keeps (the guard returned) until what it fetches into the cache is
    /// whole.
    async fn join_executing(self: &Arc<Self>, claim: &Claim) -> (Executing, Fetching) {
        let fetching = self.cache_gate.clone().read_owned().await;
        let key = (claim.id.clone(), claim.epoch);
        self.executing
            .lock()
            .unwrap()
            .insert(key.clone(), (claim.project.clone(), claim.generation));
        let executing = Executing {
            worker: self.clone(),
            key,
        };
        (executing, fetching)
    }

    /// Collect the cache (see [`super::cache`]); a failure is logged and
    /// left for the next collection.
    async fn collect_cache(&self) {
        match self.try_collect_cache().await {
            Ok(collected) if collected.is_empty() => {}
            Ok(c) => eprintln!(
                "{}",
                json!({
                    "event": "jig.worker.cache", "worker": self.name,
                    "plans": c.plans, "packages": c.packages, "blobs": c.blobs,
                    "providers": c.providers, "sdkTrees": c.sdk_trees,
                    "workRoots": c.work_roots, "freedBytes": c.freed_bytes,
                })
            ),
            Err(e) => eprintln!("jig worker: cache: {}: {e}", e.code()),
        }
    }

    async fn try_collect_cache(&self) -> Result<CacheCollected, Error> {
        let _gate = self.cache_gate.write().await;
        let executing: Vec<((String, i64), (String, i64))> = self
            .executing
            .lock()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let generations: Vec<(String, i64)> = executing.iter().map(|(_, g)| g.clone()).collect();
        let current = self.queue.current_generations(&generations).await?;
        if let Some((project, number)) = generations.iter().find(|(p, n)| {
            !current
                .iter()
                .any(|g| &g.project == p && g.generation == *n)
        }) {
            // What a Run executing here uses is not known: nothing goes.
            return Err(Error::NotPublished(format!(
                "project {project} generation {number}, run here, is not published; \
                 the cache is collected next time"
            )));
        }
        let cache = self.cache.clone();
        let runs: std::collections::HashSet<String> =
            executing.into_iter().map(|((id, _), _)| id).collect();
        tokio::task::spawn_blocking(move || {
            let kept = Kept::of(&current, |digest| cache.cached_plan(digest));
            cache.collect(&kept, &runs)
        })
        .await
        .map_err(|e| Error::Internal(format!("worker cache: {e}")))?
    }

    async fn execute(self: Arc<Self>, claim: Claim) {
        let span = lifecycle::span(&claim.id, &claim.project);
        span.in_scope(|| lifecycle::claimed(&self.name, claim.epoch));
        self.execute_claimed(claim).instrument(span).await
    }

    async fn execute_claimed(self: Arc<Self>, claim: Claim) {
        // From here until this Run ends, the cache keeps what it uses.
        let (_executing, fetching) = self.join_executing(&claim).await;
        let (cancel_tx, cancel_rx) = watch::channel(false);
        // The end of the shutdown grace cancels this Run too.
        let shutdown = {
            let mut all = self.cancel_all.subscribe();
            let cancel_tx = cancel_tx.clone();
            tokio::spawn(async move {
                if all.wait_for(|cancel| *cancel).await.is_ok() {
                    cancel_tx.send_replace(true);
                }
            })
        };
        // Heartbeats from the claim on: extend, or learn we lost the Run.
        let beat = {
            let this = self.clone();
            let claim = claim.clone();
            let cancel_tx = cancel_tx.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(this.lease / HEARTBEAT_DIVISOR).await;
                    match this.queue.heartbeat(&claim, this.lease).await {
                        Ok(Some(cancel)) => {
                            if cancel {
                                cancel_tx.send_replace(true);
                            }
                        }
                        Ok(None) => {
                            report_refused(&this.name, &claim, "heartbeat");
                            this.queue
                                .note_refused(&this.name, &claim, "heartbeat")
                                .await;
                            cancel_tx.send_replace(true);
                            return;
                        }
                        Err(e) => eprintln!("jig worker: Run {}: {e}", claim.id),
                    }
                }
            })
        };
        let terminal = self.prepare_and_run(&claim, cancel_rx, fetching).await;
        beat.abort();
        shutdown.abort();
        let Some((terminal, packet)) = terminal else {
            return;
        };
        let terminal = terminal.with_run_id(&claim.id).to_value();
        self.write_terminal(&claim, &terminal, packet.as_deref())
            .await;
        // What this Run's verification learned is kept for the next
        // worker; the next Run's group is made now, not on its way.
        let envelope = self.envelope.clone();
        let _ = tokio::task::spawn_blocking(move || envelope.ready_next()).await;
    }

    /// Write the terminal; a database outage is waited out (the write is
    /// fenced, so repeating it after a lost connection cannot settle twice),
    /// a refusal is reported and dropped; a written one is logged settled.
    async fn write_terminal(&self, claim: &Claim, terminal: &Value, packet: Option<&str>) {
        loop {
            match self.queue.settle(claim, terminal, packet).await {
                Ok(Write::Accepted) => return lifecycle::settled(terminal),
                Ok(Write::Refused) => {
                    report_refused(&self.name, claim, "terminal");
                    self.queue.note_refused(&self.name, claim, "terminal").await;
                    return;
                }
                Err(e) => {
                    eprintln!("jig worker: Run {}: {e}", claim.id);
                    tokio::time::sleep(RECONNECT_DELAY).await;
                }
            }
        }
    }

    /// Fetch, dispatch, execute: the terminal and a file Run's packet blob.
    /// `None`: dispatch was refused, nothing ran and nothing is ours to
    /// write. `fetching` keeps cache collections out until the Run's
    /// generation is whole in the cache.
    async fn prepare_and_run(
        &self,
        claim: &Claim,
        cancel: watch::Receiver<bool>,
        fetching: Fetching,
    ) -> Option<(Terminal, Option<String>)> {
        // A Run settled before dispatch: its terminal formed as every
        // door forms one (nothing of it ran).
        let failed = |code: &'static str, message: String| {
            Terminal::failed(FailureCode::raised(code), message)
        };
        let refused = |e: jig_engine::Error| failed(e.code(), e.to_string());
        // The timeout counts from submission: past it, nothing runs.
        let deadline_passed = || super::deadline_passed(&claim.id);
        if claim.expired() {
            return Some((deadline_passed(), None));
        }
        let (plan, published) = match self
            .cache
            .generation(&self.queue, &claim.project, claim.generation)
            .await
        {
            Ok(fetched) => fetched,
            // The database is away: write nothing; the lease expires and
            // the Run returns to the queue (nothing ran).
            Err(e @ Error::Database(_)) => return self.abandon(claim, &e),
            // Settled before dispatch: nothing ran.
            Err(e) => return Some((failed(e.code(), e.to_string()), None)),
        };
        let Some(target) = TargetRef::parse(&claim.target) else {
            return Some((refused(jig_engine::Error::TargetMalformed), None));
        };
        let package = jig_engine::exec::submit::admitted_package(&plan, &target)
            .and_then(|(_, digest, _)| self.cache.store().load_package(&digest).ok());
        // Whole in the cache: from here the executing set keeps it.
        drop(fetching);
        let Some(package) = package else {
            return Some((
                refused(jig_engine::Error::PackageMissing {
                    target: target.to_string(),
                }),
                None,
            ));
        };
        // A file Run's attachments, each checked against its digest.
        let files = match &claim.files {
            None => None,
            Some(digest) => match self.queue.fetch_files(digest).await {
                Ok(files) => Some(files),
                Err(e @ Error::Database(_)) => return self.abandon(claim, &e),
                Err(e) => return Some((failed(e.code(), e.to_string()), None)),
            },
        };
        let work_root = self.cache.root().join("runs").join(&claim.id);
        if let Err(e) = std::fs::create_dir_all(&work_root) {
            let e = jig_engine::state::StateError::Io {
                context: "creating the Run's work directory".into(),
                source: e,
            };
            return Some((refused(e.into()), None));
        }
        // A target keeping Run Checkpoints: each accepted save is kept in
        // the database under this claim before its receipt, so any node
        // can deliver it if this worker is lost.
        let root_run = files
            .as_ref()
            .filter(|f| f.out && !f.configuration.is_null())
            .map(|f| {
                let queue = self.queue.clone();
                let fenced = claim.clone();
                let handle = tokio::runtime::Handle::current();
                let mirror: jig_engine::state::Mirror = Arc::new(move |_, aggregate| {
                    let sequence = aggregate.save.sequence as i64;
                    let value = aggregate.to_value();
                    match handle.block_on(queue.save_checkpoint(&fenced, sequence, &value)) {
                        Ok(Write::Accepted) => Ok(()),
                        Ok(Write::Refused) => Err("this worker no longer owns the Run".to_string()),
                        Err(e) => Err(e.to_string()),
                    }
                });
                let dir = work_root.join("checkpoints");
                let _ = std::fs::create_dir_all(&dir);
                Arc::new(jig_engine::exec::RootRun::bound(
                    claim.id.clone(),
                    &f.method,
                    &f.configuration,
                    &f.input,
                    jig_engine::state::Checkpoints::new(dir).with_mirror(mirror),
                ))
            });
        let executor = Arc::new(
            Executor::new(
                self.cache.store(),
                work_root.clone(),
                plan,
                self.providers_for(claim, published),
                &self.envelope,
                work_root.clone(),
            )
            .with_support_writer(jig_engine::exec::sdk::write_runtime_support)
            .with_agent(self.config.agent.table()),
        );
        if claim.expired() {
            let _ = jig_engine::files::remove_tree(&work_root);
            return Some((deadline_passed(), None));
        }
        if self.stopping.load(Ordering::SeqCst) {
            // Not dispatched: give it back for another worker.
            if let Ok(Write::Refused) = self.queue.release(claim).await {
                report_refused(&self.name, claim, "release");
                self.queue.note_refused(&self.name, claim, "release").await;
            }
            let _ = jig_engine::files::remove_tree(&work_root);
            return None;
        }
        // The durable record of dispatch, before any Flow code starts.
        match self.queue.dispatch(claim).await {
            Ok(Write::Accepted) => lifecycle::dispatched(),
            Ok(Write::Refused) => {
                report_refused(&self.name, claim, "dispatch");
                self.queue.note_refused(&self.name, claim, "dispatch").await;
                let _ = jig_engine::files::remove_tree(&work_root);
                return None;
            }
            Err(e) => {
                // Unknown whether it was recorded: never run it. The lease
                // decides (requeued if dispatch was not recorded).
                eprintln!("jig worker: Run {}: {e}", claim.id);
                let _ = jig_engine::files::remove_tree(&work_root);
                return None;
            }
        }
        let (lines_tx, mut lines_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
        let forward = {
            let queue = self.queue.clone();
            let claim = claim.clone();
            tokio::spawn(async move {
                while let Some(line) = lines_rx.recv().await {
                    let Ok(value) = flow::json::parse(&line) else {
                        continue;
                    };
                    // The terminal is written with the settle, once.
                    if value["type"] == "terminal" {
                        continue;
                    }
                    let _ = queue.event(&claim, &value).await;
                }
            })
        };
        let door = Blobs {
            queue: &self.queue,
            lines: lines_tx,
            published: std::sync::Mutex::new(None),
        };
        let conducted = run::conduct(
            run::Root {
                run_id: Some(&claim.id),
                executor,
                target,
                input: claim.input.clone(),
                deadline: run::Deadline::At(claim.deadline_unix_ms),
                cancel: Some(cancel),
                work_root: &work_root,
                files: files.as_ref().map(|f| run::Files {
                    captured: &f.captured,
                    writable: f.writable.as_deref(),
                    packet: f.out.then(|| run::Packet {
                        method: f.method.clone(),
                        input: f.input.clone(),
                    }),
                }),
                package: &package,
                receive: &claim.receive,
                checkpoint: root_run,
            },
            &door,
        )
        .await;
        let packet = door.published.lock().unwrap().take();
        drop(door);
        let conducted = match conducted {
            Ok(conducted) => conducted,
            Err(NotConducted::Undispatched(f)) => {
                let _ = forward.await;
                return Some((Terminal::of(&Err(f)), None));
            }
            Err(NotConducted::Stopped(e)) => {
                let _ = forward.await;
                return Some((refused(e), None));
            }
        };
        if let Some(stream) = conducted.stream {
            let line = conducted.terminal.to_value();
            let _ = tokio::task::spawn_blocking(move || stream.finish(&line)).await;
        }
        let _ = forward.await;
        if let Err(e) = conducted.cleanup {
            eprintln!(
                "jig worker: JIG_CLEANUP_FAILED: Run {}: private files could not be removed: {e}",
                claim.id
            );
        }
        Some((conducted.terminal, packet))
    }

    /// The providers a Run of `claim`'s generation may call: this worker's
    /// own configured ones, and for every other name the provider files
    /// published with the generation (kept per generation, so each is
    /// loaded once).
    fn providers_for(
        &self,
        claim: &Claim,
        published: Vec<jig_provider_api::ProviderDecl>,
    ) -> Arc<ProviderSet> {
        if published.is_empty() {
            return self.providers.clone();
        }
        let key = (claim.project.clone(), claim.generation);
        let mut sets = self.published.lock().unwrap();
        if let Some(set) = sets.get(&key) {
            return set.clone();
        }
        let mut decls = self.config.providers.clone();
        for decl in published {
            if !decls.iter().any(|d| d.name == decl.name) {
                decls.push(decl);
            }
        }
        let set = Arc::new(ProviderSet::new(decls));
        if sets.len() >= MAX_PUBLISHED_SETS {
            sets.clear();
        }
        sets.insert(key, set.clone());
        set
    }

    /// Give up an undispatched claim the database could not serve: it is
    /// not settled (the outage is not the Run's failure); its lease
    /// expires and the Run returns to the queue for any worker.
    fn abandon(&self, claim: &Claim, e: &Error) -> Option<(Terminal, Option<String>)> {
        eprintln!(
            "jig worker: Run {}: not dispatched, left to its lease: {}: {e}",
            claim.id,
            e.code()
        );
        None
    }
}

/// Publish a packet (its files and `result.json` record) as a blob:
/// the blob's digest.
pub(crate) async fn put_packet(
    queue: &Queue,
    output: &[jig_engine::files::OutputFile],
    record: &Value,
) -> Result<String, jig_engine::files::FilesError> {
    let failed = jig_engine::files::FilesError::delivery;
    let mut record = flow::json::canonical(record);
    record.push(b'\n');
    let tar = jig_engine::files::archive::write_packet(output, &record)
        .map_err(|e| failed(format!("cannot write the packet: {e}")))?;
    queue
        .put_blob(&tar)
        .await
        .map_err(|e| failed(format!("cannot publish the packet: {e}")))
}

/// A worker as a door: channel lines go to the database's events (the
/// terminal is written with the settle, once); a file Run's packet is
/// published as a blob, whose digest is recorded with the terminal under
/// the claim's epoch, so a fenced worker's packet is never delivered.
struct Blobs<'a> {
    queue: &'a Queue,
    lines: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
    /// The digest of the packet blob published.
    published: std::sync::Mutex<Option<String>>,
}

impl run::Door for Blobs<'_> {
    fn sink(&self) -> Option<Box<dyn std::io::Write + Send>> {
        Some(Box::new(Lines(self.lines.clone())))
    }

    fn destination(&self) -> String {
        jig_engine::state::PACKET_STORE.to_string()
    }

    fn publish(
        &self,
        output: Vec<jig_engine::files::OutputFile>,
        record: Value,
    ) -> run::Publishing<'_> {
        Box::pin(async move {
            let digest = put_packet(self.queue, &output, &record).await?;
            *self.published.lock().unwrap() = Some(digest);
            Ok(jig_engine::state::PACKET_STORE.to_string())
        })
    }
}

/// The `--receive` stream's lines, forwarded to the database's events.
struct Lines(tokio::sync::mpsc::UnboundedSender<Vec<u8>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(buf.to_vec());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
