"""`envguard diff` of two variants' locks (#37, docs/variants.md "Verify"): whether only the torch family and the
CUDA libraries differ, in the summary and the JSON; real locks of a project with variants (`envguard lock`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.create_fixtures import envguard_run
from support.variant_project import make_project


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, channel_url: str) -> Path:
    return make_project(tmp_path_factory.mktemp("variants"), channel_url)


def diff_json(project: Path, a: str, b: str) -> tuple[int, dict]:
    proc = envguard_run("diff", str(project / a), str(project / b), "--format", "json", cwd=project)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_two_variants_differ_only_where_the_variant_forces(project: Path) -> None:
    rc, doc = diff_json(project, "conda-lock.cpu.yml", "conda-lock.cuda-12.6.yml")
    v = doc["variants"]
    assert rc == 1 and v["a"] == "cpu" and v["b"] == "cuda-12.6" and v["only_forced"] and v["unforced"] == []
    assert {"torch", "cuda-version"} <= set(v["forced"])
    assert doc["summary"].startswith("variants cpu and cuda-12.6: only the torch family and CUDA libraries differ (")
    text = envguard_run("diff", str(project / "conda-lock.cpu.yml"), str(project / "conda-lock.cuda-12.6.yml"),
                        cwd=project).stdout
    assert "only the torch family and CUDA libraries differ" in text


def test_a_difference_the_variant_does_not_force_is_named(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "p"
    shutil.copytree(project, copy)
    overlay = copy / "variants" / "cuda-12.8.yml"
    overlay.write_text(overlay.read_text() + "  - egtool\n")  # a variant that also asks for something else
    from envguard.lock.together import lock_variants

    lock_variants(copy / "environment.yml")
    rc, doc = diff_json(copy, "conda-lock.cpu.yml", "conda-lock.cuda-12.8.yml")
    v = doc["variants"]
    assert rc == 1 and not v["only_forced"] and v["unforced"] == ["egtool"]
    assert "variants cpu and cuda-12.8: 1 package differs outside the torch family and CUDA libraries (egtool)" \
        in doc["summary"]


def test_locks_without_variants_say_nothing_of_variants(project: Path, tmp_path: Path, channel_url: str) -> None:
    from support.create_fixtures import make_lock, write_env

    a = make_lock(write_env(tmp_path / "a", channel_url, ["python", "pytorch=2.13.0=cpu*"]))
    rc, doc = diff_json(tmp_path, str(a), str(a))
    assert rc == 0 and doc["variants"] is None
    rc, doc = diff_json(project, str(a), "conda-lock.cpu.yml")  # one side a variant's lock
    assert doc["variants"]["a"] is None and doc["variants"]["b"] == "cpu"
