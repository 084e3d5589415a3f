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
//! Blobs: only a removed Run's packet goes (its bytes name that Run, so no
//! other row shares it), and only while nothing else names its digest. The
//! generations' blobs (the admitted one's and those a retained Run may
//! still run) and the attachments of file Runs are not collected here.

use jig_engine::state::retention::Policy;

use super::Queue;
use crate::Error;

/// Runs one batch removes at most.
pub const RETENTION_BATCH: i64 = 256;

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
