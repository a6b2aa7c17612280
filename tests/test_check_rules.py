"""The pure rules of envguard.check.checks, and the Python policy on real virtualenvs of other interpreters."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from check_envs import envguard
from envguard.check import checks
from envguard.prefix import inspect_prefix

PYENV = Path("/root/.pyenv/versions")


@pytest.mark.parametrize("build, cuda", [
    ("cuda126_generic_py311_h0_200", "12.6"),
    ("cuda118_py310h1234_300", "11.8"),
    ("py3.11_cuda12.1_cudnn8.9.2_0", "12.1"),
    ("cuda_py311_h0_0", "any"),
    ("cpu_generic_py311_h0_0", None),
    ("py3.11_cpu_0", None),
])
def test_cuda_from_build(build: str, cuda: str | None) -> None:
    assert checks.cuda_from_build(build) == cuda


def test_cuda_from_spec() -> None:
    assert checks.cuda_from_spec(["python=3.11", "pytorch=2.13=*cuda126*"], [], "e.yml")[0] == "12.6"
    assert checks.cuda_from_spec(["pytorch::pytorch-cuda=12.4"], [], "e.yml")[0] == "12.4"
    assert checks.cuda_from_spec(["conda-forge::pytorch-gpu"], [], "e.yml")[0] == "any"
    assert checks.cuda_from_spec(["pytorch=2.13=cpu*", "numpy"], ["requests"], "e.yml") == (None, "")
    assert checks.cuda_from_spec([], ["torch==2.13.0+cu126"], "e.yml")[0] == "12.6"


@pytest.mark.parametrize("cap, arch, min_arch, ok", [
    ("8.6", ["sm_75", "sm_80", "sm_90"], None, True),  # sm_80 cubins run on 8.6
    ("7.0", ["sm_75", "sm_80", "sm_90"], None, False),
    ("6.1", ["sm_50", "compute_50"], None, True),  # PTX JIT-compiles for newer GPUs
    ("9.0", ["sm_75", "sm_80", "sm_86"], None, False),
    ("10.3", ["sm_90", "sm_100a"], None, False),  # an arch-specific cubin runs on its exact device only
    ("6.1", [], "7.5", False),  # no arch list (no probe): the CUDA line's oldest arch decides
    ("8.0", [], "7.5", True),
])
def test_arch_supported(cap: str, arch: list[str], min_arch: str | None, ok: bool) -> None:
    assert checks.arch_supported(cap, arch, min_arch)[0] is ok


def test_core_patterns() -> None:
    for name in ("pytorch", "torch", "nvidia-cudnn-cu12", "cuda-cudart", "llvm-openmp", "numpy", "mkl"):
        assert checks.is_core(name)
    for name in ("requests", "torchmetrics", "pillow"):
        assert not checks.is_core(name)
    assert checks.is_core("requests", core=("requests",))


def _venv(version_glob: str, tmp_path: Path) -> Path:
    found = sorted(PYENV.glob(f"{version_glob}*/bin/python"))
    if not found:
        pytest.skip(f"no Python {version_glob} under {PYENV}")
    prefix = tmp_path / f"venv{version_glob}"
    subprocess.run([str(found[-1]), "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    return prefix


def test_python_310_plain_venv_warns_eol(tmp_path: Path) -> None:
    prefix = _venv("3.10", tmp_path)
    proc = envguard("check", "-p", str(prefix), "--no-smoke", "--format", "json")
    import json

    rep = json.loads(proc.stdout)
    f = next(f for f in rep["findings"] if f["code"] == "EG541")
    assert f["severity"] == "warning" and "2026-10-31" in f["message"] and "2.14" in f["message"]
    assert proc.returncode == 0 and rep["kind"] == "venv"


def test_python_312_plain_venv_is_advisory(tmp_path: Path) -> None:
    prefix = _venv("3.12", tmp_path)
    info = inspect_prefix(prefix)
    found = checks.rule_python(checks.CheckInput(info=info, platform="linux-64"))
    assert [(f.code, f.severity.value) for f in found] == [("EG540", "warning")]
    # the same Python in a conda environment, or with a lock, is an error
    found = checks.rule_python(checks.CheckInput(info=info, platform="linux-64", lock_packages=[]))
    assert [(f.code, f.severity.value) for f in found] == [("EG540", "error")]


def test_torch_build_from_probe_facts(tmp_path: Path) -> None:
    info = inspect_prefix(_venv("3.12", tmp_path))
    b = checks.torch_build(info, {"version": "2.13.0+cu126", "cuda": "12.6", "arch_flags": ["sm_80", "sm_90"]})
    assert (b.source, b.cuda, b.cpu, b.arch_list) == ("probe", "12.6", False, ("sm_80", "sm_90"))
    assert checks.torch_build(info).source == "none"
