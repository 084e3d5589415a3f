//! The lease sweep: queued Runs whose deadline passed are settled
//! `DEADLINE_EXCEEDED` without a claim; an expired lease returns an
//! undispatched Run to the queue and settles a dispatched one
//! `COORDINATOR_LOST`, delivering a lost file Run's last checkpoint (or the
//! bare record) under seed 002 §8's rule.

use serde_json::{json, Value};

use super::{
    coordinator_lost, deadline_passed, deadline_passed_unclaimed, event_in, notify_in, worker,
    Queue, SWEEP_BATCH,
};
use crate::Error;
use jig_engine::terminal::{Delivery, Source, Terminal};

impl Queue {
    /// One bounded sweep, in one transaction: queued Runs whose deadline
    /// passed are settled `DEADLINE_EXCEEDED` without waiting for a claim;
    /// expired leases return undispatched Runs to the queue and settle
    /// dispatched ones `COORDINATOR_LOST`. Rows another sweep (or a claim)
    /// holds are skipped. Returns (expired, requeued, lost).
    pub async fn sweep(&self) -> Result<(u64, u64, u64), Error> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(Error::db("sweeping"))?;
        let requeued = tx
            .execute(
                "UPDATE jig_runs SET status = 'queued', owner = NULL, lease_until = NULL
                 WHERE status = 'claimed' AND lease_until < now()",
                &[],
            )
            .await
            .map_err(Error::db("sweeping"))?;
        let expired = tx
            .query(
                "SELECT id, epoch FROM jig_runs WHERE status = 'queued' AND deadline <= now()
                 ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
                &[&SWEEP_BATCH],
            )
            .await
            .map_err(Error::db("sweeping"))?;
        for row in &expired {
            let id: String = row.get(0);
            let claims: i64 = row.get(1);
            let terminal = match claims {
                0 => deadline_passed_unclaimed(&id),
                _ => deadline_passed(&id),
            }
            .to_value();
            let text = String::from_utf8(flow::json::canonical(&terminal)).expect("UTF-8");
            tx.execute(
                "UPDATE jig_runs SET status = 'settled', terminal = $2, epoch = epoch + 1 WHERE id = $1",
                &[&id, &text],
            )
            .await
            .map_err(Error::db("sweeping"))?;
            event_in(&tx, &id, &json!({"type": "terminal", "result": terminal})).await?;
        }
        let lost = tx
            .query(
                "SELECT id, files, (SELECT c.packet FROM jig_checkpoints c WHERE c.run_id = r.id
                                    ORDER BY c.sequence DESC LIMIT 1)
                 FROM jig_runs r WHERE status = 'running' AND lease_until < now()
                 LIMIT $1 FOR UPDATE OF r SKIP LOCKED",
                &[&SWEEP_BATCH],
            )
            .await
            .map_err(Error::db("sweeping"))?;
        for row in &lost {
            let id: String = row.get(0);
            let (files, checkpoint): (Option<String>, Option<String>) = (row.get(1), row.get(2));
            let lost = coordinator_lost(&id);
            // A lost file Run: this node delivers its last checkpoint (or
            // the bare record); nothing is replayed.
            let (terminal, packet) = match files {
                Some(files) => self.recover_packet(&files, checkpoint, lost).await,
                None => (lost, None),
            };
            let terminal = terminal.to_value();
            let text = String::from_utf8(flow::json::canonical(&terminal)).expect("UTF-8");
            tx.execute(
                "UPDATE jig_runs SET status = 'settled', terminal = $2, packet = $3, lease_until = NULL WHERE id = $1",
                &[&id, &text, &packet],
            )
            .await
            .map_err(Error::db("sweeping"))?;
            tx.execute("DELETE FROM jig_checkpoints WHERE run_id = $1", &[&id])
                .await
                .map_err(Error::db("sweeping"))?;
            event_in(&tx, &id, &json!({"type": "terminal", "result": terminal})).await?;
        }
        let (expired, lost) = (expired.len() as u64, lost.len() as u64);
        if expired + requeued + lost > 0 {
            notify_in(&tx).await?;
        }
        tx.commit().await.map_err(Error::db("sweeping"))?;
        Ok((expired, requeued, lost))
    }

    /// The packet of a file Run lost after dispatch: seed 002 §8's rule
    /// for a Run that did not succeed (its last accepted checkpoint's
    /// files, or none), published as a blob, and the `lost` terminal
    /// noting the delivery with the blob's digest. Unchanged when the Run
    /// wanted no packet.
    async fn recover_packet(
        &self,
        files: &str,
        checkpoint: Option<String>,
        lost: Terminal,
    ) -> (Terminal, Option<String>) {
        let files = match self.fetch_files(files).await {
            Ok(files) if files.out => files,
            _ => return (lost, None),
        };
        let checkpoint = checkpoint
            .and_then(|text| flow::json::parse(text.as_bytes()).ok())
            .and_then(|value| jig_engine::state::Aggregate::from_value(&value));
        let (output, source) = jig_engine::run::delivery(None, checkpoint.as_ref(), false)
            .unwrap_or((Vec::new(), Source::None));
        let checkpoint = checkpoint.map_or(Value::Null, |c| c.record());
        let run_id = lost.run_id.clone().unwrap_or_default();
        let execution = Terminal {
            run_id: None,
            ..lost.clone()
        };
        let record = jig_engine::files::packet_record(
            &run_id,
            &files.method,
            &execution.to_value(),
            &files.input,
            source.as_str(),
            &output,
            &checkpoint,
        );
        let destination = jig_engine::state::PACKET_STORE.to_string();
        let (delivery, published) = match worker::put_packet(self, &output, &record).await {
            Ok(digest) => (
                Delivery::Written {
                    destination,
                    source,
                },
                Some(digest),
            ),
            Err(e) => (
                Delivery::Failed {
                    destination,
                    code: e.code().to_string(),
                },
                None,
            ),
        };
        let terminal = lost.with_packet(&files.method, &files.input, &checkpoint, delivery);
        (terminal, published)
    }
}
