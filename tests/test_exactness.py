"""The lock you name is the lock you get: exactness of the commands that take an environment or a lock.

Each test runs the real CLI (a subprocess) on real files: a real environment rattler installed from the
file:// test channel, real lock files, a project directory as a user has one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support import check_envs
from support.channels import HOST_PY
from support.check_envs import envguard

pytestmark = pytest.mark.slow  # every test starts envguard

def run_as_written(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A printed fix, run by a shell as a user pastes it (envguard on PATH, no environment active)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "CONDA_DEFAULT_ENV", "VIRTUAL_ENV")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


SPEC = f"name: exact-t\nchannels: [conda-forge]\ndependencies: [python={HOST_PY}]\n"


def test_check_of_a_directory_that_is_not_an_environment_is_exit_2(tmp_path: Path) -> None:
    # a project directory: environment.yml but no conda-meta, no pyvenv.cfg, no interpreter
    (tmp_path / "environment.yml").write_text(SPEC)
    for cmd in (["check", "--no-smoke"], ["smoke"], ["export", "--output-dir", str(tmp_path / "out")]):
        proc = envguard(*cmd, "-p", ".", cwd=tmp_path)
        assert proc.returncode == 2, (cmd, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    proc = envguard("check", "--no-smoke", "-p", ".", cwd=tmp_path)
    assert "not an environment" in proc.stderr and str(tmp_path) in proc.stderr, proc.stderr


BASE = [f"python {HOST_PY}.*", "pip", "egtool"]


@pytest.fixture(scope="module")
def built(channel_url: str, session_tmp: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A real environment rattler installed from the test channel, the real lock of it, and a project whose
    environment.yml sits beside that lock."""
    root = tmp_path_factory.mktemp("exact")
    prefix, records = check_envs.make_env(channel_url, BASE, root / "env", session_tmp / "exact-pkgs")
    lock = check_envs.write_lock(root / "conda-lock.yml", records)
    (root / "environment.yml").write_text(SPEC)
    return {"root": root, "env": prefix, "lock": lock, "spec": root / "environment.yml"}


