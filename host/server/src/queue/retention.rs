//! `[retention]` in the database: a bounded sweep, one transaction per
//! batch, that removes settled Runs past the operator's limits with their
//! events, checkpoints, key and packet blob. The rules are
//! [`jig_engine::state::retention`]'s: either limit removes, a keyed Run
//! stays `key-window` after it settled, a queued, claimed or running Run is
//! never touched.
//!
//! Rows are taken `FOR UPDATE SKIP LOCKED`, so a sweep never waits on (or
//! blocks) a worker settling or a submission replaying a key, and several
//! nodes may sweep at once. A batch commits whole or not at all: a crash
//! leaves the old state or the new one.
//!
//! Blobs: a removed Run's packet goes with it (its bytes name that Run, so
//! no other row shares it) while nothing else names its digest. The rest
//! of the store is [`Queue::collect_store`]'s: generations no Run names and
//! blobs nothing kept names (a generation's Plan, lock, manifests, files,
//! layouts and providers; a file Run's description and attachments; a
//! packet; a checkpoint), past [`STORE_GRACE`] since they were stored.

use jig_engine::config::retention::Policy;

use super::Queue;
use crate::Error;

/// Runs one batch removes at most.
pub const RETENTION_BATCH: i64 = 256;
/// Blobs one store collection removes at most.
pub const STORE_BATCH: i64 = 1024;
/// How long a blob or a published generation nothing names is kept after
/// it was last stored or published: a writer names what it stored within
/// this (publishing then submitting, settling with a packet), as git keeps
/// young unreachable objects for its concurrent writers.
pub const STORE_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

/// What one batch removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Retained {
    pub runs: Vec<String>,
    pub blobs: u64,
    pub freed_bytes: u64,
}

const DUE_SQL: &str = "
    WITH ranked AS (
        SELECT id, row_number() OVER (ORDER BY seq DESC) AS rank
        FROM jig_runs WHERE project = $1 AND status = 'settled'
    )
    SELECT r.id, r.packet FROM jig_runs r JOIN ranked k ON k.id = r.id
    WHERE r.status = 'settled'
      AND (($2::bigint IS NOT NULL AND k.rank > $2)
           OR ($3::float8 IS NOT NULL AND r.settled_at < now() - make_interval(secs => $3)))
      AND NOT (r.key IS NOT NULL AND r.settled_at >= now() - make_interval(secs => $4))
    ORDER BY r.seq
    LIMIT $5
    FOR UPDATE OF r SKIP LOCKED";

const BLOBS_SQL: &str = "
    DELETE FROM jig_blobs b WHERE b.digest = ANY($1)
      AND NOT EXISTS (SELECT 1 FROM jig_runs r WHERE r.packet = b.digest OR r.files = b.digest)
      AND NOT EXISTS (SELECT 1 FROM jig_checkpoints c WHERE position(b.digest IN c.packet) > 0)
      AND NOT EXISTS (SELECT 1 FROM jig_generations g
                      WHERE g.plan_digest = b.digest OR g.lock_digest = b.digest
                         OR position(b.digest IN g.packages) > 0
                         OR position(b.digest IN coalesce(g.providers, '')) > 0)
    RETURNING octet_length(b.bytes)";

impl Queue {
    /// Remove at most `batch` Runs of `project` that `policy` lets go.
    pub async fn retain(
        &self,
        project: &str,
        policy: &Policy,
        batch: i64,
    ) -> Result<Retained, Error> {
        let mut client = self.client().await?;
        let db = Error::db("applying retention");
        let tx = client.transaction().await.map_err(db)?;
        let max_runs = policy
            .max_runs
            .map(|n| i64::try_from(n).unwrap_or(i64::MAX));
        let max_age = policy.max_age.map(|d| d.as_secs_f64());
        let key_window = policy.key_window.as_secs_f64();
        let due = tx
            .query(
                DUE_SQL,
                &[&project, &max_runs, &max_age, &key_window, &batch],
            )
            .await
            .map_err(Error::db("applying retention"))?;
        let ids: Vec<String> = due.iter().map(|r| r.get(0)).collect();
        let packets: Vec<String> = due.iter().filter_map(|r| r.get(1)).collect();
        if ids.is_empty() {
            return Ok(Retained::default());
        }
        for statement in [
            "DELETE FROM jig_events WHERE run_id = ANY($1)",
            "DELETE FROM jig_checkpoints WHERE run_id = ANY($1)",
            "DELETE FROM jig_keys WHERE run_id = ANY($1)",
            "DELETE FROM jig_runs WHERE id = ANY($1)",
        ] {
            tx.execute(statement, &[&ids])
                .await
                .map_err(Error::db("applying retention"))?;
            // A process stopped here (tests) leaves the batch uncommitted.
            jig_engine::state::crash_point("queue-retention:events-removed");
        }
        let freed = tx
            .query(BLOBS_SQL, &[&packets])
            .await
            .map_err(Error::db("applying retention"))?;
        tx.commit().await.map_err(Error::db("applying retention"))?;
        Ok(Retained {
            runs: ids,
            blobs: freed.len() as u64,
            freed_bytes: freed
                .iter()
                .map(|r| r.get::<_, Option<i32>>(0).unwrap_or(0).max(0) as u64)
                .sum(),
        })
    }
}

