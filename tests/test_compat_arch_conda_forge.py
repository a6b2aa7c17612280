"""conda-forge's GPU-architecture rows per CUDA line (#39 point 10), from the TORCH_CUDA_ARCH_LIST of
conda-forge/pytorch-cpu-feedstock's recipe/build.sh and recipe/bld.bat over their history (the rows' sources in
envguard/data/compat.yaml, checked 2026-12-04): 11.2, 11.8, 12.0 and 12.6 had no row, 12.8 and 12.9 had a range
without the list. Every conda-forge list ends in +PTX, so a GPU newer than its last entry runs the build only
through that PTX: check's cubin/PTX rule decides from the list (a major the list skips has no kernels), and the
variant pick needs a driver that can JIT-compile the build's PTX. Each test failed on the table before these rows
(no row: the CUDA line's oldest architecture decided and every newer GPU passed, natively). Offline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard import compat
from envguard.check import checks
from envguard.driver import DriverInfo
from envguard.init import hardware_comment
from envguard.prefix import CondaRecord, PrefixInfo
from envguard.variantpick import Host, default_arch, host_facts, judge, pick

FEEDSTOCK = "https://github.com/conda-forge/pytorch-cpu-feedstock/blob/"

# (CUDA line, a torch release the feedstock built on it, a platform it built, the list its build script sets)
ROWS = [
    ("11.2", "2.1.2", "linux-64", "3.5;5.0;6.0;6.1;7.0;7.5;8.0;8.6+PTX"),
    ("11.8", "2.4.1", "linux-64", "3.5;5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9+PTX"),
    ("12.0", "2.3.1", "linux-aarch64", "5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0+PTX"),
    ("12.6", "2.6.0", "linux-64", "5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0+PTX"),
    ("12.6", "2.6.0", "win-64", "5.0;6.0;6.1;7.0;7.5;8.0;8.6;8.9;9.0+PTX"),
    ("12.8", "2.9.1", "win-64", "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"),
    ("12.9", "2.9.1", "linux-64", "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"),
]


@pytest.mark.parametrize("cuda, torch, platform, arch_list", ROWS)
def test_each_conda_forge_cuda_line_has_its_feedstock_list(cuda: str, torch: str, platform: str,
                                                          arch_list: str) -> None:
    rng = compat.load().arch("conda-forge", cuda, torch, platform)
    assert rng is not None, (cuda, torch, platform)
    assert rng.arches == compat.arch_list_names(arch_list), rng.arches
    assert rng.ptx and FEEDSTOCK in rng.source and "checked 2026-12-04" in rng.source, rng.source


def test_the_11_2_list_is_recorded_for_the_2_x_builds_only() -> None:
    """The feedstock's 1.x cuda112 builds set other lists over time: no row answers for them, nor for an unknown
    release; 11.8, 12.0 and 12.6 kept one list for every build the feedstock made of them."""
    c = compat.load()
    assert c.arch("conda-forge", "11.2", "1.10.2", "linux-64") is None
    assert c.arch("conda-forge", "11.2", None, "linux-64") is None
    assert c.arch("conda-forge", "12.6", None, "linux-64") is not None


def _cf_env(version: str, build: str, platform: str = "linux-64") -> PrefixInfo:
    rec = CondaRecord("pytorch", version, build, "https://conda.anaconda.org/conda-forge", platform,
                      f"https://conda.anaconda.org/conda-forge/{platform}/pytorch-{version}-{build}.conda", None, None,
                      ("python >=3.11,<3.12.0a0",), "pytorch.json", (), ())
    return PrefixInfo(Path("/opt/env"), is_conda=True, is_venv=False, python_version="3.11.9",
                      site_packages=["lib/python3.11/site-packages"], conda=[rec])


def _arch_errors(info: PrefixInfo, gpu: tuple[str, str], platform: str = "linux-64") -> list[str]:
    inp = checks.CheckInput(info=info, platform=platform, gpu=checks.GpuFacts("580.65.06", (gpu,)))
    return [f.message for f in checks.rule_cuda(inp) if f.code == "EG552"]


@pytest.mark.parametrize("version, build, platform", [
    ("2.6.0", "cuda126_mkl_py311_h0_300", "linux-64"), ("2.7.0", "cuda126_mkl_py311_h0_300", "win-64"),
    ("2.4.1", "cuda118_py311_h0_303", "linux-64"), ("2.4.1", "cuda120_py311_h0_303", "linux-64"),
])
def test_check_judges_a_conda_forge_build_by_its_feedstock_list(version: str, build: str, platform: str) -> None:
    """Without its probe, check judges the build by the row: a Tesla K80 (sm_37) is past 11.8's sm_35 but older
    than 12.x's sm_50, named with the feedstock's list as the source; a Blackwell GPU (sm_100, sm_120) runs
    these builds through their PTX (9.0+PTX, 8.9+PTX): not flagged."""
    info = _cf_env(version, build, platform)
    k80 = _arch_errors(info, ("Tesla K80", "3.7"), platform)
    if "cuda118" in build:
        assert k80 == []
    else:
        assert len(k80) == 1 and "sm_50 to sm_90 (PTX for newer GPUs)" in k80[0] and FEEDSTOCK in k80[0], k80
    for gpu in (("NVIDIA B200", "10.0"), ("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA H100 80GB HBM3", "9.0")):
        assert _arch_errors(info, gpu, platform) == [], gpu


def test_a_major_the_cuda129_list_skips_has_no_kernels() -> None:
    """12.8/12.9's list (5.0;...;10.0;12.0+PTX) has no cubin of major 11 and its PTX is 12.0's: a GPU of compute
    capability 11.0 is not covered (the row's range, sm_50 to sm_120 with PTX, passed it); the minors of the majors
    it builds are (sm_61, sm_89, sm_103, sm_121)."""
    info = _cf_env("2.9.1", "cuda129_mkl_py311_h0_301")
    found = _arch_errors(info, ("GPU of compute capability 11.0", "11.0"))
    assert len(found) == 1 and "conda-forge's CUDA 12.9 build" in found[0] and FEEDSTOCK in found[0], found
    for cap in ("6.1", "8.9", "10.3", "12.1"):
        assert _arch_errors(info, (f"sm {cap}", cap)) == [], cap
    win = compat.load().arch("conda-forge", "12.8", "2.9.1", "win-64")
    assert win is not None and not win.covers((11, 0)) and win.covers((10, 3))


# --------------------------------------------------------------------------- the variant pick


@pytest.mark.parametrize("driver, cuda, expect", [
    ("535.54.03", "12.2", "cpu"), ("550.54.15", "12.4", "cpu"), ("570.86.15", "12.8", "cuda-12.6"),
])
def test_cuda126_variant_covers_blackwell_only_where_the_driver_can_jit_its_ptx(driver: str, cuda: str,
                                                                                expect: str) -> None:
    """conda-forge's cuda126 builds end at 9.0+PTX: an RTX 5090 (sm_120) runs them through the PTX, which a driver
    for CUDA 12.2/12.4 cannot JIT-compile (PTX of CUDA 12.6); an H100 runs them natively on any 12.x driver.
    Without the row every GPU counted as covered natively and cuda-12.6 was picked on every 12.x driver."""
    variants = [_V("cpu", None), _V("cuda-12.6", "12.6")]
    p = pick(variants, DriverInfo(driver, cuda, [("NVIDIA GeForce RTX 5090", "12.0")], "nvml"), {})
    assert p.name == expect, p.reason
    if expect == "cpu":
        assert p.warning and "sm_120 needs the build's CUDA 12.6 PTX JIT-compiled" in p.warning, p.warning
    else:
        assert "sm_120 through PTX" in p.reason, p.reason
    h100 = pick(variants, DriverInfo(driver, cuda, [("NVIDIA H100 80GB HBM3", "9.0")], "nvml"), {})
    assert h100.name == "cuda-12.6" and "covers sm_90" in h100.reason and "PTX" not in h100.reason, h100.reason


def test_the_pick_reads_the_list_as_check_does() -> None:
    """A major the list skips (11.0 in cuda129's) is not covered by the variant pick either: check and create
    agree on the same row."""
    def host(cap: str) -> Host:
        return host_facts(DriverInfo("580.65.06", "13.0", [(f"GPU {cap}", cap)], "nvml"), {})

    v = judge(_V("cuda-12.9", "12.9"), host("11.0"))
    assert not v.runs and "sm_110 has no kernels in the build's list" in v.why, v
    assert judge(_V("cuda-12.9", "12.9"), host("10.3")).runs


def test_default_arch_passes_the_platform_to_the_rows() -> None:
    """default_arch asks the rows for the machine's platform: a row for some platforms only answers there alone
    (no conda-forge row that an unknown release reaches is per-platform today, so the answer is the same)."""
    assert default_arch("12.6", "win-64") == compat.load().arch("conda-forge", "12.6", None, "win-64")
    assert default_arch("13.0", "linux-aarch64") == compat.load().arch("conda-forge", "13.0", None, "linux-aarch64")


# --------------------------------------------------------------------------- init's hardware comment


def test_init_names_each_platforms_own_arch_row() -> None:
    """init's comment per platform asks the rows for that platform: conda-forge's linux-aarch64 CUDA 13 build of
    2.13 has its own list (sm_75 to sm_120 with sm_87, feedstock PR #531), linux-64 has the CUDA 13 line's row.
    Before, every platform got the row of no platform (both lines said "sm_75 and newer")."""
    text = hardware_comment("conda-forge", "2.13", "13.0", ["linux-64", "linux-aarch64"])
    lines = dict(line.split(":", 1) for line in text.splitlines() if line.startswith("# linux"))
    assert "GPU sm_75 and newer." in lines["# linux-64"], text
    assert "GPU sm_75 to sm_120 (PTX for newer GPUs)." in lines["# linux-aarch64"], text
    assert "GPU sm_50 to sm_90 (PTX for newer GPUs)" in hardware_comment("conda-forge", "2.6", "12.6", ["win-64"])


@dataclass(frozen=True)
class _V:
    name: str
    cuda: str | None
