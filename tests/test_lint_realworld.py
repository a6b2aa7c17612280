"""envguard lint over the real-world corpus: every file read, the known problems found."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.findings import Severity
from envguard.lint import lint_paths

pytestmark = pytest.mark.slow  # lints every file of the real-world corpus (tens of seconds of CPU)

REPO = Path(__file__).resolve().parent.parent


def _corpus_module():
    spec = importlib.util.spec_from_file_location("lint_corpus", REPO / "bench" / "lint_corpus.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def corpus(realworld: Path):
    files = _corpus_module().corpus_files(realworld)
    assert len(files) >= 40
    return files, lint_paths(files)


def _hits(result, code: str, fragment: str) -> list:
    return [f for f in result.findings if f.code == code and fragment in (f.file or "")]


def test_every_file_is_read(corpus) -> None:
    files, result = corpus
    assert result.unreadable == []
    kinds = {p.parent.name for p in files}
    assert kinds == {"environment", "export", "conda-lock", "explicit", "pixi"}


@pytest.mark.parametrize("code,project,package", [
    ("EG109", "abodybuilder3", "cudatoolkit"),  # conda-forge built torch 2.0 for CUDA 11.2/11.8/12.0, not 11.7
    ("EG108", "AnimateDiff", "pytorch-cuda"),
])
def test_known_environment_problems(corpus, code: str, project: str, package: str) -> None:
    _, result = corpus
    hits = [f for f in _hits(result, code, project) if f.package == package]
    assert hits, f"{code} not found in {project}"
    f = hits[0]
    assert f.severity is Severity.ERROR
    # the line named is the line of that package in the file
    line = Path(f.file).read_text(encoding="utf-8").splitlines()[f.line - 1]
    assert package in line


def test_pip_torch_stacks_on_conda_python_are_not_errors(corpus) -> None:
    """torch from pip where conda provides no torch is PyTorch's own layout (miles-credit: conda numpy, pip torch
    and torchvision; nothing is shadowed). MiniGPT-4 adds conda's cudatoolkit beside the wheels' CUDA runtime:
    a real risk, a warning; neither is an error."""
    _, result = corpus
    miles = [f for f in _hits(result, "EG107", "miles-credit")]
    assert [(f.severity, f.package) for f in miles] == [(Severity.INFO, "torch")]
    assert "supported layout" in miles[0].message
    minigpt = [f for f in _hits(result, "EG107", "MiniGPT-4")]
    assert [(f.severity, f.package) for f in minigpt] == [(Severity.WARNING, "torch")]
    assert "cudatoolkit" in minigpt[0].message and "cudatoolkit" in minigpt[0].fix


def test_nightly_torch_from_unlisted_channel(corpus) -> None:
    _, result = corpus
    hits = _hits(result, "EG152", "tight-budget-llm-adaptation")
    assert len(hits) == 1 and "pytorch-nightly" in hits[0].message and "pytorch 2.3.0.dev20240117" in hits[0].message
    assert "pytorch-nightly/linux-64/pytorch-2.3.0" in Path(hits[0].file).read_text().splitlines()[hits[0].line - 1]
    assert _hits(result, "EG153", "tight-budget-llm-adaptation")


def test_bertchen_cuda_mismatch(corpus) -> None:
    _, result = corpus
    hits = _hits(result, "EG150", "BERTchen__conda-lock")
    assert hits and all(f.severity is Severity.ERROR for f in hits)
    assert any("CUDA 11.8" in f.message and "cuda-version is 12.5" in f.message and "linux-64" in f.message
               for f in hits)


def test_consistent_locks_stay_quiet(corpus) -> None:
    """Controls: Clay (cuda120 build with cuda-version 12.5, same line), pangeo, the explicit planetary lock."""
    _, result = corpus
    for fragment in ("Clay-foundation__model__conda-lock", "pangeo-data__pangeo-docker-images__pytorch-notebook__conda",
                     "microsoft__planetary-computer-containers__gpu-pytorch__conda-linux-64"):
        assert not [f for f in result.findings if fragment in (f.file or "") and f.code == "EG150"], fragment


def test_cli_over_the_whole_corpus_has_no_traceback(corpus) -> None:
    files, _ = corpus
    proc = subprocess.run([sys.executable, "-m", "envguard", "lint", "--format", "json", *map(str, files)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
