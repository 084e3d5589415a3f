//! The served projects and their Runs: submission under the `jig run`
//! rules, a bounded queue in front of a fixed number of active slots, the
//! per-Run event log streams read from, and the drain on shutdown.

mod ahead;
mod changes;
mod live;
mod metrics;
mod queued;
mod retention;
mod settle;

use ahead::Aheads;
pub use live::Live;
use live::{LogWriter, Retired};
use metrics::Metrics;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flow::json::Value;
use flow::package::Package;
use serde_json::json;
use tokio::sync::{watch, Semaphore};
use tracing::Instrument;

use crate::{lifecycle, Error};
use jig_engine::config::HostConfig;
use jig_engine::envelope::Envelope;
use jig_engine::exec::receive;

use jig_engine::exec::submit::{self, Recorded, RunRequest};
use jig_engine::exec::TargetRef;
use jig_engine::providers::ProviderSet;
use jig_engine::run::{self, NotConducted};
use jig_engine::state::{self, ProjectState, RunRecord, PACKET_STORE};

/// How many Runs the daemon holds at once.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_active: usize,
    pub max_queued: usize,
    /// For how many targets the envelope of the next Run is made ahead
    /// (see [`Ahead`]); 0 makes none.
    pub envelopes_ahead: usize,
}

/// The default of [`Limits::envelopes_ahead`]: a held envelope is two
/// sleeping bubblewrap processes (3 MiB), a cgroup and an empty scratch,
/// and for Bun or Python the runtime waiting at the SDK's gate (about
/// 30 or 20 MiB).
pub const DEFAULT_ENVELOPES_AHEAD: usize = 8;

/// A parsed submission (`POST /v1/projects/{project}/runs`).
pub struct ServedRun {
    /// What was asked, as the body said it.
    pub run: RunRequest,
    /// A file Run (submitted as a tar): its captured attachments. Its
    /// packet is published in the daemon's packet store.
    pub files: Option<jig_engine::files::Captured>,
}

/// The output intent a served file Run records: the daemon's packet store
/// (the same for every submission, so a key replays identical content).
const PACKET_INTENT: &str = "jig-serve:packet";

/// The daemon's packet store of a project, created private on first use.
pub fn packet_store(state: &ProjectState) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = state.root().join(state::STATE_DIR).join(PACKET_STORE);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    Ok(dir)
}

/// What a file Run carries from submission to delivery.
struct FileRun {
    captured: jig_engine::files::Captured,
    writable: Option<String>,
    out: bool,
    method: Value,
    input: Value,
}

/// One project the daemon holds open for as long as it serves.
struct Project {
    /// The name it is served under.
    name: String,
    state: ProjectState,
    /// Key lookup and recording happen one submission at a time, so two
    /// submissions with one key make one Run.
    submitting: Mutex<()>,
    /// The admitted generation as last read, with the packages of its
    /// targets read and verified once: while the admission pointer names
    /// it, a submission reads the pointer and nothing more.
    admitted: Mutex<Option<Admitted>>,
}

struct Admitted {
    generation: state::Generation,
    /// Package/1 digest → the package, read and verified from the store.
    packages: BTreeMap<String, Arc<Package>>,
}

impl Project {
    /// The current generation, read again only when the admission pointer
    /// moved (a `jig review` admitted another).
    fn generation(&self) -> Result<Option<state::Generation>, Error> {
        let Some((number, plan_digest)) = self.state.admitted()? else {
            *self.admitted.lock().unwrap() = None;
            return Ok(None);
        };
        {
            let held = self.admitted.lock().unwrap();
            if let Some(held) = held.as_ref().filter(|a| {
                a.generation.number == number && a.generation.plan_digest == plan_digest
            }) {
                return Ok(Some(held.generation.clone()));
            }
        }
        let generation = self.state.current()?;
        *self.admitted.lock().unwrap() = generation.clone().map(|generation| Admitted {
            generation,
            packages: BTreeMap::new(),
        });
        Ok(generation)
    }

