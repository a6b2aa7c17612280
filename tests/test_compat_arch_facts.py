"""GPU-architecture facts of the older CUDA lines (#39 point 10), each from the build script of the release that
built it (the rows' sources in envguard/data/compat.yaml, checked 2026-12-04): PyPI's cu117/cu118/cu121/cu124
wheels of 2.0-2.5 and the legacy pytorch channel's CUDA 11.x/12.1/12.4 builds end at sm_90, so a Blackwell GPU
(sm_100, sm_120) has "no kernel image" in them unless the build carries PTX; conda-forge's linux-aarch64 CUDA 13
build covers Jetson Orin (sm_87) since 2.13. Each test failed on the table before these rows: without a row,
check fell back to the CUDA line's oldest architecture and passed every newer GPU. Offline: the table answers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_check_rules import _cuda_codes, _venv_with_torch

from envguard import compat
from envguard.check import checks
from envguard.prefix import CondaRecord, PrefixInfo

RTX_5090 = ("NVIDIA GeForce RTX 5090", "12.0")
B200 = ("NVIDIA B200", "10.0")
H100 = ("NVIDIA H100 80GB HBM3", "9.0")
A100 = ("NVIDIA A100-SXM4-80GB", "8.0")


def _arch_errors(info: PrefixInfo, gpu: tuple[str, str], platform: str = "linux-64") -> list[str]:
    return [m for code, m in _cuda_codes(info, [gpu], platform=platform) if code == "EG552"]


# --------------------------------------------------------------------------- PyPI's wheels


@pytest.mark.parametrize("torch, platform", [
    ("2.5.1+cu124", "linux-64"), ("2.4.1+cu124", "win-64"),
    ("2.3.1+cu121", "linux-64"), ("2.1.2+cu121", "win-64"),
    ("2.2.2+cu118", "linux-64"),
])
def test_pypi_cu118_cu121_cu124_wheels_have_no_blackwell_kernels(torch: str, platform: str) -> None:
    for gpu in (RTX_5090, B200):
        found = _arch_errors(_venv_with_torch(torch), gpu, platform)
        assert len(found) == 1 and ("sm_50 to sm_90" in found[0] or "sm_37 to sm_90" in found[0]), (torch, found)
        assert "no newer architectures" in found[0] and "pytorch/builder" in found[0], found
    assert _arch_errors(_venv_with_torch(torch), H100, platform) == []  # sm_90 is the newest they build
    assert _arch_errors(_venv_with_torch(torch), A100, platform) == []


def test_pypi_cu118_carries_ptx_on_windows_only() -> None:
    """Windows' cu118 wheels build 3.7+PTX (windows/cuda118.bat), Linux's build no PTX (manywheel/build_cuda.sh):
    the same CUDA line, two answers, one per platform."""
    info = _venv_with_torch("2.3.0+cu118")
    assert _arch_errors(info, RTX_5090, "linux-64")
    assert _arch_errors(info, RTX_5090, "win-64") == []
    rng = compat.load().arch("pypi", "11.8", "2.3.0+cu118", "win-64")
    assert rng is not None and "compute_37" in rng.arches
    # a platform the rows do not name gets no row at all, not another platform's
    assert compat.load().arch("pypi", "11.8", "2.3.0+cu118", "linux-aarch64") is None


def test_pypi_cu117_wheels_of_2_0_have_no_hopper_kernels() -> None:
    """torch 2.0's default cu117 wheels stop at sm_86: an H100 is not covered (CUDA 11.7 cannot build sm_90)."""
    found = _arch_errors(_venv_with_torch("2.0.1+cu117"), H100)
    assert len(found) == 1 and "sm_37 to sm_86" in found[0], found
    assert _arch_errors(_venv_with_torch("2.0.1+cu117"), A100) == []


def test_releases_outside_the_recorded_range_are_not_guessed() -> None:
    """2.6's cu124 and 2.6-2.7's cu118 wheels were built by pytorch/pytorch's own scripts, whose release-tag lists
    were not read: no row answers for them (the CUDA line's oldest architecture decides, as before), except
    2.6.0's Linux cu124 wheel, PyPI's default, read from the wheel itself (tests/test_compat_arch_wheels.py)."""
    c = compat.load()
    assert c.arch("pypi", "12.4", "2.6.0+cu124", "win-64") is None
    assert c.arch("pypi", "11.8", "2.7.1+cu118", "linux-64") is None
    assert c.arch("pypi", "12.4", "2.5.1+cu124", "linux-64") is not None


# --------------------------------------------------------------------------- the legacy pytorch channel


def _legacy_env(version: str, build: str, platform: str = "linux-64") -> PrefixInfo:
    rec = CondaRecord("pytorch", version, build, "https://conda.anaconda.org/pytorch", platform,
                      f"https://conda.anaconda.org/pytorch/{platform}/pytorch-{version}-{build}.tar.bz2", None, None,
                      ("python >=3.11,<3.12.0a0",), "pytorch.json", (), ())
    return PrefixInfo(Path("/opt/env"), is_conda=True, is_venv=False, python_version="3.11.9",
                      site_packages=["lib/python3.11/site-packages"], conda=[rec])


@pytest.mark.parametrize("version, build", [
    ("2.5.1", "py3.11_cuda12.4_cudnn9.1.0_0"), ("2.4.1", "py3.11_cuda12.1_cudnn9.1.0_0"),
    ("2.1.2", "py3.11_cuda12.1_cudnn8.9.2_0"),
])
def test_legacy_channel_cuda_12_1_and_12_4_builds_have_no_blackwell_kernels(version: str, build: str) -> None:
    info = _legacy_env(version, build)
    for gpu in (RTX_5090, B200):
        found = _arch_errors(info, gpu)
        assert len(found) == 1 and "the pytorch channel's CUDA" in found[0] and "sm_50 to sm_90" in found[0], found
    assert _arch_errors(info, H100) == []
    assert _arch_errors(_legacy_env(version, build, "win-64"), RTX_5090, "win-64")  # bld.bat: the same list


