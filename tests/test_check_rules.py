"""The pure rules of envguard.check.checks, and the Python policy on real virtualenvs of other interpreters."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support.check_envs import envguard
from support.require import require

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
    require(found, f"no Python {version_glob} under {PYENV}")
    prefix = tmp_path / f"venv{version_glob}"
    subprocess.run([str(found[-1]), "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    return prefix


@pytest.mark.slow
def test_python_310_plain_venv_warns_eol(tmp_path: Path) -> None:
    prefix = _venv("3.10", tmp_path)
    proc = envguard("check", "-p", str(prefix), "--no-smoke", "--format", "json")
    import json

    rep = json.loads(proc.stdout)
    f = next(f for f in rep["findings"] if f["code"] == "EG541")
    assert f["severity"] == "warning" and "2026-10-31" in f["message"] and "2.14" in f["message"]
    assert proc.returncode == 0 and rep["kind"] == "venv"


@pytest.mark.slow
def test_python_312_plain_venv_is_advisory(tmp_path: Path) -> None:
    prefix = _venv("3.12", tmp_path)
    info = inspect_prefix(prefix)
    found = checks.rule_python(checks.CheckInput(info=info, platform="linux-64"))
    assert [(f.code, f.severity.value) for f in found] == [("EG540", "warning")]
    # the same Python in a conda environment, or with a lock, is an error
    found = checks.rule_python(checks.CheckInput(info=info, platform="linux-64", lock_packages=[]))
    assert [(f.code, f.severity.value) for f in found] == [("EG540", "error")]


@pytest.mark.slow
def test_torch_build_from_probe_facts(tmp_path: Path) -> None:
    info = inspect_prefix(_venv("3.12", tmp_path))
    b = checks.torch_build(info, {"version": "2.13.0+cu126", "cuda": "12.6", "arch_flags": ["sm_80", "sm_90"]})
    assert (b.source, b.cuda, b.cpu, b.arch_list) == ("probe", "12.6", False, ("sm_80", "sm_90"))
    assert checks.torch_build(info).source == "none"


# --------------------------------------------------------------------------- CUDA truth

from envguard import catalog, compat  # noqa: E402
from envguard.prefix import Dist, PrefixInfo  # noqa: E402


def _venv_with_torch(version: str, *extra: tuple[str, str]) -> PrefixInfo:
    sp = "lib/python3.11/site-packages"
    dists = [Dist("torch", version, f"{sp}/torch-{version}.dist-info", "pip", "pip")]
    dists += [Dist(n, v, f"{sp}/{n}-{v}.dist-info", "pip", "pip") for n, v in extra]
    return PrefixInfo(Path("/opt/venv"), is_conda=False, is_venv=True, python_version="3.11.9",
                      site_packages=[sp], dists=dists)


def _cuda_codes(info: PrefixInfo, gpus: list[tuple[str, str]], driver: str = "575.51.03",
                platform: str = "linux-64") -> list[tuple[str, str]]:
    inp = checks.CheckInput(info=info, platform=platform, gpu=checks.GpuFacts(driver, tuple(gpus)))
    return [(f.code, f.message) for f in checks.rule_cuda(inp)]


@pytest.mark.parametrize("torch, gpu, cap, ok", [
    # a cu126 wheel has no Blackwell kernels: an RTX 5090 (sm_120) is not covered (the old per-major minimum
    # passed it silently)
    ("2.9.0+cu126", "NVIDIA GeForce RTX 5090", "12.0", False),
    ("2.9.0+cu126", "NVIDIA H100", "9.0", True),
    ("2.9.0+cu126", "Tesla P100", "6.0", True),
    # cu128 wheels: sm_70+ in 2.8-2.10 (a GTX 1080, sm_61, is not covered; a V100, sm_70, exactly the oldest, is),
    # sm_75+ in 2.7 and 2.11
    ("2.9.0+cu128", "NVIDIA GeForce GTX 1080", "6.1", False),
    ("2.9.0+cu128", "Tesla V100-SXM2-16GB", "7.0", True),
    ("2.11.0+cu128", "Tesla V100-SXM2-16GB", "7.0", False),
    ("2.11.0+cu128", "Tesla T4", "7.5", True),
    ("2.11.0+cu128", "NVIDIA GeForce RTX 5090", "12.0", True),
    ("2.13.0+cu130", "Tesla T4", "7.5", True),  # CUDA 13: exactly sm_75 is enough
    ("2.13.0+cu130", "Tesla V100-SXM2-16GB", "7.0", False),
])
def test_arch_verdict_uses_the_builds_own_architectures(torch: str, gpu: str, cap: str, ok: bool) -> None:
    found = _cuda_codes(_venv_with_torch(torch), [(gpu, cap)])
    arch = [m for c, m in found if c == "EG552"]
    assert (not arch) is ok, found
    if arch:
        assert gpu in arch[0] and "PyPI's CUDA" in arch[0]


def test_arch_and_driver_boundaries() -> None:
    """A GPU exactly at a build's oldest architecture runs it; a driver exactly at the minimum is new enough."""
    assert checks.arch_supported("5.0", [], "5.0") == (True, "")
    assert checks.arch_supported("3.7", [], "5.0")[0] is False
    assert checks.arch_supported("7.5", ["sm_75", "sm_80"], None) == (True, "")
    rng = compat.load().arch("conda-forge", "12.9", "2.12.0")
    assert rng is not None and rng.covers((5, 0)) and not rng.covers((3, 7)) and rng.covers((12, 1))
    info = _venv_with_torch("2.9.0+cu126")
    assert _cuda_codes(info, [("Tesla P100", "6.0")], driver="525.60.13") == []
    assert [c for c, _ in _cuda_codes(info, [("Tesla P100", "6.0")], driver="525.60.12")] == ["EG551"]
    # Windows drivers are numbered apart: 527.41 is the CUDA 12 minimum there
    assert _cuda_codes(info, [("Tesla P100", "6.0")], driver="527.41", platform="win-64") == []
    assert [c for c, _ in _cuda_codes(info, [("Tesla P100", "6.0")], driver="526.98",
                                      platform="win-64")] == ["EG551"]