def test_every_command_that_takes_a_lock_checks_its_kind_first(built: dict[str, Path], tmp_path: Path) -> None:
    env, lock, spec = built["env"], built["lock"], built["spec"]
    ok = envguard("check", "-p", str(env), "--no-smoke", "--lockfile", str(lock), "--format", "json")
    assert ok.returncode in (0, 1), ok.stderr  # the real lock is read as one
    report = tmp_path / "node1.json"
    report.write_text(ok.stdout)
    for args in (["check", "-p", str(env), "--no-smoke", "--lockfile", str(spec)],
                 ["fleet", str(report), "--lockfile", str(spec)],
                 ["lock", "--check", "-f", str(spec), "--lockfile", str(spec)],
                 ["create", "-p", str(tmp_path / "new"), "--lockfile", str(spec)]):
        proc = envguard(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert f"{spec}: --lockfile: an environment file" in proc.stderr, (args, proc.stderr)
        assert f"envguard lock -f {spec}`" in proc.stderr and f"--lockfile {spec}" not in proc.stderr, proc.stderr
    assert not (tmp_path / "new").exists()
    proc = envguard("check", "-p", str(env), "--no-smoke", "--lockfile", str(report))
    assert proc.returncode == 2 and "an `envguard check` report, not a lock" in proc.stderr, proc.stderr
    # a file of no kind at all: fleet has no --kind flag, so it must not suggest one
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    proc = envguard("fleet", str(report), "--lockfile", str(passwd))
    assert proc.returncode == 2 and "not a lock file" in proc.stderr and "--kind" not in proc.stderr, proc.stderr
    # and the other way round: a lock given where an environment file is read
    for args in (["lock", "--check", "-f", str(lock)], ["create", "-p", str(tmp_path / "new"), "-f", str(lock)]):
        proc = envguard(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert f"{lock}: -f/--file: a lock (conda-lock.yml), not an environment file" in proc.stderr, proc.stderr


def test_an_activated_virtualenv_is_picked_after_p_n_and_conda_never_envguards_own(
        built: dict[str, Path], tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    here = tmp_path / "elsewhere"
    here.mkdir()
    proc = envguard("check", "--no-smoke", cwd=here, env={"VIRTUAL_ENV": str(venv)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"envguard check {venv} · the activated virtualenv (VIRTUAL_ENV) · venv"), proc.stdout
    # an active conda environment comes first, -p before both
    proc = envguard("check", "--no-smoke", cwd=here, env={"VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(built["env"])})
    assert proc.stdout.startswith(f"envguard check {built['env']} · the active conda environment"), proc.stdout
    proc = envguard("check", "--no-smoke", "-p", str(built["env"]), cwd=here, env={"VIRTUAL_ENV": str(venv)})
    assert proc.stdout.startswith(f"envguard check {built['env']} · given with -p"), proc.stdout
    # the virtualenv envguard itself runs in (a tool's, a git hook's) is never picked; the error says so
    proc = envguard("check", "--no-smoke", cwd=here, env={"VIRTUAL_ENV": sys.prefix})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "VIRTUAL_ENV is envguard's own" in proc.stderr and "or virtualenv" in proc.stderr, proc.stderr
    proc = envguard("check", "--no-smoke", cwd=here)
    assert proc.returncode == 2 and "no active conda environment (CONDA_PREFIX) or virtualenv (VIRTUAL_ENV)" \
        in proc.stderr, proc.stderr


def test_the_project_is_found_upward_from_a_subdirectory_up_to_the_repository_root(
        built: dict[str, Path], tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    proj = outer / "proj"
    (proj / "src" / "pkg").mkdir(parents=True)
    (outer / "environment.yml").write_text(SPEC)  # above the repository root: some other project's
    (proj / ".git").mkdir()
    sub = proj / "src" / "pkg"
    # no environment.yml in the repository: the one above its root is not looked at
    proc = envguard("lint", cwd=sub)
    assert proc.returncode == 2 and "no environment.yml" in proc.stderr, proc.stdout + proc.stderr
    (proj / "environment.yml").write_text(SPEC.replace("exact-t", "exact-sub") + "platforms: [linux-64]\n")
    (proj / "conda-lock.yml").write_bytes(built["lock"].read_bytes())  # not made from this spec: stale
    proc = envguard("lint", cwd=sub)
    assert proc.returncode in (0, 1) and "envguard init" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    proc = envguard("lock", "--check", cwd=sub)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # stale, not "no environment.yml" (2)
    assert "../../environment.yml" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(proj / ".venv")], check=True, timeout=120)
    proc = envguard("check", "-p", str(proj / ".venv"), "--no-smoke", cwd=sub)  # the project's env, its lock
    assert proc.stdout.splitlines()[0].endswith(f"lock {proj / 'conda-lock.yml'} (the project's lock)"), proc.stdout
    # the project's environment is the one its spec names, from a subdirectory too
    proc = envguard("check", "--no-smoke", cwd=sub)
    assert proc.returncode == 2 and f"{proj / 'environment.yml'} names 'exact-sub'" in proc.stderr, proc.stderr


def test_which_lock_judges_an_environment_is_decided_once_and_shown_first(
        built: dict[str, Path], tmp_path: Path) -> None:
    project = tmp_path / "unrelated"
    project.mkdir()
    (project / "environment.yml").write_text(SPEC)
    (project / "conda-lock.yml").write_bytes(built["lock"].read_bytes())
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # a healthy venv elsewhere, checked from inside an unrelated project: that project's lock is not its lock
    proc = envguard("check", "-p", str(venv), "--no-smoke", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0].endswith("no lock"), proc.stdout
    # an environment inside the project's directory is the project's: its lock applies, and the line says why
    local = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(local)], check=True, timeout=120)
    proc = envguard("check", "-p", str(local), "--no-smoke", cwd=project)
    first = proc.stdout.splitlines()[0]
    assert first.endswith(f"lock {project / 'conda-lock.yml'} (the project's lock)"), proc.stdout
    proc = envguard("check", "-p", str(venv), "--no-smoke", "--lockfile", str(built["lock"]), cwd=project)
    assert proc.stdout.splitlines()[0].endswith(f"lock {built['lock']} (given with --lockfile)"), proc.stdout
    # an environment envguard built, checked from an unrelated project: not that project's lock but the one it
    # was built from, recorded in its fingerprint (a relative --lockfile is recorded as an absolute path)
    keep = tmp_path / "kept"
    keep.mkdir()
    theirs = keep / "their-lock.yml"
    theirs.write_bytes(built["lock"].read_bytes())
    made = tmp_path / "made"
    proc = envguard("create", "-p", str(made), "--lockfile", "kept/their-lock.yml", "--no-check", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = envguard("check", "-p", str(made), "--no-smoke", "--format", "json", cwd=project)
    assert proc.returncode == 0 and json.loads(proc.stdout)["lockfile"] == str(theirs), proc.stdout
    proc = envguard("check", "-p", str(made), "--no-smoke", cwd=project)
    assert proc.stdout.splitlines()[0].endswith(f"lock {theirs} (the lock envguard built it from)"), proc.stdout
    # that lock changed since: still that lock (not the project's), and a finding says so
    theirs.write_text(theirs.read_text() + "# edited\n")
    proc = envguard("check", "-p", str(made), "--no-smoke", "--format", "json", cwd=project)
    rep = json.loads(proc.stdout)
    assert rep["lockfile"] == str(theirs) and any(f["code"] == "EG517" and "has changed since" in f["message"]
                                                  for f in rep["findings"]), proc.stdout
    # the fix it prints, run as written, records the lock as it is now
    [fix] = [f["fix"] for f in rep["findings"] if f["code"] == "EG517"]
    [command] = re.findall(r"`(envguard [^`]+)`", fix)
    ran = run_as_written(command, project)
    assert ran.returncode == 0 and ran.stdout.startswith("unchanged"), ran.stdout + ran.stderr
    proc = envguard("check", "-p", str(made), "--no-smoke", cwd=project)
    assert proc.returncode == 0 and "EG517" not in proc.stdout, proc.stdout
    # gone: no lock at all (never the project's in its place), and a warning says which one is gone
    theirs.unlink()
    proc = envguard("check", "-p", str(made), "--no-smoke", cwd=project)
    first = proc.stdout.splitlines()[0]
    assert first.endswith(f"no lock (the lock envguard built it from, {theirs}, is gone)"), proc.stdout
    assert proc.returncode == 0 and "warning: EG517" in proc.stdout and "is gone" in proc.stdout, proc.stdout


def _small_channel(channel_factory) -> Path:
    return channel_factory([
        {"name": "egsmall-a", "version": "1.0", "noarch": "generic", "files": {"share/egsmall/a.txt": "a\n"}},
        {"name": "egsmall-b", "version": "1.0", "noarch": "generic", "depends": ["egsmall-a"],
         "files": {"share/egsmall/b.txt": "b\n"}},
        {"name": "egtamper", "version": "1.0", "noarch": "generic", "files": {"share/egtamper/data.txt": "x\n"}},
    ], name="exact-small")


def test_a_named_lock_is_installed_exactly_as_written_or_refused(channel_factory, tmp_path: Path) -> None:
    from support.channels import channel_url
    from support.create_fixtures import make_lock, write_env

    url = channel_url(_small_channel(channel_factory))
    colleague = make_lock(write_env(tmp_path / "colleague", url, ["egsmall-b"]))
    proj_spec = write_env(tmp_path / "proj", url, ["egsmall-b", "egtamper"])
    other = tmp_path / "proj" / "other-lock.yml"  # a colleague's lock saved in a project whose spec differs
    other.write_bytes(colleague.read_bytes())
    written = other.read_bytes()
    proc = envguard("create", "-p", str(tmp_path / "env"), "--lockfile", str(other), "--no-check",
                    cwd=tmp_path / "proj")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "--frozen" in proc.stderr and f"envguard lock -f {proj_spec} --lockfile {other}" in proc.stderr, proc.stderr
    assert "--platform" not in proc.stderr, proc.stderr  # a re-lock on purpose keeps the platforms it covers
    assert other.read_bytes() == written and not (tmp_path / "env").exists()
    proc = envguard("create", "-p", str(tmp_path / "env"), "--lockfile", str(other), "--frozen", "--no-check",
                    cwd=tmp_path / "proj")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "env" / "share" / "egsmall" / "b.txt").is_file()
    assert not (tmp_path / "env" / "share" / "egtamper").exists() and other.read_bytes() == written
    # the project's own lock, tampered with and then made stale: a re-lock does not repair it (exit 3), and it
    # is left as it was
    own = make_lock(proj_spec)
    text = own.read_text()
    import re

    sha = re.findall(r"sha256: ([0-9a-f]{64})", text)[0]
    own.write_text(text.replace(sha, "f" * 64))
    tampered = own.read_bytes()
    proj_spec.write_text(proj_spec.read_text().replace("  - egtamper\n", "  - egtamper\n  - egsmall-a\n"))
    proc = envguard("create", "-p", str(tmp_path / "env2"), "--no-check", cwd=tmp_path / "proj")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "sha256 mismatch" in proc.stderr and "was left as it was, not re-locked" in proc.stderr, proc.stderr
    assert own.read_bytes() == tampered and not (tmp_path / "env2").exists()
    # exit 3 in every path, decided from the lock's own hashes before any re-lock: named with --lockfile (which
    # is never re-locked, and would be exit 4 as stale), with --locked, with --frozen
    for extra in (["--lockfile", "conda-lock.yml"], ["--locked"], ["--frozen"]):
        proc = envguard("create", "-p", str(tmp_path / "env2"), "--no-check", *extra, cwd=tmp_path / "proj")
        assert proc.returncode == 3, (extra, proc.stdout + proc.stderr)
        assert own.read_bytes() == tampered and not (tmp_path / "env2").exists()
    # untampered, stale, and named with --lockfile although it is the spec's own default lock: refused (exit 4)
    # and left as it is, never re-locked
    own.write_bytes(tampered.replace(b"f" * 64, sha.encode()))
    stale = own.read_bytes()
    proc = envguard("create", "-p", str(tmp_path / "env2"), "--no-check", "--lockfile", "conda-lock.yml",
                    cwd=tmp_path / "proj")
    assert proc.returncode == 4 and "named with --lockfile" in proc.stderr and "--frozen" in proc.stderr, proc.stderr
    assert "`envguard lock -f environment.yml --lockfile conda-lock.yml`" in proc.stderr, proc.stderr
    assert own.read_bytes() == stale
    # untampered and stale: the default lock of the spec being read is re-locked, and the note says which file
    # (from a subdirectory of the project too)
    (tmp_path / "proj" / ".git").mkdir()
    (tmp_path / "proj" / "src").mkdir()
    proc = envguard("create", "-p", str(tmp_path / "env2"), "--no-check", cwd=tmp_path / "proj" / "src")
    assert proc.returncode == 0 and f"{own} is stale" in proc.stderr and "re-locked it first" in proc.stderr, \
        proc.stdout + proc.stderr


def test_init_and_lint_apply_one_python_policy(tmp_path: Path) -> None:
    # a newer Python the channel builds torch for: init writes it, with the note lint gives the file
    made = envguard("init", "--python", "3.12", "--cuda", "cpu", cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    linted = envguard("lint", cwd=tmp_path)
    assert linted.returncode == 0, linted.stdout
    warning = "Python 3.12: the file is valid; envguard's templates and compatibility data are written for Python 3.10"
    assert warning in linted.stdout and warning in made.stdout + made.stderr, (made.stdout, made.stderr)
    # an older one is an error to lint, and init refuses it, saying why
    (tmp_path / "environment.yml").write_text((tmp_path / "environment.yml").read_text().replace("3.12", "3.9"))
    linted = envguard("lint", cwd=tmp_path)
    assert linted.returncode == 1 and "error: EG102" in linted.stdout, linted.stdout
    refused = envguard("init", "--python", "3.9", "-o", "-", cwd=tmp_path)
    assert refused.returncode == 2 and "Python 3.9 is not supported (envguard supports 3.10, 3.11)" in refused.stderr


def test_diff_of_two_environment_files_reports_channels_platforms_and_name(tmp_path: Path) -> None:
    a = tmp_path / "a.yml"
    a.write_text(f"name: exact-t\nchannels:\n  - conda-forge\nplatforms: [linux-64, osx-arm64]\n"
                 f"dependencies:\n  - python={HOST_PY}\n")
    b = tmp_path / "b.yml"
    b.write_text(f"name: exact-u\nchannels:\n  - pytorch\n  - defaults\n  - conda-forge\nplatforms: [linux-64]\n"
                 f"dependencies:\n  - python={HOST_PY}\n")
    proc = envguard("diff", str(a), str(b))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # not "no differences", exit 0
    out = proc.stdout
    assert "channel pytorch added in B, ahead of conda-forge" in out and "shadows conda-forge" in out, out
    assert "platform osx-arm64 dropped in B" in out and "name changed: A 'exact-t', B 'exact-u'" in out, out
    c = tmp_path / "c.yml"  # the same channels, another order: priority changed
    c.write_text(b.read_text().replace("  - pytorch\n  - defaults\n  - conda-forge\n",
                                       "  - conda-forge\n  - pytorch\n  - defaults\n"))
    proc = envguard("diff", str(b), str(c), "--format", "json")
    assert proc.returncode == 1 and "channel order (priority) changed" in proc.stdout, proc.stdout
    assert envguard("diff", str(c), str(c)).returncode == 0


def test_diff_of_a_spec_and_a_live_prefix_does_not_call_it_the_lock(built: dict[str, Path]) -> None:
    proc = envguard("diff", str(built["spec"]), str(built["env"]))
    assert "against the environment" in proc.stdout and "against the lock" not in proc.stdout, proc.stdout
    proc = envguard("diff", str(built["spec"]), str(built["lock"]))
    assert "against the lock" in proc.stdout, proc.stdout


def _command_of(call: Callable[[], object]) -> tuple[int, str]:
    """The exit code and the ready-to-run fix (EnvguardError.command) of the error ``call`` raises."""
    from envguard.errors import EnvguardError

    with pytest.raises(EnvguardError) as raised:
        call()
    assert raised.value.command, raised.value.message  # an exactness error carries its fix as data
    return int(raised.value.exit_code), raised.value.command


def test_every_fix_an_exactness_error_prints_runs_as_written(channel_factory, built: dict[str, Path],
                                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fix each of the main exactness errors carries (its ``command``) is run by a shell as written, and
    moves the user forward: a stale named lock, the spec's own lock spelled out, a wrong kind of file; and an
    environment checked from an unrelated project gets no fix that exits 2."""
    from support.channels import channel_url
    from support.create_fixtures import make_lock, write_env

    from envguard.check import CheckOptions, run_check
    from envguard.create import CreateOptions, create

    url = channel_url(_small_channel(channel_factory))
    proj = tmp_path / "proj"
    colleague = make_lock(write_env(tmp_path / "colleague", url, ["egsmall-b"]))
    spec = write_env(proj, url, ["egsmall-b", "egtamper"])
    other = proj / "other-lock.yml"
    other.write_bytes(colleague.read_bytes())
    monkeypatch.chdir(proj)  # relative paths as a user types them, here as on the command line
    # 1. a colleague's lock, stale against this project's spec: the fix installs it as it is
    code, command = _command_of(lambda: create(CreateOptions(prefix=tmp_path / "env", lockfile="other-lock.yml",
                                                             cwd=proj)))
    assert code == 4 and command.endswith("--frozen"), command
    ran = run_as_written(command + " --no-check", proj)
    assert ran.returncode == 0 and (tmp_path / "env" / "share" / "egsmall" / "b.txt").is_file(), ran.stderr
    assert other.read_bytes() == colleague.read_bytes()
    # 2. the spec's own lock spelled out with --lockfile, stale: refused too; its fix re-locks it on purpose
    # (for the platforms it covers), after which the same create goes through
    own = make_lock(spec)
    spec.write_text(spec.read_text().replace("  - egtamper\n", "  - egtamper\n  - egsmall-a\n"))
    before = own.read_bytes()
    again = CreateOptions(prefix=tmp_path / "env2", lockfile="conda-lock.yml", cwd=proj)
    code, command = _command_of(lambda: create(again))
    assert code == 4 and command.startswith("envguard lock -f ") and own.read_bytes() == before, command
    ran = run_as_written(command, proj)
    assert ran.returncode == 0 and own.read_bytes() != before, ran.stdout + ran.stderr
    assert create(again).status == "created" and (tmp_path / "env2" / "share" / "egtamper").is_dir()
    # 3. an environment file where a lock is read: the fix locks it, and the lock it writes is then read
    code, command = _command_of(lambda: run_check(CheckOptions(prefix=built["env"], lockfile=spec, smoke=False,
                                                               cwd=tmp_path)))
    assert code == 2 and command == f"envguard lock -f {spec}", command
    own.unlink()
    ran = run_as_written(command, tmp_path)
    assert ran.returncode == 0 and own.is_file(), ran.stdout + ran.stderr
    assert run_check(CheckOptions(prefix=tmp_path / "env2", lockfile=own, smoke=False, cwd=tmp_path)).lock_file
    # 4. a virtualenv checked from inside an unrelated project: that project's lock is not applied, so no
    # finding advises `create -p VENV --lockfile ...` (which exits 2 for a virtualenv); what is advised runs
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    proc = envguard("check", "-p", str(venv), "--no-smoke", "--format", "json", cwd=proj)
    assert proc.returncode == 0 and json.loads(proc.stdout)["lockfile"] is None, proc.stdout
    for f in json.loads(proc.stdout)["findings"]:
        for cmd in re.findall(r"`(envguard [^`]+)`", f.get("fix") or ""):
            ran = run_as_written(cmd, proj)
            assert ran.returncode != 2, (f["code"], cmd, ran.stdout + ran.stderr)
