"""Public exceptions of Run SDK/1 and the closed Run/1 operational code set."""

from __future__ import annotations

from typing import Any

# The thirteen operational codes that may cross the wire (Run/1 §7).
WIRE_CODES = frozenset(
    {
        "CANCELLED",
        "DEADLINE_EXCEEDED",
        "OWNER_CLOSED",
        "OPERATION_CONFLICT",
        "UNAVAILABLE",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "INVALID_INPUT",
        "INVALID_RESULT",
        "UNCERTAIN",
        "EXECUTION_FAILED",
        "LAGGED",
        "DISCONNECTED",
    }
)
# Local terminal classifications; never serialized as operational errors.
LOCAL_CODES = frozenset({"PROTOCOL_ERROR", "CHANNEL_LOST"})


class OperationError(Exception):
    """An operational failure: `code` is a Run/1 code, `details` JSON/1 or None."""

    def __init__(self, code: str, message: str | None = None, details: Any = None) -> None:
        self.code = code
        self.message = message if message is not None else code
        self.details = details
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"OperationError({self.code!r}, {self.message!r}, {self.details!r})"


class CapabilityError(Exception):
    """A capability application error declared by the capability's contract."""

    def __init__(self, error_name: str, data: Any) -> None:
        self.error_name = error_name
        self.data = data
        super().__init__(f"capability error {error_name}")

    def __repr__(self) -> str:
        return f"CapabilityError({self.error_name!r}, {self.data!r})"
