"""`envguard run`, `shell` and `shell-hook` end to end: a real lock of real packages (one whose
``etc/conda/activate.d`` script exports a variable and whose ``deactivate.d`` script unsets it, one with
``etc/conda/env_vars.d``), built by run itself, then commands run in it by the real CLI: what they see
(the variables, CONDA_PREFIX, PATH), their exit code and signals passed through ``exec``, stdout theirs
alone, shell-hook's script evaluated by real shells, shell driven through a pseudo-terminal, a stale
environment synced (refused with --locked)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import ENVGUARD, envguard_run, make_lock, write_env

DUMP = "import json, os; print(json.dumps(dict(os.environ)))"
PY = sys.executable  # any interpreter: the environment itself holds none, PATH still finds this one

_PACKAGES = [
    {"name": "egact", "version": "1.0", "noarch": "generic", "files": {
        "etc/conda/activate.d/egact.sh": "export EGACT_VAR=on\n",
        "etc/conda/deactivate.d/egact.sh": "unset EGACT_VAR\nexport EGACT_DEACTIVATED=yes\n"}},
    {"name": "egvars", "version": "1.0", "noarch": "generic", "files": {
        "etc/conda/env_vars.d/egvars.json": json.dumps({"EGVARS_DATA": "a data dir"})}},
    {"name": "egextra", "version": "1.0", "noarch": "generic", "files": {
        "etc/conda/env_vars.d/egextra.json": json.dumps({"EGEXTRA": "1"})}},
]


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("run-channel")
    channels.make_channel(root, _PACKAGES, subdirs=("noarch", channels.host_platform()))
    return channels.channel_url(root)


def _project(work: Path, channel: str, deps: tuple[str, ...] = ("egact", "egvars")) -> Path:
    spec = write_env(work, channel, list(deps))
    make_lock(spec)
    return spec


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return envguard_run(*args, cwd=cwd, env=env, timeout=timeout)


def _dump(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # fails unless stdout is the command's output alone


@pytest.mark.slow
def test_run_builds_the_missing_environment_then_runs_activated(tmp_path: Path, channel: str) -> None:
    work, env = tmp_path / "work", tmp_path / "env"
    _project(work, channel)
    first = _run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)
    seen = _dump(first)
    assert "does not exist: creating it" in first.stderr and "created" in first.stderr
    assert seen["EGACT_VAR"] == "on"  # activate.d ran
    assert seen["EGVARS_DATA"] == "a data dir"  # env_vars.d applied
    assert seen["CONDA_PREFIX"] == str(env) and seen["CONDA_DEFAULT_ENV"] == str(env)
    assert seen["PATH"].split(os.pathsep)[0] == str(env / "bin")
    again = _run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)
    assert _dump(again)["EGACT_VAR"] == "on"
    assert again.stderr == ""  # nothing was done, nothing said

    # exit codes are the command's; a command that is not there is the shell's 127
    assert _run("run", "-p", str(env), "--", PY, "-c", "raise SystemExit(7)", cwd=work).returncode == 7
    missing = _run("run", "-p", str(env), "--", "no-such-command-eg", cwd=work)
    assert missing.returncode == 127 and "command not found" in missing.stderr and missing.stdout == ""


@pytest.mark.slow
def test_signals_reach_the_command_and_its_status_is_run_s(tmp_path: Path, channel: str) -> None:
    work, env = tmp_path / "work", tmp_path / "env"
    _project(work, channel)
    assert _run("create", "-p", str(env), "--no-check", cwd=work).returncode == 0
    marks = tmp_path / "marks"
    child = tmp_path / "child.py"
    child.write_text(
        "import os, signal, sys, time\n"
        f"marks = {str(marks)!r}\n"
        "def on_term(signum, frame):\n"
        "    open(marks + '.sig', 'w').write(signal.Signals(signum).name)\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # and die of it, as an unhandled SIGTERM would\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "open(marks + '.tmp', 'w').write(str(os.getpid()))\n"
        "os.replace(marks + '.tmp', marks + '.pid')\n"
        "time.sleep(120)\n")
    proc = subprocess.Popen([*ENVGUARD, "run", "-p", str(env), "--", PY, str(child)], cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not Path(f"{marks}.pid").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        # exec: the command is the process envguard was; nothing stands between the sender and it
        assert int(Path(f"{marks}.pid").read_text()) == proc.pid
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert Path(f"{marks}.sig").read_text() == "SIGTERM"
    assert proc.returncode == -signal.SIGTERM, err
    # as a shell (a batch script, a scheduler's) sees it
    line = (f"{' '.join(ENVGUARD)} run -p {env} -- {PY} -c 'import os, signal; os.kill(os.getpid(), "
            "signal.SIGTERM)'; echo status=$?")
    shell = subprocess.run(["bash", "-c", line], capture_output=True, text=True, cwd=work, timeout=120)
    assert shell.stdout.strip() == "status=143", shell.stderr


def _hook_env(shell: str, env: Path, work: Path, extra: str = "") -> dict[str, str]:
    hook = f"{' '.join(ENVGUARD)} shell-hook -p {env} --shell {shell}"
    if shell == "fish":
        line = f"{hook} | source; {extra}{PY} -c '{DUMP}'"
    else:
        line = f'eval "$({hook})"; {extra}{PY} -c \'{DUMP}\''
    proc = subprocess.run([shell, "-c", line], capture_output=True, text=True, cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_hook_evaluated_by_a_real_shell_activates_the_same(tmp_path: Path, channel: str, shell: str) -> None:
    if shutil.which(shell) is None:
        if shell == "bash" or (os.environ.get("CI") == "true" and _ci_installs(shell)):
            pytest.fail(f"{shell} is not installed")
        pytest.skip(f"{shell} is not installed")
    work, env = tmp_path / "work", tmp_path / "env"
    _project(work, channel)
    assert _run("create", "-p", str(env), "--no-check", cwd=work).returncode == 0
    ran = _dump(_run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work))
    hooked = _hook_env(shell, env, work)
    wanted = ["CONDA_PREFIX", "CONDA_DEFAULT_ENV", "EGVARS_DATA"] + (["EGACT_VAR"] if shell != "fish" else [])
    assert {k: hooked.get(k) for k in wanted} == {k: ran[k] for k in wanted}
    assert hooked["PATH"].split(os.pathsep)[0] == str(env / "bin")
    if shell == "fish":  # fish runs the activate.d scripts written for it (*.fish): none here
        return
    # run in the same environment from there: reactivated (deactivated first), nothing twice on PATH
    again = _hook_env(shell, env, work, extra=f"{' '.join(ENVGUARD)} run -p {env} -- ")
    assert again["PATH"].split(os.pathsep).count(str(env / "bin")) == 1 and again["EGACT_VAR"] == "on"
    # activating another environment from there deactivates this one: its deactivate.d script runs
    other = tmp_path / "other"
    (other / "conda-meta").mkdir(parents=True)
    after = _hook_env(shell, env, work, extra=f"{' '.join(ENVGUARD)} run --no-sync -p {other} -- ")
    assert after["CONDA_PREFIX"] == str(other)
    assert "EGACT_VAR" not in after and after.get("EGACT_DEACTIVATED") == "yes"
    assert "EGVARS_DATA" not in after
    assert str(env / "bin") not in after["PATH"].split(os.pathsep)


def _ci_installs(shell: str) -> bool:
    ci = Path(__file__).resolve().parents[1] / ".ci" / "run"
    return ci.is_file() and shell in ci.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_through_a_pseudo_terminal_runs_a_command_and_exits(tmp_path: Path, channel: str, shell: str) -> None:
    import pty

    path = shutil.which(shell)
    if path is None:
        if shell == "bash" or (os.environ.get("CI") == "true" and _ci_installs(shell)):
            pytest.fail(f"{shell} is not installed")
        pytest.skip(f"{shell} is not installed")
    work, env, home = tmp_path / "work", tmp_path / "env", tmp_path / "home"
    home.mkdir()
    _project(work, channel)
    assert _run("create", "-p", str(env), "--no-check", cwd=work).returncode == 0
    environ = {**os.environ, "SHELL": path, "HOME": str(home), "PS1": "$ ", "TERM": "dumb"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: envguard shell on the pseudo-terminal
        os.chdir(work)
        os.execve(sys.executable, [*ENVGUARD, "shell", "-p", str(env)], environ)
    out = b""
    try:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))  # no line cut short
        os.write(fd, b"echo \"MARK:$EGACT_VAR:$CONDA_PREFIX:END\"; echo \"PROMPT:$PS1\"\nexit 3\n")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the shell has exited
                break
            if not chunk:
                break
            out += chunk
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    text = out.decode(errors="replace")
    # fish runs the activate.d scripts written for fish (*.fish): this package has none
    assert f"MARK:{'' if shell == 'fish' else 'on'}:{env}:END" in text, text
    assert ("(env) " if shell == "fish" else "PROMPT:(env) ") in text, text  # the prompt marker
    assert os.waitstatus_to_exitcode(status) == 3, text  # `exit` leaves it, with its status


@pytest.mark.slow
def test_a_stale_environment_is_synced_and_refused_with_locked(tmp_path: Path, channel: str) -> None:
    work, env = tmp_path / "work", tmp_path / "env"
    spec = _project(work, channel)
    assert _run("create", "-p", str(env), "--no-check", cwd=work).returncode == 0
    spec.write_text(spec.read_text().replace("  - egvars\n", "  - egvars\n  - egextra\n"))
    lock_before = (work / "conda-lock.yml").read_bytes()

    refused = _run("run", "--locked", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)
    assert refused.returncode == 4 and refused.stdout == "", refused.stderr
    assert "--locked" in refused.stderr
    assert (work / "conda-lock.yml").read_bytes() == lock_before

    as_is = _dump(_run("run", "--no-sync", "-p", str(env), "--", PY, "-c", DUMP, cwd=work))
    assert "EGEXTRA" not in as_is
    frozen = _run("run", "--frozen", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)  # the lock as it is: in sync
    assert "EGEXTRA" not in _dump(frozen) and frozen.stderr == ""
    assert (work / "conda-lock.yml").read_bytes() == lock_before

    synced = _run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)
    assert _dump(synced)["EGEXTRA"] == "1"
    assert "re-locking" in synced.stderr and "syncing it" in synced.stderr
    assert _run("run", "--locked", "-p", str(env), "--", PY, "-c", DUMP, cwd=work).stderr == ""

    # drift: a package record removed by hand is put back
    record = next((env / "conda-meta").glob("egextra-*.json"))
    record.unlink()
    drifted = _run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)
    assert _dump(drifted)["EGEXTRA"] == "1"
    assert "added or removed" in drifted.stderr and record.is_file()

    # a pip install over it: site-packages written after the fingerprint; create then finds the dist
    dist = env / "lib" / "python3.11" / "site-packages" / "egpip-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: egpip\nVersion: 1.0\n")
    (dist / "INSTALLER").write_text("pip\n")
    os.utime(dist.parent, (time.time() + 5, time.time() + 5))
    pipped = _run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)
    assert _dump(pipped)["EGEXTRA"] == "1"
    assert "site-packages changed" in pipped.stderr and "pip egpip 1.0 added" in pipped.stderr, pipped.stderr
    assert not dist.exists()  # rebuilt: exactly the lock again


def test_run_options_exclude_each_other_and_the_command_keeps_its_own(no_exec: None) -> None:
    from envguard.cli import run
    from envguard.cli.entry import verbose_anywhere

    assert run(["run", "--locked", "--no-sync", "--", "true"]) == 2
    assert run(["shell-hook", "--shell", "tcsh"]) == 2
    # -v after the command's name belongs to the command (python -v), not to envguard
    assert verbose_anywhere(["run", "-p", "e", "python", "-v", "x.py"]) == ["run", "-p", "e", "python", "-v", "x.py"]
    assert verbose_anywhere(["check", "-v"]) == ["--verbose", "check"]


@pytest.mark.slow
def test_run_without_a_prefix_builds_and_uses_the_environment_environment_yml_names(tmp_path: Path,
                                                                                   channel: str) -> None:
    work = tmp_path / "work"
    _project(work, channel)  # name: t
    envs = Path(os.environ["ENVGUARD_ENVS_DIR"])
    shutil.rmtree(envs / "t", ignore_errors=True)
    first = _run("run", PY, "-c", DUMP, cwd=work)
    seen = _dump(first)
    assert seen["CONDA_PREFIX"] == str(envs / "t") and seen["CONDA_DEFAULT_ENV"] == "t"
    assert seen["CONDA_PROMPT_MODIFIER"] == "(t) " and seen["EGACT_VAR"] == "on"
    assert "creating it" in first.stderr
    shutil.rmtree(envs / "t")


def _bare_prefix(root: Path, scripts: dict[str, str]) -> Path:
    """A directory that activates like an environment: conda-meta/ and activate.d scripts, no packages."""
    (root / "conda-meta").mkdir(parents=True)
    act = root / "etc" / "conda" / "activate.d"
    act.mkdir(parents=True)
    for name, text in scripts.items():
        (act / name).write_text(text)
    return root


@pytest.fixture
def no_exec(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs must never get as far as replacing the test process with the command."""
    def refuse(*args: object) -> None:
        raise AssertionError(f"exec reached: {args[:2]}")

    monkeypatch.setattr(os, "execve", refuse)


