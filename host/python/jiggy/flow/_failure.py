"""What an ordinary exception escaping the handler becomes: its type, its
message and the component's own frames, for the root error's `details` and
for stderr. Both are bounded, so a deep recursion cannot fill the frame
or the host's stderr tail with one traceback.
"""

from __future__ import annotations

import asyncio
import os
import sys
import traceback
from typing import Any

from . import _wire

# The innermost frames kept in the details, and the characters of each.
MAX_STACK_FRAMES = 16
MAX_FRAME_CHARS = 256
# The frames, and the characters, of the traceback written to stderr.
MAX_STDERR_FRAMES = 32
MAX_STDERR_CHARS = 16 * 1024

_SDK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ASYNCIO_DIR = os.path.dirname(os.path.abspath(asyncio.__file__))


def _own(filename: str) -> bool:
    """A frame of the component (or a library it called), not the SDK's or
    the event loop's."""
    path = os.path.abspath(filename)
    return not (path.startswith(_SDK_DIR + os.sep) or path.startswith(_ASYNCIO_DIR + os.sep))


def _package_dir() -> str | None:
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.dirname(os.path.abspath(main)) if main else None


def _place(filename: str) -> str:
    """A file of the package by its path in the package (`flow.py`), so a
    traceback names no host directory; anything else as it is."""
    root = _package_dir()
    if root is None:
        return filename
    path = os.path.abspath(filename)
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else filename


def _own_stack(error: BaseException) -> list[traceback.FrameSummary]:
    frames = []
    for frame in traceback.extract_tb(error.__traceback__):
        if not _own(frame.filename):
            continue
        frame.line  # noqa: B018 - read the source line while the path still finds it
        frame.filename = _place(frame.filename)
        frames.append(frame)
    return frames


def _text(value: str, limit: int) -> str:
    """At most `limit` characters, anything UTF-8 cannot carry (a lone
    surrogate) replaced, so the details stay JSON/1."""
    return value.encode("utf-8", errors="replace").decode("utf-8")[:limit]


def message(error: BaseException) -> str:
    """`KeyError: 'data'`, or the bare type name when it says nothing."""
    name = type(error).__name__
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the failure
        text = ""
    return f"{name}: {text}" if text else name


def details(error: BaseException) -> dict[str, Any]:
    """`{"exception": {type, message, stack, framesOmitted}}`: the stack
    innermost first, as `function (file:line)`."""
    try:
        text = str(error)
    except Exception:  # noqa: BLE001
        text = ""
    frames = _own_stack(error)
    frames.reverse()
    kept = frames[:MAX_STACK_FRAMES]
    stack = [_text(f"{f.name} ({f.filename}:{f.lineno})", MAX_FRAME_CHARS) for f in kept]
    return {
        "exception": {
            "type": _text(type(error).__qualname__, MAX_FRAME_CHARS),
            "message": _text(text, _wire.MAX_ERROR_MESSAGE_CHARS),
            "stack": stack,
            "framesOmitted": len(frames) - len(kept),
        }
    }


def write_traceback(error: BaseException) -> None:
    """The usual Python traceback on stderr: the component's own frames (the
    last of them), package files by their path in the package."""
    try:
        described = traceback.TracebackException.from_exception(error)
        frames = _own_stack(error)
        omitted = max(0, len(frames) - MAX_STDERR_FRAMES)
        described.stack = traceback.StackSummary.from_list(frames[omitted:])
        text = "".join(described.format())
        if omitted:
            text = text.replace(
                "Traceback (most recent call last):\n",
                f"Traceback (most recent call last, {omitted} earlier frames left out):\n",
                1,
            )
        if len(text) > MAX_STDERR_CHARS:
            text = "…" + text[-MAX_STDERR_CHARS:]
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - stderr is diagnostics; the root error still goes out
        pass
