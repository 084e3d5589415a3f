//! Run/1 §5.1 channels served by the host, driven through `jig exec` with the
//! Python SDK's conformance components and with raw frames.

use std::path::Path;

use jig_engine::exec::channels::{
    BROADCAST_QUEUE_CAPACITY, DIRECT_QUEUE_CAPACITY, MAX_ALLOCATIONS, MAX_ITEM_BYTES,
    MAX_PENDING_SENDS,
};
use serde_json::{json, Value};

use crate::support::*;

fn component(name: &str) -> String {
    std::fs::read_to_string(workspace().join(format!("host/python/tests/components/{name}.py")))
        .unwrap()
}

/// A package `dir` with `FLOW.md` (frontmatter lines after name and
/// description) and `flow.py`.
fn package(root: &Path, dir: &str, frontmatter: &str, flow_py: &str) {
    write_files(
        root,
        &[
            (
                &format!("{dir}/FLOW.md"),
                &format!(
                    "---\nname: {dir}\ndescription: A channel test component.\n{frontmatter}---\n"
                ),
            ),
            (&format!("{dir}/flow.py"), flow_py),
        ],
    );
}

fn exec(dir: &Path, name: &str, input: &str, extra: &[&str]) -> Run {
    let mut args = vec!["exec", name, "--json", "--timeout", "30s", "--input", input];
    args.extend_from_slice(extra);
    run_jig(dir, &args)
}

/// `jig exec root --receive events` running, its stdout and stderr piped
/// for the test to read (or, on purpose, not to read).
fn spawn_receiving_root(dir: &Path) -> std::process::Child {
    use std::process::Stdio;
    jig(dir)
        .args([
            "exec",
            "root",
            "--json",
            "--timeout",
            "60s",
            "--receive",
            "events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The Run of `child`, whose stdout the test took and read to `stdout`.
fn finished(child: std::process::Child, stdout: String) -> Run {
    let rest = child.wait_with_output().unwrap();
    Run {
        status: rest.status.code().unwrap_or(-1),
        stdout,
        stderr: String::from_utf8_lossy(&rest.stderr).into_owned(),
    }
}

fn output(run: &Run) -> Value {
    assert_eq!(run.status, 0, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["status"], "succeeded", "{run:?}");
    terminal["output"].clone()
}

#[test]
fn broadcast_scenario_late_reader_sees_only_later_items() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "broadcast", "", &component("broadcast"));
    let run = exec(dir.path(), "broadcast", "null", &[]);
    assert_eq!(
        output(&run),
        json!({
            "early": {"start": 1, "values": ["before-late", "after-late"], "complete": true},
            "late": {"start": 2, "values": ["after-late"], "complete": true},
        })
    );
}

const WORKER_USES: &str = "uses:\n  worker:\n    contract: ./contracts/worker.capability.json\n";

/// The scenario provider in `kind` form (`native` or `wasm`).
fn scenario_provider(kind: &str) -> std::path::PathBuf {
    match kind {
        "native" => scenario_provider_library(),
        _ => scenario_provider_component(),
    }
}

/// A package `dir` whose `uses` binds slot `worker` to the example worker
/// contract, with the scenario provider of `kind` configured in `root`.
fn worker_caller(root: &Path, dir: &str, flow_py: &str, kind: &str) {
    package(root, dir, WORKER_USES, flow_py);
    let contract = std::fs::read_to_string(
        workspace().join("providers/examples/contracts/worker.capability.json"),
    )
    .unwrap();
    write_files(
        root,
        &[(
            &format!("{dir}/contracts/worker.capability.json"),
            &contract,
        )],
    );
    configure_provider(root, "scenario", kind, &scenario_provider(kind));
}

#[test]
fn channels_scenario_provider_writes_the_callers_channel() {
    for kind in ["native", "wasm"] {
        let dir = tempfile::tempdir().unwrap();
        worker_caller(dir.path(), "channels", &component("channels"), kind);
        let run = exec(dir.path(), "channels", "{\"task\":\"t\"}", &[]);
        let step = |n: u64| json!({"step": n, "input": {"task": "t"}});
        assert_eq!(
            output(&run),
            json!({"complete": true, "values": [step(1), step(2), step(3)], "work": {"steps": 3}}),
            "{kind}"
        );
    }
}

#[test]
fn the_rust_channels_example_reads_what_the_provider_writes() {
    let built =
        cargo_build(&["-p", "flow-sdk", "--example", "channels"]).join("debug/examples/channels");
    for kind in ["native", "wasm"] {
        let dir = tempfile::tempdir().unwrap();
        worker_caller(dir.path(), "channels", "", kind);
        std::fs::remove_file(dir.path().join("channels/flow.py")).unwrap();
        std::fs::copy(&built, dir.path().join("channels/flow.bin")).unwrap();
        let run = exec(dir.path(), "channels", "{\"task\":\"r\"}", &[]);
        let step = |n: u64| json!({"step": n, "input": {"task": "r"}});
        assert_eq!(
            output(&run),
            json!({"complete": true, "values": [step(1), step(2), step(3)], "work": {"steps": 3}}),
            "{kind}"
        );
    }
}

const PROVIDER_MAPPINGS: &str = r#"
def worker(op, channels, input=None):
    return call('capability/call', {'operationId': op, 'slot': 'worker', 'method': 'run', 'input': input, 'channels': channels})
s, r, _ = pair()
out['undeclaredPort'] = worker('a', {'events': s, 'extra': r})
out['wrongDirection'] = worker('b', {'events': r})
out['requiredMissing'] = worker('c', {})
out['copiedToken'] = worker('d', {'events': 'ch-999999'})
out['writerStayed'] = call('channel/send', {'endpoint': s, 'value': 'mine'})
out['readerStayed'] = call('channel/next', {'endpoint': r})
out['usedWriter'] = worker('e', {'events': s})
s, r, _ = pair()
out['healthy'] = worker('f', {'events': s}, 'ok')
out['afterHealthy'] = [call('channel/next', {'endpoint': r}) for _ in range(4)]
s, r, _ = pair()
out['failing'] = worker('g', {'events': s}, {'fail': True})
out['afterFailing'] = call('channel/next', {'endpoint': r})
s, r, _ = pair(schema={'type': 'string'})
out['itemRefused'] = worker('h', {'events': s}, 'ok')
out['afterRefused'] = call('channel/next', {'endpoint': r})
s, r, _ = pair(contract='./updates.json')
out['namedSource'] = worker('i', {'events': s}, 'ok')
"#;

#[test]
fn provider_channel_mappings_are_validated_and_settled_with_the_call() {
    for kind in ["native", "wasm"] {
        let dir = tempfile::tempdir().unwrap();
        worker_caller(dir.path(), "raw", &raw(PROVIDER_MAPPINGS), kind);
        write_files(dir.path(), &[("raw/updates.json", UPDATES)]);
        let run = exec(dir.path(), "raw", "null", &[]);
        let step = |n: u64| json!({"item": {"sequence": n, "value": {"step": n, "input": "ok"}}});
        assert_eq!(
            output(&run),
            json!({
                // Rejected mappings move no right and dispatch nothing.
                "undeclaredPort": {"error": "INVALID_INPUT"},
                "wrongDirection": {"error": "INVALID_INPUT"},
                "requiredMissing": {"error": "INVALID_INPUT"},
                "copiedToken": {"error": "PERMISSION_DENIED"},
                "writerStayed": null,
                "readerStayed": {"item": {"sequence": 1, "value": "mine"}},
                // First local use claims a right: it no longer transfers.
                "usedWriter": {"error": "PERMISSION_DENIED"},
                // A settled call seals the writer it held: a clean end.
                "healthy": {"value": {"steps": 3}},
                "afterHealthy": [step(1), step(2), step(3), {"end": {"lastSequence": 3}}],
                // A provider that fails holding the writer fails the reader.
                "failing": {"error": "EXECUTION_FAILED"},
                "afterFailing": {"error": "EXECUTION_FAILED"},
                // The channel's item schema refuses the provider's first
                // item: the send fails, the provider fails with it, and the
                // source fails for its reader.
                "itemRefused": {"error": "INVALID_INPUT"},
                "afterRefused": {"error": "INVALID_INPUT"},
                // A named source's writer fills only a port declaring that
                // exact contract; the worker's `events` names none.
                "namedSource": {"error": "INVALID_INPUT"},
            }),
            "{kind}"
        );
    }
}

const PROVIDER_RECEIVES: &str = r#"
import time
def drain(op, r):
    return request('capability/call', {'operationId': op, 'slot': 'worker', 'method': 'drain', 'input': None, 'channels': {'inbox': r}})
s, r, _ = pair()
call('channel/send', {'endpoint': s, 'value': 'x'})
call('channel/send', {'endpoint': s, 'value': {'y': 2}})
call('channel/close', {'endpoint': s})
out['drained'] = wait(drain('a', r))
s, r, _ = pair()
blocked = drain('b', r)
time.sleep(0.5)
send({'jsonrpc': '2.0', 'method': 'request/cancel', 'params': {'requestId': blocked}})
out['cancelled'] = wait(blocked)
out['sendAfterCancel'] = call('channel/send', {'endpoint': s, 'value': 1})
"#;

#[test]
fn a_provider_reads_the_callers_channel_and_wakes_when_the_call_is_cancelled() {
    for kind in ["native", "wasm"] {
        let dir = tempfile::tempdir().unwrap();
        worker_caller(dir.path(), "raw", &raw(PROVIDER_RECEIVES), kind);
        let started = std::time::Instant::now();
        let run = exec(dir.path(), "raw", "null", &[]);
        assert_eq!(
            output(&run),
            json!({
                "drained": {"value": ["x", {"y": 2}]},
                "cancelled": {"error": "CANCELLED"},
                // The cancelled call's reader was disposed with it.
                "sendAfterCancel": {"error": "DISCONNECTED"},
            }),
            "{kind}"
        );
        // The provider blocked in `next` was woken, not left until the
        // 30 s deadline.
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(15),
            "{kind}: {took:?}"
        );
    }
}

