"""Every fix text runs as written.

A finding's fix is advice a user copies into a shell. This harness collects the backticked ``envguard ...``
commands of every fix that real broken environments produce (whatever the rules' wording is today: nothing
here names a text), and every fix of the failure catalogue (envguard/data/failures.yaml), aimed the way
smoke and check aim them. Each is run as written, with bash, in the project the finding came from:

* never a usage error, an internal error or a traceback;
* a command that acts on an environment (create, check, smoke) acts on the one the finding is about (the
  project's environment.yml names another one, so a fix that names none would act on the wrong one);
* where the fix is a command that repairs the environment, the finding is gone afterwards.

The environment under test lives at ``./env`` while environment.yml names another environment on purpose.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support import channels
from support.channels import HOST_PY

from envguard import catalog

pytestmark = pytest.mark.slow  # runs each fix as written against real environments

ENVGUARD_BIN = Path(sys.executable).parent
USAGE = re.compile(r"\(fix: see `envguard [a-z]+ --help`\)|No such option|Got unexpected extra argument|"
                   r"internal error|Traceback \(most recent call last\)")
ENV_COMMANDS = ("create", "check", "smoke")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "CONDA_DEFAULT_ENV", "VIRTUAL_ENV")}
    env["PATH"] = f"{ENVGUARD_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["ENVGUARD_NVIDIA_SMI"] = ""
    env.update(extra)
    return env


def envguard(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envguard", *args], cwd=cwd, capture_output=True, text=True,
                          env=_env(), timeout=timeout)


def check(proj: Path, *extra: str) -> dict:
    proc = envguard("check", "-p", "./env", "--format", "json", *extra, cwd=proj)
    assert proc.returncode in (0, 1, 3, 7), proc.stderr
    return json.loads(proc.stdout)


def commands_of(findings: list[dict]) -> dict[str, list[str]]:
    """command, as written -> the codes whose fix names it."""
    out: dict[str, list[str]] = {}
    for f in findings:
        for cmd in catalog.commands(f.get("fix") or ""):
            out.setdefault(cmd, []).append(f["code"])
    return out


# What a command may answer when run as written: repairs succeed; reports may still report (findings 1,
# integrity 3, a failing smoke test 7), since a diagnosis is advice too. Never 2 (bad input) or worse.
ALLOWED = {"create": (0, 1), "lock": (0,), "check": (0, 1, 3, 7), "smoke": (0, 7)}


def order(todo: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """Repairs before diagnoses, as a user would: re-lock, rebuild, then look again."""
    rank = {"lock": 0, "create": 1}
    return sorted(todo.items(), key=lambda kv: rank.get(shlex.split(kv[0])[1], 2))


def run_as_written(command: str, proj: Path, prefix: Path, why: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-c", command], cwd=proj, capture_output=True, text=True, env=_env(),
                          timeout=600)
    said = proc.stdout + proc.stderr
    assert not USAGE.search(proc.stderr), f"{why}: `{command}` does not run as written:\n{said}"
    words = shlex.split(command)
    allowed = ALLOWED.get(words[1], (0, 1))
    assert proc.returncode in allowed, f"{why}: `{command}` exited {proc.returncode}:\n{said}"
    if words[1] in ENV_COMMANDS:
        assert str(prefix) in said, f"{why}: `{command}` acted on another environment than {prefix}:\n{said}"
    return proc


def project(tmp_path: Path, channel_url: str, deps: tuple[str, ...], cuda: str | None = None) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    lines = ["name: some-other-env", "channels:", f"  - {channel_url}", "dependencies:", f"  - python={HOST_PY}"]
    lines += [f"  - {d}" for d in deps] + ["platforms:", f"  - {channels.host_platform()}"]
    (proj / "environment.yml").write_text("\n".join(lines) + "\n")
    args = ["lock"] + (["--cuda", cuda] if cuda else [])
    assert envguard(*args, cwd=proj).returncode == 0
    made = envguard("create", "-p", "./env", "--no-check", cwd=proj)
    assert made.returncode == 0, made.stderr
    return proj


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _break(proj: Path, tmp_path: Path, standard_channel) -> None:
    """Everything that commonly goes wrong with one environment, at once."""
    env = proj / "env"
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "-q",
           "--disable-pip-version-check"]
    for name, version in (("numpy", "2.0.1"), ("egextra", "1.0")):  # pip over conda; a package nobody locked
        wheel = channels.build_wheel(tmp_path / "wheels", name, version)
        assert subprocess.run([*pip, str(wheel)], capture_output=True).returncode == 0
    conf = env / "etc" / "egplaceholder.conf"  # a conda file changed by hand
    if conf.exists():
        conf.unlink()
        conf.write_text("edited\n")
    spec = proj / "environment.yml"  # the spec moves on without a re-lock
    spec.write_text(spec.read_text().replace("  - pip\n", "  - pip\n  - egtool\n"))


def test_every_fix_of_a_drifted_environment_runs_as_written_and_repairs_it(tmp_path: Path, channel_url: str,
                                                                          standard_channel) -> None:
    proj = project(tmp_path, channel_url, ("pytorch=2.13.*=cpu*", "numpy", "pip", "egplaceholder"))
    prefix = proj / "env"
    _break(proj, tmp_path, standard_channel)
    before = check(proj, "--files")
    errors = {f["code"] for f in before["findings"] if f["severity"] == "error"}
    assert len(errors) >= 4, before["findings"]  # lock, pip over conda, files, stale lock
    todo = commands_of(before["findings"])
    assert todo, "no finding of a drifted environment names a command"
    for command, codes in order(todo):
        run_as_written(command, proj, prefix, f"fix of {', '.join(sorted(set(codes)))}")
    after = check(proj, "--files")
    fixed_by_commands = {c for codes in todo.values() for c in codes}
    left = [f for f in after["findings"] if f["severity"] == "error" and f["code"] in fixed_by_commands]
    assert not left, f"still there after running their fixes as written: {left}"


def test_fixes_for_an_interrupted_create_and_a_lock_for_other_platforms(tmp_path: Path,
                                                                        channel_url: str) -> None:
    proj = project(tmp_path, channel_url, ("pytorch=2.13.*=cpu*", "numpy", "pip"))
    prefix = proj / "env"
    marker = proj / f".env.envguard-building-{_dead_pid()}"  # a create that was killed while building in place
    marker.touch()
    host = channels.host_platform()
    other = "osx-arm64" if host != "osx-arm64" else "linux-64"
    assert envguard("lock", "--platform", other, cwd=proj).returncode == 0  # a lock without this machine
    found = check(proj, "--no-smoke")
    codes = {f["code"] for f in found["findings"]}
    assert {"EG534", "EG513"} <= codes, found["findings"]
    todo = commands_of(found["findings"])
    for command, why in order(todo):
        run_as_written(command, proj, prefix, f"fix of {', '.join(sorted(set(why)))}")
    after = {f["code"] for f in check(proj, "--no-smoke")["findings"]}
    assert not ({"EG534", "EG513"} & after), after
    assert not marker.exists()


def test_fixes_without_a_lock_name_the_lock_the_environment_came_from(tmp_path: Path,
                                                                      channel_url: str) -> None:
    proj = project(tmp_path, channel_url, ("pytorch=2.13.*=cpu*", "numpy", "pip", "egtool"))
    prefix = proj / "env"
    (prefix / "conda-meta").joinpath(next(n for n in os.listdir(prefix / "conda-meta")
                                          if n.startswith("egtool-"))).unlink()  # gone from the records
    elsewhere = tmp_path / "elsewhere"  # no environment.yml here: the lock create recorded judges it
    elsewhere.mkdir()
    proc = envguard("check", "-p", str(prefix), "--no-smoke", "--format", "json", cwd=elsewhere)
    report = json.loads(proc.stdout)
    assert report["lockfile"] == str(proj / "conda-lock.yml"), report["lockfile"]
    assert any(f["code"] == "EG512" and "egtool" in f["message"] for f in report["findings"]), report["findings"]
    for command, codes in order(commands_of(report["findings"])):
        run_as_written(command, elsewhere, prefix, f"fix of {', '.join(codes)}")
    again = envguard("check", "-p", str(prefix), "--no-smoke", "--format", "json", cwd=elsewhere)
    assert not [f for f in json.loads(again.stdout)["findings"] if f["severity"] == "error"], again.stdout
    # that lock gone: the fingerprint alone judges it (EG515), no other lock does, and EG517 says which is gone
    (proj / "conda-lock.yml").rename(tmp_path / "moved-lock.yml")
    (prefix / "conda-meta").joinpath(next(n for n in os.listdir(prefix / "conda-meta")
                                          if n.startswith("egtool-"))).unlink()
    proc = envguard("check", "-p", str(prefix), "--no-smoke", "--format", "json", cwd=elsewhere)
    findings = json.loads(proc.stdout)["findings"]
    assert {"EG515", "EG517"} <= {f["code"] for f in findings}, findings
    assert not commands_of(findings), findings  # no command to run as written names a lock that is not there


def test_fixes_of_a_cuda_lock_on_this_cpu_machine_run_as_written(tmp_path: Path, channel_url: str) -> None:
    """Whatever the CUDA rules advise (their wording is #11's), the commands in it run as written here."""
    proj = project(tmp_path, channel_url, ("pytorch=2.13.*=cuda126*", "numpy", "pip"), cuda="12.6")
    found = check(proj)  # with the smoke test: it finds the CPU runtime behind the CUDA build
    assert any(f["severity"] == "error" for f in found["findings"]), found["findings"]
    for command, codes in order(commands_of(found["findings"])):
        run_as_written(command, proj, proj / "env", f"fix of {', '.join(codes)}")


def test_every_catalogue_fix_runs_as_written_where_smoke_and_check_put_it(tmp_path: Path,
                                                                        channel_url: str) -> None:
    """Every case of the failure catalogue, its fix aimed at the environment as smoke and check aim it."""
    proj = project(tmp_path, channel_url, ("pytorch=2.13.*=cpu*", "numpy", "pip"))
    prefix = proj / "env"
    todo: dict[str, list[str]] = {}
    for case in catalog.cases():
        for command in catalog.commands(catalog.aim(case.fix, ["-p", shlex.quote(str(prefix))])):
            todo.setdefault(command, []).append(case.id)
    ran = 0
    for command, ids in order(todo):
        run_as_written(command, proj, prefix, f"catalogue case {', '.join(ids)}")
        ran += 1
    assert ran >= 1  # the catalogue names commands (today: create, smoke, lock); none may be broken


def test_smoke_findings_name_the_probed_environment(tmp_path: Path, channel_url: str) -> None:
    """`envguard smoke -p ./env` on an environment without torch: the fix names that environment, and runs
    as written."""
    proj = project(tmp_path, channel_url, ("pip",))
    prefix = proj / "env"
    proc = subprocess.run([sys.executable, "-m", "envguard", "smoke", "-p", "./env", "--quick", "--format", "json"],
                          cwd=proj, capture_output=True, text=True, timeout=300, env=_env())
    findings = json.loads(proc.stdout)["findings"]
    assert proc.returncode == 7 and findings, proc.stdout
    todo = [c for f in findings for c in catalog.commands(f["fix"])]
    assert any(shlex.split(c)[1] in ENV_COMMANDS for c in todo), findings
    for command, _ in order({c: [] for c in todo}):
        run_as_written(command, proj, prefix, "fix of a smoke finding")


def test_aim_puts_the_target_into_commands_that_name_none() -> None:
    fix = "Install torch (`envguard create` from the lock), or `envguard smoke --format json`; `envguard lock`."
    aimed = catalog.aim(fix, ["-p", shlex.quote("/e nv")])
    assert catalog.commands(aimed) == ["envguard create -p '/e nv'", "envguard smoke -p '/e nv' --format json",
                                       "envguard lock"]
    assert catalog.aim("`envguard create -n x`", ["-p", "/y"]) == "`envguard create -n x`"


def test_the_fix_of_a_file_changed_in_place_repairs_it(tmp_path: Path, channel_url: str) -> None:
    """A conda file edited in place with its size kept (EG532, found by --deep only) survives a sync, which
    compares sizes: its fix must rebuild anyway. The edit goes through the hard link into the package cache
    too, so the rebuild also proves the verified cache re-extracts it."""
    proj = project(tmp_path, channel_url, ("pytorch=2.13.*=cpu*", "numpy", "pip", "egtool"))
    prefix = proj / "env"
    [init] = prefix.glob("lib/python3*/site-packages/egtool/__init__.py")
    original = init.read_text()
    with open(init, "r+") as fh:
        fh.write(original.replace("print('egtool'", "print('EGTOOL'"))
    found = [f for f in check(proj, "--deep", "--no-smoke")["findings"] if f["severity"] == "error"]
    assert [f["code"] for f in found] == ["EG532"], found
    for command, codes in order(commands_of(found)):
        run_as_written(command, proj, prefix, f"fix of {', '.join(codes)}")
    assert not check(proj, "--deep", "--no-smoke")["findings"] and init.read_text() == original
