"""Where ``import torch`` (or any module) resolves inside a prefix's own interpreter, without importing it:
envguard/in_process/import_origin.py run by path in that interpreter."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from envguard.errors import IntegrityError

PROBE_DIR = Path(__file__).resolve().parent.parent / "in_process"


def import_origins(python: str | os.PathLike[str], modules: Iterable[str] = ("torch", "numpy"),
                   *, timeout: float = 60.0, env: dict[str, str] | None = None) -> dict[str, dict]:
    """Where ``import <module>`` resolves inside the target interpreter (without importing it).

    Runs envguard/in_process/import_origin.py by path with that interpreter (in ``env``: check passes the
    activated environment, default this process's); returns
    ``{module: {"origin": path | None, "dist": ..., "version": ...}}``.
    """
    script = PROBE_DIR / "import_origin.py"
    try:
        proc = subprocess.run([os.fspath(python), "-I", os.fspath(script), *modules], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise IntegrityError(f"cannot run {python}: {e}") from e
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise IntegrityError(f"{python} {script.name} failed (exit {proc.returncode}): {tail[0]}")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError) as e:
        raise IntegrityError(f"{script.name} printed no JSON: {proc.stdout[-200:]!r}") from e
