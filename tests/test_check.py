"""`envguard check` on real environments built by rattler from the test channels, each broken one way.

Every test runs the real CLI in a subprocess (exit code, JSON), except where it needs a knob the CLI
does not have (import probing without the smoke test).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from support import channels, check_envs
from support.channels import HOST_PY
from support.check_envs import envguard
from support.require import require

pytestmark = pytest.mark.slow  # each test checks a real environment rattler installed, or starts envguard

BASE = [f"python {HOST_PY}.*", "pytorch 2.13.0 *cpu*", "pip", "egtool", "eglink"]
# what check warns of the environments' Python line itself (the host's): 3.10 is a legacy line, EG541
# (envguard/data/compat.yaml: end of life 2026-10-31); no warning on 3.11 and later
HOST_LINE_WARNINGS = {"EG541"} if HOST_PY == "3.10" else set()


def codes(report: dict, severity: str | None = None) -> set[str]:
    return {f["code"] for f in report["findings"] if severity is None or f["severity"] == severity}


def check_json(*args: str, **kw) -> tuple[int, dict]:
    proc = envguard("check", "--format", "json", *args, **kw)
    assert proc.returncode in (0, 1, 3, 7), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def cache(session_tmp: Path) -> Path:
    return session_tmp / "check-pkgs"


@pytest.fixture
def env(channel_url: str, cache: Path, tmp_path: Path) -> Path:
    prefix, records = check_envs.make_env(channel_url, BASE, tmp_path / "env", cache)
    check_envs.write_lock(tmp_path / "conda-lock.yml", records)
    return prefix


def test_clean_env_with_its_lock_passes_deep(env: Path, tmp_path: Path) -> None:
    rc, rep = check_json("-p", str(env), "--lockfile", str(tmp_path / "conda-lock.yml"), "--deep", "--no-smoke")
    assert rc == 0, rep["findings"]
    assert codes(rep, "error") == set() and codes(rep, "warning") == HOST_LINE_WARNINGS
    assert rep["kind"] == "conda" and rep["files"] == {"mode": "sha256", "problems": []}
    assert {p["name"] for p in rep["packages"]} == {"python", "pytorch", "numpy", "pip", "egtool", "eglink"}
    assert rep["torch"]["cpu"] is True and rep["torch"]["source"] == "conda"


def test_default_lock_beside_environment_yml(env: Path, tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text(f"name: t\nchannels: [conda-forge]\ndependencies: [python={HOST_PY}]\n")
    rc, rep = check_json("-p", str(env), "--no-smoke", cwd=tmp_path)
    assert rep["lockfile"] == str(tmp_path / "conda-lock.yml")
    # that lock was not made from this environment.yml: a stale lock is a finding (exit 1), with its fix
    assert rc == 1 and codes(rep, "error") == {"EG516"}, rep["findings"]
    f516 = next(f for f in rep["findings"] if f["code"] == "EG516")
    # the spec's own default lock: create re-locks it when read through -f (a --lockfile one it never re-locks);
    # the environment was made by rattler, not by envguard: create replaces it only with --force
    assert f"`envguard create -p {env} -f {tmp_path / 'environment.yml'} --force`" in f516["fix"], f516
    # the verdict's own command, from its field: the re-lock alone, and no fix left inside the message
    assert f"; or only re-lock: `envguard lock -f {tmp_path / 'environment.yml'} " in f516["fix"], f516
    assert "(fix:" not in f516["message"] and "is stale for" in f516["message"], f516
    (tmp_path / "environment.yml").unlink()  # a lock alone is not picked up: it may belong to anything
    rc, rep = check_json("-p", str(env), "--no-smoke", cwd=tmp_path)
    assert rep["lockfile"] is None and "EG502" in codes(rep, "info")


def test_pip_install_over_conda_pytorch(env: Path, tmp_path: Path) -> None:
    wheel = channels.build_wheel(tmp_path / "wheels", "torch", "2.13.1")
    check_envs.pip_install(env, wheel)
    rc, rep = check_json("-p", str(env), "--lockfile", str(tmp_path / "conda-lock.yml"), "--no-smoke")
    assert rc == 1
    errors = codes(rep, "error")
    assert {"EG521", "EG522"} <= errors  # two claims on torch; conda's dist-info gone
    assert "EG520" not in codes(rep)  # the shadowing copy is reported once, as what it is
    f521 = next(f for f in rep["findings"] if f["code"] == "EG521")
    assert f521["package"] == "torch" and f521["file"].endswith("torch-2.13.1.dist-info")
    # pip's torch over conda's pytorch: a change of its own against the lock (as `envguard diff` says too)
    f512 = next(f for f in rep["findings"] if f["code"] == "EG512")
    assert "pip-over-conda" in f512["message"] and "pip torch 2.13.1" in f512["message"]
    assert {"name": "torch", "version": "2.13.1", "manager": "pip"}.items() <= next(
        p for p in rep["packages"] if p["manager"] == "pip").items()
    # --files sees pip's removal of conda's files: an integrity failure naming pytorch
    rc, rep = check_json("-p", str(env), "--files", "--no-smoke")
    assert rc == 3
    f530 = next(f for f in rep["findings"] if f["code"] == "EG530")
    assert f530["package"] == "pytorch" and "torch-2.13.0.dist-info/METADATA" in f530["message"]


def test_import_resolves_to_pips_copy(env: Path, tmp_path: Path) -> None:
    from envguard.check import CheckOptions, run_check

    clean = run_check(CheckOptions(prefix=env, smoke=False, imports=True, driver_info_fn=lambda: None, cwd=tmp_path))
    f = next(f for f in clean.findings if f.code == "EG523" and f.package == "torch")
    assert f.severity.value == "info" and "conda package pytorch 2.13.0" in f.message
    check_envs.pip_install(env, channels.build_wheel(tmp_path / "wheels", "torch", "2.13.1"))
    broken = run_check(CheckOptions(prefix=env, smoke=False, imports=True, driver_info_fn=lambda: None, cwd=tmp_path))
    f = next(f for f in broken.findings if f.code == "EG523" and f.package == "torch")
    assert f.severity.value == "error" and "pip dist torch 2.13.1" in f.message
    assert f.file == str(env / f"lib/python{HOST_PY}/site-packages/torch/__init__.py")


def test_deleted_and_modified_files(env: Path) -> None:
    target = env / "share/eglink/target.txt"
    init = env / f"lib/python{HOST_PY}/site-packages/egtool/__init__.py"
    target.unlink()
    check_envs.replace_file(init, init.read_bytes().replace(b"print", b"PRINT"))  # same size
    rc, rep = check_json("-p", str(env), "--files", "--no-smoke")
    assert rc == 3
    assert {(p["path"], p["package"], p["problem"]) for p in rep["files"]["problems"]} == {
        ("share/eglink/target.txt", "eglink", "missing")}
    rc, rep = check_json("-p", str(env), "--deep", "--no-smoke")
    assert rc == 3
    assert {(p["path"], p["package"], p["problem"]) for p in rep["files"]["problems"]} == {
        ("share/eglink/target.txt", "eglink", "missing"),
        (f"lib/python{HOST_PY}/site-packages/egtool/__init__.py", "egtool", "sha256")}
    assert {"EG530", "EG532"} <= codes(rep, "error")
    text = envguard("check", "-p", str(env), "--deep", "--no-smoke")
    assert text.returncode == 3 and "egtool" in text.stdout and "EG532" in text.stdout


def test_cpu_build_with_cuda_lock(channel_url: str, cache: Path, tmp_path: Path) -> None:
    cuda_records = check_envs.solve([channel_url], [f"python {HOST_PY}.*", "pytorch 2.13.0 *cuda126*", "pip"],
                                    cuda="12.8")
    lock = check_envs.write_lock(tmp_path / "conda-lock.yml", cuda_records)
    prefix, _ = check_envs.make_env(channel_url, [f"python {HOST_PY}.*", "pytorch 2.13.0 *cpu*", "pip"],
                                    tmp_path / "env",
                                    cache)
    rc, rep = check_json("-p", str(prefix), "--lockfile", str(lock), "--no-smoke")
    assert rc == 1
    f = next(f for f in rep["findings"] if f["code"] == "EG550")
    assert "CPU build" in f["message"] and "12.6" in f["message"] and f["fix"]
    assert "EG510" in codes(rep, "error")  # cuda-version is locked but not installed
    assert rep["torch"]["cpu"] is True


def test_lock_names_a_different_build(channel_url: str, cache: Path, tmp_path: Path) -> None:
    locked = check_envs.solve([channel_url], [f"python {HOST_PY}.*", "pytorch 2.13.0 *cuda128*"], cuda="12.8")
    lock = check_envs.write_lock(tmp_path / "conda-lock.yml", locked)
    prefix, _ = check_envs.make_env(channel_url,
                                    [f"python {HOST_PY}.*", "pytorch 2.13.0 *cuda126*", "cuda-version 12.6"],
                                    tmp_path / "env", cache, cuda="12.8")
    rc, rep = check_json("-p", str(prefix), "--lockfile", str(lock), "--no-smoke")
    assert rc == 1
    f = next(f for f in rep["findings"] if f["code"] == "EG512" and f["package"] == "pytorch")
    assert "cuda128_generic" in f["message"] and "cuda126_generic" in f["message"]
    assert "EG550" not in codes(rep)  # a CUDA build, just not the locked one
    assert rep["torch"]["cuda"] == "12.6"


def test_lock_without_host_platform(env: Path, tmp_path: Path) -> None:
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(lock.read_text().replace("linux-64", "osx-arm64"))
    rc, rep = check_json("-p", str(env), "--lockfile", str(lock), "--no-smoke")
    assert rc == 1 and "EG513" in codes(rep, "error")


def test_python_312_env(standard_channel, channel_url: str, cache: Path, tmp_path: Path) -> None:
    require(standard_channel.python312_available, "no Python 3.12 interpreter for the test channel (pyenv)")
    prefix, _ = check_envs.make_env(channel_url, ["python 3.12.*", "pip"], tmp_path / "env", cache)
    rc, rep = check_json("-p", str(prefix), "--no-smoke")
    assert rc == 1 and rep["python"].startswith("3.12")
    f = next(f for f in rep["findings"] if f["code"] == "EG540")
    assert f["severity"] == "error" and "3.10, 3.11" in f["message"]


def test_pytorch_channel_and_mkl(channel_factory, cache: Path, tmp_path: Path) -> None:
    plat = channels.host_platform()
    chan = channel_factory([
        {"name": "pytorch", "version": "2.5.1", "build": "py3.11_cpu_0", "subdir": plat},
        {"name": "mkl", "version": "2024.2.0", "build": "h0_0", "subdir": plat},
        {"name": "mkl", "version": "2023.2.0", "build": "h0_0", "subdir": plat},
    ], name="pytorch")
    url = channels.channel_url(chan)
    new, _ = check_envs.make_env(url, ["pytorch", "mkl 2024.2.0"], tmp_path / "new", cache)
    rc, rep = check_json("-p", str(new), "--no-smoke")
    assert rc == 1 and "EG543" in codes(rep, "error") and "EG542" not in codes(rep)
    old, _ = check_envs.make_env(url, ["pytorch", "mkl 2023.2.0"], tmp_path / "old", cache)
    rc, rep = check_json("-p", str(old), "--no-smoke")
    assert rc == 0 and "EG542" in codes(rep, "warning") and "EG543" not in codes(rep)
    assert envguard("check", "-p", str(old), "--no-smoke", "--strict").returncode == 1


def test_environment_variables(env: Path, tmp_path: Path) -> None:
    libdir = tmp_path / "system-cuda" / "lib64"
    libdir.mkdir(parents=True)
    (libdir / "libcudnn.so.9").write_bytes(b"\x7fELF")
    (libdir / "libnccl.so.2").write_bytes(b"\x7fELF")
    inside = env / "lib"  # the environment's own lib dir on the path is fine
    extra = {"LD_LIBRARY_PATH": f"{inside}:{libdir}", "KMP_DUPLICATE_LIB_OK": "TRUE"}
    rc, rep = check_json("-p", str(env), "--no-smoke", env=extra)
    assert rc == 0  # warnings only
    assert {"EG560", "EG561"} <= codes(rep, "warning")
    f = next(f for f in rep["findings"] if f["code"] == "EG560")
    assert "libcudnn" in f["message"] and "libnccl" in f["message"] and str(libdir) in f["message"]


def test_urls_from_conda_meta_are_redacted(channel_factory, test_channel: Path, cache: Path,
                                           tmp_path: Path) -> None:
    server = channel_factory.serve(test_channel, token="s3cr3t-token")
    assert "/t/s3cr3t-token" in server.url
    prefix, _ = check_envs.make_env(server.url, ["egtool", f"python {HOST_PY}.*"], tmp_path / "env", cache)
    assert "s3cr3t-token" in (next((prefix / "conda-meta").glob("egtool-*.json"))).read_text()
    for fmt in ("json", "text", "markdown"):
        proc = envguard("check", "-p", str(prefix), "--no-smoke", "--files", "--format", fmt)
        assert proc.returncode == 0, proc.stderr
        assert "s3cr3t-token" not in proc.stdout + proc.stderr
    rep = json.loads(envguard("check", "-p", str(prefix), "--no-smoke", "--format", "json").stdout)
    assert any("/t/***/" in (p["url"] or "") for p in rep["packages"])


def test_prefix_left_by_an_interrupted_create(env: Path, tmp_path: Path) -> None:
    target = tmp_path / "envs" / "train"
    # create's own test hook SIGKILLs it after the build, before the rename into place
    killed = envguard("create", "-p", str(target), "--lockfile", str(tmp_path / "conda-lock.yml"), "--no-check",
                      "-q", env={"ENVGUARD_TESTING": "1", "ENVGUARD_TEST_KILL_AT": "staged"})
    assert killed.returncode in (-9, 137), killed.stderr
    assert not target.exists()
    staging = next(target.parent.glob(".train.envguard-staging-*"))
    rc, rep = check_json("-p", str(staging), "--no-smoke")
    assert rc == 3
    f = next(f for f in rep["findings"] if f["code"] == "EG534")
    assert "interrupted" in f["message"] and "envguard create" in f["fix"]


def test_half_built_prefix(env: Path) -> None:
    # What an interrupted transaction leaves: packages linked, their records never written.
    for record in (env / "conda-meta").glob("*.json"):
        record.unlink()
    rc, rep = check_json("-p", str(env), "--no-smoke")
    assert rc == 3 and "EG534" in codes(rep, "error")


def test_building_marker_busy_while_its_process_lives(env: Path) -> None:
    # The marker an external backend's in-place build leaves (envguard.leftovers): busy while the process
    # runs, half-built once it is gone.
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    marker = env.parent / f".{env.name}.envguard-building-{proc.pid}"
    marker.touch()
    try:
        busy = envguard("check", "-p", str(env), "--no-smoke")
        assert busy.returncode == 5 and "is building this environment right now" in busy.stderr, busy.stderr
    finally:
        proc.kill()
        proc.wait()
    rc, rep = check_json("-p", str(env), "--no-smoke")
    assert rc == 3
    f = next(f for f in rep["findings"] if f["code"] == "EG534")
    assert f"process {proc.pid}" in f["message"] and "interrupted" in f["message"]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    for args, needle in ((["-p", str(tmp_path / "nope")], "no environment at"),
                         (["--lockfile", str(tmp_path / "missing.yml")], "missing.yml"),
                         (["--format", "xml"], "--format"),
                         (["-p", str(tmp_path), "-n", "x"], "-p/-n")):
        proc = envguard("check", "--no-smoke", *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr and "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_check_never_writes_into_the_prefix(env: Path, tmp_path: Path) -> None:
    def snapshot() -> dict[str, tuple[int, int]]:
        out = {}
        for root, dirs, files in os.walk(env):
            for n in dirs + files:
                p = os.path.join(root, n)
                st = os.lstat(p)
                out[p] = (st.st_mtime_ns, st.st_size if not stat.S_ISDIR(st.st_mode) else 0)
        return out

    before = snapshot()
    proc = envguard("check", "-p", str(env), "--deep", "--no-smoke", "--lockfile", str(tmp_path / "conda-lock.yml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert snapshot() == before


FAKE_SMI = """#!/bin/sh
# A fake nvidia-smi: the query envguard.driver makes, and the banner with the CUDA level.
case "$1" in
  --query-gpu=*) echo "{driver}, {gpu}, {cap}" ;;
  *) echo "| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda}  |" ;;
