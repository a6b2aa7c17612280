"""The corrected compatibility facts (../shared/design/compat-facts.md, corrected 2026-12-01), as users meet them:
each test here failed on the table of 2026-08-13 as it was. Offline: the table answers (conftest sets
ENVGUARD_OFFLINE=1)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from test_check_rules import _cuda_codes, _venv_with_torch

from envguard import compat
from envguard.check import checks
from envguard.errors import UserError
from envguard.init import init
from envguard.lint import lint_text
from envguard.prefix import CondaRecord, PrefixInfo


def _refused(tmp_path: Path, **args) -> str:
    out = tmp_path / "environment.yml"
    with pytest.raises(UserError) as e:
        init(output=out, **args)
    assert e.value.exit_code == 2 and not out.exists()
    return e.value.message


def _deps(tmp_path: Path, **args) -> list[str]:
    out = tmp_path / "environment.yml"
    init(output=out, force=True, **args)
    return [d for d in yaml.safe_load(out.read_text())["dependencies"] if isinstance(d, str)]


def test_1_conda_forge_never_built_2_9_0(tmp_path: Path) -> None:
    assert _refused(tmp_path, torch="2.9.0") == ("torch 2.9.0 is not a conda-forge release in envguard's data "
                                                 "(torch 2.9: 2.9.1); use --torch 2.9")
    assert "pytorch=2.9.1=cpu*" in _deps(tmp_path, torch="2.9.1")


def test_2_win64_2_5_builds_are_cuda_12_6_only(tmp_path: Path) -> None:
    message = _refused(tmp_path, torch="2.5", cuda="12.0")  # default CUDA platforms: linux-64 and win-64
    assert message == "conda-forge builds torch 2.5 for CUDA 12.6 on win-64; use --cuda 12.6"
    assert "cuda-version=12.6" in _deps(tmp_path, torch="2.5", cuda="12.6")
    assert "cuda-version=12.0" in _deps(tmp_path, torch="2.5", cuda="12.0", platforms=["linux-64"])


def test_3_linux_aarch64_has_cuda_builds_of_2_6(tmp_path: Path) -> None:
    assert "cuda-version=12.6" in _deps(tmp_path, torch="2.6", cuda="12.6", platforms=["linux-aarch64"])
    assert "cuda-version=12.6" in _deps(tmp_path, torch="2.7.0", cuda="12.6", platforms=["linux-aarch64"])


def test_4_cuda_version_13_2_serves_cuda130_builds(tmp_path: Path) -> None:
    deps = _deps(tmp_path, torch="2.13", cuda="13.2")
    assert "cuda-version=13.2" in deps and "pytorch=2.13.*=cuda13*" in deps
    text = (tmp_path / "environment.yml").read_text()
    assert "# win-64: the cuda130 build on the CUDA 13.2 libraries" in text


def test_5_cuda_13_on_windows_has_a_minimum_driver(tmp_path: Path) -> None:
    c = compat.load()
    assert c.min_driver("13.0", "win-64") == "580" and c.min_driver("13.2", "win-64") == "580"
    # check: a CUDA 13 wheel on Windows with an R575 driver is too old; an R580 one is enough
    for wheel in ("2.13.0+cu130", "2.14.0+cu132"):
        info = _venv_with_torch(wheel)
        found = _cuda_codes(info, [("NVIDIA RTX A6000", "8.6")], driver="575.51", platform="win-64")
        assert [code for code, _ in found] == ["EG551"], (wheel, found)
        assert "580" in found[0][1]
        assert _cuda_codes(info, [("NVIDIA RTX A6000", "8.6")], driver="581.15", platform="win-64") == []
    # init names the floor instead of "minimum not recorded"
    _deps(tmp_path, torch="2.13", cuda="13.0", platforms=["win-64"])
    text = (tmp_path / "environment.yml").read_text()
    assert "NVIDIA driver >= 580," in text and "not recorded" not in text


def test_6a_no_cuda_11_8_build_of_2_1_on_linux_aarch64(tmp_path: Path) -> None:
    assert compat.load().route("conda-forge").release("2.1").cuda_on("linux-aarch64") == ("11.2", "12.0")
    found = lint_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pytorch=2.1.2=cuda118*\n"
                      "platforms: [linux-aarch64]\n", str(tmp_path / "environment.yml"))
    eg118 = [f for f in found if f.code == "EG118"]
    assert eg118 and "for CUDA 11.2 and 12.0 on linux-aarch64" in eg118[0].message, found
    # cuda-version 11.8 is served by the cuda112 build (cudatoolkit >=11.2,<12), and the file says so
    _deps(tmp_path, torch="2.1", cuda="11.8", platforms=["linux-aarch64"])
    assert "# linux-aarch64: the cuda112 build on the CUDA 11.8 libraries" in (tmp_path / "environment.yml").read_text()


def test_6b_win64_2_7_1_was_12_6_then_12_8_never_12_9(tmp_path: Path) -> None:
    rel = compat.load().route("conda-forge").release("2.7")
    assert rel.cuda_on("win-64") == ("12.6", "12.8")
    # a spec asking for a cuda129 build on win-64 is an error naming the lines that exist there
    found = lint_text("channels: [conda-forge]\ndependencies:\n  - python=3.11\n  - pytorch=2.7.1=cuda129*\n"
                      "  - cuda-version=12.9\nplatforms: [win-64]\n", str(tmp_path / "environment.yml"))
    eg118 = [f for f in found if f.code == "EG118"]
    assert eg118 and "for CUDA 12.6 and 12.8 on win-64" in eg118[0].message, found


def test_6c_pypi_2_14_has_no_python_3_15_wheels() -> None:
    pypi = compat.load().route("pypi")
    assert "3.15" not in pypi.release("2.14").python and "3.14" in pypi.release("2.14").python
    assert "3.15" in pypi.release("2.15").python


def test_6d_pypi_has_linux_aarch64_cuda_wheels_since_2_7() -> None:
    pypi = compat.load().route("pypi")
    assert not pypi.release("2.6").has_cuda_builds("linux-aarch64")
    # 2.7 on CUDA 12.8 alone, 2.8 on 12.9 alone (pytorch/test-infra#6492; pytorch#155819, #162364)
    assert pypi.release("2.7").cuda_on("linux-aarch64") == ("12.8",)
    assert pypi.release("2.8").cuda_on("linux-aarch64") == ("12.9",)
    for line in ("2.7", "2.8", "2.9", "2.10", "2.13", "2.14", "2.15"):
        assert pypi.release(line).has_cuda_builds("linux-aarch64"), line
    # the default aarch64 wheel's line is the only one verified from the artifacts
    assert pypi.release("2.14").cuda_on("linux-aarch64") == ("13.0",)
    assert pypi.release("2.15").cuda_on("linux-aarch64") == ("13.2",)


def test_6e_pypi_cu129_wheels_of_2_8_have_no_maxwell_or_pascal() -> None:
    rng = compat.load().arch("pypi", "12.9", "2.8.0")
    assert rng is not None and not rng.covers((6, 0)) and not rng.covers((5, 0)) and rng.covers((7, 0))
    found = _cuda_codes(_venv_with_torch("2.8.0+cu129"), [("Tesla P100", "6.0")])
    assert [code for code, _ in found] == ["EG552"], found


def test_6f_linux_aarch64_cuda129_comes_in_two_variants(tmp_path: Path) -> None:
    cf = compat.load().route("conda-forge")
    rel = cf.release("2.13")
    assert rel.variants_of("linux-aarch64", "12.9") == ("sbsa", "tegra")
    tegra = cf.variant("tegra")
    assert tegra is not None and tegra["glibc"] == "2.34" and tegra["sm"] == ["8.7", "8.7"]
    _deps(tmp_path, torch="2.13", cuda="12.9", platforms=["linux-aarch64"])
    text = (tmp_path / "environment.yml").read_text()
    assert "cuda129 comes in 2 variants" in text
    assert "#   tegra: Jetson (Orin) only (sm_87 only, glibc >= 2.34)." in text
    assert "#   sbsa: server GPUs" in text
    assert rel.glibc_floor("13.0") == "2.28" and rel.glibc_floor("12.9") == "2.17"


def test_6g_the_last_torch_for_python_3_10_is_a_pypi_fact() -> None:
    c = compat.load()
    assert c.python_legacy("3.10")["last_torch_route"] == "pypi"
    data = copy.deepcopy(compat.load_all())
    row = copy.deepcopy(data["routes"]["conda-forge"]["releases"]["2.13"])
    row["versions"] = ["2.15.0"]
    data["routes"]["conda-forge"]["releases"]["2.15"] = row  # conda-forge still pins 3.10: not an error
    assert compat.validate(data) == []
    data["routes"]["pypi"]["releases"]["2.15"]["python"].insert(0, "3.10")  # PyPI's wheels: an error
    assert any("pypi.releases.2.15.python" in p for p in compat.validate(data))


# --------------------------------------------------------------------------- lint and check give init's answer

_LOCK = """version: 1
metadata:
  content_hash: {{{platform}: "0"}}
  channels: [{{url: conda-forge, used_env_vars: []}}]
  platforms: [{platform}]
  sources: [environment.yml]
