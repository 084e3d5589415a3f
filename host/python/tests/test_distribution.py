"""The `jiggy-flow` distribution (Run SDK/1 §1) installs offline and runs.

`pip install --no-index` of this directory, and of the sdist its backend
makes, into a fresh virtual environment: no index is asked (the in-tree
backend requires nothing), the installed `jiggy.flow` is the one imported,
and a trivial component answers a root `flow/run` from that installation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import tomllib
import unittest
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "backend"))

import jiggy_flow_backend as backend  # noqa: E402

ECHO = """from jiggy.flow import RunContext, RunResult, handle


async def run(context: RunContext) -> RunResult:
    return {"outcome": "done", "output": context.input}


handle(run)
"""

ROOT_REQUEST = {
    "jsonrpc": "2.0",
    "id": "host:1",
    "method": "flow/run",
    "params": {
        "protocol": "run/1",
        "input": {"hello": "world"},
        "settings": {},
        "attachments": {},
        "scratch": "/tmp",
        "deadlineUnixMs": 1787558400000,
    },
}


def offline_env() -> dict[str, str]:
    """No PYTHONPATH (the bundled copy must not leak in) and no index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1")
    return env


class DistributionTests(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="jiggy-flow-dist-"))
        self.addCleanup(subprocess.run, ["rm", "-rf", str(self.dir)], check=False)

    def install(self, source: Path) -> Path:
        venv = self.dir / "venv"
        # Without ensurepip (Debian splits it out), installed by this
        # interpreter's pip into the venv's interpreter (pip >= 22.3).
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)],
            check=True,
            env=offline_env(),
        )
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install"]
            + ["--no-index", str(source)],
            capture_output=True,
            text=True,
            env=offline_env(),
            cwd=self.dir,
        )
        self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
        return venv / "bin/python"

    def assert_runs_installed(self, python: Path) -> None:
        where = subprocess.run(
            [
                str(python),
                "-c",
                "import jiggy.flow.contract as c, jiggy.flow as f; print(f.__file__)",
            ],
            capture_output=True,
            text=True,
            env=offline_env(),
            cwd=self.dir,
            check=True,
        ).stdout.strip()
        self.assertTrue(where.startswith(str(self.dir / "venv")), where)
        component = self.dir / "flow.py"
        component.write_text(ECHO, "utf-8")
        # The host keeps stdin open until the root response (EOF before it is
        # a lost channel), then closes it; the component then exits 0.
        process = subprocess.Popen(
            [str(python), str(component)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=offline_env(),
            cwd=self.dir,
        )
        process.stdin.write((json.dumps(ROOT_REQUEST) + "\n").encode())
        process.stdin.flush()
        line = process.stdout.readline()
        process.stdin.close()
        self.assertEqual(process.wait(timeout=30), 0, process.stderr.read())
        process.stdout.close()
        process.stderr.close()
        response = json.loads(line)
        self.assertEqual(response["id"], "host:1")
        self.assertEqual(response["result"], {"outcome": "done", "output": {"hello": "world"}})

    def test_the_source_directory_installs_offline_and_runs_a_component(self) -> None:
        self.assert_runs_installed(self.install(HERE))
        # An in-place build leaves nothing behind in the source tree.
        self.assertFalse(list(HERE.glob("*.egg-info")) + list(HERE.glob("build")))

    def test_the_sdist_installs_offline_and_runs_a_component(self) -> None:
        sdist = self.dir / backend.build_sdist(str(self.dir))
        self.assert_runs_installed(self.install(sdist))

    def test_the_wheel_is_the_sdk_with_its_metadata(self) -> None:
        project = tomllib.loads((HERE / "pyproject.toml").read_text("utf-8"))["project"]
        self.assertEqual(project["name"], "jiggy-flow")
        self.assertEqual(project["requires-python"], ">=3.11")
        wheel = self.dir / backend.build_wheel(str(self.dir))
        self.assertEqual(wheel.name, f"jiggy_flow-{project['version']}-py3-none-any.whl")
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            metadata = archive.read(f"jiggy_flow-{project['version']}.dist-info/METADATA").decode()
        self.assertIn("jiggy/flow/__init__.py", names)
        self.assertIn("jiggy/flow/contract.py", names)
        self.assertIn("jiggy/flow/py.typed", names)
        # jig's runtime gate is host machinery, not the SDK.
        self.assertFalse([n for n in names if "_gate" in n or "__pycache__" in n], names)
        self.assertIn("Name: jiggy-flow\n", metadata)
        self.assertIn("Requires-Python: >=3.11\n", metadata)
        # The same tree builds the same bytes.
        again = self.dir / "again"
        again.mkdir()
        self.assertEqual((again / backend.build_wheel(str(again))).read_bytes(), wheel.read_bytes())


if __name__ == "__main__":
    unittest.main()
