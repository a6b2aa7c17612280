"""What every rule module of check shares: the severities' shorthands (``E``, ``W``, ``I``), and how a fix is
worded (:func:`catalog_fix`, the failure catalogue's fix text for a case; :func:`create_command`, the create
command that rebuilds the checked environment)."""

from __future__ import annotations

import shlex

from envguard.findings import Severity

E, W, I = Severity.ERROR, Severity.WARNING, Severity.INFO  # noqa: E741 - the severities by their letters


def catalog_fix(case_id: str) -> str:
    """The failure catalogue's fix text (envguard/data/failures.yaml): smoke and check word a problem alike.
    :func:`evaluate` aims its envguard commands at the checked environment (envguard.catalog.aim)."""
    from envguard import catalog  # lazily: most checks find nothing that needs a fix text

    return catalog.get(case_id).fix


def create_command(prefix: object, lockfile: str | None = None, *, force: bool = False) -> str:
    """``envguard create -p PREFIX [--lockfile LOCK] [--force]``, shell-quoted: the command that makes the
    checked environment exactly its lock again (create rebuilds an environment that drifted; ``force`` for a
    change its sync cannot see: a file's content changed with its size kept)."""
    parts = ["envguard", "create", "-p", str(prefix)] + (["--lockfile", lockfile] if lockfile else [])
    return shlex.join(parts + (["--force"] if force else []))
