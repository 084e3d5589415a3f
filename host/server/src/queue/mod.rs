//! Runs queued in PostgreSQL (docs/src/serving.md, PostgreSQL and workers): the database is the one source of
//! truth for which Runs exist, who owns each one and how it ended.
//!
//! `jig serve --database` records Runs here instead of executing them;
//! `jig worker`s claim them with one short `FOR UPDATE SKIP LOCKED`
//! transaction that increments the Run's fencing epoch and sets a lease
//! from the database's clock. Every later write names the epoch and the
//! state it expects, so a paused or partitioned worker's late writes
//! match no row: they are refused and reported, never retried. Dispatch is
//! recorded before Flow code starts; a lease that expires before dispatch
//! returns the Run to the queue, one that expires after dispatch settles
//! it `COORDINATOR_LOST` (seed 002 §11 item 11), never redispatched.
//!
//! Admitted bytes travel by digest ([`blobs`]): the generation a Run names
//! (with the provider files its pins name) is published as
//! content-addressed blobs and a worker runs exactly those bytes from its
//! own verified cache. A file Run's attachments travel the same way; its
//! packet is a blob written with the terminal, and each Run Checkpoint
//! save is kept under the claim, so any node's [`Queue::sweep`] that
//! fences a lost Run delivers its last checkpoint.

pub mod blobs;
pub mod cache;
mod retention;
mod schema;
mod sweep;
pub mod worker;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::Error;
use jig_engine::terminal::Terminal;

pub use retention::{Collected, Retained, RETENTION_BATCH, STORE_BATCH, STORE_GRACE};
pub use schema::SCHEMA_VERSION;

/// How long a claim or heartbeat holds a Run unless extended.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);
/// Heartbeats extend the lease this often (a third of it).
pub const HEARTBEAT_DIVISOR: u32 = 3;
/// The fallback poll when no NOTIFY arrives (wakeups are NOTIFY first).
pub const FALLBACK_POLL: Duration = Duration::from_secs(2);
/// Connections one process keeps open.
pub const MAX_POOL_CONNECTIONS: usize = 16;
/// How often `jig serve --database` sweeps (workers sweep every third of
/// their lease).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// The most Runs one sweep settles per kind (expired queued Runs, lost
/// dispatched ones); the rest wait for the next sweep.
pub const SWEEP_BATCH: i64 = 64;
/// The NOTIFY channel announcing queued Runs and status changes.
pub const NOTIFY_CHANNEL: &str = "jig_runs";

/// The terminal a Run gets when its lease expired after dispatch.
pub fn coordinator_lost(run_id: &str) -> Terminal {
    Terminal::lost("the worker coordinating this Run stopped renewing its lease after dispatch; its work was fenced and is not replayed")
        .with_run_id(run_id)
}

impl Error {
    fn db(context: &str) -> impl FnOnce(tokio_postgres::Error) -> Error + '_ {
        move |e| Error::Database(format!("{context}: {}", describe(&e)))
    }
}

/// A database error with the server's own message, when it sent one, or
/// else with each of its causes (a refused certificate says why).
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{e}: {}", db.message()),
        None => with_causes(e),
    }
}

/// An error and its causes, as one line.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = next.source();
    }
    text
}

/// The database cannot be reached or answered with an error.
pub const UNAVAILABLE: &str = "JIG_DATABASE_UNAVAILABLE";
/// The URL is malformed or carries a password.
pub const URL_INVALID: &str = "JIG_DATABASE_URL_INVALID";
/// The database's schema is newer than this binary knows.
pub const SCHEMA_NEWER: &str = "JIG_DATABASE_SCHEMA_NEWER";
/// A fetched blob's bytes do not match the digest it is stored under.
pub const BLOB_MISMATCH: &str = "JIG_BLOB_DIGEST_MISMATCH";

/// Where the database is and how its connections are made: a URL without
/// a password, the password (if any) read from a file, and TLS as the
/// URL's `sslmode` asks (`prefer` by default: TLS when the server offers
/// it). Over TLS the server's certificate is always verified, name and
/// chain (libpq's `verify-full`), against `ca_file`'s certificates (PEM)
/// or else the system's roots.
#[derive(Clone)]
pub struct Database {
    pub config: tokio_postgres::Config,
    tls: tokio_postgres_rustls::MakeRustlsConnect,
}