esac
"""


def fake_smi(directory: Path, driver: str, gpu: str, cap: str, cuda: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "nvidia-smi"
    exe.write_text(FAKE_SMI.format(driver=driver, gpu=gpu, cap=cap, cuda=cuda))
    exe.chmod(0o755)
    return exe


@pytest.fixture
def cuda_env(channel_url: str, cache: Path, tmp_path: Path) -> Path:
    prefix, _ = check_envs.make_env(channel_url, [f"python {HOST_PY}.*", "pytorch 2.13.0 *cuda126*", "pip"],
                                    tmp_path / "cuda-env", cache, cuda="12.8")
    return prefix


def test_fake_old_driver_on_path(cuda_env: Path, tmp_path: Path) -> None:
    bindir = fake_smi(tmp_path / "bin", "470.57.02", "Tesla K80", "3.7", "11.4").parent
    extra = {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    rc, rep = check_json("-p", str(cuda_env), "--no-smoke", env=extra)
    assert rc == 1
    f = next(f for f in rep["findings"] if f["code"] == "EG551")
    assert "470.57.02" in f["message"] and "525.60.13" in f["message"] and "12.6" in f["message"]
    arch = next(f for f in rep["findings"] if f["code"] == "EG552")
    assert "Tesla K80" in arch["message"] and "3.7" in arch["message"]
    assert rep["gpu"] == {"driver_version": "470.57.02", "gpus": [{"name": "Tesla K80", "capability": "3.7"}]}


def test_new_enough_driver_passes(cuda_env: Path, tmp_path: Path) -> None:
    exe = fake_smi(tmp_path / "bin", "560.35.03", "NVIDIA A100-SXM4-80GB", "8.0", "12.6")
    rc, rep = check_json("-p", str(cuda_env), "--no-smoke", env={"ENVGUARD_NVIDIA_SMI": str(exe)})
    assert rc == 0, rep["findings"]
    assert not {"EG551", "EG552", "EG553"} & codes(rep)
    # no driver at all: a CUDA build on a machine without one is a note, not an error
    rc, rep = check_json("-p", str(cuda_env), "--no-smoke", env={"ENVGUARD_NVIDIA_SMI": ""})
    assert rc == 0 and "EG553" in codes(rep, "info")


def test_check_the_test_virtualenv_itself_with_smoke(tmp_path: Path) -> None:
    """README's first command: `envguard check -p .venv` on the virtualenv envguard runs in, smoke included."""
    import sys

    proc = envguard("check", "-p", sys.prefix, "--format", "json", cwd=tmp_path, env={"ENVGUARD_NVIDIA_SMI": ""})
    rep = json.loads(proc.stdout)
    assert proc.returncode == 0, (rep["findings"], proc.stderr)
    assert rep["prefix"] == sys.prefix and rep["kind"] == "venv" and rep["summary"]["errors"] == 0
    # the smoke test's findings (failure-catalogue ids, not EG codes) are the ones the summary counts, and on
    # a machine without CUDA pinned memory is reported as not exercised, never as passed
    smoke_codes = [f["code"] for f in rep["findings"] if not f["code"].startswith("EG")]
    assert {k: rep["smoke"][k] for k in ("exit_code", "timed_out", "findings")} == \
        {"exit_code": 0, "timed_out": False, "findings": len(smoke_codes)}
    assert set(rep["smoke"]) == {"exit_code", "timed_out", "findings", "duration_s", "checks"}
    import torch

    # which finding names the build depends on the torch this suite runs on: a CPU build says so (CI's main
    # line, from local wheels); a CUDA build finds no driver, ENVGUARD_NVIDIA_SMI="" above (a warning)
    if torch.version.cuda is None:
        assert "cpu-build" in smoke_codes and "no-driver" not in smoke_codes
    else:
        assert "no-driver" in smoke_codes and "cpu-build" not in smoke_codes
    if not torch.cuda.is_available():
        assert "pin-cpu" in smoke_codes
    else:
        assert "pin-cpu" not in smoke_codes
    assert rep["torch"]["source"] == "probe" and rep["torch"]["version"].startswith("2.")
    assert rep["import_origins"]["torch"]["origin"].startswith(sys.prefix)
    assert any(p["name"] == "torch" and p["manager"] == "pip" for p in rep["packages"])
    text = envguard("check", "-p", sys.prefix, cwd=tmp_path, env={"ENVGUARD_NVIDIA_SMI": ""})
    assert text.returncode == 0 and "0 errors" in text.stdout


