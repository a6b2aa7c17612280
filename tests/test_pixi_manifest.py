"""pixi manifests (pixi.toml, pyproject.toml with [tool.pixi]) as a spec kind for lint and diff."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envguard.diff import SideArgs, compare
from envguard.errors import UserError
from envguard.lint import lint_file, lint_paths
from envguard.sources import load

MANIFEST = """\
[workspace]
name = "demo"
channels = ["conda-forge"]
platforms = ["linux-64", "osx-arm64"]

[dependencies]
python = "3.11.*"
pytorch = { version = "2.7.*", build = "cuda*" }

[target.linux-64.dependencies]
cuda-version = "12.6.*"

[pypi-dependencies]
rich = ">=13"

[system-requirements]
cuda = "12"

[feature.cpu.dependencies]
pytorch-cpu = "*"

[feature.cpu]
platforms = ["linux-64"]

[environments]
cpu = ["cpu"]
"""


def _write(tmp_path: Path, text: str, name: str = "pixi.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def test_manifest_is_read_as_a_spec_with_features_targets_and_platforms(tmp_path: Path) -> None:
    d = load(str(_write(tmp_path, MANIFEST)))
    assert d.kind == "pixi-manifest" and d.is_spec and d.environments == ("default", "cpu")
    assert d.declared_platforms == ("linux-64", "osx-arm64")
    specs = {r.name: r for r in d.requested}
    assert specs["pytorch"].spec == "pytorch 2.7.* cuda*" and specs["pytorch"].line == 8
    assert specs["cuda-version"].platforms == ("linux-64",)
    assert specs["rich"].manager == "pip" and specs["rich"].spec == "rich>=13"
    cpu = load(str(tmp_path / "pixi.toml"), environment="cpu")
    assert cpu.declared_platforms == ("linux-64",) and "pytorch-cpu" in {r.name for r in cpu.requested}


def test_pyproject_with_tool_pixi(tmp_path: Path) -> None:
    p = _write(tmp_path, """\
        [build-system]
        requires = ["hatchling"]

        [project]
        name = "mypkg"
        requires-python = ">=3.11,<3.12"
        dependencies = ["torch>=2.5", "numpy"]

        [project.optional-dependencies]
        test = ["pytest"]

        [tool.pixi.workspace]
        channels = ["conda-forge"]
        platforms = ["linux-64"]

        [tool.pixi.dependencies]
        ffmpeg = "*"

        [tool.pixi.environments]
        test = ["test"]
        """, "pyproject.toml")
    d = load(str(p))
    specs = {r.name: r for r in d.requested}
    assert d.kind == "pixi-manifest" and specs["python"].spec == "python >=3.11,<3.12"
    assert specs["torch"].manager == "pip" and specs["torch"].line == 7 and specs["ffmpeg"].line == 17
    assert "pytest" in {r.name for r in load(str(p), environment="test").requested}
    # a pyproject.toml that is not a pixi manifest: one line, not "malformed YAML"
    plain = _write(tmp_path, "[project]\nname = 'x'\n\n[build-system]\nrequires = []\n", "plain.toml")
    with pytest.raises(UserError, match=r"TOML file without pixi's tables"):
        load(str(plain))
    bad = _write(tmp_path, "[workspace]\nchannels = [\"conda-forge\"] = 1\n", "bad.toml")
    with pytest.raises(UserError) as e:
        load(str(bad))
    assert "malformed TOML" in e.value.message and e.value.line == 2 and e.value.column


def test_real_manifests_lint_and_read(realworld: Path) -> None:
    files = sorted((realworld / "pixi").glob("*.toml"))
    assert len(files) >= 5
    result = lint_paths(files)
    assert result.unreadable == [], result.unreadable  # was: "malformed YAML: did not find expected <document start>"
    codes = {(Path(f.file).name, f.code) for f in result.findings}
    # cuda = "12.0" in [system-requirements] asks for CUDA, and pytorch has no cuda* build guard
    assert ("matthewfeickert__pytorch-gpu-pixi-example__pixi.toml", "EG112") in codes
    # the gpu and cpu features choose the variant with pytorch-gpu / pytorch-cpu: no guard needed
    assert ("wang7x__pixi-pytorch-example__pixi.toml", "EG112") not in codes
    lenskit = [f for f in result.findings if "lenskit" in f.file and f.code == "EG102"]
    assert lenskit and "environments doc, demo" in lenskit[0].message  # py312 environments only
    for f in files:
        for env in load(str(f)).environments:
            assert load(str(f), environment=env).requested or env != "default"


def test_manifest_rules_torch_pin_channels_and_cuda_line(tmp_path: Path) -> None:
    p = _write(tmp_path, """\
        [project]
        name = "x"
        channels = ["conda-forge", "defaults"]
        platforms = ["linux-64"]

        [system-requirements]
        cuda = "11.8"

        [dependencies]
        python = "3.11.*"
        pytorch = ">=2.8"
        """)
    fs = {f.code: f for f in lint_file(p)}
    assert fs["EG105"].line == 11 and fs["EG113"].line == 3  # torch not pinned, defaults with conda-forge
    assert fs["EG112"].line == 11 and "system-requirements" in fs["EG112"].message
    pinned = _write(tmp_path, """\
        [workspace]
        name = "x"
        channels = ["conda-forge"]
        platforms = ["linux-64"]

        [system-requirements]
        cuda = "11.8"

        [dependencies]
        python = "3.11.*"
        pytorch = { version = "2.8.*", build = "cuda*" }
        """, "pinned.toml")
    eg118 = [f for f in lint_file(pinned) if f.code == "EG118"]
    assert len(eg118) == 1 and eg118[0].line == 7 and "no CUDA 11.8 build" in eg118[0].message


def test_manifest_torch_from_both_managers_and_bad_version(tmp_path: Path) -> None:
    p = _write(tmp_path, """\
        [workspace]
        name = "x"
        channels = ["conda-forge"]
        platforms = ["linux-64"]

        [dependencies]
        python = "3.11.*"
        pytorch = "2.7.*"
        cudatoolkit = "11.8.*"
        numpy = ">=*"

        [pypi-dependencies]
        torch = "==2.7.1"
        nvidia-cublas-cu12 = "*"
        """)
    fs = lint_file(p)
    codes = {f.code: f for f in fs}
    assert codes["EG158"].line == 13 and "pip's" in codes["EG158"].message
    assert codes["EG157"].line == 14 and "cudatoolkit" in codes["EG157"].message
    assert codes["EG121"].line == 10 and "EG107" not in codes  # PyPI torch alone is a pixi route; both is EG158


def test_named_platforms_get_the_cuda_rules_of_their_subdir(tmp_path: Path) -> None:
    """pixi's platform tables (`{ name = "gpu", platform = "linux-64", cuda = "12" }`): the route and platform
    rules judge the subdir a name stands for, and the table's cuda asks for CUDA as [system-requirements] does."""
    named = _write(tmp_path, """\
        [workspace]
        name = "x"
        channels = ["conda-forge"]
        platforms = [{ name = "gpu", platform = "linux-64", cuda = "12" }, "osx-arm64"]

        [dependencies]
        python = "3.11.*"
        pytorch = "2.13.*"

        [target.gpu.dependencies]
        cuda-version = "12.6.*"
        """)
    fs = {f.code: f for f in lint_file(named)}
    # conda-forge has no 2.13 build for 12.6 on linux-64, whatever the platform is called
    assert fs["EG118"].line == 11 and "on linux-64" in fs["EG118"].message
    # the guard goes where CUDA is declared, in the manifest's own syntax
    assert '`pytorch = { version = "2.13.*", build = "cuda12*" }` under [target.gpu.dependencies]' in fs["EG112"].fix
    # only the table's cuda asks for CUDA: the same file without cuda-version still needs the guard
    plain = _write(tmp_path, named.read_text().replace('[target.gpu.dependencies]\ncuda-version = "12.6.*"\n', ""),
                   "plain.toml")
    eg112 = [f for f in lint_file(plain) if f.code == "EG112"]
    assert len(eg112) == 1 and 'cuda = "12" on platform gpu' in eg112[0].message