def test_an_activate_script_that_ends_the_shell_stops_run_before_the_command(tmp_path: Path, no_exec: None) -> None:
    from envguard.cli import run

    prefix = _bare_prefix(tmp_path / "env", {"a.sh": "export A=1\n", "b.sh": "exit 3\n"})
    marker = tmp_path / "ran"
    assert run(["run", "--no-sync", "-p", str(prefix), "--", "touch", str(marker)]) == 6
    assert not marker.exists()


def test_a_prefix_path_the_scripts_cannot_carry_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           no_exec: None) -> None:
    from envguard.cli import run

    prefix = _bare_prefix(tmp_path / "a$HOME", {})
    assert run(["shell-hook", "--no-sync", "-p", str(prefix)]) == 2
    assert "$" in capsys.readouterr().err


@pytest.mark.slow
def test_what_an_activate_script_prints_goes_to_stderr(tmp_path: Path) -> None:
    prefix = _bare_prefix(tmp_path / "env", {"talk.sh": "echo hello from activate.d\nexport TALKED=1\n"})
    proc = envguard_run("run", "--no-sync", "-p", str(prefix), "--", PY, "-c", "import os; print(os.environ['TALKED'])",
                        cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "1\n" and "hello from activate.d" in proc.stderr


@pytest.mark.slow
def test_the_dockerfile_entrypoint_runs_the_command_activated_as_written(tmp_path: Path, channel: str) -> None:
    """examples/docker/Dockerfile's ENTRYPOINT, run as docker runs its exec form (no shell), with /opt/env
    being a real environment and a command given as `docker run IMAGE COMMAND` gives it."""
    text = (Path(__file__).resolve().parents[1] / "examples" / "docker" / "Dockerfile").read_text()
    entry = next(json.loads(ln[len("ENTRYPOINT"):]) for ln in text.splitlines() if ln.startswith("ENTRYPOINT "))
    work, env = tmp_path / "work", tmp_path / "env"
    _project(work, channel)
    assert _run("create", "-p", str(env), "--no-check", cwd=work).returncode == 0
    assert entry[0] == "envguard"
    argv = [*ENVGUARD, *[str(env) if a == "/opt/env" else a for a in entry[1:]], PY, "-c", DUMP]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=work, timeout=300)
    seen = _dump(proc)
    assert seen["CONDA_PREFIX"] == str(env) and seen["EGACT_VAR"] == "on" and proc.stderr == ""


