"""Hostile input meets every message, signal and field: what a message quotes is shown escaped, a SIGTERM is
handled like Ctrl-C, a killed run's leftovers are removed by the next one, and a field of the wrong type is one
line with exit 2 (docs/reliability.md). The hostile packages are real archives built here; the signals are real
signals sent to a real envguard process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import ENVGUARD, envguard_popen, envguard_run, make_lock, siblings, write_env

from envguard.errors import BackendError, UserError
from envguard.findings import Finding, Severity
from envguard.leftovers import remove_dead_owners

HOSTILE = "share/../../x\nerror: none; created env: all good\x1b]0;pwned\x07\x1b[2J\u202e"


def _hostile_lock(tmp_path: Path, name: str, declared: str) -> Path:
    """A channel serving ``name`` 1.0 whose paths.json declares ``declared`` for its one file (the archive's own
    sha256 in the index), and a lock for it."""
    chan = tmp_path / f"chan-{name}"
    pkg = channels.build_package(chan, name, "1.0", noarch="generic", files={f"share/{name}/a.txt": "a\n"})
    with tarfile.open(pkg, "r:bz2") as tar:
        doc = json.load(tar.extractfile("info/paths.json"))  # type: ignore[arg-type]
    doc["paths"][0]["_path"] = declared
    channels.tamper_package(pkg, files={"info/paths.json": json.dumps(doc)})
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    channels.strip_indexed_timestamps(chan)
    return make_lock(write_env(tmp_path / f"proj-{name}", channels.channel_url(chan), [name]))


# --------------------------------------------------------------------------- messages quote hostile text escaped


def test_error_and_finding_texts_escape_control_characters() -> None:
    e = UserError(f"bad path {HOSTILE}", file="a\nb.yml", fix="remove \x1b[2J it")
    assert "\n" not in e.message and "\x1b" not in e.message and "\u202e" not in e.message
    assert "\\n" in e.message and "\\x1b]0;pwned\\x07\\x1b[2J" in e.message and "\\u202e" in e.message
    assert e.fix == "remove \\x1b[2J it"
    f = Finding("EG999", Severity.ERROR, f"quoted {HOSTILE}", fix="x\ny", package="p\x1b")
    assert "\x1b" not in f.message + f.fix + str(f.package) and "\n" not in f.message + f.fix
    # a message written as several lines on purpose keeps its breaks, and still escapes the rest
    solver = BackendError("cannot solve:\n  pkg\x1b[2J", lines=True)
    assert solver.message == "cannot solve:\n  pkg\\x1b[2J"


@pytest.mark.slow
def test_a_package_path_with_newlines_and_terminal_escapes_is_refused_in_one_escaped_line(tmp_path: Path,
                                                                                         monkeypatch) -> None:
    """A path holding a newline and OSC/CSI escapes made the refusal three lines, one a fake `all good`,
    and sent the title and clear-screen escapes to the terminal."""
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    lock = _hostile_lock(tmp_path, "egesc", HOSTILE)
    target = tmp_path / "env"
    proc = envguard_run("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet",
                        env={"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs")})
    assert proc.returncode == 3, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: egesc: unsafe path"), proc.stderr
    assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr and "\u202e" not in proc.stderr
    assert "x\\nerror: none; created env: all good\\x1b]0;pwned\\x07\\x1b[2J" in lines[0]
    assert not target.exists() and siblings(target) == []


# --------------------------------------------------------------------------- SIGTERM, and what killed runs leave

HOOKS = {"ENVGUARD_TESTING": "1"}


def _dead_pid() -> int:
    """The PID of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _stats() -> list[tuple[int, str, int, int]]:
    """(pid, state, ppid, session) of every process."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out.append((int(entry.name), fields[0], int(fields[1]), int(fields[3])))
    return out


def _session_of_child(pid: int) -> int | None:
    return next((sid for _p, state, ppid, sid in _stats() if ppid == pid and state not in ("Z", "X")), None)


def _session_members(sid: int) -> list[int]:
    return [p for p, state, _pp, s in _stats() if s == sid and state not in ("Z", "X")]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the probe through /proc")
def test_sigterm_during_the_smoke_probe_is_one_line_exit_143_probe_ended_nothing_left(tmp_path: Path) -> None:
    """SIGTERM killed envguard with no message and orphaned the probe; Ctrl-C left envguard-smoke-* in TMPDIR;
    and a killed run's work dir stayed there for good."""
    stale = tmp_path / f"envguard-smoke-{_dead_pid()}-abc"
    stale.mkdir()
    (stale / "stdout").write_text("a killed run's\n")
    proc = subprocess.Popen([*ENVGUARD, "smoke", "--python", sys.executable, "--quick", "--timeout", "300"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **HOOKS, "ENVGUARD_PROBE_INJECT": "never-ends", "TMPDIR": str(tmp_path)})
    session: list[int] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        sid = _session_of_child(proc.pid)
        if sid is not None and len(_session_members(sid)) >= 2:
            session.append(sid)
            break
        time.sleep(0.05)
    assert session, "the probe did not start"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and [ln for ln in err.splitlines() if ln.strip()] == ["terminated (SIGTERM)"], err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _session_members(session[0]):
        time.sleep(0.05)
    left = _session_members(session[0])
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the probe's session was still running"
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("envguard-smoke-")]


