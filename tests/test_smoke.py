"""The smoke runner: real probe runs, target resolution, /dev/shm hygiene, the classifier's GPU branches
(fed with probe documents shaped like a GPU machine's), and the `envguard smoke` command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard import catalog
from envguard.compat import arch_covers
from envguard.driver import DriverInfo
from envguard.envs import resolve_python
from envguard.errors import UserError
from envguard.findings import Severity
from envguard.procsession import cleanup_shm
from envguard.smoke import classify, run_smoke

REQUIRED_IDS = ["shm", "fd-limit", "pickling", "cuda-fork", "hang", "killed", "pin-cpu", "driver-old", "arch",
                "cpu-build", "pip-over-conda", "omp-dup", "numpy-abi", "mkl-symbol", "cudnn", "nccl"]


def _torch_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# ---------------------------------------------------------------- real runs


@pytest.mark.slow
def test_quick_smoke_with_distributed_passes_in_the_test_venv() -> None:
    r = run_smoke(sys.executable, quick=True, distributed=True)
    assert r.exit_code == 0 and not r.timed_out, r.findings
    assert r.probe["ok"] is True
    assert not [f for f in r.findings if f.severity is not Severity.INFO]
    statuses = {c["name"]: c["status"] for c in r.probe["checks"]}
    assert statuses["import-torch"] == "pass" and statuses["numpy-interop"] == "pass"
    # --quick: one start method
    assert len([n for n in statuses if n.startswith("dataloader:")]) == 1
    assert all(s == "pass" for n, s in statuses.items() if n.startswith("dataloader:"))
    if not _torch_cuda():
        # pinned memory is never reported as passed on a CPU-only machine
        assert statuses["pinned-memory"] == "not-exercised"
        pin = [f for f in r.findings if f.code == "pin-cpu"]
        assert len(pin) == 1 and pin[0].severity is Severity.INFO and "not exercised" in pin[0].message
    else:  # a GPU host: the pinned copy really ran and passed
        assert statuses["pinned-memory"] == "pass"
        assert not [f for f in r.findings if f.code == "pin-cpu"]
    assert r.duration > 0 and r.returncode == 0
    # torch.distributed: world size 2 on local processes, the all-reduce result checked
    d = r.probe["distributed"]
    assert statuses["distributed"] == "pass"
    assert d["world_size"] == 2 and d["backend"] in ("gloo", "nccl")
    assert sorted(x["rank"] for x in d["results"]) == [0, 1]
    assert all(x["value"] == [3.0] * 4 for x in d["results"])  # 1 + 2 on every element


@pytest.mark.slow
@pytest.mark.skipif(_torch_cuda(), reason="CPU-only behaviour")
def test_require_cuda_on_a_cpu_build_fails_as_cpu_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = _fake_smi(tmp_path, driver="550.54.15", cuda="12.4")
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", str(smi))
    r = run_smoke(sys.executable, quick=True, require_cuda=True)
    assert r.exit_code == 7
    errs = [f for f in r.findings if f.severity is Severity.ERROR]
    assert [f.code for f in errs] == ["cpu-build"]
    assert "CPU build" in errs[0].message and "550.54.15" in errs[0].message  # the host driver is named
    assert r.driver is not None and r.driver["source"] == "nvidia-smi"


def test_missing_interpreter_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no executable Python interpreter"):
        run_smoke(tmp_path / "nope" / "python")


@pytest.mark.slow
def test_interpreter_without_torch_is_torch_missing(tmp_path: Path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    r = run_smoke(venv / "bin" / "python", quick=True)
    assert r.exit_code == 7
    assert [f.code for f in r.findings] == ["torch-missing"]
    assert "import torch failed" in r.findings[0].message


@pytest.mark.slow
def test_crashing_interpreter_is_classified_from_stderr(tmp_path: Path) -> None:
    """No JSON at all (an abort, as OMP #15 does): the stderr text decides."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'OMP: Error #15: Initializing libiomp5.so, but found libiomp5.so already "
                    "initialized.' >&2\nkill -ABRT $$\n")
    fake.chmod(0o755)
    r = run_smoke(fake, quick=True)
    assert r.exit_code == 7 and r.returncode == -6
    assert [f.code for f in r.findings] == ["omp-dup"]
    assert "SIGABRT" in r.findings[0].message


