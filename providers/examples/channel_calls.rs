//! Channel ports for the loader tests (included with `#[path]` by the
//! native and WASM loader tests, next to `kv_calls.rs`): a fake
//! [`ChannelPorts`] with an in-memory receive port `in` and send port
//! `out`, and the checks both loaders must pass with the `faulty-provider`
//! fixture's channel keys.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use jig_provider_api::{
    check_granted, CallError, ChannelItem, ChannelPorts, GrantedPort, PortDirection, Provider,
};
use serde_json::{json, Value};

/// Longest a fake `next` waits for an item before failing the test run.
const WAIT_LIMIT: Duration = Duration::from_secs(20);

#[derive(Default)]
struct Queues {
    input: Vec<Value>,
    taken: u64,
    sent: Vec<Value>,
    closed: bool,
    /// `next("in")` blocks until this is set (`CANCELLED`).
    cancelled: bool,
    /// `next("in")` ends cleanly once `input` is empty.
    input_ends: bool,
    /// `next("in")` fails with this Run/1 code.
    failure: Option<&'static str>,
}

/// Ports `in` (receive) and `out` (send), backed by memory.
pub struct FakePorts {
    ports: Vec<GrantedPort>,
    queues: Mutex<Queues>,
    woke: Condvar,
}

impl FakePorts {
    /// `in` yields `input` and then ends cleanly.
    pub fn with_input(input: Vec<Value>) -> Arc<FakePorts> {
        FakePorts::new(input, true)
    }

    /// `in` yields nothing and never ends: `next` blocks until [`cancel`].
    ///
    /// [`cancel`]: FakePorts::cancel
    pub fn blocking() -> Arc<FakePorts> {
        FakePorts::new(Vec::new(), false)
    }

    /// `in` fails every read with `code`, as a broker reports a lagged,
    /// disconnected or failed source.
    pub fn failing(code: &'static str) -> Arc<FakePorts> {
        let ports = FakePorts::new(Vec::new(), false);
        ports.queues.lock().unwrap().failure = Some(code);
        ports
    }

    fn new(input: Vec<Value>, input_ends: bool) -> Arc<FakePorts> {
        Arc::new(FakePorts {
            ports: vec![
                GrantedPort {
                    name: "in".into(),
                    direction: PortDirection::Receive,
                },
                GrantedPort {
                    name: "out".into(),
                    direction: PortDirection::Send,
                },
            ],
            queues: Mutex::new(Queues {
                input,
                input_ends,
                ..Queues::default()
            }),
            woke: Condvar::new(),
        })
    }

    /// What the provider sent on `out`, and whether it closed it.
    pub fn sent(&self) -> (Vec<Value>, bool) {
        let q = self.queues.lock().unwrap();
        (q.sent.clone(), q.closed)
    }

    /// Wakes a blocked `next` with `CANCELLED`, as the host does when the
    /// call is cancelled.
    pub fn cancel(&self) {
        self.queues.lock().unwrap().cancelled = true;
        self.woke.notify_all();
    }
}

impl ChannelPorts for FakePorts {
    fn ports(&self) -> &[GrantedPort] {
        &self.ports
    }

    fn send(&self, port: &str, item: Value) -> Result<(), CallError> {
        check_granted(&self.ports, port, PortDirection::Send)?;
        let mut q = self.queues.lock().unwrap();
        if q.closed {
            return Err(CallError::operational(
                "DISCONNECTED",
                "the writer is sealed",
            ));
        }
        q.sent.push(item);
        Ok(())
    }

    fn next(&self, port: &str) -> Result<Option<ChannelItem>, CallError> {
        check_granted(&self.ports, port, PortDirection::Receive)?;
        let started = Instant::now();
        let mut q = self.queues.lock().unwrap();
        if let Some(code) = q.failure {
            return Err(CallError::operational(code, "the source failed"));
        }
        loop {
            if q.cancelled {
                return Err(CallError::operational(
                    "CANCELLED",
                    "the call was cancelled",
                ));
            }
            if !q.input.is_empty() {
                q.taken += 1;
                let value = q.input.remove(0);
                return Ok(Some(ChannelItem {
                    sequence: q.taken,
                    value,
                }));
            }
            if q.input_ends {
                return Ok(None);
            }
            assert!(started.elapsed() < WAIT_LIMIT, "next was never woken");
            q = self.woke.wait_timeout(q, WAIT_LIMIT).unwrap().0;
        }
    }

