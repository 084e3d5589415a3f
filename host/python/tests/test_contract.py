"""Contract descriptor digests of jiggy.flow.contract against known answers.

Capability Contract/1 conformance case 7: the Python implementation computes
the same domain-separated full-descriptor digest as the others. The answers
are the shared `conformance/fixtures/contract-digests.json`: the digests the
standard and the reference publish, and RFC 8785's own edge cases.
"""

from __future__ import annotations

import json
import struct
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jiggy.flow  # noqa: E402
from jiggy.flow import _json1, contract  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
KNOWN = json.loads((REPO / "conformance/fixtures/contract-digests.json").read_text("utf-8"))
DATA = REPO / "flow/tests/data"


def bits(hex_bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(hex_bits))[0]


class DigestTests(unittest.TestCase):
    def test_every_known_descriptor_digest_comes_out_exactly(self) -> None:
        self.assertGreaterEqual(len(KNOWN["descriptors"]), 7)
        for known in KNOWN["descriptors"]:
            with self.subTest(known["file"]):
                raw = (DATA / known["file"]).read_bytes()
                digest = {
                    "capability": contract.capability_digest,
                    "channel": contract.channel_digest,
                }
                self.assertEqual(digest[known["kind"]](raw), known["digest"])
                # The parsed value gives the same digest as its bytes.
                self.assertEqual(digest[known["kind"]](json.loads(raw)), known["digest"])

    def test_the_domain_separates_the_two_kinds(self) -> None:
        self.assertEqual(contract.CAPABILITY_DOMAIN, b"FLOW-Capability-Contract/1\0")
        self.assertEqual(contract.CHANNEL_DOMAIN, b"FLOW-Channel-Contract/1\0")
        raw = (DATA / "session-store.capability.json").read_bytes()
        self.assertNotEqual(contract.capability_digest(raw), contract.channel_digest(raw))

    def test_any_change_changes_the_digest_and_layout_does_not(self) -> None:
        raw = (DATA / "session-store.capability.json").read_bytes()
        value = json.loads(raw)
        compact = json.dumps(value, separators=(",", ":"), sort_keys=False).encode()
        self.assertEqual(contract.capability_digest(compact), contract.capability_digest(raw))
        value["version"] = "1.0.1"
        self.assertNotEqual(contract.capability_digest(value), contract.capability_digest(raw))

    def test_descriptor_bytes_outside_json1_are_refused(self) -> None:
        for text in [b'{"a":1,"a":2}', b"\xef\xbb\xbf{}", b'{"n":1e21}', b"\xff"]:
            with self.subTest(text), self.assertRaises(_json1.Json1Error):
                contract.capability_digest(text)
        limit = contract.MAX_DESCRIPTOR_BYTES
        self.assertTrue(
            contract.capability_digest(b"{}" + b" " * (limit - 2)).startswith("sha256:")
        )
        with self.assertRaises(_json1.Json1Error):
            contract.capability_digest(b"{}" + b" " * (limit - 1))

    def test_the_module_stays_outside_the_run_sdk_root(self) -> None:
        self.assertNotIn("capability_digest", jiggy.flow.__all__)
        self.assertFalse(hasattr(jiggy.flow, "capability_digest"))


class CanonicalTests(unittest.TestCase):
    def test_rfc8785_texts(self) -> None:
        for text, expected in KNOWN["canonical"]:
            with self.subTest(text):
                value = _json1.decode(text.encode("utf-8"))
                self.assertEqual(contract.canonical(value), expected.encode("utf-8"))

    def test_key_order_is_utf16_code_units_not_code_points(self) -> None:
        # U+10000 is D800 DC00 in UTF-16, so it sorts before U+FFFF.
        self.assertEqual(
            contract.canonical({"\uffff": 1, "\U00010000": 2, "\ue000": 3}).decode(),
            '{"\U00010000":2,"\ue000":3,"\uffff":1}',
        )

    def test_numbers_are_ecmascript_number_to_string(self) -> None:
        for hex_bits, expected in KNOWN["numbers"]:
            with self.subTest(hex_bits):
                self.assertEqual(_json1.format_number(bits(hex_bits)), expected)
        self.assertEqual(contract.canonical(-0.0), b"0")
        self.assertEqual(contract.canonical([1e-7, 1e-6, 1.0]), b"[1e-7,0.000001,1]")

    def test_numbers_match_node_on_a_random_corpus(self) -> None:
        # Bit patterns with the text Node.js's String(x) printed for them.
        checked = 0
        for line in (DATA / "es-numbers.txt").read_text("ascii").splitlines():
            hex_bits, expected = line.split(" ")
            self.assertEqual(_json1.format_number(bits(hex_bits)), expected, hex_bits)
            checked += 1
        self.assertGreater(checked, 2_900)

    def test_values_outside_json1_are_refused_not_repaired(self) -> None:
        for text in KNOWN["refused"]:
            with self.subTest(text), self.assertRaises(_json1.Json1Error):
                contract.canonical(_json1.decode(text.encode("utf-8")))
        for value in [1e21, float("nan"), float("inf"), 2**53, "\ud800", {"k": object()}, {1: 2}]:
            with self.subTest(repr(value)), self.assertRaises(_json1.Json1Error):
                contract.canonical(value)


if __name__ == "__main__":
    unittest.main()