# ---------------------------------------------------------------- target resolution


def _fake_prefix(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    return root


def test_resolve_python_prefix_name_path_and_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pre = _fake_prefix(tmp_path / "pre")
    assert resolve_python(pre, None, None) == pre / "bin" / "python"
    envs = tmp_path / "envs"
    _fake_prefix(envs / "myenv")
    monkeypatch.setenv("ENVGUARD_ENVS_DIR", str(envs))
    assert resolve_python(None, "myenv", None) == envs / "myenv" / "bin" / "python"
    conda_envs = tmp_path / "conda" / "envs"
    _fake_prefix(conda_envs / "other")
    monkeypatch.setenv("CONDA_ENVS_PATH", str(conda_envs))
    assert resolve_python(None, "other", None) == conda_envs / "other" / "bin" / "python"
    assert resolve_python(None, None, Path(sys.executable)) == Path(sys.executable)
    # no target: never envguard's own interpreter; the active conda env, else the one environment.yml names
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="no environment to act on"):
        resolve_python(None, None, None)
    (tmp_path / "environment.yml").write_text("name: myenv\ndependencies: [python]\n")
    found = resolve_python(None, None, None)
    assert found == envs / "myenv" / "bin" / "python" and "environment.yml" in found.why
    monkeypatch.setenv("CONDA_PREFIX", str(pre))
    found = resolve_python(None, None, None)
    assert found == pre / "bin" / "python" and "CONDA_PREFIX" in found.why


@pytest.mark.parametrize("kwargs, match", [
    ({"prefix": "missing"}, "prefix does not exist"),
    ({"prefix": "empty"}, "no Python interpreter in this environment"),
    ({"name": "nosuchenv"}, "no environment named 'nosuchenv'"),
    ({"name": "a/b"}, "invalid environment name"),
    ({"python": "missing/python"}, "no executable Python interpreter"),
    ({"prefix": "empty", "name": "x"}, "were both given"),
])
def test_resolve_python_errors(tmp_path: Path, kwargs: dict, match: str) -> None:
    (tmp_path / "empty").mkdir()
    args = {k: (tmp_path / v if k in ("prefix", "python") else v) for k, v in kwargs.items()}
    with pytest.raises(UserError, match=match):
        resolve_python(args.get("prefix"), args.get("name"), args.get("python"))


# ---------------------------------------------------------------- /dev/shm hygiene (real files, real processes)


