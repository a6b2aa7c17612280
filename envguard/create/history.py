"""What ``envguard create`` records in ``conda-meta/history`` (format: envguard.history): the packages it
linked, the conda specs of the spec the lock was checked against (``# update specs:``, as conda records a
request), the spec's name, its pip section and pip repositories, and the pip packages installed from the lock.

The specs are recorded only when the lock was checked against the spec (the freshness check ran and
passed, or re-locked it): under ``--frozen`` the spec was never read, and a lock's packages are not what
anyone asked for. The spec is read without PyYAML where its layout allows (envguard.sources.lockscan.load_subset), so
that a quiet create stays as cheap as it is.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.create.plan import LockPlan
from envguard.errors import EnvguardError
from envguard.redact import redact

_SELECTOR = re.compile(r"#\s*\[")


@dataclass
class Request:
    """The spec a create was checked against, as the history records it."""

    name: str | None = None
    conda: list[str] | None = None
    pip: list[str] = field(default_factory=list)
    pip_repositories: list[str] = field(default_factory=list)


def _items(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    conda: list[str] = []
    pip: list[str] = []
    for dep in data.get("dependencies") or []:
        if isinstance(dep, str):
            conda.append(dep.strip())
        elif isinstance(dep, dict):
            pip += [p.strip() for p in dep.get("pip") or [] if isinstance(p, str)]
    return conda, pip


def read_request(files: Sequence[Path], platform: str, *, checked: bool) -> Request:
    """The spec's name, and (``checked``: the lock was verified against these files) its specs."""
    from envguard import lock as lock_wing
    from envguard.sources.lockscan import load_subset
    from envguard.yamlio import read_text

    request = Request()
    texts: list[tuple[Path, str]] = []
    for f in files:
        try:
            texts.append((f, read_text(f)))
        except (EnvguardError, OSError):
            return request
    if any(_SELECTOR.search(t) for _, t in texts):  # `# [linux]` selectors: the full reader applies them
        try:
            spec = lock_wing.read_spec([f for f, _ in texts], [platform])
        except EnvguardError:
            return request
        conda, pip = spec.dependencies_for(platform)
        request.name, repos = spec.name, spec.pip_repositories
    else:
        conda, pip, repos = [], [], []
        for f, text in texts:
            try:
                data = load_subset(f, text)
            except EnvguardError:
                return request
            if not isinstance(data, dict):
                return request
            c, p = _items(data)
            conda, pip = conda + c, pip + p
            name = data.get("name")
            if request.name is None and isinstance(name, str) and name.strip():
                request.name = name.strip()
            repos += [redact(r) for r in data.get("pip-repositories") or [] if isinstance(r, str) and r not in repos]
        conda, pip = [redact(c) for c in conda], [redact(p) for p in pip]
    if checked:
        request.conda, request.pip, request.pip_repositories = conda, pip, repos
    return request


def _cmd() -> str:
    argv = sys.argv[1:] if sys.argv and sys.argv[0].endswith(("envguard", "__main__.py")) else []
    return redact("envguard " + (shlex.join(argv) if argv and argv[0] == "create" else "create"))


def write_history(prefix: Path, plan: LockPlan, request: Request | None) -> None:
    """Append create's block to ``prefix/conda-meta/history``."""
    from envguard import __version__
    from envguard.history import append_history, history_block

    packages = []
    for a in plan.conda:
        url = a.locked_url or a.url
        channel = redact(url.split("?", 1)[0].rsplit("/", 2)[0])
        stem = url.split("?", 1)[0].rsplit("/", 1)[-1]
        for suffix in (".conda", ".tar.bz2"):
            stem = stem.removesuffix(suffix)
        packages.append(f"{channel}/{a.subdir}::{stem}")
    installed = [f"{p.name}=={p.version}" + (f" --hash=sha256:{p.sha256}" if p.sha256 else "") for p in plan.pip]
    r = request or Request()
    append_history(prefix, history_block(
        cmd=_cmd(), version=__version__, packages=packages, conda_specs=r.conda, name=r.name,
        lockfile=redact(str(plan.lockfile.resolve())), pip_specs=r.pip, pip_repositories=r.pip_repositories,
        pip_installed=installed))
