//! The corpus cases, one function each. Every case starts a fresh component
//! process and checks what the Run/1 conformance scenarios say an independent host peer
//! checks of a component.

use std::collections::VecDeque;
use std::thread;
use std::time::{Duration, Instant};

use flow::wire::{ErrorCode, Method, RunResult, MAX_FRAME_BYTES};
use serde_json::{json, Value};

use crate::session::{root_request, Component, Request, Session, QUIET_WINDOW, STEP_TIMEOUT};

type Step<T> = Result<T, String>;

/// Which example component a case drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The "standard component" of the conformance scenarios.
    Standard,
    /// The "matrix component" of the conformance scenarios.
    Matrix,
    /// The "channels component" of the conformance scenarios.
    Channels,
    /// The "broadcast component" of the conformance scenarios.
    Broadcast,
    /// The "channel-wiring component" of the conformance scenarios, one role per case.
    ChannelWiring,
    /// A contract digest program (Capability Contract/1 case 7), not a Run/1 peer.
    ContractDigest,
}

/// One named case.
pub struct Case {
    pub name: &'static str,
    pub target: Target,
    pub run: fn(&Component) -> Step<()>,
}

/// Every case this runner implements, in corpus order.
pub const CASES: &[Case] = &[
    Case {
        name: "json-framing-fixtures",
        target: Target::Standard,
        run: framing_cases,
    },
    Case {
        name: "json-depth-and-frame-bounds",
        target: Target::Standard,
        run: frame_bounds,
    },
    Case {
        name: "structured-params",
        target: Target::Standard,
        run: structured_params,
    },
    Case {
        name: "golden-conversation",
        target: Target::Standard,
        run: golden_conversation,
    },
    Case {
        name: "direction-and-request-form",
        target: Target::Standard,
        run: direction_and_request_form,
    },
    Case {
        name: "invalid-root-params",
        target: Target::Standard,
        run: invalid_root_params,
    },
    Case {
        name: "second-root",
        target: Target::Standard,
        run: second_root,
    },
    Case {
        name: "root-cancellation",
        target: Target::Standard,
        run: root_cancellation,
    },
    Case {
        name: "malformed-root-cancellation",
        target: Target::Standard,
        run: malformed_root_cancellation,
    },
    Case {
        name: "fatal-frames",
        target: Target::Standard,
        run: fatal_frames_while_pending,
    },
    Case {
        name: "root-frame-boundaries",
        target: Target::Standard,
        run: root_frame_boundaries,
    },
    Case {
        name: "terminal-half-close",
        target: Target::Standard,
        run: terminal_half_close,
    },
    Case {
        name: "response-failures",
        target: Target::Standard,
        run: response_failures,
    },
    Case {
        name: "simultaneous-request-ceiling",
        target: Target::Matrix,
        run: fanout_65,
    },
    Case {
        name: "request-lifetime-ceiling",
        target: Target::Matrix,
        run: request_lifetime,
    },
    Case {
        name: "operation-join-replay-conflict",
        target: Target::Matrix,
        run: operation_identity,
    },
    Case {
        name: "joined-waiter-cancellation",
        target: Target::Matrix,
        run: cancel_shared_waiter,
    },
    Case {
        name: "uncertain-replay",
        target: Target::Matrix,
        run: uncertain_replay,
    },
    Case {
        name: "call-cancellation-late-response",
        target: Target::Matrix,
        run: cancel_one_call,
    },
    Case {
        name: "abandoned-call",
        target: Target::Matrix,
        run: abandoned_call,
    },
    Case {
        name: "one-flow",
        target: Target::Matrix,
        run: one_flow,
    },
    Case {
        name: "two-effects",
        target: Target::Matrix,
        run: two_effects,
    },
    Case {
        name: "channel-direct-drain",
        target: Target::Channels,
        run: channel_direct_drain,
    },
    Case {
        name: "channel-direct-lagged",
        target: Target::Channels,
        run: channel_direct_lagged,
    },
    Case {
        name: "channel-direct-cancelled-read",
        target: Target::Channels,
        run: channel_direct_cancelled_read,
    },
    Case {
        name: "channel-sequence-gap",
        target: Target::Channels,
        run: channel_sequence_gap,
    },
    Case {
        name: "channel-broadcast-late-subscriber",
        target: Target::Broadcast,
        run: channel_broadcast,
    },
    Case {
        name: "channel-broadcast-lagged-subscriber",
        target: Target::Broadcast,
        run: channel_broadcast_lagged_subscriber,
    },
    Case {
        name: "channel-wiring-root",
        target: Target::ChannelWiring,
        run: wiring_root,
    },
    Case {
        name: "channel-wiring-hosted",
        target: Target::ChannelWiring,
        run: wiring_hosted,
    },
    Case {
        name: "channel-wiring-root-progress",
        target: Target::ChannelWiring,
        run: wiring_root_progress,
    },
    Case {
        name: "channel-wiring-worker",
        target: Target::ChannelWiring,
        run: wiring_worker,
    },
    Case {
        name: "channel-wiring-monitor-drain",
        target: Target::ChannelWiring,
        run: wiring_monitor_drain,
    },
    Case {
        name: "channel-wiring-monitor-stop",
        target: Target::ChannelWiring,
        run: wiring_monitor_stop,
    },
    Case {
        name: "channel-wiring-monitor-lagged",
        target: Target::ChannelWiring,
        run: wiring_monitor_lagged,
    },
    Case {
        name: "contract-digest",
        target: Target::ContractDigest,
        run: crate::digest::contract_digests,
    },
];

fn ensure(cond: bool, what: impl FnOnce() -> String) -> Step<()> {
    if cond {
        Ok(())
    } else {
        Err(what())
    }
}

fn expect_eq(what: &str, got: &Value, want: &Value) -> Step<()> {
    ensure(got == want, || format!("{what}: got {got}, want {want}"))
}

fn expect_done(root: Result<RunResult, flow::wire::OperationalError>, want: &Value) -> Step<()> {
    match root {
        Ok(r) => expect_eq(
            "root result",
            &r.to_value(),
            &json!({"outcome": "done", "output": want}),
        ),
        Err(e) => Err(format!("root failed: {e}")),
    }
}

fn expect_failed(
    root: Result<RunResult, flow::wire::OperationalError>,
    code: ErrorCode,
) -> Step<()> {
    match root {
        Err(e) if e.code == code => Ok(()),
        Err(e) => Err(format!("root failed with {}, want {code}", e.code)),
        Ok(r) => Err(format!("root succeeded with {}, want {code}", r.to_value())),
    }
}

fn expect_method(r: &Request, method: Method, operation_id: &str) -> Step<()> {
    ensure(
        r.method == method && r.operation_id() == operation_id,
        || {
            format!(
                "expected {} {operation_id}, got {} {}",
                method.as_str(),
                r.method.as_str(),
                r.operation_id()
            )
        },
    )
}

// ---------------------------------------------------------------------------
// standard component

const ROOT_INPUT: &str = r#"{"subject":"football"}"#;

fn root_input() -> Value {
    serde_json::from_str(ROOT_INPUT).unwrap_or(Value::Null)
}

fn research_result() -> Value {
    json!({"outcome": "done", "output": {"target": "rugby"}})
}

fn stored_value() -> Value {
    json!({"uri": "artifact://research"})
}