impl std::fmt::Debug for Database {
    /// The connection settings (tokio-postgres leaves the password out);
    /// the TLS roots are not shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The largest CA file read (`[database] ca-file`).
const MAX_CA_FILE_BYTES: u64 = 1 << 20;

pub fn connect_config(
    url: &str,
    password_file: Option<&Path>,
    ca_file: Option<&Path>,
) -> Result<Database, Error> {
    let config = url_config(url, password_file)?;
    Ok(Database {
        config,
        tls: tokio_postgres_rustls::MakeRustlsConnect::new(tls_config(ca_file)?),
    })
}

/// The TLS client settings: ring, TLS 1.2 and 1.3, and the roots of
/// `ca_file` or the system.
fn tls_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, Error> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let invalid =
                |m: String| Error::DatabaseUrl(format!("CA file {}: {m}", path.display()));
            let meta = std::fs::metadata(path).map_err(|e| invalid(e.to_string()))?;
            if meta.len() > MAX_CA_FILE_BYTES {
                return Err(invalid(format!("larger than {MAX_CA_FILE_BYTES} bytes")));
            }
            let pem = std::fs::read(path).map_err(|e| invalid(e.to_string()))?;
            for certificate in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                let certificate =
                    certificate.map_err(|e| invalid(format!("not PEM certificates: {e}")))?;
                roots
                    .add(certificate)
                    .map_err(|e| invalid(format!("a certificate rustls cannot use: {e}")))?;
            }
            if roots.is_empty() {
                return Err(invalid("holds no PEM CERTIFICATE block".into()));
            }
        }
        // Certificates the system lists but rustls cannot read are
        // skipped; none at all fails the handshake, never the start.
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Internal(format!("TLS settings: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn url_config(url: &str, password_file: Option<&Path>) -> Result<tokio_postgres::Config, Error> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|e| Error::DatabaseUrl(format!("{url:?} is not a PostgreSQL URL: {e}")))?;
    if config.get_password().is_some() {
        return Err(Error::DatabaseUrl(
            "the database URL carries a password; give it with --database-password-file (or [database] password-file) instead".into(),
        ));
    }
    if let Some(file) = password_file {
        let text = std::fs::read_to_string(file).map_err(|e| {
            Error::DatabaseUrl(format!(
                "cannot read the password file {}: {e}",
                file.display()
            ))
        })?;
        config.password(text.trim_end_matches(['\n', '\r']));
    }
    config.connect_timeout(Duration::from_secs(5));
    Ok(config)
}

/// A pool of connections to one jig database, schema checked.
#[derive(Clone)]
pub struct Queue {
    pool: deadpool_postgres::Pool,
    database: Database,
    bounds: Option<Bounds>,
}

/// The daemon's bounds applied to the Runs of one project in the database
/// (`jig serve --database`). A Run is queued until a worker dispatches it
/// and active from dispatch until its terminal.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// `max-queued-runs`: Runs recorded and not yet dispatched.
    pub max_queued: i64,
    /// `max-active-runs`: with `max_queued`, the most unsettled Runs.
    pub max_active: i64,
}

/// Queued and active (dispatched, unsettled) Runs of some projects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub queued: i64,
    pub active: i64,
    /// How long the oldest queued Run has waited for a worker, in
    /// milliseconds; 0 when none waits.
    pub oldest_queued_ms: i64,
}

/// The advisory lock serialising one project's bounded submissions.
const BOUND_LOCK_SQL: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended('jig-bound/' || $1, 0))";

/// Counts by state; `claimed` is not yet dispatched, so it is queued.
const COUNTS_SQL: &str = "SELECT count(*) FILTER (WHERE status IN ('queued', 'claimed')),
        count(*) FILTER (WHERE status = 'running'),
        coalesce((extract(epoch FROM now() - min(created) FILTER (WHERE status = 'queued'))
                  * 1000)::bigint, 0)
     FROM jig_runs WHERE project = ANY($1) AND status <> 'settled'";