def test_manifest_fixes_are_written_in_pixi_syntax(tmp_path: Path) -> None:
    """A fix must work as written: in a pixi.toml that is `name = "spec"`, never environment.yml's `name=spec`."""
    p = _write(tmp_path, """\
        [workspace]
        name = "x"
        channels = ["conda-forge"]
        platforms = ["linux-64", "osx-arm64"]

        [system-requirements]
        cuda = "12"

        [dependencies]
        python = "3.9.*"
        pytorch = ">=2.10"

        [target.linux-64.dependencies]
        cuda-version = "12.6.*"
        """)
    fs = {f.code: f for f in lint_file(p)}
    assert fs["EG102"].fix == 'use `python = "3.11.*"`'
    assert fs["EG105"].fix == 'pin one release line, e.g. `pytorch = "2.13.*"`'
    cpu = fs["EG112"].fix.split("(or ", 1)[1]
    assert cpu == '`pytorch = { version = "*", build = "cpu*" }` for a CPU one)'  # CPU builds exist everywhere
    pinned = _write(tmp_path, p.read_text().replace('">=2.10"', '"2.13.*"'), "pinned.toml")
    eg118 = next(f for f in lint_file(pinned) if f.code == "EG118")
    assert eg118.fix == 'use `cuda-version = "12.9.*"`'


