"""One Run/1 channel incarnation: the root request, owned calls and completion.

The session owns protocol stdin/stdout after `handle` takes them over. It
serves exactly one root `flow/run`, admits outbound calls only while the
handler runs, never detaches a call, and publishes exactly one root response.
It must never write a frame after that response.
"""

from __future__ import annotations

import asyncio
import collections
import os
import sys
from typing import Any
from collections.abc import Awaitable, Callable, Mapping

from . import _failure, _json1, _wire
from ._errors import LOCAL_CODES, WIRE_CODES, OperationError

# How long a fatal close waits for the cancelled handler before exiting.
FATAL_HANDLER_GRACE_SECONDS = 2.0
# Exit status when the root never received a published response.
EXIT_FAILURE = 1

_QUEUED = "queued"
_WIRE = "wire"
_SETTLED = "settled"
_DROPPED = "dropped"


class _Fatal(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class _Call:
    """One component-originated request and its single local waiter.

    `retain` calls keep their request when the waiter goes away (settlement,
    reads and allocations); other calls are dropped from the queue or get a
    `request/cancel`. A detached call's response goes to `on_late`.
    """

    __slots__ = (
        "request_id",
        "method",
        "frame",
        "parse",
        "future",
        "wire_done",
        "state",
        "detached",
        "retain",
        "internal",
        "on_late",
    )

    def __init__(
        self,
        request_id: str,
        method: str,
        frame: bytes,
        parse: Callable[[Any], Any],
        loop: asyncio.AbstractEventLoop,
        *,
        retain: bool,
        internal: bool,
        on_late: Callable[[Any], None] | None,
    ) -> None:
        self.request_id = request_id
        self.method = method
        self.frame = frame
        self.parse = parse
        self.future: asyncio.Future = loop.create_future()
        self.wire_done: asyncio.Future = loop.create_future()
        self.state = _QUEUED
        self.detached = False
        self.retain = retain
        self.internal = internal
        self.on_late = on_late

    def close_wire(self, state: str) -> None:
        self.state = state
        if not self.wire_done.done():
            self.wire_done.set_result(None)


class Session:
    def __init__(
        self,
        handler: Callable[[Any], Awaitable[Any]],
        context: Callable[[Session, dict[str, Any]], Any],
        in_fd: int,
        out_fd: int,
    ) -> None:
        # The handler's context is built by the room above (`RunContext`), so
        # the session imports neither the context nor the channels.
        self._handler = handler
        self._context = context
        self._in_fd = in_fd
        self._out_fd = out_fd
        self._loop: asyncio.AbstractEventLoop | None = None
        self._finished: asyncio.Future[int] | None = None
        self._stopped = False
        # Host-originated requests.
        self._host_ids: set[str] = set()
        self._host_requests = 0
        self._root_id: str | None = None
        # Component-originated requests.
        self._next_id = 0
        self._issued = 0
        self._wire: dict[str, _Call] = {}
        self._queue: collections.deque[_Call] = collections.deque()
        self._settlement_queue: collections.deque[_Call] = collections.deque()
        # Allocated or pending channel endpoints that may still need settlement.
        self._channel_debt = 0
        self.receivers: set[Any] = set()
        self._idle: asyncio.Event | None = None
        # Root state.
        self._admission_closed: str | None = None
        self._root_cancelled = False
        self._fatal: _Fatal | None = None
        self._published = False
        self._handler_task: asyncio.Task | None = None
        self._supervisor: asyncio.Task | None = None

    # --- lifecycle ------------------------------------------------------------------

    async def main(self) -> int:
        self._loop = asyncio.get_running_loop()
        self._finished = self._loop.create_future()
        self._idle = asyncio.Event()
        self._idle.set()
        reader = _wire.FrameReader(self._in_fd, self._post_frame, self._post_end)
        reader.start()
        status = await self._finished
        self._stopped = True
        return status

    def _post_frame(self, frame: bytes) -> bool:
        if self._stopped:
            return False
        try:
            self._loop.call_soon_threadsafe(self._on_frame, frame)
        except RuntimeError:  # the loop already closed
            return False
        return True

    def _post_end(self, reason: str) -> None:
        if reason == "stopped":
            return
        try:
            self._loop.call_soon_threadsafe(self._on_end, reason)
        except RuntimeError:
            pass

    def _finish(self, status: int) -> None:
        self._stopped = True
        if not self._finished.done():
            self._finished.set_result(status)

    def _on_end(self, reason: str) -> None:
        if self._stopped:
            return
        if reason == "eof":
            self._fail(_Fatal("CHANNEL_LOST", "protocol stdin closed"))
        elif reason == "read-error":
            self._fail(_Fatal("CHANNEL_LOST", "protocol stdin read failed"))
        elif reason == "oversized":
            self._fail(_Fatal("PROTOCOL_ERROR", "frame exceeds 16,777,216 bytes"))
        else:
            self._fail(_Fatal("PROTOCOL_ERROR", "EOF inside an incomplete frame"))

    def _fail(self, fatal: _Fatal) -> None:
        """Fatal close: stop admission, cancel owned work, fail pending calls."""
        if self._stopped or self._fatal is not None:
            return
        self._fatal = fatal
        self._admission_closed = fatal.code
        print(f"jiggy.flow: {fatal.code}: {fatal.reason}", file=sys.stderr, flush=True)
        pending = list(self._queue) + list(self._settlement_queue) + list(self._wire.values())
        self._queue.clear()
        self._settlement_queue.clear()
        self._wire.clear()
        for call in pending:
            call.close_wire(_DROPPED)
            if not call.future.done() and not call.detached:
                call.future.set_exception(OperationError(fatal.code, fatal.reason))
        self._idle.set()
        if self._handler_task is None or self._handler_task.done():
            self._finish(EXIT_FAILURE)
            return
        self._handler_task.cancel()
        self._loop.create_task(self._finish_after_handler())

    async def _finish_after_handler(self) -> None:
        await asyncio.wait({self._handler_task}, timeout=FATAL_HANDLER_GRACE_SECONDS)
        self._finish(EXIT_FAILURE)

    # --- writing --------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        if self._published or self._fatal is not None:
            raise _Fatal("CHANNEL_LOST", "write after the channel closed")
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._out_fd, view)
                view = view[written:]
        except OSError as error:
            raise _Fatal("CHANNEL_LOST", f"protocol stdout write failed: {error}") from None

    def _send_standard_error(self, request_id: str | None, code: int, message: str) -> None:
        """Best-effort standard JSON-RPC error; a failed write is a channel loss."""
        frame = {
            "jsonrpc": _wire.JSONRPC,
            "id": request_id,
            "error": {"code": code, "message": _wire.bounded_message(message, "error")},
        }
        self._write(_wire.encode_frame(frame))

    def _publish(self, frame: dict[str, Any]) -> None:
        """Publish the one root terminal response, then finish with exit 0."""
        try:
            data = _wire.encode_frame(frame)
        except _json1.Json1Error as error:
            frame = _root_error(self._root_id, "INVALID_RESULT", f"result frame: {error}")
            data = _wire.encode_frame(frame)
        try:
            self._write(data)
        except _Fatal as fatal:
            self._fail(fatal)
            return
        self._published = True
        self._finish(0)

    # --- inbound frames ---------------------------------------------------------------

    def _on_frame(self, raw: bytes) -> None:
        if self._stopped or self._fatal is not None:
            return
        try:
            self._dispatch(raw)
        except _Fatal as fatal:
            self._fail(fatal)

    def _dispatch(self, raw: bytes) -> None:
        try:
            message = _json1.decode(raw)
        except UnicodeDecodeError:
            raise _Fatal("PROTOCOL_ERROR", "frame is not valid UTF-8") from None
        except _json1.Json1Error as error:
            self._send_standard_error(None, _wire.PARSE_ERROR, f"Parse error: {error}")
            raise _Fatal("PROTOCOL_ERROR", f"frame is not JSON/1: {error}") from None
        try:
            envelope = _wire.classify(message)
        except _wire.EnvelopeError as error:
            self._send_standard_error(error.reply_id, _wire.INVALID_REQUEST, str(error))
            raise _Fatal("PROTOCOL_ERROR", f"invalid envelope: {error}") from None
        if envelope.kind == "request":
            self._on_request(envelope)
        elif envelope.kind == "notification":
            self._on_notification(envelope)
        else:
            self._on_response(envelope)

    def _on_request(self, envelope: _wire.Envelope) -> None:
        if envelope.id in self._host_ids:
            raise _Fatal("PROTOCOL_ERROR", f"host reused request ID {envelope.id}")
        self._host_requests += 1
        if self._host_requests > _wire.MAX_LIFETIME_REQUESTS:
            raise _Fatal("PROTOCOL_ERROR", "host exceeded 65,536 requests")
        self._host_ids.add(envelope.id)
        if envelope.method != "flow/run":
            self._send_standard_error(
                envelope.id, _wire.METHOD_NOT_FOUND, f"Method not found: {envelope.method}"
            )
            return
        if self._root_id is not None:
            self._send_standard_error(envelope.id, _wire.INVALID_REQUEST, "second flow/run")
            raise _Fatal("PROTOCOL_ERROR", "host sent a second flow/run")
        self._root_id = envelope.id
        try:
            params = _wire.parse_root_params(envelope.params)
        except _wire.InvalidParams as error:
            message = _wire.bounded_message(f"Invalid params: {error}", "Invalid params")
            self._publish(
                {
                    "jsonrpc": _wire.JSONRPC,
                    "id": envelope.id,
                    "error": {"code": _wire.INVALID_PARAMS, "message": message},
                }
            )
            return
        context = self._context(self, params)
        self._handler_task = self._loop.create_task(self._invoke_handler(context))
        self._supervisor = self._loop.create_task(self._supervise())

    def _on_notification(self, envelope: _wire.Envelope) -> None:
        if envelope.method != "request/cancel":
            return
        try:
            target = _wire.parse_cancel_target(envelope.params)
        except _wire.InvalidParams as error:
            raise _Fatal("PROTOCOL_ERROR", f"malformed request/cancel: {error}") from None
        if target == self._root_id:
            self._cancel_root()

    def _on_response(self, envelope: _wire.Envelope) -> None:
        if envelope.id is None:
            raise _Fatal("PROTOCOL_ERROR", f"host rejected a component frame: {envelope.error!r}")
        call = self._wire.pop(envelope.id, None)
        if call is None:
            raise _Fatal("PROTOCOL_ERROR", f"unknown or duplicate response ID {envelope.id}")
        try:
            if envelope.error is not None:
                code, message, details = _wire.parse_operation_error(envelope.error)
                outcome: Any = OperationError(code, message, details)
            else:
                outcome = call.parse(envelope.result)
        except _wire.InvalidResponse as error:
            raise _Fatal("PROTOCOL_ERROR", f"{call.method} response: {error}") from None
        call.close_wire(_SETTLED)
        if call.detached:
            if call.on_late is not None:
                call.on_late(outcome)
        elif not call.future.done():
            if isinstance(outcome, BaseException):
                call.future.set_exception(outcome)
            else:
                call.future.set_result(outcome)
        self._pump()

    # --- outbound calls ----------------------------------------------------------------

    def admit(
        self,
        method: str,
        params: dict[str, Any],
        parse: Callable[[Any], Any],
        *,
        retain: bool = False,
        reserved: bool = False,
        internal: bool = False,
        on_late: Callable[[Any], None] | None = None,
    ) -> _Call:
        """Admit one request synchronously or raise; see `wait` for its outcome.

        Ordinary calls stop short of the channel settlement reserve; `reserved`
        calls may use it; `internal` settlement by the SDK is admitted even
        after the handler settled, while the root response is unpublished.
        """
        if internal:
            if self._fatal is not None or self._published:
                raise OperationError(self._admission_closed or "OWNER_CLOSED", "channel closed")
        elif self._admission_closed is not None:
            code = self._admission_closed
            raise OperationError(code, f"calls are no longer admitted ({code})")
        reserve = 0 if (reserved or internal) else self.settlement_debt()
        if self._issued + reserve >= _wire.MAX_LIFETIME_REQUESTS:
            raise OperationError(
                "RESOURCE_EXHAUSTED", "the 65,536 request lifetime budget is spent"
            )
        request_id = f"component:{self._next_id + 1}"
        frame = _wire.encode_frame(
            {"jsonrpc": _wire.JSONRPC, "id": request_id, "method": method, "params": params}
        )
        self._next_id += 1
        self._issued += 1
        call = _Call(
            request_id,
            method,
            frame,
            parse,
            self._loop,
            retain=retain,
            internal=internal,
            on_late=on_late,
        )
        (self._settlement_queue if internal or reserved else self._queue).append(call)
        self._idle.clear()
        self._pump()
        return call

    async def wait(self, call: _Call) -> Any:
        try:
            return await call.future
        except asyncio.CancelledError:
            self._withdraw(call)
            raise

    async def call(self, method: str, params: dict[str, Any], parse: Callable[[Any], Any]) -> Any:
        """Admit, dispatch and await one ordinary component-originated request."""
        return await self.wait(self.admit(method, params, parse))

    def settlement_debt(self) -> int:
        """Requests the SDK may still need to settle allocated channel endpoints."""
        return self._channel_debt

    @property
    def channel_debt(self) -> int:
        return self._channel_debt

    @channel_debt.setter
    def channel_debt(self, value: int) -> None:
        # A settled endpoint frees the window slot its reserve held: a call
        # queued behind it goes out now, not at some unrelated later response.
        lowered = value < self._channel_debt
        self._channel_debt = value
        if lowered and self._idle is not None:
            self._pump()

    def _pump(self) -> None:
        """Move queued calls onto the wire while fewer than 64 await responses.

        Settlement requests go first and may use every slot; ordinary calls
        leave one slot free while channel endpoints may still need settling.
        """
        try:
            while self._settlement_queue and len(self._wire) < _wire.MAX_PENDING_REQUESTS:
                self._put_on_wire(self._settlement_queue.popleft())
            ordinary_limit = _wire.MAX_PENDING_REQUESTS - (1 if self.settlement_debt() else 0)
            while (
                self._admission_closed is None and self._queue and len(self._wire) < ordinary_limit
            ):
                self._put_on_wire(self._queue.popleft())
        except _Fatal as fatal:
            self._fail(fatal)
            return
        if not self._queue and not self._settlement_queue and not self._wire:
            self._idle.set()

    def _put_on_wire(self, call: _Call) -> None:
        self._write(call.frame)
        call.state = _WIRE
        self._wire[call.request_id] = call

    def _withdraw(self, call: _Call) -> None:
        """The waiter went away: retain, drop, or tombstone with request/cancel."""
        if call.detached or call.state in (_SETTLED, _DROPPED):
            return
        call.detached = True
        if call.retain:
            return
        if call.state == _QUEUED:
            call.close_wire(_DROPPED)
            try:
                self._queue.remove(call)
            except ValueError:
                pass
            self._pump()
            return
        notification = {
            "jsonrpc": _wire.JSONRPC,
            "method": "request/cancel",
            "params": {"requestId": call.request_id},
        }
        try:
            self._write(_wire.encode_frame(notification))
        except _Fatal as fatal:
            self._fail(fatal)

    def _abandon_live_calls(self) -> int:
        """Withdraw every ordinary call whose waiter is still live; returns how many."""
        live = [
            call
            for call in list(self._queue) + list(self._wire.values())
            if not call.internal and not call.detached and call.state in (_QUEUED, _WIRE)
        ]
        for call in live:
            self._withdraw(call)
            call.future.cancel()
        return len(live)

    def _abandon_receivers(self) -> int:
        """Dispose receivers still active at handler settlement; returns how many.

        A `ChannelReceiver` puts itself in `receivers` while it is active.
        """
        abandoned = 0
        for receiver in list(self.receivers):
            if receiver._start_disposal():
                abandoned += 1
        return abandoned

    # --- the root -----------------------------------------------------------------------

    async def _invoke_handler(self, context: Any) -> Any:
        try:
            return await self._handler(context)
        except (SystemExit, KeyboardInterrupt) as escape:
            # These would otherwise unwind the event loop without a root response.
            raise RuntimeError(f"the handler raised {type(escape).__name__}") from escape

    def _cancel_root(self) -> None:
        if self._published or self._root_cancelled or self._fatal is not None:
            return
        self._root_cancelled = True
        self._admission_closed = "CANCELLED"
        self._abandon_live_calls()
        self._abandon_receivers()
        if self._handler_task is not None and not self._handler_task.done():
            self._handler_task.cancel()

    async def _supervise(self) -> None:
        task = self._handler_task
        await asyncio.wait({task})
        if self._fatal is not None:
            return
        if self._admission_closed is None:
            self._admission_closed = "OWNER_CLOSED"
        abandoned = self._abandon_live_calls() + self._abandon_receivers()
        await self._idle.wait()
        if self._fatal is not None or self._published:
            return
        self._publish(self._root_frame(task, abandoned))

    def _root_frame(self, task: asyncio.Task, abandoned: int) -> dict[str, Any]:
        root_id = self._root_id
        if self._root_cancelled:
            return _root_error(root_id, "CANCELLED", "the root Run was cancelled")
        if task.cancelled():
            return _root_error(root_id, "EXECUTION_FAILED", "the handler task was cancelled")
        error = task.exception()
        if error is not None:
            return _handler_error(root_id, error)
        if abandoned:
            return _root_error(
                root_id,
                "EXECUTION_FAILED",
                f"the handler returned while {abandoned} owned call(s) were still open",
            )
        try:
            result = _checked_result(task.result())
        except (_json1.Json1Error, TypeError, ValueError) as problem:
            return _root_error(root_id, "INVALID_RESULT", f"invalid handler result: {problem}")
        return {"jsonrpc": _wire.JSONRPC, "id": root_id, "result": result}