/// The terminal of a Run whose deadline (recorded at submission) passed
/// before any worker dispatched it: nothing ran.
pub fn deadline_passed(run_id: &str) -> Terminal {
    Terminal::failed(
        flow::wire::ErrorCode::DeadlineExceeded,
        "the Run's deadline passed before a worker could dispatch it",
    )
    .with_run_id(run_id)
}

/// The terminal of a Run whose deadline passed while it was queued and no
/// worker had ever claimed it: what to look at is the workers, not the
/// timeout (`details.queue` is `"unclaimed"`).
pub fn deadline_passed_unclaimed(run_id: &str) -> Terminal {
    Terminal::failure(
        flow::wire::ErrorCode::DeadlineExceeded.into(),
        "no worker claimed the Run before its deadline passed; is a `jig worker` running on \
         this database?"
            .into(),
        Some(json!({ "queue": UNCLAIMED })),
        Default::default(),
    )
    .with_run_id(run_id)
}

/// `details.queue` of a Run no worker ever claimed.
pub const UNCLAIMED: &str = "unclaimed";

/// A Run a worker has claimed: what to execute and the epoch fencing it.
#[derive(Debug, Clone)]
pub struct Claim {
    pub id: String,
    pub epoch: i64,
    pub project: String,
    pub generation: i64,
    pub target: String,
    pub input: Value,
    /// The Run's absolute deadline (recorded at submission) on this
    /// host's clock: now plus what the database says is left of it.
    pub deadline_unix_ms: u64,
    pub receive: Vec<String>,
    /// A file Run: the digest of the blob describing its attachments
    /// ([`blobs::FileRun`]).
    pub files: Option<String>,
}

impl Claim {
    /// Whether the deadline recorded at submission has passed.
    pub fn expired(&self) -> bool {
        jig_provider_api::dispatch::now_unix_ms() >= self.deadline_unix_ms
    }
}

/// A project's Runs in the database, in three numbers: how many, the
/// newest's sequence and how many settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub runs: i64,
    pub newest: i64,
    pub settled: i64,
}

/// What happened to a fenced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Accepted,
    /// No row matched the epoch and state: this worker no longer owns it.
    Refused,
}

impl Write {
    /// A conditional write that changed `rows` rows: accepted when it
    /// changed the one Run row.
    fn of(rows: u64) -> Write {
        if rows == 1 {
            Write::Accepted
        } else {
            Write::Refused
        }
    }
}

/// A stored Run as `jig serve` shows it.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub id: String,
    pub value: Value,
}

impl Queue {
    /// Connect, apply this binary's migrations, and refuse a schema newer
    /// than it knows.
    pub async fn open(database: Database) -> Result<Queue, Error> {
        let manager = deadpool_postgres::Manager::from_config(
            database.config.clone(),
            database.tls.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(MAX_POOL_CONNECTIONS)
            .wait_timeout(Some(Duration::from_secs(10)))
            .create_timeout(Some(Duration::from_secs(5)))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| Error::Database(e.to_string()))?;
        let queue = Queue {
            pool,
            database,
            bounds: None,
        };
        let mut client = queue.client().await?;
        schema::migrate(&mut client).await?;
        Ok(queue)
    }

    /// Refuse submissions past `bounds` (`RESOURCE_EXHAUSTED`).
    pub fn with_bounds(mut self, bounds: Bounds) -> Queue {
        self.bounds = Some(bounds);
        self
    }

    /// Queued and active Runs of `projects` now.
    pub async fn counts(&self, projects: &[String]) -> Result<Counts, Error> {
        let client = self.client().await?;
        let row = client
            .query_one(COUNTS_SQL, &[&projects])
            .await
            .map_err(Error::db("counting Runs"))?;
        Ok(Counts {
            queued: row.get(0),
            active: row.get(1),
            oldest_queued_ms: row.get(2),
        })
    }

