"""`envguard diff` with no side and `check --if-changed` in a project with variants (#37, docs/variants.md "Verify"):
both follow the variant an environment was built from (its fingerprint) or, where nothing records it, the one this
machine runs (the same pick as create) instead of a conda-lock.yml such a project does not have."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.channels import host_platform
from support.create_fixtures import envguard_run
from support.variant_project import fake_smi, make_project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, channel_url: str) -> Path:
    return make_project(tmp_path_factory.mktemp("variants"), channel_url)


def _env_dir(tmp_path: Path, variant: str | None = None) -> Path:
    """The project's environment `vt` in an envs folder, built by another tool (no fingerprint) or recording a
    variant; an empty conda-meta."""
    prefix = tmp_path / "envs" / "vt"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "conda-meta" / "history").write_text("")
    if variant is not None:  # what create records (envguard.fingerprint), written as create writes it
        from envguard.fingerprint import Fingerprint, write_fingerprint

        write_fingerprint(prefix, Fingerprint(platform=host_platform(), content_hash=None, variant=variant))
    return prefix


def _run(project: Path, tmp_path: Path, *args: str, smi: Path | str = "", **env: str) -> subprocess.CompletedProcess:
    return envguard_run(*args, cwd=project, env={"ENVGUARD_ENVS_DIR": str(tmp_path / "envs"), "CONDA_PREFIX": "",
                                                 "VIRTUAL_ENV": "", "ENVGUARD_NVIDIA_SMI": str(smi), **env})


def test_diff_alone_compares_the_environment_with_this_machines_variant_lock(project: Path, tmp_path: Path) -> None:
    (project / ".git").mkdir(exist_ok=True)
    _env_dir(tmp_path)
    proc = _run(project, tmp_path, "diff")  # no driver: cpu
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "A is conda-lock.cpu.yml (the project's lock of variant cpu, this machine's)" in proc.stdout, proc.stdout
    smi = fake_smi(tmp_path, "550.54.15", "12.4", "8.0")
    proc = _run(project, tmp_path, "diff", smi=smi)  # driver 550, an A100: the newest 12.x variant
    assert "A is conda-lock.cuda-12.8.yml (the project's lock of variant cuda-12.8, this machine's)" in proc.stdout, \
        proc.stdout + proc.stderr
    proc = _run(project, tmp_path, "diff", CONDA_OVERRIDE_CUDA="12.6")  # CEP 30's override, as create reads it
    assert "A is conda-lock.cuda-12.8.yml" in proc.stdout, proc.stdout + proc.stderr


def test_diff_alone_names_the_missing_variant_lock(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "p"
    shutil.copytree(project, copy)
    (copy / ".git").mkdir(exist_ok=True)
    (copy / "conda-lock.cpu.yml").unlink()
    _env_dir(tmp_path)
    proc = _run(copy, tmp_path, "diff")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert "conda-lock.cpu.yml (variant cpu, this machine's) does not exist" in proc.stderr, proc.stderr
    assert "conda-lock.yml does not exist" not in proc.stderr


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


def _commit_edit(repo: Path, overlay: str) -> tuple[str, str]:
    old = _git(repo, "rev-parse", "HEAD")
    path = repo / "variants" / overlay
    path.write_text(path.read_text() + "  - numpy\n")
    _git(repo, "commit", "-qam", f"edit {overlay}")
    return old, _git(repo, "rev-parse", "HEAD")


def _hook(repo: Path, tmp_path: Path, refs: tuple[str, str]) -> str:
    proc = _run(repo, tmp_path, "check", "--skip-missing", "--if-changed", "--no-smoke",
                PRE_COMMIT_FROM_REF=refs[0], PRE_COMMIT_TO_REF=refs[1])
    return proc.stdout + proc.stderr


def test_if_changed_watches_the_variant_the_environment_was_built_from(project: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(project, repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "variants")
    _env_dir(tmp_path, "cpu")
    # another variant's overlay changed: nothing this environment was built from
    out = _hook(repo, tmp_path, _commit_edit(repo, "cuda-12.6.yml"))
    assert "envguard check: skipped: " in out and "unchanged" in out, out
    assert "cpu.yml" in out and "conda-lock.cpu.yml" in out
    # its own overlay changed: checked (before #37's hook rule: skipped, conda-lock.yml and environment.yml
    # were the files watched)
    out = _hook(repo, tmp_path, _commit_edit(repo, "cpu.yml"))
    assert "unchanged" not in out, out


def test_if_changed_without_a_record_watches_every_variant(project: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(project, repo)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "variants")
    out = _hook(repo, tmp_path, _commit_edit(repo, "cuda-12.6.yml"))  # no environment at all: any variant counts
    assert "variants/cuda-12.6.yml changed" in out or "unchanged" not in out, out
