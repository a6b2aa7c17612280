"""Each catalogue failure reproduced for real in a real DataLoader, then classified from the real message.

The probe's hidden ``--inject`` options make torch's own machinery fail (a lambda collate_fn under
spawn, a worker that SIGKILLs itself, RLIMIT_NOFILE=128, ...); nothing here fakes a message.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.require import require

from envguard.findings import Severity
from envguard.procsession import session_members
from envguard.smoke import SmokeResult, run_smoke

pytestmark = pytest.mark.slow  # each test starts the smoke probe in a fresh interpreter


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envguard", "smoke", "--python", sys.executable, *args],
                          capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=120)


def _run(*inject: str, quick: bool = True, timeout: float = 90, **kw: object) -> SmokeResult:
    args: list[str] = []
    for i in inject:
        args += ["--inject", i]
    return run_smoke(sys.executable, quick=quick, timeout=timeout, probe_args=args, **kw)  # type: ignore[arg-type]


def _errors(r: SmokeResult) -> dict[str, str]:
    return {f.code: f.message for f in r.findings if f.severity is Severity.ERROR}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process/shm semantics")


def test_lambda_collate_fn_under_spawn_is_pickling() -> None:
    r = _run("pickling")
    assert r.exit_code == 7 and not r.timed_out
    errs = _errors(r)
    assert set(errs) == {"pickling"}, r.findings
    assert "spawn" in errs["pickling"] and "pickle" in errs["pickling"].lower()
    # fork has no pickling step: its round trip still passes in the same run
    checks = {c["name"]: c["status"] for c in r.probe["checks"]}
    assert checks.get("dataloader:fork", "pass") == "pass" and checks["dataloader:spawn"] == "fail"
    assert "module level" in next(f.fix for f in r.findings if f.code == "pickling")


def test_dataset_slower_than_timeout_is_hang() -> None:
    r = _run("hang")
    errs = _errors(r)
    assert set(errs) == {"hang"}, r.findings
    assert "timed out after 1.0 seconds" in errs["hang"]
    assert r.exit_code == 7 and not r.timed_out


@linux_only
def test_worker_that_kills_itself_is_killed_via_cli_markdown() -> None:
    p = _cli("--quick", "--format", "markdown", env={"ENVGUARD_TESTING": "1", "ENVGUARD_PROBE_INJECT": "killed"})
    assert p.returncode == 7, p.stderr
    assert p.stdout.startswith("### envguard smoke")
    rows = [ln for ln in p.stdout.splitlines() if ln.startswith("| ❌")]
    assert len(rows) == 1 and "`killed`" in rows[0], p.stdout
    assert "SIGKILL" in rows[0] or "signal: Killed" in rows[0], rows[0]
    assert "| dataloader:fork | fail |" in p.stdout


@linux_only
def test_worker_bus_error_is_shm() -> None:
    r = _run("shm-sigbus")
    errs = _errors(r)
    assert set(errs) == {"shm"}, r.findings
    assert "SIGBUS" in errs["shm"] or "Bus error" in errs["shm"]
    assert "--shm-size" in next(f.fix for f in r.findings if f.code == "shm")


@linux_only
def test_nofile_128_with_file_descriptor_strategy_is_fd_limit() -> None:
    r = _run("fd-limit")
    errs = _errors(r)
    assert set(errs) == {"fd-limit"}, r.findings
    assert "Too many open files" in errs["fd-limit"]
    # the limit was restored for the rest of the probe: the normal round trip passed
    assert {c["name"]: c["status"] for c in r.probe["checks"]}["dataloader:fork"] == "pass"


def test_torch_without_numpy_bridge_is_numpy_abi_via_cli_text() -> None:
    p = _cli("--quick", env={"ENVGUARD_TESTING": "1", "ENVGUARD_PROBE_INJECT": "numpy-abi", "COLUMNS": "250"})
    assert p.returncode == 7, p.stderr
    assert "envguard smoke" in p.stdout and "numpy-interop" in p.stdout
    assert "numpy-abi" in p.stdout and "Numpy is not available" in p.stdout
    assert "1 error" in p.stdout


def test_cuda_in_a_bad_fork_worker_is_cuda_fork() -> None:
    r = _run("cuda-fork")
    errs = _errors(r)
    assert set(errs) == {"cuda-fork"}, r.findings
    assert "Cannot re-initialize CUDA in forked subprocess" in errs["cuda-fork"]


@linux_only
def test_second_openmp_runtime_and_kmp_duplicate_lib_ok_are_omp_dup_warnings(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    require(importlib.util.find_spec("threadpoolctl") is not None, "threadpoolctl not installed")
    # importing threadpoolctl anywhere in this test session sets it in os.environ
    monkeypatch.delenv("KMP_DUPLICATE_LIB_OK", raising=False)
    r = _run("omp-dup")
    assert r.exit_code == 0
    omp = [f for f in r.findings if f.code == "omp-dup"]
    assert len(omp) == 1 and omp[0].severity is Severity.WARNING and "2 OpenMP runtimes" in omp[0].message

    # Also: a sitecustomize that prints to stdout before the probe starts; the JSON document is still found.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("print('hello from sitecustomize')\n")
    r = run_smoke(sys.executable, quick=True, env={"KMP_DUPLICATE_LIB_OK": "TRUE", "PYTHONPATH": str(site)})
    omp = [f for f in r.findings if f.code == "omp-dup"]
    assert [f.message.split(" is set")[0] for f in omp] == ["KMP_DUPLICATE_LIB_OK=TRUE"]
    assert r.exit_code == 0 and r.probe["ok"] is True


def _unshare_works() -> bool:
    if not shutil.which("unshare") or not sys.platform.startswith("linux"):
        return False
    try:
        p = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=2m tmpfs /dev/shm"],
                           capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return p.returncode == 0


@pytest.mark.requires(_unshare_works(), "needs `unshare -m` and tmpfs mounts (root)")
def test_tiny_dev_shm_is_shm(tmp_path: Path) -> None:
    """A private 2 MB /dev/shm and 8 MiB batches: torch's own allocation fails."""
    wrapper = tmp_path / "python-tiny-shm"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"exec unshare -m sh -c 'mount -t tmpfs -o size=2m tmpfs /dev/shm && exec \"$0\" \"$@\"' "
        f"{sys.executable} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    r = run_smoke(wrapper, quick=True, probe_args=["--inject", "shm-big"], timeout=90)
    assert r.probe["limits"]["shm"]["total"] <= 2 * 1024 * 1024
    errs = _errors(r)
    assert set(errs) == {"shm"}, r.findings
    assert "DataLoader" in errs["shm"] and ("shared memory" in errs["shm"] or "SIGBUS" in errs["shm"])
    assert r.exit_code == 7


