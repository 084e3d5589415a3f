//! `--receive CHANNEL` on `jig run` and `jig exec`: the host holds the
//! receiver of a root's declared send port and prints what arrives as
//! NDJSON on stdout (docs/src/runs.md, Channels), one canonical JSON/1 value a line:
//! `begin`, `data`, `end` per channel, then the `terminal` line.
//!
//! Stdout is written by one thread behind a bounded queue. A pipe that
//! takes no write for a second, or channel lines past the output budget,
//! cancel the Run: the host never lets a blocked reader of its stdout hold
//! a Run open.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flow::json::Value;
use flow::package::Package;
use serde_json::json;
use tokio::sync::{mpsc, watch};

use super::channels::{Broker, HolderId, HostReceiver};
use jig_provider_api::dispatch::now_unix_ms;

pub use crate::error::ReceiveError;

/// `--receive` may name at most this many channels.
pub const MAX_RECEIVE: usize = 16;
/// Channel lines (`begin`, `data`, `end`) one command prints in total; the
/// terminal line always follows.
pub const MAX_OUTPUT_BYTES: usize = 20 * 1024 * 1024;
/// Lines queued for stdout before the readers wait.
pub(crate) const MAX_PENDING_WRITES: usize = 256;
/// The longest stdout may take no bytes while output waits before the Run
/// is cancelled. A slow reader that keeps taking bytes is not stuck.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

/// One write to stdout: a line is written in pieces of at most this many
/// bytes (a pipe's usual capacity), and each piece taken counts as progress.
const WRITE_CHUNK: usize = 64 * 1024;

/// The `--receive` values: LocalNames, each once, at most [`MAX_RECEIVE`].
/// A bad value is a usage error.
pub fn parse(values: &[String]) -> Result<Vec<String>, ReceiveError> {
    let usage = ReceiveError::usage;
    if values.len() > MAX_RECEIVE {
        return Err(usage(format!(
            "--receive may be given at most {MAX_RECEIVE} times"
        )));
    }
    let mut names: Vec<String> = Vec::new();
    for name in values {
        if !flow::wire::is_local_name(name) {
            return Err(usage(format!("--receive {name:?} is not a LocalName")));
        }
        if names.contains(name) {
            return Err(usage(format!("--receive {name} is given twice")));
        }
        names.push(name.clone());
    }
    Ok(names)
}

/// Each name must be a declared send port of the root `package`; checked
/// before the Run is recorded. A wrong name is a usage error.
pub fn check(package: &Package, names: &[String]) -> Result<(), ReceiveError> {
    if names.is_empty() {
        return Ok(());
    }
    let broker = Broker::new();
    let host = broker.new_holder();
    broker
        .host_receivers(host, package, names)
        .map(|_| ())
        .map_err(|e| ReceiveError::usage(format!("--receive: {}", e.message)))
}

/// Why the output could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFault {
    /// The channel lines would pass [`MAX_OUTPUT_BYTES`].
    Limit,
    /// A write took longer than [`WRITE_TIMEOUT`], or failed.
    Stuck,
}

impl OutputFault {
    pub fn message(self) -> String {
        match self {
            OutputFault::Limit => format!(
                "the channel output would pass {MAX_OUTPUT_BYTES} bytes; the Run was cancelled"
            ),
            OutputFault::Stuck => format!(
                "stdout stopped taking the output (a write failed or took over {} ms); the Run was cancelled",
                WRITE_TIMEOUT.as_millis()
            ),
        }
    }
}

struct Shared {
    /// Bytes of channel lines accepted so far.
    accepted: AtomicUsize,
    /// When the piece being written started (ms since the epoch), or 0.
    busy_since: AtomicU64,
    /// Pieces written so far: what a waiting sender sees as progress.
    progress: AtomicU64,
    failed: AtomicBool,
}

/// The NDJSON stdout of one command with `--receive`.
pub struct Stream {
    tx: Option<mpsc::Sender<Vec<u8>>>,
    shared: Arc<Shared>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// Disconnected when the writer thread ends (its sender dropped).
    writer_done: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    fault: watch::Sender<Option<OutputFault>>,
}

