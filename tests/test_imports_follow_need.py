"""A command imports what its path uses (#40): `why` solves nothing, so it imports no event loop and no TLS;
`check` and `lint` ask no channel; `--help` parses no markdown and highlights no code. Each command runs as a whole process under ``python -X importtime`` and
the modules it imported are read from that trace, so a top-level ``import asyncio`` put back into the solver,
channelfacts or any module on these paths fails here (bench/imports.py measures the sums; bench/README.md,
"imports per command")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lock_support import SMALL_LOCK

pytestmark = pytest.mark.slow  # whole interpreters, one per command


# what a command that asks no channel never needs: the event loop rattler's gateway runs in, TLS, sockets
NETWORK = {"asyncio", "ssl", "socket", "_ssl", "_socket"}


def imported(argv: list[str], cwd: Path) -> set[str]:
    """The modules ``envguard <argv>`` imported, as a whole process (its exit code must be 0)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "envguard", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}


@pytest.fixture
def small_lock(tmp_path: Path) -> Path:
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(SMALL_LOCK)
    return lock


def test_why_imports_no_event_loop_tls_or_sockets(small_lock: Path) -> None:
    """`why` reads a lock: the solver module it shares a wing with keeps asyncio for the solve itself."""
    mods = imported(["why", "numpy", "--lockfile", str(small_lock)], small_lock.parent)
    assert "envguard.lock.solver" in mods  # through the re-lock rules why shares: the module, not a solve
    assert not NETWORK & mods, sorted(NETWORK & mods)


def test_lint_of_a_small_lock_imports_no_event_loop(small_lock: Path) -> None:
    """lint judges a lock's dependencies with rattler's MatchSpec (a use), but asks no channel."""
    mods = imported(["lint", str(small_lock)], small_lock.parent)
    assert "envguard.lint" in mods
    assert not NETWORK & mods, sorted(NETWORK & mods)


def test_check_without_smoke_imports_no_event_loop(tmp_path: Path) -> None:
    """check --no-smoke of this virtualenv (no lock, no channel asked, the host name read from uname)."""
    mods = imported(["check", "--no-smoke", "-p", sys.prefix], tmp_path)
    assert "envguard.check" in mods
    assert not NETWORK & mods, sorted(NETWORK & mods)


@pytest.mark.parametrize("argv", [["--help"], ["lock", "--help"], ["check", "--help"]])
def test_help_imports_no_command(argv: list[str], tmp_path: Path) -> None:
    """--help draws the options (envguard.cli.helptext): no wing, no rattler, no event loop, and neither the
    markdown parser nor the syntax highlighter typer's own help renderer imports."""
    mods = imported(argv, tmp_path)
    assert "envguard.cli.helptext" in mods
    heavy = {"rattler", "envguard.lock.solver", "envguard.check.gather", "markdown_it", "pygments",
             "typer.rich_utils", *NETWORK}
    assert not heavy & mods, sorted(heavy & mods)
