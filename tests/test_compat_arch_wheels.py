"""GPU-architecture rows read from PyPI's own wheels (#39 point 10): the default Linux x86_64 torch wheel of each
release is a CUDA build (2.6.0 cu124, 2.7.x cu126, 2.8.0-2.10.0 cu128, 2.11.0-2.14.1 cu130, 2.15.0 cu132), and
the architectures compiled into its torch/lib/libtorch_cuda.so were read from the downloaded file with
scripts/wheel_arch.py (the rows' sources in envguard/data/compat.yaml name each wheel and its sha256, checked
2026-12-04). A pip install of the default wheel records `torch 2.6.0` (no +cu124) beside
`nvidia-cuda-runtime-cu12 12.4.127`, so the tests use that shape too. Before these rows 2.6's cu124 wheel had
none: check fell back to CUDA 12's oldest architecture and passed a Blackwell GPU it has no kernel for.
Offline: the table answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_check_rules import _cuda_codes, _venv_with_torch
from test_compat_arch_facts import blackwell_flagged_h100_not, pip_venv

from envguard import compat
from envguard.prefix import PrefixInfo

RTX_5090 = ("NVIDIA GeForce RTX 5090", "12.0")
B200 = ("NVIDIA B200", "10.0")
H100 = ("NVIDIA H100 80GB HBM3", "9.0")
L4 = ("NVIDIA L4", "8.9")
GTX_1080 = ("NVIDIA GeForce GTX 1080", "6.1")
V100 = ("Tesla V100-SXM2-16GB", "7.0")

# what pip installs from PyPI: the default wheel's version has no local label, its CUDA runtime is a wheel
PYPI_DEFAULT = {
    "2.6.0": ("nvidia-cuda-runtime-cu12", "12.4.127"),
    "2.7.0": ("nvidia-cuda-runtime-cu12", "12.6.77"),
    "2.7.1": ("nvidia-cuda-runtime-cu12", "12.6.77"),
    "2.8.0": ("nvidia-cuda-runtime-cu12", "12.8.90"),
    "2.9.1": ("nvidia-cuda-runtime-cu12", "12.8.90"),
    "2.10.0": ("nvidia-cuda-runtime-cu12", "12.8.90"),
}


def _arch_errors(info: PrefixInfo, gpu: tuple[str, str], platform: str = "linux-64") -> list[str]:
    return [m for code, m in _cuda_codes(info, [gpu], platform=platform) if code == "EG552"]


def _pypi_default(torch: str) -> PrefixInfo:
    return _venv_with_torch(torch, PYPI_DEFAULT[torch])


@pytest.mark.parametrize("info", [_pypi_default("2.6.0"), _venv_with_torch("2.6.0+cu124")], ids=["pypi", "label"])
def test_pypi_2_6_cu124_wheel_has_no_blackwell_kernels(info: PrefixInfo) -> None:
    for gpu in (RTX_5090, B200):
        found = _arch_errors(info, gpu)
        assert len(found) == 1 and "sm_50 to sm_90, no newer architectures" in found[0], found
        assert "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl" in found[0] and "libtorch_cuda.so" in found[0]
    for gpu in (H100, L4, GTX_1080):  # sm_90; sm_89 and sm_61 run the sm_86 and sm_60 cubins
        assert _arch_errors(info, gpu) == [], gpu
    rng = compat.load().arch("pypi", "12.4", "2.6.0", "linux-64")
    assert rng is not None and "7979834102cd5b7a" in rng.source and "2026-12-04" in rng.source
    assert not any(a.startswith("compute_") for a in rng.arches)  # no PTX: nothing for a newer GPU to JIT


@pytest.mark.parametrize("torch", ["2.7.0", "2.7.1"])
def test_pypi_2_7_cu126_wheels_end_at_sm_90_without_ptx(torch: str) -> None:
    """The existing cu126 row (test-infra: sm_50 to sm_90, no PTX) agrees with the wheels; 2.7's row now names
    them and carries their list."""
    info = _pypi_default(torch)
    found = _arch_errors(info, RTX_5090)
    assert len(found) == 1 and "sm_50 to sm_90, no newer architectures" in found[0], found
    assert f"torch-{torch}-cp311-cp311-manylinux_2_28_x86_64.whl" in found[0], found
    assert _arch_errors(info, H100) == [] and _arch_errors(info, GTX_1080) == []


@pytest.mark.parametrize("torch", ["2.8.0", "2.9.1", "2.10.0"])
def test_pypi_cu128_wheels_start_at_volta_and_carry_no_ptx(torch: str) -> None:
    info = _pypi_default(torch)
    found = _arch_errors(info, GTX_1080)  # Pascal: dropped from the cu128 wheels
    assert len(found) == 1 and "sm_70 to sm_120, no newer architectures" in found[0], found
    assert f"torch-{torch}-cp311-cp311-manylinux_2_28_x86_64.whl" in found[0], found
    for gpu in (V100, H100, B200, RTX_5090):
        assert _arch_errors(info, gpu) == [], gpu
    rng = compat.load().arch("pypi", "12.8", torch, "linux-64")
    assert rng is not None and rng.arches[-1] == "sm_120" and not any(a.startswith("compute_") for a in rng.arches)
    # the list, not the range, decides: no sm_110 cubin and no PTX, so an sm_110 GPU has no kernel image
    assert not rng.covers((11, 0)) and rng.covers((10, 3)) and rng.covers((12, 1))


@pytest.mark.parametrize("torch, cuda", [("2.11.0", "13.0"), ("2.12.1", "13.0"), ("2.14.1", "13.0"),
                                         ("2.15.0", "13.2")])
def test_pypi_cuda13_wheels_carry_no_ptx(torch: str, cuda: str) -> None:
    """The CUDA 13 line's general row (sm_75 and newer, PTX) does not hold for PyPI's default wheels: they end at
    sm_120 with no PTX, so a GPU past their list (sm_110 here) has no kernel image in them."""
    label = f"{torch}+cu{cuda.replace('.', '')}"
    rng = compat.load().arch("pypi", cuda, label, "linux-64")
    assert rng is not None and f"torch-{torch}-cp311-cp311-manylinux_2_28_x86_64.whl" in rng.source, rng
    assert rng.arches == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert not rng.covers((11, 0)) and not rng.covers((7, 0)) and rng.covers((7, 5)) and rng.covers((12, 1))
    assert _arch_errors(_venv_with_torch(label), V100) and _arch_errors(_venv_with_torch(label), RTX_5090) == []
    general = compat.load().arch("pypi", cuda, "2.10.0", "linux-64")  # a release not read keeps the general row
    assert general is not None and general.ptx and "libtorch_cuda.so" not in general.source


def test_rows_read_from_linux_wheels_do_not_answer_for_windows() -> None:
    """PyPI's Windows torch wheels are CPU builds: the CUDA ones were not read, so their platform gets no row from
    these (2.6's cu124 has none at all; 2.7's cu126 falls back to the line's general row)."""
    c = compat.load()
    assert c.arch("pypi", "12.4", "2.6.0+cu124", "win-64") is None
    general = c.arch("pypi", "12.6", "2.7.1+cu126", "win-64")
    assert general is not None and "libtorch_cuda.so" not in general.source


@pytest.mark.slow
def test_check_flags_a_blackwell_gpu_with_pypis_2_6_wheel_without_its_probe(tmp_path: Path) -> None:
    """`envguard check --no-smoke` on a venv holding what `pip install torch==2.6.0` installs (torch 2.6.0 beside
    nvidia-cuda-runtime-cu12 12.4.127), nvidia-smi reporting an RTX 5090: EG552 from the wheel's row; an H100
    passes."""
    prefix = pip_venv(tmp_path / "venv", [("torch", "torch", "2.6.0"),
                                          ("nvidia-cuda-runtime-cu12", "nvidia_cuda_runtime_cu12", "12.4.127")])
    assert "torch-2.6.0-cp311-cp311-manylinux1_x86_64.whl" in blackwell_flagged_h100_not(prefix, tmp_path)