def _checked_result(result: Any) -> dict[str, Any]:
    if not isinstance(result, Mapping):
        raise TypeError(f"result is {type(result).__name__}, not a {{outcome, output}} mapping")
    if set(result.keys()) != {"outcome", "output"}:
        raise ValueError("result must have exactly outcome and output")
    if not _wire.is_local_name(result["outcome"]):
        raise ValueError("outcome is not a LocalName")
    return {"outcome": str.__str__(result["outcome"]), "output": _json1.snapshot(result["output"])}


def _root_error(
    root_id: str | None, code: str, message: str, details: Any = None
) -> dict[str, Any]:
    data: dict[str, Any] = {"code": code}
    if details is not None:
        data["details"] = details
    return {
        "jsonrpc": _wire.JSONRPC,
        "id": root_id,
        "error": {
            "code": _wire.OPERATION_ERROR,
            "message": _wire.bounded_message(message, code),
            "data": data,
        },
    }


def _handler_error(root_id: str | None, error: BaseException) -> dict[str, Any]:
    if isinstance(error, OperationError) and error.code in WIRE_CODES:
        try:
            details = None if error.details is None else _json1.snapshot(error.details)
            if not isinstance(error.message, str):
                raise TypeError("message must be a string")
        except (_json1.Json1Error, TypeError) as problem:
            return _root_error(
                root_id, "EXECUTION_FAILED", f"OperationError metadata is invalid: {problem}"
            )
        return _root_error(root_id, error.code, error.message, details)
    if isinstance(error, OperationError) and error.code in LOCAL_CODES:
        return _root_error(root_id, "EXECUTION_FAILED", f"{error.code}: {error.message}")
    _failure.write_traceback(error)
    return _root_error(
        root_id, "EXECUTION_FAILED", _failure.message(error), _failure.details(error)
    )