impl Stream {
    /// Start the writer thread over `out` (stdout in the CLI).
    pub fn start(mut out: impl Write + Send + 'static) -> Stream {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(MAX_PENDING_WRITES);
        let shared = Arc::new(Shared {
            accepted: AtomicUsize::new(0),
            busy_since: AtomicU64::new(0),
            progress: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        });
        let state = shared.clone();
        let (done, writer_done) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::spawn(move || {
            let _done = done;
            while let Some(line) = rx.blocking_recv() {
                for piece in line.chunks(WRITE_CHUNK) {
                    state
                        .busy_since
                        .store(now_unix_ms().max(1), Ordering::SeqCst);
                    let written = out.write_all(piece).and_then(|()| out.flush());
                    state.busy_since.store(0, Ordering::SeqCst);
                    state.progress.fetch_add(1, Ordering::SeqCst);
                    if written.is_err() {
                        state.failed.store(true, Ordering::SeqCst);
                        return;
                    }
                }
            }
        });
        let (fault, _) = watch::channel(None);
        Stream {
            tx: Some(tx),
            shared,
            writer: Some(writer),
            writer_done: std::sync::Mutex::new(writer_done),
            fault,
        }
    }

    /// The first fault, if any.
    pub fn fault(&self) -> Option<OutputFault> {
        *self.fault.borrow()
    }

    fn set_fault(&self, fault: OutputFault) -> OutputFault {
        self.fault.send_if_modified(|f| {
            if f.is_none() {
                *f = Some(fault);
                true
            } else {
                false
            }
        });
        self.fault().unwrap_or(fault)
    }

    /// Is a write stuck past [`WRITE_TIMEOUT`], or failed? Records the fault.
    pub fn check(&self) -> Option<OutputFault> {
        self.stalled();
        self.fault()
    }

    /// Is stdout no longer taking bytes (a write stuck past
    /// [`WRITE_TIMEOUT`], or failed), whatever fault came first? Records
    /// `Stuck` when no fault came before.
    fn stalled(&self) -> bool {
        let since = self.shared.busy_since.load(Ordering::SeqCst);
        let stuck =
            since != 0 && now_unix_ms().saturating_sub(since) > WRITE_TIMEOUT.as_millis() as u64;
        let stalled = stuck || self.shared.failed.load(Ordering::SeqCst);
        if stalled {
            self.set_fault(OutputFault::Stuck);
        }
        stalled
    }

