//! jig's own schema: forward-only migrations embedded in the binary, the
//! applied version kept in `jig_schema`, checked at every start.

use crate::Error;

/// Migration `n` (1-based) brings the schema from version `n - 1` to `n`.
/// Append only: an applied migration is never edited.
const MIGRATIONS: &[&str] = &[
    // 1: Runs, keys, stream events, blobs, generations, checkpoints and
    // the count of refused late writes.
    "CREATE TABLE jig_runs (
        id text PRIMARY KEY,
        seq bigserial UNIQUE,
        project text NOT NULL,
        generation bigint NOT NULL,
        target text NOT NULL,
        input text NOT NULL,
        input_digest text NOT NULL,
        request_digest text NOT NULL,
        key text,
        timeout_ms bigint NOT NULL,
        receive text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'claimed', 'running', 'settled')),
        epoch bigint NOT NULL DEFAULT 0,
        owner text,
        lease_until timestamptz,
        dispatched_at timestamptz,
        cancel_requested boolean NOT NULL DEFAULT false,
        terminal text,
        created timestamptz NOT NULL DEFAULT now(),
        CHECK ((status = 'settled') = (terminal IS NOT NULL))
     );
     CREATE INDEX jig_runs_queued ON jig_runs (seq) WHERE status = 'queued';
     CREATE INDEX jig_runs_leased ON jig_runs (lease_until) WHERE status IN ('claimed', 'running');
     CREATE TABLE jig_keys (
        project text NOT NULL,
        key text NOT NULL,
        request_digest text NOT NULL,
        run_id text NOT NULL REFERENCES jig_runs (id),
        PRIMARY KEY (project, key)
     );
     CREATE TABLE jig_events (
        run_id text NOT NULL REFERENCES jig_runs (id),
        seq bigserial,
        line text NOT NULL,
        PRIMARY KEY (run_id, seq)
     );
     CREATE TABLE jig_blobs (
        digest text PRIMARY KEY,
        bytes bytea NOT NULL
     );
     CREATE TABLE jig_generations (
        project text NOT NULL,
        generation bigint NOT NULL,
        plan_digest text NOT NULL,
        lock_digest text,
        packages text NOT NULL,
        published timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (project, generation)
     );
     CREATE TABLE jig_checkpoints (
        run_id text NOT NULL REFERENCES jig_runs (id),
        sequence integer NOT NULL,
        packet text NOT NULL,
        PRIMARY KEY (run_id, sequence)
     );
     CREATE TABLE jig_refused_writes (
        worker text NOT NULL,
        run_id text NOT NULL,
        epoch bigint NOT NULL,
        what text NOT NULL,
        at timestamptz NOT NULL DEFAULT now()
     );",
    // 2: each Run's absolute deadline, recorded at submission (its
    // timeout counts from then, not from a worker's claim).
    "ALTER TABLE jig_runs ADD COLUMN deadline timestamptz;
     UPDATE jig_runs SET deadline = created + make_interval(secs => timeout_ms / 1000.0);
     ALTER TABLE jig_runs ALTER COLUMN deadline SET NOT NULL;",
    // 3: file Runs. `files` is the digest of the blob describing a file
    // Run's attachments (each file a blob by digest); `packet` is the
    // digest of the blob holding its delivered packet, written with the
    // terminal under the claim's epoch. A generation's `providers` are
    // the provider files its pins name (each a blob by file digest) with
    // the operator's settings and grants, never its secrets.
    "ALTER TABLE jig_runs ADD COLUMN files text;
     ALTER TABLE jig_runs ADD COLUMN packet text;
     ALTER TABLE jig_runs ADD CONSTRAINT jig_runs_packet_settled CHECK (packet IS NULL OR status = 'settled');
     ALTER TABLE jig_generations ADD COLUMN providers text;",
    // 4: retention (docs/src/runs.md). When each Run settled, set by a trigger
    // on every path that settles one; Runs settled before this migration
    // age from their creation.
    "ALTER TABLE jig_runs ADD COLUMN settled_at timestamptz;
     UPDATE jig_runs SET settled_at = created WHERE status = 'settled';
     CREATE FUNCTION jig_runs_settled_at() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       IF NEW.status = 'settled' AND NEW.settled_at IS NULL THEN
         NEW.settled_at := now();
       END IF;
       RETURN NEW;
     END $$;
     CREATE TRIGGER jig_runs_settled_at BEFORE INSERT OR UPDATE ON jig_runs
       FOR EACH ROW EXECUTE FUNCTION jig_runs_settled_at();
     CREATE INDEX jig_runs_settled ON jig_runs (project, seq) WHERE status = 'settled';",
    // 5: store collection. When each blob was last stored:
    // a blob written again refreshes it, and only a blob nothing names
    // that is older than the grace is removed, so a writer between
    // storing a blob and naming it (publishing, submitting, settling)
    // never loses it. Blobs stored before this migration age from it.
    "ALTER TABLE jig_blobs ADD COLUMN stored_at timestamptz NOT NULL DEFAULT now();",
];

/// The schema version this binary writes and understands.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Serialises migrations between processes starting at once.
const MIGRATION_LOCK: i64 = 0x6a69_6721;

/// Apply what is missing, in one transaction under an advisory lock;
/// refuse a database whose schema is newer than [`SCHEMA_VERSION`].
pub async fn migrate(client: &mut deadpool_postgres::Object) -> Result<(), Error> {
    let db =
        |e: tokio_postgres::Error| Error::Database(format!("migrating: {}", super::describe(&e)));
    let tx = client.transaction().await.map_err(db)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS jig_schema (version integer NOT NULL)")
        .await
        .map_err(db)?;
    let current: i32 = tx
        .query_one("SELECT coalesce(max(version), 0) FROM jig_schema", &[])
        .await
        .map_err(db)?
        .get(0);
    if current > SCHEMA_VERSION {
        return Err(Error::SchemaNewer(
            format!(
                "the database schema is version {current}; this jig knows versions up to {SCHEMA_VERSION} (upgrade jig)"
            ),
        ));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.batch_execute(sql).await.map_err(db)?;
        let version = index as i32 + 1;
        tx.execute("INSERT INTO jig_schema (version) VALUES ($1)", &[&version])
            .await
            .map_err(db)?;
    }
    tx.commit().await.map_err(db)?;
    Ok(())
}
