"""Run/1 behaviour of jiggy.flow components, observed through an independent host peer.

The peer below speaks raw frames to a real `python3 component.py` process the
way a host does (PYTHONPATH pointing at the bundled package) and asserts only
what a host can see: frames, bytes on stdout, stderr text and exit status.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import unittest
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
COMPONENTS = HERE / "components"
STANDARD = COMPONENTS / "standard.py"
MATRIX = COMPONENTS / "matrix.py"
PROBE = COMPONENTS / "probe.py"
CHANNELS = COMPONENTS / "channels.py"
BROADCAST = COMPONENTS / "broadcast.py"
CHANNEL_WIRING = COMPONENTS / "channel_wiring.py"

FRAME_LIMIT = 16_777_216
RECEIVE_TIMEOUT = 10.0
QUIET_SECONDS = 0.2


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise AssertionError(f"duplicate member in component frame: {pairs!r}")
    return result


def _reject(token: str) -> Any:
    raise AssertionError(f"component emitted {token}")


def decode_frame(payload: bytes) -> Any:
    return json.loads(payload.decode("utf-8"), object_pairs_hook=_pairs, parse_constant=_reject)


def encode_frame(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def flow_run(request_id: str = "host:1", input: Any = None, **overrides: Any) -> dict[str, Any]:
    params = {
        "protocol": "run/1",
        "input": input,
        "settings": {},
        "attachments": {},
        "scratch": "/tmp/scratch",
        "deadlineUnixMs": 1787558400000,
    }
    params.update(overrides)
    return {"jsonrpc": "2.0", "id": request_id, "method": "flow/run", "params": params}


def success(request_id: str, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def operation_error(request_id: str, code: str, details: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"code": code}
    if details is not None:
        data["details"] = details
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32000, "message": f"{code} from host", "data": data},
    }


def cancel(request_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "request/cancel", "params": {"requestId": request_id}}


class HostPeer:
    """A minimal independent Run/1 host side for one component process."""

    def __init__(self, component: Path) -> None:
        environment = {
            key: value for key, value in os.environ.items() if not key.startswith("PYTHON")
        }
        environment["PYTHONPATH"] = str(PACKAGE_ROOT)
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        self.process = subprocess.Popen(
            [sys.executable, str(component)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
        )
        self._frames: queue.Queue[Any] = queue.Queue()
        self.trailing = b""
        self._stderr = bytearray()
        self._stdout_thread = threading.Thread(target=self._read_stdout, daemon=True)
        self._stderr_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._stdout_thread.start()
        self._stderr_thread.start()
        self.requests_on_wire: set[str] = set()
        self.max_on_wire = 0
        self.seen_request_ids: set[str] = set()

    def _read_stdout(self) -> None:
        pending = b""
        stream = self.process.stdout
        while True:
            chunk = stream.read1(1 << 20)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                frame, pending = pending.split(b"\n", 1)
                self._frames.put(frame)
        self.trailing = pending
        self._frames.put(None)

    def _read_stderr(self) -> None:
        while True:
            chunk = self.process.stderr.read1(1 << 16)
            if not chunk:
                return
            self._stderr.extend(chunk)

    @property
    def stderr(self) -> str:
        self._stderr_thread.join(timeout=5)
        return self._stderr.decode("utf-8", "replace")

    def send(self, message: Any) -> None:
        self.send_raw(encode_frame(message))

    def send_raw(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def receive(self, timeout: float = RECEIVE_TIMEOUT) -> dict[str, Any]:
        try:
            frame = self._frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame within {timeout}s; stderr: {self.stderr}") from None
        if frame is None:
            self._frames.put(None)
            raise AssertionError(f"component stdout closed; stderr: {self.stderr}")
        message = decode_frame(frame)
        if "method" in message and "id" in message:
            request_id = message["id"]
            if request_id in self.seen_request_ids:
                raise AssertionError(f"component reused request ID {request_id}")
            self.seen_request_ids.add(request_id)
            self.requests_on_wire.add(request_id)
            self.max_on_wire = max(self.max_on_wire, len(self.requests_on_wire))
        return message

    def respond(self, message: dict[str, Any]) -> None:
        self.requests_on_wire.discard(message["id"])
        self.send(message)

    def receive_requests(self, count: int) -> dict[str, dict[str, Any]]:
        """Receive `count` concurrent requests, keyed by operationId."""
        requests = [self.receive() for _ in range(count)]
        keyed = {message["params"]["operationId"]: message for message in requests}
        if len(keyed) != count:
            raise AssertionError(f"expected {count} distinct operations, got {requests!r}")
        return keyed

    def receive_request(self, method: str) -> dict[str, Any]:
        message = self.receive()
        if message.get("method") != method or "id" not in message:
            raise AssertionError(f"expected a {method} request, got {message!r}")
        return message

    def expect_quiet(self, seconds: float = QUIET_SECONDS) -> None:
        try:
            frame = self._frames.get(timeout=seconds)
        except queue.Empty:
            return
        self._frames.put(frame)
        raise AssertionError(f"unexpected component frame: {frame!r}")

    def expect_closed(self) -> int:
        """The component closes stdout without another frame; returns exit status."""
        frame = self._frames.get(timeout=RECEIVE_TIMEOUT)
        if frame is not None:
            raise AssertionError(f"expected close, got frame {frame!r}")
        self._frames.put(None)
        return self.wait()

    def finish(self) -> int:
        """Half-close stdin, require stdout to end on a frame boundary, return status."""
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        frame = self._frames.get(timeout=RECEIVE_TIMEOUT)
        if frame is not None:
            raise AssertionError(f"trailing frame after the root response: {frame!r}")
        self._frames.put(None)
        if self.trailing:
            raise AssertionError(f"stdout ended mid-frame: {self.trailing!r}")
        return self.wait()

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=RECEIVE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"component did not exit; stderr: {self.stderr}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except OSError:
                pass

    def __enter__(self) -> HostPeer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class PeerTestCase(unittest.TestCase):
    def peer(self, component: Path) -> HostPeer:
        peer = HostPeer(component)
        self.addCleanup(peer.close)
        return peer

    def assertRootSuccess(self, peer: HostPeer, output: Any, root_id: str = "host:1") -> None:
        self.assertEqual(
            peer.receive(),
            {"jsonrpc": "2.0", "id": root_id, "result": {"outcome": "done", "output": output}},
        )
        self.assertEqual(peer.finish(), 0)

    def assertRootError(self, peer: HostPeer, code: str, root_id: str = "host:1") -> dict:
        response = peer.receive()
        self.assertEqual(response["id"], root_id, response)
        self.assertEqual(response["error"]["code"], -32000, response)
        self.assertEqual(response["error"]["data"]["code"], code, response)
        self.assertTrue(1 <= len(response["error"]["message"]) <= 1024)
        self.assertEqual(peer.finish(), 0)
        return response["error"]


class GreetingTests(PeerTestCase):
    def test_root_context_round_trip(self) -> None:
        peer = self.peer(PROBE)
        attachments = {"source": {"path": "/workspace/source", "access": "read"}}
        channels = {
            "events": {"endpoint": "grant:1", "direction": "send", "delivery": "direct"},
        }
        peer.send(
            flow_run(
                input={"case": "context", "name": "Ada", "text": "✓ \U0001f423"},
                settings={"tone": "warm"},
                attachments=attachments,
                channels=channels,
                deadlineUnixMs=1.787558400e12,
            )
        )
        self.assertRootSuccess(
            peer,
            {
                "input": {"case": "context", "name": "Ada", "text": "✓ \U0001f423"},
                "settings": {"tone": "warm"},
                "attachments": attachments,
                "channels": {"events": {"direction": "send", "delivery": "direct"}},
                "scratch": "/tmp/scratch",
                "deadline": 1787558400000,
            },
        )

    def test_unknown_notifications_and_stale_cancels_are_ignored(self) -> None:
        peer = self.peer(PROBE)
        peer.send({"jsonrpc": "2.0", "method": "host/unknown", "params": {}})
        peer.send({"jsonrpc": "2.0", "method": "flow/run", "params": {}})
        peer.send(cancel("stale:1"))
        peer.send(cancel("stale:1"))
        peer.send(flow_run())
        self.assertRootSuccess(peer, None)

    def test_diagnostics_go_to_stderr_and_stdout_stays_protocol_only(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "noisy"}))
        self.assertRootSuccess(peer, {"child-read-stdin": ""})
        stderr = peer.stderr
        for text in (
            "imported before handle",
            "print goes to stderr",
            "sys.stdout goes to stderr",
            "fd 1 goes to stderr",
            "child stdout goes to stderr",
        ):
            self.assertIn(text, stderr)


class StandardComponentTests(PeerTestCase):
    def start_standard(self, peer: HostPeer) -> tuple[dict, dict]:
        peer.send(flow_run(input={"subject": "football"}))
        first, second = peer.receive(), peer.receive()
        calls = {message["method"]: message for message in (first, second)}
        self.assertEqual(set(calls), {"flow/run-child", "capability/call"})
        child, store = calls["flow/run-child"], calls["capability/call"]
        self.assertEqual(
            child["params"],
            {
                "operationId": "research:1",
                "slot": "research",
                "intent": "Find a useful comparison target.",
                "input": {"subject": "football"},
            },
        )
        self.assertEqual(
            store["params"],
            {
                "operationId": "store:1",
                "slot": "artifacts",
                "method": "write",
                "input": {"source": "research"},
            },
        )
        self.assertEqual(set(child) | set(store), {"jsonrpc", "id", "method", "params"})
        return child, store

    def test_golden_conversation_answered_out_of_order(self) -> None:
        peer = self.peer(STANDARD)
        child, store = self.start_standard(peer)
        peer.respond(success(store["id"], {"value": {"uri": "artifact://1"}}))
        peer.respond(success(child["id"], {"outcome": "done", "output": {"answer": "Fifa 99"}}))
        missing = peer.receive_request("capability/call")
        self.assertEqual(
            missing["params"],
            {
                "operationId": "missing:1",
                "slot": "artifacts",
                "method": "read",
                "input": {"uri": "artifact://missing"},
            },
        )
        peer.respond(success(missing["id"], {"error": {"name": "not-found", "data": {"uri": "x"}}}))
        self.assertRootSuccess(
            peer,
            {
                "research": {"outcome": "done", "output": {"answer": "Fifa 99"}},
                "stored": {"uri": "artifact://1"},
                "missing": "not-found",
            },
        )

    def test_root_cancellation_cancels_each_open_call_once_then_fails_cancelled(self) -> None:
        peer = self.peer(STANDARD)
        child, store = self.start_standard(peer)
        peer.send(cancel("host:1"))
        cancels = [peer.receive(), peer.receive()]
        self.assertEqual(
            sorted(cancels, key=lambda m: m["params"]["requestId"]),
            sorted(
                [cancel(child["id"]), cancel(store["id"])], key=lambda m: m["params"]["requestId"]
            ),
        )
        peer.expect_quiet()
        peer.respond(operation_error(child["id"], "CANCELLED"))
        peer.expect_quiet()
        peer.respond(success(store["id"], {"value": None}))
        self.assertRootError(peer, "CANCELLED")

    def test_second_flow_run_is_invalid_request_then_close(self) -> None:
        peer = self.peer(STANDARD)
        self.start_standard(peer)
        peer.send(flow_run("host:2"))
        response = peer.receive()
        self.assertEqual(response["id"], "host:2")
        self.assertEqual(response["error"]["code"], -32600)
        self.assertNotEqual(peer.expect_closed(), 0)

    def test_fatal_responses_close_without_a_root_response(self) -> None:
        cases = {
            "unknown id": lambda child, store: success("component:999", {"value": None}),
            "child result without output": lambda child, store: success(
                child["id"], {"outcome": "done"}
            ),
            "standard error reply": lambda child, store: {
                "jsonrpc": "2.0",
                "id": store["id"],
                "error": {"code": -32601, "message": "Method not found"},
            },
            "two capability arms": lambda child, store: success(
                store["id"], {"value": None, "error": {"name": "x", "data": None}}
            ),
            "declared error without data": lambda child, store: success(
                store["id"], {"error": {"name": "not-found"}}
            ),
            "unknown operational code": lambda child, store: operation_error(
                store["id"], "PROTOCOL_ERROR"
            ),
            "malformed cancel": lambda child, store: {
                "jsonrpc": "2.0",
                "method": "request/cancel",
                "params": {"requestId": 7},
            },
        }
        for name, reply in cases.items():
            with self.subTest(name):
                peer = self.peer(STANDARD)
                child, store = self.start_standard(peer)
                peer.send(reply(child, store))
                self.assertNotEqual(peer.expect_closed(), 0)
                self.assertIn("PROTOCOL_ERROR", peer.stderr)

    def test_duplicate_response_is_fatal(self) -> None:
        peer = self.peer(STANDARD)
        child, store = self.start_standard(peer)
        peer.respond(success(store["id"], {"value": None}))
        peer.send(success(store["id"], {"value": None}))
        self.assertNotEqual(peer.expect_closed(), 0)

    def test_stdin_eof_while_root_pending_is_channel_lost(self) -> None:
        peer = self.peer(STANDARD)
        self.start_standard(peer)
        peer.process.stdin.close()
        self.assertNotEqual(peer.expect_closed(), 0)
        self.assertIn("CHANNEL_LOST", peer.stderr)


class CallOutcomeTests(PeerTestCase):
    def test_declared_capability_error_and_operational_error(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "capability-outcomes"}))
        declared = peer.receive_request("capability/call")
        peer.respond(success(declared["id"], {"error": {"name": "not-found", "data": [1, 2]}}))
        child = peer.receive_request("flow/run-child")
        peer.respond(operation_error(child["id"], "UNAVAILABLE", {"slot": "child"}))
        self.assertRootSuccess(
            peer,
            {
                "declared": {"name": "not-found", "data": [1, 2]},
                "operational": {
                    "code": "UNAVAILABLE",
                    "message": "UNAVAILABLE from host",
                    "details": {"slot": "child"},
                },
            },
        )

    def test_invalid_call_arguments_fail_locally_without_a_frame(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "invalid-arguments"}))
        self.assertRootSuccess(
            peer,
            ["ValueError", "ValueError", "ValueError", "ValueError", "ValueError", "ValueError"],
        )
        self.assertEqual(peer.seen_request_ids, set())

    def test_call_input_is_snapshotted_at_admission(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "snapshot"}))
        call = peer.receive_request("capability/call")
        self.assertEqual(call["params"]["input"], {"value": 1})
        peer.respond(success(call["id"], {"value": call["params"]["input"]}))
        self.assertRootSuccess(peer, {"value": {"value": 1}})

    def test_65_concurrent_calls_never_exceed_64_on_the_wire(self) -> None:
        peer = self.peer(MATRIX)
        peer.send(flow_run(input={"case": "fanout-65"}))
        first = [peer.receive_request("capability/call") for _ in range(64)]
        peer.expect_quiet()
        self.assertEqual(peer.max_on_wire, 64)
        peer.respond(success(first[10]["id"], {"value": 10}))
        last = peer.receive_request("capability/call")
        seen = {call["params"]["operationId"] for call in first + [last]}
        self.assertEqual(seen, {f"fanout:{index}" for index in range(1, 66)})
        for call in reversed(first + [last]):
            if call is not first[10]:
                peer.respond(success(call["id"], {"value": None}))
        self.assertRootSuccess(peer, {"settled": 65})
        self.assertEqual(peer.max_on_wire, 64)

    def test_request_lifetime_budget_refuses_the_65537th_call_locally(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "lifetime"}))
        for _batch in range(65_536 // 64):
            calls = [peer.receive() for _ in range(64)]
            peer.send_raw(b"".join(encode_frame(success(c["id"], {"value": None})) for c in calls))
            peer.requests_on_wire.clear()
        self.assertEqual(len(peer.seen_request_ids), 65_536)
        response = peer.receive()
        self.assertEqual(response["result"]["output"]["accepted"], 65_536)
        self.assertEqual(response["result"]["output"]["rejected"], "RESOURCE_EXHAUSTED")
        self.assertEqual(peer.finish(), 0)

    def test_operation_identity_is_the_callers(self) -> None:
        peer = self.peer(MATRIX)
        peer.send(flow_run(input={"case": "operation-identity"}))
        calls = [peer.receive_request("capability/call") for _ in range(2)]
        self.assertEqual({c["params"]["operationId"] for c in calls}, {"shared:1"})
        self.assertNotEqual(calls[0]["id"], calls[1]["id"])
        for call in calls:
            peer.respond(success(call["id"], {"value": "v"}))
        replay = peer.receive_request("capability/call")
        peer.respond(success(replay["id"], {"value": "v"}))
        conflict = peer.receive_request("capability/call")
        self.assertEqual(conflict["params"]["input"], {"value": "different"})
        peer.respond(operation_error(conflict["id"], "OPERATION_CONFLICT"))
        self.assertRootSuccess(
            peer, {"first": "v", "second": "v", "replay": "v", "conflict": "OPERATION_CONFLICT"}
        )


class CancellationTests(PeerTestCase):
    def test_cancelled_local_wait_sends_cancel_and_waits_for_late_response(self) -> None:
        peer = self.peer(MATRIX)
        peer.send(flow_run(input={"case": "cancel-one-call"}))
        calls = peer.receive_requests(2)
        child, release = calls["cancelled-child:1"], calls["release-cancel:1"]
        peer.respond(success(release["id"], {"value": None}))
        self.assertEqual(peer.receive(), cancel(child["id"]))
        peer.expect_quiet()
        peer.respond(success(child["id"], {"outcome": "done", "output": "late"}))
        self.assertRootSuccess(peer, "cancelled-locally")

    def test_cancelling_one_joined_waiter_keeps_the_other(self) -> None:
        peer = self.peer(MATRIX)
        peer.send(flow_run(input={"case": "cancel-shared-waiter"}))
        calls = [peer.receive_request("capability/call") for _ in range(3)]
        release = next(c for c in calls if c["params"]["operationId"] == "release-shared-cancel:1")
        waiters = [c for c in calls if c is not release]
        self.assertEqual({w["params"]["operationId"] for w in waiters}, {"shared-cancel:1"})
        peer.respond(success(release["id"], {"value": None}))
        cancelled = peer.receive()
        self.assertEqual(cancelled, cancel(waiters[0]["id"]))
        peer.respond(operation_error(waiters[0]["id"], "CANCELLED"))
        peer.respond(success(waiters[1]["id"], {"value": "kept"}))
        self.assertRootSuccess(peer, {"cancellation": "CANCELLED", "survivor": "kept"})

    def test_abandoned_call_is_cancelled_settled_and_fails_the_root(self) -> None:
        peer = self.peer(MATRIX)
        peer.send(flow_run(input={"case": "abandoned-call"}))
        calls = peer.receive_requests(2)
        child, release = calls["abandoned-child:1"], calls["release-abandon:1"]
        peer.respond(success(release["id"], {"value": None}))
        self.assertEqual(peer.receive(), cancel(child["id"]))
        peer.expect_quiet()
        peer.respond(operation_error(child["id"], "CANCELLED"))
        self.assertRootError(peer, "EXECUTION_FAILED")

    def test_root_cancellation_drops_queued_calls_and_cancels_each_wire_call_once(self) -> None:
        peer = self.peer(MATRIX)
        peer.send(flow_run(input={"case": "fanout-65"}))
        calls = [peer.receive_request("capability/call") for _ in range(64)]
        peer.send(cancel("host:1"))
        cancelled = [peer.receive() for _ in range(64)]
        self.assertEqual(
            sorted(message["params"]["requestId"] for message in cancelled),
            sorted(call["id"] for call in calls),
        )
        self.assertTrue(all(message["method"] == "request/cancel" for message in cancelled))
        peer.expect_quiet()
        for call in calls[:-1]:
            peer.respond(operation_error(call["id"], "CANCELLED"))
        peer.expect_quiet()
        peer.respond(success(calls[-1]["id"], {"value": "won the race"}))
        self.assertRootError(peer, "CANCELLED")
        self.assertEqual(len(peer.seen_request_ids), 64)

    def test_root_cancellation_without_calls(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "sleep"}))
        peer.expect_quiet(0.1)
        peer.send(cancel("host:1"))
        self.assertRootError(peer, "CANCELLED")

    def test_handler_ignoring_cancellation_still_fails_cancelled(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "ignore-cancellation"}))
        peer.expect_quiet(0.1)
        peer.send(cancel("host:1"))
        self.assertRootError(peer, "CANCELLED")


class ResultTests(PeerTestCase):
    def run_probe(self, input: Any) -> HostPeer:
        peer = self.peer(PROBE)
        peer.send(flow_run(input=input))
        return peer

    def test_invalid_results_become_invalid_result(self) -> None:
        for result in (
            {"outcome": "done"},
            {"outcome": "Done", "output": None},
            {"outcome": "done", "output": None, "extra": 1},
            "done",
            None,
        ):
            with self.subTest(result=result):
                peer = self.run_probe({"case": "result", "result": result})
                self.assertRootError(peer, "INVALID_RESULT")

    def test_unrepresentable_outputs_become_invalid_result(self) -> None:
        for expression in (
            "{'outcome': 'done', 'output': float('nan')}",
            "{'outcome': 'done', 'output': 2 ** 53}",
            "{'outcome': 'done', 'output': '\\ud800'}",
            "{'outcome': 'done', 'output': {1: 2}}",
            "{'outcome': 'done', 'output': object()}",
            "{'outcome': 'done', 'output': 'x' * (8_388_608 + 1)}",
            "{'outcome': 'done', 'output': ['x' * 8_388_608, 'y' * 8_388_608]}",
        ):
            with self.subTest(expression=expression):
                peer = self.run_probe({"case": "python-result", "expression": expression})
                self.assertRootError(peer, "INVALID_RESULT")

    def test_custom_outcome_and_tuple_output(self) -> None:
        peer = self.run_probe(
            {
                "case": "python-result",
                "expression": "{'outcome': 'needs-review', 'output': (1, 2.5, -0.0)}",
            }
        )
        self.assertEqual(
            peer.receive()["result"], {"outcome": "needs-review", "output": [1, 2.5, 0]}
        )
        self.assertEqual(peer.finish(), 0)

    def test_exception_becomes_execution_failed_with_its_type_text_and_frames(self) -> None:
        peer = self.run_probe({"case": "raise", "message": "boom"})
        error = self.assertRootError(peer, "EXECUTION_FAILED")
        self.assertEqual(error["message"], "RuntimeError: boom")
        exception = error["data"]["details"]["exception"]
        self.assertEqual(exception["type"], "RuntimeError")
        self.assertEqual(exception["message"], "boom")
        # Innermost first, the component's own frames only: no SDK or asyncio.
        self.assertRegex(exception["stack"][0], r"^run \(.*probe\.py:\d+\)$")
        self.assertEqual(len(exception["stack"]), 1, exception)
        self.assertEqual(exception["framesOmitted"], 0)
        # And the usual traceback on stderr.
        self.assertIn("Traceback (most recent call last):", peer.stderr)
        self.assertIn("RuntimeError: boom", peer.stderr)

    def test_a_key_error_names_its_type(self) -> None:
        peer = self.run_probe({"case": "key-error"})
        error = self.assertRootError(peer, "EXECUTION_FAILED")
        self.assertEqual(error["message"], "KeyError: 'data'")
        self.assertEqual(error["data"]["details"]["exception"]["type"], "KeyError")
        self.assertIn("KeyError: 'data'", peer.stderr)

    def test_an_unencodable_exception_text_still_reaches_the_host(self) -> None:
        peer = self.run_probe({"case": "lone-surrogate"})
        error = self.assertRootError(peer, "EXECUTION_FAILED")
        self.assertEqual(error["message"], "RuntimeError: half ? a pair")
        self.assertEqual(error["data"]["details"]["exception"]["message"], "half ? a pair")

    def test_a_deep_traceback_is_bounded(self) -> None:
        peer = self.run_probe({"case": "recurse", "depth": 200})
        error = self.assertRootError(peer, "EXECUTION_FAILED")
        exception = error["data"]["details"]["exception"]
        self.assertEqual(error["message"], "ValueError: at the bottom")
        self.assertEqual(len(exception["stack"]), 16)
        self.assertRegex(exception["stack"][0], r"^recurse \(")
        # 200 recursions, `run` and the innermost 16 kept.
        self.assertEqual(exception["framesOmitted"], 202 - 16)
        self.assertLessEqual(len(peer.stderr), 16 * 1024 + 1024)

    def test_system_exit_in_the_handler_becomes_execution_failed(self) -> None:
        peer = self.run_probe({"case": "exit"})
        self.assertRootError(peer, "EXECUTION_FAILED")

    def test_long_exception_text_is_bounded(self) -> None:
        peer = self.run_probe({"case": "raise", "message": "x" * 5000})
        error = self.assertRootError(peer, "EXECUTION_FAILED")
        self.assertEqual(len(error["message"]), 1024)

    def test_operation_error_with_wire_code_is_preserved(self) -> None:
        peer = self.run_probe({"case": "operation-error", "code": "UNAVAILABLE", "details": [1]})
        error = self.assertRootError(peer, "UNAVAILABLE")
        self.assertEqual(error["data"], {"code": "UNAVAILABLE", "details": [1]})
        self.assertEqual(error["message"], "refused here")

    def test_local_or_unknown_codes_become_execution_failed(self) -> None:
        for code in ("PROTOCOL_ERROR", "CHANNEL_LOST", "NOT_A_CODE"):
            with self.subTest(code=code):
                peer = self.run_probe({"case": "operation-error", "code": code})
                self.assertRootError(peer, "EXECUTION_FAILED")


class ProtocolErrorTests(PeerTestCase):
    def test_host_request_for_a_component_method_gets_method_not_found(self) -> None:
        peer = self.peer(PROBE)
        for request_id, method in (
            ("host:a", "capability/call"),
            ("host:b", "request/cancel"),
            ("host:c", "nonsense"),
        ):
            peer.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}})
            response = peer.receive()
            self.assertEqual(response["id"], request_id)
            self.assertEqual(response["error"]["code"], -32601)
        peer.send(flow_run())
        self.assertRootSuccess(peer, None)

    def test_invalid_root_params_get_invalid_params_then_exit(self) -> None:
        invalid = [
            {"runId": "forbidden"},
            {"protocol": "run/2"},
            {"settings": []},
            {"scratch": ""},
            {"deadlineUnixMs": -1},
            {"deadlineUnixMs": 1.5},
            {"attachments": {"Bad": {"path": "/x", "access": "read"}}},
            {"attachments": {"src": {"path": "/x", "access": "write"}}},
            {"channels": {"e": {"endpoint": "g:1", "direction": "receive", "delivery": "direct"}}},
        ]
        for override in invalid:
            with self.subTest(override=override):
                peer = self.peer(PROBE)
                peer.send(flow_run(**override))
                response = peer.receive()
                self.assertEqual(response["id"], "host:1")
                self.assertEqual(response["error"]["code"], -32602)
                self.assertEqual(peer.finish(), 0)

    def test_attachment_and_channel_counts_at_and_past_256(self) -> None:
        for count, code in ((256, None), (257, -32602)):
            with self.subTest(count=count):
                attachments = {f"a{i}": {"path": "/p", "access": "read"} for i in range(count)}
                peer = self.peer(PROBE)
                peer.send(flow_run(attachments=attachments))
                response = peer.receive()
                if code is None:
                    self.assertIn("result", response)
                else:
                    self.assertEqual(response["error"]["code"], code)
                self.assertEqual(peer.finish(), 0)

    def test_missing_params_get_invalid_params(self) -> None:
        peer = self.peer(PROBE)
        peer.send({"jsonrpc": "2.0", "id": "host:1", "method": "flow/run"})
        self.assertEqual(peer.receive()["error"]["code"], -32602)
        self.assertEqual(peer.finish(), 0)

    def test_invalid_json_gets_parse_error_with_null_id_then_close(self) -> None:
        for payload in (
            b"{bad}\n",
            b"\n",
            b"\xef\xbb\xbf{}\n",
            b'{"a":1,"a":2}\n',
            b'{"a":"\\ud800"}\n',
            b'{"a":9007199254740993}\n',
            b'{"a":NaN}\n',
            b'{"a":1e400}\n',
            b"{} {}\n",
        ):
            with self.subTest(payload=payload):
                peer = self.peer(PROBE)
                peer.send_raw(payload)
                response = peer.receive()
                self.assertIsNone(response["id"])
                self.assertEqual(response["error"]["code"], -32700)
                self.assertNotEqual(peer.expect_closed(), 0)

    def test_batch_scalar_and_bad_envelopes_get_invalid_request_then_close(self) -> None:
        for message, reply_id in (
            ([flow_run()], None),
            ([], None),
            (5, None),
            ("flow/run", None),
            ({"jsonrpc": "1.0", "id": "host:1", "method": "flow/run", "params": {}}, "host:1"),
            ({"jsonrpc": "2.0", "id": 1, "method": "flow/run", "params": {}}, None),
            ({"jsonrpc": "2.0", "id": "host:1", "method": "flow/run", "params": None}, "host:1"),
            ({"jsonrpc": "2.0", "method": "request/cancel", "params": 3}, None),
        ):
            with self.subTest(message=message):
                peer = self.peer(PROBE)
                peer.send(message)
                response = peer.receive()
                self.assertEqual(response["id"], reply_id)
                self.assertEqual(response["error"]["code"], -32600)
                self.assertNotEqual(peer.expect_closed(), 0)

    def test_transport_failures_close_without_a_reply(self) -> None:
        for payload in (b'{"a":"\xff"}\n', b'{"jsonrpc":"2.0"'):
            with self.subTest(payload=payload):
                peer = self.peer(PROBE)
                peer.send_raw(payload)
                if not payload.endswith(b"\n"):
                    peer.process.stdin.close()
                self.assertNotEqual(peer.expect_closed(), 0)

    def test_frame_of_exactly_16_mib_is_accepted_and_one_more_byte_closes(self) -> None:
        base = encode_frame(flow_run())[:-1]
        for size, accepted in ((FRAME_LIMIT, True), (FRAME_LIMIT + 1, False)):
            with self.subTest(size=size):
                peer = self.peer(PROBE)
                peer.send_raw(base + b" " * (size - len(base)) + b"\n")
                if accepted:
                    self.assertRootSuccess(peer, None)
                else:
                    self.assertNotEqual(peer.expect_closed(), 0)

    def test_depth_128_is_accepted_and_129_is_a_parse_error(self) -> None:
        # The frame object is depth 1, params 2, input 3.
        for depth, accepted in ((128, True), (129, False)):
            with self.subTest(depth=depth):
                nested: Any = None
                for _ in range(depth - 3):
                    nested = [nested]
                peer = self.peer(PROBE)
                peer.send(flow_run(input=nested))
                response = peer.receive()
                if accepted:
                    self.assertEqual(response["result"]["outcome"], "done")
                    self.assertEqual(peer.finish(), 0)
                else:
                    self.assertEqual(response["error"]["code"], -32700)
                    self.assertNotEqual(peer.expect_closed(), 0)

    def test_host_request_lifetime_allows_65536_and_the_65537th_is_fatal(self) -> None:
        peer = self.peer(PROBE)
        unknown = b"".join(
            encode_frame({"jsonrpc": "2.0", "id": f"host:x{index}", "method": "nonsense"})
            for index in range(65_535)
        )
        peer.send_raw(unknown + encode_frame(flow_run("host:root", input={"case": "sleep"})))
        for _ in range(65_535):
            self.assertEqual(peer.receive()["error"]["code"], -32601)
        peer.expect_quiet(0.1)  # the 65,536th request, flow/run, is running
        peer.send({"jsonrpc": "2.0", "id": "host:one-more", "method": "nonsense"})
        self.assertNotEqual(peer.expect_closed(), 0)
        self.assertIn("65,536", peer.stderr)

    def test_reused_host_request_id_is_fatal(self) -> None:
        peer = self.peer(PROBE)
        peer.send({"jsonrpc": "2.0", "id": "host:1", "method": "nonsense"})
        self.assertEqual(peer.receive()["error"]["code"], -32601)
        peer.send(flow_run("host:1"))
        self.assertNotEqual(peer.expect_closed(), 0)


def grant(
    endpoint: str, direction: str, delivery: str = "direct", start: int | None = None
) -> dict:
    value: dict[str, Any] = {"endpoint": endpoint, "direction": direction, "delivery": delivery}
    if direction == "receive":
        value["startSequence"] = 1 if start is None else start
    return value


def item(request_id: str, sequence: int, value: Any) -> dict[str, Any]:
    return success(request_id, {"item": {"sequence": sequence, "value": value}})


def end(request_id: str, last: int) -> dict[str, Any]:
    return success(request_id, {"end": {"lastSequence": last}})


class ChannelTests(PeerTestCase):
    def start_channels(self, peer: HostPeer) -> tuple[dict, dict]:
        peer.send(flow_run(input={"topic": "x"}))
        create = peer.receive_request("channel/create")
        self.assertEqual(create["params"], {})
        peer.respond(
            success(
                create["id"], {"send": grant("ch:w", "send"), "receive": grant("ch:r", "receive")}
            )
        )
        first, second = peer.receive(), peer.receive()
        calls = {message["method"]: message for message in (first, second)}
        work, read = calls["capability/call"], calls["channel/next"]
        self.assertEqual(work["params"]["channels"], {"events": "ch:w"})
        self.assertEqual(read["params"], {"endpoint": "ch:r"})
        return work, read

    def test_direct_channel_is_read_to_its_end_while_the_call_runs(self) -> None:
        peer = self.peer(CHANNELS)
        work, read = self.start_channels(peer)
        peer.respond(item(read["id"], 1, {"text": "a"}))
        read = peer.receive_request("channel/next")
        peer.respond(item(read["id"], 2, "b"))
        read = peer.receive_request("channel/next")
        peer.respond(end(read["id"], 2))
        peer.expect_quiet(0.1)  # ended: no disposal request
        peer.respond(success(work["id"], {"value": {"answer": 42}}))
        self.assertRootSuccess(
            peer, {"complete": True, "values": [{"text": "a"}, "b"], "work": {"answer": 42}}
        )

    def test_lagged_read_marks_the_observation_incomplete(self) -> None:
        peer = self.peer(CHANNELS)
        work, read = self.start_channels(peer)
        peer.respond(item(read["id"], 1, "a"))
        read = peer.receive_request("channel/next")
        peer.respond(operation_error(read["id"], "LAGGED"))
        # The failed read settled the receiver and the component does not
        # close it: no channel/release follows (the host holds the cause).
        peer.expect_quiet(QUIET_SECONDS)
        peer.respond(success(work["id"], {"value": None}))
        self.assertRootSuccess(peer, {"complete": False, "values": ["a"], "work": None})

    def test_read_sequence_gap_is_fatal(self) -> None:
        peer = self.peer(CHANNELS)
        work, read = self.start_channels(peer)
        peer.respond(item(read["id"], 2, "skipped one"))
        self.assertNotEqual(peer.expect_closed(), 0)
        self.assertIn("PROTOCOL_ERROR", peer.stderr)

    def test_failed_call_disposes_the_receiver_and_fails_the_run(self) -> None:
        peer = self.peer(CHANNELS)
        work, read = self.start_channels(peer)
        peer.respond(operation_error(work["id"], "INVALID_INPUT"))
        release = peer.receive_request("channel/release")
        self.assertEqual(release["params"], {"endpoint": "ch:r"})
        peer.expect_quiet(0.1)  # the retained read still needs its response
        peer.respond(end(read["id"], 0))
        peer.respond(success(release["id"], {"status": "released"}))
        self.assertRootError(peer, "INVALID_INPUT")

    def start_broadcast(self, peer: HostPeer) -> list[dict[str, Any]]:
        """The broadcast component up to its two concurrent first reads."""
        peer.send(flow_run())
        create = peer.receive_request("channel/create")
        self.assertEqual(create["params"], {"delivery": "broadcast"})
        peer.respond(
            success(create["id"], {"send": grant("b:w", "send", "broadcast"), "source": "b:src"})
        )
        subscribe = peer.receive_request("channel/subscribe")
        self.assertEqual(subscribe["params"], {"source": "b:src"})
        peer.respond(success(subscribe["id"], grant("b:early", "receive", "broadcast", 1)))
        send = peer.receive_request("channel/send")
        self.assertEqual(send["params"], {"endpoint": "b:w", "value": "before-late"})
        peer.respond(success(send["id"], None))
        subscribe = peer.receive_request("channel/subscribe")
        peer.respond(success(subscribe["id"], grant("b:late", "receive", "broadcast", 2)))
        send = peer.receive_request("channel/send")
        self.assertEqual(send["params"]["value"], "after-late")
        peer.respond(success(send["id"], None))
        close = peer.receive_request("channel/close")
        self.assertEqual(close["params"], {"endpoint": "b:w"})
        peer.respond(success(close["id"], None))
        reads = [peer.receive_request("channel/next") for _ in range(2)]
        self.assertEqual(
            sorted(read["params"]["endpoint"] for read in reads), ["b:early", "b:late"]
        )
        return reads

    def hold_a_subscription(self, peer: HostPeer, case: str) -> None:
        """Start `case` up to a held broadcast subscription (2 requests issued)."""
        peer.send(flow_run(input={"case": case}))
        create = peer.receive_request("channel/create")
        peer.respond(
            success(create["id"], {"send": grant("b:w", "send", "broadcast"), "source": "b:src"})
        )
        subscribe = peer.receive_request("channel/subscribe")
        peer.respond(success(subscribe["id"], grant("b:r", "receive", "broadcast", 1)))

    def test_settlement_reserve_keeps_one_window_slot_for_the_release(self) -> None:
        # Run/1 §1, SDK §6: while an endpoint may need settling, ordinary
        # calls leave one of the 64 slots free; the release takes it.
        peer = self.peer(PROBE)
        self.hold_a_subscription(peer, "settlement-reserve-window")
        calls = [peer.receive_request("capability/call") for _ in range(63)]
        release = peer.receive_request("channel/release")
        self.assertEqual(release["params"], {"endpoint": "b:r"})
        self.assertEqual(len(peer.requests_on_wire), 64)
        peer.expect_quiet()  # the 64th call waits: the reserve is still owed
        peer.respond(success(release["id"], {"status": "released"}))
        calls.append(peer.receive_request("capability/call"))  # settled: the reserve is free
        self.assertEqual(
            {call["params"]["operationId"] for call in calls},
            {f"reserve:{index}" for index in range(1, 65)},
        )
        for call in calls:
            peer.respond(success(call["id"], {"value": None}))
        self.assertRootSuccess(peer, {"settled": 64})
        self.assertEqual(peer.max_on_wire, 64)

    def test_settlement_reserve_keeps_one_lifetime_request_for_the_release(self) -> None:
        # 2 requests for the subscription, 65,533 ordinary calls; the next
        # ordinary call is refused locally so the release is the 65,536th.
        peer = self.peer(PROBE)
        self.hold_a_subscription(peer, "settlement-reserve-lifetime")
        ordinary = 65_536 - 2 - 1
        for size in [63] * (ordinary // 63) + [ordinary % 63]:
            calls = [peer.receive() for _ in range(size)]
            self.assertEqual({c["method"] for c in calls}, {"capability/call"})
            peer.send_raw(b"".join(encode_frame(success(c["id"], {"value": None})) for c in calls))
            peer.requests_on_wire.clear()
        release = peer.receive_request("channel/release")
        self.assertEqual(release["id"], "component:65536")
        peer.respond(success(release["id"], {"status": "released"}))
        self.assertRootSuccess(peer, {"accepted": ordinary, "refused": ["RESOURCE_EXHAUSTED"]})
        self.assertEqual(len(peer.seen_request_ids), 65_536)

    def test_broadcast_early_and_late_readers(self) -> None:
        peer = self.peer(BROADCAST)
        reads = self.start_broadcast(peer)
        streams = {
            "b:early": [(1, "before-late"), (2, "after-late")],
            "b:late": [(2, "after-late")],
        }
        while reads:
            read = reads.pop(0)
            endpoint = read["params"]["endpoint"]
            if streams[endpoint]:
                sequence, value = streams[endpoint].pop(0)
                peer.respond(item(read["id"], sequence, value))
                reads.append(peer.receive_request("channel/next"))
            else:
                peer.respond(end(read["id"], 2))
        self.assertRootSuccess(
            peer,
            {
                "early": {"start": 1, "values": ["before-late", "after-late"], "complete": True},
                "late": {"start": 2, "values": ["after-late"], "complete": True},
            },
        )

    def test_broadcast_reader_that_lags_settles_while_the_other_completes(self) -> None:
        peer = self.peer(BROADCAST)
        reads = {read["params"]["endpoint"]: read for read in self.start_broadcast(peer)}
        peer.respond(item(reads["b:early"]["id"], 1, "before-late"))
        peer.respond(item(reads["b:late"]["id"], 2, "after-late"))
        reads = {
            read["params"]["endpoint"]: read
            for read in (peer.receive_request("channel/next") for _ in range(2))
        }
        peer.respond(operation_error(reads["b:early"]["id"], "LAGGED"))
        # The lagging reader is settled by its failed read: no release, no
        # further read, while the other reader is still open.
        peer.expect_quiet()
        peer.respond(end(reads["b:late"]["id"], 2))
        self.assertRootSuccess(
            peer,
            {
                "early": {"start": 1, "values": ["before-late"], "complete": False},
                "late": {"start": 2, "values": ["after-late"], "complete": True},
            },
        )

    def test_unread_subscription_is_abandonment_and_is_disposed(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "channel", "behaviour": "abandon-subscription"}))
        create = peer.receive_request("channel/create")
        peer.respond(
            success(create["id"], {"send": grant("b:w", "send", "broadcast"), "source": "b:src"})
        )
        subscribe = peer.receive_request("channel/subscribe")
        peer.respond(success(subscribe["id"], grant("b:r", "receive", "broadcast", 1)))
        release = peer.receive_request("channel/release")
        self.assertEqual(release["params"], {"endpoint": "b:r"})
        peer.expect_quiet(0.1)
        peer.respond(success(release["id"], {"status": "released"}))
        self.assertRootError(peer, "EXECUTION_FAILED")

    def test_cancelled_read_disposes_and_drains_both_responses(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "channel", "behaviour": "cancel-read"}))
        create = peer.receive_request("channel/create")
        peer.respond(
            success(
                create["id"], {"send": grant("ch:w", "send"), "receive": grant("ch:r", "receive")}
            )
        )
        read = peer.receive_request("channel/next")
        release = peer.receive_request("channel/release")
        self.assertEqual(release["params"], {"endpoint": "ch:r"})
        peer.expect_quiet(0.1)
        peer.respond(success(release["id"], {"status": "failed", "code": "LAGGED"}))
        peer.expect_quiet(0.1)  # the original read is still retained
        peer.respond(item(read["id"], 1, "committed but never exposed"))
        self.assertRootSuccess(peer, "close raised LAGGED")

    def test_monitor_stops_after_one_item_disposes_and_forwards_progress(self) -> None:
        peer = self.peer(CHANNEL_WIRING)
        channels = {"events": grant("in:r", "receive"), "progress": grant("out:w", "send")}
        peer.send(flow_run(input={"role": "monitor", "stop": True}, channels=channels))
        read = peer.receive_request("channel/next")
        self.assertEqual(read["params"], {"endpoint": "in:r"})
        peer.respond(item(read["id"], 1, {"text": "hello", "kind": "note"}))
        send = peer.receive_request("channel/send")
        self.assertEqual(send["params"], {"endpoint": "out:w", "value": "hello"})
        peer.respond(success(send["id"], None))
        release = peer.receive_request("channel/release")
        self.assertEqual(release["params"], {"endpoint": "in:r"})
        peer.respond(success(release["id"], {"status": "released"}))
        close = peer.receive_request("channel/close")
        self.assertEqual(close["params"], {"endpoint": "out:w"})
        peer.respond(success(close["id"], None))
        self.assertRootSuccess(peer, {"complete": False, "selected": ["hello"]})

    def test_monitor_closing_its_lagged_receiver_sends_one_release(self) -> None:
        peer = self.peer(CHANNEL_WIRING)
        channels = {"events": grant("in:r", "receive"), "progress": grant("out:w", "send")}
        peer.send(flow_run(input={"role": "monitor"}, channels=channels))
        read = peer.receive_request("channel/next")
        peer.respond(item(read["id"], 1, {"text": "kept"}))
        send = peer.receive_request("channel/send")
        peer.respond(success(send["id"], None))
        read = peer.receive_request("channel/next")
        peer.respond(operation_error(read["id"], "LAGGED"))
        # Leaving `async with` after the failed read closes the receiver:
        # exactly one release, whose failed answer is its disposition.
        release = peer.receive_request("channel/release")
        self.assertEqual(release["params"], {"endpoint": "in:r"})
        peer.expect_quiet(0.1)
        peer.respond(success(release["id"], {"status": "failed", "code": "LAGGED"}))
        close = peer.receive_request("channel/close")
        self.assertEqual(close["params"], {"endpoint": "out:w"})
        peer.respond(success(close["id"], None))
        self.assertRootSuccess(peer, {"complete": False, "selected": ["kept"]})

    def test_root_wires_worker_and_monitor_after_a_rejected_mapping(self) -> None:
        peer = self.peer(CHANNEL_WIRING)
        peer.send(flow_run(input={"role": "root"}))
        create = peer.receive_request("channel/create")
        self.assertEqual(create["params"], {"contract": "./updates.json"})
        peer.respond(
            success(
                create["id"], {"send": grant("u:w", "send"), "receive": grant("u:r", "receive")}
            )
        )
        incompatible = peer.receive_request("flow/run-child")
        self.assertEqual(incompatible["params"]["channels"], {"events": "u:w"})
        peer.respond(operation_error(incompatible["id"], "INVALID_INPUT"))
        children = peer.receive_requests(2)
        self.assertEqual(children["worker"]["params"]["channels"], {"events": "u:w"})
        self.assertEqual(children["monitor"]["params"]["channels"], {"events": "u:r"})
        self.assertEqual(children["monitor"]["params"]["input"], {"role": "monitor", "stop": False})
        work = {"outcome": "done", "output": "answer"}
        seen = {"outcome": "done", "output": {"complete": True, "selected": []}}
        peer.respond(success(children["monitor"]["id"], seen))
        peer.respond(success(children["worker"]["id"], work))
        self.assertRootSuccess(peer, {"incompatible": True, "work": work, "monitor": seen})

    def test_a_locally_used_endpoint_cannot_be_transferred(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "channel", "behaviour": "reuse-claimed"}))
        create = peer.receive_request("channel/create")
        peer.respond(
            success(
                create["id"], {"send": grant("ch:w", "send"), "receive": grant("ch:r", "receive")}
            )
        )
        send = peer.receive_request("channel/send")
        self.assertEqual(send["params"], {"endpoint": "ch:w", "value": 1})
        peer.respond(success(send["id"], None))
        self.assertRootSuccess(peer, "refused")
        self.assertEqual(len(peer.seen_request_ids), 2)

    def test_local_channel_argument_checks(self) -> None:
        peer = self.peer(PROBE)
        peer.send(flow_run(input={"case": "channel", "behaviour": "schema-and-contract"}))
        self.assertRootSuccess(peer, "refused")
        self.assertEqual(peer.seen_request_ids, set())


if __name__ == "__main__":
    unittest.main()