def test_smoke_failure_in_the_checked_env(env: Path, tmp_path: Path) -> None:
    # pip's "torch" here is a stub package: import works, the DataLoader round trip cannot.
    check_envs.pip_install(env, channels.build_wheel(tmp_path / "wheels", "torch", "2.13.1"))
    rc, rep = check_json("-p", str(env), env={"ENVGUARD_NVIDIA_SMI": ""})
    assert rc == 7 and rep["smoke"]["exit_code"] == 7
    assert {"EG521", "EG522", "EG523"} <= codes(rep, "error")


def test_named_env_from_envguard_create_and_its_fingerprint(env: Path, tmp_path: Path) -> None:
    name = f"chk-{tmp_path.name}"[:40]
    made = envguard("create", "-n", name, "--lockfile", str(tmp_path / "conda-lock.yml"), "--no-check", "-q")
    assert made.returncode == 0, made.stderr
    rc, rep = check_json("-n", name, "--no-smoke", cwd=tmp_path)
    assert rc == 0, rep["findings"]
    assert rep["prefix"] == str(Path(os.environ["ENVGUARD_ENVS_DIR"]) / name)
    assert not {"EG515", "EG534"} & codes(rep)
    # the lock it was built from (recorded in its fingerprint) notices a package that went away, from anywhere
    prefix = Path(rep["prefix"])
    next((prefix / "conda-meta").glob("eglink-*.json")).unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    rc, rep = check_json("-n", name, "--no-smoke", cwd=elsewhere)
    assert rc == 1 and rep["lockfile"] == str(tmp_path / "conda-lock.yml") and "EG510" in codes(rep, "error")
    # that lock gone, the create fingerprint still notices it
    (tmp_path / "conda-lock.yml").rename(tmp_path / "moved.yml")
    rc, rep = check_json("-n", name, "--no-smoke", cwd=elsewhere)
    assert rc == 1 and rep["lockfile"] is None and "EG517" in codes(rep, "warning"), rep["findings"]
    f = next(f for f in rep["findings"] if f["code"] == "EG515")
    assert f["severity"] == "error" and "eglink missing" in f["message"]


