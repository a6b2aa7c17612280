"""Where the tests run: CI's lanes (.ci/run), the tests' temporary directories, and the benchmarks beside them.

* ``.ci/run`` runs the whole suite on the main Python line and the fast lane on the oldest line envguard is for
  (``requires-python``), so a test that holds on one line only is seen.
* A test's project search (envguard/project.py: upward to a repository root) stops at the test's own directory:
  an environment.yml above TMPDIR is nobody's project here (tests/conftest.py marks the roots).
* ``bench/check.py`` runs where the tests run: its prefix's python, from the test channel, is a symlink out of the
  prefix.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from envguard.project import SPEC_NAMES, project_dir

REPO = Path(__file__).resolve().parents[1]
CI_RUN = REPO / ".ci" / "run"


def _oldest_python_line() -> str:
    m = re.search(r'^requires-python\s*=\s*">=\s*(\d+\.\d+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE)
    assert m, "pyproject.toml has no requires-python = \">=X.Y\""
    return m.group(1)


def _readme_fast_lane() -> str:
    lines = [line for line in (REPO / "README.md").read_text().splitlines() if '-m "not slow"' in line
             and line.startswith(".venv/bin/python -m pytest")]
    assert lines, "README.md names no fast-lane command (.venv/bin/python -m pytest ... -m \"not slow\")"
    return lines[0].strip()


def test_ci_runs_the_fast_lane_on_the_oldest_python_line_too() -> None:
    line = _oldest_python_line()
    venv = ".venv" + line.replace(".", "")
    script = CI_RUN.read_text()
    assert f"python{line}" in script and re.search(rf'-m venv {re.escape(venv)}\b', script), \
        f".ci/run makes no virtualenv {venv} from python{line} (requires-python's oldest line)"
    assert _readme_fast_lane().replace(".venv/", f"{venv}/") in script, \
        f".ci/run does not run README's fast lane in {venv}"
    # the same torch on both lines: the 3.10 lane takes the CPU build of the version the main lane installs
    main_torch = re.findall(r"\.venv/bin/python -m pip install -q torch==([\w.]+)", script)
    old_torch = re.findall(rf"{re.escape(venv)}/bin/python -m pip install -q 'torch==([\w.]+)\+cpu'", script)
    assert main_torch and main_torch == old_torch, (main_torch, old_torch)
    # ruff and mypy run once, on the main line
    assert ".venv/bin/ruff check" in script and ".venv/bin/mypy" in script
    assert f"{venv}/bin/ruff" not in script and f"{venv}/bin/mypy" not in script


def _first_repository_root(d: Path) -> Path | None:
    return next((p for p in (d, *d.parents) if (p / ".git").exists() or (p / ".hg").exists()), None)


def test_a_tests_project_search_stops_at_its_own_temporary_directory(tmp_path: Path) -> None:
    """Between a test's own directory (tmp_path, or one of tempfile's under TMPDIR) and the first repository
    root above it lies no other directory that could hold an environment file: the root is the session's."""
    made = Path(tempfile.mkdtemp())
    for own in (tmp_path, made):
        root = _first_repository_root(own)
        assert root is not None and root != own, own
        between = [own, *own.parents[:len(own.relative_to(root).parts) - 1]]
        assert len(between) <= 2, (own, root)  # tmp_path below pytest's root; TMPDIR's below the session's
        assert not [p / n for p in [*between, root] for n in SPEC_NAMES if (p / n).exists()]
        assert project_dir(own) == own


@pytest.mark.slow
def test_bench_check_runs_where_the_tests_run(tmp_path: Path) -> None:
    """bench/check.py on a tiny prefix, with no ENVGUARD_SYMLINK_ALLOW from the test session (a user's shell has
    none): it used to stop at `check --files` (EG536, exit 3) on the test channel's python symlink."""
    env = {k: v for k, v in os.environ.items() if k != "ENVGUARD_SYMLINK_ALLOW"}
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "check.py"), "--conda", "2", "--pip", "2",
                           "--blob-kib", "1", "--repeat", "1", "--keep", str(tmp_path / "bench")],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    said = proc.stdout + proc.stderr
    assert "failed (" not in said, said
    assert "check --no-smoke --files (s)" in proc.stdout and "targets " in proc.stdout, said
    assert proc.returncode in (0, 1), said  # 1: a target not met on a loaded machine; not this test's question
