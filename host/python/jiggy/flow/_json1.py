"""FLOW JSON/1: strict decoding, validated snapshots and compact encoding.

This room owns the value model only. It never touches the wire, the event
loop or the handler; callers decide which protocol error a failure becomes.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Absolute JSON/1 maxima (inclusive), per "FLOW JSON/1 value model".
MAX_DOCUMENT_BYTES = 16_777_216
MAX_DEPTH = 128
MAX_NODES = 262_144
MAX_OBJECT_MEMBERS = 65_536
MAX_ARRAY_ITEMS = 65_536
MAX_STRING_BYTES = 8_388_608
MAX_MEMBER_NAME_BYTES = 1_024
MAX_NUMBER_TOKEN_BYTES = 128
MAX_SAFE_INTEGER = 9_007_199_254_740_991


class Json1Error(ValueError):
    """A value or document is outside FLOW JSON/1."""


def _reject_constant(token: str) -> Any:
    raise Json1Error(f"{token} is not a JSON/1 number")


def _parse_int(token: str) -> int:
    if len(token) > MAX_NUMBER_TOKEN_BYTES:
        raise Json1Error("number token exceeds 128 bytes")
    value = int(token)
    if abs(value) > MAX_SAFE_INTEGER:
        raise Json1Error("integral number outside the safe integer range")
    return value


def _parse_float(token: str) -> int | float:
    if len(token) > MAX_NUMBER_TOKEN_BYTES:
        raise Json1Error("number token exceeds 128 bytes")
    return _number(float(token))


def _number(value: float) -> int | float:
    """Normalise a binary64 value: integral values become exact ints."""
    if not math.isfinite(value):
        raise Json1Error("number is not finite")
    if value.is_integer():
        if abs(value) > MAX_SAFE_INTEGER:
            raise Json1Error("integral number outside the safe integer range")
        # -0 equals and canonicalises as 0.
        return int(value)
    return value


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise Json1Error("duplicate object member name")
    return result


_DECODER = json.JSONDecoder(
    object_pairs_hook=_object_pairs,
    parse_int=_parse_int,
    parse_float=_parse_float,
    parse_constant=_reject_constant,
    strict=True,
)


def decode(payload: bytes) -> Any:
    """Decode one complete JSON/1 document from UTF-8 bytes.

    Raises UnicodeDecodeError for invalid UTF-8 (a transport-level failure the
    caller must distinguish) and Json1Error for every JSON/1 violation.
    """
    if len(payload) > MAX_DOCUMENT_BYTES:
        raise Json1Error("document exceeds 16,777,216 bytes")
    text = payload.decode("utf-8", errors="strict")
    if text.startswith("\ufeff"):
        raise Json1Error("byte order mark")
    try:
        value = _DECODER.decode(text)
    except Json1Error:
        raise
    except (ValueError, RecursionError) as error:
        raise Json1Error(f"invalid JSON: {error}") from None
    check_limits(value)
    return value


def _string_bytes(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise Json1Error("string contains a lone surrogate") from None


def check_limits(root: Any) -> None:
    """Check document limits of a tree of plain JSON types (parsed or snapshotted)."""
    nodes = 0
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise Json1Error("document exceeds 262,144 value nodes")
        if depth > MAX_DEPTH:
            raise Json1Error("document exceeds depth 128")
        if isinstance(value, str):
            if _string_bytes(value) > MAX_STRING_BYTES:
                raise Json1Error("string exceeds 8,388,608 bytes")
        elif isinstance(value, dict):
            if len(value) > MAX_OBJECT_MEMBERS:
                raise Json1Error("object exceeds 65,536 members")
            for name, member in value.items():
                if _string_bytes(name) > MAX_MEMBER_NAME_BYTES:
                    raise Json1Error("member name exceeds 1,024 bytes")
                stack.append((member, depth + 1))
        elif isinstance(value, list):
            if len(value) > MAX_ARRAY_ITEMS:
                raise Json1Error("array exceeds 65,536 items")
            for item in value:
                stack.append((item, depth + 1))


class _Budget:
    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes = 0


def snapshot(value: Any, *, depth: int = 1) -> Any:
    """Return an isolated deep copy of an application value, checked as JSON/1.

    `depth` is the depth the value occupies inside its enclosing document so a
    value nested in a frame is held to the frame's absolute depth limit.
    Accepts dict (str keys), list, tuple, str, int, float, bool and None,
    including subclasses, and returns plain built-in types only.
    """
    budget = _Budget()
    return _copy(value, depth, budget)


def _copy(value: Any, depth: int, budget: _Budget) -> Any:
    budget.nodes += 1
    if budget.nodes > MAX_NODES:
        raise Json1Error("value exceeds 262,144 nodes")
    if depth > MAX_DEPTH:
        raise Json1Error("value exceeds depth 128")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        plain = str.__str__(value)
        if _string_bytes(plain) > MAX_STRING_BYTES:
            raise Json1Error("string exceeds 8,388,608 bytes")
        return plain
    if isinstance(value, int):
        number = int.__index__(value)
        if abs(number) > MAX_SAFE_INTEGER:
            raise Json1Error("integer outside the safe integer range")
        return number
    if isinstance(value, float):
        return _number(float.__float__(value))
    if isinstance(value, dict):
        if len(value) > MAX_OBJECT_MEMBERS:
            raise Json1Error("object exceeds 65,536 members")
        copied: dict[str, Any] = {}
        for name, member in value.items():
            if not isinstance(name, str):
                raise Json1Error(f"object member name is {type(name).__name__}, not str")
            plain_name = str.__str__(name)
            if _string_bytes(plain_name) > MAX_MEMBER_NAME_BYTES:
                raise Json1Error("member name exceeds 1,024 bytes")
            copied[plain_name] = _copy(member, depth + 1, budget)
        return copied
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ARRAY_ITEMS:
            raise Json1Error("array exceeds 65,536 items")
        return [_copy(item, depth + 1, budget) for item in value]
    raise Json1Error(f"{type(value).__name__} is not a JSON value")


def encode(value: Any) -> bytes:
    """Encode an already validated value compactly as UTF-8 bytes."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8")


