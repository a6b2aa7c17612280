"""Honest exits: an interrupt reports the state the target is really in, a prefix moved aside by the
two-rename swap is found by `check` and put back by `create`, and Ctrl-C at any moment is one line and
exit 130 (README, "Reliability"). Real subprocesses, real signals, the test hooks of README "Test hooks".
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import channels
import envguard.__main__ as envguard_main
from create_fixtures import ENVGUARD, envguard_popen, envguard_run, make_lock, siblings, tree_state, write_env
from envguard.create.fingerprint import read_fingerprint

HOOKS = {"ENVGUARD_TESTING": "1"}


@pytest.fixture
def two_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    chan = channels.make_channel(tmp_path / "chan", [
        {"name": "egone", "version": "1.0", "noarch": "generic", "files": {"share/egone.txt": "one\n"}},
        {"name": "egtwo", "version": "1.0", "noarch": "generic", "files": {"share/egtwo.txt": "two\n"}},
    ])
    url = channels.channel_url(chan)
    return (make_lock(write_env(tmp_path / "one", url, ["egone"])),
            make_lock(write_env(tmp_path / "two", url, ["egtwo"])))


def _wait_for(condition, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the create to reach its pause")


@pytest.mark.parametrize("swap", ["exchange", "two renames"])
def test_ctrl_c_just_after_the_swap_says_the_new_env_is_in_place(tmp_path: Path, two_locks, swap: str) -> None:
    """Issue #12: Ctrl-C just after the swap printed `the target was left as it was`."""
    one, two = two_locks
    target = tmp_path / "env"
    assert envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check").returncode == 0
    old_digest = read_fingerprint(target).digest
    hooks = {**HOOKS, "ENVGUARD_TEST_PAUSE_AT": "swap:3"}
    if swap == "two renames":
        hooks["ENVGUARD_TEST_NO_RENAME_EXCHANGE"] = "1"
    proc = envguard_popen("create", "-p", str(target), "--lockfile", str(two), "--force", "--no-check", env=hooks)
    if swap == "exchange":  # paused after the exchange: the new env is already the target
        _wait_for(lambda: (fp := read_fingerprint(target)) is not None and fp.digest != old_digest)
    else:  # paused between the renames: SIGINT is held until both are done
        _wait_for(lambda: not target.exists() and any("envguard-old" in n for n in siblings(target)))
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 130, err
    assert lines[-1].startswith(f"interrupted: the new environment is in place at {target}"), err
    assert "left as it was" not in err and "Traceback" not in err
    assert (target / "share" / "egtwo.txt").read_text() == "two\n"
    # the next run cleans what was left beside it and finds the new env as it should be
    again = envguard_run("create", "-p", str(target), "--lockfile", str(two), "--no-check")
    assert again.returncode == 0 and again.stdout.startswith("unchanged:"), again.stderr
    assert siblings(target) == []


def test_ctrl_c_before_the_swap_says_the_target_was_left_as_it_was(tmp_path: Path, two_locks) -> None:
    one, two = two_locks
    target = tmp_path / "env"
    assert envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check").returncode == 0
    before = tree_state(target)
    proc = envguard_popen("create", "-p", str(target), "--lockfile", str(two), "--force", "--no-check",
                          env={**HOOKS, "ENVGUARD_TEST_PAUSE_AT": "staged:60"})  # SIGINT ends the pause
    _wait_for(lambda: any("staging" in n for n in siblings(target))
              and (tmp_path / next(n for n in siblings(target) if "staging" in n) / "conda-meta").is_dir())
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert [ln for ln in err.splitlines() if ln.strip()][-1].startswith(f"interrupted: {target} was left as it was")
    assert tree_state(target) == before


