//! Round trips of `capability/call` between a host peer and an SDK component.
//!
//! The component is `flow_sdk::serve` on its own thread, connected to the
//! peer by two OS pipes (`std::io::pipe`), so every frame crosses the kernel
//! as it would between processes. The baseline is a bare line echo over the
//! same kind of pipes: what is left after subtracting it is the SDK's and
//! the peer's own work per call.
//!
//! Before divan's table, `main` prints p50 and p99 of single round trips
//! (divan reports the median and mean, not tail percentiles).

use std::io::{BufRead, BufReader, PipeReader, PipeWriter, Write};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use divan::counter::ItemsCount;
use divan::Bencher;
use flow::wire::{MAX_LIFETIME_REQUESTS, MAX_PENDING_REQUESTS};
use flow_sdk::{serve, testing, CapabilityCall, HandlerError, RunResult};
use serde_json::{json, Value};

/// Calls the SDK admits on the wire at once (Run/1's ceiling).
const IN_FLIGHT: usize = MAX_PENDING_REQUESTS;
/// Requests one root Run may make (Run/1's lifetime ceiling); a fixture
/// starts a fresh component before its Run runs out.
const LIFETIME: usize = MAX_LIFETIME_REQUESTS as usize;
/// Round trips measured for the printed percentiles.
const PERCENTILE_SAMPLES: usize = 10_000;

fn main() {
    report_percentiles();
    divan::main();
}

/// The peer's ends of a component's pipes.
struct Peer {
    to_component: PipeWriter,
    from_component: BufReader<PipeReader>,
    line: Vec<u8>,
    thread: Option<JoinHandle<()>>,
    /// Requests this Run may still make.
    budget: usize,
}

impl Peer {
    fn read_line(&mut self) -> &[u8] {
        self.line.clear();
        let n = self
            .from_component
            .read_until(b'\n', &mut self.line)
            .expect("read");
        assert!(n > 0, "the component closed its output");
        &self.line
    }

    /// Reads one request and returns its id.
    fn read_request(&mut self) -> String {
        let frame: Value = serde_json::from_slice(self.read_line()).expect("a JSON frame");
        frame["id"].as_str().expect("a request id").to_string()
    }

