"""The failure catalogue: known ways a PyTorch environment breaks.

Data lives in ``envguard/data/failures.yaml`` (one file, reviewed like code);
this module reads it and matches real error text against the symptoms. Pure:
no processes. ``smoke`` classifies probe failures with it and ``check`` reuses
the fix texts, so one wording reaches the user whichever command found it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import overload

from envguard.yamlio import load_fast


@dataclass(frozen=True)
class FailureCase:
    id: str
    title: str
    fix: str
    symptoms: tuple[re.Pattern[str], ...] = field(default=(), repr=False)
    refs: tuple[str, ...] = ()

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.symptoms)


@lru_cache(maxsize=1)
def cases() -> tuple[FailureCase, ...]:
    """All cases, in matching order (specific first)."""
    res = resources.files("envguard").joinpath("data/failures.yaml")
    raw = load_fast("envguard/data/failures.yaml", text=res.read_text(encoding="utf-8"))
    out = []
    for c in raw["cases"]:
        out.append(FailureCase(
            id=str(c["id"]),
            title=str(c["title"]),
            fix=" ".join(str(c["fix"]).split()),
            symptoms=tuple(re.compile(s, re.IGNORECASE) for s in c.get("symptoms") or ()),
            refs=tuple(c.get("refs") or ()),
        ))
    return tuple(out)


def ids() -> list[str]:
    return [c.id for c in cases()]


def get(case_id: str) -> FailureCase:
    """The case with this id; KeyError names the known ids."""
    for c in cases():
        if c.id == case_id:
            return c
    raise KeyError(f"unknown failure id {case_id!r} (known: {', '.join(ids())})")


@overload
def classify(text: str, default: str) -> FailureCase: ...
@overload
def classify(text: str, default: None = None) -> FailureCase | None: ...


def classify(text: str, default: str | None = None) -> FailureCase | None:
    """The first case whose symptom matches ``text``, else ``get(default)`` or None."""
    for c in cases():
        if c.matches(text):
            return c
    return get(default) if default else None


# Commands that act on one environment: a fix text that names them must say which one, or run as written
# it would act on whatever environment the working directory implies (envguard.envs.resolve_target).
_TARGETED = ("create", "check", "smoke", "export", "tune")
_COMMAND = re.compile(r"`(envguard (?:" + "|".join(_TARGETED) + r")\b[^`]*)`")
_HAS_TARGET = re.compile(r"(?:^|\s)(?:-p|--prefix|-n|--name|--python)(?:\s|=|$)")


def aim(fix: str, target: list[str]) -> str:
    """``fix`` with ``target`` (e.g. ``["-p", "/envs/x"]``, already shell-quoted) inserted into every
    backticked ``envguard create|check|smoke ...`` command that names no environment of its own, so that
    the fix acts, as written, on the environment the finding is about."""
    if not target or "`envguard " not in fix:
        return fix

    def sub(m: re.Match[str]) -> str:
        cmd = m.group(1)
        if _HAS_TARGET.search(cmd[len("envguard "):]):
            return m.group(0)
        head, _, rest = cmd.partition(" ")[2].partition(" ")
        return "`" + " ".join(["envguard", head, *target] + ([rest] if rest else [])) + "`"

    return _COMMAND.sub(sub, fix)


def aim_findings(findings: list, prefix: object) -> list:
    """``findings`` (envguard.findings.Finding) whose fixes' envguard commands name the environment at
    ``prefix`` (see :func:`aim`), so that a fix run as written acts on it, not on whatever environment the
    working directory implies."""
    if not any("`envguard " in f.fix for f in findings):
        return findings
    import shlex
    from dataclasses import replace

    from envguard.fingerprint import foreign_env

    target = ["-p", shlex.quote(str(prefix))]
    aimed = [replace(f, fix=aim(f.fix, target)) if "`envguard " in f.fix else f for f in findings]
    if any("`envguard create " in f.fix for f in aimed) and foreign_env(str(prefix)):
        # create replaces an environment envguard did not build only with --force: without it, the fix
        # run as written would be refused
        aimed = [replace(f, fix=forced(f.fix, str(prefix))) for f in aimed]
    return aimed


def forced(fix: str, prefix: str) -> str:
    """``fix`` with ``--force`` added to every backticked ``envguard create`` command that acts on
    ``prefix`` (-p/--prefix, as written or shell-quoted) and does not say --force already."""
    import os
    import shlex

    def sub(m: re.Match[str]) -> str:
        try:
            words = shlex.split(m.group(1))
        except ValueError:
            return m.group(0)
        at = [i for i, w in enumerate(words) if w in ("-p", "--prefix")]
        if ("--force" in words or not at or at[-1] + 1 >= len(words)
                or os.path.abspath(words[at[-1] + 1]) != os.path.abspath(prefix)):
            return m.group(0)
        return f"`{m.group(1)} --force`"

    return re.sub(r"`(envguard create\b[^`]*)`", sub, fix)


def commands(text: str) -> list[str]:
    """Every backticked ``envguard ...`` command in a fix text, as written."""
    return re.findall(r"`(envguard [^`]+)`", text)
