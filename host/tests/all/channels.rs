//! Run/1 §5.1 channels served by the host, driven through `jig exec` with the
//! Python SDK's conformance components (SCENARIOS.md) and with raw frames.

use std::path::Path;

use jig::exec::channels::{
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
"#;

#[test]
fn provider_channel_mappings_are_validated_and_settled_with_the_call() {
    for kind in ["native", "wasm"] {
        let dir = tempfile::tempdir().unwrap();
        worker_caller(dir.path(), "raw", &raw(PROVIDER_MAPPINGS), kind);
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
