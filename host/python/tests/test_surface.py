"""The root module jiggy.flow exposes Run SDK/1 only (Run SDK/1 §1)."""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jiggy.flow  # noqa: E402


class SurfaceTests(unittest.TestCase):
    def test_root_module_reaches_no_protocol_machinery(self) -> None:
        # Session holds the pending tables and admit(): protocol machinery.
        self.assertFalse(hasattr(jiggy.flow, "Session"))

    def test_every_public_name_the_sdk_defines_is_run_sdk_surface(self) -> None:
        # Public attributes defined by the SDK's own modules are exactly the
        # exported surface; the standard library it imports is not the SDK's.
        own = {
            name
            for name in dir(jiggy.flow)
            if not name.startswith("_")
            and str(getattr(getattr(jiggy.flow, name), "__module__", "")).startswith("jiggy.flow")
        }
        self.assertLessEqual(own, set(jiggy.flow.__all__))
        self.assertIn("handle", own)
        self.assertIn("ChannelReceiver", own)


if __name__ == "__main__":
    unittest.main()