    fn answer(&mut self, id: &str) {
        let reply = testing::reply(id, json!({"value": null}));
        let mut bytes = reply.to_string().into_bytes();
        bytes.push(b'\n');
        self.to_component.write_all(&bytes).expect("write");
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Starts a component that makes capability calls `batch` at a time, each
/// batch once the previous one settled, until its Run ends.
fn component(batch: usize) -> Peer {
    let (stdin_r, mut stdin_w) = std::io::pipe().expect("pipe");
    let (stdout_r, stdout_w) = std::io::pipe().expect("pipe");
    let thread = thread::spawn(move || {
        serve(stdin_r, Box::new(stdout_w), move |ctx| async move {
            let mut next = 0u64;
            loop {
                let calls: Vec<_> = (0..batch)
                    .map(|_| {
                        next += 1;
                        ctx.call_capability(CapabilityCall {
                            operation_id: format!("bench:{next}"),
                            slot: "sink".into(),
                            method: "write".into(),
                            ..Default::default()
                        })
                    })
                    .collect();
                for call in calls {
                    call.await?;
                }
                if next as usize + batch > LIFETIME {
                    return Ok::<_, HandlerError>(RunResult::done(json!(next)));
                }
            }
        });
    });
    let mut root = testing::root(json!(null)).to_string().into_bytes();
    root.push(b'\n');
    stdin_w.write_all(&root).expect("write");
    Peer {
        to_component: stdin_w,
        from_component: BufReader::new(stdout_r),
        line: Vec::new(),
        thread: Some(thread),
        budget: LIFETIME / batch * batch,
    }
}

/// A live component whose next `batch` requests are already on the wire,
/// replaced by a fresh one before its Run's request budget runs out.
struct Fixture {
    peer: Peer,
    batch: usize,
    open: Vec<String>,
}

impl Fixture {
    fn new(batch: usize) -> Self {
        let mut peer = component(batch);
        let open = (0..batch).map(|_| peer.read_request()).collect();
        peer.budget -= batch;
        Fixture { peer, batch, open }
    }

    /// Answers the open batch and reads the next one: one round trip per call.
    fn round_trip(&mut self) {
        if self.peer.budget < self.batch {
            // Replacing drops (and so ends) the spent Run.
            *self = Fixture::new(self.batch);
        }
        for id in std::mem::take(&mut self.open) {
            self.peer.answer(&id);
        }
        for _ in 0..self.batch {
            let id = self.peer.read_request();
            self.open.push(id);
        }
        self.peer.budget -= self.batch;
    }
}

/// Ends the Run quietly: the open calls fail, so the handler fails the
/// root and `serve` returns (closing stdin instead would log CHANNEL_LOST).
impl Drop for Fixture {
    fn drop(&mut self) {
        for id in std::mem::take(&mut self.open) {
            let failure = testing::fail(&id, "UNAVAILABLE");
            let mut bytes = failure.to_string().into_bytes();
            bytes.push(b'\n');
            let _ = self.peer.to_component.write_all(&bytes);
        }
    }
}

/// A thread echoing lines over the same kind of pipes.
struct Echo {
    to: PipeWriter,
    from: BufReader<PipeReader>,
    line: Vec<u8>,
    frame: Vec<u8>,
}

impl Echo {
    fn new() -> Self {
        let (in_r, in_w) = std::io::pipe().expect("pipe");
        let (out_r, mut out_w) = std::io::pipe().expect("pipe");
        thread::spawn(move || {
            let mut input = BufReader::new(in_r);
            let mut line = Vec::new();
            while input.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
                if out_w.write_all(&line).is_err() {
                    return;
                }
                line.clear();
            }
        });
        // The same size as a reply frame the call benchmark writes.
        let mut frame = testing::reply("component:1", json!({"value": null}))
            .to_string()
            .into_bytes();
        frame.push(b'\n');
        Echo {
            to: in_w,
            from: BufReader::new(out_r),
            line: Vec::new(),
            frame,
        }
    }

    fn round_trip(&mut self) {
        self.to.write_all(&self.frame).expect("write");
        self.line.clear();
        self.from.read_until(b'\n', &mut self.line).expect("read");
    }
}

#[divan::bench]
fn echo_baseline(bencher: Bencher) {
    let mut echo = Echo::new();
    bencher.bench_local(|| echo.round_trip());
}

#[divan::bench]
fn capability_call_round_trip(bencher: Bencher) {
    let mut fixture = Fixture::new(1);
    bencher.bench_local(|| fixture.round_trip());
}

#[divan::bench]
fn echo_baseline_64_in_flight(bencher: Bencher) {
    let mut echo = Echo::new();
    bencher.counter(ItemsCount::new(IN_FLIGHT)).bench_local(|| {
        for _ in 0..IN_FLIGHT {
            echo.to.write_all(&echo.frame).expect("write");
        }
        for _ in 0..IN_FLIGHT {
            echo.line.clear();
            echo.from.read_until(b'\n', &mut echo.line).expect("read");
        }
    });
}

#[divan::bench]
fn capability_calls_64_in_flight(bencher: Bencher) {
    let mut fixture = Fixture::new(IN_FLIGHT);
    bencher
        .counter(ItemsCount::new(IN_FLIGHT))
        .bench_local(|| fixture.round_trip());
}

fn percentiles(name: &str, mut round_trip: impl FnMut()) {
    for _ in 0..PERCENTILE_SAMPLES / 10 {
        round_trip();
    }
    let mut samples: Vec<Duration> = (0..PERCENTILE_SAMPLES)
        .map(|_| {
            let t = Instant::now();
            round_trip();
            t.elapsed()
        })
        .collect();
    samples.sort();
    let at = |p: usize| samples[(samples.len() * p / 100).min(samples.len() - 1)];
    println!(
        "{name:<28} p50 {:>9.1?}  p99 {:>9.1?}  ({PERCENTILE_SAMPLES} round trips)",
        at(50),
        at(99)
    );
}

fn report_percentiles() {
    let mut echo = Echo::new();
    percentiles("echo_baseline", || echo.round_trip());
    let mut fixture = Fixture::new(1);
    percentiles("capability_call_round_trip", || fixture.round_trip());
}
