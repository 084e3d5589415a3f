"""FLOW contract descriptor digests (Capability and Channel Contract/1 §3, §2).

    SHA-256(UTF8("FLOW-Capability-Contract/1\\0") || RFC8785(descriptor))
    SHA-256(UTF8("FLOW-Channel-Contract/1\\0") || RFC8785(descriptor))

spelled `sha256:<64 lowercase hex>`. A descriptor is given as its bytes
(parsed strictly as JSON/1: a duplicate member or an out-of-domain number is
refused, never repaired) or as an already parsed value. Only the digest is
computed here: the descriptor's Contract/1 rules (closed fields, identity
grammar, embedded schemas) are the host's to check.

This module is apart from the Run SDK/1 root `jiggy.flow`, whose surface the
standard closes; import it as `jiggy.flow.contract`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from . import _json1
from ._json1 import Json1Error

# Domain separators of the two descriptor kinds.
CAPABILITY_DOMAIN = b"FLOW-Capability-Contract/1\0"
CHANNEL_DOMAIN = b"FLOW-Channel-Contract/1\0"
# Maximum UTF-8 bytes of one descriptor (both kinds).
MAX_DESCRIPTOR_BYTES = 262_144


def canonical(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON/1 value; raises Json1Error outside JSON/1."""
    return _json1.canonical(value)


def capability_digest(descriptor: bytes | Any) -> str:
    """The Capability Contract/1 digest of a descriptor (bytes or parsed value)."""
    return _digest(CAPABILITY_DOMAIN, descriptor)


def channel_digest(descriptor: bytes | Any) -> str:
    """The Channel Contract/1 digest of a descriptor (bytes or parsed value)."""
    return _digest(CHANNEL_DOMAIN, descriptor)


def _digest(domain: bytes, descriptor: bytes | Any) -> str:
    if isinstance(descriptor, (bytes, bytearray, memoryview)):
        data = bytes(descriptor)
        if len(data) > MAX_DESCRIPTOR_BYTES:
            raise Json1Error("descriptor exceeds 262,144 bytes")
        try:
            descriptor = _json1.decode(data)
        except UnicodeDecodeError:
            raise Json1Error("descriptor is not UTF-8") from None
    hasher = hashlib.sha256(domain)
    hasher.update(_json1.canonical(descriptor))
    return "sha256:" + hasher.hexdigest()


__all__ = [
    "CAPABILITY_DOMAIN",
    "CHANNEL_DOMAIN",
    "MAX_DESCRIPTOR_BYTES",
    "Json1Error",
    "canonical",
    "capability_digest",
    "channel_digest",
]