def test_with_nothing_to_run_in_run_names_the_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str], no_exec: None) -> None:
    from envguard.cli import run

    monkeypatch.chdir(tmp_path)
    for var in ("CONDA_PREFIX", "VIRTUAL_ENV"):
        monkeypatch.delenv(var, raising=False)
    assert run(["run", "--", "true"]) == 2
    assert "-p/--prefix" in capsys.readouterr().err
    # a new path and no environment.yml to build it from
    assert run(["run", "-p", str(tmp_path / "new"), "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "no environment.yml here" in err and "envguard create -p" in err
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the kernel's SigIgn mask (Linux)")
def test_the_command_gets_the_signal_dispositions_a_shell_would_give_it(tmp_path: Path) -> None:
    """SIGPIPE back at its default (Python ignores it for itself, and an ignored signal stays ignored across
    exec), SIGHUP still ignored under nohup and SIGINT for a script's `&` (envguard handles SIGINT itself
    meanwhile): the command's own mask, read by grep (no Python in between)."""
    prefix = _bare_prefix(tmp_path / "env", {})
    out = tmp_path / "mask"
    # `&` in a script: bash starts envguard with SIGINT ignored, and so must the command be
    line = (f"{' '.join(ENVGUARD)} run --no-sync -p {prefix} -- grep SigIgn /proc/self/status > {out} & wait")
    proc = subprocess.run(["nohup", "bash", "-c", line], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ignored = int(out.read_text().split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1)), hex(ignored)
    assert ignored & (1 << (signal.SIGHUP - 1)), hex(ignored)
    assert ignored & (1 << (signal.SIGINT - 1)), hex(ignored)
