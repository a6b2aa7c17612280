"""The pick rule (envguard.variantpick): drivers 535/550/570/580 x GPUs sm_70/80/90/100/120 x the declared
variants, CONDA_OVERRIDE_CUDA / CONDA_OVERRIDE_CUDA_ARCH as CEP 30/46 define them, and the table in
docs/variants.md checked against the function."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from envguard.compat import ArchRange
from envguard.driver import DriverInfo
from envguard.errors import ExitCode, UserError
from envguard.variantpick import fits_better, host_facts, pick, table

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class V:
    name: str
    cuda: str | None


ALL = [V("cpu", None), V("cuda-12.6", "12.6"), V("cuda-12.9", "12.9"), V("cuda-13.0", "13.0")]
DRIVERS = {535: ("535.54.03", "12.2"), 550: ("550.54.15", "12.4"), 570: ("570.86.15", "12.8"),
           580: ("580.65.06", "13.0")}
GPUS = {70: "7.0", 80: "8.0", 90: "9.0", 100: "10.0", 120: "12.0"}


def drv(branch: int, *sms: int) -> DriverInfo:
    version, cuda = DRIVERS[branch]
    return DriverInfo(version, cuda, [(f"GPU sm_{sm}", GPUS[sm]) for sm in sms], "nvml")


# What each (driver, GPU) gets from {cpu, cuda-12.6, cuda-12.9, cuda-13.0}: CUDA 13 needs driver 580 (__cuda 13)
# and drops sm_70 (conda-forge's 13.x builds start at sm_75); every 12.x build runs on a 12.x driver (cuda-version
# constrains __cuda >=12 only) and conda-forge's 12.9 build covers sm_50 to sm_120.
EXPECTED_ALL = {
    535: {70: "cuda-12.9", 80: "cuda-12.9", 90: "cuda-12.9", 100: "cuda-12.9", 120: "cuda-12.9"},
    550: {70: "cuda-12.9", 80: "cuda-12.9", 90: "cuda-12.9", 100: "cuda-12.9", 120: "cuda-12.9"},
    570: {70: "cuda-12.9", 80: "cuda-12.9", 90: "cuda-12.9", 100: "cuda-12.9", 120: "cuda-12.9"},
    580: {70: "cuda-12.9", 80: "cuda-13.0", 90: "cuda-13.0", 100: "cuda-13.0", 120: "cuda-13.0"},
}
# {cpu, cuda-13.0}: below 580, and on 580 for sm_70, nothing CUDA runs: cpu with a warning.
EXPECTED_CPU_13 = {
    535: dict.fromkeys(GPUS, "cpu!"), 550: dict.fromkeys(GPUS, "cpu!"), 570: dict.fromkeys(GPUS, "cpu!"),
    580: {70: "cpu!", 80: "cuda-13.0", 90: "cuda-13.0", 100: "cuda-13.0", 120: "cuda-13.0"},
}


@pytest.mark.parametrize("branch", DRIVERS)
@pytest.mark.parametrize("sm", GPUS)
def test_table_all_variants(branch: int, sm: int) -> None:
    p = pick(ALL, drv(branch, sm), {})
    assert p.name == EXPECTED_ALL[branch][sm], p.reason
    assert p.runs and p.warning is None
    assert p.reason.startswith(f"variant {p.name}: driver {DRIVERS[branch][0]} supports CUDA {DRIVERS[branch][1]}")
    if p.name == "cuda-12.9":
        assert "not cuda-13.0: " in p.reason  # what was passed over, and why


@pytest.mark.parametrize("branch", DRIVERS)
@pytest.mark.parametrize("sm", GPUS)
def test_table_cpu_and_13(branch: int, sm: int) -> None:
    p = pick([V("cpu", None), V("cuda-13.0", "13.0")], drv(branch, sm), {})
    want = EXPECTED_CPU_13[branch][sm]
    assert p.name == want.rstrip("!"), p.reason
    assert (p.warning is not None) == want.endswith("!")
    if p.warning:
        assert "cuda-13.0: " in p.warning and p.warning.endswith("cpu picked")
        why = "needs CUDA 13 (driver 580.65.06+)" if branch < 580 else "sm_70 is below the build's sm_75"
        assert why in p.warning


def test_no_driver_is_cpu() -> None:
    p = pick(ALL, None, {})
    assert (p.name, p.runs, p.warning) == ("cpu", True, None)
    assert p.reason == "variant cpu: no NVIDIA driver"


def test_no_driver_and_no_cpu_variant_runs_nothing() -> None:
    p = pick([V("cuda-12.6", "12.6"), V("cuda-13.0", "13.0")], None, {})
    assert not p.runs and "no CPU variant is declared" in p.reason


def test_old_driver_gets_cpu_with_a_warning() -> None:
    p = pick(ALL, DriverInfo("470.82.01", "11.4", [("T4", "7.5")]), {})
    assert p.name == "cpu" and p.warning and "needs CUDA 12 (driver 525.60.13+)" in p.warning


def test_every_gpu_counts_not_only_the_first() -> None:
    # __cuda_arch is the minimum over the GPUs: a V100 beside an H100 keeps CUDA 13 out
    p = pick(ALL, drv(580, 90, 70), {})
    assert p.name == "cuda-12.9" and p.host is not None and p.host.cuda_arch == "7.0"


def test_driver_without_its_cuda_line_is_read_from_the_driver_table() -> None:
    p = pick(ALL, DriverInfo("580.65.06", None, [("H100", "9.0")], "nvidia-smi"), {})
    assert p.name == "cuda-13.0"
    assert pick(ALL, DriverInfo("550.54.15", None, [("A100", "8.0")], "nvidia-smi"), {}).name == "cuda-12.9"


def test_unknown_gpu_architecture_is_the_second_tier() -> None:
    p = pick(ALL, DriverInfo("580.65.06", "13.0", [("old smi", "")], "nvidia-smi"), {})
    assert p.name == "cuda-13.0" and "GPU architecture not known" in p.reason


# ----------------------------------------------------------------------------------------------- PTX


def _ranges(ptx: bool):
    def arch_of(cuda: str) -> ArchRange:
        return ArchRange("5.0", "9.0", ptx, "test")
    return arch_of


def test_ptx_covers_newer_gpus_only_with_a_driver_that_can_jit_it() -> None:
    variants = [V("cpu", None), V("cuda-12.9", "12.9")]
    # a 12.8 driver cannot JIT-compile PTX written by CUDA 12.9: sm_120 is not covered
    p = pick(variants, drv(570, 120), {}, _ranges(ptx=True))
    assert p.name == "cpu" and "PTX" in (p.warning or "")
    p = pick(variants, drv(580, 120), {}, _ranges(ptx=True))
    assert p.name == "cuda-12.9" and "sm_120 through PTX" in p.reason
    p = pick(variants, drv(580, 120), {}, _ranges(ptx=False))
    assert p.name == "cpu" and "past the build's sm_50 to sm_90" in (p.warning or "")
    assert pick(variants, drv(580, 90), {}, _ranges(ptx=False)).name == "cuda-12.9"


# ----------------------------------------------------------------------------------------------- overrides


def test_override_cuda_empty_means_absent() -> None:
    p = pick(ALL, drv(580, 90), {"CONDA_OVERRIDE_CUDA": ""})
    assert p.name == "cpu" and p.warning is None and "CONDA_OVERRIDE_CUDA=" in p.reason
    assert p.host is not None and p.host.cuda_arch is None  # CEP 46: no __cuda_arch without __cuda


def test_override_cuda_on_a_machine_without_driver() -> None:
    p = pick(ALL, None, {"CONDA_OVERRIDE_CUDA": "13.0"})
    assert p.name == "cuda-13.0" and "GPU architecture not known" in p.reason
    assert pick(ALL, None, {"CONDA_OVERRIDE_CUDA": "12.6"}).name == "cuda-12.9"  # minor-version compatibility
    assert pick([V("cpu", None), V("cuda-13.0", "13.0")], None, {"CONDA_OVERRIDE_CUDA": "12.6"}).name == "cpu"


def test_override_cuda_replaces_the_driver() -> None:
    assert pick(ALL, drv(580, 90), {"CONDA_OVERRIDE_CUDA": "12.4"}).name == "cuda-12.9"
    assert pick(ALL, drv(550, 90), {"CONDA_OVERRIDE_CUDA": "13.0"}).name == "cuda-13.0"


def test_override_cuda_arch() -> None:
    assert pick(ALL, drv(580, 90), {"CONDA_OVERRIDE_CUDA_ARCH": "7.0"}).name == "cuda-12.9"
    assert pick(ALL, drv(580, 70), {"CONDA_OVERRIDE_CUDA_ARCH": "9.0a"}).name == "cuda-13.0"  # letter dropped
    assert pick(ALL, drv(580, 70), {"CONDA_OVERRIDE_CUDA_ARCH": "8.6=0"}).name == "cuda-13.0"  # a build string
    # empty: absent, the GPUs are not judged (the second tier)
    p = pick(ALL, drv(580, 70), {"CONDA_OVERRIDE_CUDA_ARCH": ""})
    assert p.name == "cuda-13.0" and "GPU architecture not known" in p.reason
    # no __cuda: no __cuda_arch either, whatever the variable says
    assert pick(ALL, None, {"CONDA_OVERRIDE_CUDA_ARCH": "9.0"}).name == "cpu"
    assert pick(ALL, None, {"CONDA_OVERRIDE_CUDA": "13.0", "CONDA_OVERRIDE_CUDA_ARCH": "7.0"}).name == "cuda-12.9"


@pytest.mark.parametrize(("var", "value"), [("CONDA_OVERRIDE_CUDA", "twelve"), ("CONDA_OVERRIDE_CUDA", "12.x"),
                                            ("CONDA_OVERRIDE_CUDA_ARCH", "sm_80"), ("CONDA_OVERRIDE_CUDA_ARCH", "8")])
def test_unreadable_override_is_an_error(var: str, value: str) -> None:
    with pytest.raises(UserError) as e:
        host_facts(drv(580, 90), {var: value})
    assert e.value.exit_code == ExitCode.USAGE and var in str(e.value) and "fix:" in str(e.value)


def test_other_variables_are_not_read() -> None:
    assert pick(ALL, drv(580, 90), {"CONDA_OVERRIDE_GLIBC": "2.17", "CUDA_VISIBLE_DEVICES": ""}).name == "cuda-13.0"


# ----------------------------------------------------------------------------------------------- fits better


def test_fits_better() -> None:
    p = pick(ALL, drv(550, 80), {})
    assert fits_better("cpu", p) and fits_better("cuda-12.6", p) and not fits_better("cuda-12.9", p)
    assert not fits_better("cuda-13.0", p)  # it does not run here: that is check's error, not this warning
    assert not fits_better("cuda-12.9", pick(ALL, drv(580, 70), {}))
    assert not fits_better("cpu", pick(ALL, None, {}))


# ----------------------------------------------------------------------------------------------- docs


def test_docs_table_is_the_function() -> None:
    text = (REPO / "docs" / "variants.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- pick-table: ([\w.,-]+) -->\n(.*?)\n<!-- /pick-table -->", text, re.S)
    assert len(found) >= 2, "docs/variants.md: the pick tables are missing"
    for names, body in found:
        assert body.strip() == table(names.split(",")), (
            f"docs/variants.md's pick table for {names} is stale: paste envguard.variantpick.table({names.split(',')})")
    assert "cpu,cuda-12.6,cuda-12.9,cuda-13.0" in [n for n, _ in found]