def test_check_imports_stay_lazy(env: Path, tmp_path: Path) -> None:
    """Start-up cost: a check without a lock imports neither conda-lock nor rattler."""
    import subprocess
    import sys

    script = tmp_path / "probe_imports.py"
    script.write_text(
        "import sys\nfrom envguard.cli import run\n"
        f"code = run(['check', '-p', {str(env)!r}, '--no-smoke', '--format', 'json'])\n"
        "print('RESULT', code, 'conda_lock' in sys.modules, 'rattler' in sys.modules)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "RESULT 0 False False", out.stderr


# ---------------------------------------------------------------- pip torch stacks and CUDA wishes


def _pip_install_all(prefix: Path, wheels: list[Path]) -> None:
    import subprocess
    import sys as _sys

    proc = subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "-q", *map(str, wheels)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr + _sys.executable


PIP_STACK = [("torch", "2.13.0"), ("torchvision", "0.28.0"), ("triton", "3.7.0"), ("numpy", "2.3.5"),
             ("nvidia-cudnn-cu12", "9.10.2.21"), ("nvidia-cuda-runtime-cu12", "12.8.90")]


def test_a_pip_torch_stack_on_conda_python_is_a_supported_layout(channel_url: str, channel_factory,
                                                                 cache: Path, tmp_path: Path) -> None:
    """Only Python (and pip) from conda, the torch stack from pip: PyPI's own install. No conda package is
    shadowed, so no error: one info line names the layout (the old rules gave one error per wheel)."""
    wheels = [channels.build_wheel(tmp_path / "wheels", n, v) for n, v in PIP_STACK]
    prefix, _ = check_envs.make_env(channel_url, [f"python {HOST_PY}.*", "pip"], tmp_path / "env", cache)
    _pip_install_all(prefix, wheels)
    rc, rep = check_json("-p", str(prefix), "--no-smoke")
    assert rc == 0, rep["findings"]
    assert codes(rep, "error") == set() and codes(rep, "warning") == HOST_LINE_WARNINGS
    layout = [f for f in rep["findings"] if f["code"] == "EG520"]
    assert len(layout) == 1 and layout[0]["severity"] == "info" and "supported layout" in layout[0]["message"]
    assert "torch 2.13.0" in layout[0]["message"] and "2 CUDA wheels" in layout[0]["message"]

    # the real risk of that layout: conda CUDA libraries beside the wheels' own runtime
    cudart = channel_factory([{"name": "cuda-cudart", "version": "12.9.79", "build": "h0_0",
                               "subdir": channels.host_platform()}], name="cudalibs")
    mixed, _ = check_envs.make_env([channel_url, channels.channel_url(cudart)],
                                   [f"python {HOST_PY}.*", "pip", "cuda-cudart"], tmp_path / "mixed", cache)
    _pip_install_all(mixed, wheels)
    rc, rep = check_json("-p", str(mixed), "--no-smoke")
    f = next(f for f in rep["findings"] if f["code"] == "EG520")
    assert rc == 0 and f["severity"] == "warning" and "cuda-cudart 12.9.79" in f["message"], rep["findings"]

    # conda's CUDA 11 beside the CUDA 12 wheels: the mixing rule names both lines (an error); EG520's warning
    # about the same two runtimes is not said a second time
    tk = channel_factory([{"name": "cudatoolkit", "version": "11.8.0", "build": "h0_13",
                           "subdir": channels.host_platform()}], name="cuda11")
    eleven, _ = check_envs.make_env([channel_url, channels.channel_url(tk)],
                                    [f"python {HOST_PY}.*", "pip", "cudatoolkit"], tmp_path / "eleven", cache)
    _pip_install_all(eleven, wheels)
    rc, rep = check_json("-p", str(eleven), "--no-smoke")
    said = [(f["code"], f["severity"]) for f in rep["findings"] if f["code"] in ("EG520", "EG572")]
    assert rc == 1 and said == [("EG572", "error")], rep["findings"]
    f = next(f for f in rep["findings"] if f["code"] == "EG572")
    assert "cudatoolkit 11.8.0" in f["message"] and "nvidia-cudnn-cu12" in f["message"]


def test_pip_torchvision_in_condas_torch_stack_is_still_an_error(env: Path, tmp_path: Path) -> None:
    _pip_install_all(env, [channels.build_wheel(tmp_path / "wheels", "torchvision", "0.28.0")])
    rc, rep = check_json("-p", str(env), "--no-smoke")
    f = next(f for f in rep["findings"] if f["code"] == "EG520")
    assert rc == 1 and f["severity"] == "error" and "pytorch" in f["message"]


def test_cuda_version_beside_a_cpu_torch_is_not_a_wish_for_cuda(channel_url: str, cache: Path,
                                                                tmp_path: Path) -> None:
    """cupy/numba users pin cuda-version next to a deliberate CPU torch: no EG550 (the old rule read any
    cuda-version in the lock as "wants CUDA")."""
    specs = [f"python {HOST_PY}.*", "pytorch 2.13.0 *cpu*", "cuda-version 12.8.*", "pip"]
    prefix, records = check_envs.make_env(channel_url, specs, tmp_path / "env", cache)
    check_envs.write_lock(tmp_path / "conda-lock.yml", records)
    (tmp_path / "environment.yml").write_text("name: t\nchannels: [conda-forge]\ndependencies:\n"
                                              f"  - python={HOST_PY}\n  - pytorch=2.13.*=cpu*\n  - cuda-version=12.8\n")
    rc, rep = check_json("-p", str(prefix), "--no-smoke", cwd=tmp_path)
    errors = {f["code"] for f in rep["findings"] if f["severity"] == "error"}
    # the hand-made lock was not made from this spec, so it is also stale (EG516): that is all
    assert "EG550" not in codes(rep) and errors <= {"EG516"}, rep["findings"]
    assert rep["lockfile"] == str(tmp_path / "conda-lock.yml") and rep["torch"]["cpu"] is True


def test_import_of_a_file_no_installer_recorded_is_an_error(env: Path, tmp_path: Path) -> None:
    """A stray torch/ package in site-packages, written by no installer, shadows conda's pytorch."""
    from envguard.check import CheckOptions, run_check

    stray = env / f"lib/python{HOST_PY}/site-packages/torch/__init__.py"
    stray.parent.mkdir(parents=True)
    stray.write_text("__version__ = 'stray'\n")
    rep = run_check(CheckOptions(prefix=env, smoke=False, imports=True, driver_info_fn=lambda: None, cwd=tmp_path))
    f = next(f for f in rep.findings if f.code == "EG523" and f.package == "torch")
    assert f.severity.value == "error" and "a file no installer recorded" in f.message
    assert f.file == str(stray) and "conda's pytorch 2.13.0" in f.message


def test_a_core_package_from_an_unknown_installer_is_a_warning(env: Path) -> None:
    """A torchvision dist-info without an INSTALLER file (a copied tree, `setup.py install`): nothing records
    which files it owns. It shadows nothing conda installed, so EG524 warns."""
    meta = env / f"lib/python{HOST_PY}/site-packages/torchvision-0.28.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: torchvision\nVersion: 0.28.0\n")
    rc, rep = check_json("-p", str(env), "--no-smoke")
    f = next(f for f in rep["findings"] if f["code"] == "EG524")
    assert rc == 0 and f["severity"] == "warning" and f["package"] == "torchvision", rep["findings"]
    assert "no INSTALLER file" in f["message"]


