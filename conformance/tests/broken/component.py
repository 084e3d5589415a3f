"""A deliberately broken Run/1 component for the runner's own tests.

`component.py MODE` follows the standard component's conversation (or the
matrix fanout-65 case) and breaks one rule a host peer checks:

- reused-id: the two first requests share one request id;
- fanout-65: 65 requests on the wire at once;
- trailing-bytes: after the root response, bytes without a final LF;
- nonzero-exit: after the root response and EOF, exit status 3.

Independent of both SDKs on purpose: it writes frames by hand.
"""

import json
import sys

MODE = sys.argv[1]


def send(message, end=b"\n"):
    sys.stdout.buffer.write(json.dumps(message).encode() + end)
    sys.stdout.buffer.flush()


def receive():
    line = sys.stdin.buffer.readline()
    if not line:
        sys.exit(1)
    return json.loads(line)


def request(rid, method, params):
    send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


def await_responses(count):
    results = {}
    while len(results) < count:
        message = receive()
        results[message["id"]] = message.get("result")
    return results


root = receive()
if MODE == "fanout-65":
    for i in range(65):
        request(f"c:{i + 1}", "capability/call",
                {"operationId": f"fanout:{i + 1}", "slot": "sink", "method": "write",
                 "input": {"index": i}})
    await_responses(65)
    send({"jsonrpc": "2.0", "id": root["id"], "result": {"outcome": "done", "output": {"settled": 65}}})
    sys.exit(0)

second = "c:1" if MODE == "reused-id" else "c:2"
request("c:1", "flow/run-child",
        {"operationId": "research:1", "slot": "research",
         "intent": "Find a useful comparison target.", "input": root["params"]["input"]})
request(second, "capability/call",
        {"operationId": "store:1", "slot": "artifacts", "method": "write",
         "input": {"source": "research"}})
first = await_responses(2)
request("c:3", "capability/call",
        {"operationId": "missing:1", "slot": "artifacts", "method": "read",
         "input": {"uri": "artifact://missing"}})
missing = await_responses(1)["c:3"]
output = {"research": first["c:1"], "stored": first["c:2"]["value"],
          "missing": missing["error"]["name"]}
send({"jsonrpc": "2.0", "id": root["id"], "result": {"outcome": "done", "output": output}})
if MODE == "trailing-bytes":
    sys.stdout.buffer.write(b"{\"jsonrpc\"")
    sys.stdout.buffer.flush()
while sys.stdin.buffer.readline():
    pass
sys.exit(3 if MODE == "nonzero-exit" else 0)
