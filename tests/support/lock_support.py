"""Helpers and fixtures shared by the lock tests (test_lock*.py import them). No tests here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

#: the metadata of a hand-written linux-64 conda-lock v1 file, up to its ``package:`` key (entries follow)
LOCK_HEAD = f"""\
version: 1
metadata:
  content_hash:
    linux-64: "{'a' * 64}"
  channels:
  - url: conda-forge
    used_env_vars: []
  platforms:
  - linux-64
  sources:
  - environment.yml
package:
"""

#: a two-package conda-lock file (python, numpy; linux-64) that reads without a channel: commands' imports
#: and start-up are measured on it (tests/test_imports_follow_need.py, bench/imports.py)
SMALL_LOCK = LOCK_HEAD + f"""\
- name: python
  version: '3.11.9'
  manager: conda
  platform: linux-64
  dependencies: {{}}
  url: https://conda.anaconda.org/conda-forge/linux-64/python-3.11.9-h0_0_cpython.conda
  hash:
    md5: "{'0' * 32}"
    sha256: "{'a' * 64}"
  category: main
  optional: false
- name: numpy
  version: '2.1.0'
  manager: conda
  platform: linux-64
  dependencies:
    python: '>=3.11'
  url: https://conda.anaconda.org/conda-forge/linux-64/numpy-2.1.0-py311h0_0.conda
  hash:
    md5: "{'0' * 32}"
    sha256: "{'a' * 64}"
  category: main
  optional: false
"""

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
CONDA_LOCK = BIN / "conda-lock"
MAPPING = REPO / "envguard" / "data" / "conda-pypi-mapping.json"


def write_env(path: Path, *, channels: Sequence[str], deps: Sequence[str], pip: Sequence[str] = (),
              platforms: Sequence[str] | None = None, extra: str = "", name: str = "demo") -> Path:
    lines = [f"name: {name}", "channels:"] + [f"  - {c}" for c in channels] + ["dependencies:"]
    lines += [f"  - {d}" for d in deps]
    if pip:
        lines += ["  - pip:"] + [f"    - {p}" for p in pip]
    if platforms:
        lines += ["platforms:"] + [f"  - {p}" for p in platforms]
    text = "\n".join(lines) + "\n" + extra
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _clean_records(records: dict[str, dict]) -> dict[str, dict]:
    out = {}
    for fn, r in records.items():
        r = dict(r)
        for key in ("depends", "constrains"):
            if r.get(key) is None:  # the mamba test file writes null; repodata wants lists
                r[key] = []
        if r.get("track_features") == "":
            r.pop("track_features")
        out[fn] = r
    return out


def realworld_channel(realworld: Path, root: Path, which: str) -> Path:
    """A file:// channel made of a real conda-forge repodata subset; records point at conda-forge's URLs.

    ``which``: "py39" (conda-subchannel demo, python 3.9 tree, linux-64 + noarch) or "numpy312" (mamba's
    numpy 1.26.4 + python 3.12.1 closure, split into linux-64 and noarch by each record's subdir).
    """
    rd = realworld / "repodata"
    by_subdir: dict[str, dict[str, dict[str, dict]]] = {"linux-64": {}, "noarch": {}}
    if which == "py39":
        for sub in by_subdir:
            data = json.loads((rd / f"jaimergp__conda-subchannel-demo__{sub}__repodata@9925c97.json").read_text())
            by_subdir[sub] = {k: _clean_records(data.get(k) or {}) for k in ("packages", "packages.conda")}
    elif which == "numpy312":
        data = json.loads((rd / "mamba-org__mamba__libmamba__tests__data__repodata__conda-forge-numpy-linux-64.json")
                          .read_text())
        for key in ("packages", "packages.conda"):
            for fn, r in _clean_records(data.get(key) or {}).items():
                by_subdir[r["subdir"]].setdefault(key, {})[fn] = r
    else:
        raise ValueError(which)
    channel = root / which
    for sub, recs in by_subdir.items():
        (channel / sub).mkdir(parents=True, exist_ok=True)
        doc = {
            # repodata v2 base_url: records resolve to conda-forge's real download URLs
            "info": {"subdir": sub, "base_url": f"https://conda.anaconda.org/conda-forge/{sub}/"},
            "repodata_version": 2,
            "packages": recs.get("packages", {}),
            "packages.conda": recs.get("packages.conda", {}),
        }
        (channel / sub / "repodata.json").write_text(json.dumps(doc))
    return channel


def envguard(args: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "envguard"), *args], cwd=cwd, env=env or os.environ.copy(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def stub_conda(session_tmp: Path) -> Path:
    """A 'conda' that only answers --version: conda-lock's CLI insists on one, and never reaches it when fresh."""
    path = session_tmp / "stub-conda"
    path.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo "conda 24.1.0"; exit 0; fi\n'
                    'echo "stub conda: refusing to solve" >&2\nexit 97\n')
    path.chmod(0o755)
    return path


def conda_lock_verdict(stub: Path, files: Sequence[Path], lockfile: Path, *, platforms: Sequence[str],
                       cuda: str | None, cwd: Path) -> str:
    """'fresh' or 'stale', as the real ``conda-lock lock --check-input-hash`` decides on these files."""
    cmd = [str(CONDA_LOCK), "lock", "--check-input-hash", "--conda", str(stub), "--kind", "lock",
           "--lockfile", str(lockfile), "--pypi_to_conda_lookup_file", str(MAPPING)]
    for f in files:
        cmd += ["-f", str(f)]
    for p in platforms:
        cmd += ["-p", p]
    if cuda == "none":
        cmd += ["--without-cuda"]
    elif cuda:
        cmd += ["--with-cuda", cuda]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    out = proc.stderr + proc.stdout
    if "Locking dependencies for" in out:
        return "stale"  # it went on to solve (and the stub refused)
    if proc.returncode == 0 and "Skipping solve" in out:
        return "fresh"
    raise AssertionError(f"unexpected conda-lock outcome rc={proc.returncode}:\n{out[-3000:]}")
