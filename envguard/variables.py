"""The project's own environment variables: ``variables:`` in environment.yml (conda's CEP 24), from the spec
through the lock into the environment, where activation sets them.

* The spec: a mapping of names to string values. A name must be one a shell can export
  (``[A-Za-z_][A-Za-z0-9_]*``); a value must be a string as written (YAML reads ``1.10`` as the number 1.1,
  ``yes`` as true: quoted, they stay what was written) and must not hold ``"``, ``$``, a backquote, ``\\`` or
  a line break: rattler's activation writes a value between double quotes, where the shell would expand
  or cut it (conda's quoting keeps it literal, so the two would set different values).
* The lock: one ``custom_metadata`` key per variable, ``envguard.variables.NAME: value`` (CEP 37 gives a
  lock no other place for it; conda-lock's content hash does not cover ``variables:``, so `lock --check`
  compares these keys with the spec itself).
* The environment: ``conda-meta/state``'s ``env_vars``, as ``conda env create`` writes them and conda and
  rattler activate them. Other keys of that file and variables someone set there by hand
  (``conda env config vars set``) are kept; the names envguard wrote last time (its fingerprint lists them)
  are replaced by the lock's.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: what rattler's activation script cannot carry literally in a value (it double-quotes values)
UNSAFE = ('"', "$", "`", "\\", "\n", "\r")
LOCK_KEY = "envguard.variables."  # + NAME, in a lock's custom_metadata
STATE = Path("conda-meta") / "state"
#: the variables activation itself sets: one of them in variables: would be overwritten, or break it
RESERVED = frozenset(("PATH", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_SHLVL", "CONDA_PROMPT_MODIFIER"))


@dataclass(frozen=True)
class Problem:
    """One bad entry of ``variables:``: ``name`` is the key as written (None for the mapping itself)."""

    name: str | None
    message: str
    fix: str
    severity: str = "error"


def problems(value: Any) -> list[Problem]:
    """What is wrong with a ``variables:`` value (None: nothing)."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [Problem(None, "expected a mapping of names to values", "write `variables:` with `NAME: value` lines")]
    out: list[Problem] = []
    for name, val in value.items():
        key = str(name)
        if not isinstance(name, str) or not NAME.match(name):
            out.append(Problem(key, f"{key!r} is not an environment variable name (letters, digits and _, not "
                               "starting with a digit)", "rename it, e.g. `MY_SETTING: value`"))
            continue
        if name in RESERVED or name.upper() in RESERVED:
            out.append(Problem(key, f"{name} is set by activation itself: the project's value would replace it or "
                               "be replaced", "choose another name"))
            continue
        if not isinstance(val, str):
            shown = "null" if val is None else json.dumps(val) if isinstance(val, bool | int | float) else \
                type(val).__name__
            out.append(Problem(key, f"the value is {shown}, not a string: YAML read it as "
                               f"{'nothing' if val is None else type(val).__name__}, and conda and rattler would "
                               "write it back differently", f"quote it: `{name}: \"...\"`"))
            continue
        bad = [c for c in UNSAFE if c in val]
        if bad:
            out.append(Problem(key, f"the value holds {bad[0]!r}, which rattler's activation (envguard run, pixi) "
                               "expands or cuts inside its double quotes while conda keeps it literal",
                               "set a value without \", $, `, \\ or line breaks (compute it in an activate.d script "
                               "instead)"))
            continue
        if name != name.upper() and not any(p.name == key for p in out):
            out.append(Problem(key, f"{name} has lower-case letters: rattler's activation (envguard run, pixi) "
                               f"sets it as {name.upper()}, conda as written", f"write it as {name.upper()}",
                               severity="warning"))
    return out


def from_data(data: Any) -> dict[str, str]:
    """The valid variables of one parsed environment file (the others are lint's and the lock's to refuse)."""
    value = data.get("variables") if isinstance(data, dict) else None
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and NAME.match(k) and isinstance(v, str)}


def of_files(files: Iterable[str | os.PathLike[str]], texts: Iterable[str] | None = None) -> dict[str, str]:
    """The variables of environment files merged in order (a later file's value wins, as conda's
    ``--file`` merging does); an unreadable file counts as none (its readers say why)."""
    from envguard.errors import EnvguardError
    from envguard.yamlio import load_fast

    out: dict[str, str] = {}
    given = list(texts) if texts is not None else None
    for i, f in enumerate(files):
        try:
            data = load_fast(Path(f), given[i]) if given is not None else load_fast(Path(f))
        except (EnvguardError, OSError):
            continue
        out.update(from_data(data))
    return out


def to_metadata(variables: Mapping[str, str]) -> dict[str, str]:
    return {LOCK_KEY + k: v for k, v in variables.items()}


def from_metadata(custom: Mapping[str, Any] | None) -> dict[str, str]:
    """The variables a lock recorded (its custom_metadata)."""
    return {str(k)[len(LOCK_KEY):]: str(v) for k, v in (custom or {}).items()
            if isinstance(k, str) and k.startswith(LOCK_KEY)}


def read_state(prefix: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``conda-meta/state`` as JSON: None when absent or not a JSON object."""
    from envguard.safeio import read_small_text

    text = read_small_text(Path(prefix) / STATE, 1 << 20)
    if text is None:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def state_variables(prefix: str | os.PathLike[str]) -> dict[str, str]:
    """The variables ``conda-meta/state`` sets on activation ({} when none)."""
    env = (read_state(prefix) or {}).get("env_vars")
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else {}


def kept_variables(prefix: str | os.PathLike[str], owned: Iterable[str]) -> dict[str, str]:
    """The variables of ``prefix``'s state that envguard did not write (``owned``: the names it did)."""
    mine = set(owned)
    return {k: v for k, v in state_variables(prefix).items() if k not in mine}


def write_state(prefix: str | os.PathLike[str], variables: Mapping[str, str], kept: Mapping[str, str]) -> bool:
    """Make ``conda-meta/state``'s ``env_vars`` ``kept`` plus ``variables`` (the lock's win), keeping the
    file's other keys; written atomically, only when it changes. No file is made for no variables.
    Returns whether the file was written."""
    path = Path(prefix) / STATE
    state = read_state(prefix)
    wanted = {**{k: v for k, v in kept.items() if k not in variables}, **variables}
    if state is None:
        if not wanted and not path.exists():
            return False
        state = {}
    if state.get("env_vars") == wanted:
        return False
    state["env_vars"] = wanted  # always an object: rattler refuses a state file without one
    tmp = path.with_name(f".state.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return True


def changes(a: Mapping[str, str], b: Mapping[str, str]) -> list[str]:
    """What changed from ``a`` to ``b``, one line per variable."""
    out = [f"variable {k} added in B ({b[k]!r})" for k in b if k not in a]
    out += [f"variable {k} removed in B (was {a[k]!r})" for k in a if k not in b]
    out += [f"variable {k} changed: A {a[k]!r}, B {b[k]!r}" for k in a if k in b and a[k] != b[k]]
    return out
