"""Hostile input meets every message, signal and field: what a message quotes is shown escaped, a SIGTERM is
handled like Ctrl-C, a killed run's leftovers are removed by the next one, and a field of the wrong type is one
line with exit 2 (docs/reliability.md). The hostile packages are real archives built here; the signals are real
signals sent to a real envguard process."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import envguard_run, make_lock, siblings, write_env

from envguard.errors import BackendError, UserError
from envguard.findings import Finding, Severity

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
