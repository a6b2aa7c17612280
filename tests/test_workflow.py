"""The workflow as a newcomer meets it: README's workflow section run as written against a local
channel, and one test per place where it used to break.

Every project here is real: an environment.yml pointing at the standard test channel, `envguard lock`,
`envguard create` (rattler), `pip install` with the environment's own pip, and the real CLI.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import channels
from support.channels import HOST_PY
from support.create_fixtures import envguard_run

from envguard import cli, render

pytestmark = pytest.mark.slow  # README's workflow end to end with the real CLI

REPO = Path(__file__).resolve().parent.parent
ENVGUARD_BIN = Path(sys.executable).parent


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "CONDA_DEFAULT_ENV", "VIRTUAL_ENV")}
    env["PATH"] = f"{ENVGUARD_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ENVGUARD_NVIDIA_SMI"] = env.get("ENVGUARD_NVIDIA_SMI", "")  # no driver query reaches the host
    env.update(extra)
    return env


def sh(command: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=_env(**extra))


def project(tmp_path: Path, channel_url: str, deps: tuple[str, ...] = ("pytorch=2.13.*=cpu*", "numpy", "pip"),
            name: str | None = None, cuda: str | None = None) -> tuple[Path, str]:
    """A project directory with an environment.yml naming a unique environment, locked."""
    proj = tmp_path / "proj"
    proj.mkdir(parents=True)
    name = name or f"wf-{tmp_path.name}"[:50]
    lines = [f"name: {name}", "channels:", f"  - {channel_url}", "dependencies:", f"  - python={HOST_PY}"]
    lines += [f"  - {d}" for d in deps] + ["platforms:", f"  - {channels.host_platform()}"]
    (proj / "environment.yml").write_text("\n".join(lines) + "\n")
    from envguard.lock import lock

    lock([proj / "environment.yml"], lockfile=proj / "conda-lock.yml", cuda=cuda)
    return proj, name


def envs_dir() -> Path:
    return Path(os.environ["ENVGUARD_ENVS_DIR"])


def pip(prefix: Path, *args: str) -> None:
    proc = subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "-q", *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


# --------------------------------------------------------------------------- README, as written


def readme_block(after: str) -> list[str]:
    """The lines of README's first bash block after the text ``after``, as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text[text.index(after):], re.S)
    assert block, f"README.md has no bash block after {after!r}"
    return [ln for ln in block.group(1).splitlines() if ln.strip()]


def readme_workflow() -> list[str]:
    return readme_block("## The workflow\n")


def test_readme_workflow_runs_as_written(tmp_path: Path, standard_channel) -> None:
    """Every line of README's workflow, in a fresh project directory, against a local channel. The one
    deviation: after `envguard init` the file names the local channel (and a torch release it carries) instead
    of conda-forge, which this machine cannot reach; and, this machine having no GPU and the test channel's
    torch being a CPU build, a README line that asks for CUDA gets the CPU build guard instead (that the CUDA
    line itself solves against conda-forge's real records is tests/test_init_realdata.py's)."""
    lines = readme_workflow()
    assert lines[0].startswith("envguard init") and any(ln.startswith("envguard create") for ln in lines)
    proj = tmp_path / "demo"
    proj.mkdir()
    # the user's own training script, which README's last line runs in the environment
    (proj / "train.py").write_text("import os, torch\nprint('trained with', torch.__version__, 'in', "
                                   "os.environ['CONDA_PREFIX'])\n")
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    for line in lines:
        proc = sh(line, proj)
        outputs[line] = proc
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
        if line.startswith("envguard init"):
            spec = proj / "environment.yml"
            text = re.sub(r"(?m)^  - conda-forge$", f"  - {standard_channel.url}", spec.read_text())
            text = re.sub(r"pytorch=[\d.]+\.\*", "pytorch=2.13.*", text)
            text = re.sub(r"(pytorch=2\.13\.\*)=cuda\w*\*", r"\1=cpu*", text)
            text = re.sub(r"(?m)^  - cuda-version=.*\n", "", text)
            spec.write_text(text)
    prefix = envs_dir() / "demo"  # init names the environment after the directory; create puts it here
    create = next(p for ln, p in outputs.items() if ln.startswith("envguard create"))
    assert create.stdout.startswith(f"created {prefix} (named by environment.yml (name: demo))"), create.stdout
    check = next(p for ln, p in outputs.items() if ln.startswith("envguard check"))
    assert check.stdout.startswith(f"envguard check {prefix} · named by environment.yml"), check.stdout
    assert "0 errors" in check.stdout
    diff = next(p for ln, p in outputs.items() if ln.startswith("envguard diff"))
    assert "no differences" in diff.stdout and str(prefix) in diff.stdout
    run = next(p for ln, p in outputs.items() if ln.startswith("envguard run"))
    assert run.stdout.startswith("trained with 2.13") and run.stdout.rstrip().endswith(str(prefix)), run.stdout
    # nothing else left in the project
    assert sorted(os.listdir(proj)) == ["conda-lock.yml", "environment.yml", "train.py"]


