"""The PEP 517 build backend of the `jiggy-flow` distribution, in-tree.

jiggy.flow is pure standard library, and so is its build: this backend
needs no package from an index (setuptools without `wheel` cannot make a
wheel, and an isolated build would fetch both), so `pip install
host/python` works offline. It writes `jiggy/` (less the host's `_gate`,
which only jig's runtimes load) with the metadata of `pyproject.toml`'s
`[project]` table into a wheel, an sdist, or an editable wheel (a `.pth`
naming this directory). Archive timestamps are fixed, so one source tree
builds the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "jiggy"
# Host machinery bundled beside the SDK, not part of the distribution.
EXCLUDED = {"_gate", "__pycache__"}
# The zip epoch; every archive member gets it.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
SDIST_FILES = ["pyproject.toml", "README.md", "backend/jiggy_flow_backend.py"]


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]


def _dist_name(project: dict) -> str:
    return project["name"].replace("-", "_")


def _metadata(project: dict) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']['text']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    readme = (ROOT / project["readme"]).read_text("utf-8")
    lines += ["Description-Content-Type: text/markdown", "", readme]
    return "\n".join(lines)


def _package_files() -> list[tuple[str, bytes]]:
    files = []
    for path in sorted((ROOT / PACKAGE).rglob("*")):
        relative = path.relative_to(ROOT)
        if path.is_file() and not EXCLUDED.intersection(relative.parts):
            if path.suffix in {".py", ".typed"}:
                files.append((relative.as_posix(), path.read_bytes()))
    return files


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _write_wheel(directory: str, members: list[tuple[str, bytes]]) -> str:
    project = _project()
    name = _dist_name(project)
    info = f"{name}-{project['version']}.dist-info"
    members = members + [
        (f"{info}/METADATA", _metadata(project).encode("utf-8")),
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: jiggy_flow_backend\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        ),
    ]
    record = "".join(f"{path},{_record_hash(data)},{len(data)}\n" for path, data in members)
    members.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode("utf-8")))
    wheel = f"{name}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, wheel), "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in members:
            entry = zipfile.ZipInfo(path, FIXED_TIME)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(entry, data)
    return wheel


# PEP 517 hooks.


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: the installed .pth puts this source tree on sys.path.
    pth = (str(ROOT) + "\n").encode("utf-8")
    return _write_wheel(wheel_directory, [(f"{_dist_name(_project())}.pth", pth)])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    members = [(path, (ROOT / path).read_bytes()) for path in SDIST_FILES]
    members += _package_files()
    members.append(("PKG-INFO", _metadata(project).encode("utf-8")))
    sdist = f"{base}.tar.gz"
    with tarfile.open(
        os.path.join(sdist_directory, sdist), "w:gz", format=tarfile.PAX_FORMAT
    ) as tar:
        for path, data in members:
            entry = tarfile.TarInfo(f"{base}/{path}")
            entry.size, entry.mode, entry.mtime = len(data), 0o644, 0
            tar.addfile(entry, io.BytesIO(data))
    return sdist
