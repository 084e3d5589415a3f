"""Run/1 wire grammar: LF framing, JSON-RPC envelopes and closed param shapes.

This room knows the bytes and shapes of Run/1 messages. It holds no Run
state: the session decides what a classified message means right now.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any
from collections.abc import Callable

from . import _json1
from ._errors import WIRE_CODES

# Run/1 §1 framing and request budgets.
MAX_FRAME_BYTES = 16_777_216
MAX_PENDING_REQUESTS = 64
MAX_LIFETIME_REQUESTS = 65_536
# Run/1 §1 request-ID and §2 LocalName grammars.
MAX_WIRE_ID_BYTES = 128
MAX_LOCAL_NAME_BYTES = 64
# Run/1 §3 and §4 field bounds.
MAX_ATTACHMENTS = 256
MAX_CHANNELS = 256
MAX_INTENT_CHARS = 16_384
# Run/1 §7: JSON-RPC error message length in Unicode scalar values.
MAX_ERROR_MESSAGE_CHARS = 1_024

PROTOCOL = "run/1"
JSONRPC = "2.0"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
OPERATION_ERROR = -32000
STANDARD_ERROR_CODES = frozenset(
    {PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR}
)

_WIRE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]*", re.ASCII)
_LOCAL_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)


def is_wire_id(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 1 <= len(value) <= MAX_WIRE_ID_BYTES
        and _WIRE_ID.fullmatch(value) is not None
    )


def is_local_name(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 1 <= len(value) <= MAX_LOCAL_NAME_BYTES
        and _LOCAL_NAME.fullmatch(value) is not None
    )


def bounded_message(text: str, fallback: str) -> str:
    """A JSON-RPC error message: 1..1,024 Unicode scalar values."""
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    if not text:
        text = fallback
    return text[:MAX_ERROR_MESSAGE_CHARS]


# --- framing -----------------------------------------------------------------

READ_CHUNK_BYTES = 1 << 20


class FrameReader(threading.Thread):
    """Reads LF-terminated frames from a file descriptor on its own thread.

    Delivers each complete frame payload (without LF) to `on_frame` and then
    exactly one end reason to `on_end`: "eof", "incomplete", "oversized" or
    "read-error". Both callbacks run on the reader thread; the caller hands
    them to its event loop.
    """

    def __init__(
        self,
        fd: int,
        on_frame: Callable[[bytes], None],
        on_end: Callable[[str], None],
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        super().__init__(name="run1-frame-reader", daemon=True)
        self._fd = fd
        self._on_frame = on_frame
        self._on_end = on_end
        self._max = max_frame_bytes

    def run(self) -> None:
        self._on_end(self._read_frames())

    def _read_frames(self) -> str:
        pending = bytearray()
        while True:
            try:
                chunk = os.read(self._fd, READ_CHUNK_BYTES)
            except OSError:
                return "read-error"
            if not chunk:
                return "incomplete" if pending else "eof"
            start = 0
            while True:
                newline = chunk.find(b"\n", start)
                if newline < 0:
                    pending += chunk[start:]
                    if len(pending) > self._max:
                        return "oversized"
                    break
                pending += chunk[start:newline]
                if len(pending) > self._max:
                    return "oversized"
                frame = bytes(pending)
                pending.clear()
                if not self._on_frame(frame):
                    return "stopped"
                start = newline + 1


# A document of at most this many bytes cannot exceed depth 128 (that needs
# 128 open/close pairs plus a leaf) or any other JSON/1 count limit.
SMALL_FRAME_BYTES = 2 * _json1.MAX_DEPTH


def encode_frame(message: dict[str, Any]) -> bytes:
    """Encode one outbound frame (LF included) of snapshotted values, checking limits."""
    try:
        payload = _json1.encode(message)
    except (TypeError, ValueError) as error:  # includes lone surrogates
        raise _json1.Json1Error(f"frame is not JSON/1: {error}") from None
    if len(payload) > MAX_FRAME_BYTES:
        raise _json1.Json1Error("frame exceeds 16,777,216 bytes")
    if len(payload) > SMALL_FRAME_BYTES:
        _json1.check_limits(message)
    return payload + b"\n"


# --- envelopes ------------------------------------------------------------------


class EnvelopeError(Exception):
    """An invalid JSON-RPC envelope; `reply_id` is an unambiguous valid ID or None."""

    def __init__(self, reason: str, reply_id: str | None = None) -> None:
        super().__init__(reason)
        self.reply_id = reply_id


class Envelope:
    __slots__ = ("kind", "id", "method", "params", "result", "error")

    def __init__(self, kind: str, **fields: Any) -> None:
        self.kind = kind
        self.id = fields.get("id")
        self.method = fields.get("method")
        self.params = fields.get("params")
        self.result = fields.get("result")
        self.error = fields.get("error")


_REQUEST_MEMBERS = frozenset({"jsonrpc", "id", "method", "params"})
_RESPONSE_MEMBERS = frozenset({"jsonrpc", "id", "result", "error"})


def classify(message: Any) -> Envelope:
    """Classify a decoded frame as request, notification or response."""
    if not isinstance(message, dict):
        raise EnvelopeError("frame is not a JSON-RPC object")
    valid_id = message.get("id") if is_wire_id(message.get("id")) else None
    if message.get("jsonrpc") != JSONRPC:
        raise EnvelopeError("jsonrpc must be exactly 2.0", valid_id)
    if "method" in message:
        if not message.keys() <= _REQUEST_MEMBERS:
            raise EnvelopeError("unknown request member", valid_id)
        method = message["method"]
        if not isinstance(method, str):
            raise EnvelopeError("method must be a string", valid_id)
        if "params" in message and not isinstance(message["params"], (dict, list)):
            raise EnvelopeError("params must be an object or array", valid_id)
        if "id" not in message:
            return Envelope("notification", method=method, params=message.get("params"))
        if valid_id is None:
            raise EnvelopeError("request id must be a Run/1 request ID token")
        return Envelope("request", id=valid_id, method=method, params=message.get("params"))
    if not message.keys() <= _RESPONSE_MEMBERS or "id" not in message:
        raise EnvelopeError("frame is neither request nor response", valid_id)
    if ("result" in message) == ("error" in message):
        raise EnvelopeError("response needs exactly one of result and error", valid_id)
    response_id = message["id"]
    if response_id is not None and valid_id is None:
        raise EnvelopeError("response id must be a Run/1 request ID token")
    if response_id is None and "error" not in message:
        raise EnvelopeError("a success response needs an id")
    return Envelope(
        "response", id=response_id, result=message.get("result"), error=message.get("error")
    )


# --- closed param and result shapes ---------------------------------------------------


class InvalidParams(Exception):
    """Method params that violate the closed Run/1 shape (JSON-RPC -32602)."""


def _closed(value: Any, required: set[str], optional: set[str], what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidParams(f"{what} must be an object")
    missing = required - value.keys()
    if missing:
        raise InvalidParams(f"{what} is missing {', '.join(sorted(missing))}")
    unknown = value.keys() - required - optional
    if unknown:
        raise InvalidParams(f"{what} has unknown member {', '.join(sorted(unknown))}")
    return value


def parse_root_params(params: Any) -> dict[str, Any]:
    """Validate `flow/run` params; returns them with deadline as an int."""
    _closed(
        params,
        {"protocol", "input", "settings", "attachments", "scratch", "deadlineUnixMs"},
        {"channels"},
        "flow/run params",
    )
    if params["protocol"] != PROTOCOL:
        raise InvalidParams("protocol must be exactly run/1")
    if not isinstance(params["settings"], dict):
        raise InvalidParams("settings must be an object")
    attachments = params["attachments"]
    if not isinstance(attachments, dict):
        raise InvalidParams("attachments must be an object")
    if len(attachments) > MAX_ATTACHMENTS:
        raise InvalidParams("more than 256 attachments")
    for name, attachment in attachments.items():
        if not is_local_name(name):
            raise InvalidParams(f"attachment name {name!r} is not a LocalName")
        _closed(attachment, {"path", "access"}, set(), f"attachment {name}")
        if not isinstance(attachment["path"], str) or not attachment["path"]:
            raise InvalidParams(f"attachment {name} path must be a nonempty string")
        if attachment["access"] not in ("read", "read-write"):
            raise InvalidParams(f"attachment {name} access must be read or read-write")
    scratch = params["scratch"]
    if not isinstance(scratch, str) or not scratch:
        raise InvalidParams("scratch must be a nonempty string")
    deadline = params["deadlineUnixMs"]
    if isinstance(deadline, bool) or not isinstance(deadline, int) or deadline < 0:
        raise InvalidParams("deadlineUnixMs must be a nonnegative safe integer")
    channels = params.get("channels", {})
    parse_channel_grants(channels)
    return params


def parse_channel_grants(channels: Any) -> None:
    if not isinstance(channels, dict):
        raise InvalidParams("channels must be an object")
    if len(channels) > MAX_CHANNELS:
        raise InvalidParams("more than 256 channels")
    seen: set[str] = set()
    for name, grant in channels.items():
        if not is_local_name(name):
            raise InvalidParams(f"channel name {name!r} is not a LocalName")
        parse_grant(grant, f"channel {name}")
        if grant["endpoint"] in seen:
            raise InvalidParams("channel endpoints must be distinct")
        seen.add(grant["endpoint"])


# A host whose last label is a number (decimal, or hex after 0x) is an IPv4
# literal in one of its spellings (127.1, 0x7f.0.0.1, 1.2.3), never a DNS name.
_CONTRACT_ID = re.compile(
    r"https://(?![a-z0-9.-]*\.(?:[0-9]+|0x[0-9a-f]*)/)"
    r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)+"
    r"/(?!\.{1,2}(?:/|$))[a-z0-9._~-]+(?:/(?!\.{1,2}(?:/|$))[a-z0-9._~-]+)*",
    re.ASCII,
)
_VERSION = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)", re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)


def parse_grant(grant: Any, what: str) -> dict[str, Any]:
    """Validate one closed endpoint grant (Run/1 §5.1)."""
    if not isinstance(grant, dict):
        raise InvalidParams(f"{what} grant must be an object")
    direction = grant.get("direction")
    if direction == "send":
        _closed(grant, {"endpoint", "direction", "delivery"}, {"contract"}, what)
    elif direction == "receive":
        _closed(grant, {"endpoint", "direction", "delivery", "startSequence"}, {"contract"}, what)
        start = grant["startSequence"]
        if isinstance(start, bool) or not isinstance(start, int) or start < 1:
            raise InvalidParams(f"{what} startSequence must be a positive integer")
        if grant["delivery"] == "direct" and start != 1:
            raise InvalidParams(f"{what} direct receivers start at sequence 1")
    else:
        raise InvalidParams(f"{what} direction must be send or receive")
    if not is_wire_id(grant["endpoint"]):
        raise InvalidParams(f"{what} endpoint is not a request-ID token")
    if grant["delivery"] not in ("direct", "broadcast"):
        raise InvalidParams(f"{what} delivery must be direct or broadcast")
    if "contract" in grant:
        parse_contract_identity(grant["contract"], what)
    return grant


def parse_contract_identity(contract: Any, what: str) -> dict[str, str]:
    _closed(contract, {"id", "version", "digest"}, set(), f"{what} contract")
    if not isinstance(contract["id"], str) or not _CONTRACT_ID.fullmatch(contract["id"]):
        raise InvalidParams(f"{what} contract id is invalid")
    if not isinstance(contract["version"], str) or not _VERSION.fullmatch(contract["version"]):
        raise InvalidParams(f"{what} contract version is invalid")
    if not isinstance(contract["digest"], str) or not _DIGEST.fullmatch(contract["digest"]):
        raise InvalidParams(f"{what} contract digest is invalid")
    return contract


def parse_cancel_target(params: Any) -> str:
    """Validate `request/cancel` params; raises InvalidParams when malformed."""
    _closed(params, {"requestId"}, set(), "request/cancel params")
    if not is_wire_id(params["requestId"]):
        raise InvalidParams("requestId is not a request-ID token")
    return params["requestId"]


class InvalidResponse(Exception):
    """A correlated response whose shape violates Run/1: fatal PROTOCOL_ERROR."""


def parse_run_result(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict) or result.keys() != {"outcome", "output"}:
        raise InvalidResponse("child result must be exactly {outcome, output}")
    if not is_local_name(result["outcome"]):
        raise InvalidResponse("child outcome is not a LocalName")
    return result


def parse_capability_result(result: Any) -> tuple[bool, Any, Any]:
    """Returns (is_error, value_or_name, error_data)."""
    if isinstance(result, dict) and result.keys() == {"value"}:
        return False, result["value"], None
    if isinstance(result, dict) and result.keys() == {"error"}:
        error = result["error"]
        if isinstance(error, dict) and error.keys() == {"name", "data"}:
            if is_local_name(error["name"]):
                return True, error["name"], error["data"]
    raise InvalidResponse("capability result must be exactly {value} or {error:{name,data}}")


def parse_operation_error(error: Any) -> tuple[str, str, Any]:
    """Returns (code, message, details) of a -32000 error; raises InvalidResponse."""
    if not isinstance(error, dict) or not error.keys() <= {"code", "message", "data"}:
        raise InvalidResponse("error object has unknown members")
    code = error.get("code")
    if code in STANDARD_ERROR_CODES:
        raise InvalidResponse(f"peer answered a Run/1 request with JSON-RPC error {code}")
    if code != OPERATION_ERROR:
        raise InvalidResponse(f"unknown JSON-RPC error code {code!r}")
    message = error.get("message")
    if not isinstance(message, str) or not 1 <= len(message) <= MAX_ERROR_MESSAGE_CHARS:
        raise InvalidResponse("operational error message must be 1..1,024 characters")
    data = error.get("data")
    if not isinstance(data, dict) or "code" not in data or not data.keys() <= {"code", "details"}:
        raise InvalidResponse("operational error data must be {code, details?}")
    if data["code"] not in WIRE_CODES:
        raise InvalidResponse(f"unknown operational code {data['code']!r}")
    return data["code"], message, data.get("details")


# --- channel results (Run/1 §5.1) -------------------------------------------------------

MAX_CONTRACT_REFERENCE_CHARS = 4_096
_CONTRACT_REFERENCE = re.compile(r"\./[^\\]+", re.DOTALL)


def is_contract_reference(value: Any) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= MAX_CONTRACT_REFERENCE_CHARS
        and _CONTRACT_REFERENCE.fullmatch(value) is not None
    )


def _grant(value: Any, direction: str, delivery: str, what: str) -> dict[str, Any]:
    try:
        grant = parse_grant(value, what)
    except InvalidParams as error:
        raise InvalidResponse(str(error)) from None
    if grant["direction"] != direction or grant["delivery"] != delivery:
        raise InvalidResponse(f"{what} must be a {delivery} {direction} grant")
    return grant


def parse_null(result: Any) -> None:
    if result is not None:
        raise InvalidResponse("result must be null")
    return None


def parse_direct_channel(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(result, dict) or result.keys() != {"send", "receive"}:
        raise InvalidResponse("direct channel result must be exactly {send, receive}")
    send = _grant(result["send"], "send", "direct", "send")
    receive = _grant(result["receive"], "receive", "direct", "receive")
    if send["endpoint"] == receive["endpoint"]:
        raise InvalidResponse("channel endpoints must be distinct")
    return send, receive


def parse_broadcast_channel(result: Any) -> tuple[dict[str, Any], str]:
    if not isinstance(result, dict) or result.keys() != {"send", "source"}:
        raise InvalidResponse("broadcast channel result must be exactly {send, source}")
    send = _grant(result["send"], "send", "broadcast", "send")
    if not is_wire_id(result["source"]):
        raise InvalidResponse("broadcast source is not a request-ID token")
    return send, result["source"]


def parse_subscription(result: Any) -> dict[str, Any]:
    return _grant(result, "receive", "broadcast", "subscription")


def _sequence(value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidResponse("sequence must be an integer")
    return value


def parse_read(result: Any) -> tuple[str, Any, int]:
    """Returns ("item", value, sequence) or ("end", None, lastSequence)."""
    if isinstance(result, dict) and result.keys() == {"item"}:
        item = result["item"]
        if isinstance(item, dict) and item.keys() == {"sequence", "value"}:
            return "item", item["value"], _sequence(item["sequence"], 1)
    if isinstance(result, dict) and result.keys() == {"end"}:
        end = result["end"]
        if isinstance(end, dict) and end.keys() == {"lastSequence"}:
            return "end", None, _sequence(end["lastSequence"], 0)
    raise InvalidResponse("read result must be {item:{sequence,value}} or {end:{lastSequence}}")


def parse_release(result: Any) -> tuple[str, Any, Any]:
    """Returns ("released"|"ended"|"failed", lastSequence or code, details)."""
    if isinstance(result, dict):
        status = result.get("status")
        if status == "released" and result.keys() == {"status"}:
            return "released", None, None
        if status == "ended" and result.keys() == {"status", "lastSequence"}:
            return "ended", _sequence(result["lastSequence"], 0), None
        if (
            status == "failed"
            and "code" in result
            and result.keys() <= {"status", "code", "details"}
            and result["code"] in WIRE_CODES
        ):
            return "failed", result["code"], result.get("details")
    raise InvalidResponse("release result must be released, ended or failed")
