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
    assert proc.returncode == 143 and [ln for ln in err.splitlines() if ln.strip()] == [
        "terminated (SIGTERM): nothing was changed (the command only reads; a probe it started was stopped)"], err
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


# --------------------------------------------------------------------------- every field type-checked where read

_LOCK = """\
version: 1
metadata:
  content_hash: {{linux-64: abc}}
  channels: [{{url: conda-forge, used_env_vars: []}}]
  platforms: [linux-64]
  sources: [environment.yml]
package:
- name: {name}
  version: {version}
  manager: conda
  platform: linux-64
  dependencies: {{}}
  url: {url}
  hash: {{md5: 0123456789abcdef0123456789abcdef, sha256: {sha256}}}
  category: {category}
  optional: false
"""
_GOOD = {"name": "egone", "version": "'1.0'", "url": "https://conda.anaconda.org/conda-forge/noarch/egone-1.0-0.conda",
         "sha256": "'" + "a" * 64 + "'", "category": "main"}


@pytest.mark.parametrize(("key", "value"), [
    ("name", "[egone]"), ("name", "null"), ("name", "5"), ("category", "[main]"), ("category", "null"),
    ("version", "['1.0']"), ("version", "null"), ("sha256", "[abc]"), ("sha256", "{a: 1}"),
    ("url", "not-a-url"), ("url", "[x]"),
])
def test_a_lock_entry_field_of_the_wrong_type_is_one_line_exit_2(tmp_path: Path, capsys, key: str, value: str) -> None:
    from envguard import cli

    lock = tmp_path / "conda-lock.yml"
    lock.write_text(_LOCK.format(**{**_GOOD, key: value}))
    code = cli.run(["create", "-p", str(tmp_path / "env"), "--lockfile", str(lock), "--no-check", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err, err
    shown = "hash.sha256" if key == "sha256" else key
    assert f"package[0].{shown}: expected" in err and len(err.strip().splitlines()) == 1, err


def _report(**package: object) -> dict:
    pkg = {"name": "egone", "version": "1.0", "manager": "conda", "build": "h0_0", "channel": "c",
           "sha256": "a" * 64, "md5": None, "url": "file:///c/egone.conda", "platform": "linux-64", **package}
    return {"schema": "envguard.check/1", "platform": "linux-64", "exit_code": 0, "findings": [], "packages": [pkg]}


@pytest.mark.parametrize("bad", [{"platform": ["linux-64"]}, {"sha256": ["x"]}, {"sha256": 5}, {"url": 5},
                                 {"depends": 5}, {"top platform": ["linux-64"]}])
def test_a_fleet_report_field_of_the_wrong_type_names_the_node(tmp_path: Path, capsys, bad: dict) -> None:
    from envguard import cli

    rep = _report(**{k: v for k, v in bad.items() if k != "top platform"})
    if "top platform" in bad:
        rep["platform"] = bad["top platform"]
    (tmp_path / "gpu1.json").write_text(json.dumps(rep))
    (tmp_path / "gpu2.json").write_text(json.dumps(_report()))
    code = cli.run(["fleet", str(tmp_path / "gpu1.json"), str(tmp_path / "gpu2.json")])
    out = capsys.readouterr()
    assert "internal error" not in out.err and code in (1, 2), out
    assert "gpu1.json" in out.out + out.err


def test_a_pixi_manifest_of_5000_nested_arrays_is_one_line_exit_2(tmp_path: Path, capsys) -> None:
    from envguard import cli

    manifest = tmp_path / "pixi.toml"
    manifest.write_text('[project]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                        '[dependencies]\npython = "*"\n[feature.a]\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    code = cli.run(["lint", str(manifest)])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err and "nested too deeply" in err, err


def _prefix_with_record(root: Path, record: bytes | None) -> Path:
    prefix = root / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    path = prefix / "conda-meta" / "egone-1.0-h0_0.json"
    if record is not None:
        path.write_bytes(record)
    return prefix


_RECORD = {"name": "egone", "version": "1.0", "build": "h0_0", "files": [], "depends": [],
           "paths_data": {"paths_version": 1, "paths": []}}


@pytest.mark.parametrize("record", [
    json.dumps({**_RECORD, "paths_data": 5}).encode(),
    json.dumps({**_RECORD, "paths_data": {"paths": [5]}}).encode(),
    json.dumps({**_RECORD, "depends": 5}).encode(),
    b"[" * 100_000 + b"]" * 100_000,
], ids=["paths_data-5", "paths-5", "depends-5", "100000-deep"])
def test_a_conda_meta_record_of_the_wrong_shape_is_reported_not_an_internal_error(tmp_path: Path, capsys,
                                                                                   record: bytes) -> None:
    from envguard import cli
    from envguard.prefix import inspect_prefix

    prefix = _prefix_with_record(tmp_path, record)
    info = inspect_prefix(prefix)
    assert [name for name, _why in info.bad_records] == ["egone-1.0-h0_0.json"]
    for args in (["check", "-p", str(prefix), "--no-smoke"], ["export", "-p", str(prefix)]):
        cli.run(args)
        assert "internal error" not in capsys.readouterr().err


def test_a_dist_info_installer_that_is_not_utf8_is_an_unknown_installer(tmp_path: Path) -> None:
    from envguard.prefix import inspect_prefix

    prefix = tmp_path / "venv"
    dist = prefix / "lib" / "python3.11" / "site-packages" / "foo-1.0.dist-info"
    dist.mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: foo\nVersion: 1.0\n\n")
    (dist / "INSTALLER").write_bytes(b"\xff\xfe\x00p\x00i\x00p")
    info = inspect_prefix(prefix)
    assert [(d.name, d.owner) for d in info.dists] == [("foo", "unknown")]


# --------------------------------------------------------------------------- every input a regular file, bounded


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_a_conda_meta_record_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    from envguard.prefix import inspect_prefix

    prefix = _prefix_with_record(tmp_path, None)
    path = prefix / "conda-meta" / "egone-1.0-h0_0.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    t0 = time.monotonic()
    info = inspect_prefix(prefix)
    assert time.monotonic() - t0 < 5
    assert [name for name, _why in info.bad_records] == ["egone-1.0-h0_0.json"], info.bad_records
    assert "regular file" in info.bad_records[0][1] or "directory" in info.bad_records[0][1]


def test_a_users_rattler_auth_file_that_is_a_fifo_does_not_block_the_client(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """envguard merges the user's RATTLER_AUTH_FILE into the private one it hands rattler; opening a FIFO named
    there waited for a writer forever."""
    import threading

    from envguard.auth import Credentials

    fifo = tmp_path / "auth.json"
    os.mkfifo(fifo)
    monkeypatch.setenv("RATTLER_AUTH_FILE", str(fifo))
    creds = Credentials()
    creds.strip("https://conda.example.com/t/tk-123/channel")  # noqa: B005 - Credentials.strip, not str.strip
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(creds.client()), daemon=True)
    worker.start()
    worker.join(20)
    assert not worker.is_alive() and done and done[0] is not None
    assert os.environ["RATTLER_AUTH_FILE"] == str(fifo)  # the user's setting, back as it was


_SITE = "lib/python3.11/site-packages"
_PREFIX_FILES = [f"{_SITE}/foo-1.0.dist-info/RECORD", f"{_SITE}/foo-1.0.dist-info/top_level.txt", f"{_SITE}/a.pth",
                 "pyvenv.cfg", "conda-meta/envguard-fingerprint.json"]


@pytest.mark.slow
@pytest.mark.parametrize("rel", _PREFIX_FILES, ids=lambda r: r.rsplit("/", 1)[-1])
def test_an_environments_own_files_that_are_fifos_never_block_check_export_or_diff(tmp_path: Path,
                                                                                   rel: str) -> None:
    """A FIFO in place of a dist-info RECORD or top_level.txt, a .pth file, pyvenv.cfg or the fingerprint:
    `check` (and export, diff) never answered. Whole processes with a deadline, so a block fails here."""
    prefix = _prefix_with_record(tmp_path, json.dumps(_RECORD).encode())
    dist = prefix / _SITE / "foo-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: foo\nVersion: 1.0\n\n")
    (dist / "INSTALLER").write_text("pip\n")
    (dist / "RECORD").write_text("foo/__init__.py,,\n")
    (dist / "top_level.txt").write_text("foo\n")
    (prefix / _SITE / "a.pth").write_text("import os\n")
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.7\n")
    (prefix / "conda-meta" / "envguard-fingerprint.json").write_text("{}")
    (prefix / rel).unlink()
    os.mkfifo(prefix / rel)
    for args in (["check", "-p", str(prefix), "--no-smoke", "--deep"],
                 ["export", "-p", str(prefix), "--output-dir", str(tmp_path / "exported")], ["diff", str(prefix), str(prefix)]):
        proc = envguard_run(*args, timeout=60)
        assert proc.returncode in (0, 1, 3), (args, proc.stderr)
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_a_locked_file_artifact_that_is_no_regular_file_is_refused_at_once(tmp_path: Path, monkeypatch,
                                                                           kind: str) -> None:
    """A FIFO or a link to /dev/zero in place of a locked file:// archive: create never answered; a directory:
    `internal error: IsADirectoryError`."""
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    chan = channels.make_channel(tmp_path / "chan", [
        {"name": "egone", "version": "1.0", "noarch": "generic", "files": {"share/egone.txt": "one\n"}}])
    lock = make_lock(write_env(tmp_path / "one", channels.channel_url(chan), ["egone"]))
    archive = next((chan / "noarch").glob("egone-1.0-*.tar.bz2"))
    archive.unlink()
    if kind == "fifo":
        os.mkfifo(archive)
    elif kind == "dev-zero":
        archive.symlink_to("/dev/zero")
    else:
        archive.mkdir()
    t0 = time.monotonic()
    proc = envguard_run("create", "-p", str(tmp_path / "env"), "--lockfile", str(lock), "--no-check", "--quiet",
                        env={"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs")}, timeout=60)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3 and len(lines) == 1, proc.stderr
    assert "internal error" not in proc.stderr and "the locked artifact" in lines[0]
    assert ("directory" if kind == "directory" else "regular file") in lines[0]
    assert time.monotonic() - t0 < 30


# --------------------------------------------------------------------------- one reading of each artifact


@pytest.mark.slow
def test_a_conda_archive_with_two_info_members_is_refused_before_anything_reads_it(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    """The pre-link scan checked the first info-*.tar.zst's paths.json, rattler linked with the last."""
    import zipfile

    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    chan = tmp_path / "chan"
    pkg = channels.build_package(chan, "egdup", "1.0", noarch="generic", fmt="conda",
                                 files={"share/egdup/ok.txt": "ok\n"})
    with zipfile.ZipFile(pkg) as zf:
        members = [(info, zf.read(info)) for info in zf.infolist()]
    with zipfile.ZipFile(pkg, "w") as zf:
        for info, data in members:
            zf.writestr(info, data)
        info_member = next((i, d) for i, d in members if i.filename.startswith("info-"))
        with pytest.warns(UserWarning, match="Duplicate name"):
            zf.writestr(info_member[0].filename, info_member[1])
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    channels.strip_indexed_timestamps(chan)
    lock = make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), ["egdup"]))
    target = tmp_path / "env"
    proc = envguard_run("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet",
                        env={"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs")})
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3 and len(lines) == 1 and "duplicate members info-egdup-1.0" in lines[0], proc.stderr
    assert not target.exists() and siblings(target) == []