const UPDATES: &str = r#"{"$schema":"https://flow.jig.md/schemas/channel-contract-1.schema.json","id":"https://example.org/channels/updates","version":"1.0.0","semantics":"Each item is one progress update; text items are human-readable.","item":{"type":"object"}}"#;

const WORKER_PORTS: &str =
    "channels:\n  events:\n    direction: send\n    contract: ./updates.json\n";
const MONITOR_PORTS: &str = "channels:\n  events:\n    direction: receive\n    contract: ./updates.json\n  progress:\n    direction: send\n    required: false\n";

/// A worker that writes three updates to `events`; `close` seals
/// explicitly, otherwise the host seals the healthy writer at its end.
fn worker(close: bool, fail: bool) -> String {
    format!(
        "from jiggy.flow import handle\n\
         async def run(context):\n    events = context.channels['events']\n    \
         await events.send({{'text': 'first'}})\n    await events.send({{'kind': 'tick'}})\n    \
         await events.send({{'text': 'second'}})\n    {}\n    {}\n    \
         return {{'outcome': 'done', 'output': {{'sent': 3}}}}\n\
         handle(run)\n",
        if close {
            "await events.close()"
        } else {
            "pass"
        },
        if fail {
            "raise RuntimeError('worker broke')"
        } else {
            "pass"
        },
    )
}

fn wiring(root: &Path, close: bool, fail: bool) {
    let wiring = component("channel_wiring");
    package(root, "root", "", &wiring);
    package(root, "monitor", MONITOR_PORTS, &wiring);
    package(root, "worker", WORKER_PORTS, &worker(close, fail));
    package(
        root,
        "incompatible",
        "channels:\n  events:\n    direction: send\n    schema:\n      type: string\n",
        "raise SystemExit('the incompatible child must never start')\n",
    );
    for dir in ["root", "monitor", "worker"] {
        write_files(root, &[(&format!("{dir}/updates.json"), UPDATES)]);
    }
}

const CHILDREN: [&str; 6] = [
    "--child",
    "incompatible=incompatible",
    "--child",
    "worker=worker",
    "--child",
    "monitor=monitor",
];

#[test]
fn channel_wiring_moves_a_contract_channel_between_children() {
    let dir = tempfile::tempdir().unwrap();
    wiring(dir.path(), true, false);
    let run = exec(dir.path(), "root", "{\"role\":\"root\"}", &CHILDREN);
    // `incompatible: true` means the root saw INVALID_INPUT for the child
    // whose declared port lacks the source's contract.
    assert_eq!(
        output(&run),
        json!({
            "incompatible": true,
            "work": {"outcome": "done", "output": {"sent": 3}},
            "monitor": {"outcome": "done", "output": {"complete": true, "selected": ["first", "second"]}},
        })
    );
}

#[test]
fn a_healthy_writer_is_sealed_when_its_holder_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    wiring(dir.path(), false, false);
    let run = exec(dir.path(), "root", "{\"role\":\"root\"}", &CHILDREN);
    assert_eq!(
        output(&run)["monitor"]["output"],
        json!({"complete": true, "selected": ["first", "second"]})
    );
}

#[test]
fn a_writer_whose_holder_fails_fails_the_source() {
    let dir = tempfile::tempdir().unwrap();
    wiring(dir.path(), false, true);
    let run = exec(dir.path(), "root", "{\"role\":\"root\"}", &CHILDREN);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "EXECUTION_FAILED", "{run:?}");
}

#[test]
fn a_required_port_left_unconnected_is_invalid_input_before_launch() {
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "caller",
        "",
        "from jiggy.flow import OperationError, handle\n\
         async def run(context):\n    try:\n        \
         await context.run_child_flow(operation_id='w', slot='worker', input=None)\n    \
         except OperationError as e:\n        return {'outcome': 'done', 'output': e.code}\n    \
         return {'outcome': 'done', 'output': 'started'}\n\
         handle(run)\n",
    );
    package(dir.path(), "worker", WORKER_PORTS, &worker(true, false));
    write_files(dir.path(), &[("worker/updates.json", UPDATES)]);
    let run = exec(dir.path(), "caller", "null", &["--child", "worker=worker"]);
    assert_eq!(output(&run), json!("INVALID_INPUT"));
}

#[test]
fn direct_sends_wait_once_the_queue_holds_its_capacity() {
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "pressure",
        "",
        "import asyncio\nfrom jiggy.flow import handle\n\
         async def run(context):\n    n = context.input\n    pair = await context.channel()\n    \
         for i in range(n):\n        await asyncio.wait_for(pair.send.send(i), 5)\n    \
         try:\n        await asyncio.wait_for(pair.send.send(n), 0.5)\n        waited = False\n    \
         except asyncio.TimeoutError:\n        waited = True\n    \
         first = await pair.receive.__anext__()\n    \
         try:\n        await asyncio.wait_for(pair.send.send(n), 0.5)\n        held = False\n    \
         except asyncio.TimeoutError:\n        held = True\n    \
         async def finish():\n        await asyncio.wait_for(pair.send.send(n), 5)\n        await pair.send.close()\n    \
         async def drain():\n        return [v async for v in pair.receive]\n    \
         _, rest = await asyncio.gather(finish(), drain())\n    \
         return {'outcome': 'done', 'output': {'waited': waited, 'held': held, 'values': [first] + rest}}\n\
         handle(run)\n",
    );
    let n = DIRECT_QUEUE_CAPACITY;
    let run = exec(dir.path(), "pressure", &n.to_string(), &[]);
    let out = output(&run);
    assert_eq!(out["waited"], true, "send {} must wait: {run:?}", n + 1);
    // A delivered item keeps its credit until the next read asks for more.
    assert_eq!(out["held"], true, "{run:?}");
    // The waiting send was retracted when cancelled: the values are exactly
    // 0..=n, each once, in order.
    let expected: Vec<usize> = (0..=n).collect();
    assert_eq!(out["values"], json!(expected));
}

