"""check and smoke see what training sees: their probes run in the environment activated as `envguard run`
activates it, and a failure only activation causes is put on the activate.d script that causes it (EG506;
EG560 names the script that put a foreign library on LD_LIBRARY_PATH)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import check_envs
from support.channels import HOST_PY

pytestmark = pytest.mark.slow  # real environments rattler installed, interpreters started

BASE = [f"python {HOST_PY}.*", "pytorch 2.13.0 *cpu*", "pip"]


@pytest.fixture
def env(channel_url: str, session_tmp: Path, tmp_path: Path) -> Path:
    prefix, _ = check_envs.make_env(channel_url, BASE, tmp_path / "env", session_tmp / "check-pkgs")
    return prefix


def _script(env: Path, name: str, text: str) -> None:
    scripts = env / "etc" / "conda" / "activate.d"
    scripts.mkdir(parents=True, exist_ok=True)
    (scripts / name).write_text(text)


def _check(env: Path, tmp_path: Path, *, smoke: bool) -> list:
    from envguard.check import CheckOptions, run_check

    return run_check(CheckOptions(prefix=env, smoke=smoke, imports=True, driver_info_fn=lambda: None,
                                  cwd=tmp_path, smoke_timeout=240)).findings


def test_a_foreign_cuda_library_an_activate_script_puts_first_is_named_with_the_script(env: Path,
                                                                                      tmp_path: Path) -> None:
    other = tmp_path / "other-cuda" / "lib64"
    other.mkdir(parents=True)
    (other / "libcudnn.so.9").write_bytes(b"")
    assert not [f for f in _check(env, tmp_path, smoke=False) if f.code in ("EG560", "EG506")]
    _script(env, "00-harmless.sh", "export EG_HARMLESS=1\n")
    _script(env, "50-cuda.sh", f"export LD_LIBRARY_PATH={other}:${{LD_LIBRARY_PATH:-}}\n")
    found = [f for f in _check(env, tmp_path, smoke=False) if f.code == "EG560"]
    assert len(found) == 1 and str(other) in found[0].message, found
    assert "etc/conda/activate.d/50-cuda.sh (sets LD_LIBRARY_PATH)" in found[0].message
    assert "00-harmless" not in found[0].message


def test_an_activate_script_that_ends_the_shell_is_an_error_of_check(env: Path, tmp_path: Path) -> None:
    _script(env, "10-broken.sh", "exit 3\n")
    found = [f for f in _check(env, tmp_path, smoke=False) if f.code == "EG506"]
    assert len(found) == 1 and found[0].severity.value == "error", found
    assert "10-broken.sh (ends the shell)" in found[0].message


def test_an_activate_script_that_breaks_the_interpreter_fails_check_and_is_named(env: Path, tmp_path: Path) -> None:
    _script(env, "20-pythonhome.sh", "export PYTHONHOME=/nonexistent/eg-python-home\n")
    proc = subprocess.run([sys.executable, "-m", "envguard", "check", "-p", str(env), "--format", "json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    report = json.loads(proc.stdout)
    blamed = [f for f in report["findings"] if f["code"] == "EG506"]
    assert proc.returncode == 7 and blamed, report["findings"]
    assert "etc/conda/activate.d/20-pythonhome.sh (sets PYTHONHOME)" in blamed[0]["message"]
    assert "passes without activation" in blamed[0]["message"]
    # smoke runs activated too: the same script makes it fail
    smoke = subprocess.run([sys.executable, "-m", "envguard", "smoke", "-p", str(env), "--quick"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
    assert smoke.returncode == 7, smoke.stdout + smoke.stderr