def test_legacy_channel_cuda_11_8_builds_carry_ptx() -> None:
    """conda/pytorch-nightly/build.sh builds 3.7+PTX for CUDA 11.8: newer GPUs JIT-compile its PTX, so the table
    agrees with what the probe reads from the build (compute_37). The old row (no PTX) called them uncovered."""
    info = _legacy_env("2.0.1", "py3.10_cuda11.8_cudnn8.7.0_0")
    assert _arch_errors(info, RTX_5090) == []
    found = _arch_errors(info, ("Tesla K40m", "3.5"))  # older than its oldest architecture
    assert len(found) == 1 and "sm_37 to sm_90 (PTX for newer GPUs)" in found[0], found


# --------------------------------------------------------------------------- conda-forge linux-aarch64 CUDA 13


def test_conda_forge_aarch64_cuda13_build_covers_jetson_orin_since_2_13() -> None:
    """One SBSA build on CUDA 13 for servers and Jetson Orin: the feedstock added 8.7 to its linux-aarch64 list
    (PR #531); linux-64's list has no sm_87."""
    c = compat.load()
    rng = c.arch("conda-forge", "13.0", "2.13.0", "linux-aarch64")
    assert rng is not None and "sm_87" in rng.arches and "compute_120" in rng.arches, rng
    assert rng.covers((8, 7)) and rng.covers((12, 1)) and not rng.covers((7, 0))
    assert "4518b3a9" in rng.source and "2026-12-04" in rng.source
    linux64 = c.arch("conda-forge", "13.0", "2.13.0", "linux-64")
    assert linux64 is not None and "sm_87" not in linux64.arches
    assert "sm_87" not in (c.arch("conda-forge", "13.0", "2.12.1", "linux-aarch64") or linux64).arches
    rec = CondaRecord("pytorch", "2.13.0", "cuda130_generic_py311_h0_202", "https://conda.anaconda.org/conda-forge",
                      "linux-aarch64", "https://conda.anaconda.org/conda-forge/linux-aarch64/x.conda", None, None,
                      ("python >=3.11,<3.12.0a0", "cuda-version >=13.0,<14"), "pytorch.json", (), ())
    info = PrefixInfo(Path("/opt/env"), is_conda=True, is_venv=False, python_version="3.11.9",
                      site_packages=["lib/python3.11/site-packages"], conda=[rec])
    inp = checks.CheckInput(info=info, platform="linux-aarch64",
                            gpu=checks.GpuFacts("580.65.06", (("Orin", "8.7"),)))
    assert [f.code for f in checks.rule_cuda(inp)] == []


# --------------------------------------------------------------------------- the data's own consistency


def test_an_arch_rows_list_must_agree_with_its_range() -> None:
    import copy

    data = copy.deepcopy(compat.load_all())
    rows = data["routes"]["pypi"]["arch"]
    row = next(r for r in rows if r.get("list") and r["cuda"] == "12.4")
    assert compat.validate(data) == []
    row["ptx"] = True  # the list has no +PTX entry
    row["sm"] = ["5.0", "12.0"]  # its newest entry is 9.0
    row["platforms"] = ["linux"]
    problems = compat.validate(data)
    assert any(p.endswith(".ptx: must say whether the list has a +PTX entry") for p in problems), problems
    assert any(".sm: must be the list's oldest and newest entries" in p for p in problems), problems
    assert any(".platforms: must list conda platforms" in p for p in problems), problems


# --------------------------------------------------------------------------- the command, end to end


def pip_venv(prefix: Path, dists: list[tuple[str, str, str]]) -> Path:
    """A virtualenv's skeleton holding pip-installed distributions ((name, dist-info stem, version)); no files."""
    (prefix / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.9\n")
    for name, stem, version in dists:
        info = prefix / "lib" / "python3.11" / "site-packages" / f"{stem}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
        (info / "INSTALLER").write_text("pip\n")
    return prefix


def blackwell_flagged_h100_not(prefix: Path, tmp_path: Path) -> str:
    """`envguard check --no-smoke --format json` of ``prefix`` with nvidia-smi reporting an RTX 5090, then an
    H100: EG552 for the first (its message returned), none for the second."""
    from support.check_envs import envguard
    from test_check import fake_smi

    messages = {}
    for gpu, cap in (("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA H100 80GB HBM3", "9.0")):
        exe = fake_smi(tmp_path / cap, "575.51.03", gpu, cap, "12.9")
        proc = envguard("check", "-p", str(prefix), "--no-smoke", "--format", "json",
                        env={"ENVGUARD_NVIDIA_SMI": str(exe), "PATH": os.environ["PATH"]})
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        messages[cap] = [f["message"] for f in json.loads(proc.stdout)["findings"] if f["code"] == "EG552"]
    assert messages["12.0"] and messages["9.0"] == [], messages
    assert "RTX 5090" in messages["12.0"][0] and "sm_50 to sm_90" in messages["12.0"][0]
    return messages["12.0"][0]


@pytest.mark.slow
def test_check_flags_a_blackwell_gpu_with_a_cu124_wheel_without_its_probe(tmp_path: Path) -> None:
    """`envguard check --no-smoke` (no probe reads the build's arch list) on a venv holding torch 2.5.1+cu124,
    with nvidia-smi reporting an RTX 5090: EG552 from the table's row; an H100 passes."""
    blackwell_flagged_h100_not(pip_venv(tmp_path / "venv", [("torch", "torch", "2.5.1+cu124")]), tmp_path)