def test_no_channels_in_a_manifest(tmp_path: Path) -> None:
    p = _write(tmp_path, '[workspace]\nname = "x"\nplatforms = ["linux-64"]\n\n[dependencies]\npython = "3.11.*"\n')
    assert [f.code for f in lint_file(p)] == ["EG129"]


def test_diff_manifest_against_pixi_lock_per_environment_and_platform(realworld: Path) -> None:
    toml = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.toml"
    lock = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"
    r = compare(SideArgs(str(toml)), SideArgs(str(lock)))
    assert r.spec_side == "A" and {rep.environment for rep in r.spec_reports} == {"cpu", "gpu", "default"}
    assert r.equal, [c.reason for rep in r.spec_reports for c in rep.failing]
    gpu = next(rep for rep in r.spec_reports if rep.environment == "gpu")
    assert {c.spec.name for c in gpu.checks} >= {"pytorch-gpu", "cuda-version", "huggingface-hub"}
    assert "(env gpu)" in r.summary()
    # one environment on request
    one = compare(SideArgs(str(toml), environment="cpu"), SideArgs(str(lock), environment="cpu"))
    assert [rep.environment for rep in one.spec_reports] == [None] and one.b.environment == "cpu"


def test_diff_manifest_pairs_named_platforms_with_the_v7_lock(realworld: Path) -> None:
    toml = realworld / "pixi" / "prefix-dev__pixi__examples__multi-machine__pixi.toml"
    lock = realworld / "pixi" / "prefix-dev__pixi__examples__multi-machine__pixi.lock"
    r = compare(SideArgs(str(toml)), SideArgs(str(lock)), all_platforms=True)
    assert r.only_in_a == [] and r.only_in_b == [] and r.equal
    assert {rep.platform for rep in r.spec_reports} == {"p1", "p2", "p3", "linux-64", "win-64"}
    assert any("cuda-linux-64 = p2" in n for n in r.notes)
    mlx = next(rep for rep in r.spec_reports if rep.platform == "p3")  # osx-arm64: [target.osx] mlx applies
    assert "mlx" in {c.spec.name for c in mlx.checks}


def test_diff_manifest_against_conda_lock_reports_unsatisfied(tmp_path: Path, realworld: Path) -> None:
    clay = realworld / "conda-lock" / "Clay-foundation__model__conda-lock@32518ce.yml"
    p = _write(tmp_path, """\
        [workspace]
        name = "x"
        channels = ["conda-forge"]
        platforms = ["linux-64"]

        [dependencies]
        python = "3.11.*"
        pytorch = { version = "2.1.*", build = "cuda*" }
        """)
    r = compare(SideArgs(str(p)), SideArgs(str(clay)))
    (rep,) = r.spec_reports
    status = {c.spec.name: c.status for c in rep.checks}
    assert rep.platform == "linux-64" and status["pytorch"] == "satisfied"  # 2.1.2 cuda120
    cpu = _write(tmp_path, p.read_text().replace('build = "cuda*"', 'build = "cpu*"'), "cpu.toml")
    bad = compare(SideArgs(str(cpu)), SideArgs(str(clay)))
    check = next(c for c in bad.spec_reports[0].checks if c.spec.name == "pytorch")
    assert check.status == "unsatisfied" and "cuda120" in check.reason and not bad.equal


@pytest.mark.slow
def test_cli_lint_and_diff_of_a_manifest(tmp_path: Path, realworld: Path) -> None:
    toml = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.toml"
    lint = subprocess.run([sys.executable, "-m", "envguard", "lint", "--format", "json", str(toml)],
                          capture_output=True, text=True, timeout=120)
    doc = json.loads(lint.stdout)
    assert doc["unreadable"] == [] and "malformed" not in lint.stderr and lint.returncode == 1
    diff = subprocess.run([sys.executable, "-m", "envguard", "diff", str(toml),
                           str(realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"), "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert diff.returncode == 0, diff.stderr
    assert json.loads(diff.stdout)["a"]["kind"] == "pixi-manifest"