    pub(crate) async fn client(&self) -> Result<deadpool_postgres::Object, Error> {
        self.pool
            .get()
            .await
            .map_err(|e| Error::Database(format!("no database connection: {}", with_causes(&e))))
    }

    /// A dedicated connection that LISTENs on [`NOTIFY_CHANNEL`]; each
    /// notification (or the connection's end) is sent on the returned
    /// receiver. Callers fall back to polling when it closes.
    pub async fn listen(&self) -> Result<tokio::sync::mpsc::Receiver<()>, Error> {
        use futures_util::StreamExt;
        let (client, mut connection) = self
            .database
            .config
            .connect(self.database.tls.clone())
            .await
            .map_err(Error::db("connecting to listen"))?;
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        tokio::spawn(async move {
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(_) = message {
                    let _ = tx.try_send(());
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {NOTIFY_CHANNEL}"))
            .await
            .map_err(Error::db("listening"))?;
        // The client must live as long as the connection task reads.
        tokio::spawn(async move {
            let client = client;
            loop {
                tokio::time::sleep(FALLBACK_POLL * 5).await;
                if client.simple_query("SELECT 1").await.is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }

    /// Record a new Run (or return the Run an identical request already
    /// made under `key`; changed content under it is `SUBMISSION_CONFLICT`).
    /// Returns the Run and whether it is new.
    #[allow(clippy::too_many_arguments)]
    pub async fn submit(
        &self,
        project: &str,
        key: Option<&str>,
        generation: i64,
        target: &str,
        input: &Value,
        content: &Value,
        timeout_ms: i64,
        receive: &[String],
        files: Option<&str>,
    ) -> Result<(StoredRun, bool), Error> {
        let digest = flow::digest::sha256_digest(&flow::json::canonical(content));
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::db("submitting"))?;
        if let Some(key) = key {
            // Serialise submissions of one key: the first inserts, the
            // others wait for it and then read its Run.
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 0))",
                &[&project, &key],
            )
            .await
            .map_err(Error::db("locking the key"))?;
            let row = tx
                .query_opt(
                    "SELECT run_id, request_digest FROM jig_keys WHERE project = $1 AND key = $2",
                    &[&project, &key],
                )
                .await
                .map_err(Error::db("reading the key"))?;
            if let Some(row) = row {
                let (run_id, existing): (String, String) = (row.get(0), row.get(1));
                if existing != digest {
                    tx.commit().await.map_err(Error::db("submitting"))?;
                    return Err(Error::Conflict(format!(
                        "key {key:?} was used for a different request (Run {run_id})"
                    )));
                }
                // Read on the connection already held: asking the pool for
                // a second one while holding this could wait on submissions
                // that each hold one too.
                let run = load_in(&tx, project, &run_id).await?;
                tx.commit().await.map_err(Error::db("submitting"))?;
                return Ok((run, false));
            }
        }
        if let Some(bounds) = self.bounds {
            // Counted in the transaction that inserts, under the project's
            // lock, so concurrent submissions cannot both pass the bound.
            tx.execute(BOUND_LOCK_SQL, &[&project])
                .await
                .map_err(Error::db("locking the bound"))?;
            let row = tx
                .query_one(COUNTS_SQL, &[&vec![project.to_string()]])
                .await
                .map_err(Error::db("counting Runs"))?;
            let (queued, active): (i64, i64) = (row.get(0), row.get(1));
            if queued >= bounds.max_queued
                || queued + active >= bounds.max_queued + bounds.max_active
            {
                return Err(Error::Exhausted(
                    format!(
                        "{queued} Runs are queued and {active} active in the database, the most this daemon accepts ({} queued, {} active)",
                        bounds.max_queued, bounds.max_active
                    ),
                ));
            }
        }
        let receive = serde_json::to_string(receive).expect("strings serialise");
        let input = flow::json::canonical(input);
        let input_digest = flow::digest::sha256_digest(&input);
        let input = String::from_utf8(input).expect("JSON/1 is UTF-8");
        let row = tx
            .query_one(
                "INSERT INTO jig_runs (id, project, generation, target, input, input_digest, request_digest, key, timeout_ms, receive, status, deadline, files)
                 VALUES ('run-' || replace(gen_random_uuid()::text, '-', ''), $1, $2, $3, $4, $9, $5, $6, $7, $8, 'queued',
                         now() + make_interval(secs => $7::bigint / 1000.0), $10)
                 RETURNING id",
                &[&project, &generation, &target, &input, &digest, &key, &timeout_ms, &receive, &input_digest, &files],
            )
            .await
            .map_err(Error::db("recording the Run"))?;
        let id: String = row.get(0);
        if let Some(key) = key {
            tx.execute(
                "INSERT INTO jig_keys (project, key, request_digest, run_id) VALUES ($1, $2, $3, $4)",
                &[&project, &key, &digest, &id],
            )
            .await
            .map_err(Error::db("recording the key"))?;
        }
        event_in(
            &tx,
            &id,
            &json!({"type": "status", "status": "queued", "runId": id}),
        )
        .await?;
        notify_in(&tx).await?;
        // The Run as stored, read before the commit on this connection:
        // once the commit succeeds the answer is the Run, never a wait for
        // another connection that could fail after it was recorded.
        let run = load_in(&tx, project, &id).await?;
        tx.commit().await.map_err(Error::db("submitting"))?;
        Ok((run, true))
    }

    /// One Run of `project` as stored.
    pub async fn load(&self, project: &str, id: &str) -> Result<StoredRun, Error> {
        let client = self.client().await?;
        load_in(&client, project, id).await
    }

    /// The input of Run `id` of `project`, as recorded (its canonical
    /// JSON/1 text, removed with the row by retention).
    pub async fn input(&self, project: &str, id: &str) -> Result<Option<Value>, Error> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT input FROM jig_runs WHERE project = $1 AND id = $2",
                &[&project, &id],
            )
            .await
            .map_err(Error::db("reading a Run's input"))?
            .ok_or_else(|| Error::RunNotFound(id.to_string()))?;
        let text: String = row.get(0);
        Ok(flow::json::parse(text.as_bytes()).ok())
    }