#[test]
fn a_broadcast_reader_one_past_its_capacity_fails_lagged_alone() {
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "lagging",
        "",
        &format!(
            "{}\nasync def run(context):\n    n = context.input\n    \
             source = await context.channel(delivery='broadcast')\n    \
             behind = await source.subscribe()\n    await source.send.send(0)\n    \
             at_limit = await source.subscribe()\n    \
             for i in range(1, n + 1):\n        await source.send.send(i)\n    \
             await source.send.close()\n    \
             a, b = await asyncio.gather(read_all(behind), read_all(at_limit))\n    \
             return {{'outcome': 'done', 'output': {{'behind': a, 'atLimit': b}}}}\n\
             handle(run)\n",
            component("broadcast")
                .split("async def run")
                .next()
                .unwrap()
        ),
    );
    let n = BROADCAST_QUEUE_CAPACITY;
    let run = exec(dir.path(), "lagging", &n.to_string(), &[]);
    let out = output(&run);
    // `behind` had n + 1 unread items queued: LAGGED, queued items discarded.
    assert_eq!(
        out["behind"],
        json!({"start": 1, "values": [], "complete": false})
    );
    let expected: Vec<usize> = (1..=n).collect();
    assert_eq!(
        out["atLimit"],
        json!({"start": 2, "values": expected, "complete": true})
    );
}

/// Raw frames: `request`, `wait`, `call` (errors as `{"error": code}`),
/// `pair`, and `out`, which the component returns as its output.
const RAW_PRELUDE: &str = r#"import json, os, sys
req = json.loads(sys.stdin.readline())
count = 0
responses = {}
def send(obj):
    os.write(1, (json.dumps(obj) + '\n').encode())
def request(method, params):
    global count
    count += 1
    rid = f'c:{count}'
    send({'jsonrpc': '2.0', 'id': rid, 'method': method, 'params': params})
    return rid
def wait(rid):
    while rid not in responses:
        m = json.loads(sys.stdin.readline())
        responses[m['id']] = m
    m = responses.pop(rid)
    if 'result' in m:
        return m['result']
    e = m['error']
    return {'error': e['data']['code'] if e['code'] == -32000 else e['code']}
def call(method, params):
    return wait(request(method, params))
def pair(**params):
    p = call('channel/create', params)
    return p['send']['endpoint'], p['receive']['endpoint'], p
out = {}
"#;

const RAW: &str = r#"
s, r, p = pair()
out['grants'] = [p['send']['direction'], p['receive']['direction'], p['receive']['startSequence']]
out['accepted'] = call('channel/send', {'endpoint': s, 'value': 'a'})
out['released'] = call('channel/release', {'endpoint': r})
out['sendAfterRelease'] = call('channel/send', {'endpoint': s, 'value': 'b'})
out['closeAfterRelease'] = call('channel/close', {'endpoint': s})
s, r, _ = pair(schema={'type': 'string'})
call('channel/send', {'endpoint': s, 'value': 'x'})
out['invalidItem'] = call('channel/send', {'endpoint': s, 'value': 5})
out['readAfterInvalid'] = call('channel/next', {'endpoint': r})
out['releaseFailed'] = call('channel/release', {'endpoint': r})
s, r, _ = pair()
call('channel/send', {'endpoint': s, 'value': 'x'})
out['closed'] = call('channel/close', {'endpoint': s})
out['reads'] = [call('channel/next', {'endpoint': r}) for _ in range(3)]
out['releaseEnded'] = call('channel/release', {'endpoint': r})
s, r, _ = pair()
first = request('channel/next', {'endpoint': r})
out['secondRead'] = call('channel/next', {'endpoint': r})
send({'jsonrpc': '2.0', 'method': 'request/cancel', 'params': {'requestId': first}})
out['cancelledRead'] = wait(first)
out['readAfterCancel'] = call('channel/next', {'endpoint': r})
out['copiedToken'] = call('channel/send', {'endpoint': 'ch-999999', 'value': 1})
out['badParams'] = call('channel/send', {'endpoint': s})
out['releaseWriter'] = call('channel/release', {'endpoint': s})
out['badContract'] = call('channel/create', {'contract': './missing.json'})
b = call('channel/create', {'delivery': 'broadcast'})
out['broadcast'] = sorted(b)
call('channel/close', {'endpoint': b['send']['endpoint']})
out['subscribeSealed'] = call('channel/subscribe', {'source': b['source']})
"#;

const RAW_DONE: &str =
    "send({'jsonrpc': '2.0', 'id': req['id'], 'result': {'outcome': 'done', 'output': out}})\n";

fn raw(body: &str) -> String {
    format!("{RAW_PRELUDE}{body}{RAW_DONE}")
}

#[test]
fn channel_requests_answer_with_the_spec_results_and_codes() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "raw", "", &raw(RAW));
    let run = exec(dir.path(), "raw", "null", &[]);
    assert_eq!(
        output(&run),
        json!({
            "grants": ["send", "receive", 1],
            "accepted": null,
            "released": {"status": "released"},
            "sendAfterRelease": {"error": "DISCONNECTED"},
            "closeAfterRelease": {"error": "DISCONNECTED"},
            "invalidItem": {"error": "INVALID_INPUT"},
            "readAfterInvalid": {"error": "INVALID_INPUT"},
            "releaseFailed": {"status": "failed", "code": "INVALID_INPUT"},
            "closed": null,
            "reads": [
                {"item": {"sequence": 1, "value": "x"}},
                {"end": {"lastSequence": 1}},
                {"end": {"lastSequence": 1}},
            ],
            "releaseEnded": {"status": "ended", "lastSequence": 1},
            "secondRead": {"error": "RESOURCE_EXHAUSTED"},
            "cancelledRead": {"error": "CANCELLED"},
            "readAfterCancel": {"error": "DISCONNECTED"},
            "copiedToken": {"error": "PERMISSION_DENIED"},
            "badParams": {"error": -32602},
            "releaseWriter": {"error": "PERMISSION_DENIED"},
            "badContract": {"error": "INVALID_INPUT"},
            "broadcast": ["send", "source"],
            "subscribeSealed": {"error": "DISCONNECTED"},
        })
    );
}

const LIMITS: &str = r#"
limits = req['params']['input']
s, r, _ = pair()
big = limits['item'] - 2
out['itemAtLimit'] = call('channel/send', {'endpoint': s, 'value': 'a' * big})
out['itemPastLimit'] = call('channel/send', {'endpoint': s, 'value': 'a' * (big + 1)})
out['sourceAfterOversize'] = call('channel/next', {'endpoint': r})
s, r, _ = pair()
for i in range(limits['queue']):
    call('channel/send', {'endpoint': s, 'value': i})
# One more send than may wait: whichever is admitted last is refused at once.
waiting = [request('channel/send', {'endpoint': s, 'value': 'w'}) for _ in range(limits['pending'] + 1)]
m = json.loads(sys.stdin.readline())
waiting.remove(m['id'])
out['pendingPastLimit'] = m['error']['data']['code']
out['closeWhilePending'] = call('channel/close', {'endpoint': s})
out['firstRead'] = call('channel/next', {'endpoint': r})
# The delivered item keeps its credit until the next read releases it.
second = request('channel/next', {'endpoint': r})
while not any(w in responses for w in waiting):
    m = json.loads(sys.stdin.readline())
    responses[m['id']] = m