    /// [`submit::resolve`] against the held generation and packages.
    fn resolve(&self, target: &TargetRef) -> Result<submit::Resolved, Error> {
        let generation = self.generation()?;
        let plan_digest = generation.as_ref().map(|g| g.plan_digest.clone());
        let resolved = submit::resolve_with(generation, target, |digest| {
            let held = self.admitted.lock().unwrap().as_ref().and_then(|a| {
                let same = Some(&a.generation.plan_digest) == plan_digest.as_ref();
                a.packages.get(digest).filter(|_| same).cloned()
            });
            if let Some(package) = held {
                return Ok(package);
            }
            let package = Arc::new(self.state.store().load_package(digest)?);
            if let Some(admitted) = self.admitted.lock().unwrap().as_mut() {
                if Some(&admitted.generation.plan_digest) == plan_digest.as_ref() {
                    admitted
                        .packages
                        .insert(digest.to_string(), package.clone());
                }
            }
            Ok(package)
        })?;
        Ok(resolved)
    }
}

pub struct Server {
    projects: BTreeMap<String, Arc<Project>>,
    config: Arc<HostConfig>,
    providers: Arc<ProviderSet>,
    envelope: Envelope,
    limits: Limits,
    slots: Arc<Semaphore>,
    /// Runs accepted and not yet settled (active + queued).
    held: AtomicUsize,
    accepting: AtomicBool,
    live: Mutex<HashMap<String, Arc<Live>>>,
    finished: Mutex<Retired>,
    settled: tokio::sync::Notify,
    metrics: Metrics,
    /// What the console's live Run lists wait on ([`changes`]).
    changes: changes::Changes,
    /// `--database`: Runs are enqueued in PostgreSQL for `jig worker`s
    /// instead of executed here (docs/src/serving.md, PostgreSQL and workers); bumped on every NOTIFY.
    queue: Option<(crate::queue::Queue, watch::Sender<u64>)>,
    /// The next Run's envelope of recently run targets, made ahead.
    aheads: Mutex<Aheads>,
    /// Names the work roots of envelopes made ahead.
    ahead_counter: AtomicUsize,
    /// Run id → its settled record, for the Runs whose terminal is known
    /// but could not be written yet ([`Server::settle`]).
    unsettled: Mutex<HashMap<String, Value>>,
}

impl Server {
    /// Acquire every project and fence the Runs a previous coordinator left
    /// pending (`COORDINATOR_LOST`, never redispatched).
    pub fn open(
        projects: &[(String, PathBuf)],
        config: HostConfig,
        limits: Limits,
    ) -> Result<Server, Error> {
        // One envelope for the process: its host cgroup is named by the
        // pid, so every Run's group is a child of that one group; it is
        // made once, not again for every Run, and the first Run's own
        // group is made before any Run arrives.
        let envelope = Envelope::for_daemon(&config.containment)?;
        let mut held = BTreeMap::new();
        for (name, root) in projects {
            if !root.join("jig.ts").is_file() {
                return Err(Error::ProjectNotFound(format!(
                    "project {name}: no jig.ts in {}",
                    root.display()
                )));
            }
            let state = ProjectState::acquire(root)
                .map_err(|e| Error::Project {
                    name: name.clone(),
                    source: e.into(),
                })?
                .with_settle_reserve(config.records.settle_reserve_bytes());
            let fenced = state.runs().fence_lost().map_err(|e| Error::Project {
                name: name.clone(),
                source: e.into(),
            })?;
            if fenced > 0 {
                eprintln!("jig serve: project {name}: {fenced} Run(s) left by a lost coordinator settled COORDINATOR_LOST");
            }
            held.insert(
                name.clone(),
                Arc::new(Project {
                    name: name.clone(),
                    state,
                    submitting: Mutex::new(()),
                    admitted: Mutex::new(None),
                }),
            );
        }
        Ok(Server {
            changes: changes::Changes::new(held.keys()),
            projects: held,
            providers: Arc::new(ProviderSet::new(config.providers.clone())),
            config: Arc::new(config),
            envelope,
            limits,
            slots: Arc::new(Semaphore::new(limits.max_active)),
            held: AtomicUsize::new(0),
            accepting: AtomicBool::new(true),
            live: Mutex::new(HashMap::new()),
            finished: Mutex::new(Retired::default()),
            settled: tokio::sync::Notify::new(),
            metrics: Metrics::new(),
            queue: None,
            aheads: Mutex::new(Aheads::default()),
            ahead_counter: AtomicUsize::new(0),
            unsettled: Mutex::new(HashMap::new()),
        })
    }

