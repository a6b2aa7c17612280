"""Bad input to every command: one line on stderr naming the file, the key and the fix, the documented exit
code (README.md "Exit codes"), never a traceback or an "internal error".

Each case runs the real CLI in-process (``envguard.cli.run``) against real bad files; none of them reaches a
solver or a network, so the whole battery takes a few seconds. A case marked ``xfail(strict=True)`` is a known
defect in a module this suite does not own: it fails loudly (XPASS) once fixed, so the mark must then go.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard import cli, render
from envguard.platforms import host_platform

BAD_FILES = {
    "empty.yml": b"",
    "binary.yml": bytes(range(256)) * 2,
    "list.yml": b"- python\n- numpy\n",
    "scalar.yml": b"just a string\n",
    "broken.yml": b"name: x\ndependencies: [\n",
    "chan5.yml": b"name: x\nchannels: 5\ndependencies:\n  - python=3.11\n",
    "depmap.yml": b"name: x\nchannels: [conda-forge]\ndependencies: {a: 1}\n",
    "plat_str.yml": b"name: x\nchannels: [conda-forge]\ndependencies: [python=3.11]\nplatforms: linux-64\n",
    "recursive.yml": b"a: &x [*x]\nchannels: [conda-forge]\ndependencies: [python=3.11]\n",
    "ok.yml": b"name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\nplatforms: [linux-64]\n",
}

# Locks whose keys have the wrong type; everything else about them is a valid conda-lock v1 file.
LOCK = """\
version: 1
metadata:
  content_hash: {content_hash}
  channels: [{{url: conda-forge, used_env_vars: []}}]
  platforms: [linux-64]
  sources: [environment.yml]
  custom_metadata: {custom}
package:
- name: zlib
  version: 1.3.1
  manager: conda
  platform: linux-64
  dependencies: {deps}
  url: https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3.1-hb9d3cd8_2.conda
  hash: {hash}
  category: main
  optional: false
"""
GOOD_HASH = "{md5: " + "cd" * 16 + ", sha256: " + "ab" * 32 + "}"
BAD_LOCKS = {
    "lock_content_hash.yml": dict(content_hash="5", custom="{}", deps="{}", hash=GOOD_HASH),
    "lock_custom.yml": dict(content_hash="{linux-64: abc}", custom="[1]", deps="{}", hash=GOOD_HASH),
    "lock_deps.yml": dict(content_hash="{linux-64: abc}", custom="{}", deps="[1]", hash=GOOD_HASH),
    "lock_hash.yml": dict(content_hash="{linux-64: abc}", custom="{}", deps="{}", hash="abc"),
}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding every bad input, a directory, an empty prefix and a file in the way."""
    for name, data in BAD_FILES.items():
        (tmp_path / name).write_bytes(data)
    for name, fields in BAD_LOCKS.items():
        (tmp_path / name).write_text(LOCK.format(**fields))
    (tmp_path / "good.lock.yml").write_text(LOCK.format(content_hash="{linux-64: abc}", custom="{}", deps="{}",
                                                        hash=GOOD_HASH).replace("linux-64", host_platform()))
    good = (tmp_path / "good.lock.yml").read_text()
    for name, host in (("badport.lock.yml", "conda.anaconda.org:99999"), ("badv6.lock.yml", "[::1")):
        (tmp_path / name).write_text(good.replace("https://conda.anaconda.org", f"https://{host}"))
    (tmp_path / "adir").mkdir()
    (tmp_path / "prefix" / "conda-meta").mkdir(parents=True)  # a conda prefix with nothing installed
    (tmp_path / "existing.yml").write_text("name: mine\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGUARD_ENVS_DIR", str(tmp_path / "envs"))
    return tmp_path


def _case(argv: str, code: int, *needles: str, xfail: str | None = None) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(argv.split(), code, needles, id=argv, marks=marks)


