"""Honest exits: an interrupt reports the state the target is really in, a prefix moved aside by the
two-rename swap is found by `check` and put back by `create`, and Ctrl-C at any moment is one line and
exit 130 (docs/reliability.md). Real subprocesses, real signals, the test hooks of docs/reliability.md "Test hooks".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import ENVGUARD, envguard_popen, envguard_run, make_lock, siblings, tree_state, write_env

import envguard.__main__ as envguard_main
from envguard.fingerprint import read_fingerprint

pytestmark = pytest.mark.slow  # real signals to real envguard processes

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


@pytest.mark.parametrize("why", ["drifted", "--force on a match"])
def test_ctrl_c_while_rebuilding_an_env_with_the_locks_fingerprint_keeps_it(tmp_path: Path, two_locks,
                                                                           why: str) -> None:
    """A drifted environment (or one rebuilt with --force) already carries the fingerprint of the lock being
    installed: a Ctrl-C before the swap said `the new environment is in place` while the old one stood there."""
    one, _two = two_locks
    target = tmp_path / "env"
    assert envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check").returncode == 0
    args = ["--force"] if why == "--force on a match" else []
    if why == "drifted":  # a new file where the package's was: the environment no longer matches the lock
        edited = target / "share" / "egone.txt"
        edited.unlink()
        edited.write_text("edited by hand\n")
    before = tree_state(target)
    proc = envguard_popen("create", "-p", str(target), "--lockfile", str(one), "--no-check", *args,
                          env={**HOOKS, "ENVGUARD_TEST_PAUSE_AT": "staged:3"})
    _wait_for(lambda: any("staging" in n for n in siblings(target))
              and (tmp_path / next(n for n in siblings(target) if "staging" in n) / "conda-meta").is_dir())
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert [ln for ln in err.splitlines() if ln.strip()][-1].startswith(f"interrupted: {target} was left as it was")
    assert "in place" not in err and tree_state(target) == before
    again = envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check")
    assert again.returncode == 0 and again.stdout.startswith("replaced" if why == "drifted" else "unchanged"), \
        again.stdout + again.stderr
    assert (target / "share" / "egone.txt").read_text() == "one\n" and siblings(target) == []


def test_ctrl_c_while_re_locking_says_what_the_target_holds(tmp_path: Path, two_locks) -> None:
    """A Ctrl-C while create re-locks a stale lock printed a bare `interrupted`: it says what the target
    holds, like any other moment of create, and the lock and the environment stay as they were."""
    one, _two = two_locks
    target = tmp_path / "env"
    assert envguard_run("create", "-p", str(target), "--lockfile", str(one), "--no-check").returncode == 0
    before, lock_before = tree_state(target), one.read_bytes()
    spec = one.parent / "environment.yml"
    spec.write_text(spec.read_text().replace("  - egone\n", "  - egone\n  - egtwo\n"))
    proc = envguard_popen("create", "-p", str(target), "-f", str(spec), "--no-check",
                          env={**HOOKS, "ENVGUARD_TEST_PAUSE_AT": "relock:30"})
    assert proc.stderr.readline() == "envguard: test hook: paused at relock\n"  # type: ignore[union-attr]
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert [ln for ln in err.splitlines() if ln.strip()] == [f"interrupted: {target} was left as it was"], err
    assert tree_state(target) == before and one.read_bytes() == lock_before


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


def test_check_without_p_names_the_project_env_moved_aside(tmp_path: Path, two_locks) -> None:
    """README's workflow names no prefix: with the environment environment.yml names moved aside by a killed
    swap, `check` (and `check -n NAME`) said `names 'demo', which does not exist` instead of where it is."""
    one, _two = two_locks
    proj = one.parent
    spec = proj / "environment.yml"
    spec.write_text(spec.read_text().replace("name: t\n", "name: moved-demo\n"))
    envs = {"ENVGUARD_ENVS_DIR": str(tmp_path / "envs")}
    target = tmp_path / "envs" / "moved-demo"
    made = envguard_run("create", "--frozen", "--no-check", cwd=proj, env=envs)
    assert made.returncode == 0 and target.is_dir(), made.stdout + made.stderr
    killed = envguard_run("create", "--frozen", "--force", "--no-check", cwd=proj,
                          env={**envs, **HOOKS, "ENVGUARD_TEST_KILL_AT": "swap", "ENVGUARD_TEST_NO_RENAME_EXCHANGE": "1"})
    assert killed.returncode == -9 and not target.exists()
    [aside] = [n for n in siblings(target) if "envguard-old" in n]
    for args in ([], ["-n", "moved-demo"]):
        check = envguard_run("check", *args, "--no-smoke", "--format", "json", cwd=proj, env=envs)
        assert check.returncode == 3, check.stdout + check.stderr
        report = json.loads(check.stdout)
        assert report["lockfile"] == str(one), report  # the header names the lock the fix uses
        [finding] = report["findings"]
        assert finding["code"] == "EG534" and aside in finding["message"], finding
    assert "--force" not in finding["message"]  # a sync of a drifted env moves it aside too
    restored = envguard_run("create", "--frozen", "--no-check", cwd=proj, env=envs)
    assert restored.returncode == 0 and "restored the previous environment" in restored.stderr, restored.stderr
    assert (target / "share" / "egone.txt").is_file() and siblings(target) == []


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
    """From the first line envguard runs (the import of typer and rich included: a user saw a traceback
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
        if proc.returncode == 130:  # before lint began, the line says nothing was changed (#38 point 8)
            assert lines and lines[-1] in (
                "interrupted: nothing was changed (the command only reads; a probe it started was stopped)",
                "interrupted while envguard was starting: nothing was changed",
                "interrupted before the command began: nothing was changed"), err
        else:
            assert proc.returncode == 2 and "found undefined alias" in err, err  # finished before the signal
    assert 130 in outcomes, (outcomes, early)


def _processes() -> list[tuple[int, int, int]]:
    """(pid, parent pid, session id) of every live process, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and fields[0] not in ("Z", "X"):
            out.append((int(entry.name), int(fields[1]), int(fields[3])))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the probe through /proc")
def test_ctrl_c_during_the_smoke_probe_is_one_line_and_stops_the_probe() -> None:
    """The probe runs in a session of its own, so a terminal's Ctrl-C reaches envguard only: envguard must
    stop the probe's whole session (here a DataLoader whose workers ignore SIGTERM and never end), and say
    one line."""
    proc = subprocess.Popen([*ENVGUARD, "smoke", "--python", sys.executable, "--quick", "--timeout", "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **HOOKS, "ENVGUARD_PROBE_INJECT": "never-ends"})
    session: list[int] = []

    def workers_started() -> bool:
        session[:] = [sid for pid, ppid, sid in _processes() if ppid == proc.pid][:1]
        return bool(session) and sum(1 for _p, _pp, sid in _processes() if sid == session[0]) >= 2

    _wait_for(workers_started, 120)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and [ln for ln in err.splitlines() if ln.strip()] == [
        "interrupted: nothing was changed (the command only reads; a probe it started was stopped)"], err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(sid == session[0] for _p, _pp, sid in _processes()):
        time.sleep(0.05)
    left = [p for p, _pp, sid in _processes() if sid == session[0]]
    for pid in left:  # a failing run leaves nothing behind either
        os.kill(pid, signal.SIGKILL)
    assert not left, "the probe's session was still running"