accepted = next(w for w in waiting if w in responses)
waiting.remove(accepted)
out['aWaiterAccepted'] = wait(accepted)
wait(second)
made = 2
while 'error' not in (result := call('channel/create', {'delivery': 'broadcast'})):
    made += 1
    last = result
out['allocationsGranted'] = made
out['allocationPastLimit'] = result
out['subscriptionPastLimit'] = call('channel/subscribe', {'source': last['source']})
for w in waiting:
    call('channel/next', {'endpoint': r})
for w in waiting:
    wait(w)
"#;

#[test]
fn channel_limits_hold_at_the_limit_and_reject_one_past_it() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "limits", "", &raw(LIMITS));
    let input = json!({"item": MAX_ITEM_BYTES, "queue": DIRECT_QUEUE_CAPACITY, "pending": MAX_PENDING_SENDS});
    let run = exec(dir.path(), "limits", &input.to_string(), &[]);
    assert_eq!(
        output(&run),
        json!({
            "itemAtLimit": null,
            "itemPastLimit": {"error": "RESOURCE_EXHAUSTED"},
            // An oversized value fails the whole source, discarding the queue.
            "sourceAfterOversize": {"error": "RESOURCE_EXHAUSTED"},
            "pendingPastLimit": "RESOURCE_EXHAUSTED",
            "closeWhilePending": {"error": "INVALID_INPUT"},
            "firstRead": {"item": {"sequence": 1, "value": 0}},
            "aWaiterAccepted": null,
            "allocationsGranted": MAX_ALLOCATIONS,
            "allocationPastLimit": {"error": "RESOURCE_EXHAUSTED"},
            "subscriptionPastLimit": {"error": "RESOURCE_EXHAUSTED"},
        })
    );
}

const ADMISSION: &str = r#"
s, r, _ = pair()
out['oneBadMapping'] = call('flow/run-child', {'operationId': 'a', 'slot': 'sender', 'input': None, 'channels': {'events': s, 'extra': r}})
out['writerStayed'] = call('channel/send', {'endpoint': s, 'value': 1})
out['readerStayed'] = call('channel/next', {'endpoint': r})
out['usedWriter'] = call('flow/run-child', {'operationId': 'b', 'slot': 'sender', 'input': None, 'channels': {'events': s}})
s2, r2, _ = pair()
out['stagedConflict'] = call('flow/run-child', {'operationId': 'c', 'slot': 'both', 'input': None, 'channels': {'out': s2, 'in': r2}})
out['wrongDirection'] = call('flow/run-child', {'operationId': 'e', 'slot': 'sender', 'input': None, 'channels': {'events': r2}})
out['copiedToken'] = call('flow/run-child', {'operationId': 'd', 'slot': 'sender', 'input': None, 'channels': {'events': 'ch-999999'}})
call('channel/close', {'endpoint': s})
out['end'] = call('channel/next', {'endpoint': r})
"#;

#[test]
fn rejected_channel_mappings_move_no_right_and_launch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "root", "", &raw(ADMISSION));
    let never = "raise SystemExit('must never start')\n";
    package(
        dir.path(),
        "sender",
        "channels:\n  events:\n    direction: send\n",
        never,
    );
    package(
        dir.path(),
        "both",
        "channels:\n  out:\n    direction: send\n    schema:\n      type: string\n  in:\n    direction: receive\n    schema:\n      type: integer\n",
        never,
    );
    let run = exec(
        dir.path(),
        "root",
        "null",
        &["--child", "sender=sender", "--child", "both=both"],
    );
    assert_eq!(
        output(&run),
        json!({
            "oneBadMapping": {"error": "INVALID_INPUT"},
            "writerStayed": null,
            "readerStayed": {"item": {"sequence": 1, "value": 1}},
            // First local use claims a right: it no longer transfers.
            "usedWriter": {"error": "PERMISSION_DENIED"},
            "stagedConflict": {"error": "INVALID_INPUT"},
            "wrongDirection": {"error": "INVALID_INPUT"},
            "copiedToken": {"error": "PERMISSION_DENIED"},
            "end": {"end": {"lastSequence": 1}},
        })
    );
}

#[test]
fn the_rust_broadcast_example_runs_the_broadcast_scenario() {
    let built =
        cargo_build(&["-p", "flow-sdk", "--example", "broadcast"]).join("debug/examples/broadcast");
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "broadcast", "", "");
    std::fs::remove_file(dir.path().join("broadcast/flow.py")).unwrap();
    std::fs::copy(built, dir.path().join("broadcast/flow.bin")).unwrap();
    let run = exec(dir.path(), "broadcast", "null", &[]);
    assert_eq!(
        output(&run),
        json!({
            "early": {"start": 1, "values": ["before-late", "after-late"], "complete": true},
            "late": {"start": 2, "values": ["after-late"], "complete": true},
        })
    );
}

#[test]
fn the_rust_channel_wiring_example_runs_as_root_and_monitor() {
    let built = cargo_build(&["-p", "flow-sdk", "--example", "channel_wiring"])
        .join("debug/examples/channel_wiring");
    let dir = tempfile::tempdir().unwrap();
    wiring(dir.path(), true, false);
    for role in ["root", "monitor"] {
        std::fs::remove_file(dir.path().join(format!("{role}/flow.py"))).unwrap();
        std::fs::copy(&built, dir.path().join(format!("{role}/flow.bin"))).unwrap();
    }
    let run = exec(dir.path(), "root", "{\"role\":\"root\"}", &CHILDREN);
    assert_eq!(
        output(&run),
        json!({
            "incompatible": true,
            "work": {"outcome": "done", "output": {"sent": 3}},
            "monitor": {"outcome": "done", "output": {"complete": true, "selected": ["first", "second"]}},
        })
    );
}

// Byte budgets, root ports and `--receive` (appended; the scenario and
// wiring tests above are another area's).

const BUDGETS: &str = r#"
lim = req['params']['input']
item = lim['item']
per = lim['reader'] // item
full = 'a' * (item - 2)
def ping():
    call('channel/next', {'endpoint': 'ch-0'})
s, r, _ = pair()
out['readerAtLimit'] = [call('channel/send', {'endpoint': s, 'value': full}) for _ in range(per)]
past = request('channel/send', {'endpoint': s, 'value': 0})
ping()
out['pastReaderWaits'] = past not in responses
call('channel/next', {'endpoint': r})
ping()
out['creditHeld'] = past not in responses
call('channel/next', {'endpoint': r})
out['pastAccepted'] = wait(past)
s2, r2, _ = pair()
for _ in range(per):
    call('channel/send', {'endpoint': s2, 'value': full})
