"""An error's fix is data: written after the message in one place, read back by nobody.

Code that decides what to do after a failure reads an error's type and fields (``reason``, ``fix``,
``command``) or a verdict's (``Freshness.reason``, ``.command``), never the line a user sees, so rewording a
message can change no behaviour. These tests hold the package to that: no module writes a ``(fix: ...)``
suffix by hand, and the fields say what the line says.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from envguard.errors import (
    EnvguardError,
    PlatformNotLocked,
    StaleLockError,
    UserError,
    with_fix,
)

PACKAGE = Path(__file__).resolve().parents[1] / "envguard"
FORMATTER = PACKAGE / "errors.py"  # with_fix: the one place that writes "(fix: ...)"
MARK = "(fix:"


def hand_built_fixes(source: str, name: str = "<text>") -> list[int]:
    """Lines of ``source`` whose string literals (f-string parts included) write a fix suffix themselves."""
    lines = []
    for node in ast.walk(ast.parse(source, name)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and MARK in node.value:
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_scan_finds_a_hand_built_fix_in_every_spelling() -> None:
    assert hand_built_fixes('raise E(f"{x} is bad (fix: run `{cmd}`)")\n') == [1]
    assert hand_built_fixes('m = ("a (fi" "x: b)", 1)\nn = "x " \\\n    "(fix: y)"\n') == [1, 2]  # joined literals
    assert hand_built_fixes('def aim(fix: str) -> str:\n    return fix\n') == []  # a parameter, not a text


def test_no_module_writes_a_fix_suffix_by_hand() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == FORMATTER or "__pycache__" in path.parts:
            continue
        for line in hand_built_fixes(path.read_text(encoding="utf-8"), str(path)):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert not found, f"use EnvguardError(..., fix=...) or errors.with_fix instead: {found}"


def test_an_error_keeps_reason_fix_and_command_apart() -> None:
    e = StaleLockError("lock file not found: conda-lock.yml", fix="run `envguard lock` first", command="envguard lock")
    assert e.reason == "lock file not found: conda-lock.yml" and e.fix == "run `envguard lock` first"
    assert e.command == "envguard lock" and int(e.exit_code) == 4
    assert e.message == str(e) == "lock file not found: conda-lock.yml (fix: run `envguard lock` first)"
    bare = EnvguardError("it failed")
    assert bare.message == bare.reason == "it failed" and bare.fix is None and bare.command is None


def test_a_user_error_names_the_place_once_and_the_fix_once() -> None:
    e = UserError("expected a list", file="environment.yml", key="channels", line=3, column=1, fix="write a list")
    assert e.message == "environment.yml:3:1: channels: expected a list (fix: write a list)"
    assert e.reason == "environment.yml:3:1: channels: expected a list" and e.problem == "expected a list"
    assert e.message.count(MARK) == 1
    assert isinstance(PlatformNotLocked("platform x is not in this lock", fix="f"), UserError)


def test_with_fix_writes_nothing_for_no_fix() -> None:
    assert with_fix("it failed", None) == with_fix("it failed", "") == "it failed"
    assert with_fix("it failed", "retry") == "it failed (fix: retry)"


@pytest.mark.parametrize("lock_text", [None, "- not a lock\n"])
def test_a_stale_verdict_carries_its_reason_and_command(tmp_path: Path, lock_text: str | None) -> None:
    from envguard.lock import check_fresh

    env = tmp_path / "environment.yml"
    env.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\nplatforms: [linux-64]\n")
    lockfile = tmp_path / "conda-lock.yml"
    if lock_text is not None:
        lockfile.write_text(lock_text)
    verdict = check_fresh([env], lockfile)
    assert not verdict.fresh and verdict.missing is (lock_text is None)
    assert MARK not in verdict.reason and str(lockfile) in verdict.reason
    assert verdict.command.startswith("envguard lock -f ") and verdict.command.endswith(f"--lockfile {lockfile}")
    assert verdict.fix == f"run `{verdict.command}`"
    assert verdict.message == f"{verdict.reason} (fix: run `{verdict.command}`)"