HOLDER = """
import mmap, os, sys, time
fds = [os.open(sys.argv[1], os.O_RDWR)]
f = open(sys.argv[2], "r+b")
m = mmap.mmap(f.fileno(), 0)
f.close()                      # only the mapping keeps it
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
def test_cleanup_removes_only_new_unused_files_named_after_our_pids(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    ours, other = 4_000_001, 4_000_002
    old = shm / f"torch_{ours}_1_0"
    old.write_bytes(b"x")
    before = set(os.listdir(shm))
    stale = shm / f"torch_{ours}_2_0"  # left behind by one of our (dead) workers
    open_fd = shm / f"torch_{ours}_3_0"  # ours by name, but another process has it open
    mapped = shm / f"torch_{ours}_4_0"  # ours by name, mapped by another process
    foreign = shm / f"torch_{other}_5_0"  # someone else's
    unrelated = shm / "sem.mp-abc"
    for p in (stale, open_fd, mapped, foreign, unrelated):
        p.write_bytes(b"\0" * 4096)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(open_fd), str(mapped)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"  # type: ignore[union-attr]
        removed = cleanup_shm(before, {ours}, shm_dir=str(shm))
        assert removed == [str(stale)]
        assert not stale.exists()
        assert all(p.exists() for p in (old, open_fd, mapped, foreign, unrelated))
    finally:
        holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(10)
    # once nobody holds them, our files go too
    assert sorted(cleanup_shm(before, {ours}, shm_dir=str(shm))) == sorted([str(open_fd), str(mapped)])


# ---------------------------------------------------------------- classifier: GPU branches with fake probe documents


def _doc(*, cuda: str | None = "12.6", available: bool = True, devices: list | None = None,
         arch: list | None = None, error: str | None = None, checks: list | None = None) -> dict:
    return {
        "ok": True,
        "torch": {"version": "2.13.0", "cuda": cuda, "arch_flags": arch or []},
        "cuda": {"available": available, "built": cuda is not None, "devices": devices or [],
                 "arch_list": arch or [], **({"error": error} if error else {})},
        "checks": checks or [{"name": "import-torch", "status": "pass"}],
        "limits": {"shm": {"path": "/dev/shm", "free": 8 << 30, "total": 8 << 30, "need": 1 << 20},
                   "nofile": {"soft": 65536, "hard": 65536}, "sharing_strategy": "file_descriptor",
                   "openmp": [], "foreign_cuda_libs": [], "nvidia_dists": []},
    }


H200 = {"index": 0, "name": "NVIDIA H200", "capability": [9, 0]}
K80 = {"index": 0, "name": "Tesla K80", "capability": [3, 7]}
ARCH_13 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


def _codes(findings: list, severity: Severity | None = None) -> list[str]:
    return [f.code for f in findings if severity is None or f.severity is severity]


def test_gpu_supported_arch_is_clean_and_old_gpu_is_arch() -> None:
    assert classify(_doc(cuda="13.0", devices=[H200], arch=ARCH_13)) == []
    fs = classify(_doc(cuda="13.0", devices=[K80], arch=ARCH_13))
    assert _codes(fs, Severity.ERROR) == ["arch"] and "sm_37" in fs[0].message and "Tesla K80" in fs[0].message


@pytest.mark.parametrize("cap, arch, ok", [
    ((8, 6), ["sm_80"], True),  # same major, higher minor: the sm_80 cubin runs
    ((8, 0), ["sm_86"], False),  # lower minor: no
    ((9, 0), ["sm_80", "compute_80"], True),  # PTX JIT for newer devices
    ((12, 0), ["sm_80", "sm_90"], False),
    ((9, 0), ["sm_90a"], True),
    ((7, 0), ["sm_75", "compute_75"], False),
])
def test_arch_supported(cap: tuple[int, int], arch: list[str], ok: bool) -> None:
    assert arch_covers(cap, arch) is ok


def test_cuda_build_without_driver_vs_old_driver_vs_cpu_build() -> None:
    no_gpu = _doc(cuda="12.6", available=False, error="RuntimeError: Found no NVIDIA driver on your system.")
    fs = classify(no_gpu, require_cuda=True, driver=None, driver_checked=True)
    assert _codes(fs, Severity.ERROR) == ["no-driver"] and "CUDA 12.6" in fs[0].message
    # without --require-cuda the same facts only warn
    assert _codes(classify(no_gpu, driver=None, driver_checked=True), Severity.WARNING) == ["no-driver"]

    old = DriverInfo("470.57.02", "11.4", [("Tesla T4", "7.5")], "nvidia-smi")
    fs = classify(_doc(cuda="12.6", available=False, error="RuntimeError: The NVIDIA driver on your system is too "
                       "old (found version 11040)."), require_cuda=True, driver=old, driver_checked=True)
    assert _codes(fs, Severity.ERROR) == ["driver-old"]
    assert "470.57.02" in fs[0].message and "525.60.13" in fs[0].message  # from compat.yaml's min_driver

    fs = classify(_doc(cuda=None, available=False), require_cuda=True, driver=old, driver_checked=True)
    assert _codes(fs, Severity.ERROR) == ["cpu-build"] and "470.57.02" in fs[0].message
    fs = classify(_doc(cuda=None, available=False))
    assert _codes(fs) == ["cpu-build"] and fs[0].severity is Severity.INFO
    assert fs[0].fix == ""  # a CPU build with no NVIDIA driver in sight is a choice: no CUDA advice
    fs = classify(_doc(cuda=None, available=False), driver=old, driver_checked=True)
    assert _codes(fs) == ["cpu-build"] and "470.57.02" in fs[0].message and "cuda12" in fs[0].fix


def test_new_enough_driver_but_no_cuda_is_classified_from_the_init_error() -> None:
    ok = DriverInfo("550.54.15", "12.4", [("NVIDIA A100", "8.0")], "nvml")
    fs = classify(_doc(cuda="12.6", available=False, error="RuntimeError: CUDA driver version is insufficient "
                       "for CUDA runtime version"), require_cuda=True, driver=ok, driver_checked=True)
    assert _codes(fs) == ["driver-old"]
    fs = classify(_doc(cuda="12.6", available=False, error="RuntimeError: no CUDA-capable device is detected"),
                  require_cuda=True, driver=ok, driver_checked=True)
    assert _codes(fs) == ["cuda-unavailable"]


def test_failed_gpu_checks_are_errors() -> None:
    checks = [{"name": "import-torch", "status": "pass"},
              {"name": "pinned-memory", "status": "fail",
               "error": "AssertionError: pinned non_blocking host-to-device copy gave wrong data"},
              {"name": "cuda-matmul", "status": "fail",
               "error": "RuntimeError: CUDA error: no kernel image is available for execution on the device"},
              {"name": "distributed", "status": "fail", "error": "rank 1: DistBackendError: NCCL error: "
               "ncclSystemError: System call (e.g. socket, malloc) or external library call failed"}]
    fs = classify(_doc(cuda="12.6", devices=[H200], arch=["sm_90"], checks=checks))
    assert _codes(fs, Severity.ERROR) == ["probe-error", "arch", "nccl"]
    assert "pinned host-to-device copy failed" in fs[0].message


@pytest.mark.parametrize("error, expected", [
    ("ImportError: /x/libtorch_cpu.so: undefined symbol: iJIT_NotifyEvent", "mkl-symbol"),
    ("ImportError: /x/libtorch_cuda.so: undefined symbol: ncclCommRegister", "nccl"),
    ("ImportError: /x/_C.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", "pip-over-conda"),
    ("OSError: libcudnn.so.9: cannot open shared object file: No such file or directory", "cudnn"),
    ("ImportError: A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.0 as it may crash.",
     "numpy-abi"),
    ("ModuleNotFoundError: No module named 'torch'", "torch-missing"),
])
def test_import_failures_are_classified(error: str, expected: str) -> None:
    doc = _doc(checks=[{"name": "import-torch", "status": "fail", "error": error}])
    doc["torch"] = None
    fs = classify(doc)
    assert _codes(fs) == [expected]
    assert fs[0].fix == catalog.get(expected).fix


def test_worker_exit_without_status_uses_the_workers_last_words() -> None:
    doc = {"torch": None, "checks": [{"name": "dataloader:fork", "status": "fail",
                                      "error": "RuntimeError: DataLoader worker (pid(s) 1) exited unexpectedly"}]}
    bus = ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
           "memory (shm).")
    assert _codes(classify(doc, stderr=bus)) == ["shm"]
    assert _codes(classify(doc, stderr="")) == ["killed"]
    doc["checks"][0]["detail"] = {"worker_signals": ["SIGBUS"]}
    assert _codes(classify(doc)) == ["shm"]


def test_limit_findings() -> None:
    doc = _doc(cuda=None, available=False)
    doc["limits"].update({"shm": {"path": "/dev/shm", "free": 64 << 20, "total": 64 << 20, "need": 1 << 20},
                          "nofile": {"soft": 1024, "hard": 4096}})
    fs = classify(doc)
    assert {f.code: f.severity for f in fs if f.code in ("shm", "fd-limit")} == {
        "shm": Severity.WARNING, "fd-limit": Severity.WARNING}
    doc["limits"]["shm"]["need"] = 128 << 20
    assert [f.severity for f in classify(doc) if f.code == "shm"] == [Severity.ERROR]
    doc = _doc(cuda="12.6", devices=[H200], arch=["sm_90"])
    doc["limits"]["foreign_cuda_libs"] = ["/usr/local/cuda/lib64/libnccl.so.2"]
    doc["limits"]["nvidia_dists"] = ["/sp/nvidia_cudnn_cu12-9.1.dist-info", "/sp/nvidia_cudnn_cu11-8.9.dist-info"]
    assert sorted(_codes(classify(doc), Severity.WARNING)) == ["cudnn", "nccl"]


def test_catalogue_has_every_required_case_with_a_fix() -> None:
    for cid in REQUIRED_IDS:
        case = catalog.get(cid)
        assert case.id == cid and case.title and len(case.fix) > 20
    with pytest.raises(KeyError, match="unknown failure id"):
        catalog.get("nope")


def test_timeout_and_crash_classification() -> None:
    fs = classify(None, timed_out=True, timeout=30, phase="dataloader:spawn")
    assert _codes(fs) == ["hang"] and "30 s" in fs[0].message and "dataloader:spawn" in fs[0].message
    fs = classify(None, stderr="Segmentation fault", returncode=-11, phase="import-torch")
    assert _codes(fs) == ["probe-error"] and "SIGSEGV" in fs[0].message and "import-torch" in fs[0].message


# ---------------------------------------------------------------- driver facts feed the classifier (fake nvidia-smi)


def _fake_smi(tmp_path: Path, *, driver: str, cuda: str, name: str = "NVIDIA H200", cap: str = "9.0") -> Path:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir(parents=True, exist_ok=True)
    smi.write_text(f"""#!/bin/sh
