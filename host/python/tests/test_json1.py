"""JSON/1 limits of jiggy.flow, each at the limit and one past it."""

from __future__ import annotations

import asyncio
import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jiggy.flow import _json1, _wire, handle  # noqa: E402

FIXTURES = Path("/work/shared/flow-reference/run-1-fixtures")


def nested(depth: int) -> bytes:
    """A document whose deepest value node sits at `depth` (root is 1)."""
    return b"[" * (depth - 1) + b"null" + b"]" * (depth - 1)


class DecodeTests(unittest.TestCase):
    def assertRejected(self, payload: bytes) -> None:
        with self.assertRaises((_json1.Json1Error, UnicodeDecodeError)):
            _json1.decode(payload)

    def test_depth(self) -> None:
        self.assertIsNotNone(_json1.decode(nested(_json1.MAX_DEPTH)))
        self.assertRejected(nested(_json1.MAX_DEPTH + 1))

    def test_document_bytes(self) -> None:
        limit = _json1.MAX_DOCUMENT_BYTES
        self.assertIsNone(_json1.decode(b"null" + b" " * (limit - 4)))
        self.assertRejected(b"null" + b" " * (limit - 3))

    def test_nodes(self) -> None:
        limit = _json1.MAX_NODES

        # One root array of arrays: 1 + outer items + inner items nodes.
        def document(total: int) -> bytes:
            inner = total - 1 - 4
            chunks = [inner // 4 + (1 if i < inner % 4 else 0) for i in range(4)]
            return json.dumps([[0] * n for n in chunks]).encode()

        self.assertEqual(len(_json1.decode(document(limit))), 4)
        self.assertRejected(document(limit + 1))

    def test_array_items_and_object_members(self) -> None:
        items = _json1.MAX_ARRAY_ITEMS
        self.assertEqual(len(_json1.decode(json.dumps([0] * items).encode())), items)
        self.assertRejected(json.dumps([0] * (items + 1)).encode())
        members = _json1.MAX_OBJECT_MEMBERS
        document = {f"k{i}": 0 for i in range(members)}
        self.assertEqual(len(_json1.decode(json.dumps(document).encode())), members)
        document["one-more"] = 0
        self.assertRejected(json.dumps(document).encode())

    def test_string_and_member_name_bytes(self) -> None:
        limit = _json1.MAX_STRING_BYTES
        self.assertEqual(len(_json1.decode(b'"' + b"x" * limit + b'"')), limit)
        self.assertRejected(b'"' + b"x" * (limit + 1) + b'"')
        # Multi-byte characters count as UTF-8 bytes, not characters.
        self.assertRejected(b'"' + "é".encode() * (limit // 2 + 1) + b'"')
        name = _json1.MAX_MEMBER_NAME_BYTES
        self.assertEqual(_json1.decode(b'{"' + b"n" * name + b'":1}'), {"n" * name: 1})
        self.assertRejected(b'{"' + b"n" * (name + 1) + b'":1}')

    def test_number_token_bytes(self) -> None:
        limit = _json1.MAX_NUMBER_TOKEN_BYTES
        at_limit = b"0." + b"1" * (limit - 2)
        self.assertAlmostEqual(_json1.decode(at_limit), 0.1111111111111111)
        self.assertRejected(b"0." + b"1" * (limit - 1))

    def test_safe_integers(self) -> None:
        safe = _json1.MAX_SAFE_INTEGER
        self.assertEqual(_json1.decode(str(safe).encode()), safe)
        self.assertEqual(_json1.decode(str(-safe).encode()), -safe)
        self.assertRejected(str(safe + 1).encode())
        self.assertRejected(str(-safe - 1).encode())
        self.assertRejected(b"9007199254740992.0")
        self.assertRejected(b"1e16")
        self.assertEqual(_json1.decode(b"1.0"), 1)
        self.assertEqual(_json1.decode(b"-0.0"), 0)
        self.assertEqual(_json1.decode(b"1.5"), 1.5)

    def test_non_finite_and_lone_surrogates(self) -> None:
        for payload in (
            b"NaN",
            b"Infinity",
            b"-Infinity",
            b"1e400",
            b'"\\udc00"',
            b'{"\\ud800":1}',
        ):
            with self.subTest(payload=payload):
                self.assertRejected(payload)
        self.assertEqual(_json1.decode(b'"\\ud83d\\udc23"'), "\U0001f423")

    def test_shared_framing_fixtures(self) -> None:
        fixtures = json.loads((FIXTURES / "framing.json").read_text())
        for fixture in fixtures["valid"]:
            frame = bytes.fromhex(fixture["hex"])
            with self.subTest(fixture["name"]):
                self.assertTrue(frame.endswith(b"\n"))
                self.assertIsInstance(_json1.decode(frame[:-1]), dict)
        for fixture in fixtures["invalid"]:
            frame = bytes.fromhex(fixture["hex"])
            with self.subTest(fixture["name"]):
                if not frame.endswith(b"\n"):
                    continue  # incomplete frame: a framing failure, covered by the peer tests
                self.assertRejected(frame[:-1])


class SnapshotTests(unittest.TestCase):
    def test_snapshot_is_a_deep_copy_of_plain_types(self) -> None:
        class Name(str):
            pass

        original = {"list": [1, 2.0, (3,)], Name("key"): Name("value")}
        copy = _json1.snapshot(original)
        self.assertEqual(copy, {"list": [1, 2, [3]], "key": "value"})
        original["list"].append(4)
        self.assertEqual(copy["list"], [1, 2, [3]])
        self.assertIs(type(next(iter(copy))), str)
        self.assertIs(type(copy["key"]), str)

    def test_snapshot_limits(self) -> None:
        value = None
        for _ in range(_json1.MAX_DEPTH - 1):
            value = [value]
        _json1.snapshot(value)
        with self.assertRaises(_json1.Json1Error):
            _json1.snapshot([value])
        cyclic: list = []
        cyclic.append(cyclic)
        with self.assertRaises(_json1.Json1Error):
            _json1.snapshot(cyclic)
        for bad in (float("inf"), 2**53, -(2**53), 1e16, {1: 1}, {"s"}, b"x", "\ud800"):
            with self.subTest(bad=bad), self.assertRaises(_json1.Json1Error):
                _json1.snapshot(bad)


class GrammarTests(unittest.TestCase):
    def test_wire_id(self) -> None:
        self.assertTrue(_wire.is_wire_id("a" * _wire.MAX_WIRE_ID_BYTES))
        self.assertFalse(_wire.is_wire_id("a" * (_wire.MAX_WIRE_ID_BYTES + 1)))
        for bad in ("", ":a", "a b", "a\n", 1, None, "é"):
            with self.subTest(bad=bad):
                self.assertFalse(_wire.is_wire_id(bad))
        self.assertTrue(_wire.is_wire_id("component:1/a-b.c_d"))

    def test_local_name(self) -> None:
        self.assertTrue(_wire.is_local_name("a" * _wire.MAX_LOCAL_NAME_BYTES))
        self.assertFalse(_wire.is_local_name("a" * (_wire.MAX_LOCAL_NAME_BYTES + 1)))
        for bad in ("", "A", "a--b", "-a", "a-", "a_b", "a\n"):
            with self.subTest(bad=bad):
                self.assertFalse(_wire.is_local_name(bad))

    def test_grant_contract_ids_follow_the_contract_id_grammar(self) -> None:
        digest = "sha256:" + "0" * 64

        def identity(contract_id: str) -> dict:
            return {"id": contract_id, "version": "1.0.0", "digest": digest}

        for good in ("https://example.org/a", "https://0x7f.example.org/a", "https://1.2.3.example/a"):
            with self.subTest(good=good):
                _wire.parse_contract_identity(identity(good), "grant")
        for bad in (
            "https://example.org",
            "https://192.168.0.1/a",
            "https://127.1/a",
            "https://0x7f.0.0.1/a",
            "https://1.2.3/a",
            "https://999.1.1.1/a",
            "https://example.0x/a",
        ):
            with self.subTest(bad=bad), self.assertRaises(_wire.InvalidParams):
                _wire.parse_contract_identity(identity(bad), "grant")

    def test_outbound_frames_are_held_to_frame_limits(self) -> None:
        value = None
        for _ in range(_json1.MAX_DEPTH - 1):
            value = [value]
        self.assertTrue(_wire.encode_frame({"v": value[0]}).endswith(b"\n"))
        with self.assertRaises(_json1.Json1Error):
            _wire.encode_frame({"v": value})
        with self.assertRaises(_json1.Json1Error):
            _wire.encode_frame({"v": "\ud800"})
        self.assertEqual(_wire.encode_frame({"s": "x" * 100}), b'{"s":"' + b"x" * 100 + b'"}\n')

    def test_error_message_bound(self) -> None:
        limit = _wire.MAX_ERROR_MESSAGE_CHARS
        self.assertEqual(len(_wire.bounded_message("x" * limit, "f")), limit)
        self.assertEqual(len(_wire.bounded_message("x" * (limit + 1), "f")), limit)
        self.assertEqual(_wire.bounded_message("", "fallback"), "fallback")
        self.assertEqual(_wire.bounded_message("a\ud800", "f"), "a?")


class HandleTests(unittest.TestCase):
    def test_handle_refuses_a_running_loop(self) -> None:
        async def handler(context):
            return {"outcome": "done", "output": None}

        async def inside_loop() -> None:
            handle(handler)

        with self.assertRaisesRegex(RuntimeError, "running loop"):
            asyncio.run(inside_loop())


if __name__ == "__main__":
    unittest.main()