    fn close(&self, port: &str) -> Result<(), CallError> {
        check_granted(&self.ports, port, PortDirection::Send)?;
        self.queues.lock().unwrap().closed = true;
        Ok(())
    }
}

fn call_faulty(
    provider: &dyn Provider,
    key: &str,
    ports: Arc<FakePorts>,
) -> Result<Value, CallError> {
    provider.call(&super::ctx(), "get", &json!({ "key": key }), ports)
}

/// Items pass both ways: the provider reads `in` to its clean end and
/// writes each item, with its sequence, to `out`, then closes `out`.
pub fn check_items_pass_both_ways(provider: &dyn Provider) {
    let ports = FakePorts::with_input(vec![json!("a"), json!({"b": [1, 2]}), json!(null)]);
    let answer = call_faulty(provider, "relay", ports.clone()).unwrap();
    assert_eq!(answer, json!("relayed 3"));
    let (sent, closed) = ports.sent();
    assert_eq!(
        sent,
        vec![
            json!({"seq": 1, "value": "a"}),
            json!({"seq": 2, "value": {"b": [1, 2]}}),
            json!({"seq": 3, "value": null}),
        ]
    );
    assert!(closed, "the provider closed out");
}

/// A channel failure reaches the provider with its code, and a provider
/// that returns it fails the call with that code.
pub fn check_channel_errors_keep_their_codes(provider: &dyn Provider) {
    let err = call_faulty(provider, "send-other", FakePorts::with_input(vec![])).unwrap_err();
    assert_eq!(err.code(), Some("PERMISSION_DENIED"), "{err:?}");
    for code in [
        "LAGGED",
        "DISCONNECTED",
        "DEADLINE_EXCEEDED",
        "INVALID_INPUT",
    ] {
        let err = call_faulty(provider, "wait", FakePorts::failing(code)).unwrap_err();
        assert_eq!(err.code(), Some(code), "{err:?}");
    }
}

/// A provider blocked in `next` wakes when the call is cancelled.
pub fn check_blocked_next_wakes_on_cancel(provider: Arc<dyn Provider>) {
    let ports = FakePorts::blocking();
    let call = {
        let ports = ports.clone();
        std::thread::spawn(move || call_faulty(&*provider, "wait", ports))
    };
    std::thread::sleep(Duration::from_millis(200));
    assert!(!call.is_finished(), "the provider waits in next");
    let cancelled = Instant::now();
    ports.cancel();
    let err = call.join().unwrap().unwrap_err();
    assert_eq!(err.code(), Some("CANCELLED"), "{err:?}");
    assert!(cancelled.elapsed() < Duration::from_secs(2));
}

/// The channel tests every loader runs, as `#[test]` functions over
/// `$faulty`: an expression loading the `faulty-provider` fixture the way
/// that loader does (an `Arc<dyn Provider>`).
macro_rules! loader_channel_tests {
    ($faulty:expr) => {
        fn faulty() -> std::sync::Arc<dyn jig_provider_api::Provider> {
            $faulty
        }

        #[test]
        fn items_pass_both_ways_through_the_ports() {
            $crate::channel_calls::check_items_pass_both_ways(&*faulty());
        }

        #[test]
        fn a_channel_failure_keeps_its_code() {
            $crate::channel_calls::check_channel_errors_keep_their_codes(&*faulty());
        }

        #[test]
        fn a_provider_blocked_in_next_wakes_when_the_call_is_cancelled() {
            $crate::channel_calls::check_blocked_next_wakes_on_cancel(faulty());
        }
    };
}
pub(crate) use loader_channel_tests;
