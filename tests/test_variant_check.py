"""`envguard check` of an environment built from a variant (#37, docs/variants.md "Verify"): the variant in the
report (text and JSON), EG557 when it cannot run on this machine, EG558 when another declared variant fits better;
drivers injected with a fake nvidia-smi, real creates."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.create_fixtures import envguard_run
from support.variant_project import create, fake_smi, make_project

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="shell-script nvidia-smi")]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, channel_url: str) -> Path:
    return make_project(tmp_path_factory.mktemp("variants"), channel_url)


def check(project: Path, prefix: Path, *args: str, smi: Path | str = "", **env: str) -> tuple[int, dict, str]:
    proc = envguard_run("check", "-p", str(prefix), "--no-smoke", "--format", "json", *args, cwd=project,
                        env={"ENVGUARD_NVIDIA_SMI": str(smi), **env}, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def codes(report: dict) -> dict[str, dict]:
    return {f["code"]: f for f in report["findings"]}


def test_check_reports_the_variant_and_warns_when_another_fits_better(project: Path, tmp_path: Path) -> None:
    env = tmp_path / "env"
    assert create(project, env).returncode == 0  # no driver: cpu
    rc, rep, _ = check(project, env)  # still no driver: cpu fits
    assert rep["variant"]["name"] == "cpu" and rep["variant"]["pick"] == "cpu" and rep["variant"]["runs"]
    assert "EG556" in codes(rep) and "EG557" not in codes(rep) and "EG558" not in codes(rep)
    assert "built from variant cpu (the fingerprint); declared: cuda-12.6, cuda-12.8" in codes(rep)["EG556"]["message"]
    # the same environment on a GPU node: a CUDA variant fits better (a warning, exit 0 unless --strict)
    gpu = fake_smi(tmp_path, "570.86.15", "12.8", "9.0")
    rc, rep, _ = check(project, env, smi=gpu)
    assert rc == 0 and rep["variant"]["pick"] == "cuda-12.8"
    warn = codes(rep)["EG558"]
    assert warn["severity"] == "warning" and warn["message"].startswith(
        "variant cuda-12.8 fits this machine better than cpu: variant cuda-12.8: driver 570.86.15 supports CUDA 12.8")
    assert f"envguard create -p {env} -f {project / 'environment.yml'} --force" in warn["fix"]
    text = envguard_run("check", "-p", str(env), "--no-smoke", cwd=project, env={"ENVGUARD_NVIDIA_SMI": str(gpu)})
    assert "variant cpu" in text.stdout and "EG558" in text.stdout


def test_check_errs_when_the_variant_cannot_run_here(project: Path, tmp_path: Path) -> None:
    env = tmp_path / "env"
    new = fake_smi(tmp_path, "570.86.15", "12.8", "8.0")
    assert create(project, env, smi=new).returncode == 0
    rc, rep, _ = check(project, env, smi=new)
    assert rep["variant"]["name"] == "cuda-12.8" and "EG557" not in codes(rep) and "EG558" not in codes(rep)
    old = fake_smi(tmp_path, "470.82.01", "11.4", "8.0")  # the node's driver went back to CUDA 11
    rc, rep, _ = check(project, env, smi=old)
    err = codes(rep)["EG557"]
    assert rc == 1 and err["severity"] == "error"
    assert err["message"] == ("variant cuda-12.8 cannot run on this machine: needs CUDA 12 (driver 525.60.13+) "
                              "(driver 470.82.01: CUDA 11.4); this machine's variant is cpu")
    assert rep["variant"] == {**rep["variant"], "runs": False, "pick": "cpu"}
    # CONDA_OVERRIDE_CUDA speaks for the driver here too, as at create time
    rc, rep, _ = check(project, env, smi=old, CONDA_OVERRIDE_CUDA="12.8")
    assert "EG557" not in codes(rep)


# ----------------------------------------------------------------------------------------------- fleet


def test_fleet_groups_by_variant_and_singles_out_a_node_on_the_wrong_one(project: Path, tmp_path: Path) -> None:
    gpu_driver = fake_smi(tmp_path, "570.86.15", "12.8", "9.0")
    cpu_env, cuda_env = tmp_path / "cpu", tmp_path / "cuda"
    assert create(project, cpu_env).returncode == 0
    assert create(project, cuda_env, smi=gpu_driver).returncode == 0
    reports = tmp_path / "reports"
    reports.mkdir()
    nodes = {"cpu01": (cpu_env, ""), "cpu02": (cpu_env, ""), "gpu01": (cuda_env, gpu_driver),
             "gpu02": (cuda_env, gpu_driver), "gpu03": (cuda_env, gpu_driver),
             "gpu04": (cpu_env, gpu_driver)}  # a GPU node that built (or was given) the cpu variant
    for node, (env, smi) in nodes.items():
        _, rep, _ = check(project, env, smi=smi)
        (reports / f"{node}.json").write_text(json.dumps({**rep, "host": node}))
    proc = envguard_run("fleet", str(reports), "--format", "json", cwd=project)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    groups = {g["nodes"]: g for g in doc["groups"]}
    assert set(groups) == {"cpu[01-02]", "gpu[01-03]", "gpu04"}
    # each variant is its own reference: the CPU nodes do not deviate from the GPU majority
    assert groups["cpu[01-02]"]["reference"] and groups["gpu[01-03]"]["reference"]
    assert groups["cpu[01-02]"]["facts"]["variant"] == {"name": "cpu", "pick": "cpu", "wrong": False}
    wrong = groups["gpu04"]
    assert not wrong["reference"] and wrong["facts"]["variant"] == {"name": "cpu", "pick": "cuda-12.8", "wrong": True}
    # compared with the nodes of the variant it should run: the torch build flips, and the variant is named
    assert ("variant", "cuda-12.8", "cpu (this machine runs cuda-12.8)") in {
        (f["fact"], f["reference"], f["group"]) for f in wrong["fact_changes"]}
    assert any(c["key"] == "torch" and "cpu-cuda-flip" in c["kinds"] for c in wrong["changes"]), wrong["changes"]
    assert "1 node on the wrong variant" in doc["summary"] and doc["matching"] == 5
    text = envguard_run("fleet", str(reports), cwd=project).stdout
    assert "gpu04 (1 node) · variant cpu (this machine runs cuda-12.8)" in text and "EG558" in text


def test_without_the_fingerprints_record_the_lock_says_which_variant(project: Path, tmp_path: Path) -> None:
    """An environment built from a variant's lock by another tool (no variant in a fingerprint), judged where only
    the locks are (no environment.yml beside them): the lock's custom_metadata names the variant and the others."""
    import shutil

    env = tmp_path / "env"
    gpu = fake_smi(tmp_path, "570.86.15", "12.8", "9.0")
    assert create(project, env, "--variant", "cpu", smi=gpu).returncode == 0
    fp_path = env / "conda-meta" / "envguard-fingerprint.json"
    fp = json.loads(fp_path.read_text())
    del fp["variant"]  # not part of the digest: the fingerprint still vouches for the packages
    fp_path.write_text(json.dumps(fp))
    locks = tmp_path / "locks"
    locks.mkdir()
    for lock in project.glob("conda-lock.*.yml"):
        shutil.copy(lock, locks / lock.name)
    rc, rep, _ = check(locks, env, "--lockfile", str(locks / "conda-lock.cpu.yml"), smi=gpu)
    assert rep["variant"]["source"] == "the lock's custom_metadata" and rep["variant"]["name"] == "cpu"
    assert rep["variant"]["declared"] == ["cpu", "cuda-12.6", "cuda-12.8"] and rep["variant"]["pick"] == "cuda-12.8"
    assert "EG558" in codes(rep)
    # a plain conda-lock.yml is not read again for a variant: no variant, no finding
    shutil.copy(locks / "conda-lock.cpu.yml", locks / "conda-lock.yml")
    rc, rep, _ = check(locks, env, "--lockfile", str(locks / "conda-lock.yml"), smi=gpu)
    assert rep["variant"] is None and not {"EG556", "EG557", "EG558"} & set(codes(rep))
