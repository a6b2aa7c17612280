"""Session-wide test setup.

* Caches (rattler, conda-lock, pip, pre-commit) and temporary files (TMPDIR) go to one temporary directory,
  never ``~/.cache``, removed when the session ends (``ENVGUARD_TESTS_KEEP_TMP=1`` keeps it).
* ``slow`` (builds environments or starts interpreters) is also set here for every test that uses a fixture
  marked ``@builds_environment`` (tests/support/lanes.py); ``-m "not slow"`` is the fast lane.
* ``@pytest.mark.requires(condition, reason)`` skips through tests/support/require.py: a failure under CI=true.
* The process leaves with ``os._exit`` after pytest has printed its summary:
  py-rattler's runtime can crash during interpreter finalisation
  (engine-notes.md), which would turn a green run red at random.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

_SESSION_TMP = Path(tempfile.mkdtemp(prefix="envguard-tests-"))
# pytest's own tmp_path roots stay where pytest keeps them (the last three runs, for a look after a failure)
os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
for _var, _sub in {
    "TMPDIR": "tmp",  # every temporary file of the tests and their subprocesses (conda-lock's included)
    "XDG_CACHE_HOME": "cache",
    "RATTLER_CACHE_DIR": "cache/rattler",
    "CONDA_PKGS_DIRS": "cache/pkgs",
    "PIP_CACHE_DIR": "cache/pip",
    "PRE_COMMIT_HOME": "cache/pre-commit",
    "HYPOTHESIS_STORAGE_DIRECTORY": "cache/hypothesis",  # not .hypothesis/ in the working tree
    "ENVGUARD_ENVS_DIR": "envs",
}.items():
    os.environ[_var] = str(_SESSION_TMP / _sub)
    (_SESSION_TMP / _sub).mkdir(parents=True, exist_ok=True)
tempfile.tempdir = os.environ["TMPDIR"]  # gettempdir() had already answered /tmp for the mkdtemp above
# The standard test channel's python is a venv around this machine's interpreter: its bin/python3.X is an
# absolute symlink out of the prefix, which envguard refuses unless allowed (docs/reliability.md).
os.environ["ENVGUARD_SYMLINK_ALLOW"] = "python:bin/python3*"
os.environ.pop("CONDA_PREFIX", None)
os.environ.pop("ENVGUARD_BACKEND", None)
# `envguard init` asks the channel's records when it answers: tests stay hermetic unless they point it at a
# local channel (tests/test_compat_records.py)
os.environ["ENVGUARD_OFFLINE"] = "1"

REPO = Path(__file__).resolve().parent.parent
REALWORLD = Path(os.environ.get("ENVGUARD_REALWORLD", REPO.parent / "shared" / "realworld"))

sys.path.insert(0, str(Path(__file__).resolve().parent))

from support.lanes import mark_slow_from_fixtures  # noqa: E402 (needs the sys.path entry above)
from support.require import require  # noqa: E402

pytest_plugins = ["support.channel_fixtures"]


_POETRY_CACHES = itertools.count()


@pytest.fixture(autouse=True)
def _own_poetry_cache() -> None:
    """A poetry cache of its own for each test. conda-lock's pip step (poetry) caches every release it reads
    under a name made from the index URL; the tests' local indexes differ only in their port, which the kernel
    hands out again, so with one cache for the session a test could be answered by an earlier test's index
    (test_pypi_bounded failed in CI this way) and never reach its own."""
    os.environ["POETRY_CACHE_DIR"] = str(_SESSION_TMP / "cache" / "poetry" / str(next(_POETRY_CACHES)))


@pytest.fixture(scope="session")
def session_tmp() -> Path:
    return _SESSION_TMP


@pytest.fixture(scope="session", autouse=True)
def _project_search_stops_at_the_tests_directories(tmp_path_factory: pytest.TempPathFactory) -> None:
    """envguard looks for its project upward from the working directory until a repository root
    (envguard/project.py); an environment.yml above TMPDIR would be taken as the project of every test that
    runs in a temporary directory. An empty ``.hg`` makes pytest's root of this session's ``tmp_path``s and
    the session directory (TMPDIR's parent) repository roots: only a test's own directory lies below them.
    ``.hg`` rather than ``.git``: git, which tests run, would try to read a ``.git`` there."""
    for root in (tmp_path_factory.getbasetemp(), _SESSION_TMP):
        (root / ".hg").mkdir(exist_ok=True)


@pytest.fixture(scope="session")
def realworld() -> Path:
    require(REALWORLD.is_dir(), f"real-world corpus not found at {REALWORLD} (set ENVGUARD_REALWORLD)")
    return REALWORLD


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_slow_from_fixtures(items)


@pytest.hookimpl(tryfirst=True)  # before any fixture of the test is set up
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("requires"):
        require(*mark.args, **mark.kwargs)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    # A skip raised inside require() would be reported at require.py's line: report it at the test instead.
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[0].endswith("require.py"):
        path, lineno, _ = item.reportinfo()
        report.longrepr = (str(path), (lineno or 0) + 1, report.longrepr[2])
    return report


_exit_status = {"code": 0}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status["code"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # Only the top-level pytest process; never a pytester/in-process run.
    if os.environ.get("ENVGUARD_TESTS_NO_HARD_EXIT"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # os._exit runs no exit handler: what they would remove (conda-lock's temporary directories, the caches
    # and environments of the session, ~0.5 GB) goes here, unless kept to look at
    if not os.environ.get("ENVGUARD_TESTS_KEEP_TMP"):
        shutil.rmtree(_SESSION_TMP, ignore_errors=True)
    os._exit(_exit_status["code"])
