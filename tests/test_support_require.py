"""tests/support/require.py: a missing prerequisite skips, except under CI=true where it fails the test."""

from __future__ import annotations

import pytest
from support.require import ALLOWED_IN_CI, importorskip, require


@pytest.fixture
def ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")


@pytest.fixture
def not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)


def test_a_met_condition_neither_skips_nor_fails(ci: None) -> None:
    require(True, "present")
    require(["a"], "a non-empty list counts")


def test_outside_ci_a_missing_prerequisite_skips(not_ci: None) -> None:
    with pytest.raises(pytest.skip.Exception, match="no corpus here"):
        require(False, "no corpus here")


def test_under_ci_a_missing_prerequisite_fails_with_the_reason(ci: None) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"no corpus here.*CI=true"):
        require(False, "no corpus here")
    with pytest.raises(pytest.fail.Exception, match="envguard_no_such_module"):
        importorskip("envguard_no_such_module")


def test_under_ci_the_allowed_skips_stay_skips(ci: None) -> None:
    assert {"gpu", "plot"} <= set(ALLOWED_IN_CI)
    for allowed in ALLOWED_IN_CI:
        with pytest.raises(pytest.skip.Exception):
            require(False, "lacking it by design", allowed=allowed)
    with pytest.raises(pytest.skip.Exception):
        importorskip("envguard_no_such_module", allowed="plot")


def test_an_unknown_allowed_name_is_an_error(not_ci: None) -> None:
    with pytest.raises(ValueError, match="ALLOWED_IN_CI"):
        require(True, "whatever", allowed="network")


def test_only_true_means_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception):
        require(False, "missing")


def test_importorskip_returns_the_module(ci: None) -> None:
    assert importorskip("json.decoder").__name__ == "json.decoder"


@pytest.mark.requires(True, "the mark form lets a test run when its condition holds")
def test_the_mark_form_runs_when_the_condition_holds() -> None:
    pass
