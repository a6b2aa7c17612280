"""Named environments resolve the same way for every command."""

from __future__ import annotations

from pathlib import Path

import pytest

from envguard.envs import create_dir, envs_dirs, find_env, validate_name
from envguard.errors import ExitCode, UserError


def test_create_dir_order(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    assert create_dir({"HOME": home}) == Path(home) / ".conda" / "envs"
    assert create_dir({"HOME": home, "CONDA_ROOT": "/opt/conda"}) == Path("/opt/conda/envs")
    env = {"HOME": home, "CONDA_ROOT": "/opt/conda", "CONDA_ENVS_PATH": f"/a{':'}/b"}
    assert create_dir(env) == Path("/a")
    assert create_dir({**env, "ENVGUARD_ENVS_DIR": "/eg"}) == Path("/eg")


@pytest.mark.slow
def test_importing_conda_lock_does_not_move_named_envs_into_envguards_interpreter(tmp_path: Path) -> None:
    """conda-lock's vendored conda sets CONDA_ROOT=sys.prefix on import (a lock, a re-lock, a freshness test):
    `-n NAME` in the same process then meant <envguard's venv>/envs/NAME."""
    import os
    import subprocess
    import sys

    code = ("import sys; from envguard.envs import create_dir, envs_dirs; import conda_lock._vendor.conda; "
            "from pathlib import Path; assert Path(sys.prefix) / 'envs' not in envs_dirs(), envs_dirs(); "
            "print(create_dir())")
    env = {k: v for k, v in os.environ.items() if k not in ("ENVGUARD_ENVS_DIR", "CONDA_ROOT", "CONDA_ENVS_PATH")}
    env["HOME"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == str(tmp_path / ".conda" / "envs"), proc.stdout + proc.stderr


def test_search_order_has_envguard_first_and_no_repeats(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "ENVGUARD_ENVS_DIR": "/eg", "CONDA_ENVS_PATH": "/eg:/x", "CONDA_ROOT": "/r"}
    dirs = envs_dirs(env)
    assert dirs[:3] == [Path("/eg"), Path("/x"), Path("/r/envs")]
    assert len(dirs) == len(set(dirs))


def test_find_env_in_a_later_dir_and_via_environments_txt(tmp_path: Path) -> None:
    later = tmp_path / "home" / "miniforge3" / "envs" / "torch"
    later.mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home"), "ENVGUARD_ENVS_DIR": str(tmp_path / "eg")}
    assert find_env("torch", env) == later

    elsewhere = tmp_path / "projects" / "envs" / "other"
    elsewhere.mkdir(parents=True)
    (tmp_path / "home" / ".conda").mkdir()
    (tmp_path / "home" / ".conda" / "environments.txt").write_text(f"{elsewhere}\n")
    assert find_env("other", env) == elsewhere


@pytest.mark.parametrize("bad", ["", "..", "a/b", ".hidden"])
def test_bad_names_are_usage_errors(bad: str) -> None:
    with pytest.raises(UserError) as e:
        validate_name(bad)
    assert e.value.exit_code == ExitCode.USAGE


def test_missing_env_names_the_dirs_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        find_env("nope", {"HOME": str(tmp_path), "ENVGUARD_ENVS_DIR": str(tmp_path / "eg")})
    assert str(tmp_path / "eg") in e.value.message and "envguard create -n" in e.value.message


def test_no_target_names_the_environment_file_that_was_read(tmp_path: Path) -> None:
    """`create -f other.yml` without `name:` said `no environment.yml here names one` beside an
    environment.yml that does name one."""
    from envguard.envs import NoTargetError, resolve_target

    (tmp_path / "environment.yml").write_text("name: project-env\ndependencies: [python]\n")
    (tmp_path / "other.yml").write_text("dependencies: [python]\n")
    with pytest.raises(NoTargetError) as e:
        resolve_target(None, None, existing=False, cwd=tmp_path, spec_files=["other.yml"])
    assert "other.yml names no environment (no `name:`)" in e.value.message and "environment.yml" not in e.value.message
    assert resolve_target(None, None, existing=False, cwd=tmp_path, env={"ENVGUARD_ENVS_DIR": "/e"}) == \
        Path("/e/project-env")
    (tmp_path / "empty" / ".git").mkdir(parents=True)  # a repository of its own: the search stops at its root
    with pytest.raises(NoTargetError) as e:
        resolve_target(None, None, cwd=tmp_path / "empty", env={"HOME": str(tmp_path)})
    assert "no environment.yml here names one" in e.value.message