package:
- name: pytorch
  version: {version}
  manager: conda
  platform: {platform}
  dependencies: {{}}
  url: https://conda.anaconda.org/conda-forge/{platform}/pytorch-{version}-{build}.conda
  hash: {{md5: 0123456789abcdef0123456789abcdef, sha256: {sha}}}
  category: main
  optional: false
"""


def _lock_findings(tmp_path: Path, platform: str, version: str, build: str) -> list:
    text = _LOCK.format(platform=platform, version=version, build=build, sha="0" * 64)
    return [f for f in lint_text(text, str(tmp_path / "conda-lock.yml")) if f.code == "EG118"]


def test_a_lock_with_a_cuda_line_the_channel_does_not_build_is_an_error(tmp_path: Path) -> None:
    """The same rule as init's: a win-64 cuda120 build of 2.5 never existed (point 2), nor a win-64 cuda129
    build of 2.7.1 (point 6); the error names the lines that do exist."""
    found = _lock_findings(tmp_path, "win-64", "2.5.1", "cuda120_py311h0_300")
    assert len(found) == 1 and found[0].severity.value == "error", found
    assert found[0].message == ("`pytorch 2.5.1 cuda120_py311h0_300`: conda-forge builds torch 2.5 only for CUDA "
                                "12.6 (on win-64)")
    assert "cuda-version=12.6" in found[0].fix
    assert "only for CUDA 12.6 and 12.8 (on win-64)" in _lock_findings(tmp_path, "win-64", "2.7.1",
                                                                "cuda129_mkl_py311h0_301")[0].message
    assert _lock_findings(tmp_path, "win-64", "2.7.1", "cuda128_mkl_py311h0_301") == []
    assert _lock_findings(tmp_path, "linux-aarch64", "2.6.0", "cuda126_generic_py311h0_300") == []  # point 3
    # a release the table does not know is unknown, not absent: no error
    assert _lock_findings(tmp_path, "win-64", "2.14.0", "cuda132_mkl_py311h0_300") == []


def _aarch64_env(variant: str | None) -> PrefixInfo:
    deps = ("python >=3.11,<3.12.0a0", "cuda-version >=12.9,<13") + ((f"arm-variant * {variant}",) if variant
                                                                       else ())
    rec = CondaRecord("pytorch", "2.13.0", "cuda129_generic_py311_h0_300", "https://conda.anaconda.org/conda-forge",
                      "linux-aarch64", "https://conda.anaconda.org/conda-forge/linux-aarch64/x.conda", None, None,
                      deps, "pytorch.json", (), ())
    return PrefixInfo(Path("/opt/env"), is_conda=True, is_venv=False, python_version="3.11.9",
                      site_packages=["lib/python3.11/site-packages"], conda=[rec])


def _rule_cuda(info: PrefixInfo, gpus: list[tuple[str, str]]) -> list[tuple[str, str]]:
    inp = checks.CheckInput(info=info, platform="linux-aarch64", gpu=checks.GpuFacts("580.65.06", tuple(gpus)))
    return [(f.code, f.message) for f in checks.rule_cuda(inp)]


def test_check_names_which_variant_of_cuda129_is_installed() -> None:
    """linux-aarch64 cuda129: one build string, two builds. On an Arm server with an A100 (sm_80) the tegra
    build (sm_87+PTX) has no kernels; the sbsa build does. check says which one is installed and judges the
    GPU by it."""
    a100 = [("NVIDIA A100-SXM4-80GB", "8.0")]
    gh200 = [("NVIDIA GH200 480GB", "9.0")]
    tegra = _rule_cuda(_aarch64_env("tegra"), a100)
    assert [c for c, _ in tegra] == ["EG554", "EG552"], tegra
    assert tegra[0][1].startswith("torch is the tegra variant of conda-forge's CUDA 12.9 build of torch 2.13.0 "
                                  "(Jetson (Orin) only, sm_87 to sm_87")
    assert "sbsa and tegra share its build string" in tegra[0][1]
    assert "(tegra variant)" in tegra[1][1]
    sbsa = _rule_cuda(_aarch64_env("sbsa"), a100)
    assert [c for c, _ in sbsa] == ["EG554"] and "sbsa variant" in sbsa[0][1] and "server GPUs" in sbsa[0][1]
    orin = _rule_cuda(_aarch64_env("tegra"), [("Orin", "8.7")])
    assert [c for c, _ in orin] == ["EG554"]
    assert [c for c, _ in _rule_cuda(_aarch64_env("tegra"), gh200)] == ["EG554"]  # named: "Jetson (Orin) only"
    assert [c for c, _ in _rule_cuda(_aarch64_env(None), a100)] == []  # no variant recorded: nothing to name


def test_check_gives_the_same_answer_for_a_lock() -> None:
    """check on an environment whose lock holds a win-64 cuda120 build of 2.5.1 (conda-forge built 12.6 only):
    the error init and lint give, naming the line that exists."""
    from envguard.model import Package

    info = PrefixInfo(Path("/opt/env"), is_conda=True, is_venv=False, python_version="3.11.9",
                      site_packages=["Lib/site-packages"])
    locked = [Package("pytorch", "2.5.1", "conda", build="cuda120_py311h0_300", channel="conda-forge",
                      platform="win-64")]
    found = checks.rule_cuda(checks.CheckInput(info=info, platform="win-64", lock_packages=locked))
    assert [(f.code, f.severity.value) for f in found] == [("EG555", "error")]
    assert found[0].message == ("the lock's pytorch 2.5.1 cuda120_py311h0_300: conda-forge builds torch 2.5 only "
                                "for CUDA 12.6 on win-64")
    assert "cuda-version=12.6" in found[0].fix
    ok = [Package("pytorch", "2.5.1", "conda", build="cuda126_py311h0_300", channel="conda-forge", platform="win-64")]
    assert checks.rule_cuda(checks.CheckInput(info=info, platform="win-64", lock_packages=ok)) == []