    /// Enqueue in `queue` instead of executing (`jig serve --database`).
    /// The daemon's bounds count the served project's Runs in the database.
    pub fn with_queue(mut self, queue: crate::queue::Queue) -> Server {
        let queue = queue.with_bounds(crate::queue::Bounds {
            max_queued: self.limits.max_queued as i64,
            max_active: self.limits.max_active as i64,
        });
        self.queue = Some((queue, watch::channel(0).0));
        self
    }

    /// Name `socket` in each held project's protected state, so a plain
    /// `jig run` there submits to this daemon instead of failing busy.
    pub fn publish_socket(&self, socket: &std::path::Path) {
        let socket = std::path::absolute(socket).unwrap_or_else(|_| socket.to_path_buf());
        for (name, project) in &self.projects {
            let entry = json!({"socket": socket.to_string_lossy(), "project": name});
            if let Err(e) = project.state.publish_served(&entry) {
                eprintln!("jig serve: project {name}: the socket entry could not be written: {e}");
            }
        }
    }

    /// Remove what [`Server::publish_socket`] wrote.
    pub fn withdraw_socket(&self) {
        for project in self.projects.values() {
            project.state.withdraw_served();
        }
    }

    pub fn project_names(&self) -> Vec<String> {
        self.projects.keys().cloned().collect()
    }

    pub fn accepting(&self) -> bool {
        self.accepting.load(Ordering::SeqCst)
    }

    fn project(&self, name: &str) -> Result<&Arc<Project>, Error> {
        self.projects.get(name).ok_or_else(|| {
            Error::ProjectNotFound(format!("this daemon serves no project {name:?}"))
        })
    }

    /// Submit a Run. Everything that can refuse it does so before it is
    /// recorded; a key already used with identical content returns that Run.
    /// Returns the record and, for a new Run, its event log. With a
    /// database, the checks run here and the recording awaits the async
    /// client (no thread blocks on the database).
    pub async fn submit(
        self: &Arc<Self>,
        project_name: &str,
        request: ServedRun,
    ) -> Result<(RunRecord, Option<Arc<Live>>), Error> {
        let enqueue = match self.check_and_start(project_name, request)? {
            Started::Local(record, live) => return Ok((record, live)),
            Started::Queued(enqueue) => enqueue,
        };
        let (id, new) = self.enqueue(enqueue).await?;
        if new {
            self.runs_changed(project_name);
        }
        let record = self.record(project_name, &id).await?;
        let live = (record.terminal().is_none()).then(|| self.follow(&id));
        Ok((record, live.filter(|_| new)))
    }

