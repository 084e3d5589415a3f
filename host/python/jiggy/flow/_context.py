"""RunContext: the handler's view of one invocation and its outbound calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypedDict, overload
from collections.abc import Mapping

from . import _json1, _wire
from ._errors import CapabilityError
from ._channels import (
    ChannelBroadcast,
    ChannelEndpoint,
    ChannelPair,
    channel_references,
    create_channel,
    endpoints_from_grants,
)

if TYPE_CHECKING:
    from ._session import Session


class Attachment(TypedDict):
    path: str
    access: str


class RunResult(TypedDict):
    outcome: str
    output: Any


_UNSET: Any = object()


def _require_wire_id(value: Any, what: str) -> str:
    if not _wire.is_wire_id(value):
        raise ValueError(f"{what} must be a 1-128 byte token matching [A-Za-z0-9][A-Za-z0-9._:/-]*")
    return str.__str__(value)


def _require_local_name(value: Any, what: str) -> str:
    if not _wire.is_local_name(value):
        raise ValueError(f"{what} must be a LocalName ([a-z0-9]+(-[a-z0-9]+)*, 1-64 bytes)")
    return str.__str__(value)


def _require_json(value: Any, what: str) -> Any:
    try:
        return _json1.snapshot(value)
    except _json1.Json1Error as error:
        raise ValueError(f"{what} is not a JSON/1 value: {error}") from None


def _capability_outcome(result: Any) -> Any:
    is_error, value, data = _wire.parse_capability_result(result)
    return CapabilityError(value, data) if is_error else value


class RunContext:
    """Host-supplied invocation data plus child-Flow and capability calls."""

    def __init__(self, session: Session, params: dict[str, Any]) -> None:
        self._session = session
        self._input = params["input"]
        self._settings = params["settings"]
        self._attachments = {
            name: Attachment(path=grant["path"], access=grant["access"])
            for name, grant in params["attachments"].items()
        }
        self._channels = endpoints_from_grants(session, params.get("channels", {}))
        self._scratch = params["scratch"]
        self._deadline_unix_ms = params["deadlineUnixMs"]

    @property
    def input(self) -> Any:
        return self._input

    @property
    def settings(self) -> Mapping[str, Any]:
        return self._settings

    @property
    def attachments(self) -> Mapping[str, Attachment]:
        return self._attachments

    @property
    def channels(self) -> Mapping[str, ChannelEndpoint]:
        return self._channels

    @property
    def scratch(self) -> str:
        return self._scratch

    @property
    def deadline_unix_ms(self) -> int:
        return self._deadline_unix_ms

    async def run_child_flow(
        self,
        *,
        operation_id: str,
        slot: str,
        input: Any,
        intent: str | None = None,
        channels: Mapping[str, ChannelEndpoint] | None = None,
    ) -> RunResult:
        """Run a Flow through an admitted child slot; returns its complete result."""
        params: dict[str, Any] = {
            "operationId": _require_wire_id(operation_id, "operation_id"),
            "slot": _require_local_name(slot, "slot"),
        }
        if intent is not None:
            if not isinstance(intent, str):
                raise TypeError("intent must be a string")
            if not 1 <= len(intent) <= _wire.MAX_INTENT_CHARS:
                raise ValueError("intent must have 1-16,384 characters")
            params["intent"] = _require_json(intent, "intent")
        params["input"] = _require_json(input, "input")
        if channels:
            params["channels"] = channel_references(self._session, channels)
        return await self._session.call("flow/run-child", params, _wire.parse_run_result)

    async def call_capability(
        self,
        *,
        operation_id: str,
        slot: str,
        method: str,
        input: Any,
        channels: Mapping[str, ChannelEndpoint] | None = None,
    ) -> Any:
        """Call one capability method; returns its value or raises CapabilityError."""
        params: dict[str, Any] = {
            "operationId": _require_wire_id(operation_id, "operation_id"),
            "slot": _require_local_name(slot, "slot"),
            "method": _require_local_name(method, "method"),
            "input": _require_json(input, "input"),
        }
        if channels:
            params["channels"] = channel_references(self._session, channels)
        return await self._session.call("capability/call", params, _capability_outcome)

    @overload
    async def channel(
        self,
        *,
        delivery: Literal["direct"] = "direct",
        schema: Any = _UNSET,
        contract: str | None = None,
    ) -> ChannelPair: ...

    @overload
    async def channel(
        self,
        *,
        delivery: Literal["broadcast"],
        schema: Any = _UNSET,
        contract: str | None = None,
    ) -> ChannelBroadcast: ...

    async def channel(
        self, *, delivery: str = "direct", schema: Any = _UNSET, contract: str | None = None
    ) -> ChannelPair | ChannelBroadcast:
        """Create a channel owned by this invocation (direct pair or broadcast source).

        `schema` (a Schema/1 object or boolean) and `contract` (a package-local
        "./..." Channel Contract/1 reference) are mutually exclusive.
        """
        return await create_channel(
            self._session,
            delivery=delivery,
            schema=schema,
            contract=contract,
            has_schema=schema is not _UNSET,
        )
