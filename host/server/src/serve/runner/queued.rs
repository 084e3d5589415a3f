//! A server with `--database`: submissions are recorded in the queue and
//! their logs follow the database's events.

use std::sync::Arc;

use super::{Enqueue, Live, Server};
use crate::Error;

/// `--database`: submission publishes the generation's bytes and records
/// the Run in PostgreSQL; its log follows the database's events.
impl Server {
    pub(super) async fn enqueue(&self, enqueue: Box<Enqueue>) -> Result<(String, bool), Error> {
        let Enqueue {
            project_name,
            project,
            generation,
            request,
            content,
            timeout,
            files,
        } = *enqueue;
        let project_name = project_name.as_str();
        let (queue, _) = self.queue.as_ref().expect("called with a queue");
        {
            queue
                .publish(
                    project_name,
                    &project.state,
                    &generation,
                    &self.config.providers,
                )
                .await?;
            // A file Run's attachments travel as blobs by digest.
            let files = match &files {
                Some(files) => Some(queue.publish_files(files).await?),
                None => None,
            };
            let (run, new) = queue
                .submit(
                    project_name,
                    request.run.key.as_deref(),
                    generation.number as i64,
                    &request.run.target,
                    &request.run.input,
                    &content,
                    timeout.as_millis() as i64,
                    &request.run.receive,
                    files.as_deref(),
                )
                .await?;
            if new {
                crate::lifecycle::span(&run.id, project_name)
                    .in_scope(|| crate::lifecycle::accepted(&request.run.target, true));
            }
            Ok((run.id, new))
        }
    }

    /// Wake followers on every NOTIFY (started once, on first use), and
    /// sweep the database periodically: queued Runs past their deadline
    /// and expired leases are settled without waiting for a worker.
    pub fn start_listening(self: &Arc<Self>) {
        let Some((queue, bump)) = &self.queue else {
            return;
        };
        let sweeper = queue.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(crate::queue::SWEEP_INTERVAL).await;
                if let Err(e) = sweeper.sweep().await {
                    eprintln!("jig serve: sweep: {e}");
                }
            }
        });
        let queue = queue.clone();
        let bump = bump.clone();
        tokio::spawn(async move {
            loop {
                match queue.listen().await {
                    Ok(mut rx) => {
                        while rx.recv().await.is_some() {
                            bump.send_modify(|n| *n += 1);
                        }
                    }
                    Err(_) => tokio::time::sleep(crate::queue::worker::RECONNECT_DELAY).await,
                }
            }
        });
    }

    /// A log fed from the database's events of Run `id` until its terminal.
    pub(super) fn follow(self: &Arc<Self>, id: &str) -> Arc<Live> {
        if let Some(live) = self.live(id) {
            return live;
        }
        let (queue, bump) = self.queue.as_ref().expect("called with a queue");
        let live = Live::new();
        self.live
            .lock()
            .unwrap()
            .insert(id.to_string(), live.clone());
        let (queue, mut woken, id, log, this) = (
            queue.clone(),
            bump.subscribe(),
            id.to_string(),
            live.clone(),
            self.clone(),
        );
        tokio::spawn(async move {
            let mut after = 0;
            loop {
                let events = match queue.events_after(&id, after).await {
                    Ok(Some(events)) => events,
                    // Removed by retention before its terminal was read:
                    // the log ends saying so, and is not kept.
                    Ok(None) => return this.gone(&id, &log),
                    Err(_) => Vec::new(),
                };
                for (seq, line) in events {
                    after = seq;
                    let terminal = flow::json::parse(&line).is_ok_and(|v| v["type"] == "terminal");
                    log.push(line);
                    if terminal {
                        // Kept among the finished logs, within their bounds.
                        this.retire(&id, &log);
                        return;
                    }
                }
                let _ = tokio::time::timeout(crate::queue::FALLBACK_POLL, woken.changed()).await;
            }
        });
        live
    }
}
