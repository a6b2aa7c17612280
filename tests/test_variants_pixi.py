"""A pixi manifest's environments as variants (#37, docs/variants.md "pixi manifests"): `envguard diff` of two
environments of a pixi.lock says in a reviewer's terms whether only the torch family and the CUDA libraries
differ, as it does for two variants' conda-lock files. Real pixi.lock files from ../shared/realworld/pixi."""

from __future__ import annotations

import json
from pathlib import Path

from support.create_fixtures import envguard_run


def _diff(lock: Path, a: str, b: str, *extra: str) -> tuple[int, dict]:
    proc = envguard_run("diff", str(lock), str(lock), "--a-environment", a, "--b-environment", b,
                        "--format", "json", *extra)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_cpu_and_gpu_environments_differ_only_as_the_variant_forces(realworld: Path) -> None:
    # wang7x/pixi-pytorch-example: features cpu (pytorch-cpu) and gpu (pytorch-gpu, cuda-version 12.6.*). The
    # gpu environment also pulls what the CUDA libraries need (libcap, rdma-core, ...) and an older libabseil that
    # its pytorch build pins: forced too, not drift.
    lock = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"
    rc, doc = _diff(lock, "cpu", "gpu")
    v = doc["variants"]
    assert rc == 1 and v["a"] == "cpu" and v["b"] == "gpu" and v["only_forced"] and v["unforced"] == []
    assert {"torch", "cuda-version", "libtorch", "libabseil", "libcap"} <= set(v["forced"])
    assert doc["summary"].startswith("environments cpu and gpu: only the torch family and CUDA libraries differ (")
    text = envguard_run("diff", str(lock), str(lock), "--a-environment", "cpu", "--b-environment", "gpu").stdout
    assert text.startswith("environments cpu and gpu: only the torch family and CUDA libraries differ")


def test_an_environment_that_adds_more_than_the_variant_is_named(realworld: Path) -> None:
    # data-apis/array-api-extra: `tests-cuda` is not the CUDA variant of `tests`, it adds jax, dask and cupy:
    # what only those extra packages need is named, not counted as forced by the CUDA libraries
    lock = realworld / "pixi" / "data-apis__array-api-extra__pixi@f9ce7f3.lock"
    rc, doc = _diff(lock, "tests", "tests-cuda")
    v = doc["variants"]
    assert rc == 1 and not v["only_forced"] and {"dask-core", "fsspec", "cloudpickle"} <= set(v["unforced"])
    assert {"torch", "cuda-version", "jaxlib"} <= set(v["forced"])
    assert "environments tests and tests-cuda:" in doc["summary"] and "not forced by the environments" in doc["summary"]


def test_one_environment_against_itself_is_no_variant_comparison(realworld: Path) -> None:
    lock = realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"
    rc, doc = _diff(lock, "gpu", "gpu")
    assert rc == 0 and doc["variants"] is None


_MANIFEST = """\
[workspace]
channels = ["conda-forge"]
name = "demo"
platforms = ["linux-64", "osx-arm64"]

[dependencies]
python = "3.11.*"
pytorch = "2.7.*"

[feature.cpu.dependencies]
pytorch-cpu = "2.7.*"

[feature.gpu]
platforms = ["linux-64"]

[feature.gpu.dependencies]
cuda-version = "12.6.*"
pytorch-gpu = "2.7.*"
{requirement}
[environments]
cpu = ["cpu"]
gpu = ["gpu"]
"""


def _lint(tmp_path: Path, text: str) -> tuple[int, list[dict]]:
    (tmp_path / "pixi.toml").write_text(text)
    proc = envguard_run("lint", "pixi.toml", "--format", "json", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)["findings"]


def test_lint_names_a_cuda_environment_that_declares_no_cuda(tmp_path: Path) -> None:
    rc, findings = _lint(tmp_path, _MANIFEST.format(requirement=""))
    eg139 = [f for f in findings if f["code"] == "EG139"]
    assert rc == 1 and len(eg139) == 1, findings
    assert eg139[0]["message"].startswith("`pytorch-gpu 2.7.*` asks a CUDA build, but the environment declares no "
                                          "CUDA") and eg139[0]["message"].endswith("(environment gpu)")
    assert '`cuda = "12"` under [feature.gpu.system-requirements]' in eg139[0]["fix"]
    # declared for the gpu feature (as pixi's docs write it): the variant is whole
    rc, findings = _lint(tmp_path, _MANIFEST.format(requirement='\n[feature.gpu.system-requirements]\ncuda = "12"\n'))
    assert not [f for f in findings if f["code"] == "EG139"], findings


def test_lint_of_real_variant_manifests_finds_them_whole(realworld: Path, tmp_path: Path) -> None:
    # each declares CUDA where its CUDA environments are: [system-requirements] (wang7x, matthewfeickert) or a
    # named platform with cuda = "12" (prefix-dev's multi-machine example)
    for name in ("wang7x__pixi-pytorch-example__pixi.toml", "matthewfeickert__pytorch-gpu-pixi-example__pixi.toml",
                 "prefix-dev__pixi__examples__multi-machine__pixi.toml"):
        where = tmp_path / name
        where.mkdir()
        _rc, findings = _lint(where, (realworld / "pixi" / name).read_text())
        assert not [f for f in findings if f["code"] == "EG139"], (name, findings)


def test_lint_of_a_pixi_lock_names_a_cpu_environment_that_installs_cuda(realworld: Path) -> None:
    # wang7x: [system-requirements] cuda = "12.0" is the default feature's, so the `cpu` environment may take CUDA
    # builds too: its solve took kaldi's cuda118 build (torchaudio needs kaldi) and magma, and with them
    # cudatoolkit 11.8, beside pytorch's CPU build; the `gpu` environment has none of that
    proc = envguard_run("lint", str(realworld / "pixi" / "wang7x__pixi-pytorch-example__pixi.lock"), "--format", "json")
    eg160 = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "EG160"]
    assert len(eg160) == 1 and eg160[0]["severity"] == "warning", eg160
    m = eg160[0]["message"]
    assert m.startswith("pytorch 2.7.1 is a CPU build, yet cudatoolkit 11.8.0 is locked beside it (needed by kaldi "
                        "5.5.1112 cuda118h03c5bf3_9") and m.endswith("(on cpu/linux-64)"), m
    assert eg160[0]["fix"].startswith("pin a CPU build of kaldi where this environment takes it")
    # lenskit: implicit's CUDA-enabled build pulls cudatoolkit into its CPU-torch environments
    proc = envguard_run("lint", str(realworld / "pixi" / "lenskit__lkpy__pixi@663ff5a.lock"), "--format", "json")
    eg160 = [f for f in json.loads(proc.stdout)["findings"] if f["code"] == "EG160"]
    assert eg160 and all("needed by implicit 0.7.2" in f["message"] for f in eg160), eg160