    /// What changes when a Run of `project` is recorded, settles or is
    /// removed (what the console's live list follows).
    pub async fn tally(&self, project: &str) -> Result<Tally, Error> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*), coalesce(max(seq), 0), count(*) FILTER (WHERE status = 'settled')
                 FROM jig_runs WHERE project = $1",
                &[&project],
            )
            .await
            .map_err(Error::db("counting Runs"))?;
        Ok(Tally {
            runs: row.get(0),
            newest: row.get(1),
            settled: row.get(2),
        })
    }

    /// The newest `limit` Runs of `project`.
    pub async fn list(&self, project: &str, limit: i64) -> Result<Vec<StoredRun>, Error> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!("{RUN_COLUMNS} WHERE project = $1 ORDER BY seq DESC LIMIT $2"),
                &[&project, &limit],
            )
            .await
            .map_err(Error::db("listing Runs"))?;
        Ok(rows.iter().map(stored).collect())
    }

    /// Ask a Run to cancel; its owning worker honours it at its next
    /// heartbeat. A queued Run is settled cancelled at once. Returns
    /// whether it was still unsettled.
    pub async fn request_cancel(&self, project: &str, id: &str) -> Result<bool, Error> {
        let mut client = self.client().await?;
        let tx = client
            .transaction()
            .await
            .map_err(Error::db("cancelling"))?;
        let terminal = json!({
            "status": "failed",
            "code": "CANCELLED",
            "message": "the Run was cancelled before a worker claimed it",
            "runId": id,
        });
        let text = String::from_utf8(flow::json::canonical(&terminal)).expect("UTF-8");
        let queued = tx
            .execute(
                "UPDATE jig_runs SET status = 'settled', terminal = $3, epoch = epoch + 1
                 WHERE project = $1 AND id = $2 AND status = 'queued'",
                &[&project, &id, &text],
            )
            .await
            .map_err(Error::db("cancelling"))?;
        if queued == 1 {
            event_in(&tx, id, &json!({"type": "terminal", "result": terminal})).await?;
        }
        let owned = tx
            .execute(
                "UPDATE jig_runs SET cancel_requested = true
                 WHERE project = $1 AND id = $2 AND status IN ('claimed', 'running')",
                &[&project, &id],
            )
            .await
            .map_err(Error::db("cancelling"))?;
        notify_in(&tx).await?;
        tx.commit().await.map_err(Error::db("cancelling"))?;
        Ok(queued + owned > 0)
    }

    /// Claim the oldest queued Run: one short transaction, epoch + 1, a
    /// lease from the database's clock.
    pub async fn claim(&self, worker: &str, lease: Duration) -> Result<Option<Claim>, Error> {
        let client = self.client().await?;
        let lease_ms = lease.as_millis() as i64;
        let row = client
            .query_opt(
                "UPDATE jig_runs SET status = 'claimed', epoch = epoch + 1, owner = $1,
                        lease_until = now() + make_interval(secs => $2::bigint / 1000.0)
                 WHERE id = (SELECT id FROM jig_runs WHERE status = 'queued'
                             ORDER BY seq FOR UPDATE SKIP LOCKED LIMIT 1)
                 RETURNING id, epoch, project, generation, target, input,
                     greatest(0, extract(epoch FROM deadline - now()) * 1000)::bigint, receive, files",
                &[&worker, &lease_ms],
            )
            .await
            .map_err(Error::db("claiming"))?;
        let Some(row) = row else { return Ok(None) };
        let input: String = row.get(5);
        let receive: String = row.get(7);
        Ok(Some(Claim {
            id: row.get(0),
            epoch: row.get(1),
            project: row.get(2),
            generation: row.get(3),
            target: row.get(4),
            input: serde_json::from_str(&input).unwrap_or(Value::Null),
            deadline_unix_ms: jig_engine::run::after(Duration::from_millis(
                row.get::<_, i64>(6).max(0) as u64,
            )),
            receive: serde_json::from_str(&receive).unwrap_or_default(),
            files: row.get(8),
        }))
    }

    /// Give an undispatched claim back to the queue (a stopping worker):
    /// nothing ran, so another worker may claim it.
    pub async fn release(&self, claim: &Claim) -> Result<Write, Error> {
        let client = self.client().await?;
        let n = client
            .execute(
                "UPDATE jig_runs SET status = 'queued', owner = NULL, lease_until = NULL
                 WHERE id = $1 AND epoch = $2 AND status = 'claimed'",
                &[&claim.id, &claim.epoch],
            )
            .await
            .map_err(Error::db("releasing"))?;
        // The write stands whether or not the wakeup reaches anyone: the
        // listeners' bounded fallback poll finds it.
        let _ = client
            .execute("SELECT pg_notify($1, '')", &[&NOTIFY_CHANNEL])
            .await;
        Ok(Write::of(n))
    }

    /// Record dispatch, before Flow code starts. Refused once the lease
    /// has expired or another claim holds the Run.
    pub async fn dispatch(&self, claim: &Claim) -> Result<Write, Error> {
        let client = self.client().await?;
        let mut client = client;
        let tx = client
            .transaction()
            .await
            .map_err(Error::db("dispatching"))?;
        let n = tx
            .execute(
                "UPDATE jig_runs SET status = 'running', dispatched_at = now()
                 WHERE id = $1 AND epoch = $2 AND status = 'claimed' AND lease_until > now()",
                &[&claim.id, &claim.epoch],
            )
            .await
            .map_err(Error::db("dispatching"))?;
        conclude(
            tx,
            n,
            &claim.id,
            &json!({"type": "status", "status": "running", "runId": claim.id}),
            "dispatching",
        )
        .await
    }

    /// Extend the lease. `Ok(None)`: refused (no longer ours);
    /// `Ok(Some(cancel))`: extended, and whether cancellation was asked.
    ///
    /// A lease that lapsed is still this claim's until a sweep takes the
    /// Run (requeued, or settled `COORDINATOR_LOST`): a lapse only lets
    /// another node take it. So a worker whose heartbeats could not reach
    /// the database for a while (it restarted) renews and finishes its
    /// Run, unless a sweep came first; the row lock orders the two.
    pub async fn heartbeat(&self, claim: &Claim, lease: Duration) -> Result<Option<bool>, Error> {
        let client = self.client().await?;
        let lease_ms = lease.as_millis() as i64;
        let row = client
            .query_opt(
                "UPDATE jig_runs SET lease_until = now() + make_interval(secs => $3::bigint / 1000.0)
                 WHERE id = $1 AND epoch = $2 AND status IN ('claimed', 'running')
                 RETURNING cancel_requested",
                &[&claim.id, &claim.epoch, &lease_ms],
            )
            .await
            .map_err(Error::db("renewing the lease"))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Append a stream event (a received channel item) under the claim.
    pub async fn event(&self, claim: &Claim, line: &Value) -> Result<Write, Error> {
        let client = self.client().await?;
        let text = String::from_utf8(flow::json::canonical(line)).expect("UTF-8");
        let n = client
            .execute(
                "INSERT INTO jig_events (run_id, line)
                 SELECT id, $3 FROM jig_runs WHERE id = $1 AND epoch = $2 AND status = 'running'",
                &[&claim.id, &claim.epoch, &text],
            )
            .await
            .map_err(Error::db("appending an event"))?;
        // The write stands whether or not the wakeup reaches anyone: the
        // listeners' bounded fallback poll finds it.
        let _ = client
            .execute("SELECT pg_notify($1, '')", &[&NOTIFY_CHANNEL])
            .await;
        Ok(Write::of(n))
    }

    /// Write the one terminal: only while this claim still owns the Run
    /// (dispatched, or refused before dispatch: nothing ran). A file Run's
    /// `packet` (the digest of its published packet blob) is written with
    /// it, under the same epoch.
    pub async fn settle(
        &self,
        claim: &Claim,
        terminal: &Value,
        packet: Option<&str>,
    ) -> Result<Write, Error> {
        let mut client = self.client().await?;
        let text = String::from_utf8(flow::json::canonical(terminal)).expect("UTF-8");
        let tx = client.transaction().await.map_err(Error::db("settling"))?;
        let n = tx
            .execute(
                "UPDATE jig_runs SET status = 'settled', terminal = $3, packet = $4, lease_until = NULL
                 WHERE id = $1 AND epoch = $2 AND status IN ('claimed', 'running')",
                &[&claim.id, &claim.epoch, &text, &packet],
            )
            .await
            .map_err(Error::db("settling"))?;
        if n == 1 {
            // Settled: the aggregate is delivered (or never will be) and
            // is not kept past its Run.
            tx.execute(
                "DELETE FROM jig_checkpoints WHERE run_id = $1",
                &[&claim.id],
            )
            .await
            .map_err(Error::db("settling"))?;
        }
        conclude(
            tx,
            n,
            &claim.id,
            &json!({"type": "terminal", "result": terminal}),
            "settling",
        )
        .await
    }

    /// Count a refused late write in the database (and the caller logs it).
    pub async fn note_refused(&self, worker: &str, claim: &Claim, what: &str) {
        if let Ok(client) = self.client().await {
            let _ = client
                .execute(
                    "INSERT INTO jig_refused_writes (worker, run_id, epoch, what) VALUES ($1, $2, $3, $4)",
                    &[&worker, &claim.id, &claim.epoch, &what],
                )
                .await;
        }
    }

    /// The digest of a settled file Run's packet blob, if it has one.
    pub async fn packet(&self, project: &str, id: &str) -> Result<Option<String>, Error> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT packet FROM jig_runs WHERE project = $1 AND id = $2 AND status = 'settled'",
                &[&project, &id],
            )
            .await
            .map_err(Error::db("reading a packet"))?;
        Ok(row.and_then(|r| r.get(0)))
    }

    /// Stream events of a Run after sequence `after`: (seq, line), or
    /// `None` once the Run's row is gone (retention removed it with its
    /// events). One statement reads both, so a Run removed between two
    /// reads is never mistaken for one with nothing new.
    pub async fn events_after(
        &self,
        id: &str,
        after: i64,
    ) -> Result<Option<Vec<(i64, Vec<u8>)>>, Error> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT e.seq, e.line FROM jig_runs r
                 LEFT JOIN jig_events e ON e.run_id = r.id AND e.seq > $2
                 WHERE r.id = $1 ORDER BY e.seq",
                &[&id, &after],
            )
            .await
            .map_err(Error::db("reading events"))?;
        if rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(
            rows.iter()
                .filter_map(|r| {
                    let seq: Option<i64> = r.get(0);
                    let line: Option<String> = r.get(1);
                    let mut bytes = line?.into_bytes();
                    bytes.push(b'\n');
                    Some((seq?, bytes))
                })
                .collect(),
        ))
    }
}