# Waiting sends of exactly the budget plus one byte: whichever the host
# admits last is refused at once, the others wait.
waits = [request('channel/send', {'endpoint': s2, 'value': full}) for _ in range(lim['pending'] // item)]
waits.append(request('channel/send', {'endpoint': s2, 'value': 0}))
while not any(w in responses for w in waits):
    m = json.loads(sys.stdin.readline())
    responses[m['id']] = m
refused = next(w for w in waits if w in responses)
waits.remove(refused)
out['pendingPastLimit'] = wait(refused)
ping()
out['waitsStillWaiting'] = not any(w in responses for w in waits)
b = call('channel/create', {'delivery': 'broadcast'})
bs = b['send']['endpoint']
behind = call('channel/subscribe', {'source': b['source']})['endpoint']
reading = call('channel/subscribe', {'source': b['source']})['endpoint']
for _ in range(per):
    call('channel/send', {'endpoint': bs, 'value': full})
call('channel/next', {'endpoint': reading})
call('channel/next', {'endpoint': reading})
out['broadcastAccepted'] = call('channel/send', {'endpoint': bs, 'value': 0})
out['behind'] = call('channel/next', {'endpoint': behind})
out['reading'] = [call('channel/next', {'endpoint': reading})['item']['sequence'] for _ in range(per - 1)]
for _ in range(len(waits) + 1):
    call('channel/next', {'endpoint': r2})
for w in waits:
    wait(w)
"#;

#[test]
fn channel_byte_budgets_hold_at_the_limit_and_one_byte_past_waits_or_lags() {
    use jig_engine::exec::channels::{MAX_PENDING_SEND_BYTES, MAX_READER_BYTES};
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "budgets", "", &raw(BUDGETS));
    let input = json!({"item": MAX_ITEM_BYTES, "reader": MAX_READER_BYTES, "pending": MAX_PENDING_SEND_BYTES});
    let run = exec(dir.path(), "budgets", &input.to_string(), &[]);
    let per = MAX_READER_BYTES / MAX_ITEM_BYTES;
    assert_eq!(per * MAX_ITEM_BYTES, MAX_READER_BYTES);
    let reading: Vec<usize> = (3..=per + 1).collect();
    assert_eq!(
        output(&run),
        json!({
            "readerAtLimit": vec![Value::Null; per],
            // One byte past the receiver's budget waits for a read...
            "pastReaderWaits": true,
            // ...and the committed item holds its bytes until the next one.
            "creditHeld": true,
            "pastAccepted": null,
            // Waiting sends hold their own budget: one byte more is refused.
            "pendingPastLimit": {"error": "RESOURCE_EXHAUSTED"},
            "waitsStillWaiting": true,
            // A broadcast reader one byte past its budget fails alone.
            "broadcastAccepted": null,
            "behind": {"error": "LAGGED"},
            "reading": reading,
        })
    );
}

const TREE: &str = r#"
lim = req['params']['input']
item = lim['item']
per = lim['reader'] // item
full = 'a' * (item - 2)
chans = [pair() for _ in range(lim['tree'] // lim['reader'])]
for s, r, _ in chans:
    for _ in range(per):
        call('channel/send', {'endpoint': s, 'value': full})
spare, _, _ = pair()
out['treePastLimit'] = call('channel/send', {'endpoint': spare, 'value': 0})
call('channel/next', {'endpoint': chans[0][1]})
call('channel/next', {'endpoint': chans[0][1]})
out['afterRelease'] = call('channel/send', {'endpoint': spare, 'value': 0})
"#;

#[test]
fn a_root_tree_holds_its_channel_byte_budget_and_refuses_one_byte_past() {
    use jig_engine::exec::channels::{MAX_READER_BYTES, MAX_TREE_BYTES};
    assert_eq!(MAX_TREE_BYTES % MAX_READER_BYTES, 0);
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "tree", "", &raw(TREE));
    let input = json!({"item": MAX_ITEM_BYTES, "reader": MAX_READER_BYTES, "tree": MAX_TREE_BYTES});
    let run = exec(dir.path(), "tree", &input.to_string(), &[]);
    assert_eq!(
        output(&run),
        json!({
            // The tree holds exactly its budget; one byte more can neither
            // queue nor wait.
            "treePastLimit": {"error": "RESOURCE_EXHAUSTED"},
            // Two reads release one item's bytes anywhere in the tree.
            "afterRelease": null,
        })
    );
}

const EVENTS_PORT: &str = "channels:\n  events:\n    direction: send\n";

/// A root that sends `n` (its input) numbers to `events`, then returns or
/// raises.
fn sender(fail: bool) -> String {
    format!(
        "from jiggy.flow import handle\n\
         async def run(context):\n    events = context.channels['events']\n    \
         for i in range(context.input):\n        await events.send({{'n': i}})\n    \
         {}\n    return {{'outcome': 'done', 'output': 'sent'}}\n\
         handle(run)\n",
        if fail {
            "raise RuntimeError('sender broke')"
        } else {
            "pass"
        }
    )
}

fn ndjson(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?} in {run:?}")))
        .collect()
}

#[test]
fn a_root_whose_required_port_is_not_connected_fails_before_launch() {
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "root",
        EVENTS_PORT,
        "raise SystemExit('the root must never start')\n",
    );
    let run = exec(dir.path(), "root", "0", &[]);
    assert_eq!(run.status, 1, "{run:?}");
    let terminal = run.json();
    assert_eq!(terminal["status"], "failed");
    assert_eq!(terminal["code"], "INVALID_INPUT", "{run:?}");
    assert_eq!(
        terminal["diagnostics"]["stderr"], "",
        "nothing ran: {run:?}"
    );
}

#[test]
fn an_optional_root_port_left_unconnected_is_absent() {
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "root",
        "channels:\n  events:\n    direction: send\n    required: false\n",
        "from jiggy.flow import handle\n\
         async def run(context):\n    \
         return {'outcome': 'done', 'output': sorted(context.channels)}\n\
         handle(run)\n",
    );
    let run = exec(dir.path(), "root", "null", &[]);
    assert_eq!(output(&run), json!([]));
}

#[test]
fn exec_receive_prints_the_channel_as_ndjson_then_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "root", EVENTS_PORT, &sender(false));
    let run = exec(dir.path(), "root", "3", &["--receive", "events"]);
    assert_eq!(run.status, 0, "{run:?}");
    // Canonical JSON/1 lines: members in key order, no spaces.
    let first = run.stdout.lines().next().unwrap();
    assert_eq!(
        first,
        r#"{"channel":"events","startSequence":1,"type":"begin"}"#
    );
    let lines = ndjson(&run);
    assert_eq!(
        lines[..5],
        [
            json!({"type": "begin", "channel": "events", "startSequence": 1}),
            json!({"type": "data", "channel": "events", "sequence": 1, "value": {"n": 0}}),
            json!({"type": "data", "channel": "events", "sequence": 2, "value": {"n": 1}}),
            json!({"type": "data", "channel": "events", "sequence": 3, "value": {"n": 2}}),
            json!({"type": "end", "channel": "events", "status": "closed", "lastSequence": 3}),
        ]
    );
    assert_eq!(lines.len(), 6, "{run:?}");
    assert_eq!(lines[5]["type"], "terminal");
    assert_eq!(lines[5]["result"]["status"], "succeeded");
    assert_eq!(lines[5]["result"]["output"], "sent");
}

#[test]
fn a_failing_root_ends_its_received_channel_failed() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "root", EVENTS_PORT, &sender(true));
    let run = exec(dir.path(), "root", "1", &["--receive", "events"]);
    assert_eq!(run.status, 1, "{run:?}");
    let lines = ndjson(&run);
    // The failure discards what the host had not yet read (seed 000,
    // channels): item 1 arrives only if it was read before the root failed.
    let end = lines.len() - 2;
    assert!(
        lines[1..end]
            == [json!({"type": "data", "channel": "events", "sequence": 1, "value": {"n": 0}})]
            || end == 1,
        "{run:?}"
    );
    assert_eq!(
        lines[end],
        json!({"type": "end", "channel": "events", "status": "failed", "code": "EXECUTION_FAILED"})
    );
    assert_eq!(lines[end + 1]["result"]["code"], "EXECUTION_FAILED");
}

#[test]
fn receive_refuses_bad_channel_names_as_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "root",
        "channels:\n  events:\n    direction: send\n  orders:\n    direction: receive\n    required: false\n",
        &sender(false),
    );
    let many: Vec<String> = (0..=16).map(|i| format!("c{i}")).collect();
    let mut past_limit = vec![];
    for name in &many {
        past_limit.extend(["--receive", name.as_str()]);
    }
    let cases: [&[&str]; 5] = [
        &["--receive", "missing"],
        &["--receive", "orders"],
        &["--receive", "events", "--receive", "events"],
        &["--receive", "not a name"],
        &past_limit,
    ];
    for extra in cases {
        let run = exec(dir.path(), "root", "1", extra);
        assert_eq!(run.status, 2, "{extra:?}: {run:?}");
        assert!(run.stderr.starts_with("JIG_USAGE: "), "{extra:?}: {run:?}");
        assert_eq!(run.stdout, "", "{extra:?}: {run:?}");
    }
}

