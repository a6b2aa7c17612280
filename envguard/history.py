"""``conda-meta/history`` as conda writes it, with the lines ``envguard create`` adds to its block.

conda appends one block per transaction::

    ==> 2026-12-01 22:40:00 <==
    # cmd: conda create -n demo python=3.11 numpy
    # conda version: 24.7.1
    +conda-forge/linux-64::python-3.11.9-hb806964_0_cpython
    # update specs: ['python=3.11', 'numpy']

and ``conda env export --from-history`` replays the ``# update specs:`` / ``# remove specs:`` lines (as
envguard.export.conda does). ``envguard create`` writes the same block for the environment it built,
``# update specs:`` holding the conda dependencies of the spec the lock was checked against, and adds its own
comment lines, which conda reads past (it parses only ``# cmd:``, ``# conda version:`` and the ``specs:``
lines)::

    # envguard version: 0.9.0
    # envguard name: demo                      the spec's name:
    # envguard lock: /home/u/proj/conda-lock.yml
    # envguard pip specs: ['torch==2.4.*']     the spec's pip: section
    # envguard pip repositories: ['https://download.pytorch.org/whl/cu124']
    # envguard pip installed: ['torch==2.4.1 --hash=sha256:...']   what create installed from the lock

Lists are written as Python's ``repr`` of a list of strings, as conda writes its spec lists, and read back with
:func:`ast.literal_eval`, bounded in size: the file is untrusted input like any other.
"""

from __future__ import annotations

import ast
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

HISTORY = "history"
_MAX_HISTORY = 32 << 20
_MAX_LINE = 1 << 20
_TAG = "# envguard "


@dataclass
class Built:
    """What the last ``envguard create`` block of a history says."""

    version: str = ""
    name: str | None = None
    lockfile: str | None = None
    conda_specs: list[str] | None = None  # None: create recorded none (--frozen, or no spec to check against)
    pip_specs: list[str] = field(default_factory=list)
    pip_repositories: list[str] = field(default_factory=list)
    pip_installed: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # pep503 name -> (version, sha256)


def _list(items: Sequence[str]) -> str:
    return repr([str(i) for i in items])


def history_block(*, cmd: str, version: str, packages: Sequence[str], conda_specs: Sequence[str] | None,
                  name: str | None = None, lockfile: str | None = None, pip_specs: Sequence[str] = (),
                  pip_repositories: Sequence[str] = (), pip_installed: Sequence[str] = (),
                  when: float | None = None) -> str:
    """One block in conda's layout. ``packages`` are ``channel/subdir::name-version-build``; ``pip_installed``
    are ``name==version`` with `` --hash=sha256:HEX`` when the lock has one."""
    lines = [f"==> {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))} <==", f"# cmd: {cmd}",
             f"{_TAG}version: {version}"]
    if name:
        lines.append(f"{_TAG}name: {' '.join(name.split())}")
    if lockfile:
        lines.append(f"{_TAG}lock: {' '.join(lockfile.split())}")
    lines += [f"+{p}" for p in sorted(packages)]
    if conda_specs is not None:
        lines.append(f"# update specs: {_list(conda_specs)}")
    if pip_specs:
        lines.append(f"{_TAG}pip specs: {_list(pip_specs)}")
    if pip_repositories:
        lines.append(f"{_TAG}pip repositories: {_list(pip_repositories)}")
    if pip_installed:
        lines.append(f"{_TAG}pip installed: {_list(pip_installed)}")
    return "\n".join(lines) + "\n"


def append_history(prefix: Path, block: str) -> None:
    """Append a block to ``conda-meta/history`` (created when missing), as conda appends its own."""
    meta = prefix / "conda-meta"
    meta.mkdir(parents=True, exist_ok=True)
    path = meta / HISTORY
    existing = path.read_bytes() if path.is_file() else b""
    sep = b"" if not existing or existing.endswith(b"\n") else b"\n"
    with open(path, "ab") as fh:
        fh.write(sep + block.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())


def _strings(text: str) -> list[str] | None:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v.strip() for v in value]


def _installed(items: list[str]) -> dict[str, tuple[str, str | None]]:
    from envguard.model import pep503

    out: dict[str, tuple[str, str | None]] = {}
    for item in items:
        req, _, digest = item.partition(" --hash=sha256:")
        name, sep, version = req.partition("==")
        if sep and name.strip() and version.strip():
            sha = digest.strip().lower() or None
            out[pep503(name.strip())] = (version.strip(), sha if sha and len(sha) == 64 else None)
    return out


def read_built(prefix: Path) -> Built | None:
    """The last block ``envguard create`` wrote into the history, or None (not built by envguard, or the
    history is absent, unreadable or too large)."""
    path = prefix / "conda-meta" / HISTORY
    try:
        if not path.is_file() or path.stat().st_size > _MAX_HISTORY:
            return None
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = [ln.strip() for ln in fh if len(ln) <= _MAX_LINE]
    except OSError:
        return None
    last: Built | None = None
    current: Built | None = None
    for line in lines:
        if line.startswith("==>"):
            current = None
            continue
        if line.startswith(_TAG + "version:"):
            current = last = Built(version=line.split(":", 1)[1].strip())
            continue
        if current is None:
            continue
        if line.startswith(_TAG):
            key, _, value = line[len(_TAG):].partition(":")
            if key == "name":
                current.name = value.strip() or None
            elif key == "lock":
                current.lockfile = value.strip() or None
            elif key in ("pip specs", "pip repositories", "pip installed"):
                items = _strings(value) or []
                if key == "pip specs":
                    current.pip_specs = items
                elif key == "pip repositories":
                    current.pip_repositories = items
                else:
                    current.pip_installed = _installed(items)
        elif line.startswith("# update specs:"):
            current.conda_specs = _strings(line.split(":", 1)[1])
    return last