def test_readme_colleagues_lock_runs_as_written(tmp_path: Path, channel_url: str) -> None:
    """README's `create --lockfile` of another project's lock, as written, in a project whose own spec differs:
    exactly that lock is built (a package of theirs this spec lacks included), the file is unchanged, check
    judges the env by it; without `--frozen` the same create is refused with exit 4 and the file kept."""
    proj, _name = project(tmp_path, channel_url)  # this project: pytorch, numpy, pip
    theirs, _ = project(tmp_path / "colleague", channel_url, deps=("pytorch=2.13.*=cpu*", "egtool", "pip"),
                        name="their-env")
    lock = proj / "their-lock.yml"
    shutil.copyfile(theirs / "conda-lock.yml", lock)
    before = lock.read_bytes()
    lines = readme_block("A colleague's lock is installed exactly as written")
    assert lines[0].startswith("envguard create") and "--lockfile their-lock.yml" in lines[0]
    outputs = [sh(line, proj) for line in lines]
    for line, proc in zip(lines, outputs, strict=True):
        assert proc.returncode == 0, (line, proc.stdout, proc.stderr)
    assert lock.read_bytes() == before  # the file the user named is the file used, unchanged
    installed = {p.name.rsplit("-", 2)[0] for p in (proj / "their-env" / "conda-meta").glob("*.json")}
    assert "egtool" in installed, installed  # theirs, not re-solved from ours (which has no egtool)
    assert "0 errors" in outputs[0].stdout, outputs[0].stdout  # create's own check ran, on that lock
    later = sh("envguard check -p ./their-env --no-smoke", proj)  # the sentence after the block
    first = later.stdout.splitlines()[0]
    assert "the lock envguard built it from" in first and "their-lock.yml" in first, later.stdout
    assert later.returncode == 1 and "EG516" in later.stdout, later.stdout
    stale = sh(lines[0].split("#")[0].replace("--frozen", "").replace("their-env", "their-env2"), proj)
    assert stale.returncode == 4, stale.stdout + stale.stderr
    assert "--frozen" in stale.stderr and lock.read_bytes() == before
    assert not (proj / "their-env2").exists()


# --------------------------------------------------------------------------- 1. the right environment


def test_check_never_checks_envguards_own_interpreter(tmp_path: Path, channel_url: str) -> None:
    """1. No -p/-n, no active conda env, no project env: exit 2 naming the flags (it used to check envguard's
    own virtualenv against the project's lock). Once the project's env exists, it is the one checked, and
    the header says why. An active conda env wins, unless it is a conda installation's base."""
    proj, name = project(tmp_path, channel_url)
    none = envguard_run("check", "--no-smoke", cwd=proj, env=_env())
    assert none.returncode == 2, none.stdout + none.stderr
    assert "-p/--prefix" in none.stderr and "-n/--name" in none.stderr and repr(name) in none.stderr
    assert none.stdout == "" and len(none.stderr.strip().splitlines()) == 1
    made = envguard_run("create", "--no-check", cwd=proj, env=_env())
    assert made.returncode == 0, made.stderr
    prefix = envs_dir() / name
    found = envguard_run("check", "--no-smoke", cwd=proj, env=_env())
    assert found.returncode == 0, found.stdout + found.stderr
    assert found.stdout.startswith(f"envguard check {prefix} · named by environment.yml (name: {name})")
    base = tmp_path / "miniforge3"
    (base / "condabin").mkdir(parents=True)
    (base / "conda-meta").mkdir()
    as_base = envguard_run("check", "--no-smoke", cwd=proj, env=_env(CONDA_PREFIX=str(base)))
    assert as_base.stdout.startswith(f"envguard check {prefix} · named by"), as_base.stdout + as_base.stderr
    other = tmp_path / "other"
    (other / "conda-meta").mkdir(parents=True)
    active = envguard_run("check", "--no-smoke", cwd=proj, env=_env(CONDA_PREFIX=str(other)))
    assert active.stdout.startswith(f"envguard check {other} · the active conda environment (CONDA_PREFIX)")