@pytest.mark.slow
def test_sigterm_before_the_swap_says_what_the_target_holds_exit_143(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    chan = channels.make_channel(tmp_path / "chan", [
        {"name": "egone", "version": "1.0", "noarch": "generic", "files": {"share/egone.txt": "one\n"}}])
    lock = make_lock(write_env(tmp_path / "one", channels.channel_url(chan), ["egone"]))
    target = tmp_path / "env"
    proc = envguard_popen("create", "-p", str(target), "--lockfile", str(lock), "--no-check",
                          env={**HOOKS, "ENVGUARD_TEST_PAUSE_AT": "staged:60"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
            "staging" in n and (tmp_path / n / "conda-meta").is_dir() for n in siblings(target)):
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 143, err
    assert lines[-1].startswith(f"terminated (SIGTERM): nothing was created at {target}"), err
    assert not target.exists()


def test_leftovers_of_dead_owners_are_removed_and_a_live_owners_kept(tmp_path: Path) -> None:
    dead, alive = _dead_pid(), os.getppid()
    (tmp_path / f".envguard-downloads-{dead}").mkdir()
    (tmp_path / f".envguard-downloads-{dead}" / "x.conda").write_bytes(b"partial")
    (tmp_path / f".envguard-downloads-{alive}").mkdir()
    (tmp_path / ".envguard-downloads-notapid").mkdir()
    removed = remove_dead_owners(tmp_path, ".envguard-downloads-")
    assert [p.name for p in removed] == [f".envguard-downloads-{dead}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f".envguard-downloads-{alive}", ".envguard-downloads-notapid"])


@pytest.mark.slow
def test_a_sigkill_while_the_auth_file_exists_leaves_no_token_on_disk(tmp_path: Path) -> None:
    """The token sat in TMPDIR/envguard-auth-*/auth.json while the client was built; a SIGKILL then left it."""
    token = "tk-" + "7" * 30
    script = ("import os, sys, time\n"
              "from envguard.auth import _private_auth_file\n"
              f"with _private_auth_file({{'example.invalid': {token!r}}}):\n"
              "    path = os.environ['RATTLER_AUTH_FILE']\n"
              "    assert open(path).read().count(sys.argv[1]) == 1\n"
              "    print(path, flush=True)\n"
              "    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, token], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    path = proc.stdout.readline().strip()  # type: ignore[union-attr]
    assert path, "the child did not build its auth file"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    on_disk = [p for p in tmp_path.rglob("*") if p.is_file() and token.encode() in p.read_bytes()]
    assert on_disk == [] and not Path(path).exists()
