"""The one way a test skips for something missing, and why CI may not.

``require(condition, reason)`` skips the calling test when ``condition`` is false. Under ``CI=true`` it fails
the test instead: a CI machine without the real-world corpus (../shared/realworld), a pyenv interpreter or a
tool the suite needs is a broken CI machine, and a green run with a hundred tests skipped would hide it.
Some skips are expected everywhere, CI included; they are named in ``ALLOWED_IN_CI`` and passed as
``allowed=``. The mark form ``@pytest.mark.requires(condition, reason, allowed=None)`` does the same when the
condition is known at import time (tests/conftest.py applies it before the test runs).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

# Skips that stay skips under CI=true: what a CI machine lacks by design, not by accident.
ALLOWED_IN_CI: dict[str, str] = {
    "gpu": "a real NVIDIA GPU (tests marked gpu; CI machines have none)",
    "plot": "the optional plot extra (matplotlib, for `envguard tune --plot`), not in the test extra",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def require(condition: object, reason: str, *, allowed: str | None = None) -> None:
    """Skip unless ``condition`` holds; under CI=true fail instead, unless ``allowed`` names an ALLOWED_IN_CI entry.
    Works inside a test, a fixture, or at import time of a test module (then the whole module skips)."""
    if allowed is not None and allowed not in ALLOWED_IN_CI:
        raise ValueError(f"unknown allowed skip {allowed!r}: add it to ALLOWED_IN_CI with why CI lacks it")
    if condition:
        return
    if in_ci() and allowed is None:
        pytest.fail(f"{reason} (CI=true: a missing prerequisite fails the run instead of skipping)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def importorskip(module: str, *, allowed: str | None = None) -> ModuleType:
    """``pytest.importorskip`` through ``require``: the module, or a skip (a failure in CI)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        require(False, f"could not import {module!r}: {exc}", allowed=allowed)
        raise  # not reached: require skipped or failed


__all__ = ["ALLOWED_IN_CI", "importorskip", "in_ci", "require"]