/// One Run of `project` as stored, read on a connection (or in a
/// transaction) the caller already holds.
async fn load_in(
    client: &impl deadpool_postgres::GenericClient,
    project: &str,
    id: &str,
) -> Result<StoredRun, Error> {
    let row = client
        .query_opt(
            &format!("{RUN_COLUMNS} WHERE project = $1 AND id = $2"),
            &[&project, &id],
        )
        .await
        .map_err(Error::db("reading a Run"))?
        .ok_or_else(|| Error::RunNotFound(id.to_string()))?;
    Ok(stored(&row))
}

const RUN_COLUMNS: &str =
    "SELECT id, project, generation, target, request_digest, key, status, terminal,
        (extract(epoch FROM created) * 1000)::bigint, input_digest, epoch FROM jig_runs";

fn stored(row: &tokio_postgres::Row) -> StoredRun {
    let id: String = row.get(0);
    let generation: i64 = row.get(2);
    let target: String = row.get(3);
    let digest: String = row.get(4);
    let key: Option<String> = row.get(5);
    let terminal: Option<String> = row.get(7);
    let created: i64 = row.get(8);
    let input_digest: String = row.get(9);
    let mut value = json!({
        "id": id,
        "target": target,
        "generation": generation,
        "contentDigest": digest,
        "inputDigest": input_digest,
        // Every row keeps its input (`GET .../runs/{id}/input`).
        "inputRetained": true,
        "submittedAtUnixMs": created,
    });
    if let Some(key) = key {
        value["key"] = json!(key);
    }
    let status: String = row.get(6);
    if status != "settled" {
        // Where it waits: `queued` (no worker holds it; `claims` says how
        // many ever did), `claimed` or `running`.
        let claims: i64 = row.get(10);
        value["queue"] = json!({ "status": status, "claims": claims });
    }
    if let Some(terminal) = terminal.and_then(|t| serde_json::from_str::<Value>(&t).ok()) {
        value["terminal"] = terminal;
    }
    StoredRun { id, value }
}

