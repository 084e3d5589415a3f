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


def _place(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return filename if relative.startswith("..") else relative


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
    frames = [f for f in traceback.extract_tb(error.__traceback__) if _own(f.filename)]
    frames.reverse()
    kept = frames[:MAX_STACK_FRAMES]
    stack = [f"{f.name} ({_place(f.filename)}:{f.lineno})"[:MAX_FRAME_CHARS] for f in kept]
    return {
        "exception": {
            "type": type(error).__qualname__[:MAX_FRAME_CHARS],
            "message": text[:1024],
            "stack": stack,
            "framesOmitted": len(frames) - len(kept),
        }
    }


def write_traceback(error: BaseException) -> None:
    """The usual Python traceback on stderr, its last frames and characters."""
    try:
        lines = traceback.format_exception(
            type(error), error, error.__traceback__, limit=-MAX_STDERR_FRAMES
        )
        text = "".join(lines)
        if len(text) > MAX_STDERR_CHARS:
            text = "…" + text[-MAX_STDERR_CHARS:]
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - stderr is diagnostics; the root error still goes out
        pass