    /// [`Server::submit`]'s synchronous part: every check, then either the
    /// local Run started or what to record in the database.
    fn check_and_start(
        self: &Arc<Self>,
        project_name: &str,
        request: ServedRun,
    ) -> Result<Started, Error> {
        let project = self.project(project_name)?.clone();
        if !self.accepting() {
            return Err(Error::Closed);
        }
        let asked = submit::check(
            &request.run.target,
            request.run.timeout.as_deref(),
            request.run.key.as_deref(),
        )?;
        let names = receive::parse(&request.run.receive).map_err(Error::from)?;
        // With a database, its key lock serialises instead (a thread
        // blocked here would hold a core the database call needs).
        let _one_at_a_time = self
            .queue
            .is_none()
            .then(|| project.submitting.lock().unwrap());
        let state = &project.state;
        let resolved = project.resolve(&asked.target)?;
        resolved.check_input_fits(&request.run.input)?;
        let target = &asked.target;
        let files_invalid = |m: String| Error::from(jig_engine::files::FilesError::invalid(m));
        // Seed 002 §4: checkpoints are delivered with the packet; with a
        // database any node can deliver a lost Run's last checkpoint.
        let packet_wanted = request.files.is_some() && request.run.out;
        if resolved.checkpointing && (self.queue.is_none() || !packet_wanted) {
            return Err(files_invalid(match self.queue {
                None => format!("{target} keeps Run Checkpoints; this daemon serves checkpointing Runs only with --database"),
                Some(_) => format!("{target} keeps Run Checkpoints, which are delivered with the packet; submit it as a file Run with --out"),
            }));
        }
        // A JSON body is `jig run` without `--attach` or `--out` (a target
        // that declares attachments is refused as it is there); a file Run
        // is matched as `jig run --attach … --out DIR` is, the packet store
        // always its destination.
        let (asked_roots, out) = match &request.files {
            None => (jig_engine::files::Request::default(), false),
            Some(captured) => (
                jig_engine::files::Request {
                    roots: captured
                        .roots
                        .keys()
                        .map(|n| (n.clone(), (PathBuf::new(), Vec::new())))
                        .collect(),
                },
                request.run.out,
            ),
        };
        let writable = submit::check_declared(&resolved.package, &asked_roots, out, &names)?;
        // The same content identity as `jig run` (a direct Run captures
        // nothing), so a key means the same thing through either door.
        let captured = match &request.files {
            Some(captured) => captured.clone(),
            None => {
                jig_engine::files::capture(&jig_engine::files::Request::default(), state.root())
                    .map_err(Error::from)?
            }
        };
        let identity = submit::identity(
            &asked,
            &resolved.generation,
            &request.run.input,
            captured.manifest(),
            request
                .files
                .as_ref()
                .filter(|_| request.run.out)
                .map(|_| std::path::Path::new(PACKET_INTENT)),
        );
        let file_run = request.files.is_some().then(|| FileRun {
            captured,
            writable,
            out: request.run.out,
            method: resolved.method(&asked.target),
            input: identity.input.clone(),
        });
        if self.queue.is_some() {
            let configuration = match resolved.checkpointing {
                true => resolved.generation.configuration(),
                false => Value::Null,
            };
            let files = file_run.map(|f| crate::queue::blobs::FileRun {
                captured: f.captured,
                writable: f.writable,
                out: f.out,
                method: f.method,
                input: f.input,
                configuration,
            });
            return Ok(Started::Queued(Box::new(Enqueue {
                project_name: project_name.to_string(),
                project: project.clone(),
                generation: resolved.generation,
                request,
                content: identity.content,
                timeout: asked.timeout,
                files,
            })));
        }
        let runs = state.runs();
        // The bound: refused before anything is recorded.
        let reserve = || {
            let bound = self.limits.max_active + self.limits.max_queued;
            self.held
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < bound).then_some(n + 1)
                })
                .map(|_| Held(self.clone()))
                .map_err(|_| {
                    Error::Exhausted(format!(
                        "{} Runs are active and {} queued, the most this daemon holds",
                        self.limits.max_active, self.limits.max_queued
                    ))
                })
        };
        let (record, held) = match submit::record(
            &runs,
            asked.key.as_deref(),
            identity.content,
            &request.run.input,
            reserve,
        )? {
            Recorded::Replay(record) => return Ok(Started::Local(record, None)),
            Recorded::New(record, held) => (record, held),
        };
        self.runs_changed(project_name);
        let span = lifecycle::span(&record.id, project_name);
        span.in_scope(|| lifecycle::accepted(&asked.target.to_string(), false));
        let live = Live::new();
        live.push_value(&json!({"type": "status", "status": "queued", "runId": record.id}));
        self.live
            .lock()
            .unwrap()
            .insert(record.id.clone(), live.clone());
        self.metrics.queued.inc();
        let method = Dispatch {
            target: asked.target,
            input: request.run.input,
            timeout: asked.timeout,
            names,
            package: resolved.package,
            plan: resolved.generation.plan,
            files: file_run,
        };
        let this = self.clone();
        let started = Instant::now();
        let task_record = record.clone();
        let task_live = live.clone();
        let task_project = project.clone();
        tokio::spawn(
            async move {
                this.execute(task_project, task_record, task_live, method, started, held)
                    .await
            }
            .instrument(span),
        );
        Ok(Started::Local(record, Some(live)))
    }

    async fn execute(
        self: Arc<Self>,
        project: Arc<Project>,
        record: RunRecord,
        live: Arc<Live>,
        dispatch: Dispatch,
        started: Instant,
        held: Held,
    ) {
        let permit = self.slots.clone().acquire_owned().await;
        self.metrics.queued.dec();
        self.metrics.active.inc();
        live.push_value(&json!({"type": "status", "status": "running", "runId": record.id}));
        lifecycle::dispatched();
        // A Run without files may leave the next Run's envelope made ahead.
        let next = dispatch.files.is_none().then(|| {
            (
                dispatch.target.clone(),
                dispatch.plan.clone(),
                dispatch.package.clone(),
            )
        });
        let (terminal, stream) = match self.run_one(&project, &record, &live, dispatch).await {
            Ok(conducted) => {
                if let Err(e) = conducted.cleanup {
                    eprintln!(
                        "jig serve: JIG_CLEANUP_FAILED: Run {}: private files could not be removed: {e}",
                        record.id
                    );
                }
                (conducted.terminal, conducted.stream)
            }
            // Never dispatched: settled failed.
            Err(NotConducted::Undispatched(failure)) => {
                (submit::undispatched(&record.id, &failure.message), None)
            }
            Err(NotConducted::Stopped(e)) => {
                (submit::undispatched(&record.id, &e.to_string()), None)
            }
        };
        let held = self.settle(&project, &record, &terminal, held);
        // The log ends with the terminal, once it is settled.
        match stream {
            Some(stream) => {
                let line = terminal.to_value();
                let _ = tokio::task::spawn_blocking(move || stream.finish(&line)).await;
            }
            None => live.push_value(&json!({"type": "terminal", "result": terminal.to_value()})),
        }
        self.runs_changed(&project.name);
        drop(permit);
        self.metrics.active.dec();
        self.metrics
            .durations
            .observe(started.elapsed().as_secs_f64());
        self.retire(&record.id, &live);
        // After this Run answered, and before its slot is free (a drain
        // waits for it): the next Run's envelope.
        if let Some((target, plan, package)) = next {
            self.make_ahead(&project, target, plan, package).await;
        }
        drop(held);
        // What this Run's verification learned (a runtime hashed for the
        // first time or after it changed) is kept for the next daemon;
        // nothing is written when nothing was learned. The next Run's
        // group is made now, after this Run has answered, not on its way.
        let envelope = self.envelope.clone();
        let _ = tokio::task::spawn_blocking(move || envelope.ready_next()).await;
    }

    /// Conduct one recorded Run to its terminal, channel lines into its
    /// log through the `--receive` stream (bounded as for the CLI).
    async fn run_one(
        &self,
        project: &Project,
        record: &RunRecord,
        live: &Arc<Live>,
        dispatch: Dispatch,
    ) -> Result<run::Conducted, NotConducted> {
        let state = &project.state;
        // The envelope made ahead for this target comes with the work root
        // it was made in.
        let ahead = match dispatch.files {
            None => self.take_ahead(&project.name, &dispatch.target).await,
            Some(_) => None,
        };
        let (work_root, ahead) = match ahead {
            Some((root, ahead)) => (root, Some(ahead)),
            None => match state.run_dir(&record.id) {
                Ok(root) => (root, None),
                Err(e) => {
                    return Err(NotConducted::Undispatched(jig_engine::exec::Failure::new(
                        flow::wire::ErrorCode::ExecutionFailed,
                        e.to_string(),
                    )))
                }
            },
        };
        let executor = submit::executor(
            state,
            dispatch.plan,
            &self.config,
            self.providers.clone(),
            &self.envelope,
            work_root.clone(),
            // Verified at submission; used only if its digest is the one
            // the root Run resolves.
            Some(dispatch.package.clone()),
        );
        let executor = Arc::new(match ahead {
            Some(ahead) => executor.with_ahead(ahead),
            None => executor,
        });
        let door = PacketStore {
            live: live.clone(),
            state,
            run_id: &record.id,
        };
        let conducted = run::conduct(
            run::Root {
                run_id: Some(&record.id),
                executor: executor.clone(),
                target: dispatch.target,
                input: dispatch.input,
                deadline: run::Deadline::After(dispatch.timeout),
                cancel: Some(live.cancel.subscribe()),
                work_root: &work_root,
                files: dispatch.files.as_ref().map(|f| run::Files {
                    captured: &f.captured,
                    writable: f.writable.as_deref(),
                    packet: f.out.then(|| run::Packet {
                        method: f.method.clone(),
                        input: f.input.clone(),
                    }),
                }),
                package: &dispatch.package,
                receive: &dispatch.names,
                checkpoint: None,
            },
            &door,
        )
        .await;
        if executor.started_ahead() {
            self.metrics.ahead.inc();
        }
        conducted
    }

    pub async fn record(&self, project: &str, id: &str) -> Result<RunRecord, Error> {
        // What cannot name a Run (a NUL byte, a quote) never reaches a
        // query: not found, in both modes.
        if !state::is_run_id(id) {
            self.project(project)?;
            return Err(Error::RunNotFound(id.to_string()));
        }
        if let Some((queue, _)) = &self.queue {
            self.project(project)?;
            let run = queue.load(project, id).await?;
            return Ok(RunRecord {
                id: run.id,
                value: run.value,
            });
        }
        let project = self.project(project)?;
        let record = project.state.runs().load(id).map_err(Error::from)?;
        Ok(self.known(record))
    }

    /// Run `id`'s record and the input kept with it, if any: the row's
    /// input with a database, else the one kept beside the record.
    pub async fn input(
        &self,
        project: &str,
        id: &str,
    ) -> Result<(RunRecord, Option<Value>), Error> {
        let record = self.record(project, id).await?;
        if let Some((queue, _)) = &self.queue {
            let input = queue.input(project, id).await?;
            return Ok((record, input));
        }
        let runs = self.project(project)?.state.runs();
        let read = record.clone();
        let input = tokio::task::spawn_blocking(move || runs.input(&read))
            .await
            .unwrap_or_else(|e| Err(jig_engine::state::RunsError::NotFound(e.to_string())))?;
        Ok((record, input))
    }

    /// The newest `limit` Runs of `project`, and apart those whose record
    /// cannot be read (never with a database: its rows are typed).
    pub async fn list(&self, project: &str, limit: usize) -> Result<state::Listing, Error> {
        if let Some((queue, _)) = &self.queue {
            self.project(project)?;
            let runs = queue
                .list(project, limit.min(i64::MAX as usize) as i64)
                .await?;
            let records = runs
                .into_iter()
                .map(|r| RunRecord {
                    id: r.id,
                    value: r.value,
                })
                .collect();
            return Ok(state::Listing {
                records,
                unreadable: Vec::new(),
            });
        }
        let project = self.project(project)?;
        let mut listing = project.state.runs().list().map_err(Error::from)?;
        listing.records.truncate(limit);
        listing.records = listing.records.into_iter().map(|r| self.known(r)).collect();
        Ok(listing)
    }

    /// A file Run's published packet, as a tar: with a database, the blob
    /// its worker published (checked against its digest); else read from
    /// the packet store off the async workers.
    pub async fn packet(self: &Arc<Self>, project_name: &str, id: &str) -> Result<Vec<u8>, Error> {
        let record = self.record(project_name, id).await?;
        if let Some((queue, _)) = &self.queue {
            let digest = queue
                .packet(project_name, &record.id)
                .await?
                .ok_or(Error::PacketNotFound(record.id))?;
            return queue.get_blob(&digest).await;
        }
        let this = self.clone();
        let project_name = project_name.to_string();
        tokio::task::spawn_blocking(move || this.local_packet(&project_name, record))
            .await
            .unwrap_or_else(|e| Err(Error::Internal(format!("the packet read failed: {e}"))))
    }

    fn local_packet(&self, project_name: &str, record: RunRecord) -> Result<Vec<u8>, Error> {
        let project = self.project(project_name)?;
        let missing = || Error::PacketNotFound(record.id.clone());
        let store = project
            .state
            .root()
            .join(state::STATE_DIR)
            .join(PACKET_STORE);
        let dir = store.join(&record.id);
        if record.terminal().is_none() || !dir.is_dir() {
            return Err(missing());
        }
        let internal = Error::Delivery;
        let files =
            jig_engine::files::read_output(&dir.join(jig_engine::files::archive::PACKET_FILES_DIR))
                .map_err(|e| internal(e.message))?;
        let record_bytes = std::fs::read(dir.join(jig_engine::files::archive::RECORD_ENTRY))
            .map_err(|e| internal(format!("the packet record cannot be read: {e}")))?;
        jig_engine::files::archive::write_packet(&files, &record_bytes)
            .map_err(|e| internal(format!("the packet cannot be written: {e}")))
    }

    /// The current admitted generation of a served project, if any.
    pub fn generation(&self, project: &str) -> Result<Option<state::Generation>, Error> {
        self.project(project)?.generation()
    }

    /// The files of a project whose live source differs from the admitted
    /// bytes its Runs run (changed, added or removed since review; none
    /// when review kept no record of them).
    pub async fn source_changed(&self, project: &str) -> Result<Vec<String>, Error> {
        let project = self.project(project)?.clone();
        let changed = tokio::task::spawn_blocking(move || {
            project
                .state
                .admitted_sources()
                .map(|sources| sources.changed_anywhere(project.state.root()))
                .unwrap_or_default()
        })
        .await
        .map_err(|e| Error::Internal(format!("comparing the live source: {e}")))?;
        Ok(changed)
    }

    /// Each admitted target of a project's current generation with its
    /// package as the next Run would resolve it (the same resolution a
    /// submission takes).
    pub async fn targets(
        self: &Arc<Self>,
        project: &str,
    ) -> Result<Vec<(String, Arc<Package>)>, Error> {
        let this = self.clone();
        let project = project.to_string();
        tokio::task::spawn_blocking(move || {
            let project = this.project(&project)?;
            let Some(generation) = project.generation()? else {
                return Ok(Vec::new());
            };
            let mut out = Vec::new();
            for target in jig_engine::exec::Executor::targets(&generation.plan) {
                let Some(parsed) = TargetRef::parse(&target) else {
                    continue;
                };
                out.push((target, project.resolve(&parsed)?.package));
            }
            Ok(out)
        })
        .await
        .unwrap_or_else(|e| Err(Error::Internal(format!("reading the targets failed: {e}"))))
    }

    /// Runs executing now and Runs waiting for a slot, daemon-wide.
    pub fn occupancy(&self) -> (usize, usize) {
        let active = self
            .limits
            .max_active
            .saturating_sub(self.slots.available_permits());
        let held = self.held.load(Ordering::SeqCst);
        (active, held.saturating_sub(active))
    }

    /// Mark Run `id`'s log complete and keep it among the finished logs,
    /// within [`MAX_FINISHED_LOGS`] and [`MAX_FINISHED_LOG_BYTES`].
    fn retire(&self, id: &str, live: &Live) {
        live.finished.store(true, Ordering::SeqCst);
        live.appended.send_modify(|_| {});
        let evicted = self
            .finished
            .lock()
            .unwrap()
            .push(id.to_string(), live.bytes.load(Ordering::SeqCst));
        let mut logs = self.live.lock().unwrap();
        for old in evicted {
            logs.remove(&old);
        }
    }

    /// End the log of a Run whose record is gone (retention removed it
    /// before its terminal was read): its last line says so with the
    /// code `GET` of the Run now answers, `RUN_NOT_FOUND`, and the log is
    /// dropped, not kept among the finished ones.
    fn gone(&self, id: &str, live: &Live) {
        live.push_value(&json!({
            "type": "removed",
            "runId": id,
            "code": "RUN_NOT_FOUND",
            "message": format!("Run {id} was removed by [retention] before its terminal was read"),
        }));
        live.finished.store(true, Ordering::SeqCst);
        live.appended.send_modify(|_| {});
        self.live.lock().unwrap().remove(id);
    }

    pub fn live(&self, id: &str) -> Option<Arc<Live>> {
        self.live.lock().unwrap().get(id).cloned()
    }

    /// Ask a Run to cancel. Returns whether it was still running here.
    pub async fn cancel(&self, project: &str, id: &str) -> Result<(RunRecord, bool), Error> {
        let record = self.record(project, id).await?;
        if let Some((queue, _)) = &self.queue {
            let unsettled = queue.request_cancel(project, id).await?;
            return Ok((record, unsettled));
        }
        let live = self.live(id).filter(|l| !l.finished.load(Ordering::SeqCst));
        if let Some(live) = &live {
            live.cancel.send_replace(true);
        }
        Ok((record, live.is_some()))
    }

    pub async fn metrics_text(&self) -> String {
        if let Some((queue, _)) = &self.queue {
            // With a database, queued and active Runs are the database's.
            let projects = self.project_names();
            match queue.counts(&projects).await {
                Ok(counts) => {
                    self.metrics.queued.set(counts.queued);
                    self.metrics.active.set(counts.active);
                    let oldest = counts.oldest_queued_ms as f64 / 1000.0;
                    self.metrics.oldest_queued.set(oldest);
                }
                Err(e) => eprintln!("jig serve: metrics: {e}"),
            }
        }
        if self.queue.is_none() {
            self.measure_disk().await;
        }
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.metrics.registry);
        out
    }

    /// Stop admission; let held Runs finish within `grace`; then cancel the
    /// rest and wait (within [`super::CANCEL_FENCE_BUDGET`]) until each is
    /// fenced, cleaned and settled.
    pub async fn drain(&self, grace: Duration) {
        self.accepting.store(false, Ordering::SeqCst);
        let all_settled = || async {
            loop {
                let notified = self.settled.notified();
                if self.held.load(Ordering::SeqCst) == 0 {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(grace, all_settled()).await.is_ok() {
            return;
        }
        let held = self.held.load(Ordering::SeqCst);
        eprintln!("jig serve: shutdown grace over; cancelling {held} Run(s)");
        for live in self.live.lock().unwrap().values() {
            live.cancel.send_replace(true);
        }
        let _ = tokio::time::timeout(super::CANCEL_FENCE_BUDGET, all_settled()).await;
        let unsettled: Vec<String> = self.unsettled.lock().unwrap().keys().cloned().collect();
        if !unsettled.is_empty() {
            eprintln!(
                "jig serve: stopping with {} terminal(s) the disk had no room for: {}; the next \
                 start records them lost. Make room for .jig/, or raise [records] settle-reserve \
                 to keep terminals this large",
                unsettled.len(),
                unsettled.join(", ")
            );
        }
    }
}

/// A slot of the daemon's bound, held from recording to settling.
struct Held(Arc<Server>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::SeqCst);
        self.0.settled.notify_waiters();
    }
}

