"""Findings on a terminal fit its width: no word or path broken across lines, no column every finding leaves
empty, one finding per line below a width, and the verdict before the detail."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from envguard import render
from envguard.findings import Finding, Severity

LOCK = "/home/someone/projects/very-long-project-name/conda-lock.yml"
FINDINGS = [
    Finding("EG511", Severity.ERROR, "torch 2.13.0 was installed by pip over conda's pytorch 2.13.0: import torch "
            "loads pip's build, not the one conda recorded", "envguard create -p /home/someone/envs/train-2026",
            file=LOCK, line=12),
    Finding("EG530", Severity.WARNING, "numpy is not in the lock", "", package="numpy"),
    Finding("EG540", Severity.INFO, "the lock was made on another machine", "", file="conda-lock.yml"),
]


def shown(monkeypatch: pytest.MonkeyPatch, width: int, findings: list[Finding]) -> str:
    screen = io.StringIO()
    monkeypatch.setattr(render, "out", Console(file=screen, force_terminal=True, color_system=None, width=width,
                                               highlight=False, soft_wrap=True, emoji=False))
    render.print_findings(findings, title="envguard check /somewhere")
    return screen.getvalue()


@pytest.mark.parametrize("width", [60, 80, 100, 120, 200])
def test_findings_fit_the_width_with_every_word_whole(monkeypatch: pytest.MonkeyPatch, width: int) -> None:
    text = shown(monkeypatch, width, FINDINGS)
    lines = text.splitlines()
    assert all(len(ln) <= width for ln in lines), "\n".join(ln for ln in lines if len(ln) > width)
    tokens = text.replace("│", " ").split()
    for f in FINDINGS:
        for word in f"{f.message} {f.fix} {f.file or ''}".split():  # each one whole on some line
            assert any(word in tok for tok in tokens), (word, text)
    # the verdict comes before the first finding
    assert text.index("1 error, 1 warning, 1 info") < text.index("EG511")


def test_below_a_width_one_finding_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    text = shown(monkeypatch, 60, FINDINGS)
    assert "┃" not in text and "│" not in text  # no table
    start = text.index("EG511")
    block = text[start:text.index("EG530")].rstrip("\n").splitlines()
    assert len(block) <= 8, block  # a 60-character path, the message wrapped between words, its fix: not 17


def test_a_column_no_finding_fills_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    no_fix = [Finding(f.code, f.severity, f.message, "", file="conda-lock.yml") for f in FINDINGS]
    text = shown(monkeypatch, 200, no_fix)
    header = next(ln for ln in text.splitlines() if "severity" in ln)
    assert "message" in header and "fix" not in header, header
    with_fix = shown(monkeypatch, 200, FINDINGS)
    assert "fix" in next(ln for ln in with_fix.splitlines() if "severity" in ln)
