"""One set of mixing rules for every kind (#14, classes 3-5): channels, CUDA lines across conda and pip,
torch from two managers. Files written here are real formats: conda-lock parses the locks, rattler the
pixi.lock and the explicit file; the live prefix is installed by rattler."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from support import channels, check_envs

from envguard.diff import SideArgs, compare
from envguard.findings import Severity
from envguard.lint import lint_file, lint_text

CF = "https://conda.anaconda.org/conda-forge"
MAIN = "https://repo.anaconda.com/pkgs/main"
PYPI = "https://files.pythonhosted.org/packages/ab/cd"


def _entry(name: str, version: str, url: str, manager: str = "conda", deps: dict[str, str] | None = None) -> dict:
    return {"name": name, "version": version, "manager": manager, "platform": "linux-64",
            "dependencies": deps or {}, "url": url, "hash": {"md5": "0" * 32, "sha256": "1" * 64},
            "category": "main", "optional": False}


def _lock(path: Path, *entries: dict, channels_: tuple[str, ...] = ("conda-forge",)) -> Path:
    import yaml

    data = {"version": 1, "metadata": {"content_hash": {"linux-64": "a" * 64},
                                       "channels": [{"url": c, "used_env_vars": []} for c in channels_],
                                       "platforms": ["linux-64"], "sources": ["environment.yml"]},
            "package": list(entries)}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    from conda_lock.lockfile import parse_conda_lock_file

    parse_conda_lock_file(path)  # conda-lock itself accepts the file
    return path


def _by_code(findings: list) -> dict:
    out: dict = {}
    for f in findings:
        out.setdefault(f.code, []).append(f)
    return out


MIXED = (
    _entry("python", "3.11.9", f"{MAIN}/linux-64/python-3.11.9-h955ad1f_0.conda"),
    _entry("mkl", "2021.4.0", f"{MAIN}/linux-64/mkl-2021.4.0-h06a4308_640.conda"),
    _entry("llvm-openmp", "17.0.6", f"{CF}/linux-64/llvm-openmp-17.0.6-h4dfa4b3_0.conda"),
    _entry("numpy", "1.26.4", f"{CF}/linux-64/numpy-1.26.4-py311h64a7726_0.conda"),
)


def test_channel_mix_in_a_conda_lock_names_the_records(tmp_path: Path) -> None:
    p = _lock(tmp_path / "conda-lock.yml", *MIXED, channels_=("conda-forge", "defaults"))
    fs = _by_code(lint_file(p))
    (mix,) = fs["EG113"]
    assert mix.severity is Severity.ERROR and "python 3.11.9" in mix.message and "numpy 1.26.4" in mix.message
    assert "pkgs/main" in mix.message and "on linux-64" in mix.message
    assert "python-3.11.9" in p.read_text().splitlines()[mix.line - 1]  # the line of a record involved
    (omp,) = fs["EG156"]
    assert "mkl 2021.4.0" in omp.message and "llvm-openmp 17.0.6" in omp.message and omp.package == "mkl"


def test_channel_mix_in_an_explicit_file(tmp_path: Path) -> None:
    p = tmp_path / "conda-linux-64.lock"
    p.write_text("# platform: linux-64\n@EXPLICIT\n" + "".join(f"{e['url']}#{'0' * 32}\n" for e in MIXED))
    from rattler.explicit_environment import ExplicitEnvironmentSpec

    assert len(ExplicitEnvironmentSpec.from_path(p).packages) == 4
    assert {"EG113", "EG156"} <= {f.code for f in lint_file(p)}


def test_channel_mix_in_an_export(tmp_path: Path) -> None:
    p = tmp_path / "environment.yml"
    p.write_text(textwrap.dedent("""\
        name: exported
        channels:
          - conda-forge
        dependencies:
          - _libgcc_mutex=0.1=conda_forge
          - ld_impl_linux-64=2.40=h41732ed_0
          - libgcc-ng=13.2.0=h807b86a_5
          - pkgs/main::mkl=2021.4.0=h06a4308_640
          - pkgs/main::intel-openmp=2021.4.0=h06a4308_3561
          - conda-forge::llvm-openmp=17.0.6=h4dfa4b3_0
          - python=3.11.9=hb806964_0_cpython
        prefix: /opt/conda/envs/exported
        """))
    fs = _by_code(lint_file(p))
    assert "mkl" in fs["EG156"][0].message and fs["EG156"][0].line == 8
    assert "EG113" in fs


PIXI_LOCK = """\
version: 6
environments:
  default:
    channels:
    - url: https://conda.anaconda.org/conda-forge/
    - url: https://repo.anaconda.com/pkgs/main/
    packages:
      linux-64:
      - conda: {MAIN}/linux-64/mkl-2021.4.0-h06a4308_640.conda
      - conda: {CF}/linux-64/llvm-openmp-17.0.6-h4dfa4b3_0.conda
      - conda: {CF}/linux-64/pytorch-2.1.2-cuda118_py311h0_300.conda
      - pypi: {PYPI}/torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl
      - pypi: {PYPI}/nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl
