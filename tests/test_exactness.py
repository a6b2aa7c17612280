"""The lock you name is the lock you get: exactness of the commands that take an environment or a lock.

Each test runs the real CLI (a subprocess) on real files: a real environment rattler installed from the
file:// test channel, real lock files, a project directory as a user has one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.channels import HOST_PY
from support.check_envs import envguard

pytestmark = pytest.mark.slow  # every test starts envguard

SPEC = f"name: exact-t\nchannels: [conda-forge]\ndependencies: [python={HOST_PY}]\n"


def test_check_of_a_directory_that_is_not_an_environment_is_exit_2(tmp_path: Path) -> None:
    # a project directory: environment.yml but no conda-meta, no pyvenv.cfg, no interpreter
    (tmp_path / "environment.yml").write_text(SPEC)
    for cmd in (["check", "--no-smoke"], ["smoke"], ["export", "-o", str(tmp_path / "out")]):
        proc = envguard(*cmd, "-p", ".", cwd=tmp_path)
        assert proc.returncode == 2, (cmd, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    proc = envguard("check", "--no-smoke", "-p", ".", cwd=tmp_path)
    assert "not an environment" in proc.stderr and str(tmp_path) in proc.stderr, proc.stderr