def test_a_virtualenv_checked_against_a_conda_lock_gets_one_finding_and_a_fix_that_works(
        tmp_path: Path, channel_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A virtualenv holds none of a conda lock's packages: one EG510 names how many (not one per package,
    beside EG501's "conda checks skipped"), and its fix creates the environment at a new prefix and works
    as printed (create refuses to replace a directory that is not a conda environment)."""
    import re
    import shlex
    import subprocess
    import sys

    from support.create_fixtures import make_lock, write_env

    chan = channel_factory([{"name": f"egvenv-{c}", "version": "1.0", "noarch": "generic",
                             "files": {f"share/egvenv/{c}.txt": c}} for c in "abc"], name="venvlock")
    lockfile = make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), ["egvenv-a", "egvenv-b", "egvenv-c"]))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    rc, rep = check_json("-p", str(venv), "--lockfile", str(lockfile), "--no-smoke")
    eg510 = [f for f in rep["findings"] if f["code"] == "EG510"]
    assert rc == 1 and len(eg510) == 1, rep["findings"]
    assert "3 conda packages" in eg510[0]["message"] and "virtualenv" in eg510[0]["message"]
    [command] = re.findall(r"`(envguard create [^`]+)`", eg510[0]["fix"])
    argv = shlex.split(command)
    proc = envguard(*argv[1:])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "venv-conda" / "share" / "egvenv" / "c.txt").read_text() == "c"