packages:
- conda: {MAIN}/linux-64/mkl-2021.4.0-h06a4308_640.conda
  sha256: {h}
  md5: {m}
  depends: []
- conda: {CF}/linux-64/llvm-openmp-17.0.6-h4dfa4b3_0.conda
  sha256: {h}
  md5: {m}
  depends: []
- conda: {CF}/linux-64/pytorch-2.1.2-cuda118_py311h0_300.conda
  sha256: {h}
  md5: {m}
  depends: []
- pypi: {PYPI}/torch-2.3.0-cp311-cp311-manylinux1_x86_64.whl
  name: torch
  version: 2.3.0
  sha256: {h}
  requires_dist:
  - nvidia-cublas-cu12==12.1.3.1
- pypi: {PYPI}/nvidia_cublas_cu12-12.1.3.1-py3-none-manylinux1_x86_64.whl
  name: nvidia-cublas-cu12
  version: 12.1.3.1
  sha256: {h}
"""


def test_every_mixing_rule_on_a_pixi_lock(tmp_path: Path) -> None:
    p = tmp_path / "pixi.lock"
    p.write_text(PIXI_LOCK.format(MAIN=MAIN, CF=CF, PYPI=PYPI, h="ab" * 32, m="cd" * 16))
    from rattler import LockFile

    ((_, env),) = LockFile.from_path(p).environments()  # rattler reads the file we wrote
    assert [len(list(env.packages(lp))) for lp in env.platforms()] == [5]
    fs = _by_code(lint_file(p))
    assert {"EG113", "EG156", "EG157", "EG158"} <= set(fs)
    cuda = fs["EG157"][0].message
    assert "nvidia-cublas-cu12" in cuda and "pytorch 2.1.2" in cuda and "loads pip's torch 2.3.0" in cuda


def test_cuda_lines_mixed_across_managers_and_within_conda(tmp_path: Path) -> None:
    across = _lock(tmp_path / "a.yml",
                   _entry("cudatoolkit", "11.8.0", f"{CF}/linux-64/cudatoolkit-11.8.0-h4ba93d1_13.conda"),
                   _entry("nvidia-cublas-cu12", "12.1.3.1", f"{PYPI}/nvidia_cublas_cu12-12.1.3.1-py3-none-"
                                                           "manylinux1_x86_64.whl", manager="pip"))
    (f,) = _by_code(lint_file(across))["EG157"]
    assert "pip CUDA 12: nvidia-cublas-cu12 12.1.3.1" in f.message and "conda CUDA 11: cudatoolkit 11.8.0" in f.message
    assert "nvidia_cublas_cu12" in across.read_text().splitlines()[f.line - 1]
    within = _lock(tmp_path / "b.yml",
                   _entry("cuda-cudart", "11.8.89", f"{CF}/linux-64/cuda-cudart-11.8.89-h0_0.conda"),
                   _entry("cuda-version", "11.8", f"{CF}/noarch/cuda-version-11.8-h70ddcb2_3.conda"),
                   _entry("cuda-cccl", "12.4.127", f"{CF}/linux-64/cuda-cccl-12.4.127-h0_0.conda"))
    (g,) = _by_code(lint_file(within))["EG157"]
    assert "CUDA 11: cuda-cudart 11.8.89, cuda-version 11.8" in g.message and "CUDA 12: cuda-cccl 12.4.127" in g.message
    same = _lock(tmp_path / "c.yml",
                 _entry("cuda-cudart", "12.4.127", f"{CF}/linux-64/cuda-cudart-12.4.127-h0_0.conda"),
                 _entry("cuda-version", "12.4", f"{CF}/noarch/cuda-version-12.4-h3060b56_3.conda"),
                 _entry("cuda-pathfinder", "1.1.0", f"{CF}/noarch/cuda-pathfinder-1.1.0-pyh0_0.conda"),
                 _entry("nvidia-nccl-cu12", "2.21.5", f"{PYPI}/nvidia_nccl_cu12-2.21.5-py3-none-"
                                                      "manylinux2014_x86_64.whl", manager="pip"))
    assert "EG157" not in _by_code(lint_file(same))


TWICE = (
    _entry("python", "3.10.14", f"{CF}/linux-64/python-3.10.14-hd12c33a_0_cpython.conda"),
    _entry("pytorch", "1.13.1", f"{CF}/linux-64/pytorch-1.13.1-cpu_py310h0_1.conda"),
    _entry("lightning", "2.2.0", f"{PYPI}/lightning-2.2.0-py3-none-any.whl", manager="pip",
           deps={"torch": ">=1.13.0", "pyyaml": "*"}),
    _entry("torch", "2.3.0", f"{PYPI}/torch-2.3.0-cp310-cp310-manylinux1_x86_64.whl", manager="pip"),
)


def test_torch_twice_in_a_lock_says_which_is_imported(tmp_path: Path) -> None:
    p = _lock(tmp_path / "conda-lock.yml", *TWICE)
    fs = _by_code(lint_file(p))
    (f,) = fs["EG158"]
    assert "conda pytorch 1.13.1" in f.message and "pip torch 2.3.0" in f.message
    assert "loads pip's copy 2.3.0" in f.message and "pulled in by pip's lightning" in f.message
    assert "EG151" not in fs  # the generic rule leaves torch to EG158


def test_diff_spec_against_a_lock_with_torch_twice_is_not_satisfied(tmp_path: Path) -> None:
    lock = _lock(tmp_path / "conda-lock.yml", *TWICE)
    env = tmp_path / "environment.yml"
    env.write_text("channels: [conda-forge]\ndependencies:\n  - python=3.10\n  - pytorch=1.13\n  - pip\n"
                   "  - pip:\n    - lightning\n")
    r = compare(SideArgs(str(env)), SideArgs(str(lock)))
    check = next(c for c in r.spec_reports[0].checks if c.spec.name == "pytorch")
    assert check.status == "unsatisfied" and check.locked is not None and check.locked.version == "2.3.0"
    assert "conda pytorch 1.13.1 is locked too" in check.reason and "`import` loads" in check.reason
    assert not r.equal


def test_spec_level_rules(tmp_path: Path) -> None:
    p = tmp_path / "environment.yml"
    p.write_text(textwrap.dedent("""\
        name: x
        channels:
          - conda-forge
        dependencies:
          - python=3.11
          - pytorch=2.6.*=cuda*  # [linux]
          - cudatoolkit=11.8
          - pip
          - pip:
            - nvidia-cudnn-cu12==9.1.0.70
            - torch==2.6.0  # [osx]
        """))
    fs = _by_code(lint_file(p))
    assert fs["EG157"][0].line == 10 and "cudatoolkit" in fs["EG157"][0].message
    assert "EG158" not in fs  # pytorch on linux, pip torch on osx: never both on one platform
    # the pip torch's CUDA beside conda's cudatoolkit is said once, by EG157 with both lines (not EG107 again)
    assert "EG107" not in fs and "EG109" in fs
    # torch from both in an environment file: EG107 (move it to conda) says it; EG158 is for what is locked
    both = p.read_text().replace("torch==2.6.0  # [osx]", "torch==2.6.0")
    codes = [f.code for f in lint_text(both, "environment.yml")]
    assert codes.count("EG107") == 1 and "EG158" not in codes


# --------------------------------------------------------------------------- a live prefix


@pytest.fixture
def cuda_prefix(channel_factory, tmp_path: Path) -> Path:
    plat = channels.host_platform()
    chan = channel_factory([
        {"name": "cudatoolkit", "version": "11.8.0", "build": "h0_13", "subdir": plat},
        {"name": "cuda-cccl", "version": "12.4.127", "build": "h0_0", "subdir": plat},
        {"name": "mkl", "version": "2021.4.0", "build": "h06a4308_640", "subdir": plat},
        {"name": "llvm-openmp", "version": "17.0.6", "build": "h4dfa4b3_0", "subdir": plat},
    ], name="conda-forge")
    cache = tmp_path / "pkgs"
    prefix, _ = check_envs.make_env(channels.channel_url(chan), ["cudatoolkit", "cuda-cccl", "mkl", "llvm-openmp"],
                                    tmp_path / "env", cache)
    return prefix


@pytest.mark.slow
def test_check_reports_mixing_in_a_live_prefix(cuda_prefix: Path, tmp_path: Path) -> None:
    from envguard.check import CheckOptions, run_check

    rep = run_check(CheckOptions(prefix=cuda_prefix, smoke=False, imports=False, driver_info_fn=lambda: None,
                                 cwd=tmp_path))
    (f,) = [f for f in rep.findings if f.code == "EG572"]
    assert "cudatoolkit 11.8.0" in f.message and "cuda-cccl 12.4.127" in f.message and f.severity is Severity.ERROR
    # the records of two of them as anaconda's defaults wrote them (conda-forge and defaults cannot be reached here)
    for rec in (cuda_prefix / "conda-meta").glob("mkl-*.json"):
        data = json.loads(rec.read_text())
        data["url"] = f"{MAIN}/{channels.host_platform()}/{data['fn']}"
        data["channel"] = MAIN
        rec.write_text(json.dumps(data))
    rep = run_check(CheckOptions(prefix=cuda_prefix, smoke=False, imports=False, driver_info_fn=lambda: None,
                                 cwd=tmp_path))
    codes = {f.code for f in rep.findings}
    assert {"EG570", "EG571", "EG572"} <= codes and rep.exit_code == 1
    assert any("mkl 2021.4.0 comes from pkgs/main" in f.message for f in rep.findings if f.code == "EG571")