#[test]
fn channel_output_past_its_budget_cancels_the_run() {
    use jig_engine::exec::receive::MAX_OUTPUT_BYTES as MAX_RECEIVE_OUTPUT_BYTES;
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "root",
        EVENTS_PORT,
        &format!(
            "from jiggy.flow import handle\n\
             async def run(context):\n    events = context.channels['events']\n    \
             for i in range({}):\n        await events.send('a' * 1000000)\n    \
             return {{'outcome': 'done', 'output': 'sent'}}\n\
             handle(run)\n",
            // Twice the budget: back-pressure holds the root until the
            // output fault cancels it.
            2 * MAX_RECEIVE_OUTPUT_BYTES / 1_000_000
        ),
    );
    let run = exec(dir.path(), "root", "null", &["--receive", "events"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("JIG_OUTPUT_FAILED: "), "{}", run.stderr);
    let lines = ndjson(&run);
    let terminal = lines.last().unwrap();
    assert_eq!(terminal["type"], "terminal");
    assert_eq!(terminal["result"]["code"], "CANCELLED", "{}", run.stderr);
    let channel_bytes: usize = run.stdout.lines().rev().skip(1).map(|l| l.len() + 1).sum();
    assert!(channel_bytes <= MAX_RECEIVE_OUTPUT_BYTES);
}

#[test]
fn a_stuck_stdout_cancels_the_run_within_seconds() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "root",
        EVENTS_PORT,
        "from jiggy.flow import handle\n\
         async def run(context):\n    events = context.channels['events']\n    \
         while True:\n        await events.send('a' * 10000)\n\
         handle(run)\n",
    );
    let started = std::time::Instant::now();
    let mut child = spawn_receiving_root(dir.path());
    // Nobody reads stdout: the pipe fills and stays full.
    let mut stderr = child.stderr.take().unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "jig did not end with a stuck stdout"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut text = String::new();
    stderr.read_to_string(&mut text).unwrap();
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(
        text.contains("JIG_OUTPUT_FAILED: stdout stopped taking the output"),
        "{text}"
    );
}

/// Channel-wiring through a provider: the worker forwards its `events`
/// writer to the `agent` slot (agent-run, served by the scenario provider),
/// whose ACP updates reach the monitor. The scenario's worker passes input
/// `null`, which agent-run's `RunInput` refuses, so this worker passes
/// `{"instructions": "summarize"}`; the monitor reports every item.
fn agent_wiring(root: &Path, kind: &str) {
    let read = |path: &str| std::fs::read_to_string(workspace().join(path)).unwrap();
    let acp = read("providers/examples/contracts/contracts/acp-public-updates.json");
    let agent_run = read("providers/examples/contracts/agent-run.capability.json");
    let wiring = component("channel_wiring");
    package(root, "root", "", &wiring);
    package(
        root,
        "incompatible",
        "channels:\n  events:\n    direction: send\n    schema:\n      type: string\n",
        "raise SystemExit('the incompatible child must never start')\n",
    );
    package(
        root,
        "worker",
        &format!(
            "{WORKER_PORTS}uses:\n  agent:\n    contract: ./contracts/agent-run.capability.json\n"
        ),
        "from jiggy.flow import handle\n\
         async def run(context):\n    value = await context.call_capability(\n        \
         operation_id='answer', slot='agent', method='run',\n        \
         input={'instructions': 'summarize'},\n        \
         channels={'events': context.channels['events']})\n    \
         return {'outcome': 'done', 'output': value}\n\
         handle(run)\n",
    );
    package(
        root,
        "monitor",
        MONITOR_PORTS,
        "from jiggy.flow import handle\n\
         async def run(context):\n    events = context.channels['events']\n    \
         return {'outcome': 'done', 'output': [item async for item in events]}\n\
         handle(run)\n",
    );
    // The tree's named source is ACP public updates: every package that
    // names it holds the same descriptor.
    for file in [
        "root/updates.json",
        "monitor/updates.json",
        "worker/updates.json",
        "worker/contracts/acp-public-updates.json",
    ] {
        write_files(root, &[(file, &acp)]);
    }
    write_files(
        root,
        &[("worker/contracts/agent-run.capability.json", &agent_run)],
    );
    configure_provider(root, "scenario", kind, &scenario_provider(kind));
}

#[test]
fn channel_wiring_reaches_an_agent_provider_through_the_worker() {
    for kind in ["native", "wasm"] {
        let dir = tempfile::tempdir().unwrap();
        agent_wiring(dir.path(), kind);
        let run = exec(dir.path(), "root", "{\"role\":\"root\"}", &CHILDREN);
        let chunk = |text: &str| json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}});
        let plan = json!({"sessionUpdate": "plan", "entries": [
            {"content": "summarize", "priority": "high", "status": "completed"}
        ]});
        assert_eq!(
            output(&run),
            json!({
                "incompatible": true,
                "work": {"outcome": "done", "output": {"outcome": "completed", "text": "Done: summarize"}},
                "monitor": {"outcome": "done", "output": [plan, chunk("Done: "), chunk("summarize")]},
            }),
            "{kind}"
        );
    }
}

