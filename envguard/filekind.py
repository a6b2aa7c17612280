"""What kind of file a command was handed, before it reads it as the kind it wants.

A command that takes a lock (``check``, ``fleet``, ``create``, ``lock --check``) and is given an
environment file, a report or ``/etc/passwd`` must say what the file is and what to pass instead; read as
a lock, an environment file is a lock with no packages, and every comparison with it is a false verdict.
The kinds are envguard.sources' (:func:`envguard.sources.detect_kind`), so that diff, which reads any
kind, names a file the same way.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path

from envguard.errors import UserError

LOCK_KINDS = frozenset({"conda-lock", "pixi", "explicit"})
# Not YAML (or JSON) at all: left to the command's own reader, which names the line and column (and a lock
# that no longer parses is a stale lock to `lock --check`, exit 4)
MALFORMED = "malformed"

# What a kind is, in the words of a message ("<file>: an environment file, not a lock").
_WHAT = {
    "environment": "an environment file (a spec, what to solve), not a lock",
    "export": "an environment export (`conda env export`), not a lock",
    "pixi-manifest": "a pixi manifest, not a lock",
    "report": "an `envguard check` report, not a lock",
    "pixi": "a pixi.lock, not a conda-lock.yml",
    "explicit": "an @EXPLICIT lock, not a conda-lock.yml",
}

# conda-lock.yml and pixi.lock are told apart by their top-level keys: a text scan, no YAML parse (a lock of
# a few thousand packages takes a noticeable part of check's time to parse, and it is parsed later anyway)
_TOP_KEY = re.compile(r"^([A-Za-z_]+):", re.MULTILINE)


def kind_of(path: Path, key: str | None = None) -> str | None:
    """The kind of the file at ``path`` (a kind of envguard.sources.KINDS, or :data:`MALFORMED`), or None when
    it is none of them.
    Raises UserError when it cannot be read at all (missing, a directory, a device)."""
    from envguard.sources import detect_kind
    from envguard.yamlio import load_fast, read_text, special_file

    if path.is_dir():
        raise UserError("is a directory, expected a lock file", file=str(path), key=key,
                        fix="pass the lock file inside it")
    if not path.is_file():
        special = special_file(path)  # a FIFO or a device: "run envguard lock first" would not help
        raise UserError(special or "lock file not found", file=str(path), key=key,
                        fix="pass the path of a regular conda-lock.yml (envguard reads no pipes or devices)" if special
                        else "pass an existing conda-lock.yml, or run `envguard lock` first")
    text = read_text(path)
    if detect_kind(text) == "explicit":
        return "explicit"
    keys = set(_TOP_KEY.findall(text))
    if {"metadata", "package"} <= keys:
        return "conda-lock"
    if {"version", "environments", "packages"} <= keys:
        return "pixi"
    try:
        data = load_fast(path, text)
    except UserError:
        return MALFORMED
    return detect_kind(text, data)


def require_lock(path: Path, *, accept: Collection[str] = LOCK_KINDS, key: str = "--lockfile",
                 unknown_ok: bool = False) -> str | None:
    """The kind of ``path`` when it is one of ``accept``; else a UserError (exit 2) that says what the file
    is and what to pass instead. ``unknown_ok``: a file of no known kind is left to the caller's reader
    (`lock --check` calls a lock it cannot read stale, exit 4)."""
    kind = kind_of(path, key)
    if kind == MALFORMED or (kind in accept if kind is not None else unknown_ok):
        return kind
    import shlex

    shown = str(path)
    command = None
    if kind in ("environment", "export"):
        command = shlex.join(["envguard", "lock", "-f", shown])  # it writes the conda-lock.yml beside it
    if kind == "environment":
        fix = f"lock it first (`{command}`) and pass the conda-lock.yml it writes"
    elif kind == "pixi-manifest":
        fix = "pass the pixi.lock beside it"
    elif kind == "report":
        fix = "pass the conda-lock.yml the environment was built from (reports go to `envguard fleet` as arguments)"
    elif kind == "export":
        fix = f"adopt it with `{command}` and pass the conda-lock.yml it writes"
    else:
        fix = "pass a conda-lock.yml" + (", a pixi.lock or an @EXPLICIT file" if len(accept) > 1 else "")
    what = _WHAT.get(kind or "", "not a lock file (neither a conda-lock.yml, a pixi.lock nor an @EXPLICIT file)")
    if kind in LOCK_KINDS:  # a lock, only not the kind this command installs
        what = _WHAT[kind] if kind != "conda-lock" else "a conda-lock.yml"
    error = UserError(what, file=shown, key=key, fix=fix)
    error.command = command  # the fix as data, ready to run (envguard.errors.EnvguardError.command)
    raise error


def require_spec(path: Path, *, key: str = "-f/--file") -> None:
    """Refuse a lock or a report given where an environment file is read (``lock -f``, ``create -f``): read
    as a spec it is one with no dependencies. Other files are left to the spec reader, which names the line
    and column of what it cannot read."""
    if not path.is_file():
        return  # the reader says it is missing, with the fix for that
    kind = kind_of(path, key)
    if kind in LOCK_KINDS:
        named = {"conda-lock": "conda-lock.yml", "pixi": "pixi.lock", "explicit": "@EXPLICIT"}[kind or ""]
        raise UserError(f"a lock ({named}), not an environment file",
                        file=str(path), key=key,
                        fix="pass the environment.yml it was made from with -f, and the lock with --lockfile")
    if kind == "report":
        raise UserError("an `envguard check` report, not an environment file", file=str(path), key=key,
                        fix="pass an environment.yml with -f")
