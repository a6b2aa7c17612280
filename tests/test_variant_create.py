"""`envguard create` in a project with variants (#37, docs/variants.md "Pick"): the machine's driver (a fake
nvidia-smi through ENVGUARD_NVIDIA_SMI, a real subprocess) and CONDA_OVERRIDE_CUDA* choose the variant,
`--variant` overrides, a variant that cannot run here is built only when named, and the fingerprint records it.
Real locks (`envguard lock` of the standard test channel's pytorch 2.13.0 cpu, cuda126 and cuda128 builds) and
real installs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.variant_project import create, fake_smi, fingerprint, make_project, torch_build

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="shell-script nvidia-smi")]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, channel_url: str) -> Path:
    return make_project(tmp_path_factory.mktemp("variants"), channel_url)


def test_no_driver_builds_cpu(project: Path, tmp_path: Path) -> None:
    proc = create(project, tmp_path / "env")
    assert proc.returncode == 0, proc.stderr
    assert "variant cpu: no NVIDIA driver" in proc.stderr
    assert fingerprint(tmp_path / "env")["variant"] == "cpu"
    assert torch_build(tmp_path / "env").startswith("cpu_")
    assert fingerprint(tmp_path / "env")["lockfile"].endswith("conda-lock.cpu.yml")


def test_driver_picks_the_newest_cuda_variant(project: Path, tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, "570.86.15", "12.8", "8.0", "9.0")
    proc = create(project, tmp_path / "env", smi=smi)
    assert proc.returncode == 0, proc.stderr
    assert "variant cuda-12.8: driver 570.86.15 supports CUDA 12.8, GPUs from sm_80" in proc.stderr
    assert fingerprint(tmp_path / "env")["variant"] == "cuda-12.8"
    assert torch_build(tmp_path / "env").startswith("cuda128_")


def test_variant_option_overrides_the_pick(project: Path, tmp_path: Path) -> None:
    smi = fake_smi(tmp_path, "550.54.15", "12.4", "8.0")
    proc = create(project, tmp_path / "env", "--variant", "cuda-12.6", smi=smi)
    assert proc.returncode == 0, proc.stderr
    assert "variant cuda-12.6: named with --variant (this machine's pick: cuda-12.8)" in proc.stderr
    assert "warning" not in proc.stderr
    assert fingerprint(tmp_path / "env")["variant"] == "cuda-12.6"


def test_a_variant_that_cannot_run_here_only_by_name_with_a_warning(project: Path, tmp_path: Path) -> None:
    proc = create(project, tmp_path / "env", "--variant", "cuda-12.6")  # no driver
    assert proc.returncode == 0, proc.stderr
    assert "warning: variant cuda-12.6 cannot run on this machine (no NVIDIA driver)" in proc.stderr
    assert fingerprint(tmp_path / "env")["variant"] == "cuda-12.6"
    old = fake_smi(tmp_path, "470.82.01", "11.4", "7.5")  # a CUDA 11 driver: cpu, and a warning saying why
    proc = create(project, tmp_path / "env2", smi=old)
    assert proc.returncode == 0, proc.stderr
    assert "warning: driver 470.82.01 supports CUDA 11.4" in proc.stderr and "cpu picked" in proc.stderr
    assert fingerprint(tmp_path / "env2")["variant"] == "cpu"


def test_overrides(project: Path, tmp_path: Path) -> None:
    proc = create(project, tmp_path / "env", CONDA_OVERRIDE_CUDA="12.6")  # a CPU runner building CUDA
    assert proc.returncode == 0, proc.stderr
    assert "variant cuda-12.8: CONDA_OVERRIDE_CUDA=12.6" in proc.stderr
    smi = fake_smi(tmp_path, "570.86.15", "12.8", "9.0")
    proc = create(project, tmp_path / "env2", smi=smi, CONDA_OVERRIDE_CUDA="")  # empty: no __cuda
    assert proc.returncode == 0, proc.stderr
    assert "variant cpu: CONDA_OVERRIDE_CUDA=" in proc.stderr
    assert fingerprint(tmp_path / "env2")["variant"] == "cpu"


def test_refusals(project: Path, tmp_path: Path) -> None:
    proc = create(project, tmp_path / "env", "--variant", "rocm")
    assert proc.returncode == 2 and "no variant 'rocm' is declared (declared: cpu, cuda-12.6, cuda-12.8)" in proc.stderr
    proc = create(project, tmp_path / "env", CONDA_OVERRIDE_CUDA_ARCH="sm_90", CONDA_OVERRIDE_CUDA="12.8")
    assert proc.returncode == 2 and "CONDA_OVERRIDE_CUDA_ARCH: 'sm_90' is not a compute capability" in proc.stderr
    proc = create(project, tmp_path / "env", "--variant", "cpu", "--lockfile", str(project / "conda-lock.cpu.yml"))
    assert proc.returncode == 2 and "--variant cpu: --lockfile names the lock to install" in proc.stderr
    assert not (tmp_path / "env").exists()


def test_missing_or_stale_variant_lock_is_envguard_locks(project: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "p"
    shutil.copytree(project, copy)
    (copy / "conda-lock.cuda-12.8.yml").unlink()
    proc = create(copy, tmp_path / "env", "--variant", "cuda-12.8")
    assert proc.returncode == 4 and "the lock of variant cuda-12.8" in proc.stderr and "envguard lock" in proc.stderr
    overlay = copy / "variants" / "cpu.yml"
    overlay.write_text(overlay.read_text() + "  - pip\n")
    proc = create(copy, tmp_path / "env")
    assert proc.returncode == 4 and "re-locked with the others, never alone" in proc.stderr, proc.stderr
    assert not (tmp_path / "env").exists()


def test_a_variant_lock_named_with_lockfile_is_recorded_too(project: Path, tmp_path: Path) -> None:
    proc = create(project, tmp_path / "env", "--lockfile", str(project / "conda-lock.cuda-12.6.yml"), "--frozen")
    assert proc.returncode == 0, proc.stderr
    assert "variant" not in proc.stderr  # nothing picked: the lock named is the lock used
    assert fingerprint(tmp_path / "env")["variant"] == "cuda-12.6"  # its custom_metadata says which


def test_run_builds_the_variant_this_machine_runs(project: Path, tmp_path: Path) -> None:
    from support.create_fixtures import envguard_run

    smi = fake_smi(tmp_path, "570.86.15", "12.8", "9.0")
    proc = envguard_run("run", "-p", str(tmp_path / "env"), "--", "python", "-c", "print('ran')", cwd=project,
                        env={"ENVGUARD_NVIDIA_SMI": str(smi)}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "ran" in proc.stdout and "variant cuda-12.8: driver 570.86.15" in proc.stderr
    assert fingerprint(tmp_path / "env")["variant"] == "cuda-12.8"
