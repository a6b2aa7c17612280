"""envguard/data/compat.yaml: its schema, and the facts envguard builds on (one data file, per route)."""

from __future__ import annotations

import copy

import pytest

from envguard import compat


def test_the_shipped_data_passes_its_schema() -> None:
    assert compat.validate(compat.load_all()) == []


@pytest.mark.parametrize("damage, problem", [
    (lambda d: d["routes"]["pypi"]["releases"].__setitem__("2.16", {"status": "released"}), "2.16.source"),
    (lambda d: d["routes"]["pypi"]["releases"]["2.13"].__setitem__("status", "final"), "2.13.status"),
    (lambda d: d["routes"]["pypi"]["releases"]["2.13"].__setitem__("python", ["3.12", "3.11"]), "2.13.python"),
    (lambda d: d["routes"]["conda-forge"]["releases"]["2.13"]["cuda"].__setitem__("win-64", ["13.0", "12.8"]),
     "2.13.cuda.win-64"),
    (lambda d: d["routes"]["conda-forge"]["releases"]["2.13"].__setitem__("cpu", None), "2.13.cpu"),
    (lambda d: d["routes"]["conda-forge"]["arch"][0].__setitem__("sm", ["5.0"]), "arch[0].sm"),
    (lambda d: d["routes"]["conda-forge"]["arch"][0].pop("source"), "arch[0].source"),
    (lambda d: d["drivers"].__setitem__("12", {"linux": "five"}), "drivers.12.linux"),
    (lambda d: d["routes"].pop("pypi"), "routes"),
    (lambda d: d["routes"]["conda-forge"]["releases"]["2.12"]["versions"].append("2.13.0"), "2.12.versions"),
    # PyPI's 2.15 (released 2026-10-28, evidence: the PyPI index) dropped Python 3.10: the rows and
    # python.legacy's last torch must agree
    (lambda d: d["routes"]["pypi"]["releases"]["2.15"]["python"].insert(0, "3.10"), "pypi.releases.2.15.python"),
    (lambda d: d["routes"]["pypi"]["releases"]["2.15"].pop("source"), "2.15.source"),
])
def test_a_damaged_file_fails_the_schema(damage, problem: str) -> None:
    data = copy.deepcopy(compat.load_all())
    damage(data)
    problems = compat.validate(data)
    assert any(problem in p for p in problems), problems


def test_every_release_row_names_status_and_evidence() -> None:
    c = compat.load()
    for route in c.routes.values():
        for rel in route.releases:
            assert rel.status in compat.STATUSES and rel.source, (route.name, rel.version)
            if rel.released:
                assert rel.python, (route.name, rel.version)


def test_routes_keep_their_own_facts() -> None:
    """conda-forge builds other CUDA lines than PyPI's wheels, and differs per platform."""
    c = compat.load()
    cf, pypi = c.route("conda-forge"), c.route("pypi")
    assert cf.release("2.13").cuda_on("linux-64") == ("12.9", "13.0")
    assert cf.release("2.13").cuda_on("win-64") == ("12.8", "13.0")
    assert cf.release("2.13").cuda_on("osx-arm64") == ()
    assert pypi.release("2.13").cuda_on("linux-64") == ("12.6", "13.0", "13.2")
    assert "13.2" in pypi.release("2.12").cuda and pypi.release("2.4").released  # rows the old table missed
    # nothing on conda-forge defaults to a release without evidence: 2.14 and 2.15 are rows of status unknown
    assert cf.newest == c.newest_torch == "2.13"
    assert cf.release("2.14").status == cf.release("2.15").status == "unknown"
    assert c.torch("2.15.0") is None and c.torch("2.15.0", "pypi") is not None
    assert "PyPI" in pypi.release("2.15").source and "3.10" not in pypi.release("2.15").python
    assert c.route("pytorch").frozen_at == "2.5" and c.route("pytorch").newest == "2.5"


def test_build_lines_follow_cuda_version_semantics() -> None:
    """A cudaXYZ build depends on cuda-version >=X.Y,<X+1: a later minor of its major serves it, nothing else."""
    rel = compat.load().route("conda-forge").release("2.13")
    assert rel.build_line("linux-64", "12.9") == "12.9"
    assert rel.build_line("win-64", "12.9") == "12.8"  # the cuda128 build on the 12.9 libraries
    assert rel.build_line("linux-64", "12.8") is None  # never a build of a higher minor
    assert rel.build_line("linux-64", "13.1") == "13.0"
    assert rel.cuda_choices(["linux-64", "win-64"]) == ["12.9", "13.0"]
    legacy = compat.load().route("pytorch").release("2.5")
    assert legacy.build_line("linux-64", "12.4") == "12.4" and legacy.build_line("linux-64", "12.6") is None


@pytest.mark.parametrize("build, line", [
    ("cuda129_mkl_py311_h333e2d5_303", "12.9"),
    ("cuda118_py310h1234_300", "11.8"),
    ("py3.11_cuda12.1_cudnn8.9.2_0", "12.1"),
    ("cuda12*", "12"),
    ("cuda92_0", "9.2"),
    ("*cuda*", "any"),
    ("cpu_generic_py311_h0_0", None),
])
def test_cuda_in_build(build: str, line: str | None) -> None:
    assert compat.cuda_in_build(build) == line
