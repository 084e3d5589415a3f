"""Channel endpoints (Run/1 §5.1, Run SDK/1 §9) as held by this invocation.

Endpoint references are private SDK/host machinery: authors hold endpoint
objects and pass them in call `channels=` maps; a reference string copied
into ordinary input grants nothing. This room never detaches settlement: a
cancelled read, creation, subscription or disposal keeps its request until the
host answers, and the root response waits for it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from collections.abc import Mapping

from . import _json1, _wire
from ._errors import LOCAL_CODES, OperationError

if TYPE_CHECKING:
    from ._session import Session


@dataclass(frozen=True)
class ChannelContractIdentity:
    id: str
    version: str
    digest: str


def _contract(grant: Mapping[str, Any]) -> ChannelContractIdentity | None:
    contract = grant.get("contract")
    if contract is None:
        return None
    return ChannelContractIdentity(contract["id"], contract["version"], contract["digest"])


class ChannelSender:
    """The single write right of a channel source."""

    direction = "send"

    def __init__(self, session: Session, grant: Mapping[str, Any]) -> None:
        self._session = session
        self._reference: str = grant["endpoint"]
        self._claimed = False
        self.delivery: str = grant["delivery"]
        self.contract = _contract(grant)

    async def send(self, value: Any) -> None:
        """Wait until the host accepted (validated and snapshotted) `value`."""
        try:
            snapshot = _json1.snapshot(value)
        except _json1.Json1Error as error:
            raise ValueError(f"channel value is not a JSON/1 value: {error}") from None
        self._claimed = True
        await self._session.call(
            "channel/send", {"endpoint": self._reference, "value": snapshot}, _wire.parse_null
        )

    async def close(self) -> None:
        """Seal the writer; a cancelled wait keeps the close request."""
        self._claimed = True
        call = self._session.admit(
            "channel/close",
            {"endpoint": self._reference},
            _wire.parse_null,
            retain=True,
            reserved=True,
        )
        await self._session.wait(call)

    def __repr__(self) -> str:
        return f"ChannelSender(delivery={self.delivery!r}, contract={self.contract!r})"


_OPEN = "open"
_ENDED = "ended"
_FAILED = "failed"
_DISPOSING = "disposing"
_DISPOSED = "disposed"


class ChannelReceiver:
    """The read right of one direct channel or one broadcast subscription.

    One read at a time and no prefetch. Use `async with receiver` or
    `aclose()` in `finally` for early exit; exhausting the iterator suffices.
    """

    direction = "receive"

    def __init__(self, session: Session, grant: Mapping[str, Any], *, allocated: bool) -> None:
        self._session = session
        self._reference: str = grant["endpoint"]
        self.delivery: str = grant["delivery"]
        self.contract = _contract(grant)
        self.start_sequence: int = grant["startSequence"]
        self._next_sequence = self.start_sequence
        self._state = _OPEN
        self._claimed = False
        self._active = False
        self._read: Any = None
        self._cause: OperationError | None = None
        self._cause_exposed = False
        self._disposal: asyncio.Future | None = None
        if allocated:
            self._activate()

    # --- ownership accounting -------------------------------------------------------

    def _activate(self) -> None:
        """An activated receiver is owned work until end, failure or disposal."""
        if not self._active and self._state == _OPEN:
            self._active = True
            self._session.receivers.add(self)
            self._session.channel_debt += 1

    def _deactivate(self) -> None:
        if self._active:
            self._active = False
            self._session.receivers.discard(self)
            self._session.channel_debt -= 1

    def _terminal(self, state: str, cause: OperationError | None = None) -> None:
        if self._state != _OPEN:
            return
        self._state = state
        if cause is not None:
            self._cause = cause
        self._deactivate()

    # --- reading ----------------------------------------------------------------------

    def __aiter__(self) -> ChannelReceiver:
        return self

    async def __anext__(self) -> Any:
        if self._state == _ENDED:
            raise StopAsyncIteration
        if self._state == _FAILED:
            self._cause_exposed = True
            raise self._cause
        if self._state in (_DISPOSING, _DISPOSED):
            raise OperationError("DISCONNECTED", "the receiver was disposed")
        if self._read is not None:
            raise RuntimeError("a receiver has at most one pending read")
        self._claimed = True
        self._activate()
        expected = self._next_sequence

        def parse(result: Any) -> tuple[str, Any, int]:
            kind, value, sequence = _wire.parse_read(result)
            if kind == "item" and sequence != expected:
                raise _wire.InvalidResponse(f"read sequence {sequence}, expected {expected}")
            if kind == "end" and sequence != expected - 1:
                raise _wire.InvalidResponse(f"end at {sequence}, expected {expected - 1}")
            return kind, value, sequence

        call = self._session.admit(
            "channel/next",
            {"endpoint": self._reference},
            parse,
            retain=True,
            on_late=self._late_read,
        )
        self._read = call
        try:
            kind, value, _ = await self._session.wait(call)
        except asyncio.CancelledError:
            # Cancelling an active read disposes the receiver; the read response
            # and the disposal response are both retained and drained.
            self._start_disposal()
            raise
        except OperationError as error:
            self._read = None
            if error.code not in LOCAL_CODES:
                # A failed read settles the receiver (Run/1 §5.1): the host
                # holds the sticky cause, so nothing more is sent for it
                # unless the receiver is then closed (one release).
                self._terminal(_FAILED, error)
                self._cause_exposed = True
            raise
        self._read = None
        if kind == "end":
            self._terminal(_ENDED)
            raise StopAsyncIteration
        self._next_sequence += 1
        return value

    def _late_read(self, outcome: Any) -> None:
        """A read whose waiter was cancelled settled; disposal decides the cause."""
        self._read = None

    # --- disposal ------------------------------------------------------------------------

    def _start_disposal(self) -> bool:
        """Start the one retained release action; False when nothing needs it.

        A receiver whose read failed is settled, but closing it still sends
        its one release: the host answers with the failure it recorded, and
        the receiver stays failed (later reads raise the same cause).
        """
        if self._disposal is not None or self._state in (_ENDED, _DISPOSED):
            return False
        if self._state != _FAILED:
            self._state = _DISPOSING
        call = self._session.admit(
            "channel/release",
            {"endpoint": self._reference},
            _wire.parse_release,
            retain=True,
            internal=True,
        )
        self._disposal = asyncio.ensure_future(self._settle_disposal(call))
        return True

    async def _settle_disposal(self, call: Any) -> None:
        try:
            status, code, details = await self._session.wait(call)
        except OperationError as error:
            if error.code not in LOCAL_CODES and self._cause is None:
                self._cause = error
        else:
            # "released" means disposal won: deliberate incomplete delivery.
            if status == "failed" and self._cause is None:
                self._cause = OperationError(code, f"channel receiver failed: {code}", details)
        read = self._read
        if read is not None:
            await asyncio.shield(read.wire_done)
        if self._state == _DISPOSING:
            self._state = _DISPOSED
        self._deactivate()

    async def aclose(self) -> None:
        """Dispose the receiver, joining any disposal already started.

        Raises a terminal cause that no earlier public operation exposed. A
        receiver that ended sends nothing; one whose read failed sends one
        release and takes the host's failed answer as its disposition.
        """
        if self._disposal is None and not self._start_disposal():
            if self._read is not None:
                await asyncio.shield(self._read.wire_done)
            return
        await asyncio.shield(self._disposal)
        if self._cause is not None and not self._cause_exposed:
            self._cause_exposed = True
            raise self._cause

    async def close(self) -> None:
        await self.aclose()

    async def __aenter__(self) -> ChannelReceiver:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return (
            f"ChannelReceiver(delivery={self.delivery!r}, contract={self.contract!r}, "
            f"start_sequence={self.start_sequence})"
        )


ChannelEndpoint = ChannelSender | ChannelReceiver


@dataclass(frozen=True)
class ChannelPair:
    send: ChannelSender
    receive: ChannelReceiver


class ChannelBroadcast:
    """A broadcast source: its writer plus subscription authority (creator only)."""

    def __init__(self, session: Session, send: ChannelSender, source: str) -> None:
        self._session = session
        self._source = source
        self.send = send

    async def subscribe(self) -> ChannelReceiver:
        """Allocate a reader starting at the next accepted sequence."""
        return await _allocate(
            self._session,
            "channel/subscribe",
            {"source": self._source},
            _wire.parse_subscription,
            lambda grant: ChannelReceiver(self._session, grant, allocated=True),
        )

    def __repr__(self) -> str:
        return f"ChannelBroadcast(send={self.send!r})"


async def create_channel(
    session: Session, *, delivery: str, schema: Any, contract: str | None, has_schema: bool
) -> ChannelPair | ChannelBroadcast:
    if delivery not in ("direct", "broadcast"):
        raise ValueError("delivery must be 'direct' or 'broadcast'")
    params: dict[str, Any] = {}
    if delivery == "broadcast":
        params["delivery"] = "broadcast"
    if has_schema and contract is not None:
        raise ValueError("schema and contract are mutually exclusive")
    if has_schema:
        try:
            schema = _json1.snapshot(schema)
        except _json1.Json1Error as error:
            raise ValueError(f"schema is not a JSON/1 value: {error}") from None
        if not isinstance(schema, (dict, bool)):
            raise ValueError("schema must be an object or a boolean")
        params["schema"] = schema
    if contract is not None:
        if not _wire.is_contract_reference(contract):
            raise ValueError("contract must be a package-local './...' reference")
        params["contract"] = contract
    if delivery == "direct":
        return await _allocate(
            session,
            "channel/create",
            params,
            _wire.parse_direct_channel,
            lambda grants: ChannelPair(
                ChannelSender(session, grants[0]),
                ChannelReceiver(session, grants[1], allocated=False),
            ),
        )
    return await _allocate(
        session,
        "channel/create",
        params,
        _wire.parse_broadcast_channel,
        lambda result: ChannelBroadcast(session, ChannelSender(session, result[0]), result[1]),
    )


async def _allocate(session: Session, method: str, params: dict, parse: Any, build: Any) -> Any:
    """Run one allocation; a cancelled wait keeps it and disposes late grants."""
    session.channel_debt += 1
    settled = False

    def late(outcome: Any) -> None:
        nonlocal settled
        if not settled:
            settled = True
            session.channel_debt -= 1
        if isinstance(outcome, BaseException):
            return
        allocated = build(outcome)
        receiver = allocated.receive if isinstance(allocated, ChannelPair) else allocated
        if isinstance(receiver, ChannelReceiver):
            receiver._start_disposal()

    try:
        call = session.admit(method, params, parse, retain=True, reserved=True, on_late=late)
    except BaseException:
        session.channel_debt -= 1
        raise
    try:
        outcome = await session.wait(call)
    except asyncio.CancelledError:
        raise
    except BaseException:
        settled = True
        session.channel_debt -= 1
        raise
    settled = True
    session.channel_debt -= 1
    return build(outcome)


def endpoints_from_grants(
    session: Session, grants: Mapping[str, Any]
) -> dict[str, ChannelEndpoint]:
    return {
        name: ChannelSender(session, grant)
        if grant["direction"] == "send"
        else ChannelReceiver(session, grant, allocated=False)
        for name, grant in grants.items()
    }


def channel_references(session: Session, channels: Any) -> dict[str, str]:
    """Map a call's `channels=` argument to endpoint reference strings."""
    if not isinstance(channels, Mapping):
        raise TypeError("channels must be a mapping of names to channel endpoints")
    if len(channels) > _wire.MAX_CHANNELS:
        raise ValueError("a call maps at most 256 channels")
    references: dict[str, str] = {}
    for name, endpoint in channels.items():
        if not _wire.is_local_name(name):
            raise ValueError(f"channel name {name!r} is not a LocalName")
        if not isinstance(endpoint, (ChannelSender, ChannelReceiver)):
            raise TypeError(f"channel {name} must be a ChannelSender or ChannelReceiver")
        if endpoint._session is not session:
            raise ValueError(f"channel {name} belongs to another invocation")
        if endpoint._claimed:
            raise ValueError(f"channel {name} was already used locally and cannot transfer")
        references[str.__str__(name)] = endpoint._reference
    if len(set(references.values())) != len(references):
        raise ValueError("one endpoint cannot be mapped to two channel names")
    return references

