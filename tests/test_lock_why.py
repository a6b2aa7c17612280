"""`envguard why NAME`: dependency paths read from the lock alone, on a real conda-lock file and on fresh locks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import channels
from support.lock_support import envguard, write_env
from support.relock_channel import base_packages

from envguard.errors import UserError
from envguard.lock import lock
from envguard.lock import why_locked as why
from envguard.lock.render import why_lines

CLAY_LOCK = "conda-lock/Clay-foundation__model__conda-lock@32518ce.yml"
CLAY_ENV = "environment/Clay-foundation__model__environment@32518ce.yml"


@pytest.fixture
def clay(realworld: Path, tmp_path: Path) -> Path:
    """Clay's real conda-lock.yml (conda-lock 2.x, 3 platforms) beside the environment.yml it was made from."""
    shutil.copy(realworld / CLAY_LOCK, tmp_path / "conda-lock.yml")
    shutil.copy(realworld / CLAY_ENV, tmp_path / "environment.yml")
    return tmp_path


def test_which_request_brought_the_cuda_runtime_into_a_real_lock(clay: Path) -> None:
    result = why("cuda-cudart", lockfile=clay / "conda-lock.yml")
    assert result.spec_files == [str(clay / "environment.yml")]  # the lock's own metadata.sources
    linux = next(p for p in result.platforms if p.platform == "linux-64")
    assert linux.found is not None and linux.found.version.startswith("12.")
    first = linux.paths[0]  # the shortest: the pytorch line itself, a CUDA build of it (a `# [linux]` line)
    assert first.request == "pytorch~=2.1.0 *cuda12*" and first.line == 20
    assert [s.name for s in first.steps] == ["pytorch", "cuda-cudart"]
    assert first.steps[0].build.startswith("cuda120") and first.steps[1].constraint.startswith(">=12.0")
    assert {p.request for p in linux.paths} >= {"lightning~=2.1.0", "torchvision~=0.16.1"}
    for p in linux.paths:  # every path is a real chain of the lock: each step depends on the next
        assert p.steps[-1].name == "cuda-cudart"
    osx = [p for p in result.platforms if p.platform.startswith("osx")]
    assert osx and all(p.found is None for p in osx)  # the `# [osx]` pytorch line is a CPU build: no CUDA runtime
    lines = why_lines(result)
    assert "cuda-cudart on osx-64, osx-arm64:" in lines and "  not in the lock on this platform" in lines


def test_a_cpu_build_of_pytorch_is_traced_to_its_line(clay: Path) -> None:
    result = why("pytorch", lockfile=clay / "conda-lock.yml", platforms=["osx-arm64"])
    (osx,) = result.platforms
    assert osx.found is not None and "cuda" not in osx.found.build
    direct = osx.paths[0]
    assert direct.request == "pytorch~=2.1.0" and direct.line == 19 and len(direct.steps) == 1
    text = why_lines(result)
    assert any("`pytorch~=2.1.0` (" in ln and "asks for it directly" in ln for ln in text), text


def test_paths_on_a_fresh_lock_and_without_the_spec(tmp_path: Path, channel_factory) -> None:
    ch = channel_factory(base_packages(), name="cf")
    env = write_env(tmp_path / "environment.yml", channels=[channels.channel_url(ch)],
                    deps=["python 3.11.*", "rich", "ipython"], platforms=["linux-64"])
    lock([env], cuda=False)
    result = why("pygments", lockfile=tmp_path / "conda-lock.yml")
    (plat,) = result.platforms
    assert [(p.request, [s.name for s in p.steps]) for p in plat.paths] == [
        ("rich", ["rich", "pygments"]), ("ipython", ["ipython", "pygments"])]
    assert plat.paths[0].steps[1].constraint == ">=2.13,<3"
    deep = why("mdurl", lockfile=tmp_path / "conda-lock.yml").platforms[0].paths
    assert [[s.name for s in p.steps] for p in deep] == [["rich", "markdown-it-py", "mdurl"]]

    env.unlink()  # the lock alone: roots are its top-level packages
    result = why("mdurl", lockfile=tmp_path / "conda-lock.yml")
    assert result.spec_files == []
    assert [[s.name for s in p.steps] for p in result.platforms[0].paths] == [["rich", "markdown-it-py", "mdurl"]]
    assert why_lines(result)[0].startswith("no spec beside")


def test_unknown_names_and_platforms_are_usage_errors(tmp_path: Path, channel_factory) -> None:
    ch = channel_factory(base_packages(), name="cf")
    write_env(tmp_path / "environment.yml", channels=[channels.channel_url(ch)], deps=["python 3.11.*", "rich"],
              platforms=["linux-64"])
    assert envguard(["lock", "--no-cuda"], cwd=tmp_path).returncode == 0
    with pytest.raises(UserError) as e:
        why("pygmets", lockfile=tmp_path / "conda-lock.yml")
    assert e.value.fix == "did you mean pygments?" and e.value.key == "NAME"
    for args, needle in ((["why", "pygmets"], "did you mean pygments"),
                         (["why", "rich", "--platform", "win-64"], "has no platform win-64"),
                         (["why", "rich", "--lockfile", "missing.yml"], "lock file not found")):
        proc = envguard(args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    proc = envguard(["why", "mdurl"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "mdurl on linux-64:", "  mdurl 0.1.2 pyhd8ed1ab_0",
        "  `rich` (environment.yml:6): rich 13.7.0 -> markdown-it-py 3.0.0 [>=2.2] -> mdurl 0.1.2 [>=0.1,<1]"]


def test_a_pip_package_reaches_conda_through_the_name_mapping(realworld: Path) -> None:
    """01-ai/Yi's real lock (no spec beside it): pip's flash-attn depends on `torch`, which conda calls pytorch."""
    result = why("pytorch", lockfile=realworld / "conda-lock/01-ai__Yi__conda-lock.yml")
    assert result.spec_files == []
    (plat,) = result.platforms
    assert plat.found is not None and "cuda11.8" in plat.found.build
    chains = {tuple((s.name, s.manager) for s in p.steps) for p in plat.paths}
    assert (("flash-attn", "pip"), ("pytorch", "conda")) in chains, chains
    assert all(p.request is None for p in plat.paths)  # roots are the lock's top-level packages
    lines = why_lines(result)
    assert "  top-level flash-attn 2.3.6 (pip) -> pytorch 2.0.1 py3.10_cuda11.8_cudnn8.7.0_0" in lines, lines