#[test]
fn jig_run_receives_a_root_channel_and_requires_its_required_ports() {
    let dir = project(&[
        (
            "flows/emit/FLOW.md",
            &format!("---\nname: emit\ndescription: Sends numbers.\n{EVENTS_PORT}---\n"),
        ),
        ("flows/emit/flow.py", &sender(false)),
    ]);
    review(dir.path());
    let args = [
        "run",
        "flow:flows/emit",
        "--input",
        "2",
        "--receive",
        "events",
        "--key",
        "k1",
    ];
    let run = run_jig(dir.path(), &args);
    assert_eq!(run.status, 0, "{run:?}");
    let lines = ndjson(&run);
    assert_eq!(lines.len(), 5, "{run:?}");
    assert_eq!(lines[2]["value"], json!({"n": 1}));
    assert_eq!(
        lines[3],
        json!({"type": "end", "channel": "events", "status": "closed", "lastSequence": 2})
    );
    assert_eq!(lines[4]["result"]["status"], "succeeded");
    assert!(lines[4]["result"]["runId"].is_string(), "{run:?}");
    // A replay under the same key runs nothing: its terminal line alone.
    let replay = run_jig(dir.path(), &args);
    assert_eq!(replay.status, 0, "{replay:?}");
    assert_eq!(ndjson(&replay), [lines[4].clone()], "{replay:?}");
    // Without --receive the required port is not connected: the Run is
    // recorded and fails before launch.
    let run = run_jig(dir.path(), &["run", "flow:flows/emit", "--input", "2"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert_eq!(run.json()["code"], "INVALID_INPUT", "{run:?}");
    // A name the target does not declare is refused before anything is
    // recorded.
    let before = run_jig(dir.path(), &["runs"]).stdout.lines().count();
    let run = run_jig(
        dir.path(),
        &["run", "flow:flows/emit", "--receive", "missing"],
    );
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.starts_with("JIG_USAGE: "), "{run:?}");
    assert_eq!(
        run_jig(dir.path(), &["runs"]).stdout.lines().count(),
        before
    );
}

/// A child whose `events` writer sends "a" and "b", then stays open.
const STALLING_WORKER: &str = "import asyncio\nfrom jiggy.flow import handle\n\
    async def run(context):\n    events = context.channels['events']\n    \
    await events.send('a')\n    await events.send('b')\n    await asyncio.sleep(60)\n    \
    return {'outcome': 'done', 'output': None}\n\
    handle(run)\n";

/// A root that hands the `events` writer the host granted it to child
/// `worker`, then tries to use it itself (reported on stderr), and on root
/// cancellation cancels the child call and fails `CANCELLED` once it settled.
const FORWARDING_ROOT: &str = r#"import json, os, sys, time
req = json.loads(sys.stdin.readline())
def send(obj):
    os.write(1, (json.dumps(obj) + '\n').encode())
g = req['params']['channels']['events']['endpoint']
send({'jsonrpc': '2.0', 'id': 'c:1', 'method': 'flow/run-child', 'params': {'operationId': 'w', 'slot': 'worker', 'input': None, 'channels': {'events': g}}})
time.sleep(1.0)
send({'jsonrpc': '2.0', 'id': 'c:2', 'method': 'channel/send', 'params': {'endpoint': g, 'value': 'root'}})
while True:
    m = json.loads(sys.stdin.readline())
    if m.get('id') == 'c:2':
        sys.stderr.write('reuse ' + (m['error']['data']['code'] if 'error' in m else 'accepted') + '\n')
    elif m.get('method') == 'request/cancel':
        send({'jsonrpc': '2.0', 'method': 'request/cancel', 'params': {'requestId': 'c:1'}})
    elif m.get('id') == 'c:1':
        sys.stderr.write('child ' + json.dumps(m.get('error', {}).get('data')) + '\n')
        send({'jsonrpc': '2.0', 'id': req['id'], 'error': {'code': -32000, 'message': 'cancelled', 'data': {'code': 'CANCELLED'}}})
        break
"#;

fn forwarding(root: &Path) {
    package(root, "root", EVENTS_PORT, FORWARDING_ROOT);
    package(root, "worker", EVENTS_PORT, STALLING_WORKER);
}

/// The moved writer's lines: the child's two items, then the end.
fn assert_moved_and_disconnected(lines: &[Value], run: &Run) {
    assert_eq!(
        lines[..4],
        [
            json!({"type": "begin", "channel": "events", "startSequence": 1}),
            json!({"type": "data", "channel": "events", "sequence": 1, "value": "a"}),
            json!({"type": "data", "channel": "events", "sequence": 2, "value": "b"}),
            // The writer's right ended with its stopped holder.
            json!({"type": "end", "channel": "events", "status": "failed", "code": "DISCONNECTED"}),
        ],
        "{run:?}"
    );
    assert_eq!(lines.len(), 5, "{run:?}");
    let stderr = lines[4]["result"]["diagnostics"]["stderr"]
        .as_str()
        .unwrap();
    // The right moved: the root no longer holds it, and it was not copied.
    assert!(stderr.contains("reuse PERMISSION_DENIED"), "{run:?}");
}

#[test]
fn the_deadline_during_a_moved_channel_ends_it_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    forwarding(dir.path());
    let run = run_jig(
        dir.path(),
        &[
            "exec",
            "root",
            "--json",
            // Long enough for a loaded machine to start both Python
            // components; the worker then stalls until the deadline.
            "--timeout",
            "10s",
            "--child",
            "worker=worker",
            "--receive",
            "events",
        ],
    );
    assert_eq!(run.status, 1, "{run:?}");
    let lines = ndjson(&run);
    assert_moved_and_disconnected(&lines, &run);
    assert_eq!(lines[4]["result"]["code"], "DEADLINE_EXCEEDED", "{run:?}");
}