/// The two concurrent first requests of the standard component, in
/// (research, store) order whichever order they were written in.
fn first_pair(s: &mut Session, input: &Value) -> Step<(Request, Request)> {
    let a = s.expect_request()?;
    let b = s.expect_request()?;
    let (research, store) = if a.operation_id() == "research:1" {
        (a, b)
    } else {
        (b, a)
    };
    expect_method(&research, Method::RunChild, "research:1")?;
    expect_method(&store, Method::CapabilityCall, "store:1")?;
    expect_eq(
        "research:1 params",
        &research.params,
        &json!({"operationId": "research:1", "slot": "research",
                "intent": "Find a useful comparison target.", "input": input}),
    )?;
    expect_eq(
        "store:1 params",
        &store.params,
        &json!({"operationId": "store:1", "slot": "artifacts", "method": "write",
                "input": {"source": "research"}}),
    )?;
    Ok((research, store))
}

fn expect_missing(s: &mut Session) -> Step<Request> {
    let missing = s.expect_request()?;
    expect_method(&missing, Method::CapabilityCall, "missing:1")?;
    expect_eq(
        "missing:1 params",
        &missing.params,
        &json!({"operationId": "missing:1", "slot": "artifacts", "method": "read",
                "input": {"uri": "artifact://missing"}}),
    )?;
    Ok(missing)
}

fn standard_output() -> Value {
    json!({"research": research_result(), "stored": stored_value(), "missing": "not-found"})
}

fn not_found() -> Value {
    json!({"error": {"name": "not-found", "data": {"uri": "artifact://missing"}}})
}

/// Serves the standard component after its root request was sent and
/// checks the successful root result.
fn serve_standard(s: &mut Session, input: &Value) -> Step<()> {
    let (research, store) = first_pair(s, input)?;
    s.reply(&store.id, json!({"value": stored_value()}))?;
    s.reply(&research.id, research_result())?;
    let missing = expect_missing(s)?;
    s.reply(&missing.id, not_found())?;
    expect_done(s.expect_root()?, &standard_output())
}

fn event(direction: &str, kind: &str) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("direction".into(), json!(direction));
    m.insert("kind".into(), json!(kind));
    m
}

fn request_event(direction: &str, method: Method, operation_id: Option<&str>) -> Value {
    let mut m = event(direction, "request");
    m.insert("method".into(), json!(method.as_str()));
    if let Some(op) = operation_id {
        m.insert("operationId".into(), json!(op));
    }
    Value::Object(m)
}

fn result_event(direction: &str, method: Method, declared: Option<&str>) -> Value {
    let mut m = event(direction, "result");
    m.insert("for".into(), json!(method.as_str()));
    if let Some(d) = declared {
        m.insert("declaredError".into(), json!(d));
    }
    Value::Object(m)
}

/// The one golden conversation, checked frame by frame against
/// `fixtures/golden-trace.json`.
pub fn golden_conversation(c: &Component) -> Step<()> {
    const H2C: &str = "host->component";
    const C2H: &str = "component->host";
    let golden: Value = serde_json::from_str(include_str!("../fixtures/golden-trace.json"))
        .map_err(|e| e.to_string())?;
    let mut trace = Vec::new();
    let mut s = Session::spawn(c)?;
    let input = root_input();

    s.send_root(input.clone())?;
    trace.push(request_event(H2C, Method::FlowRun, None));
    let (research, store) = first_pair(&mut s, &input)?;
    trace.push(request_event(C2H, Method::RunChild, Some("research:1")));
    trace.push(request_event(C2H, Method::CapabilityCall, Some("store:1")));

    s.reply(&store.id, json!({"value": stored_value()}))?;
    trace.push(result_event(H2C, Method::CapabilityCall, None));
    // missing:1 must wait until both first calls settle.
    s.expect_quiet()?;
    s.reply(&research.id, research_result())?;
    trace.push(result_event(H2C, Method::RunChild, None));

    let missing = expect_missing(&mut s)?;
    trace.push(request_event(
        C2H,
        Method::CapabilityCall,
        Some("missing:1"),
    ));
    s.reply(&missing.id, not_found())?;
    trace.push(result_event(H2C, Method::CapabilityCall, Some("not-found")));

    expect_done(s.expect_root()?, &standard_output())?;
    trace.push(result_event(C2H, Method::FlowRun, None));
    expect_eq("trace", &Value::Array(trace), &golden)?;
    s.finish_clean()
}

fn direction_and_request_form(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    s.send(
        &json!({"jsonrpc": "2.0", "id": "host:0", "method": "capability/call", "params": {
        "operationId": "x", "slot": "x", "method": "x", "input": null}}),
    )?;
    let id = s.expect_standard_error(-32601)?;
    ensure(id.as_deref() == Some("host:0"), || {
        format!("-32601 carried id {id:?}")
    })?;
    s.send(
        &json!({"jsonrpc": "2.0", "id": "host:00", "method": "request/cancel",
        "params": {"requestId": "host:0"}}),
    )?;
    s.expect_standard_error(-32601)?;
    s.send(&json!({"jsonrpc": "2.0", "method": "unknown/notice", "params": {}}))?;
    s.send(&json!({"jsonrpc": "2.0", "method": "flow/run", "params": {}}))?;
    s.expect_quiet()?;
    s.send_root(root_input())?;
    // A component-only method while the root is pending: answered, channel goes on.
    s.send(
        &json!({"jsonrpc": "2.0", "id": "host:2", "method": "flow/run-child", "params": {
        "operationId": "x", "slot": "x", "input": null}}),
    )?;
    let (research, store) = {
        // The -32601 may interleave with the first two requests.
        let mut requests = Vec::new();
        let mut answered = false;
        while requests.len() < 2 || !answered {
            match s.recv()? {
                flow::wire::Message::Failure { id, error } if error.code == -32601 => {
                    ensure(id.as_deref() == Some("host:2"), || {
                        format!("-32601 id {id:?}")
                    })?;
                    answered = true;
                }
                flow::wire::Message::Request { id, method, params } => requests.push(Request {
                    id,
                    method: Method::parse(&method).ok_or("unknown method")?,
                    params: params.unwrap_or(Value::Null),
                }),
                other => return Err(format!("unexpected {}", other.to_value())),
            }
        }
        let b = requests.pop().ok_or("missing request")?;
        let a = requests.pop().ok_or("missing request")?;
        if a.operation_id() == "research:1" {
            (a, b)
        } else {
            (b, a)
        }
    };
    s.reply(&store.id, json!({"value": stored_value()}))?;
    s.reply(&research.id, research_result())?;
    let missing = expect_missing(&mut s)?;
    s.reply(&missing.id, not_found())?;
    expect_done(s.expect_root()?, &standard_output())?;
    s.finish_clean()
}

fn invalid_root_params(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let mut root = root_request("host:1", Value::Null);
    root["params"]["runId"] = json!("forbidden");
    s.send(&root)?;
    let id = s.expect_standard_error(-32602)?;
    ensure(id.as_deref() == Some("host:1"), || {
        format!("-32602 carried id {id:?}")
    })?;
    s.expect_closed().map(|_| ())
}

fn second_root(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    s.send_root(root_input())?;
    first_pair(&mut s, &root_input())?;
    s.send(&root_request("host:2", Value::Null))?;
    let id = s.expect_standard_error(-32600)?;
    ensure(id.is_none() || id.as_deref() == Some("host:2"), || {
        format!("-32600 carried id {id:?}")
    })?;
    s.expect_closed().map(|_| ())
}

