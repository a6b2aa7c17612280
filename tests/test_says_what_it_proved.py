"""What the main job proved, said so a person can read it: check names the smoke test's checks and how each
ended, smoke's progress timings are durations, `--help` lists the commands in workflow order and survives a
reader that stops early, and counts agree with their nouns."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envguard import cli, render

ENVGUARD = [sys.executable, "-m", "envguard"]
WORKFLOW = ["init", "lint", "lock", "create", "check", "smoke", "diff", "export", "tune", "fleet"]


def test_help_piped_into_head_exits_0() -> None:
    bash = shutil.which("bash")
    assert bash
    cmd = f"set -o pipefail; {' '.join(ENVGUARD)} --help | head -1 >/dev/null"
    proc = subprocess.run([bash, "-c", cmd], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_help_lists_the_commands_in_workflow_order() -> None:
    proc = subprocess.run([*ENVGUARD, "--help"], capture_output=True, text=True, timeout=60, check=False,
                          env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    listed = re.findall(r"^\W*(\w+)\s{2,}\S", proc.stdout.split("Commands", 1)[1], re.MULTILINE)
    assert [n for n in listed if n in WORKFLOW] == WORKFLOW, proc.stdout


@pytest.mark.slow  # the smoke test starts the probe and its DataLoader workers
def test_check_says_which_smoke_checks_ran_and_passed(capsys: pytest.CaptureFixture[str]) -> None:
    """A real check of this interpreter's prefix, smoke test included: the report's second line names the
    DataLoader start method that ran, and pinned memory and CUDA with how they ended here."""
    code = cli.run(["check", "-p", sys.prefix])
    out = capsys.readouterr().out
    line = out.splitlines()[1]
    assert line.startswith("smoke test passed in "), out
    assert re.search(r"DataLoader workers \((fork|spawn|forkserver)", line), line
    assert "pinned memory" in line and "CUDA" in line, line
    assert code in (0, 1), out


@pytest.mark.slow  # envguard, then the smoke probe and its DataLoader workers
def test_check_json_carries_the_smoke_checks() -> None:
    proc = subprocess.run([*ENVGUARD, "check", "-p", sys.prefix, "--format", "json"], capture_output=True,
                          text=True, timeout=300, check=False)
    doc = json.loads(proc.stdout)
    names = {c["name"]: c for c in doc["smoke"]["checks"]}
    assert {"import-torch", "pinned-memory", "cuda"} <= set(names), names
    assert any(n.startswith("dataloader:") and c["status"] == "pass" for n, c in names.items()), names
    assert isinstance(doc["smoke"]["duration_s"], float)


def test_no_smoke_says_what_is_unproven(capsys: pytest.CaptureFixture[str]) -> None:
    cli.run(["check", "-p", sys.prefix, "--no-smoke"])
    assert "smoke test: not run" in capsys.readouterr().out


@pytest.mark.slow  # the quick smoke test still starts the probe
def test_smoke_progress_numbers_are_durations(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Each progress line's number is how long that phase took: together they fit in the run's duration
    (times since the start would add up to far more)."""
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(render, "err", Console(file=screen, force_terminal=True, width=120))
    code = cli.run(["smoke", "--python", sys.executable, "--quick", "--format", "text"])
    assert code == 0, capsys.readouterr()
    title = capsys.readouterr().out.splitlines()[0]
    total = float(re.search(r"passed in ([\d.]+) s", title).group(1))  # type: ignore[union-attr]
    shown = re.sub(r"\x1b\[[0-9;]*m", "", screen.getvalue())
    numbers = [float(x) for x in re.findall(r"^· smoke: .*\(([\d.]+) s\)$", shown, re.MULTILINE)]
    assert len(numbers) >= 3, shown
    assert sum(numbers) <= total + 0.3, (numbers, total, shown)
    assert "smoke: importing torch" in shown and "smoke: DataLoader workers (" in shown


def test_one_node_is_one_node(tmp_path: Path) -> None:
    report = subprocess.run([*ENVGUARD, "check", "-p", sys.prefix, "--no-smoke", "--format", "json"],
                            capture_output=True, text=True, timeout=300, check=False)
    (tmp_path / "n1.json").write_text(json.dumps({**json.loads(report.stdout), "host": "n1"}))
    proc = subprocess.run([*ENVGUARD, "fleet", str(tmp_path)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert "1 nodes" not in proc.stdout and "1 of 1 node matches" in proc.stdout, proc.stdout
    assert "envguard fleet · 1 node ·" in proc.stdout, proc.stdout


def test_plural() -> None:
    from envguard.report import plural

    assert plural(1, "node") == "1 node" and plural(2, "node") == "2 nodes" and plural(0, "group") == "0 groups"
    assert plural(1, "deviates", "deviate") == "1 deviates" and plural(3, "deviates", "deviate") == "3 deviate"
