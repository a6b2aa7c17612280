"""The pure diff: pairing, classification, ordering, spec against lock, serialisation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from envguard.diff import (
    Change,
    DiffResult,
    PlatformDiff,
    Side,
    classify,
    core_rank,
    cuda_line,
    diff_packages,
    diff_requested,
    spec_vs_lock,
    to_markdown,
    variant,
)
from envguard.diff.sides import SideArgs, choose_platforms, compare
from envguard.model import Package
from envguard.sources import RequestedSpec, load

CF = "https://conda.anaconda.org/conda-forge"


def conda(name: str, version: str, build: str, *, channel: str = "conda-forge", subdir: str = "linux-64",
          sha256: str | None = None, md5: str | None = None) -> Package:
    url = f"https://conda.anaconda.org/{channel}/{subdir}/{name}-{version}-{build}.conda"
    return Package(name=name, version=version, build=build, channel=channel, sha256=sha256, md5=md5, url=url,
                   platform=subdir)


def pip(name: str, version: str, sha256: str | None = None) -> Package:
    return Package(name=name, version=version, manager="pip", sha256=sha256, platform="linux-64",
                   url=f"https://files.pythonhosted.org/packages/aa/{name}-{version}-py3-none-any.whl")


# --------------------------------------------------------------------------- build-string facts


@pytest.mark.parametrize("pkg, line, var", [
    (conda("pytorch", "2.1.2", "cuda120_py311h2667f23_304"), "12.0", "cuda"),
    (conda("pytorch", "2.7.1", "cuda126_mkl_py312_h30b5a27_300"), "12.6", "cuda"),
    (conda("pytorch", "1.9.0", "py3.8_cuda11.1_cudnn8.0.5_0", channel="pytorch"), "11.1", "cuda"),
    (conda("torchvision", "0.10.0", "py38_cu111", channel="pytorch"), "11.1", "cuda"),
    (conda("torchvision", "0.16.1", "cuda120py311hc5d84be_3"), "12.0", "cuda"),
    (conda("kaldi", "5.5.1112", "cuda118h03c5bf3_9"), "11.8", "cuda"),
    (conda("pytorch", "2.1.2", "cpu_generic_py311hc35e6e7_4", subdir="osx-arm64"), None, "cpu"),
    (conda("pytorch", "2.4.1", "py3.12_cpu_0", channel="pytorch", subdir="win-64"), None, "cpu"),
    (conda("_py-xgboost-mutex", "2.0", "gpu_0"), None, "cuda"),
    (conda("python", "3.11.9", "hb806964_0_cpython"), None, None),
    (conda("cudnn", "8.9.7.29", "h092f7fd_3"), None, None),
    (conda("cuda-version", "12.9", "h4f385c5_3", subdir="noarch"), "12.9", None),
    (conda("pytorch-cuda", "11.8", "h7e8668a_5", channel="pytorch"), "11.8", None),
    (pip("torch", "2.1.0+cu121"), "12.1", "cuda"),
    (pip("torch", "2.1.0+cpu"), None, "cpu"),
    (pip("torch", "2.1.0"), None, None),
])
def test_cuda_line_and_variant(pkg: Package, line: str | None, var: str | None) -> None:
    assert cuda_line(pkg) == line
    assert variant(pkg) == var


def test_core_rank_orders_python_torch_cuda_numpy() -> None:
    keys = ["zlib", "numpy", "cuda-version", "torch", "python", "nvidia-cublas-cu12", "cudnn"]
    assert sorted(keys, key=lambda k: (core_rank(k), k)) == [
        "python", "torch", "cuda-version", "cudnn", "nvidia-cublas-cu12", "numpy", "zlib"]


# --------------------------------------------------------------------------- classification


def test_equal_inputs_give_no_changes(realworld: Path) -> None:
    pkgs = load(str(realworld / "conda-lock" / "Clay-foundation__model__conda-lock@32518ce.yml")).packages["linux-64"]
    assert diff_packages(pkgs, list(reversed(pkgs))) == []


def test_each_class() -> None:
    old = [
        conda("python", "3.10.14", "hd12c33a_0_cpython"),
        conda("pytorch", "2.1.2", "cuda118_py310h1_300"),
        conda("cuda-version", "11.8", "h70ddcb2_3", subdir="noarch"),
        conda("numpy", "1.26.4", "py310h1_0"),
        conda("zlib", "1.3.1", "h4ab18f5_1", sha256="a" * 64),
        conda("scipy", "1.14.1", "py310h1_0"),
        conda("requests", "2.32.3", "pyhd8ed1ab_0", subdir="noarch"),
        conda("tqdm", "4.66.4", "pyhd8ed1ab_0", subdir="noarch"),
        conda("gone", "1.0", "0"),
    ]
    new = [
        conda("python", "3.11.9", "hb806964_0_cpython"),
        conda("pytorch", "2.1.2", "cuda126_py311h1_300"),
        conda("cuda-version", "12.6", "h7480c83_3", subdir="noarch"),
        conda("numpy", "1.26.4", "py311h2_0"),
        conda("zlib", "1.3.1", "h4ab18f5_1", sha256="b" * 64),
        conda("scipy", "1.13.0", "py311h1_0"),
        conda("requests", "2.32.3", "pyhd8ed1ab_0", channel="pkgs/main", subdir="noarch"),
        pip("tqdm", "4.66.4"),
        conda("fresh", "1.0", "0"),
    ]
    changes = {c.name: c for c in diff_packages(old, new)}
    assert changes["python"].kinds == ("upgraded", "python-minor")
    assert changes["pytorch"].kinds == ("rebuilt", "cuda-line") and "CUDA 11.8 → 12.6" in changes["pytorch"].detail
    assert changes["cuda-version"].kinds == ("upgraded", "cuda-line")
    assert changes["numpy"].kinds == ("rebuilt",)
    assert changes["zlib"].kinds == ("hash-changed",) and changes["zlib"].severity == "error"
    assert changes["scipy"].kinds == ("downgraded",)
    assert changes["requests"].kinds == ("channel",)
    assert changes["tqdm"].kinds == ("manager",) and changes["tqdm"].detail == "conda → pip"
    assert changes["gone"].kinds == ("removed",) and changes["fresh"].kinds == ("added",)
    # core first, in the order python, torch, CUDA, numpy
    assert [c.name for c in diff_packages(old, new)][:4] == ["python", "pytorch", "cuda-version", "numpy"]


def test_cpu_cuda_flip_and_conda_to_pip_torch() -> None:
    kinds, detail = classify(conda("pytorch", "2.1.2", "cuda120_py311h2667f23_304"),
                             conda("pytorch", "2.1.2", "cpu_mkl_py311h5d8a811_104"))
    assert kinds == ("rebuilt", "cpu-cuda-flip") and detail == "CUDA 12.0 → CPU"
    changes = diff_packages([conda("pytorch", "2.1.0", "cuda118_py311h1_0")], [pip("torch", "2.1.0+cu121")])
    (c,) = changes
    assert c.key == "torch" and c.kinds[0] == "manager" and "cuda-line" in c.kinds


def test_hash_change_needs_the_same_artifact() -> None:
    a = conda("python_abi", "3.11", "4_cp311", subdir="linux-64", sha256="a" * 64)
    b = conda("python_abi", "3.11", "4_cp311", subdir="osx-arm64", sha256="b" * 64)
    assert classify(a, b) == ((), "")  # one build string, two platforms: two artifacts
    c = dataclasses.replace(a, sha256="c" * 64, url=a.url.replace("conda-forge", "mirror"))
    assert classify(a, c)[0] == ("hash-changed",)
    # md5 only on one side, sha256 only on the other: nothing to compare
    assert classify(dataclasses.replace(a, sha256=None, md5="1" * 32), a) == ((), "")


def test_same_key_different_names_are_separate() -> None:
    old = [conda("pytorch", "2.7.1", "cuda126_x_0"), conda("pytorch-gpu", "2.7.1", "cuda126_x_0")]
    new = [conda("pytorch", "2.7.1", "cuda126_x_0"), conda("pytorch-cpu", "2.7.1", "cpu_x_0")]
    kinds = sorted((c.name, c.kinds) for c in diff_packages(old, new))
    assert kinds == [("pytorch-cpu", ("added",)), ("pytorch-gpu", ("removed",))]


# --------------------------------------------------------------------------- spec against lock


def test_spec_vs_lock_statuses() -> None:
    specs = [
        RequestedSpec("python", "python ~=3.11.0"),
        RequestedSpec("pytorch", "pytorch >=2.7.0=cuda12*", platforms=("linux-64",)),
        RequestedSpec("pytorch", "pytorch >=2.7.0", platforms=("osx-arm64",)),
        RequestedSpec("numpy", "numpy <2"),
        RequestedSpec("torchvision", "torchvision", channel="pytorch"),
        RequestedSpec("absent", "absent"),
        RequestedSpec("simple_parsing", "simple_parsing>=0.1", manager="pip"),
    ]
    locked = [conda("python", "3.11.9", "hb806964_0_cpython"), conda("pytorch", "2.7.1", "cpu_mkl_py311_h1_0"),
              conda("numpy", "2.1.0", "py311h1_0"), conda("torchvision", "0.22.0", "cpu_py311_h1_0"),
              pip("simple-parsing", "0.1.5"), conda("libzlib", "1.3.1", "h1_0")]
    rep = spec_vs_lock(specs, locked, "linux-64")
    st = {c.spec.spec: (c.status, c.reason) for c in rep.checks}
    assert st["python ~=3.11.0"] == ("satisfied", "")
    assert st["pytorch >=2.7.0=cuda12*"][0] == "unsatisfied" and "build cpu_mkl" in st["pytorch >=2.7.0=cuda12*"][1]
    assert "pytorch >=2.7.0" not in st  # the osx selector does not apply on linux-64
    assert st["numpy <2"][0] == "unsatisfied"
    assert st["torchvision"] == ("unsatisfied", "from channel conda-forge, asked for pytorch")
    assert st["absent"][0] == "missing"
    assert st["simple_parsing>=0.1"] == ("satisfied", "")
    assert [c.status for c in rep.checks][:1] == ["missing"]  # failures first
    assert [p.name for p in rep.unrequested] == ["libzlib"]
    osx = spec_vs_lock(specs, locked, "osx-arm64")
    assert {c.spec.spec for c in osx.checks} >= {"pytorch >=2.7.0"}


def test_diff_requested() -> None:
    a = [RequestedSpec("pytorch", "pytorch =2.0.0", channel="pytorch"), RequestedSpec("numpy", "numpy"),
         RequestedSpec("tqdm", "tqdm")]
    b = [RequestedSpec("pytorch", "pytorch >=2.4"), RequestedSpec("numpy", "numpy"),
         RequestedSpec("rich", "rich")]
    got = {c.key: (c.kinds, c.old_spec, c.new_spec) for c in diff_requested(a, b)}
    assert got == {"torch": (("spec-changed",), "pytorch::pytorch =2.0.0", "pytorch >=2.4"),
                   "tqdm": (("removed",), "tqdm", None), "rich": (("added",), None, "rich")}



def test_diff_requested_across_spec_formats() -> None:
    """environment.yml writes `python=3.11`, a pixi manifest `python 3.11.*`: the same request, no change. A
    different one is still a change."""
    env = [RequestedSpec("python", "python =3.11"), RequestedSpec("pytorch", "pytorch =2.12.*=cuda12*"),
           RequestedSpec("cuda-version", "cuda-version =12.9"), RequestedSpec("rich", "rich>=13", "pip")]
    pixi = [RequestedSpec("python", "python 3.11.*"), RequestedSpec("pytorch", "pytorch 2.12.* cuda12*"),
            RequestedSpec("cuda-version", "cuda-version 12.6.*"), RequestedSpec("rich", "rich >=13", "pip")]
    got = {c.key: (c.old_spec, c.new_spec) for c in diff_requested(env, pixi)}
    assert got == {"cuda-version": ("cuda-version =12.9", "cuda-version 12.6.*")}


# --------------------------------------------------------------------------- platform choice


def test_platform_choice(realworld: Path) -> None:
    clay = load(str(realworld / "conda-lock" / "Clay-foundation__model__conda-lock@32518ce.yml"))
    yi = load(str(realworld / "conda-lock" / "01-ai__Yi__conda-lock.yml"))
    export = load(str(realworld / "export" / "ArjunArasappan__dynamo_ssl__conda_env.yml"))  # names no platform
    assert choose_platforms(clay, clay, host="osx-arm64")[0] == [("osx-arm64", "osx-arm64")]
    assert choose_platforms(clay, yi, host="win-64")[0] == [("linux-64", "linux-64")]  # the only common one
    assert choose_platforms(clay, export, host="linux-64")[0] == [("linux-64", None)]
    # several shared platforms, none this host's: all of them, not a refusal
    assert choose_platforms(clay, clay, host="win-64") == (
        [("linux-64", "linux-64"), ("osx-64", "osx-64"), ("osx-arm64", "osx-arm64")], [], [])
    pairs, only_a, only_b = choose_platforms(clay, yi, all_platforms=True)
    assert pairs == [("linux-64", "linux-64")] and only_a == ["osx-64", "osx-arm64"] and only_b == []


# --------------------------------------------------------------------------- serialisation


def test_result_round_trips_through_json(realworld: Path) -> None:
    f = str(realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock")
    r = compare(SideArgs(f, environment="cpu"), SideArgs(f, environment="gpu"))
    torch = next(c for c in r.platforms[0].changes if c.name == "pytorch")
    assert "cpu-cuda-flip" in torch.kinds
    d = json.loads(json.dumps(r.to_dict()))
    back = DiffResult.from_dict(d)
    assert back.to_dict() == d
    assert [c.to_dict() for c in back.platforms[0].changes] == [c.to_dict() for c in r.platforms[0].changes]
    assert Change.from_dict(torch.to_dict()) == dataclasses.replace(
        torch, old=dataclasses.replace(torch.old, depends=()), new=dataclasses.replace(torch.new, depends=()))


def test_markdown_escapes_and_redacts() -> None:
    secret = conda("a|b", "1.0", "0")
    secret = dataclasses.replace(secret, channel="https://***@private.example/ch")
    r = DiffResult(Side("A", "explicit", "https://user:tok3n@example.org/x.lock"), Side("B", "explicit", "y"),
                   platforms=[PlatformDiff("linux-64", "linux-64", [Change("a-b", ("added",), new=secret)])])
    md = to_markdown(r)
    assert "tok3n" not in md and "a\\|b" in md and md.startswith("### envguard diff")


def test_pip_markers_follow_the_compared_platform() -> None:
    specs = [RequestedSpec("pywin32", 'pywin32>=300; sys_platform == "win32"', manager="pip"),
             RequestedSpec("uvloop", 'uvloop; platform_system != "Windows" and python_version >= "3.10"',
                           manager="pip")]
    locked = [conda("python", "3.11.9", "h1_0_cpython")]
    assert [c.spec.name for c in spec_vs_lock(specs, locked, "linux-64").checks] == ["uvloop"]
    assert [c.spec.name for c in spec_vs_lock(specs, locked, "win-64").checks] == ["pywin32"]
    old_py = [conda("python", "3.9.19", "h1_0_cpython")]
    assert spec_vs_lock(specs, old_py, "linux-64").checks == []


def test_a_cuda_minor_change_is_a_cuda_line_change() -> None:
    """12.4 -> 12.6 is a CUDA-line change (driver minimums and kernels differ by minor), in the package that
    pins the line and in a build string alike; the same line twice, or 12 (major only) against 12.6, is not."""
    old = [conda("cuda-version", "12.4", "h3060b56_3", subdir="noarch"),
           conda("pytorch", "2.5.1", "cuda124_py311h1_300"), conda("cudnn", "9.3.0.75", "h93bb076_0")]
    new = [conda("cuda-version", "12.6", "h7480c83_3", subdir="noarch"),
           conda("pytorch", "2.5.1", "cuda126_py311h1_300"), conda("cudnn", "9.3.0.75", "h50b6be5_0")]
    changes = {c.name: c for c in diff_packages(old, new)}
    assert changes["cuda-version"].kinds == ("upgraded", "cuda-line") and "CUDA 12.4 → 12.6" in changes["cuda-version"].detail
    assert changes["pytorch"].kinds == ("rebuilt", "cuda-line") and "CUDA 12.4 → 12.6" in changes["pytorch"].detail
    assert changes["cudnn"].kinds == ("rebuilt",)
    same_major = diff_packages([conda("pytorch", "2.5.1", "cuda12_py311h1_300")],
                               [conda("pytorch", "2.5.1", "cuda126_py311h1_300")])
    assert "cuda-line" not in same_major[0].kinds