    /// Wait until a fault is recorded.
    pub(crate) async fn faulted(&self) -> OutputFault {
        let mut rx = self.fault.subscribe();
        loop {
            if let Some(fault) = *rx.borrow_and_update() {
                return fault;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Queue one channel line, waiting while [`MAX_PENDING_WRITES`] lines
    /// are queued; a wait of [`WRITE_TIMEOUT`] in which stdout took nothing
    /// is a stuck pipe.
    pub async fn line(&self, value: &Value) -> Result<(), OutputFault> {
        if let Some(fault) = self.check() {
            return Err(fault);
        }
        let mut line = flow::json::canonical(value);
        line.push(b'\n');
        let before = self.shared.accepted.fetch_add(line.len(), Ordering::SeqCst);
        if before + line.len() > MAX_OUTPUT_BYTES {
            return Err(self.set_fault(OutputFault::Limit));
        }
        let tx = self.tx.as_ref().expect("open until finish");
        let send = tx.send(line);
        tokio::pin!(send);
        loop {
            let seen = self.shared.progress.load(Ordering::SeqCst);
            match tokio::time::timeout(WRITE_TIMEOUT, &mut send).await {
                Ok(Ok(())) => return Ok(()),
                // The writer still takes bytes: keep waiting.
                Err(_) if self.shared.progress.load(Ordering::SeqCst) != seen => {}
                _ => return Err(self.set_fault(OutputFault::Stuck)),
            }
        }
    }

    /// Write the terminal line and wait for stdout to take everything,
    /// each write within [`WRITE_TIMEOUT`]. Returns the first fault.
    pub fn finish(mut self, terminal: &Value) -> Option<OutputFault> {
        let stuck = self.fault() == Some(OutputFault::Stuck);
        if let Some(tx) = self.tx.take() {
            if !stuck {
                let mut line =
                    flow::json::canonical(&json!({"type": "terminal", "result": terminal}));
                line.push(b'\n');
                // Behind a full queue (a Run cancelled at the budget leaves
                // it full) the terminal waits its turn while stdout keeps
                // taking bytes; it is never dropped for a slow reader.
                loop {
                    match tx.try_send(line) {
                        Err(mpsc::error::TrySendError::Full(back)) if !self.stalled() => {
                            line = back;
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        _ => break,
                    }
                }
            }
        }
        let writer = self.writer.take().expect("one finish");
        if !stuck {
            // The queue drains while each write keeps within the timeout
            // (also after the budget fault: what was accepted, and the
            // terminal, are still written).
            // Woken the moment the writer ends, not at the next poll.
            loop {
                if writer.is_finished() || self.stalled() {
                    break;
                }
                let done = self
                    .writer_done
                    .get_mut()
                    .unwrap_or_else(|e| e.into_inner());
                match done.recv_timeout(Duration::from_millis(10)) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    _ => {
                        // Its last act is dropping the sender: let it exit.
                        let _ = writer.join();
                        self.check();
                        return self.fault();
                    }
                }
            }
        }
        if writer.is_finished() {
            let _ = writer.join();
        }
        // A writer stuck in a write is left behind; the process exits.
        self.check();
        self.fault()
    }
}

/// Resolve once the output has a fault: a write stuck past
/// [`WRITE_TIMEOUT`] (polled), a failed write, or a line past the budget.
pub async fn watch(stream: &Stream) {
    loop {
        if stream.check().is_some() {
            return;
        }
        tokio::select! {
            _ = stream.faulted() => return,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

/// Read `receivers` (held by `host`) to their ends, printing each as
/// `begin`, `data` and `end` lines. A fault stops the reading; the caller
/// cancels the Run.
pub async fn pump(
    broker: Arc<Broker>,
    host: HolderId,
    receivers: Vec<HostReceiver>,
    stream: Arc<Stream>,
) {
    let mut reads = tokio::task::JoinSet::new();
    for r in receivers {
        let broker = broker.clone();
        let stream = stream.clone();
        reads.spawn(async move { read_to_end(&broker, host, &r, &stream).await });
    }
    while reads.join_next().await.is_some() {}
}

async fn read_to_end(
    broker: &Arc<Broker>,
    host: HolderId,
    r: &HostReceiver,
    stream: &Stream,
) -> Result<(), OutputFault> {
    let channel = r.port.as_str();
    stream
        .line(&json!({"type": "begin", "channel": channel, "startSequence": r.start_sequence}))
        .await?;
    loop {
        let line = match broker.read(host, &r.endpoint).await {
            Ok(read) => match (read.get("item"), read.get("end")) {
                (Some(item), _) => json!({
                    "type": "data",
                    "channel": channel,
                    "sequence": item["sequence"],
                    "value": item["value"],
                }),
                (None, Some(end)) => {
                    return stream
                        .line(&json!({
                            "type": "end",
                            "channel": channel,
                            "status": "closed",
                            "lastSequence": end["lastSequence"],
                        }))
                        .await;
                }
                _ => unreachable!("channel/next answers an item or an end"),
            },
            Err(e) => {
                return stream
                    .line(&json!({
                        "type": "end",
                        "channel": channel,
                        "status": "failed",
                        "code": e.code.as_str(),
                    }))
                    .await;
            }
        };
        stream.line(&line).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receive_names_at_the_limit_and_past_it() {
        let names: Vec<String> = (0..=MAX_RECEIVE).map(|i| format!("c{i}")).collect();
        assert_eq!(parse(&names[..MAX_RECEIVE]).unwrap().len(), MAX_RECEIVE);
        assert_eq!(parse(&names).unwrap_err().code(), "JIG_USAGE");
        let twice = vec!["a".to_string(), "a".to_string()];
        assert_eq!(parse(&twice).unwrap_err().code(), "JIG_USAGE");
        assert_eq!(
            parse(&["not a name".to_string()]).unwrap_err().code(),
            "JIG_USAGE"
        );
    }

    #[tokio::test]
    async fn channel_lines_at_the_output_budget_and_one_byte_past() {
        let stream = Stream::start(std::io::sink());
        // `"` + n bytes + `"` + newline per line.
        let line = |n: usize| json!("a".repeat(n - 3));
        let chunk = 1024 * 1024;
        for _ in 0..MAX_OUTPUT_BYTES / chunk {
            stream.line(&line(chunk)).await.unwrap();
        }
        assert_eq!(stream.line(&line(3)).await, Err(OutputFault::Limit));
        assert_eq!(stream.finish(&json!(null)), Some(OutputFault::Limit));
    }

    /// A writer that never finishes a write.
    struct Stuck;
    impl Write for Stuck {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            std::thread::sleep(Duration::from_secs(3600));
            Ok(0)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_stuck_write_is_a_fault_after_the_write_timeout() {
        let stream = Stream::start(Stuck);
        let started = std::time::Instant::now();
        stream.line(&json!(1)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The first line is in the stuck write; the queue then holds the
        // pending limit, and one more line waits for a second.
        for i in 0..MAX_PENDING_WRITES {
            stream.line(&json!(i)).await.unwrap();
        }
        assert_eq!(stream.line(&json!("late")).await, Err(OutputFault::Stuck));
        assert!(started.elapsed() >= WRITE_TIMEOUT);
        assert_eq!(stream.check(), Some(OutputFault::Stuck));
    }

    /// A reader that takes one whole piece every 300 ms (small lines at
    /// once): slow, never stuck.
    struct Slow(Arc<AtomicUsize>);
    impl Write for Slow {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            if bytes.len() == WRITE_CHUNK {
                std::thread::sleep(Duration::from_millis(300));
            }
            self.0.fetch_add(bytes.len(), Ordering::SeqCst);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_taking_bytes_is_not_stuck() {
        let taken = Arc::new(AtomicUsize::new(0));
        let stream = Stream::start(Slow(taken.clone()));
        // Eight pieces of one line: 2.4 s in one line, well past the
        // timeout, with progress every 300 ms.
        let big = json!("a".repeat(8 * WRITE_CHUNK - 3));
        stream.line(&big).await.unwrap();
        // Queued behind it; the sender waits on a writer that keeps moving.
        for i in 0..=MAX_PENDING_WRITES {
            stream.line(&json!(i)).await.unwrap();
        }
        assert_eq!(stream.check(), None);
        assert_eq!(stream.finish(&json!(null)), None);
        assert!(taken.load(Ordering::SeqCst) > 8 * WRITE_CHUNK);
    }

    /// A reader that keeps what it takes, a millisecond per write.
    struct Kept(Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Kept {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            std::thread::sleep(Duration::from_millis(1));
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_terminal_waits_behind_a_full_queue_and_comes_last() {
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stream = Stream::start(Kept(kept.clone()));
        // More lines than the queue holds: when they are sent, it is full.
        for i in 0..MAX_PENDING_WRITES + 8 {
            stream.line(&json!(i)).await.unwrap();
        }
        assert_eq!(stream.finish(&json!({"status": "cancelled"})), None);
        let text = String::from_utf8(kept.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            MAX_PENDING_WRITES + 9,
            "every line and the terminal"
        );
        assert_eq!(
            lines.last().copied(),
            Some(r#"{"result":{"status":"cancelled"},"type":"terminal"}"#)
        );
    }

    /// A reader that takes nothing until it is opened, then keeps all.
    struct Gated(Arc<AtomicBool>, Arc<std::sync::Mutex<Vec<u8>>>);
    impl Write for Gated {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            while !self.0.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
            self.1.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn past_the_budget_what_was_accepted_and_the_terminal_are_still_written() {
        let open = Arc::new(AtomicBool::new(false));
        let kept = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stream = Stream::start(Gated(open.clone(), kept.clone()));
        let chunk = 1024 * 1024;
        let line = json!("a".repeat(chunk - 3));
        let accepted = MAX_OUTPUT_BYTES / chunk;
        for _ in 0..accepted {
            stream.line(&line).await.unwrap();
        }
        assert_eq!(stream.line(&line).await, Err(OutputFault::Limit));
        // All of it is still queued when the Run ends; stdout then takes it.
        assert!(kept.lock().unwrap().is_empty());
        open.store(true, Ordering::SeqCst);
        assert_eq!(stream.finish(&json!(null)), Some(OutputFault::Limit));
        let text = String::from_utf8(kept.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), accepted + 1);
        assert_eq!(
            lines.last().copied(),
            Some(r#"{"result":null,"type":"terminal"}"#)
        );
    }
}
