"""Which tests are slow. The fast lane is ``python -m pytest -q -m "not slow"``.

``slow`` means: the test builds environments (real rattler installs or creates) or starts interpreters
(envguard, the probes, pre-commit, git, a DataLoader's worker processes), or sweeps the whole real-world
corpus (seconds of CPU per test; the fast lane stays near a minute). A module whose tests all do
says so once (``pytestmark = pytest.mark.slow``), a single test with ``@pytest.mark.slow``, and a fixture
that builds an environment or starts an interpreter with ``@builds_environment`` (under ``@pytest.fixture``):
tests/conftest.py then marks every test that uses it, directly or through another fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., object])

# module name -> names of the fixtures it defines that build environments or start interpreters
_SLOW_FIXTURES: dict[str, set[str]] = {}


def builds_environment(fixture_function: F) -> F:
    _SLOW_FIXTURES.setdefault(fixture_function.__module__, set()).add(fixture_function.__name__)
    return fixture_function


def mark_slow_from_fixtures(items: Iterable[pytest.Item]) -> None:
    """Add ``slow`` to each test using a fixture of its own module, or a shared one, marked builds_environment."""
    shared = {name for module, names in _SLOW_FIXTURES.items() if not module.startswith("test_") for name in names}
    for item in items:
        module = getattr(item, "module", None)
        if module is None:
            continue
        used = set(getattr(item, "fixturenames", ()))
        own = used & _SLOW_FIXTURES.get(module.__name__, set())
        inherited = {name for name in used & shared if not hasattr(module, name)}  # not shadowed by the module
        if own or inherited:
            item.add_marker(pytest.mark.slow)


__all__ = ["builds_environment", "mark_slow_from_fixtures"]
