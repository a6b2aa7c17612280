"""Helpers for the `envguard create` tests (plain functions; the fixtures live in the test modules).

``write_env`` + ``make_lock`` produce a real conda-lock.yml with `envguard lock` against the test channels;
``envguard_run`` runs the real CLI in a subprocess; ``tree_state`` snapshots a directory byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from support import channels
from support.channels import HOST_PY

ENVGUARD = [sys.executable, "-m", "envguard"]

# The standard channel's host packages that make a working python + torch environment.
BASE_DEPS = (f"python={HOST_PY}", "pytorch=2.13.0=cpu*", "numpy", "pip", "egtool", "egplaceholder", "eglink")


def write_env(directory: Path, channel_urls: Sequence[str] | str, deps: Sequence[str], *,
              pip: Sequence[str] = (), pip_index: str | None = None, name: str = "environment.yml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    urls = [channel_urls] if isinstance(channel_urls, str) else list(channel_urls)
    lines = ["name: t", "channels:"] + [f"  - {u}" for u in urls] + ["dependencies:"]
    lines += [f"  - {d}" for d in deps]
    if pip:
        lines += ["  - pip:"] + [f"    - {p}" for p in pip]
    if pip_index:
        lines += ["pip-repositories:", f"  - {pip_index}", "allow-pypi-requests: false"]
    lines += ["platforms:", f"  - {channels.host_platform()}"]
    path = directory / name
    path.write_text("\n".join(lines) + "\n")
    return path


def make_lock(env_file: Path, lockfile: Path | None = None) -> Path:
    """Lock with the real `envguard lock` (in-process: rattler solve + conda-lock's writer)."""
    from envguard.lock import lock

    result = lock([env_file], lockfile=lockfile)
    return Path(result.lockfile)


def envguard_run(*args: str, env: Mapping[str, str] | None = None, timeout: float = 120,
                 cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([*ENVGUARD, *args], capture_output=True, text=True, env=full_env, timeout=timeout,
                          cwd=cwd)


def envguard_popen(*args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.Popen([*ENVGUARD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env)


def tree_state(root: Path) -> dict[str, str]:
    """relative path -> sha256 of the content, ``link:<target>`` or ``dir``: equal means byte for byte."""
    state: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = Path(dirpath) / d
            state[str(p.relative_to(root))] = f"link:{os.readlink(p)}" if p.is_symlink() else "dir"
        for f in filenames:
            p = Path(dirpath) / f
            rel = str(p.relative_to(root))
            if p.is_symlink():
                state[rel] = f"link:{os.readlink(p)}"
            else:
                state[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return state


def siblings(target: Path) -> list[str]:
    """Names beside ``target`` that envguard made for it, apart from the prefix lock file."""
    prefix = f".{target.name}.envguard-"
    return sorted(p.name for p in target.parent.iterdir()
                  if p.name.startswith(prefix) and not p.name.endswith("envguard-lock"))


def run_cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """envguard in-process (envguard.cli.run) with ``args``: (exit code, stdout, stderr), from pytest's capsys."""
    from envguard import cli

    capsys.readouterr()
    code = cli.run(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err