def canonical(value: Any) -> bytes:
    """RFC 8785 (JCS) bytes of a JSON/1 value, the input of FLOW's digests.

    The value is checked as JSON/1 first (snapshot): canonicalization never
    repairs an out-of-domain number, a lone surrogate or an oversized value.
    """
    parts: list[str] = []
    _canonical(snapshot(value), parts)
    return "".join(parts).encode("utf-8")


def _canonical(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        # Python's escaping with ensure_ascii=False is RFC 8785's: `"`, `\`,
        # the short forms \b \t \n \f \r, every other control as lowercase
        # \u00xx, and everything else (U+007F, U+2028, non-BMP) literal.
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_number(value))
    elif isinstance(value, list):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _canonical(item, out)
        out.append("]")
    else:
        out.append("{")
        # RFC 8785 §3.2.3: member names sort by their UTF-16 code units;
        # big-endian UTF-16 bytes compare in exactly that order.
        for index, name in enumerate(sorted(value, key=_utf16_units)):
            if index:
                out.append(",")
            out.append(json.dumps(name, ensure_ascii=False))
            out.append(":")
            _canonical(value[name], out)
        out.append("}")


def _utf16_units(name: str) -> bytes:
    return name.encode("utf-16-be")


def format_number(value: float) -> str:
    """ECMAScript Number.prototype.toString of a finite binary64 (RFC 8785 §3.2.2.3).

    Python's repr gives the shortest digits that round-trip, which are the
    digits ECMAScript chooses; only the layout around them differs.
    """
    if not math.isfinite(value):
        raise Json1Error("number is not finite")
    if value == 0:
        return "0"  # -0 too
    if value < 0:
        return "-" + format_number(-value)
    mantissa, _, exponent = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # value = 0.<digits> x 10^point
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    sign = "+" if n - 1 >= 0 else "-"
    head = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(n - 1)}"
