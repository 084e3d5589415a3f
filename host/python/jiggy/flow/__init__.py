"""jiggy.flow: the Python projection of FLOW Run SDK/1.

`handle(handler)` serves exactly one Run/1 root `flow/run` over protocol
stdin/stdout. Pure standard library, Python 3.11+. This package exposes the
Run SDK/1 surface only: no JSON-RPC envelopes, transport IDs, pending tables,
resolvers, providers or host policy.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any
from collections.abc import Awaitable, Callable

from ._channels import (
    ChannelBroadcast,
    ChannelContractIdentity,
    ChannelEndpoint,
    ChannelPair,
    ChannelReceiver,
    ChannelSender,
)
from ._context import Attachment, RunContext, RunResult
from ._errors import CapabilityError, OperationError
from . import _session

JsonValue = None | bool | int | float | str | list[Any] | dict[str, Any]
RunHandler = Callable[[RunContext], Awaitable[RunResult]]

# How long leftover application tasks get to settle after the root response.
SHUTDOWN_GRACE_SECONDS = 1.0

_handled = False


def handle(handler: RunHandler) -> None:
    """Serve one Run/1 invocation with `handler`, then exit the process.

    Synchronous: it owns and creates the event loop, so it refuses to run
    inside an already-running asyncio loop. It exits with status 0 after
    publishing the root response and nonzero after a fatal channel failure.
    """
    global _handled
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("handle() owns the event loop; do not call it from a running loop")
    if not callable(handler):
        raise TypeError("handle() needs an async handler function")
    if _handled:
        raise RuntimeError("handle() serves exactly one Run per process")
    _handled = True
    in_fd, out_fd = _take_over_stdio()
    status = _run_loop(_session.Session(handler, RunContext, in_fd, out_fd))
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    raise SystemExit(status)


def _take_over_stdio() -> tuple[int, int]:
    """Keep private protocol fds; point fd 0 at /dev/null and fd 1 at stderr.

    Later print(), sys.stdout (even a reference cached before handle) and
    child processes then reach stderr instead of corrupting protocol stdout,
    and children cannot consume protocol stdin.
    """
    out_fd = os.dup(1)
    in_fd = os.dup(0)
    try:
        os.dup2(2, 1)
    except OSError:
        null_out = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null_out, 1)
        os.close(null_out)
    null_in = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_in, 0)
    os.close(null_in)
    try:
        # Bytes printed before handle were still buffered; they now go to stderr.
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        pass
    sys.stdout = sys.stderr
    return in_fd, out_fd


def _run_loop(session: _session.Session) -> int:
    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        status = loop.run_until_complete(session.main())
        leftovers = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.wait(leftovers, timeout=SHUTDOWN_GRACE_SECONDS))
        return status
    finally:
        asyncio.set_event_loop(None)
        try:
            loop.close()
        except RuntimeError:
            pass


__all__ = [
    "Attachment",
    "CapabilityError",
    "ChannelBroadcast",
    "ChannelContractIdentity",
    "ChannelEndpoint",
    "ChannelPair",
    "ChannelReceiver",
    "ChannelSender",
    "JsonValue",
    "OperationError",
    "RunContext",
    "RunHandler",
    "RunResult",
    "handle",
]