struct Dispatch {
    target: TargetRef,
    input: Value,
    timeout: Duration,
    names: Vec<String>,
    package: Arc<Package>,
    plan: Value,
    files: Option<FileRun>,
}

/// The daemon as a door: channel lines and the terminal go to the Run's
/// event log; a file Run's packet is published in the project's packet
/// store (seed 002 §8 as for `jig run --out`; checkpointing targets are
/// served only with a database).
struct PacketStore<'a> {
    live: Arc<Live>,
    state: &'a ProjectState,
    run_id: &'a str,
}

impl run::Door for PacketStore<'_> {
    fn sink(&self) -> Option<Box<dyn std::io::Write + Send>> {
        Some(Box::new(LogWriter(self.live.clone())))
    }

    fn destination(&self) -> String {
        PACKET_STORE.to_string()
    }

    fn publish(
        &self,
        output: Vec<jig_engine::files::OutputFile>,
        record: Value,
    ) -> run::Publishing<'_> {
        Box::pin(async move {
            let store = packet_store(self.state).map_err(|e| {
                jig_engine::files::FilesError::delivery(format!(
                    "cannot create the packet store: {e}"
                ))
            })?;
            let destination = jig_engine::files::private_destination(&store, self.run_id)?;
            jig_engine::files::publish(&destination, &output, &record)
                .map(|()| destination.absolute.to_string_lossy().to_string())
        })
    }
}

/// What [`Server::check_and_start`] decided.
enum Started {
    /// Recorded here (new and started, or a replay).
    Local(RunRecord, Option<Arc<Live>>),
    /// Checked; to be recorded in the database.
    Queued(Box<Enqueue>),
}

/// A checked submission for the database.
struct Enqueue {
    project_name: String,
    project: Arc<Project>,
    generation: state::Generation,
    request: ServedRun,
    content: Value,
    timeout: Duration,
    files: Option<crate::queue::blobs::FileRun>,
}