fn root_cancellation(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    s.send_root(root_input())?;
    let (research, store) = first_pair(&mut s, &root_input())?;
    s.send(
        &json!({"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": "host:1"}}),
    )?;
    let mut cancelled = vec![s.expect_cancel()?, s.expect_cancel()?];
    cancelled.sort();
    let mut open = vec![research.id.clone(), store.id.clone()];
    open.sort();
    ensure(cancelled == open, || {
        format!("cancelled {cancelled:?}, open {open:?}")
    })?;
    s.expect_quiet()?;
    s.reply_error(&store.id, "CANCELLED")?;
    s.expect_quiet()?;
    s.reply(&research.id, research_result())?;
    expect_failed(s.expect_root()?, ErrorCode::Cancelled)?;
    s.finish_clean()
}

fn malformed_root_cancellation(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    s.send_root(root_input())?;
    first_pair(&mut s, &root_input())?;
    s.send(&json!({"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": 42}}))?;
    s.expect_closed().map(|_| ())
}

/// The corpus frame fixtures (`fixtures/framing.json`, a copy of
/// the FLOW reference's `run-1-fixtures/framing.json`), each sent as the first
/// bytes of a fresh component.
const FRAMING_FIXTURES: &str = include_str!("../fixtures/framing.json");

/// What a component must do with one fixture sent before its root (Run/1
/// §1): the standard error it answers (id null) before it closes, or
/// `None` for a silent close. Every fixture in the file has exactly one
/// entry, so a new fixture cannot be skipped unnoticed.
pub const FRAMING_EXPECTATIONS: &[(&str, Option<i64>)] = &[
    // Valid frames and JSON/1 values, but not JSON-RPC envelopes.
    ("empty-object-frame", Some(flow::wire::INVALID_REQUEST)),
    ("unicode-scalar", Some(flow::wire::INVALID_REQUEST)),
    // Complete, LF-terminated, valid UTF-8 frames that fail JSON/1.
    ("empty-frame", Some(flow::wire::PARSE_ERROR)),
    ("utf8-bom", Some(flow::wire::PARSE_ERROR)),
    ("duplicate-member", Some(flow::wire::PARSE_ERROR)),
    ("escaped-lone-surrogate", Some(flow::wire::PARSE_ERROR)),
    ("unsafe-integral-token", Some(flow::wire::PARSE_ERROR)),
    ("two-values-one-frame", Some(flow::wire::PARSE_ERROR)),
    // Invalid UTF-8 and incomplete frames close without a reply.
    ("invalid-utf8", None),
    ("eof-before-line-feed", None),
];

/// One framing fixture: its name and raw bytes.
pub struct FramingFixture {
    pub name: String,
    pub bytes: Vec<u8>,
    /// Listed under `valid` in the fixture file.
    pub valid: bool,
}

/// Every fixture of `fixtures/framing.json`.
pub fn framing_fixtures() -> Step<Vec<FramingFixture>> {
    let file: Value = serde_json::from_str(FRAMING_FIXTURES).map_err(|e| e.to_string())?;
    let mut fixtures = Vec::new();
    for (group, valid) in [("valid", true), ("invalid", false)] {
        for f in file[group]
            .as_array()
            .ok_or("framing.json: no {group} list")?
        {
            let name = f["name"]
                .as_str()
                .ok_or("framing.json: fixture without name")?;
            let hex = f["hex"]
                .as_str()
                .ok_or("framing.json: fixture without hex")?;
            let bytes = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|e| format!("framing.json: {name}: {e}"))?;
            fixtures.push(FramingFixture {
                name: name.to_string(),
                bytes,
                valid,
            });
        }
    }
    Ok(fixtures)
}

/// Every framing fixture, then the extra fatal inputs, before the root.
fn framing_cases(c: &Component) -> Step<()> {
    for fixture in framing_fixtures()? {
        let reply = FRAMING_EXPECTATIONS
            .iter()
            .find(|(name, _)| *name == fixture.name)
            .map(|(_, reply)| *reply)
            .ok_or_else(|| format!("fixture {} has no expectation", fixture.name))?;
        fatal_before_root(c, &fixture.name, &fixture.bytes, reply)?;
    }
    fatal_frames(c)
}

/// Sends `bytes` as the first input, closes stdin, and expects `reply`
/// (with id null) or nothing, then the close.
fn fatal_before_root(c: &Component, name: &str, bytes: &[u8], reply: Option<i64>) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let _ = s.send_raw(bytes);
    s.close_stdin();
    if let Some(code) = reply {
        let id = s
            .expect_standard_error(code)
            .map_err(|e| format!("{name}: {e}"))?;
        ensure(id.is_none(), || {
            format!("{name}: reply id {id:?}, want null")
        })?;
    }
    s.expect_closed().map_err(|e| format!("{name}: {e}"))?;
    Ok(())
}

/// Fatal inputs beyond the fixture file, before the root.
fn fatal_frames(c: &Component) -> Step<()> {
    let cases: [(&str, &[u8], Option<i64>); 4] = [
        ("invalid JSON", b"{\"jsonrpc\":\n", Some(-32700)),
        ("batch", b"[]\n", Some(-32600)),
        ("scalar", b"1\n", Some(-32600)),
        ("EOF inside a frame", b"{\"jsonrpc\"", None),
    ];
    for (name, bytes, reply) in cases {
        fatal_before_root(c, name, bytes, reply)?;
    }
    Ok(())
}