@linux_only
def test_probe_that_never_ends_times_out_exit_124_and_leaves_no_process() -> None:
    """Through the real command: main and workers ignore SIGTERM, so the runner must escalate to SIGKILL
    and stop the whole session."""
    env = dict(os.environ, ENVGUARD_TESTING="1", ENVGUARD_PROBE_INJECT="never-ends")
    p = subprocess.run([sys.executable, "-m", "envguard", "smoke", "--python", sys.executable, "--quick", "--timeout",
                        "6", "--format", "json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 124, p.stderr
    r = json.loads(p.stdout)
    assert r["timed_out"] and r["exit_code"] == 124
    assert r["returncode"] == -9  # SIGTERM was ignored, SIGKILL ended it
    assert [f["code"] for f in r["findings"]] == ["hang"] and "6 s" in r["findings"][0]["message"]
    assert "never-ends" in r["findings"][0]["message"]  # the phase it was stuck in
    probe_pid = min(r["pids"])
    assert len(set(r["pids"]) - {probe_pid}) >= 2  # the probe's two DataLoader workers were known and stopped
    assert session_members(probe_pid) == []
    assert not [pid for pid in r["pids"] if _alive(pid)]


@linux_only
def test_shm_files_left_by_killed_probe_are_removed_and_others_kept(tmp_path: Path) -> None:
    """file_system strategy keeps batches in named /dev/shm files; killing the probe strands them. The probe
    unwinds on SIGTERM and frees its own files, so its shm-leak round ignores SIGTERM (its workers too): only the
    runner's SIGKILL ends it, and the files are really left for the runner to remove."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    decoys = [Path(f"/dev/shm/torch_{holder.pid}_999_0"), Path(f"/dev/shm/envguard-test-{os.getpid()}")]
    try:
        for d in decoys:
            d.write_bytes(b"x")
        r = _run("shm-leak", timeout=8)
        assert r.timed_out and r.exit_code == 124
        assert "stalled" in r.findings[0].message
        assert r.returncode == -9  # SIGTERM was ignored, SIGKILL ended it: nothing of the probe freed its files
        # the kill really stranded batch files and the runner removed them (else the checks below are vacuous)
        assert r.shm_removed and all(Path(p).name.startswith("torch_") for p in r.shm_removed), r.shm_removed
        ours = [n for n in os.listdir("/dev/shm") if any(n.startswith(f"torch_{p}_") for p in r.pids)]
        assert ours == []
        assert all(d.exists() for d in decoys)
        assert all(Path(p).name.split("_")[1] != str(holder.pid) for p in r.shm_removed)
    finally:
        for d in decoys:
            d.unlink(missing_ok=True)
        holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(10)