#[test]
fn interrupting_a_run_during_a_moved_channel_ends_it_disconnected() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    forwarding(dir.path());
    let mut child = jig(dir.path())
        .args(["exec", "root", "--json", "--timeout", "30s"])
        .args(["--child", "worker=worker", "--receive", "events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    // Interrupt once the child's two items arrived and the root tried the
    // moved writer itself (it does so after one second).
    for _ in 0..3 {
        stdout.read_line(&mut text).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let started = std::time::Instant::now();
    std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
    let run = finished(child, text);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(run.status, 2, "{run:?}");
    assert!(
        run.stderr.starts_with("JIG_COMMAND_INTERRUPTED: "),
        "{run:?}"
    );
    let lines = ndjson(&run);
    assert_moved_and_disconnected(&lines, &run);
    assert_eq!(lines[4]["result"]["code"], "CANCELLED", "{run:?}");
}

const CANCEL_RACE: &str = r#"
import time
s, r, _ = pair()
child = request('flow/run-child', {'operationId': 'w', 'slot': 'worker', 'input': None, 'channels': {'events': s}})
time.sleep(req['params']['input'])
send({'jsonrpc': '2.0', 'method': 'request/cancel', 'params': {'requestId': child}})
out['child'] = wait(child)
out['send'] = call('channel/send', {'endpoint': s, 'value': 'root'})
if out['send'] is None:
    call('channel/close', {'endpoint': s})
reads = []
while True:
    m = call('channel/next', {'endpoint': r})
    reads.append(m)
    if 'item' not in m:
        break
out['reads'] = reads
"#;

#[test]
fn cancelling_a_child_call_as_it_takes_a_channel_loses_and_copies_no_right() {
    let dir = tempfile::tempdir().unwrap();
    package(dir.path(), "root", "", &raw(CANCEL_RACE));
    package(dir.path(), "worker", EVENTS_PORT, STALLING_WORKER);
    // At once the cancellation races the transfer; after half a second
    // the child holds the right and is running.
    let mut moved = 0;
    for delay in ["0", "0", "0", "0.5"] {
        let run = exec(dir.path(), "root", delay, &["--child", "worker=worker"]);
        let out = output(&run);
        assert_eq!(out["child"], json!({"error": "CANCELLED"}), "{run:?}");
        let reads = out["reads"].as_array().unwrap();
        if out["send"].is_null() {
            // Cancelled before admission: the right stayed with the root.
            assert_eq!(
                out["reads"],
                json!([{"item": {"sequence": 1, "value": "root"}}, {"end": {"lastSequence": 1}}]),
                "{run:?}"
            );
        } else {
            // Admitted: the right moved to the child, which was stopped.
            moved += 1;
            assert_eq!(
                out["send"],
                json!({"error": "PERMISSION_DENIED"}),
                "{run:?}"
            );
            assert_eq!(
                reads.last().unwrap(),
                &json!({"error": "DISCONNECTED"}),
                "{run:?}"
            );
            for (i, item) in reads[..reads.len() - 1].iter().enumerate() {
                assert_eq!(item["item"]["sequence"], i + 1, "{run:?}");
            }
        }
    }
    assert!(moved >= 1, "the delayed cancellation finds the right moved");
}

#[test]
fn a_received_broadcast_channel_whose_stdout_lags_ends_failed_lagged() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    package(
        dir.path(),
        "root",
        "channels:\n  events:\n    direction: send\n    delivery: broadcast\n",
        "from jiggy.flow import handle\n\
         async def run(context):\n    events = context.channels['events']\n    \
         for i in range(2000):\n        await events.send({'i': i, 'pad': 'x' * 1000})\n    \
         return {'outcome': 'done', 'output': 'sent'}\n\
         handle(run)\n",
    );
    let mut child = spawn_receiving_root(dir.path());
    let mut stdout = child.stdout.take().unwrap();
    // Read slowly (each write still completes well within a second) while
    // the broadcast writer, which never waits, runs ahead of the reader.
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let slow = std::time::Instant::now();
    while slow.elapsed() < std::time::Duration::from_secs(3) {
        let n = stdout.read(&mut chunk).unwrap();
        bytes.extend_from_slice(&chunk[..n]);
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    stdout.read_to_end(&mut bytes).unwrap();
    let run = finished(child, String::from_utf8(bytes).unwrap());
    assert_eq!(run.status, 0, "{}", run.stderr);
    let lines = ndjson(&run);
    let n = lines.len();
    assert_eq!(
        lines[n - 2],
        json!({"type": "end", "channel": "events", "status": "failed", "code": "LAGGED"})
    );
    assert_eq!(lines[n - 1]["result"]["status"], "succeeded");
    // What arrived before the lag is a contiguous prefix.
    for (i, line) in lines[1..n - 2].iter().enumerate() {
        assert_eq!(line["sequence"], i + 1);
    }
    assert!(n - 3 < 2000, "{n} lines");
}

#[test]
fn received_ports_keep_their_declared_contract_and_schema() {
    let dir = tempfile::tempdir().unwrap();
    // The contract port: the host's source carries the contract identity,
    // so the root's port accepts it.
    package(dir.path(), "worker", WORKER_PORTS, &worker(true, false));
    write_files(dir.path(), &[("worker/updates.json", UPDATES)]);
    let run = exec(dir.path(), "worker", "null", &["--receive", "events"]);
    assert_eq!(run.status, 0, "{run:?}");
    let lines = ndjson(&run);
    assert_eq!(lines[1]["value"], json!({"text": "first"}), "{run:?}");
    assert_eq!(
        lines[4],
        json!({"type": "end", "channel": "events", "status": "closed", "lastSequence": 3})
    );
    // The schema port: items inside it are delivered, an item outside it
    // fails the source.
    package(
        dir.path(),
        "typed",
        "channels:\n  events:\n    direction: send\n    schema:\n      type: integer\n",
        "from jiggy.flow import handle\n\
         async def run(context):\n    events = context.channels['events']\n    \
         try:\n        for value in context.input:\n            await events.send(value)\n    \
         except Exception as e:\n        \
         return {'outcome': 'done', 'output': getattr(e, 'code', None)}\n    \
         return {'outcome': 'done', 'output': 'accepted'}\n\
         handle(run)\n",
    );
    let run = exec(dir.path(), "typed", "[1, 2]", &["--receive", "events"]);
    let lines = ndjson(&run);
    assert_eq!(
        lines[1..4],
        [
            json!({"type": "data", "channel": "events", "sequence": 1, "value": 1}),
            json!({"type": "data", "channel": "events", "sequence": 2, "value": 2}),
            json!({"type": "end", "channel": "events", "status": "closed", "lastSequence": 2}),
        ],
        "{run:?}"
    );
    assert_eq!(lines[4]["result"]["output"], "accepted", "{run:?}");
    let invalid =
        json!({"type": "end", "channel": "events", "status": "failed", "code": "INVALID_INPUT"});
    let run = exec(dir.path(), "typed", "[\"two\"]", &["--receive", "events"]);
    let lines = ndjson(&run);
    assert_eq!(lines.len(), 3, "{run:?}");
    assert_eq!(lines[1], invalid);
    assert_eq!(lines[2]["result"]["output"], "INVALID_INPUT", "{run:?}");
    // After a valid item: the failure discards what was not yet read
    // (seed 000, channels), so item 1 arrives only if the host read it
    // before the invalid send.
    let run = exec(
        dir.path(),
        "typed",
        "[1, \"two\"]",
        &["--receive", "events"],
    );
    let lines = ndjson(&run);
    let end = lines.len() - 2;
    assert!(
        lines[1..end] == [json!({"type": "data", "channel": "events", "sequence": 1, "value": 1})]
            || end == 1,
        "{run:?}"
    );
    assert_eq!(lines[end], invalid);
    assert_eq!(
        lines[end + 1]["result"]["output"],
        "INVALID_INPUT",
        "{run:?}"
    );
}

/// A raw root: a contract broadcast source with two readers. The first,
/// its own, lags before a read, and the root reads and releases it twice, so
/// the host's answers show. The second goes to child `monitor` as `events`,
/// with the writer of a direct channel as `progress`: the monitor forwards
/// each text it reads there, and the root reads them. Once the monitor's
/// first forward arrived (the reader moved and is being read), the root
/// floods the source past what the monitor can take while its forwards
/// wait for the root: the reader lags for certain, however the processes
/// are scheduled. Then the root drains `progress` to its end.
const LAGGED_MONITOR_ROOT: &str = r#"
flood = 4 * req['params']['input']
b = call('channel/create', {'delivery': 'broadcast', 'contract': './updates.json'})
bs = b['send']['endpoint']
own = call('channel/subscribe', {'source': b['source']})['endpoint']
lent = call('channel/subscribe', {'source': b['source']})['endpoint']
ps, pr, _ = pair()
monitor = request('flow/run-child', {'operationId': 'monitor', 'slot': 'monitor',
    'input': {'role': 'monitor'}, 'channels': {'events': lent, 'progress': ps}})
call('channel/send', {'endpoint': bs, 'value': {'text': 't0'}})
forwarded = [call('channel/next', {'endpoint': pr})['item']['value']]
for i in range(1, flood):
    call('channel/send', {'endpoint': bs, 'value': {'text': f't{i}'}})
call('channel/close', {'endpoint': bs})
while True:
    read = call('channel/next', {'endpoint': pr})
    if 'end' in read:
        break
    forwarded.append(read['item']['value'])
out['read'] = call('channel/next', {'endpoint': own})
out['release'] = call('channel/release', {'endpoint': own})
out['releaseAgain'] = call('channel/release', {'endpoint': own})
out['forwarded'] = forwarded
out['flood'] = flood
out['monitor'] = wait(monitor)
"#;

/// Seed 000 §5.1 and issue 51: a release after a failed read is answered
/// with the failure the host recorded, as often as it is asked; and each
/// SDK's monitor, which closes its receiver after `LAGGED` (one release, its
/// wire pinned by the conformance case `channel-wiring-monitor-lagged`),
/// takes that answer as the disposition: its Run succeeds `complete: false`
/// with what it read before the lag.
#[test]
fn a_monitor_closing_its_lagged_receiver_gets_the_recorded_failure_and_succeeds() {
    let typescript = std::fs::read_to_string(
        workspace().join("host/typescript/tests/components/channel_wiring.js"),
    )
    .unwrap()
    .replace("\"../../flow/index.js\"", "\"@jigging/flow\"");
    for (entry, monitor) in [
        ("flow.py", component("channel_wiring")),
        ("flow.js", typescript),
    ] {
        let dir = tempfile::tempdir().unwrap();
        package(dir.path(), "root", "", &raw(LAGGED_MONITOR_ROOT));
        package(dir.path(), "monitor", MONITOR_PORTS, "");
        std::fs::remove_file(dir.path().join("monitor/flow.py")).unwrap();
        write_files(
            dir.path(),
            &[
                ("root/updates.json", UPDATES),
                ("monitor/updates.json", UPDATES),
                (&format!("monitor/{entry}"), &monitor),
            ],
        );
        let capacity = BROADCAST_QUEUE_CAPACITY
            .max(DIRECT_QUEUE_CAPACITY)
            .to_string();
        let run = exec(
            dir.path(),
            "root",
            &capacity,
            &["--child", "monitor=monitor"],
        );
        let out = output(&run);
        let lagged = json!({"status": "failed", "code": "LAGGED"});
        assert_eq!(out["read"], json!({"error": "LAGGED"}), "{entry}: {run:?}");
        assert_eq!(out["release"], lagged, "{entry}: {run:?}");
        assert_eq!(out["releaseAgain"], lagged, "{entry}: {run:?}");
        // What the monitor kept is what it forwarded: a prefix, cut short.
        let forwarded = out["forwarded"].as_array().unwrap();
        assert!(forwarded.len() < out["flood"].as_u64().unwrap() as usize);
        for (i, text) in forwarded.iter().enumerate() {
            assert_eq!(text, &json!(format!("t{i}")), "{entry}: {run:?}");
        }
        assert_eq!(
            out["monitor"],
            json!({"outcome": "done", "output": {"complete": false, "selected": forwarded}}),
            "{entry}: {run:?}"
        );
    }
}