CASES = [
    # --------------------------------------------------------------- lock
    _case("lock -f missing.yml", 2, "missing.yml", "not found", "(fix:"),
    _case("lock -f adir", 2, "adir", "directory", "(fix:"),
    _case("lock -f empty.yml", 2, "empty.yml", "empty", "(fix:"),
    _case("lock -f binary.yml", 2, "binary.yml", "UTF-8", "(fix:"),
    _case("lock -f list.yml", 2, "list.yml", "mapping", "(fix:"),
    _case("lock -f scalar.yml", 2, "scalar.yml", "mapping", "(fix:"),
    _case("lock -f broken.yml", 2, "broken.yml:3:1", "malformed YAML", "(fix:"),
    _case("lock -f chan5.yml", 2, "chan5.yml:2:1", "channels", "(fix:"),
    _case("lock -f depmap.yml", 2, "depmap.yml:3:1", "dependencies", "(fix:"),
    _case("lock -f plat_str.yml", 2, "plat_str.yml:4:1", "platforms", "(fix:"),
    _case("lock -f recursive.yml", 2, "recursive.yml:1:8", "alias *x refers to a node that contains it", "(fix:"),
    _case("lock -f ok.yml --platform foo-64", 2, "foo-64", "(fix:"),
    _case("lock -f ok.yml -p ./env", 2, "looks like a path", "--platform", "(fix:"),
    _case("lock -f ok.yml -p linux-64", 2, "-p means --prefix", "--platform linux-64", "(fix:"),
    _case("lock -f ok.yml --cuda abc", 2, "--cuda", "abc", "(fix:"),
    _case("lock -f ok.yml --cuda 12.4 --no-cuda", 2, "--no-cuda", "(fix:"),
    _case("lock -f ok.yml --lockfile adir", 2, "adir", "--lockfile", "directory", "(fix:"),
    _case("lock -f ok.yml --lockfile ok.yml/conda-lock.yml", 2, "ok.yml/conda-lock.yml", "not a directory",
          "(fix:"),
    _case("lock --check -f adir", 2, "adir", "directory", "(fix:"),
    _case("lock --check -f empty.yml --lockfile good.lock.yml", 2, "empty.yml", "empty", "(fix:"),
    _case("lock --check -f binary.yml --lockfile good.lock.yml", 2, "binary.yml", "UTF-8", "(fix:"),
    _case("lock --check -f list.yml --lockfile good.lock.yml", 2, "list.yml", "mapping", "(fix:"),
    _case("lock --check -f chan5.yml --lockfile good.lock.yml", 2, "chan5.yml:2:1", "channels", "(fix:"),
    _case("lock --check -f ok.yml --lockfile broken.yml", 4, "broken.yml:3:1", "not valid YAML", "(fix:"),
    _case("lock --check -f ok.yml --lockfile list.yml", 4, "list.yml", "no readable `metadata:`", "(fix:"),
    _case("lock --check -f ok.yml --lockfile lock_content_hash.yml", 4, "lock_content_hash.yml",
          "content_hash", "(fix:"),
    _case("lock --check -f ok.yml --lockfile lock_custom.yml", 4, "lock_custom.yml", "custom_metadata", "(fix:"),
    _case("lock --check -f ok.yml --platform foo-64", 2, "foo-64", "(fix:"),
    _case("lock --bogus", 2, "--bogus", "(fix:"),
    _case("lock --cuda", 2, "envguard lock", "--cuda", "(fix:"),
    # --------------------------------------------------------------- create
    _case("create -p env --lockfile missing.lock", 4, "missing.lock", "(fix:"),
    _case("create -p env --lockfile adir", 2, "adir", "directory"),
    _case("create -p env --lockfile empty.yml", 2, "empty.yml", "(fix:"),
    _case("create -p env --lockfile binary.yml", 2, "binary.yml", "UTF-8", "(fix:"),
    _case("create -p env --lockfile list.yml", 2, "list.yml", "(fix:"),
    _case("create -p env --lockfile scalar.yml", 2, "scalar.yml", "(fix:"),
    _case("create -p env --lockfile broken.yml", 2, "broken.yml:3:1", "(fix:"),
    _case("create -p env --lockfile chan5.yml", 2, "chan5.yml", "(fix:"),
    *[_case(f"create -p env --lockfile {name}", 2, name, "expected a", "(fix:") for name in BAD_LOCKS],
    # a damaged URL in a lock was the installer's crash, "internal error" and exit 6
    _case("create -p env --lockfile badport.lock.yml", 2, "badport.lock.yml", "url", "zlib", "not a valid URL", "(fix:"),
    _case("create -p env --lockfile badv6.lock.yml", 2, "badv6.lock.yml", "url", "zlib", "not a valid URL", "(fix:"),
    _case("create -p env -n other --lockfile ok.yml", 2, "-p", "-n"),
    _case("create --lockfile ok.yml", 2, "-p", "(fix:"),
    _case("create -p env --backend foo --lockfile ok.yml", 2, "--backend", "foo", "(fix:"),
    _case("create -p env --timeout abc --lockfile ok.yml", 2, "--timeout", "(fix:"),
    _case("create -p env --timeout -1 --lockfile good.lock.yml", 2, "--timeout", "(fix:"),
    _case("create -p existing.yml/sub --lockfile good.lock.yml", 2, "existing.yml", "(fix:"),
    _case("create -p existing.yml --lockfile good.lock.yml", 2, "existing.yml", "(fix:"),
    _case("create -p env -f missing.yml", 2, "missing.yml", "(fix:"),
    _case("create -p env -f empty.yml --lockfile good.lock.yml", 2, "empty.yml", "empty", "(fix:"),
    _case("create -n a/b --lockfile ok.yml", 2, "a/b", "(fix:"),
    # --------------------------------------------------------------- check
    _case("check --no-smoke -p missing", 2, "missing", "(fix:"),
    _case("check --no-smoke -p existing.yml", 2, "existing.yml", "(fix:"),
    _case("check --no-smoke -p prefix --lockfile missing.lock", 2, "missing.lock", "--lockfile", "(fix:"),
    _case("check --no-smoke -p prefix --lockfile adir", 2, "adir", "directory", "(fix:"),
    _case("check --no-smoke -p prefix --lockfile empty.yml", 2, "empty.yml", "(fix:"),
    _case("check --no-smoke -p prefix --lockfile binary.yml", 2, "binary.yml", "UTF-8", "(fix:"),
    _case("check --no-smoke -p prefix --lockfile list.yml", 2, "list.yml", "(fix:"),
    _case("check --no-smoke -p prefix --lockfile broken.yml", 2, "broken.yml:3:1", "(fix:"),
    _case("check --no-smoke -p prefix --lockfile lock_hash.yml", 2, "lock_hash.yml", "hash", "(fix:"),
    _case("check --no-smoke -p prefix --format xml", 2, "--format", "xml", "(fix:"),
    _case("check --no-smoke -p prefix -n other", 2, "-p", "-n"),
    _case("check --no-smoke -n nosuch", 2, "nosuch", "(fix:"),
    _case("check -p prefix --smoke-timeout -5", 2, "--smoke-timeout", "(fix:"),
    _case("check -p prefix --smoke-timeout abc", 2, "--smoke-timeout", "(fix:"),
    # --------------------------------------------------------------- smoke
    _case("smoke -p missing", 2, "missing", "(fix:"),
    _case("smoke -p existing.yml", 2, "existing.yml", "(fix:"),
    _case("smoke -p prefix", 2, "prefix", "no Python interpreter", "(fix:"),
    _case("smoke --python missing/python", 2, "missing/python", "(fix:"),
    _case("smoke --python adir", 2, "adir", "(fix:"),
    _case("smoke -n nosuch", 2, "nosuch", "(fix:"),
    _case("smoke -p prefix -n other", 2, "-n", "(fix:"),
    _case("smoke --format xml", 2, "--format", "xml", "(fix:"),
    _case("smoke --timeout 0", 2, "--timeout", "(fix:"),
    _case("smoke --timeout abc", 2, "--timeout", "(fix:"),
    # --------------------------------------------------------------- diff
    _case("diff missing.yml ok.yml", 2, "side A", "missing.yml", "(fix:"),
    _case("diff ok.yml adir", 2, "side B", "adir", "(fix:"),
    _case("diff empty.yml ok.yml", 2, "empty.yml", "(fix:"),
    _case("diff binary.yml ok.yml", 2, "binary.yml", "UTF-8", "(fix:"),
    _case("diff list.yml ok.yml", 2, "list.yml", "(fix:"),
    _case("diff scalar.yml ok.yml", 2, "scalar.yml", "(fix:"),
    _case("diff broken.yml ok.yml", 2, "broken.yml:3:1", "(fix:"),
    _case("diff depmap.yml ok.yml", 2, "depmap.yml:3:1", "dependencies", "(fix:"),
    _case("diff plat_str.yml ok.yml", 2, "plat_str.yml:4:1", "platforms", "(fix:"),
    _case("diff lock_hash.yml ok.yml", 2, "lock_hash.yml", "hash", "(fix:"),
    _case("diff ok.yml ok.yml --kind foo", 2, "--kind", "foo", "(fix:"),
    _case("diff ok.yml ok.yml --kind pixi", 2, "ok.yml", "(fix:"),
    _case("diff ok.yml ok.yml --platform foo-64", 2, "foo-64", "(fix:"),
    _case("diff ok.yml ok.yml --platform linux-64 --all-platforms", 2, "--all-platforms", "(fix:"),
    _case("diff ok.yml ok.yml --format xml", 2, "--format", "xml", "(fix:"),
    _case("diff ok.yml", 2, "no environment to act on", "-p/--prefix", "(fix:"),
    _case("diff ok.yml ok.yml ok.yml", 2, "envguard diff", "(fix:"),
    _case("diff -n nosuch ok.yml", 2, "nosuch", "(fix:"),
    # --------------------------------------------------------------- init
    _case("init --python 2.7 -o new.yml", 2, "--python"),
    _case("init --torch abc -o new.yml", 2, "--torch"),
    _case("init --cuda abc -o new.yml", 2, "--cuda"),
    _case("init --channel foo -o new.yml", 2, "--channel"),
    _case("init --platform foo-64 -o new.yml", 2, "foo-64"),
    _case("init -p foo-64 -o new.yml", 2, "foo-64", "--platform"),
    _case("init --cuda 12.6 -p osx-arm64 -o new.yml", 2, "osx-arm64"),
    _case("init --name a/b -o new.yml", 2, "a/b"),
    _case("init -o adir", 2, "adir", "directory", "(fix:"),
    _case("init -o existing.yml/new.yml", 2, "existing.yml/new.yml", "not a directory", "(fix:"),
    _case("init -o existing.yml", 2, "existing.yml", "--force", "(fix:"),
    # --------------------------------------------------------------- lint
    _case("lint missing.yml", 2, "missing.yml", "(fix:"),
    _case("lint adir", 2, "adir", "directory", "(fix:"),
    _case("lint empty.yml", 2, "empty.yml", "(fix:"),
    _case("lint binary.yml", 2, "binary.yml", "UTF-8", "(fix:"),
    _case("lint list.yml", 2, "list.yml", "(fix:"),
    _case("lint broken.yml", 2, "broken.yml:3:1", "(fix:"),
    _case("lint --format xml ok.yml", 2, "--format", "xml", "(fix:"),
    _case("lint adir/nothing-here.yml", 2, "nothing-here.yml", "(fix:"),
    # --------------------------------------------------------------- the app itself
    _case("frobnicate", 2, "frobnicate", "(fix:"),
    _case("--bogus", 2, "--bogus", "(fix:"),
]