# --------------------------------------------------------------------------- 2. create repairs drift


def test_create_rebuilds_an_env_pip_drifted_and_says_how(tmp_path: Path, channel_url: str) -> None:
    """2. After `pip install` of another numpy into a created env, `create` rebuilds it (it used to say
    `unchanged`, trusting its fingerprint) and says what had drifted; then check is clean again."""
    proj, _ = project(tmp_path, channel_url)
    env = proj / "env"
    assert envguard_run("create", "-p", "./env", "--no-check", cwd=proj, env=_env()).returncode == 0
    pip(env, str(channels.build_wheel(tmp_path / "w", "numpy", "2.0.1")))
    drifted = envguard_run("check", "-p", "./env", "--no-smoke", cwd=proj, env=_env())
    assert drifted.returncode == 1
    rebuilt = envguard_run("create", "-p", "./env", "--no-check", cwd=proj, env=_env())
    assert rebuilt.returncode == 0 and rebuilt.stdout.startswith(f"replaced {env}"), rebuilt.stdout + rebuilt.stderr
    assert "drifted from the lock" in rebuilt.stdout and "pip numpy 2.0.1" in rebuilt.stdout
    again = envguard_run("check", "-p", "./env", "--no-smoke", cwd=proj, env=_env())
    assert again.returncode == 0 and "no findings" in again.stdout, again.stdout


# --------------------------------------------------------------------------- 3. relative paths


def test_smoke_takes_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """3. A relative interpreter path is taken from the working directory, not from the probe's own."""
    from envguard.smoke import run_smoke

    monkeypatch.chdir(tmp_path)
    (tmp_path / "env").symlink_to(sys.prefix, target_is_directory=True)  # `env/bin/python`, as in the report
    result = run_smoke("env/bin/python", quick=True, timeout=120, driver_info=lambda: None)
    assert result.exit_code == 0 and result.python == str(tmp_path / "env" / "bin" / "python"), result.findings
    for args in (["-p", "./env"], ["--python", "env/bin/python"]):
        assert cli.run(["smoke", *args, "--quick", "--format", "json"]) == 0, args


# --------------------------------------------------------------------------- 4. exit codes follow findings


def test_cuda_lock_on_a_machine_without_gpu_is_exit_1_not_7(tmp_path: Path, channel_url: str) -> None:
    """4. A CUDA lock, a CPU torch at runtime, no driver: a policy error (exit 1); the smoke test itself passed,
    so never 7."""
    proj, _ = project(tmp_path, channel_url, deps=("pytorch=2.13.*=cuda126*", "numpy", "pip"), cuda="12.6")
    assert envguard_run("create", "-p", "./env", "--no-check", cwd=proj, env=_env()).returncode == 0
    proc = envguard_run("check", "-p", "./env", "--format", "json", cwd=proj, env=_env(), timeout=300)
    import json

    rep = json.loads(proc.stdout)
    assert proc.returncode == 1 and rep["exit_code"] == 1, (proc.returncode, rep["findings"])
    assert rep["smoke"]["exit_code"] == 0 and rep["summary"]["errors"] >= 1


# --------------------------------------------------------------------------- 5. diff agrees with check


