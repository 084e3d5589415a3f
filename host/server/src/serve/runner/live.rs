//! One Run's event log in a daemon's memory: the lines a Run appends
//! (status, channel items, the terminal), read by any number of clients at
//! their own pace, and the bound on the finished logs kept readable.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use flow::json::Value;
use tokio::sync::watch;

/// Finished Runs whose event logs stay readable in memory (older ones
/// answer their events with the recorded terminal alone).
pub const MAX_FINISHED_LOGS: usize = 256;
/// The bytes those logs may hold together: one log is bounded by the
/// `--receive` stream ([`jig_engine::exec::receive::MAX_OUTPUT_BYTES`]), so without this 256
/// of them could hold gigabytes. The newest log is kept whatever its size.
pub const MAX_FINISHED_LOG_BYTES: usize = 64 * 1024 * 1024;

/// The finished logs still in memory, oldest first, with their bytes.
#[derive(Default)]
pub(super) struct Retired {
    pub(super) logs: VecDeque<(String, usize)>,
    pub(super) bytes: usize,
}

impl Retired {
    /// Keep Run `id`'s log of `bytes`; returns the Runs whose logs go.
    pub(super) fn push(&mut self, id: String, bytes: usize) -> Vec<String> {
        self.logs.push_back((id, bytes));
        self.bytes += bytes;
        let mut evicted = Vec::new();
        while self.logs.len() > 1
            && (self.logs.len() > MAX_FINISHED_LOGS || self.bytes > MAX_FINISHED_LOG_BYTES)
        {
            let (old, size) = self.logs.pop_front().expect("more than one");
            self.bytes -= size;
            evicted.push(old);
        }
        evicted
    }
}

/// One Run's event log: NDJSON lines, appended by the Run, read by any
/// number of clients at their own pace (a slow client never holds the Run).
pub struct Live {
    pub(super) lines: Mutex<Vec<Arc<Vec<u8>>>>,
    /// The bytes of `lines`.
    pub(super) bytes: AtomicUsize,
    pub(super) appended: watch::Sender<usize>,
    pub(super) cancel: watch::Sender<bool>,
    pub(super) finished: AtomicBool,
}

impl Live {
    pub(super) fn new() -> Arc<Live> {
        Arc::new(Live {
            lines: Mutex::new(Vec::new()),
            bytes: AtomicUsize::new(0),
            appended: watch::channel(0).0,
            cancel: watch::channel(false).0,
            finished: AtomicBool::new(false),
        })
    }

    pub(super) fn push(&self, line: Vec<u8>) {
        self.bytes.fetch_add(line.len(), Ordering::SeqCst);
        let mut lines = self.lines.lock().unwrap();
        lines.push(Arc::new(line));
        let n = lines.len();
        drop(lines);
        self.appended.send_replace(n);
    }

    pub(super) fn push_value(&self, value: &Value) {
        let mut line = flow::json::canonical(value);
        line.push(b'\n');
        self.push(line);
    }

    /// Lines from `from`, and whether the log is complete after them.
    pub fn read_from(&self, from: usize) -> (Vec<Arc<Vec<u8>>>, bool) {
        let finished = self.finished.load(Ordering::SeqCst);
        let lines = self.lines.lock().unwrap();
        (lines[from.min(lines.len())..].to_vec(), finished)
    }

    pub fn subscribe(&self) -> watch::Receiver<usize> {
        self.appended.subscribe()
    }

    /// Hand every line of this log to `send`, from the first and then as
    /// each is appended: `true` once the log is finished and every line
    /// was sent, `false` when `send` says its reader went away.
    pub async fn forward<F, Sent>(&self, mut send: F) -> bool
    where
        F: FnMut(Arc<Vec<u8>>) -> Sent,
        Sent: std::future::Future<Output = bool>,
    {
        let mut changes = self.subscribe();
        let mut next = 0;
        loop {
            let (lines, finished) = self.read_from(next);
            next += lines.len();
            for line in lines {
                if !send(line).await {
                    return false;
                }
            }
            if finished && self.read_from(next).0.is_empty() {
                return true;
            }
            if changes.changed().await.is_err() {
                return false;
            }
        }
    }
}

/// The `--receive` stream writes whole lines; each becomes one event.
pub(super) struct LogWriter(pub(super) Arc<Live>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.push(buf.to_vec());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_logs_are_bounded_by_count_and_by_bytes() {
        let mut retired = Retired::default();
        for n in 0..MAX_FINISHED_LOGS {
            assert!(retired.push(format!("r{n}"), 1).is_empty());
        }
        assert_eq!(retired.push("past".into(), 1), ["r0"]);
        assert_eq!(retired.logs.len(), MAX_FINISHED_LOGS);

        let mut retired = Retired::default();
        assert!(retired
            .push("a".into(), MAX_FINISHED_LOG_BYTES - 1)
            .is_empty());
        assert!(retired.push("b".into(), 1).is_empty(), "at the bound");
        assert_eq!(retired.push("c".into(), 1), ["a"], "one byte past it");
        assert_eq!(retired.bytes, 2);
        // The newest log stays, whatever its size.
        assert_eq!(
            retired.push("huge".into(), MAX_FINISHED_LOG_BYTES + 1),
            ["b", "c"]
        );
        assert_eq!(retired.logs.len(), 1);
    }
}