@pytest.mark.parametrize("argv, code, needles", CASES)
def test_bad_input_is_one_line_with_the_documented_code(here: Path, capsys: pytest.CaptureFixture[str],
                                                        argv: list[str], code: int, needles: tuple[str, ...]) -> None:
    before = {p.name: p.read_bytes() for p in here.iterdir() if p.is_file()}
    capsys.readouterr()
    rc = cli.run(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == code, err
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err and "internal error" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    # a failed run loses nothing that existed, and leaves no half-written output behind
    # (create's prefix lock file stays by design: a flock target, empty, see create_fixtures.siblings)
    assert {p.name: p.read_bytes() for p in here.iterdir()
            if p.is_file() and not p.name.endswith(".envguard-lock")} == before
    assert not (here / "env").exists() and not (here / "new.yml").exists()


@pytest.mark.parametrize("text", ["torch[cuda] @@ bad", "numpy [bold]"])
def test_brackets_in_an_error_survive_rich_markup(here: Path, capsys: pytest.CaptureFixture[str],
                                                  text: str) -> None:
    """The message is printed through rich: "[cuda]" and "[bold]" must show as written, not be eaten as tags."""
    env = here / "brackets.yml"
    dep = f"  - pip\n  - pip:\n    - \"{text}\"\n" if "@@" in text else f"  - \"{text}\"\n"
    env.write_text(f"name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n{dep}")
    assert cli.run(["lock", "-f", str(env), "--lockfile", str(here / "out.yml")]) == 2
    err = capsys.readouterr().err
    assert text in err, err


def test_brackets_in_a_findings_table_survive_rich_markup(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(render, "out", Console(file=screen, width=400))  # wide: one table row per finding
    lint_env = here / "pipextra.yml"
    lint_env.write_text("name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pytorch=2.13.*=cpu*\n"
                        "  - pip\n  - pip:\n    - torch[cuda]==2.1\n")
    assert cli.run(["lint", str(lint_env)]) == 1
    assert "EG107" in screen.getvalue() and "torch[cuda]==2.1" in screen.getvalue(), screen.getvalue()


@pytest.mark.slow
def test_module_entry_point_and_help_list_every_command(tmp_path: Path) -> None:
    """`python -m envguard` is the CLI; `--help` names each command with its one-line help."""
    from envguard.cli import app

    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "envguard", "--help"], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    commands = {c.name: (c.callback.__doc__ or "").strip().splitlines()[0] for c in app.registered_commands}
    assert set(commands) >= {"lock", "create", "smoke", "check", "diff", "init", "lint", "export", "fleet", "tune"}
    for name, first_line in commands.items():
        # the row that starts with the name ("lock" also appears in lint's help, listed before it)
        row = next((ln for ln in proc.stdout.splitlines() if ln.lstrip("│ ").startswith(f"{name} ")), "")
        assert first_line and first_line in row, (name, first_line, proc.stdout)
    version = subprocess.run([sys.executable, "-m", "envguard", "--version"], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("envguard ")
    bad = subprocess.run([sys.executable, "-m", "envguard", "lint", "--format", "xml"], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


def test_a_bug_is_one_masked_line_and_verbose_anywhere_shows_its_masked_traceback(
        here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Anything that is not an envguard error is a bug: one line, exit 6, and the hint to rerun with --verbose;
    with -v (before or after the command) the traceback, masked, and no hint to do what was just done."""
    import envguard.lint

    def broken(_targets: object) -> None:
        raise RuntimeError("boom at https://eg-user:eg-pass@example.invalid/t/eg-token/chan")

    monkeypatch.setattr(envguard.lint, "lint_paths", broken)
    capsys.readouterr()
    assert cli.run(["lint", "ok.yml"]) == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("internal error: RuntimeError: boom") and "--verbose" in err, err
    for argv in (["-v", "lint", "ok.yml"], ["lint", "ok.yml", "-v"]):
        assert cli.run(argv) == 6
        err = capsys.readouterr().err
        assert "Traceback" in err and "raise RuntimeError" in err and "rerun with --verbose" not in err, err
    for secret in ("eg-user", "eg-pass", "eg-token"):
        assert secret not in err, err


def test_a_ctrl_c_that_python_reports_as_another_error_is_still_an_interrupt(
        here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Seen in CI: a Ctrl-C while a module defined a dataclass reached the user as "internal error:
    RuntimeError: Error calling __set_name__ ..." and exit 6. Python 3.11 reports an exception raised in a
    class body's __set_name__ as a RuntimeError caused by it (3.12 re-raises it with a note); the chain
    decides, as for every other interrupt: one line, exit 130."""
    import envguard.lint

    class Descriptor:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    def interrupted_while_defining_a_class(_targets: object) -> None:
        type("Manifest", (), {"notes": Descriptor()})

    monkeypatch.setattr(envguard.lint, "lint_paths", interrupted_while_defining_a_class)
    capsys.readouterr()
    assert cli.run(["lint", "ok.yml"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted: nothing was changed (the command only reads; a probe it started was stopped)", err


def test_a_ctrl_c_that_a_commands_own_handler_wrapped_is_still_an_interrupt(
        here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The same Ctrl-C inside a command's broad handler (many catch Exception around a library call and raise
    their own one-line error from it: rattler's install, a download) read "error: rattler failed ..." and
    exit 6; the cause chain decides there too."""
    import envguard.lint
    from envguard.errors import BackendError

    class Descriptor:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    def wrapped_by_a_broad_handler(_targets: object) -> None:
        try:
            type("Manifest", (), {"notes": Descriptor()})
        except Exception as e:  # what such a handler does
            raise BackendError(f"rattler failed to install the locked packages: {e}") from e

    monkeypatch.setattr(envguard.lint, "lint_paths", wrapped_by_a_broad_handler)
    capsys.readouterr()
    assert cli.run(["lint", "ok.yml"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted: nothing was changed (the command only reads; a probe it started was stopped)", err


def test_the_cli_prints_an_errors_fix_once(here: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The fix an error carries as a field is written after its message exactly once, in the usual one line."""
    import envguard.lint
    from envguard.errors import IntegrityError

    def broken(_targets: object) -> None:
        raise IntegrityError("conda-lock.yml: zlib: hash.sha256 is not a sha256", fix="re-lock with `envguard lock`",
                             command="envguard lock")

    monkeypatch.setattr(envguard.lint, "lint_paths", broken)
    capsys.readouterr()
    assert cli.run(["lint", "ok.yml"]) == 3
    err = capsys.readouterr().err
    assert err == "error: conda-lock.yml: zlib: hash.sha256 is not a sha256 (fix: re-lock with `envguard lock`)\n", err


@pytest.mark.parametrize("argv", ["lock -f missing.yml", "lock --check -f ok.yml --lockfile broken.yml",
                                  "lock --check -f ok.yml --lockfile none.yml", "create -p env --lockfile missing.lock",
                                  "create -p env --lockfile lock_hash.yml", "lock --bogus"])
def test_a_real_failure_shows_its_fix_once(here: Path, capsys: pytest.CaptureFixture[str], argv: str) -> None:
    capsys.readouterr()
    assert cli.run(argv.split()) != 0
    err = capsys.readouterr().err
    assert err.count("(fix: ") == 1 and err.rstrip().endswith(")"), err