/// The same fatal inputs while the root is pending: no root response.
fn fatal_frames_while_pending(c: &Component) -> Step<()> {
    let cases: [(&str, &[u8], Option<i64>); 4] = [
        ("invalid JSON", b"{\"jsonrpc\":\n", Some(-32700)),
        ("scalar", b"\"x\"\n", Some(-32600)),
        ("invalid UTF-8", b"{\"a\":\"\xff\"}\n", None),
        ("EOF inside a frame", b"{\"jsonrpc\"", None),
    ];
    for (name, bytes, reply) in cases {
        let mut s = Session::spawn(c)?;
        s.send_root(root_input())?;
        first_pair(&mut s, &root_input())?;
        let _ = s.send_raw(bytes);
        s.close_stdin();
        if let Some(code) = reply {
            s.expect_standard_error(code)
                .map_err(|e| format!("{name}: {e}"))?;
        }
        s.expect_closed().map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

/// A root frame of exactly 16,777,216 bytes before LF is served; one byte
/// more closes the channel without a reply.
fn frame_bounds(c: &Component) -> Step<()> {
    let padded = |len: usize| -> Step<Vec<u8>> {
        let mut bytes =
            serde_json::to_vec(&root_request("host:1", root_input())).map_err(|e| e.to_string())?;
        let close = bytes.pop().ok_or("empty")?;
        bytes.resize(len - 1, b' ');
        bytes.push(close);
        bytes.push(b'\n');
        Ok(bytes)
    };
    let mut s = Session::spawn(c)?;
    s.send_raw(&padded(MAX_FRAME_BYTES)?)?;
    serve_standard(&mut s, &root_input()).map_err(|e| format!("exact limit: {e}"))?;
    s.finish_clean()?;

    let mut s = Session::spawn(c)?;
    let _ = s.send_raw(&padded(MAX_FRAME_BYTES + 1)?);
    s.expect_closed().map_err(|e| format!("limit + 1: {e}"))?;

    // Depth: the frame object is 1, params 2, so an input of depth
    // MAX_DEPTH - 2 reaches the limit exactly.
    let nested = |depth: usize| (1..depth).fold(json!([]), |v, _| json!([v]));
    let at_limit = nested(flow::json::MAX_DEPTH - 2);
    let mut s = Session::spawn(c)?;
    s.send_root(at_limit.clone())?;
    serve_standard(&mut s, &at_limit).map_err(|e| format!("depth at limit: {e}"))?;
    s.finish_clean()?;

    let mut s = Session::spawn(c)?;
    s.send_root(nested(flow::json::MAX_DEPTH - 1))?;
    let id = s
        .expect_standard_error(-32700)
        .map_err(|e| format!("depth limit + 1: {e}"))?;
    ensure(id.is_none(), || format!("depth limit + 1: reply id {id:?}"))?;
    s.expect_closed()
        .map_err(|e| format!("depth limit + 1: {e}"))?;
    Ok(())
}

/// `params` must be an object or array (else the envelope is invalid);
/// an array is a valid envelope but invalid `flow/run` params.
fn structured_params(c: &Component) -> Step<()> {
    for (params, code) in [
        (Value::Null, -32600),
        (json!(1), -32600),
        (json!([]), -32602),
    ] {
        let mut s = Session::spawn(c)?;
        s.send(&json!({"jsonrpc": "2.0", "id": "host:1", "method": "flow/run", "params": params}))?;
        let id = s
            .expect_standard_error(code)
            .map_err(|e| format!("params {params}: {e}"))?;
        ensure(id.is_none() || id.as_deref() == Some("host:1"), || {
            format!("params {params}: reply id {id:?}")
        })?;
        s.expect_closed()
            .map_err(|e| format!("params {params}: {e}"))?;
    }
    Ok(())
}

/// Host frames split across writes and coalesced into one write.
fn root_frame_boundaries(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let mut root =
        serde_json::to_vec(&root_request("host:1", root_input())).map_err(|e| e.to_string())?;
    root.push(b'\n');
    let (a, rest) = root.split_at(7);
    let (b, d) = rest.split_at(rest.len() / 2);
    for chunk in [a, b, d] {
        s.send_raw(chunk)?;
        thread::sleep(Duration::from_millis(30));
    }
    let (research, store) = first_pair(&mut s, &root_input())?;
    let mut both = Vec::new();
    for (id, result) in [
        (&store.id, json!({"value": stored_value()})),
        (&research.id, research_result()),
    ] {
        both.extend(
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
                .map_err(|e| e.to_string())?,
        );
        both.push(b'\n');
    }
    s.send_raw(&both)?;
    let missing = expect_missing(&mut s)?;
    let mut last =
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": missing.id, "result": not_found()}))
            .map_err(|e| e.to_string())?;
    last.push(b'\n');
    for byte in last {
        s.send_raw(&[byte])?;
    }
    s.mark_answered(&[&store.id, &research.id, &missing.id]);
    expect_done(s.expect_root()?, &standard_output())?;
    s.finish_clean()
}

/// Closing stdin right after the root response: clean end, exit 0.
fn terminal_half_close(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    s.send_root(root_input())?;
    serve_standard(&mut s, &root_input())?;
    s.finish_clean()
}

/// Each bad response to a well-formed call is fatal for the component.
fn response_failures(c: &Component) -> Step<()> {
    type Bad = fn(&Request, &Request) -> Vec<Value>;
    let cases: [(&str, Bad); 6] = [
        ("unknown id", |_, _| {
            vec![json!({"jsonrpc": "2.0", "id": "component:999", "result": {"value": 1}})]
        }),
        ("duplicate id", |_, store| {
            let r = json!({"jsonrpc": "2.0", "id": store.id, "result": {"value": 1}});
            vec![r.clone(), r]
        }),
        ("child result without output", |research, _| {
            vec![json!({"jsonrpc": "2.0", "id": research.id, "result": {"outcome": "done"}})]
        }),
        ("standard error to a well-formed call", |_, store| {
            vec![
                json!({"jsonrpc": "2.0", "id": store.id, "error": {"code": -32601, "message": "no"}}),
            ]
        }),
        ("capability result with two arms", |_, store| {
            vec![
                json!({"jsonrpc": "2.0", "id": store.id, "result": {"value": 1, "error": {"name": "x", "data": null}}}),
            ]
        }),
        ("capability error without data", |_, store| {
            vec![json!({"jsonrpc": "2.0", "id": store.id, "result": {"error": {"name": "x"}}})]
        }),
    ];
    for (name, bad) in cases {
        let mut s = Session::spawn(c)?;
        s.send_root(root_input())?;
        let (research, store) = first_pair(&mut s, &root_input())?;
        for frame in bad(&research, &store) {
            let _ = s.send(&frame);
        }
        s.expect_closed().map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// matrix component

fn matrix_root(s: &mut Session, case: &str) -> Step<()> {
    s.send_root(json!({"case": case}))
}

fn fanout_65(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    matrix_root(&mut s, "fanout-65")?;
    let mut open = Vec::new();
    for _ in 0..64 {
        open.push(s.expect_request()?);
    }
    s.expect_quiet()
        .map_err(|e| format!("65th request before a slot freed: {e}"))?;
    let first = open.remove(0);
    s.reply(&first.id, json!({"value": null}))?;
    open.push(s.expect_request()?);
    let mut seen = vec![first];
    for r in open {
        s.reply(&r.id, json!({"value": null}))?;
        seen.push(r);
    }
    seen.sort_by_key(|r| r.params["input"]["index"].as_i64());
    for (i, r) in seen.iter().enumerate() {
        expect_method(r, Method::CapabilityCall, &format!("fanout:{}", i + 1))?;
        expect_eq("fanout input", &r.params["input"], &json!({"index": i}))?;
    }
    expect_done(s.expect_root()?, &json!({"settled": 65}))?;
    s.finish_clean()
}

fn request_lifetime(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    matrix_root(&mut s, "request-lifetime")?;
    for i in 1..=65_536u64 {
        let r = s.expect_request()?;
        if i == 1 || i == 65_536 {
            expect_method(&r, Method::CapabilityCall, &format!("lifetime:{i}"))?;
        }
        s.reply(&r.id, json!({"value": null}))?;
    }
    expect_done(
        s.expect_root()?,
        &json!({"accepted": 65_536, "rejected": "RESOURCE_EXHAUSTED"}),
    )?;
    s.finish_clean()
}

fn operation_identity(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    matrix_root(&mut s, "operation-identity")?;
    let v = json!({"token": "shared-1"});
    let a = s.expect_request()?;
    let b = s.expect_request()?;
    for r in [&a, &b] {
        expect_method(r, Method::CapabilityCall, "shared:1")?;
        expect_eq(
            "shared input",
            &r.params["input"],
            &json!({"value": "same"}),
        )?;
    }
    s.reply(&a.id, json!({"value": v}))?;
    s.reply(&b.id, json!({"value": v}))?;
    let replay = s.expect_request()?;
    expect_method(&replay, Method::CapabilityCall, "shared:1")?;
    s.reply(&replay.id, json!({"value": v}))?;
    let conflict = s.expect_request()?;
    expect_eq(
        "conflict input",
        &conflict.params["input"],
        &json!({"value": "different"}),
    )?;
    s.reply_error(&conflict.id, "OPERATION_CONFLICT")?;
    expect_done(
        s.expect_root()?,
        &json!({"first": v, "second": v, "replay": v, "conflict": "OPERATION_CONFLICT"}),
    )?;
    s.finish_clean()
}

fn cancel_shared_waiter(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    matrix_root(&mut s, "cancel-shared-waiter")?;
    let first = s.expect_request()?;
    let second = s.expect_request()?;
    expect_method(&first, Method::CapabilityCall, "shared-cancel:1")?;
    expect_method(&second, Method::CapabilityCall, "shared-cancel:1")?;
    let release = s.expect_request()?;
    expect_method(&release, Method::CapabilityCall, "release-shared-cancel:1")?;
    s.reply(&release.id, json!({"value": null}))?;
    let target = s.expect_cancel()?;
    ensure(target == first.id, || {
        format!("cancelled {target}, want {}", first.id)
    })?;
    s.reply_error(&first.id, "CANCELLED")?;
    s.reply(&second.id, json!({"value": "shared-result"}))?;
    expect_done(
        s.expect_root()?,
        &json!({"cancellation": "CANCELLED", "survivor": "shared-result"}),
    )?;
    s.finish_clean()
}

fn uncertain_replay(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    matrix_root(&mut s, "uncertain-replay")?;
    for op in ["uncertain:1", "uncertain:1"] {
        let r = s.expect_request()?;
        expect_method(&r, Method::CapabilityCall, op)?;
        s.reply_error(&r.id, "UNCERTAIN")?;
    }
    let fresh = s.expect_request()?;
    expect_method(&fresh, Method::CapabilityCall, "uncertain:2")?;
    s.reply(&fresh.id, json!({"value": "fresh"}))?;
    expect_done(
        s.expect_root()?,
        &json!({"first": "UNCERTAIN", "replay": "UNCERTAIN", "fresh": "fresh"}),
    )?;
    s.finish_clean()
}

/// The shared start of `cancel-one-call` and `abandoned-call`: the case
/// opens a child call, asks `control` to release, then cancels the child
/// call. Returns the child request, which is still unanswered.
fn child_cancelled_after_release(
    s: &mut Session,
    case: &str,
    child_op: &str,
    release_op: &str,
) -> Step<Request> {
    matrix_root(s, case)?;
    let child = s.expect_request()?;
    expect_method(&child, Method::RunChild, child_op)?;
    let release = s.expect_request()?;
    expect_method(&release, Method::CapabilityCall, release_op)?;
    s.reply(&release.id, json!({"value": null}))?;
    let target = s.expect_cancel()?;
    ensure(target == child.id, || {
        format!("cancelled {target}, want {}", child.id)
    })?;
    Ok(child)
}

fn cancel_one_call(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let child = child_cancelled_after_release(
        &mut s,
        "cancel-one-call",
        "cancelled-child:1",
        "release-cancel:1",
    )?;
    // The root waits for the cancelled request to settle.
    s.expect_quiet()?;
    s.reply(&child.id, json!({"outcome": "done", "output": "late"}))?;
    expect_done(s.expect_root()?, &json!("cancelled-locally"))?;
    s.finish_clean()
}

fn abandoned_call(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let child = child_cancelled_after_release(
        &mut s,
        "abandoned-call",
        "abandoned-child:1",
        "release-abandon:1",
    )?;
    s.reply_error(&child.id, "CANCELLED")?;
    expect_failed(s.expect_root()?, ErrorCode::ExecutionFailed)?;
    s.finish_clean()
}

fn one_flow(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    matrix_root(&mut s, "one-flow")?;
    let child = s.expect_request()?;
    expect_method(&child, Method::RunChild, "child:1")?;
    expect_eq(
        "child:1 params",
        &child.params,
        &json!({"operationId": "child:1", "slot": "child", "input": null}),
    )?;
    let result = json!({"outcome": "finished", "output": {"n": 1}});
    s.reply(&child.id, result.clone())?;
    expect_done(s.expect_root()?, &result)?;
    s.finish_clean()
}

fn two_effects(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    matrix_root(&mut s, "two-effects")?;
    for (op, n) in [("first:1", 1), ("second:1", 2)] {
        let r = s.expect_request()?;
        expect_method(&r, Method::CapabilityCall, op)?;
        expect_eq("input", &r.params["input"], &json!({"sequence": n}))?;
        s.reply(&r.id, json!({"value": n * 10}))?;
    }
    expect_done(s.expect_root()?, &json!({"first": 10, "second": 20}))?;
    s.finish_clean()
}

// ---------------------------------------------------------------------------
// channels and broadcast components

const WRITER: &str = "chan:1:send";
const READER: &str = "chan:1:receive";

fn direct_pair() -> Value {
    json!({
        "send": {"endpoint": WRITER, "direction": "send", "delivery": "direct"},
        "receive": {"endpoint": READER, "direction": "receive", "delivery": "direct", "startSequence": 1},
    })
}

fn item(sequence: u64, value: Value) -> Value {
    json!({"item": {"sequence": sequence, "value": value}})
}

/// Creation, then the worker call and the first read in either order.
fn open_direct(s: &mut Session) -> Step<(Request, Request)> {
    s.send_root(json!({"task": "count"}))?;
    let create = s.expect_request()?;
    ensure(create.method == Method::ChannelCreate, || {
        format!("expected channel/create, got {}", create.method.as_str())
    })?;
    expect_eq("channel/create params", &create.params, &json!({}))?;
    s.reply(&create.id, direct_pair())?;
    let a = s.expect_request()?;
    let b = s.expect_request()?;
    let (call, read) = if a.method == Method::CapabilityCall {
        (a, b)
    } else {
        (b, a)
    };
    expect_method(&call, Method::CapabilityCall, "answer")?;
    expect_eq(
        "answer params",
        &call.params,
        &json!({"operationId": "answer", "slot": "worker", "method": "run",
                "input": {"task": "count"}, "channels": {"events": WRITER}}),
    )?;
    ensure(read.method == Method::ChannelNext, || {
        format!("expected channel/next, got {}", read.method.as_str())
    })?;
    expect_eq(
        "channel/next params",
        &read.params,
        &json!({"endpoint": READER}),
    )?;
    Ok((call, read))
}

fn expect_next(s: &mut Session, endpoint: &str) -> Step<Request> {
    let r = s.expect_request()?;
    ensure(
        r.method == Method::ChannelNext && r.params == json!({"endpoint": endpoint}),
        || {
            format!(
                "expected channel/next on {endpoint}, got {} {}",
                r.method.as_str(),
                r.params
            )
        },
    )?;
    Ok(r)
}

fn channel_direct_drain(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let (call, read) = open_direct(&mut s)?;
    s.reply(&read.id, item(1, json!("a")))?;
    let read = expect_next(&mut s, READER)?;
    s.reply(&read.id, item(2, json!({"b": 2})))?;
    let read = expect_next(&mut s, READER)?;
    s.reply(&read.id, json!({"end": {"lastSequence": 2}}))?;
    // One read at a time and no prefetch: nothing more until the call settles.
    s.expect_quiet()?;
    s.reply(&call.id, json!({"value": {"answered": true}}))?;
    expect_done(
        s.expect_root()?,
        &json!({"complete": true, "values": ["a", {"b": 2}], "work": {"answered": true}}),
    )?;
    s.finish_clean()
}

/// A failed read settles its receiver (Run/1 §5.1): the host already holds
/// the sticky cause, and the channels component does not close the
/// receiver, so the next thing the host sees is the component's next request
/// or its root result, never a `channel/release` of that receiver. The
/// handler sees `LAGGED` (`complete: false`) and the Run succeeds with the
/// values read before it.
fn channel_direct_lagged(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let (call, read) = open_direct(&mut s)?;
    s.reply(&read.id, item(1, json!("a")))?;
    let read = expect_next(&mut s, READER)?;
    s.reply_error(&read.id, "LAGGED")?;
    // The call is still open: nothing to send until it settles.
    s.expect_quiet()
        .map_err(|e| format!("after the failed read: {e}"))?;
    s.reply(&call.id, json!({"value": null}))?;
    expect_done(
        s.expect_root()
            .map_err(|e| format!("after the failed read: {e}"))?,
        &json!({"complete": false, "values": ["a"], "work": null}),
    )?;
    s.finish_clean()
}

/// Root cancellation while a read is active: the open call gets one
/// `request/cancel`, the cancelled read disposes its receiver (one
/// `channel/release`; a `request/cancel` for the read itself is allowed),
/// and the root fails `CANCELLED` once everything settled.
fn channel_direct_cancelled_read(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let (call, read) = open_direct(&mut s)?;
    s.send(
        &json!({"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": "host:1"}}),
    )?;
    let mut call_cancels = 0;
    let mut read_cancels = 0;
    let mut release: Option<Request> = None;
    loop {
        let settled = call_cancels > 0 && release.is_some();
        let message = if settled {
            match s.poll(QUIET_WINDOW)? {
                Some(m) => m,
                None => break,
            }
        } else {
            s.recv()?
        };
        match message {
            flow::wire::Message::Notification { method, params } if method == "request/cancel" => {
                let target = params.as_ref().and_then(|p| p["requestId"].as_str());
                match target {
                    Some(t) if t == call.id => call_cancels += 1,
                    Some(t) if t == read.id => read_cancels += 1,
                    _ => return Err(format!("request/cancel for {params:?}")),
                }
            }
            flow::wire::Message::Request { id, method, params }
                if method == "channel/release"
                    && params == Some(json!({"endpoint": READER}))
                    && release.is_none() =>
            {
                release = Some(Request {
                    id,
                    method: Method::ChannelRelease,
                    params: json!({"endpoint": READER}),
                });
            }
            other => {
                return Err(format!(
                    "after root cancellation: unexpected {}",
                    other.to_value()
                ))
            }
        }
    }
    ensure(call_cancels == 1 && read_cancels <= 1, || {
        format!("{call_cancels} cancels of the call, {read_cancels} of the read")
    })?;
    let release = release.ok_or("no channel/release for the cancelled read")?;
    s.reply_error(&call.id, "CANCELLED")?;
    s.reply_error(&read.id, "CANCELLED")?;
    s.reply(&release.id, json!({"status": "released"}))?;
    expect_failed(s.expect_root()?, ErrorCode::Cancelled)?;
    s.finish_clean()
}

fn channel_sequence_gap(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let (_call, read) = open_direct(&mut s)?;
    // Receivers validate a contiguous interval from startSequence.
    s.reply(&read.id, item(2, json!("skipped one")))?;
    s.expect_closed().map(|_| ())
}

/// The broadcast component up to its reads: creation, the `early`
/// subscription, `"before-late"`, the `late` subscription, `"after-late"`,
/// and the writer closed.
fn open_broadcast(s: &mut Session) -> Step<()> {
    s.send_root(Value::Null)?;
    let create = expect_request_with(s, Method::ChannelCreate, &json!({"delivery": "broadcast"}))?;
    s.reply(
        &create.id,
        json!({"send": {"endpoint": "b:send", "direction": "send", "delivery": "broadcast"},
                          "source": "b:source"}),
    )?;
    let receiver = |endpoint: &str, start: u64| json!({"endpoint": endpoint, "direction": "receive", "delivery": "broadcast", "startSequence": start});
    let subscribe = json!({"source": "b:source"});
    let r = expect_request_with(s, Method::ChannelSubscribe, &subscribe)?;
    s.reply(&r.id, receiver("b:early", 1))?;
    let r = expect_request_with(
        s,
        Method::ChannelSend,
        &json!({"endpoint": "b:send", "value": "before-late"}),
    )?;
    s.reply(&r.id, Value::Null)?;
    let r = expect_request_with(s, Method::ChannelSubscribe, &subscribe)?;
    s.reply(&r.id, receiver("b:late", 2))?;
    let r = expect_request_with(
        s,
        Method::ChannelSend,
        &json!({"endpoint": "b:send", "value": "after-late"}),
    )?;
    s.reply(&r.id, Value::Null)?;
    let r = expect_request_with(s, Method::ChannelClose, &json!({"endpoint": "b:send"}))?;
    s.reply(&r.id, Value::Null)
}

fn channel_broadcast(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    open_broadcast(&mut s)?;

    let mut early = vec![
        item(1, json!("before-late")),
        item(2, json!("after-late")),
        json!({"end": {"lastSequence": 2}}),
    ];
    let mut late = vec![
        item(2, json!("after-late")),
        json!({"end": {"lastSequence": 2}}),
    ];
    early.reverse();
    late.reverse();
    while !early.is_empty() || !late.is_empty() {
        let r = s.expect_request()?;
        let endpoint = r.params["endpoint"].as_str().unwrap_or("");
        let script = match (r.method, endpoint) {
            (Method::ChannelNext, "b:early") => &mut early,
            (Method::ChannelNext, "b:late") => &mut late,
            _ => return Err(format!("unexpected {} {}", r.method.as_str(), r.params)),
        };
        let answer = script
            .pop()
            .ok_or_else(|| format!("read past the end of {endpoint}"))?;
        s.reply(&r.id, answer)?;
    }
    expect_done(
        s.expect_root()?,
        &json!({
            "early": {"start": 1, "values": ["before-late", "after-late"], "complete": true},
            "late": {"start": 2, "values": ["after-late"], "complete": true},
        }),
    )?;
    s.finish_clean()
}

/// One broadcast reader lags while the other completes. The lagging
/// reader's failed read settles it (Run/1 §5.1): no further read and no
/// `channel/release` for it, also while the other reader is still open,
/// and the Run succeeds with both views (`complete: false` for the one that
/// lagged, with the value it read first).
fn channel_broadcast_lagged_subscriber(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    open_broadcast(&mut s)?;
    let mut early: VecDeque<Result<Value, &str>> =
        VecDeque::from([Ok(item(1, json!("before-late"))), Err("LAGGED")]);
    let mut late = VecDeque::from([
        item(2, json!("after-late")),
        json!({"end": {"lastSequence": 2}}),
    ]);
    let after = |e: String| format!("after b:early failed LAGGED: {e}");
    // Until b:early fails, both readers are answered as they read; b:late's
    // last read waits, so b:late is still open when b:early fails.
    let mut parked: Option<String> = None;
    while !early.is_empty() {
        let r = s.expect_request()?;
        let endpoint = r.params["endpoint"].as_str().unwrap_or("");
        match (r.method, endpoint) {
            (Method::ChannelNext, "b:early") => match early.pop_front().ok_or("no answer")? {
                Ok(answer) => s.reply(&r.id, answer)?,
                Err(code) => s.reply_error(&r.id, code)?,
            },
            (Method::ChannelNext, "b:late") if parked.is_none() && late.len() == 1 => {
                parked = Some(r.id);
            }
            (Method::ChannelNext, "b:late") if parked.is_none() => {
                let answer = late.pop_front().ok_or("read past the end of b:late")?;
                s.reply(&r.id, answer)?;
            }
            _ => return Err(format!("unexpected {} {}", r.method.as_str(), r.params)),
        }
    }
    // b:early failed: only b:late's reads may follow, and nothing more comes
    // while its last read is still open.
    let last = loop {
        let id = match parked.take() {
            Some(id) => id,
            None => {
                let r = s.expect_request().map_err(after)?;
                ensure(
                    r.method == Method::ChannelNext && r.params == json!({"endpoint": "b:late"}),
                    || after(format!("unexpected {} {}", r.method.as_str(), r.params)),
                )?;
                r.id
            }
        };
        if late.len() == 1 {
            break id;
        }
        let answer = late.pop_front().ok_or("read past the end of b:late")?;
        s.reply(&id, answer)?;
    };
    s.expect_quiet().map_err(after)?;
    let end = late.pop_front().ok_or("b:late has no end")?;
    s.reply(&last, end)?;
    expect_done(
        s.expect_root()?,
        &json!({
            "early": {"start": 1, "values": ["before-late"], "complete": false},
            "late": {"start": 2, "values": ["after-late"], "complete": true},
        }),
    )?;
    s.finish_clean()
}

// ---------------------------------------------------------------------------
// channel-wiring component: each role on its own, the runner answering as
// the host would (the children of the root are answered with scripted
// complete results, not run).

fn grant(endpoint: &str, direction: &str) -> Value {
    let mut g = json!({"endpoint": endpoint, "direction": direction, "delivery": "direct"});
    if direction == "receive" {
        g["startSequence"] = json!(1);
    }
    g
}

/// Sends a root `flow/run` whose invocation holds `channels`.
fn send_root_with_channels(s: &mut Session, input: Value, channels: Value) -> Step<()> {
    let mut root = root_request("host:1", input);
    root["params"]["channels"] = channels;
    s.send(&root)
}

fn expect_request_with(s: &mut Session, method: Method, params: &Value) -> Step<Request> {
    let r = s.expect_request()?;
    ensure(r.method == method && &r.params == params, || {
        format!(
            "expected {} {params}, got {} {}",
            method.as_str(),
            r.method.as_str(),
            r.params
        )
    })?;
    Ok(r)
}

/// The root up to its two concurrent children, returned as (worker, monitor).
fn wiring_root_children(
    s: &mut Session,
    input: Value,
    channels: Value,
    monitor_channels: Value,
) -> Step<(Request, Request)> {
    let stop = input.get("stop").cloned().unwrap_or(json!(false));
    send_root_with_channels(s, input, channels)?;
    let create = expect_request_with(
        s,
        Method::ChannelCreate,
        &json!({"contract": "./updates.json"}),
    )?;
    let mut pair = json!({"send": grant("u:w", "send"), "receive": grant("u:r", "receive")});
    pair["send"]["contract"] = json!({"id": "https://example.org/contracts/updates",
        "version": "1.0.0", "digest": format!("sha256:{}", "0".repeat(64))});
    pair["receive"]["contract"] = pair["send"]["contract"].clone();
    s.reply(&create.id, pair)?;
    let incompatible = expect_request_with(
        s,
        Method::RunChild,
        &json!({"operationId": "incompatible", "slot": "incompatible", "input": null,
                "channels": {"events": "u:w"}}),
    )?;
    s.reply_error(&incompatible.id, "INVALID_INPUT")?;
    let a = s.expect_request()?;
    let b = s.expect_request()?;
    let (worker, monitor) = if a.operation_id() == "worker" {
        (a, b)
    } else {
        (b, a)
    };
    expect_eq(
        "worker params",
        &worker.params,
        &json!({"operationId": "worker", "slot": "worker", "input": {"role": "worker"},
                "channels": {"events": "u:w"}}),
    )?;
    expect_eq(
        "monitor params",
        &monitor.params,
        &json!({"operationId": "monitor", "slot": "monitor",
                "input": {"role": "monitor", "stop": stop}, "channels": monitor_channels}),
    )?;
    ensure(worker.method == Method::RunChild, || {
        "worker is not a flow/run-child".into()
    })?;
    ensure(monitor.method == Method::RunChild, || {
        "monitor is not a flow/run-child".into()
    })?;
    Ok((worker, monitor))
}

fn wiring_root(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let (worker, monitor) = wiring_root_children(
        &mut s,
        json!({"role": "root"}),
        json!({}),
        json!({"events": "u:r"}),
    )?;
    let work = json!({"outcome": "done", "output": "answer"});
    let seen = json!({"outcome": "done", "output": {"complete": true, "selected": ["a"]}});
    s.reply(&monitor.id, seen.clone())?;
    s.reply(&worker.id, work.clone())?;
    expect_done(
        s.expect_root()?,
        &json!({"incompatible": true, "work": work, "monitor": seen}),
    )?;
    s.finish_clean()
}

fn wiring_root_progress(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    let (worker, monitor) = wiring_root_children(
        &mut s,
        json!({"role": "root", "stop": true}),
        json!({"progress": grant("p:w", "send")}),
        json!({"events": "u:r", "progress": "p:w"}),
    )?;
    // A failed child fails the root once both settled.
    s.reply_error(&worker.id, "UNAVAILABLE")?;
    s.expect_quiet()?;
    let seen = json!({"outcome": "done", "output": {"complete": false, "selected": []}});
    s.reply(&monitor.id, seen)?;
    expect_failed(s.expect_root()?, ErrorCode::Unavailable)?;
    s.finish_clean()
}

fn wiring_worker(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    send_root_with_channels(
        &mut s,
        json!({"role": "worker"}),
        json!({"events": grant("e:w", "send")}),
    )?;
    let call = expect_request_with(
        &mut s,
        Method::CapabilityCall,
        &json!({"operationId": "answer", "slot": "agent", "method": "run", "input": null,
                "channels": {"events": "e:w"}}),
    )?;
    s.reply(&call.id, json!({"value": {"answer": 42}}))?;
    expect_done(s.expect_root()?, &json!({"answer": 42}))?;
    s.finish_clean()
}

/// Answers the monitor's reads of `e:r` with `items` in order.
fn feed_monitor(s: &mut Session, items: &[Value]) -> Step<()> {
    for answer in items {
        let read = expect_request_with(s, Method::ChannelNext, &json!({"endpoint": "e:r"}))?;
        s.reply(&read.id, answer.clone())?;
    }
    Ok(())
}

fn wiring_monitor_drain(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    send_root_with_channels(
        &mut s,
        json!({"role": "monitor", "stop": false}),
        json!({"events": grant("e:r", "receive"), "progress": grant("p:w", "send")}),
    )?;
    // Each kept text is forwarded before the next read (one read at a time).
    let mut forwarded = Vec::new();
    let mut script = vec![
        item(1, json!({"text": "a", "kind": "note"})),
        item(2, json!("plain")),
        item(3, json!({"other": 1})),
        item(4, json!({"text": "b"})),
        json!({"end": {"lastSequence": 4}}),
    ];
    script.reverse();
    loop {
        let r = s.expect_request()?;
        match r.method {
            Method::ChannelNext => {
                let answer = script.pop().ok_or("read past the end of e:r")?;
                s.reply(&r.id, answer)?;
            }
            Method::ChannelSend => {
                forwarded.push(r.params.clone());
                s.reply(&r.id, Value::Null)?;
            }
            Method::ChannelClose => {
                expect_eq("close params", &r.params, &json!({"endpoint": "p:w"}))?;
                s.reply(&r.id, Value::Null)?;
                break;
            }
            other => return Err(format!("unexpected {} {}", other.as_str(), r.params)),
        }
    }
    expect_eq(
        "forwarded progress",
        &json!(forwarded),
        &json!([{"endpoint": "p:w", "value": "a"}, {"endpoint": "p:w", "value": "b"}]),
    )?;
    expect_done(
        s.expect_root()?,
        &json!({"complete": true, "selected": ["a", "b"]}),
    )?;
    s.finish_clean()
}

fn wiring_monitor_stop(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    send_root_with_channels(
        &mut s,
        json!({"role": "monitor", "stop": true}),
        json!({"events": grant("e:r", "receive"), "progress": grant("p:w", "send")}),
    )?;
    feed_monitor(&mut s, &[item(1, json!({"text": "hello", "kind": "note"}))])?;
    let send = expect_request_with(
        &mut s,
        Method::ChannelSend,
        &json!({"endpoint": "p:w", "value": "hello"}),
    )?;
    s.reply(&send.id, Value::Null)?;
    let release = expect_request_with(&mut s, Method::ChannelRelease, &json!({"endpoint": "e:r"}))?;
    s.reply(&release.id, json!({"status": "released"}))?;
    let close = expect_request_with(&mut s, Method::ChannelClose, &json!({"endpoint": "p:w"}))?;
    s.reply(&close.id, Value::Null)?;
    expect_done(
        s.expect_root()?,
        &json!({"complete": false, "selected": ["hello"]}),
    )?;
    s.finish_clean()
}

/// The monitor reads `events` inside its scope (Python's `async with`),
/// meets `LAGGED` and leaves the scope: closing the receiver sends exactly
/// one `channel/release`, answered with the failure the host recorded, and
/// the root result (`complete: false`) follows it. Unlike the channels
/// component, which never closes its failed receiver (and so sends nothing).
fn wiring_monitor_lagged(c: &Component) -> Step<()> {
    let mut s = Session::spawn(c)?;
    send_root_with_channels(
        &mut s,
        json!({"role": "monitor"}),
        json!({"events": grant("e:r", "receive")}),
    )?;
    feed_monitor(&mut s, &[item(1, json!({"text": "kept"}))])?;
    let read = expect_request_with(&mut s, Method::ChannelNext, &json!({"endpoint": "e:r"}))?;
    s.reply_error(&read.id, "LAGGED")?;
    let release = expect_request_with(&mut s, Method::ChannelRelease, &json!({"endpoint": "e:r"}))
        .map_err(|e| format!("after the failed read: {e}"))?;
    // The close waits for the release's answer.
    s.expect_quiet()
        .map_err(|e| format!("before the release's answer: {e}"))?;
    s.reply(&release.id, json!({"status": "failed", "code": "LAGGED"}))?;
    // One release: the root result comes next.
    expect_done(
        s.expect_root()
            .map_err(|e| format!("after the failed read: {e}"))?,
        &json!({"complete": false, "selected": ["kept"]}),
    )?;
    s.finish_clean()
}

/// The root, worker and monitor as three processes of the same component,
/// with the runner as their host: it runs the root's `worker` and `monitor`
/// children as new sessions granted the root's channel endpoints, keeps the
/// channel itself (a direct queue with one parked read), plays the worker's
/// `agent` capability (which writes three items and closes the channel),
/// and answers each child call with that child's complete root result.
fn wiring_hosted(c: &Component) -> Step<()> {
    const POLL: Duration = Duration::from_millis(5);
    let mut root = Session::spawn(c)?;
    let (worker_call, monitor_call) = wiring_root_children(
        &mut root,
        json!({"role": "root"}),
        json!({}),
        json!({"events": "u:r"}),
    )?;
    let mut worker = Some(Session::spawn(c)?);
    let mut monitor = Some(Session::spawn(c)?);
    if let Some(w) = worker.as_mut() {
        send_root_with_channels(
            w,
            json!({"role": "worker"}),
            json!({"events": grant("u:w", "send")}),
        )?;
    }
    if let Some(m) = monitor.as_mut() {
        send_root_with_channels(
            m,
            json!({"role": "monitor", "stop": false}),
            json!({"events": grant("u:r", "receive")}),
        )?;
    }

    // The channel u:w -> u:r as the host keeps it.
    let mut queue: VecDeque<Value> = VecDeque::new();
    let mut written = 0u64;
    let mut closed = false;
    let mut parked_read: Option<String> = None;
    let started = Instant::now();
    loop {
        ensure(started.elapsed() < STEP_TIMEOUT, || {
            format!("the wired Run did not settle within {STEP_TIMEOUT:?}")
        })?;
        if let Some(w) = worker.as_mut() {
            match w.poll(POLL).map_err(|e| format!("worker: {e}"))? {
                None => {}
                Some(flow::wire::Message::Request { id, method, params }) => {
                    let want = json!({"operationId": "answer", "slot": "agent", "method": "run",
                                      "input": null, "channels": {"events": "u:w"}});
                    ensure(
                        method == "capability/call" && params.as_ref() == Some(&want),
                        || format!("worker: unexpected {method} {params:?}"),
                    )?;
                    // The agent writes through the lent endpoint, then closes it.
                    for v in [
                        json!({"text": "first"}),
                        json!("noise"),
                        json!({"text": "second"}),
                    ] {
                        written += 1;
                        queue.push_back(item(written, v));
                    }
                    closed = true;
                    w.reply(&id, json!({"value": "answered"}))?;
                }
                Some(other) => {
                    let result = wired_child_result(other, "worker")?;
                    root.reply(&worker_call.id, result)?;
                    w.finish_clean().map_err(|e| format!("worker: {e}"))?;
                    worker = None;
                }
            }
        }
        if let Some(m) = monitor.as_mut() {
            match m.poll(POLL).map_err(|e| format!("monitor: {e}"))? {
                None => {}
                Some(flow::wire::Message::Request { id, method, params }) => {
                    ensure(
                        method == "channel/next" && params == Some(json!({"endpoint": "u:r"})),
                        || format!("monitor: unexpected {method} {params:?}"),
                    )?;
                    ensure(parked_read.is_none(), || {
                        "monitor: a second read while one is outstanding".into()
                    })?;
                    parked_read = Some(id);
                }
                Some(other) => {
                    let result = wired_child_result(other, "monitor")?;
                    root.reply(&monitor_call.id, result)?;
                    m.finish_clean().map_err(|e| format!("monitor: {e}"))?;
                    monitor = None;
                }
            }
            if let (Some(m), Some(read)) = (monitor.as_mut(), parked_read.as_ref()) {
                let answer = match queue.pop_front() {
                    Some(next) => Some(next),
                    None if closed => Some(json!({"end": {"lastSequence": written}})),
                    None => None,
                };
                if let Some(answer) = answer {
                    m.reply(read, answer)?;
                    parked_read = None;
                }
            }
        }
        if worker.is_none() && monitor.is_none() {
            break;
        }
    }
    expect_done(
        root.expect_root()?,
        &json!({
            "incompatible": true,
            "work": {"outcome": "done", "output": "answered"},
            "monitor": {"outcome": "done", "output": {"complete": true, "selected": ["first", "second"]}},
        }),
    )?;
    root.finish_clean()
}

/// A child session's root response as the complete result its parent gets.
fn wired_child_result(message: flow::wire::Message, role: &str) -> Step<Value> {
    match message {
        flow::wire::Message::Success { id, result } if id == "host:1" => {
            RunResult::from_value(&result)
                .map(|r| r.to_value())
                .map_err(|e| format!("{role}: root result: {e}"))
        }
        other => Err(format!(
            "{role}: expected its root response, got {}",
            other.to_value()
        )),
    }
}