case "$1" in
  --query-gpu=*) echo "{driver}, {name}, {cap}" ;;
  "") echo "| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: {cuda}     |" ;;
  *) exit 2 ;;
esac
""")
    smi.chmod(0o755)
    return smi


def test_old_driver_from_fake_nvidia_smi_is_driver_old(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from envguard.driver import get_driver_info

    smi = _fake_smi(tmp_path, driver="470.57.02", cuda="11.4", name="Tesla T4", cap="7.5")
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", str(smi))
    drv = get_driver_info()
    fs = classify(_doc(cuda="12.6", available=False), require_cuda=True, driver=drv, driver_checked=True)
    assert _codes(fs) == ["driver-old"]
    monkeypatch.setenv("ENVGUARD_NVIDIA_SMI", str(tmp_path / "absent"))
    fs = classify(_doc(cuda="12.6", available=False), require_cuda=True, driver=get_driver_info(),
                  driver_checked=True)
    assert _codes(fs) == ["no-driver"]


# ---------------------------------------------------------------- a real GPU


@pytest.mark.slow
@pytest.mark.gpu
@pytest.mark.requires(_torch_cuda(), "needs a CUDA GPU", allowed="gpu")
def test_real_gpu_pinned_copy_and_matmul() -> None:
    r = run_smoke(sys.executable, quick=True, require_cuda=True)
    statuses = {c["name"]: c for c in r.probe["checks"]}
    assert statuses["pinned-memory"]["status"] == "pass"
    assert statuses["pinned-memory"]["detail"]["pinned_gbps"] > 0
    assert statuses["cuda-matmul"]["status"] == "pass"
    assert r.exit_code == 0, r.findings


# ---------------------------------------------------------------- the command


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "envguard", "smoke", *args], capture_output=True, text=True,
                          env=full, timeout=timeout)


@pytest.mark.slow
def test_cli_bad_input_exits_2() -> None:
    for args, text in ((["--format", "xml"], "unknown format"), (["--python", "/no/such/python"], "no executable"),
                       (["-n", "x", "-p", "/tmp"], "both given")):
        p = _cli(*args)
        assert p.returncode == 2 and text in p.stderr and "Traceback" not in p.stderr, (args, p.stderr)


def test_old_driver_minimum_follows_the_hosts_os(monkeypatch: pytest.MonkeyPatch) -> None:
    # the driver smoke sees is this host's: a Windows host is held to the Windows minimum, not Linux's
    import envguard.platforms

    old = DriverInfo("470.57.02", "11.4", [("Tesla T4", "7.5")], "nvidia-smi")
    doc = _doc(cuda="12.6", available=False, error="RuntimeError: The NVIDIA driver on your system is too old")
    monkeypatch.setattr(envguard.platforms, "host_platform", lambda: "win-64")
    fs = classify(doc, require_cuda=True, driver=old, driver_checked=True)
    assert _codes(fs, Severity.ERROR) == ["driver-old"] and "527.41" in fs[0].message
    monkeypatch.setattr(envguard.platforms, "host_platform", lambda: "linux-64")
    fs = classify(doc, require_cuda=True, driver=old, driver_checked=True)
    assert "525.60.13" in fs[0].message