/// What one store collection removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Collected {
    pub generations: u64,
    pub blobs: u64,
    pub freed_bytes: u64,
}

/// Published generations no Run names, but each project's newest, past
/// the grace.
const GENERATIONS_SQL: &str = "
    DELETE FROM jig_generations g
    WHERE g.published < now() - make_interval(secs => $1)
      AND g.generation < (SELECT max(m.generation) FROM jig_generations m WHERE m.project = g.project)
      AND NOT EXISTS (SELECT 1 FROM jig_runs r WHERE r.project = g.project AND r.generation = g.generation)";

/// Blobs nothing kept names, past the grace: every `sha256:` digest named
/// by a generation row, a Run row or a checkpoint, or inside a blob those
/// name that names others (a Plan, a package manifest, a file Run's
/// description) is kept.
const UNNAMED_BLOBS_SQL: &str = "
    WITH containers AS (
        SELECT b.bytes FROM jig_blobs b WHERE b.digest IN (
            SELECT plan_digest FROM jig_generations
            UNION SELECT m.value FROM jig_generations g, json_each_text(g.packages::json) m
            UNION SELECT files FROM jig_runs WHERE files IS NOT NULL)
    ), named AS (
        SELECT (regexp_matches(convert_from(bytes, 'UTF8'), 'sha256:[0-9a-f]{64}', 'g'))[1] AS digest
            FROM containers
        UNION SELECT (regexp_matches(plan_digest || ' ' || coalesce(lock_digest, '') || ' ' ||
                                     packages || ' ' || coalesce(providers, ''),
                                     'sha256:[0-9a-f]{64}', 'g'))[1] FROM jig_generations
        UNION SELECT packet FROM jig_runs WHERE packet IS NOT NULL
        UNION SELECT files FROM jig_runs WHERE files IS NOT NULL
        UNION SELECT (regexp_matches(packet, 'sha256:[0-9a-f]{64}', 'g'))[1] FROM jig_checkpoints
    ), unnamed AS (
        SELECT b.digest FROM jig_blobs b
        WHERE b.stored_at < now() - make_interval(secs => $1)
          AND b.digest NOT IN (SELECT digest FROM named WHERE digest IS NOT NULL)
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    )
    DELETE FROM jig_blobs b USING unnamed u WHERE b.digest = u.digest
    RETURNING octet_length(b.bytes)";

impl Queue {
    /// Remove from the database's store what nothing names, in one
    /// transaction: published generations no Run names (each project's
    /// newest kept), then at most `batch` blobs nothing kept names, each
    /// untouched for `grace`. A crash leaves the old state or the new one.
    pub async fn collect_store(
        &self,
        grace: std::time::Duration,
        batch: i64,
    ) -> Result<Collected, Error> {
        let mut client = self.client().await?;
        let db = || Error::db("collecting the store");
        let tx = client.transaction().await.map_err(db())?;
        let grace = grace.as_secs_f64();
        let generations = tx.execute(GENERATIONS_SQL, &[&grace]).await.map_err(db())?;
        if generations > 0 {
            jig_engine::state::crash_point("queue-store:generations-removed");
        }
        let freed = tx
            .query(UNNAMED_BLOBS_SQL, &[&grace, &batch])
            .await
            .map_err(db())?;
        tx.commit().await.map_err(db())?;
        Ok(Collected {
            generations,
            blobs: freed.len() as u64,
            freed_bytes: freed
                .iter()
                .map(|r| r.get::<_, Option<i32>>(0).unwrap_or(0).max(0) as u64)
                .sum(),
        })
    }
}
