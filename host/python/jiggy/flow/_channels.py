"""Channel endpoints (Run/1 §5.1) as held by this invocation.

Endpoint references are private SDK/host machinery: authors hold endpoint
objects and pass them in call `channels=` maps; a reference string copied
into ordinary input grants nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Union

from . import _wire

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
    """The write right of a channel source."""

    direction = "send"

    def __init__(self, session: Session, grant: Mapping[str, Any]) -> None:
        self._session = session
        self._reference: str = grant["endpoint"]
        self.delivery: str = grant["delivery"]
        self.contract = _contract(grant)

    def __repr__(self) -> str:
        return f"ChannelSender(delivery={self.delivery!r}, contract={self.contract!r})"


class ChannelReceiver:
    """The read right of one direct channel or one broadcast subscription."""

    direction = "receive"

    def __init__(self, session: Session, grant: Mapping[str, Any]) -> None:
        self._session = session
        self._reference: str = grant["endpoint"]
        self.delivery: str = grant["delivery"]
        self.contract = _contract(grant)
        self.start_sequence: int = grant["startSequence"]

    def __repr__(self) -> str:
        return (
            f"ChannelReceiver(delivery={self.delivery!r}, contract={self.contract!r}, "
            f"start_sequence={self.start_sequence})"
        )


ChannelEndpoint = Union[ChannelSender, ChannelReceiver]


@dataclass(frozen=True)
class ChannelPair:
    send: ChannelSender
    receive: ChannelReceiver


def endpoint_from_grant(session: Session, grant: Mapping[str, Any]) -> ChannelEndpoint:
    if grant["direction"] == "send":
        return ChannelSender(session, grant)
    return ChannelReceiver(session, grant)


def endpoints_from_grants(
    session: Session, grants: Mapping[str, Any]
) -> dict[str, ChannelEndpoint]:
    return {name: endpoint_from_grant(session, grant) for name, grant in grants.items()}


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
        references[str.__str__(name)] = endpoint._reference
    if len(set(references.values())) != len(references):
        raise ValueError("one endpoint cannot be mapped to two channel names")
    return references
