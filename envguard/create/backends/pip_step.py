"""pip packages from the lock: ``pip install --no-deps --require-hashes`` of the locked URLs.

envguard's own pip runs against the new environment's interpreter (``pip --python``, pip >= 22.3), so the
environment needs no pip of its own; without one here, the environment's pip is used. When the environment
is being built in a staging directory, pip writes that path into the scripts it creates: they are
rewritten to the final path, as rattler does for conda packages.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envguard.create.integrity import mismatch_error
from envguard.errors import BackendError, EnvguardError, IntegrityError
from envguard.platforms import python_in_prefix
from envguard.redact import redact


@dataclass(frozen=True)
class PipArtifact:
    name: str
    version: str
    url: str
    sha256: str | None
    #: the URL as the lock writes it, when it differs from ``url`` (``${VAR}`` credentials filled in)
    locked_url: str | None = None

    @property
    def requirement_url(self) -> str:
        """The URL written into pip's requirements file: the lock's ``${VAR}`` form when pip can expand
        every variable itself (pip expands ``${NAME}`` of upper-case names), so that no credential is ever
        written to disk; else the expanded URL (in a private temporary directory, removed at once)."""
        if self.locked_url and all(_PIP_VAR.fullmatch(v) for v in _ANY_VAR.findall(self.locked_url)):
            return self.locked_url
        return self.url


_ANY_VAR = re.compile(r"\$\{([^}]*)\}")
_PIP_VAR = re.compile(r"[A-Z0-9_]+")  # pip's req_file expands ${VAR} only for these names


def _pip_command(build_python: str) -> list[str]:
    """Run pip from envguard's own interpreter against the new environment's (``--python``, pip >= 22.3),
    so the environment needs no pip of its own; fall back to the environment's pip."""
    import importlib.util

    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip", "--python", build_python]
    return [build_python, "-m", "pip"]


def install_pip(pip: Sequence[PipArtifact], build_dir: Path, target: Path, lockfile: Path) -> None:
    """``pip install --no-deps --require-hashes`` of the locked URLs into the environment being built."""
    missing = [p.name for p in pip if not p.sha256]
    if missing:
        raise IntegrityError(f"{lockfile}: pip package(s) without a sha256 in the lock: {', '.join(missing)}",
                             fix="re-lock with `envguard lock`", command="envguard lock")
    python = python_in_prefix(build_dir)
    if not os.path.exists(python):
        raise BackendError(f"the lock has pip packages ({', '.join(p.name for p in pip)}) but the environment "
                           f"has no python at {python}", fix="add python to the environment and re-lock")
    import tempfile  # only when there are pip packages: a create without them never pays for it

    with tempfile.TemporaryDirectory(prefix="envguard-pip-") as tmp:
        req = Path(tmp) / "requirements.txt"
        req.write_text("".join(f"{p.name} @ {p.requirement_url} --hash=sha256:{p.sha256}\n" for p in pip),
                       encoding="utf-8")
        cmd = _pip_command(python) + [
            "install", "--no-deps", "--require-hashes", "--no-input", "--disable-pip-version-check",
            "--no-warn-script-location", "--no-compile", "--no-cache-dir", "-r", str(req),
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_USER",
                                                               "PIP_REQUIRE_VIRTUALENV", "PIP_TARGET",
                                                               "PIP_PREFIX")}
        env["PYTHONNOUSERSITE"] = "1"
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                                  errors="replace")
        except OSError as e:
            raise BackendError(f"cannot run pip ({cmd[0]}): {e.strerror or e}") from e
    if proc.returncode != 0:
        raise _pip_error(proc.stdout + "\n" + proc.stderr, pip, lockfile)
    if build_dir != target:
        relocate_scripts(build_dir, target)


_PIP_MISMATCH = re.compile(r"Expected sha256 (?P<expected>[0-9a-fA-F]+)\s+Got\s+(?P<actual>[0-9a-fA-F]+)")


def _pip_error(output: str, pip: Sequence[PipArtifact], lockfile: Path) -> EnvguardError:
    if "DO NOT MATCH THE HASHES" in output:
        m = _PIP_MISMATCH.search(output)
        expected, actual = (m["expected"], m["actual"]) if m else ("?", "?")
        art = next((p for p in pip if p.sha256 == expected.lower()), None)
        if art is None:  # pip names the requirement line just above; find it by URL
            art = next((p for p in pip if p.url in output), pip[0])
        return mismatch_error(art.name, art.version, art.url, expected, actual, lockfile=lockfile)
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")] or lines[-3:]
    text = " / ".join(errors)[:600]
    lower = text.lower()
    if "no space left" in lower or "errno 28" in lower:
        return BackendError(f"pip: no space left on device: {redact(text)}", fix="free some space")
    if "permission denied" in lower or "errno 13" in lower:
        return BackendError(f"pip: permission denied: {redact(text)}", fix="choose a writable prefix")
    return BackendError(f"pip failed to install the locked pip packages: {redact(text)}")


def relocate_scripts(build_dir: Path, target: Path) -> int:
    """pip wrote the staging path into the shebangs of the scripts it installed; point them at the target.

    Only the first few lines are touched (pip's ``#!/bin/sh`` + ``exec`` form for long paths spans three).
    conda-linked scripts already carry the target path (alternative_target_prefix) and are left alone.
    """
    old, new = os.fsencode(str(build_dir)), os.fsencode(str(target))
    changed = 0
    for sub in ("bin", "Scripts"):
        d = build_dir / sub
        if not d.is_dir():
            continue
        for path in d.iterdir():
            if path.is_symlink() or not path.is_file():
                continue
            try:
                with open(path, "rb") as fh:
                    head = fh.read(2)
                    if head != b"#!":
                        continue
                    data = head + fh.read()
            except OSError:
                continue
            lines = data.split(b"\n", 3)
            if not any(old in ln for ln in lines[:3]):
                continue
            lines[:3] = [ln.replace(old, new) for ln in lines[:3]]
            mode = path.stat().st_mode
            tmp = path.with_name(f".{path.name}.envguard-tmp")
            tmp.write_bytes(b"\n".join(lines))
            os.chmod(tmp, mode)
            os.replace(tmp, path)
            changed += 1
    return changed