def test_probe_arch_list_outranks_the_data() -> None:
    info = _venv_with_torch("2.9.0+cu126")
    probe = {"version": "2.9.0+cu126", "cuda": "12.6", "arch_list": ["sm_90", "sm_100", "sm_120"]}
    inp = checks.CheckInput(info=info, platform="linux-64", probe=probe,
                            gpu=checks.GpuFacts("575.51.03", (("NVIDIA GeForce RTX 5090", "12.0"),)))
    assert [f.code for f in checks.rule_cuda(inp)] == []  # a custom build that has the kernels


def test_wants_cuda_comes_from_the_torch_build_not_cuda_version() -> None:
    from envguard.model import Package

    cpu_with_cupy = [Package("pytorch", "2.13.0", "conda", build="cpu_generic_py311_h0_0"),
                     Package("cuda-version", "12.9", "conda", build="h4f385c5_3"),
                     Package("cupy", "13.4.0", "conda", build="py311h0_0")]
    assert checks.cuda_from_packages(cpu_with_cupy) == (None, "")
    assert checks.cuda_from_spec(["python=3.11", "pytorch=2.13=cpu*", "cuda-version=12.9", "cupy"], [],
                                 "e.yml") == (None, "")
    cuda = [Package("pytorch", "2.12.0", "conda", build="cuda129_mkl_py311_h49b8cc7_300"),
            Package("cuda-version", "12.9", "conda", build="h4f385c5_3")]
    assert checks.cuda_from_packages(cuda)[0] == "12.9"
    gpu = [Package("pytorch", "2.9.1", "conda", build="cuda_mkl_py312_h0_302"),
           Package("pytorch-gpu", "2.9.1", "conda", build="cuda129_mkl_h0_302")]
    assert checks.cuda_from_packages(gpu)[0] == "12.9"
    assert checks.cuda_from_spec(["pytorch-gpu=2.9"], [], "e.yml")[0] == "any"
    assert checks.cuda_from_spec(["pytorch=2.13=cuda12*"], [], "e.yml")[0] == "12"


def test_fix_texts_never_offer_lock_cuda_as_a_way_to_pin_a_build() -> None:
    """`envguard lock --cuda X.Y` sets the driver the solve assumes (__cuda); it pins no cuda-version and
    picks no build. The fixes of the CUDA cases must say what does: cuda-version and the build guard."""
    for case in ("driver-old", "cpu-build", "arch", "no-driver", "pip-over-conda"):
        fix = catalog.get(case).fix
        assert not re.search(r"envguard lock --cuda \d", fix), (case, fix)
    assert "cuda-version=" in catalog.get("driver-old").fix and "envguard lock" in catalog.get("driver-old").fix
    assert "pytorch=X.Y.*=cuda12*" in catalog.get("cpu-build").fix
    assert "cuda-version" in catalog.get("arch").fix
    assert "(e.g. `envguard lock --cuda" not in catalog.get("driver-old").fix
