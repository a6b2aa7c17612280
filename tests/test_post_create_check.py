"""envguard.cli.workflow.create_and_check: create, then `envguard check` on what it built (fast: no install here,
create's own tests build real environments; this is the sequence and what a Ctrl-C in the check says)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import envguard.check
from envguard.check import CheckOptions
from envguard.cli import workflow
from envguard.create import CreateOptions, CreateReporter, CreateResult
from envguard.errors import Interrupted
from envguard.fingerprint import Fingerprint


class Stages(CreateReporter):
    def __init__(self) -> None:
        self.stages: list[str] = []

    def stage(self, text: str) -> None:
        self.stages.append(text)


def _create_gives(monkeypatch: pytest.MonkeyPatch, status: str, prefix: Path) -> list[dict[str, Any]]:
    """Make create return a result of ``status`` for ``prefix``; returns the calls it got (the options each
    call set, those that differ from the defaults)."""
    calls: list[dict[str, Any]] = []
    defaults = CreateOptions()

    def create(options: CreateOptions) -> CreateResult:
        calls.append({f.name: getattr(options, f.name) for f in fields(options)
                      if getattr(options, f.name) != getattr(defaults, f.name)})
        return CreateResult(prefix=prefix, status=status, backend="rattler", lockfile=prefix.parent / "conda-lock.yml",
                            fingerprint=Fingerprint(platform="linux-64", content_hash=None))

    monkeypatch.setattr(workflow, "create", create)
    return calls


@pytest.mark.parametrize("status", ["created", "replaced"])
def test_a_built_environment_is_checked_against_its_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         status: str) -> None:
    target = tmp_path / "env"
    calls = _create_gives(monkeypatch, status, target)
    checked: list[tuple[Path, Path]] = []
    report = type("Report", (), {"exit_code": 1})()

    def run_check(options: CheckOptions) -> Any:
        checked.append((options.prefix, options.lockfile))
        return report

    monkeypatch.setattr(envguard.check, "run_check", run_check)
    rep = Stages()
    result = workflow.create_and_check(CreateOptions(prefix=target, lockfile="x.yml", reporter=rep))
    assert calls == [{"prefix": target, "lockfile": "x.yml", "reporter": rep}]
    assert checked == [(target, tmp_path / "conda-lock.yml")] and result.check is report and result.exit_code == 1
    assert rep.stages == [f"checking the new environment (envguard check -p {target})"]


@pytest.mark.parametrize(("status", "check"), [("unchanged", True), ("created", False)])
def test_an_unchanged_environment_or_no_check_runs_no_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            status: str, check: bool) -> None:
    _create_gives(monkeypatch, status, tmp_path / "env")
    monkeypatch.setattr(envguard.check, "run_check", lambda *a, **k: pytest.fail("checked"))
    result = workflow.create_and_check(CreateOptions(prefix=tmp_path / "env"), check=check)
    assert result.check is None and result.exit_code == 0


def test_ctrl_c_during_the_check_says_the_new_environment_is_in_place(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "env"
    (target / "conda-meta").mkdir(parents=True)
    _create_gives(monkeypatch, "created", target)

    def interrupted(*_a: Any, **_k: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(envguard.check, "run_check", interrupted)
    with pytest.raises(Interrupted) as e:
        workflow.create_and_check(CreateOptions(prefix=target))
    assert str(e.value) == f"interrupted: the new environment is in place at {target}"