def test_a_kill_between_the_fallback_renames_is_named_by_check_and_undone_by_create(tmp_path: Path,
                                                                                   two_locks) -> None:
    """Issue #12: `check` said `no environment at …` while the old env sat beside it under another name."""
    one, two = two_locks
    target = tmp_path / "env"
    assert envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check").returncode == 0
    before = tree_state(target)
    killed = envguard_run("create", "-p", str(target), "--lockfile", str(two), "--force", "--no-check",
                          env={**HOOKS, "ENVGUARD_TEST_KILL_AT": "swap", "ENVGUARD_TEST_NO_RENAME_EXCHANGE": "1"})
    assert killed.returncode == -9 and not target.exists()
    aside = [n for n in siblings(target) if "envguard-old" in n]
    assert len(aside) == 1
    check = envguard_run("check", "-p", str(target), "--no-smoke", "--format", "json")
    report = json.loads(check.stdout)
    assert check.returncode == 3, check.stderr
    assert [f["code"] for f in report["findings"]] == ["EG534"]
    assert aside[0] in report["findings"][0]["message"] and "envguard create" in report["findings"][0]["fix"]
    restored = envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check")
    assert restored.returncode == 0 and restored.stdout.startswith("unchanged:"), restored.stderr
    assert "restored the previous environment" in restored.stderr
    assert tree_state(target) == before and siblings(target) == []


def test_the_two_rename_fallback_leaves_nothing_beside_the_target(tmp_path: Path, two_locks) -> None:
    one, two = two_locks
    target = tmp_path / "env"
    assert envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check").returncode == 0
    done = envguard_run("create", "-p", str(target), "--lockfile", str(two), "--force", "--no-check",
                        env={**HOOKS, "ENVGUARD_TEST_NO_RENAME_EXCHANGE": "1"})
    assert done.returncode == 0 and done.stdout.startswith("replaced"), done.stderr
    assert (target / "share" / "egtwo.txt").exists() and not (target / "share" / "egone.txt").exists()
    assert siblings(target) == []  # no .env.envguard-old-<pid> after a successful swap


def _startup_seconds() -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.monotonic() - started


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _before_envguard(err: str) -> bool:
    """Whether a KeyboardInterrupt traceback comes from before envguard could install its SIGINT handler:
    Python's own start-up (site, runpy, the import machinery), the package's empty __init__, or the imports
    above the handler in envguard/__main__.py. A traceback through any other envguard line is a bug."""
    main = Path(envguard_main.__file__).resolve()
    package = main.parent
    first_def = next(i for i, line in enumerate(main.read_text().splitlines(), 1) if line.startswith("def "))
    for path, line, func in _FRAME.findall(err):
        p = Path(path).resolve() if path.startswith("/") else Path(path)
        if package not in p.parents:
            continue  # Python's own start-up, the import machinery, site-packages
        if p == package / "__init__.py":
            continue
        if p == main and func == "<module>" and int(line) < first_def:
            continue
        return False
    return "KeyboardInterrupt" in err


def test_ctrl_c_at_any_moment_is_one_line_and_exit_130(tmp_path: Path) -> None:
    """From the first line envguard runs (the import of typer and rich included: issue #12 saw a traceback
    there) to the last: one line, ``interrupted``, and exit 130, or the command's own result."""
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\nchannels: [conda-forge]\ndependencies: *nope\n")
    offset = _startup_seconds() * 1.5  # Python's own start-up (site.py) is before any code of envguard
    outcomes = []
    early = 0
    for i in range(14):
        proc = subprocess.Popen([*ENVGUARD, "lint", str(bad)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(offset + 0.025 * i)
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if "Traceback" in err and _before_envguard(err):
            # the signal beat envguard to its own handler: the machine was slower than measured just before;
            # not envguard's to answer, so start later (a loaded machine's start-up varies from run to run)
            early += 1
            offset += _startup_seconds()
            continue
        outcomes.append(proc.returncode)
        assert "Traceback" not in err, (offset + 0.025 * i, err[-1500:])
        if proc.returncode == 130:
            assert lines and lines[-1] == "interrupted", err
        else:
            assert proc.returncode == 2 and "found undefined alias" in err, err  # finished before the signal
    assert 130 in outcomes, (outcomes, early)