def test_diff_of_a_live_prefix_shows_pip_over_conda(tmp_path: Path, channel_url: str,
                                                    standard_channel) -> None:
    """5. `pip install --ignore-installed` of the same numpy (it used to be `no differences`) and of another
    version (it used to be only `numpy added (pip)`): pip over conda, the class check agrees with."""
    proj, _ = project(tmp_path, channel_url)
    env = proj / "env"
    assert envguard_run("create", "-p", "./env", "--no-check", cwd=proj, env=_env()).returncode == 0
    same = standard_channel.numpy_version
    pip(env, "--ignore-installed", str(channels.build_wheel(tmp_path / "w1", "numpy", same)))
    diff = envguard_run("diff", "conda-lock.yml", "./env", "--format", "json", cwd=proj, env=_env())
    import json

    doc = json.loads(diff.stdout)
    assert diff.returncode == 1 and doc["counts"].get("pip-over-conda") == 1, doc["summary"]
    check = envguard_run("check", "-p", "./env", "--no-smoke", "--format", "json", cwd=proj, env=_env())
    codes = {f["code"]: f["message"] for f in json.loads(check.stdout)["findings"]}
    assert "EG522" in codes and "pip-over-conda" in codes.get("EG512", ""), codes  # check says the same
    pip(env, "--ignore-installed", str(channels.build_wheel(tmp_path / "w2", "numpy", "2.0.1")))
    text = envguard_run("diff", "conda-lock.yml", "./env", cwd=proj, env=_env())
    assert "pip over conda" in text.stdout and "added" not in text.stdout.splitlines()[-1], text.stdout


# --------------------------------------------------------------------------- 6. staleness is a finding


def test_edited_spec_makes_check_report_a_stale_lock(tmp_path: Path, channel_url: str) -> None:
    """6. After editing environment.yml without re-locking, check says so (it used to say `no findings`), and
    the fix it names, run as written, re-locks and rebuilds."""
    proj, _ = project(tmp_path, channel_url)
    assert envguard_run("create", "-p", "./env", "--no-check", cwd=proj, env=_env()).returncode == 0
    spec = proj / "environment.yml"
    spec.write_text(spec.read_text().replace("  - pip\n", "  - pip\n  - egtool\n"))
    import json

    stale = envguard_run("check", "-p", "./env", "--no-smoke", "--format", "json", cwd=proj, env=_env())
    f516 = [f for f in json.loads(stale.stdout)["findings"] if f["code"] == "EG516"]
    assert stale.returncode == 1 and len(f516) == 1, stale.stdout
    [command] = re.findall(r"`(envguard create [^`]+)`", f516[0]["fix"])
    fixed = sh(command + " --no-check", proj)
    assert fixed.returncode == 0 and "re-locked it first" in fixed.stderr, fixed.stderr
    clean = envguard_run("check", "-p", "./env", "--no-smoke", cwd=proj, env=_env())
    assert clean.returncode == 0 and "EG516" not in clean.stdout and (proj / "env" / "bin" / "egtool").exists()


# --------------------------------------------------------------------------- 8. flags


def test_flags_show_as_flags_and_verbose_goes_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """8. Help shows no `<bool>`/`<list[str]>`; `-v` after the subcommand is accepted; `-p` is a prefix
    everywhere, and lock/init answer `-p PATH` with the platform flag's name."""
    for command in ("init", "lock", "create", "check", "smoke", "diff", "lint"):
        proc = envguard_run(command, "--help", env={"COLUMNS": "200"})
        assert proc.returncode == 0 and "<bool>" not in proc.stdout and "<list" not in proc.stdout, proc.stdout
    init_help = envguard_run("init", "--help", env={"COLUMNS": "200"}).stdout
    assert re.search(r"--platform\s+PLATFORM", init_help) and re.search(r"--force\s+Overwrite", init_help)
    monkeypatch.chdir(tmp_path)
    assert cli.run(["init", "-o", "env.yml", "--name", "x", "-v"]) == 0 and (tmp_path / "env.yml").is_file()
    assert cli.run(["init", "-o", "env.yml", "--name", "x", "--force", "--verbose"]) == 0
    capsys.readouterr()
    assert cli.run(["check", "-p", str(tmp_path / "nope"), "--no-smoke", "-v"]) == 2
    assert "Traceback" in capsys.readouterr().err  # --verbose took effect from after the subcommand
    assert cli.run(["lock", "-f", "env.yml", "-p", "./env"]) == 2
    assert "'./env' looks like a path: the platform flag of lock is --platform" in capsys.readouterr().err


# --------------------------------------------------------------------------- 9. quiet where nothing is wrong