async fn event_in(
    tx: &deadpool_postgres::Transaction<'_>,
    id: &str,
    line: &Value,
) -> Result<(), Error> {
    let text = String::from_utf8(flow::json::canonical(line)).expect("UTF-8");
    tx.execute(
        "INSERT INTO jig_events (run_id, line) VALUES ($1, $2)",
        &[&id, &text],
    )
    .await
    .map_err(Error::db("appending an event"))?;
    Ok(())
}

/// Wake the workers and servers listening on [`NOTIFY_CHANNEL`] when `tx`
/// commits.
async fn notify_in(tx: &deadpool_postgres::Transaction<'_>) -> Result<(), Error> {
    tx.execute(&format!("NOTIFY {NOTIFY_CHANNEL}"), &[])
        .await
        .map_err(Error::db("notifying"))?;
    Ok(())
}

/// Commit a write conditional on the claim's epoch and state: `n` rows it
/// changed. Accepted (one row), its `line` joins the Run's events and the
/// listeners are woken; refused otherwise.
async fn conclude(
    tx: deadpool_postgres::Transaction<'_>,
    n: u64,
    id: &str,
    line: &Value,
    what: &'static str,
) -> Result<Write, Error> {
    if n == 1 {
        event_in(&tx, id, line).await?;
        notify_in(&tx).await?;
    }
    tx.commit().await.map_err(Error::db(what))?;
    Ok(Write::of(n))
}

#[cfg(test)]
mod tests;
