"""Issue #38, points 5-9: hostile inputs, the default lock path, signals and the warm cache.

* (5) What a lock, a path or an environment variable holds is shown with its control characters escaped:
  ``why``'s package names, a $CONDARC path.
* (6) An explicit YAML tag on a value of another type (``!!timestamp x``, ``!!int ""``, ``!!bool maybe``) in an
  environment file, a lock or a .condarc, a 5,000-digit integer in a large lock, and a pixi.toml of millions of
  empty tables: one line naming the file, exit 2, in bounded time and memory; never an internal error.
* (7) A FIFO where the default conda-lock.yml goes: ``lock`` and ``lock --update`` refuse it at once (exit 2).

Every case runs the real CLI in a subprocess (``python -m envguard``) over real files, FIFOs and signals.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support.channels import host_platform
from support.create_fixtures import ENVGUARD

# A spec whose channel does not exist: any solve of it fails (exit 6), so exit 2 proves a refusal before a solve.
NO_CHANNEL = "file:///nonexistent/envguard-test-channel"
MEMORY_LIMIT = 1 << 30  # 1 GiB of address space: 1.2 million empty TOML tables took 1.1 GB


def _envguard(*args: str, cwd: Path, env: dict[str, str] | None = None, seconds: float = 60,
              memory: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    proc = subprocess.run([*ENVGUARD, *args], capture_output=True, text=True, cwd=cwd, timeout=seconds,
                          preexec_fn=limit, env={**os.environ, **(env or {})})
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-2000:]
    return proc


def _error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def _spec(directory: Path, extra: str = "", channel: str = NO_CHANNEL) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "environment.yml"
    path.write_text(f"name: t\nchannels:\n  - {channel}\ndependencies:\n  - python=3.12\n"
                    f"platforms:\n  - linux-64\n{extra}")
    return path


# --------------------------------------------------------------------------- (5) hostile text is shown escaped

FORGED = "\nnumpy on linux-64: all good\x1b]0;pwned\x07\x1b[2J\u202e"
FORGED_SHOWN = "\\nnumpy on linux-64: all good\\x1b]0;pwned\\x07\\x1b[2J\\u202e"


def _raw_controls(text: str) -> bool:
    return any(c in text for c in "\x1b\x07\u202e")


def test_why_shows_a_hostile_lock_s_package_names_escaped(tmp_path: Path) -> None:
    """A package name holding a newline and OSC/CSI escapes reached the terminal raw: a forged second line and
    a cleared screen."""
    import json

    lock = tmp_path / "lock.yml"
    entry = ("- name: {name}\n  version: '1.0'\n  manager: conda\n  platform: linux-64\n  dependencies: {deps}\n"
             "  url: https://conda.anaconda.org/conda-forge/noarch/{file}-1.0-0.conda\n"
             "  hash:\n    md5: {md5}\n    sha256: {sha}\n  category: main\n  optional: false\n")
    lock.write_text(
        "version: 1\nmetadata:\n  content_hash:\n    linux-64: " + "ab" * 32 + "\n  channels:\n  - url: conda-forge\n"
        "    used_env_vars: []\n  platforms:\n  - linux-64\n  sources:\n  - environment.yml\npackage:\n"
        + entry.format(name=json.dumps("evil" + FORGED), deps="{numpy: '*'}", file="evil", md5="0a" * 16,
                       sha="1b" * 32)
        + entry.format(name="numpy", deps="{}", file="numpy", md5="0b" * 16, sha="1c" * 32))
    proc = _envguard("why", "numpy", "--lockfile", str(lock), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not _raw_controls(proc.stdout) and [ln for ln in proc.stdout.splitlines() if ln.startswith("numpy on")] == [
        "numpy on linux-64:"], proc.stdout
    assert f"top-level evil{FORGED_SHOWN} 1.0 -> numpy 1.0" in proc.stdout, proc.stdout


def test_a_condarc_path_with_control_characters_is_shown_escaped(tmp_path: Path) -> None:
    """$CONDARC is a path from the environment: its newline and escapes reached the terminal raw."""
    _spec(tmp_path, channel="conda-forge")
    folder = tmp_path / ("x" + FORGED)
    folder.mkdir()
    condarc = folder / "condarc"
    for text in ("channel_alias: file:///nonexistent/envguard-alias\n", "channel_alias: [a, b]\n"):
        condarc.write_text(text)
        proc = _envguard("lock", cwd=tmp_path, env={"CONDARC": str(condarc)})
        assert proc.returncode in (2, 6), proc.stderr
        assert not _raw_controls(proc.stderr) and "\nnumpy on" not in proc.stderr, proc.stderr
        assert f"x{FORGED_SHOWN}/condarc" in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- (6) YAML tags, huge integers, TOML

TAGGED = {
    "timestamp": "!!timestamp notadate",  # PyYAML: AttributeError ('NoneType' ... 'groupdict')
    "empty int": '!!int ""',  # IndexError
    "bool": "!!bool maybe",  # KeyError
    "float": "!!float x",  # ValueError
    "bad date": "!!timestamp 2001-13-45",  # ValueError from datetime
}


@pytest.mark.parametrize("value", TAGGED.values(), ids=list(TAGGED))
def test_a_tagged_value_of_another_type_in_an_environment_file_is_one_line_exit_2(tmp_path: Path,
                                                                                   value: str) -> None:
    spec = _spec(tmp_path, f"variables:\n  X: {value}\n")
    for args in (("lint", str(spec)), ("lock", "--check"), ("lock",)):
        proc = _envguard(*args, cwd=tmp_path)
        line = _error_line(proc.stderr)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "environment.yml:9:6: malformed YAML:" in line and "is not a valid" in line, (args, line)
    assert not (tmp_path / "conda-lock.yml").exists()


def test_a_tagged_value_in_a_lock_and_a_condarc_is_one_line_exit_2(tmp_path: Path) -> None:
    _spec(tmp_path)
    lock = tmp_path / "conda-lock.yml"
    lock.write_text("version: 1\nmetadata:\n  content_hash:\n    linux-64: !!timestamp abc\n  channels: []\n"
                    "  platforms: [linux-64]\n  sources: [environment.yml]\npackage: []\n")
    for args in (("lint", str(lock)), ("why", "python")):
        proc = _envguard(*args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "conda-lock.yml:4:15: malformed YAML: 'abc' is not a valid timestamp value" in _error_line(proc.stderr)
    proc = _envguard("lock", "--check", cwd=tmp_path)  # a lock that cannot be read is one to make again
    assert proc.returncode == 4 and "conda-lock.yml:4:15: the lock is not valid YAML" in _error_line(proc.stderr)
    lock.unlink()
    condarc = tmp_path / "condarc"
    condarc.write_text("channel_alias: !!timestamp x\n")
    proc = _envguard("lock", cwd=tmp_path, env={"CONDARC": str(condarc)})
    assert proc.returncode == 2 and "condarc" in _error_line(proc.stderr), proc.stderr
    assert not lock.exists()


def _large_lock(n: int, extra: str = "") -> str:
    """A conda-lock file in conda-lock's own layout (the layout the fast reader takes) of ``n`` packages."""
    head = ("version: 1\nmetadata:\n  content_hash:\n    linux-64: " + "ab" * 32 + "\n  channels:\n"
            "  - url: conda-forge\n    used_env_vars: []\n  platforms:\n  - linux-64\n  sources:\n"
            "  - environment.yml\npackage:\n")
    entries = []
    for i in range(n):
        entries.append(
            f"- name: pkg{i}\n  version: '1.0'\n  manager: conda\n  platform: linux-64\n  dependencies: {{}}\n"
            f"  url: https://conda.anaconda.org/conda-forge/noarch/pkg{i}-1.0-0.conda\n"
            f"  hash:\n    md5: {'0a' * 16}\n    sha256: {'1b' * 32}\n  category: main\n  optional: false\n"
            + (extra if i == n // 2 else ""))
    return head + "".join(entries)


def test_a_5000_digit_integer_in_a_large_lock_is_exit_2_naming_its_line(tmp_path: Path) -> None:
    """The fast reader of conda-lock's layout turned a long run of digits into an int itself: past Python's
    4,300-digit limit that was `internal error: ValueError` in create (a small lock, read by PyYAML, got 2)."""
    lock = tmp_path / "big-lock.yml"
    lock.write_text(_large_lock(400, "  size: " + "9" * 5000 + "\n"))
    line_no = lock.read_text().split("\n  size: ")[0].count("\n") + 2
    # the limit in Python's own words, which the message carries: "(4300 digits)" from 3.11, "(4300)" on 3.10
    limit = "limit (4300 digits)" if sys.version_info >= (3, 11) else "limit (4300)"
    for args in (("create", "-p", str(tmp_path / "env"), "--lockfile", str(lock), "--frozen", "--offline",
                  "--no-check"), ("lint", str(lock))):
        proc = _envguard(*args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        line = _error_line(proc.stderr)
        assert f"big-lock.yml:{line_no}:9: malformed YAML:" in line and limit in line, line
    assert not (tmp_path / "env").exists()


@pytest.mark.slow
def test_a_pixi_manifest_of_millions_of_empty_tables_is_refused_early_in_bounded_memory(tmp_path: Path) -> None:
    """3 million empty tables (30 MiB, under the input limit) ended in MemoryError; 1.2 million took 8 s and
    1.1 GB. The tables are counted before the parse: one line, exit 2, within 1 GiB of address space."""
    f = tmp_path / "pixi.toml"
    f.write_text('[workspace]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                 + "".join(f"[t{i}]\n" for i in range(3_000_000)))
    assert f.stat().st_size < 32 << 20
    started = time.monotonic()
    proc = _envguard("lint", str(f), cwd=tmp_path, memory=MEMORY_LIMIT)
    assert proc.returncode == 2, proc.stderr
    assert f"{f}: TOML document has more than 200,000 keys, dotted-key parts, tables" in _error_line(proc.stderr)
    assert time.monotonic() - started < 30


def test_strings_and_comments_are_no_tables(tmp_path: Path) -> None:
    """What the early count skips: brackets, commas and dots inside strings (every TOML string form, escapes
    included) and comments are no structure, so a manifest whose long strings hold many of them is read."""
    from envguard.sources.toml_text import structure_count

    text = ('a = """x""""\nb = [1, 2]\nc = \'\'\'y,[\'\'\'\n# ,,, [[x]]\nd = "a\\\\"\ne = "q\\",[" \n'
            'f = \'C:\\\' \ng = """\\""",[""" \n')
    assert structure_count(text, -1) == 9  # a= b=[, c= d= e= f= g=
    assert structure_count('a = """' + "[t]\n" * 10, -1) == 1  # an unclosed string: tomli stops there too
    f = tmp_path / "pixi.toml"
    f.write_text('[workspace]\nname = "x"\nchannels = ["conda-forge"]\nplatforms = ["linux-64"]\n'
                 'description = """' + "a, b. [c] {d} = e\n" * 50_000 + '"""\n# ' + ",.[" * 100_000 + "\n")
    proc = _envguard("lint", str(f), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr


# --------------------------------------------------------------------------- (7) a FIFO as the default lock


@pytest.mark.parametrize("args", [("lock",), ("lock", "--update", "egtool"), ("lock", "--check"),
                                  ("create", "-p", "env")])
def test_a_fifo_where_the_default_lock_goes_is_refused_at_once(tmp_path: Path, args: tuple[str, ...],
                                                              channel_url: str) -> None:
    """`lock` and `lock --update` solved, then opened the project's conda-lock.yml and waited for a writer
    forever when it was a FIFO; now every command refuses it before opening it (exit 2, naming what it is).
    The spec solves (the test channel), so only the FIFO can stop it."""
    tmp_path.joinpath("environment.yml").write_text(
        f"name: t\nchannels:\n  - {channel_url}\ndependencies:\n  - egtool\nplatforms:\n  - {host_platform()}\n")
    fifo = tmp_path / "conda-lock.yml"
    os.mkfifo(fifo)
    started = time.monotonic()
    proc = _envguard(*args, cwd=tmp_path, seconds=30)
    assert time.monotonic() - started < 25
    assert proc.returncode == 2, (args, proc.stderr)
    assert "conda-lock.yml" in (line := _error_line(proc.stderr)) and "FIFO (named pipe)" in line, line
    assert fifo.is_fifo() and not (tmp_path / "env").exists()


# --------------------------------------------------------------------------- (8) signals

HOOKS = {"ENVGUARD_TESTING": "1"}


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A lock of two small packages from a local channel, and the environment built from it: (lock, target,
    the environment every run here uses: its own package cache)."""
    from support import channels
    from support.create_fixtures import make_lock, write_env

    env = {"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs")}
    chan = channels.make_channel(tmp_path / "chan", [
        {"name": "egone", "version": "1.0", "noarch": "generic", "files": {"share/egone.txt": "one\n"}},
        {"name": "egtwo", "version": "1.0", "noarch": "generic", "files": {"share/egtwo.txt": "two\n"}}])
    lock = make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), ["egone", "egtwo"]))
    target = tmp_path / "env"
    proc = _envguard("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet", cwd=tmp_path,
                     env=env)
    assert proc.returncode == 0, proc.stderr
    return lock, target, env


def _startup_seconds() -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.monotonic() - started


@pytest.mark.slow
def test_sigterm_at_any_moment_of_a_force_build_says_what_the_target_holds(
        tmp_path: Path, built: tuple[Path, Path, dict[str, str]]) -> None:
    """A SIGTERM while envguard or create was still starting (imports: a few tenths of a second) printed a
    bare `terminated (SIGTERM)`: every line now says what the target holds, or that nothing was changed."""
    lock, target, env = built
    offset = _startup_seconds() * 1.5  # before Python runs envguard's first line the signal's default action ends it
    outcomes: list[str] = []
    for i in range(14):
        proc = subprocess.Popen([*ENVGUARD, "create", "-p", str(target), "--lockfile", str(lock), "--no-check",
                                 "--force"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **env})
        time.sleep(offset + 0.08 * i)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert "Traceback" not in err and "internal error" not in err, err
        if proc.returncode == 0:
            outcomes.append("done")
            continue
        if proc.returncode == -signal.SIGTERM and not err:
            continue  # the machine was slower than measured: the interpreter had not started envguard yet
        assert proc.returncode == 143, (proc.returncode, err)
        assert lines and lines[-1].startswith("terminated (SIGTERM)") and lines[-1] != "terminated (SIGTERM)", err
        assert any(what in lines[-1] for what in ("nothing was changed", f"{target} was left as it was",
                                                   f"the new environment is in place at {target}")), err
        outcomes.append(lines[-1])
    assert any(o != "done" for o in outcomes), outcomes
    assert target.is_dir() and (target / "conda-meta").is_dir()


@pytest.mark.slow
def test_sigterm_at_the_swap_is_terminated_exit_143(tmp_path: Path, built: tuple[Path, Path, dict[str, str]]) -> None:
    """The swap holds signals until the renames are done; it then raised a plain KeyboardInterrupt, so a
    SIGTERM there read "interrupted", exit 130."""
    lock, target, env = built
    for sig, code, word in ((signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGINT, 130, "interrupted")):
        proc = subprocess.Popen([*ENVGUARD, "create", "-p", str(target), "--lockfile", str(lock), "--no-check",
                                 "--force"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, **env, **HOOKS, "ENVGUARD_TEST_PAUSE_AT": "swap:2"})
        assert proc.stderr is not None
        seen = ""
        for line in proc.stderr:
            seen += line
            if "paused at swap" in line:
                proc.send_signal(sig)
                break
        _out, err = proc.communicate(timeout=60)
        lines = [ln for ln in (seen + err).splitlines() if ln.strip()]
        assert proc.returncode == code, seen + err
        assert lines[-1].startswith(f"{word}: the new environment is in place at {target}"), seen + err


def _pymp(root: Path) -> list[Path]:
    return [p for p in root.rglob("pymp-*") if p.is_dir()]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "sig"), [("smoke", signal.SIGTERM), ("smoke", signal.SIGINT),
                                              ("check", signal.SIGTERM)])
def test_a_signal_to_smoke_leaves_no_pymp_directory_in_tmpdir(tmp_path: Path, command: str,
                                                              sig: signal.Signals) -> None:
    """The probe's multiprocessing made its pymp-* directory in TMPDIR and, stopped by envguard, never removed
    it: the probe now has a temporary directory of its own inside its work dir, which envguard removes."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    args = (["smoke", "--python", sys.executable, "--timeout", "300"] if command == "smoke"
            else ["check", "-p", sys.prefix])
    proc = subprocess.Popen([*ENVGUARD, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp)})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (_pymp(tmp) and list(tmp.glob("envguard-smoke-*"))):
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the probe ended before it was signalled"
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), err
    time.sleep(0.5)  # the probe's session was stopped before envguard exited; nothing of it writes now
    assert _pymp(tmp) == [] and not list(tmp.glob("envguard-smoke-*")), sorted(map(str, tmp.rglob("*")))


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process semantics (/proc, sessions)")
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_probe_on_its_own_removes_its_temporary_directories_when_signalled(
        tmp_path: Path, sig: signal.Signals, code: int, request: pytest.FixtureRequest) -> None:
    """The probe run by path, as a scheduler or a user runs it with no envguard around it: a SIGTERM while its
    DataLoader workers ran killed it outright and its pymp-* directory stayed in TMPDIR; a Ctrl-C was swallowed
    as a failed check. Now it unwinds on either, its exit handlers remove what it made in TMPDIR, its workers end,
    and it exits 128 + the signal."""
    from envguard.procsession import session_members
    from envguard.smoke import probe_path

    # right under /tmp: a TMPDIR as deep as some tmp_path (pytest-xdist's) is too long for multiprocessing's
    # socket, and the probe then rightly fails its DataLoaders at once (tests/test_smoke_tmpdir.py)
    tmp = Path(tempfile.mkdtemp(prefix="eg38-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(tmp, ignore_errors=True))
    events = tmp_path / "events.jsonl"
    proc = subprocess.Popen([sys.executable, str(probe_path()), "--events", str(events)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        # its forkserver's pymp-* directory exists, and a DataLoader worker has started
        while time.monotonic() < deadline and proc.poll() is None and not (
                _pymp(tmp) and events.is_file() and "worker_pid" in events.read_text()):
            time.sleep(0.02)
        assert proc.poll() is None and _pymp(tmp), "the probe ended or made no pymp-* directory before the signal"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == code, err.decode(errors="replace")[-3000:]
        assert out == b"", "a stopped probe prints no document"
        assert list(tmp.iterdir()) == [], sorted(map(str, tmp.rglob("*")))
        deadline = time.monotonic() + 10  # its forkserver ends when it reads the probe's end
        while session_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session_members(proc.pid) == []
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of its session
        except OSError:
            pass


@pytest.mark.slow
def test_a_killed_downloads_folder_is_removed_by_the_next_create_that_changes_nothing(
        tmp_path: Path, built: tuple[Path, Path, dict[str, str]]) -> None:
    """A create SIGKILLed after its downloads left .envguard-downloads-<pid>/ in the package cache; only a
    create that downloaded again removed it, so one that found the environment unchanged left it for good."""
    lock, target, env = built
    cold = {"ENVGUARD_PKGS_DIR": str(tmp_path / "cold-pkgs")}  # a cache without them: the packages are read
    killed = subprocess.run([*ENVGUARD, "create", "-p", str(target), "--lockfile", str(lock), "--no-check",
                             "--force"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, **cold, **HOOKS, "ENVGUARD_TEST_KILL_AT": "verified"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = list((tmp_path / "cold-pkgs").glob(".envguard-downloads-*"))
    assert len(left) == 1 and left[0].is_dir(), left
    proc = _envguard("create", "-p", str(target), "--lockfile", str(lock), "--no-check", cwd=tmp_path, env=cold)
    assert proc.returncode == 0 and "unchanged" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert list((tmp_path / "cold-pkgs").glob(".envguard-downloads-*")) == []


# --------------------------------------------------------------------------- (9) the warm cache and ctimes


@pytest.mark.slow
def test_a_same_size_edit_of_a_cached_file_with_its_mtime_set_back_is_not_installed(
        tmp_path: Path, built: tuple[Path, Path, dict[str, str]]) -> None:
    """A warm create vouched for a cache entry by its files' size, mtime, inode, device and mode: an in-place
    rewrite of the same size whose mtime was then set back was linked into the next environment. The ctime
    (which nobody can set back) changed while no link count did: the entry is checked and extracted again."""
    lock, target, env = built
    cached = [p for p in (tmp_path / "pkgs").glob("egone-1.0-*/share/egone.txt")]
    assert len(cached) == 1, list((tmp_path / "pkgs").iterdir())
    before = cached[0].stat()
    with open(cached[0], "r+b") as f:  # in place: the same inode, the same size
        f.write(b"ONE\n")
    os.utime(cached[0], ns=(before.st_atime_ns, before.st_mtime_ns))
    assert cached[0].stat().st_mtime_ns == before.st_mtime_ns and cached[0].stat().st_size == before.st_size
    other = tmp_path / "env2"
    proc = _envguard("create", "-p", str(other), "--lockfile", str(lock), "--no-check", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert (other / "share" / "egone.txt").read_bytes() == b"one\n", proc.stderr


@pytest.mark.slow
def test_removing_and_making_environments_hashes_nothing_again(
        tmp_path: Path, built: tuple[Path, Path, dict[str, str]]) -> None:
    """What ctimes in the stamp must not cost: environments made and removed change every linked file's ctime
    and link count together, and the next create still vouches by the identities (nothing re-extracted, the
    cache entries' files keep their inodes)."""
    import shutil

    lock, target, env = built
    cached = next((tmp_path / "pkgs").glob("egone-1.0-*/share/egone.txt"))
    inode = cached.stat().st_ino
    for _ in range(2):
        shutil.rmtree(target)
        proc = _envguard("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "-v", cwd=tmp_path,
                         env=env)
        assert proc.returncode == 0, proc.stderr
    assert cached.stat().st_ino == inode and cached.stat().st_nlink == 2