def test_numpy_simply_absent_is_an_info_note() -> None:
    """9. torch does not need numpy: its absence is no warning and carries no pinning advice."""
    from envguard.findings import Severity
    from envguard.smoke import classify

    probe = {"torch": {"version": "2.13.0", "cuda": None},
             "checks": [{"name": "numpy-interop", "status": "skip",
                         "error": "ModuleNotFoundError: No module named 'numpy'"}]}
    [f] = [f for f in classify(probe) if f.code == "numpy-abi"]
    assert f.severity is Severity.INFO and f.fix == ""
    probe["checks"][0]["error"] = "ImportError: numpy.core.multiarray failed to import"
    [f] = [f for f in classify(probe) if f.code == "numpy-abi"]
    assert f.severity is Severity.WARNING and f.fix  # numpy there but broken: that is a problem


def test_diff_summary_adds_up() -> None:
    """9. Each change is counted once: `2 changes (1 CPU↔CUDA build flip, 1 added)`, not `1 rebuilt` too."""
    from envguard.diff import DiffResult, PlatformDiff, Side, diff_packages
    from envguard.model import Package

    old = [Package("pytorch", "2.13.0", build="cuda126_py311_0")]
    new = [Package("pytorch", "2.13.0", build="cpu_py311_0"), Package("egtool", "1.0")]
    result = DiffResult(Side("A", "conda-lock", "a"), Side("B", "conda-lock", "b"),
                        platforms=[PlatformDiff("linux-64", "linux-64", diff_packages(old, new))])
    summary = result.summary()
    assert summary.startswith("2 changes ("), summary
    counts = [int(n) for n in re.findall(r"(\d+) [^,)]+", summary.split("(", 1)[1])]
    assert sum(counts) == 2 and "rebuilt" not in summary, summary


def test_logs_never_break_a_path_mid_word(tmp_path: Path, channel_url: str) -> None:
    """9. Not on a terminal, findings are plain lines: a long lock path stays whole (rich used to fold the
    table at 80 columns)."""
    deep = tmp_path / ("a-rather-long-directory-name-" * 3).rstrip("-") / "project"
    deep.mkdir(parents=True)
    proj, _ = project(deep, channel_url)
    assert envguard_run("create", "-p", "./env", "--no-check", cwd=proj, env=_env()).returncode == 0
    pip(proj / "env", str(channels.build_wheel(tmp_path / "w", "egextra", "1.0")))
    proc = envguard_run("check", "-p", "./env", "--no-smoke", cwd=proj, env=_env())
    lock = str(proj / "conda-lock.yml")
    assert len(lock) > 80 and proc.returncode == 0
    assert any(line.startswith("warning: EG511") and lock in line for line in proc.stdout.splitlines()), proc.stdout


# --------------------------------------------------------------------------- 10. no litter, no silence


def test_no_lock_file_beside_the_prefix_even_after_a_refused_create(tmp_path: Path, channel_url: str) -> None:
    """10. The prefix lock lives in envguard's own hidden folder: nothing appears beside the prefix."""
    from envguard.create.prefixlock import lock_path_for

    proj, _ = project(tmp_path, channel_url)
    made = envguard_run("create", "-p", "./env", "--no-check", cwd=proj, env=_env())
    assert made.returncode == 0, made.stderr
    assert sorted(os.listdir(proj)) == ["conda-lock.yml", "env", "environment.yml"]
    (proj / "data").mkdir()
    (proj / "data" / "keep.txt").write_text("x")
    refused = envguard_run("create", "-p", "./data", "--no-check", cwd=proj, env=_env())
    assert refused.returncode == 2
    assert sorted(os.listdir(proj)) == ["conda-lock.yml", "data", "env", "environment.yml"]
    assert lock_path_for(proj / "env").is_file()
    assert Path(os.environ["XDG_CACHE_HOME"]) in lock_path_for(proj / "env").parents


def test_smoke_shows_each_start_method_on_a_terminal(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """10. On a terminal the smoke test says what it is doing as it goes (it used to be silent for 6-9 s)."""
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(render, "err", Console(file=screen, force_terminal=True, width=120))
    code = cli.run(["smoke", "--python", sys.executable, "--quick"])
    assert code == 0, capsys.readouterr()
    shown = screen.getvalue()
    assert "smoke: importing torch" in shown and re.search(r"smoke: DataLoader workers \((fork|spawn)\)", shown)
    assert capsys.readouterr().out.startswith("envguard smoke")
