"""A solve that fails because of the spec names the spec line (issue 35, point 8).

Real rattler solves against a small file:// channel built with rattler's indexer, through the real CLI
(`envguard lock`, and `envguard create`, which locks first when there is no lock). A name no channel holds,
or a version (a build) the channels do not have, is the spec's fault: exit 2, `file:line` of the line that
asked for it, the nearest names or versions the channel holds. A conflict between specs stays exit 6 with
rattler's explanation, and gets the lines of the specs it names.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import envguard_run, run_cli
from support.lock_support import write_env

from envguard.errors import ExitCode

PACKAGES = [
    {"name": "numpy", "version": "1.26.4"},
    {"name": "numpy", "version": "2.1.0"},
    {"name": "pytorch", "version": "2.12.0", "build": "cpu_0", "depends": ["numpy >=1.23"]},
    {"name": "pytorch", "version": "2.13.0", "build": "cpu_0", "depends": ["numpy >=1.23"]},
    {"name": "scipy", "version": "1.14.0", "depends": ["numpy <2"]},
    {"name": "cudatoolkit", "version": "11.8", "subdir": "linux-64"},
]


@pytest.fixture
def channel(channel_factory) -> str:
    return channels.channel_url(channel_factory(PACKAGES, name="small"))


def _line(path: Path, text: str) -> int:
    """The line of ``path`` that is the list item ``- text``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if line.strip() == f"- {text}")


def _lock(capsys, project: Path, *args: str) -> tuple[int, str]:
    cwd = os.getcwd()
    os.chdir(project)
    try:
        code, _out, err = run_cli(capsys, "lock", *args)
    finally:
        os.chdir(cwd)
    return code, err


def _error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def test_a_misspelt_name_names_its_line_and_the_nearest_name(tmp_path: Path, channel: str, capsys) -> None:
    env = write_env(tmp_path / "environment.yml", channels=[channel], deps=["pytorch=2.13", "nunpy"],
                    platforms=["linux-64"])
    code, err = _lock(capsys, tmp_path)
    assert code == ExitCode.USAGE, err
    line = _error(err)
    assert f"environment.yml:{_line(env, 'nunpy')}: `nunpy`: no package named nunpy for linux-64" in line, line
    assert "did you mean numpy?" in line and channel in line
    assert "Traceback" not in err and not (tmp_path / "conda-lock.yml").exists()


def test_a_version_no_channel_has_names_its_line_and_the_versions_there(tmp_path: Path, channel: str,
                                                                        capsys) -> None:
    env = write_env(tmp_path / "environment.yml", channels=[channel], deps=["numpy", "pytorch=2.99"],
                    platforms=["linux-64"])
    code, err = _lock(capsys, tmp_path)
    assert code == ExitCode.USAGE, err
    line = _error(err)
    assert f"environment.yml:{_line(env, 'pytorch=2.99')}: `pytorch=2.99`: no pytorch 2.99.* for linux-64" in line
    assert "the nearest versions there: 2.12.0, 2.13.0" in line and "`pytorch=2.13.0`" in line, line
    assert not (tmp_path / "conda-lock.yml").exists()


def test_a_build_no_channel_has_names_the_builds_there(tmp_path: Path, channel: str, capsys) -> None:
    env = write_env(tmp_path / "environment.yml", channels=[channel], deps=["pytorch=2.13=cuda*"],
                    platforms=["linux-64"])
    code, err = _lock(capsys, tmp_path)
    assert code == ExitCode.USAGE, err
    line = _error(err)
    assert f"environment.yml:{_line(env, 'pytorch=2.13=cuda*')}: " in line and "build cuda*" in line, line
    assert "the builds there: 2.13.0=cpu_0" in line


def test_a_pypi_name_gets_condas_name(tmp_path: Path, channel: str, capsys) -> None:
    env = write_env(tmp_path / "environment.yml", channels=[channel], deps=["torch"], platforms=["linux-64"])
    code, err = _lock(capsys, tmp_path)
    assert code == ExitCode.USAGE, err
    line = _error(err)
    assert f"environment.yml:{_line(env, 'torch')}: `torch`: " in line and "conda's is pytorch" in line, line
    assert "write `pytorch` on this line" in line


def test_a_name_only_another_platform_has_says_which(tmp_path: Path, channel: str, capsys) -> None:
    env = write_env(tmp_path / "environment.yml", channels=[channel], deps=["numpy", "cudatoolkit"],
                    platforms=["linux-64", "osx-arm64"])
    code, err = _lock(capsys, tmp_path)
    assert code == ExitCode.USAGE, err
    line = _error(err)
    assert f"environment.yml:{_line(env, 'cudatoolkit')}: `cudatoolkit`: no package named cudatoolkit for " \
           "osx-arm64" in line, line
    assert "there is one for linux-64" in line and "# [linux64]" in line and "do not lock osx-arm64" in line


def test_every_line_at_fault_is_named_in_the_file_that_has_it(tmp_path: Path, channel: str, capsys) -> None:
    base = write_env(tmp_path / "base.yml", channels=[channel], deps=["numpy", "pytorch=1.0"],
                     platforms=["linux-64"])
    extra = write_env(tmp_path / "extra.yml", channels=[channel], deps=["scipyy"], name="extra")
    code, err = _lock(capsys, tmp_path, "-f", "base.yml", "-f", "extra.yml")
    assert code == ExitCode.USAGE, err
    line = _error(err)
    assert "2 problems" in line, line
    assert f"base.yml:{_line(base, 'pytorch=1.0')}: `pytorch=1.0`: no pytorch 1.0.*" in line
    assert "e.g. `pytorch=2.12.0`" in line  # below every version there: the oldest is the nearest
    assert f"extra.yml:{_line(extra, 'scipyy')}: `scipyy`: " in line and "did you mean scipy?" in line


def test_a_conflict_keeps_rattlers_explanation_and_adds_the_lines(tmp_path: Path, channel: str, capsys) -> None:
    env = write_env(tmp_path / "environment.yml", channels=[channel], deps=["scipy", "numpy>=2", "pytorch"],
                    platforms=["linux-64"])
    code, err = _lock(capsys, tmp_path)
    assert code == ExitCode.BACKEND, err
    assert "cannot solve for linux-64" in err and "scipy 1.14.0 would require" in err, err  # rattler's own words
    assert f"environment.yml:{_line(env, 'scipy')}: scipy" in err
    assert f"environment.yml:{_line(env, 'numpy>=2')}: numpy>=2" in err
    assert "pytorch" not in err.split("the spec lines it names:")[1]  # only the lines it names


def test_create_names_the_line_when_it_locks_first(tmp_path: Path, channel: str, capsys) -> None:
    env = write_env(tmp_path / "proj" / "environment.yml", channels=[channel], deps=["numpy", "nunpy"],
                    platforms=["linux-64"])
    target = tmp_path / "env"
    code, _out, err = run_cli(capsys, "create", "-p", str(target), "-f", str(env), "--no-check")
    assert code == ExitCode.USAGE, err
    line = _error(err)
    assert f"{env}:{_line(env, 'nunpy')}: `nunpy`: " in line and "did you mean numpy?" in line, line
    assert not target.exists() and not (env.parent / "conda-lock.yml").exists()


@pytest.mark.slow
def test_the_envguard_command_exits_2_and_keeps_the_old_lock(tmp_path: Path, channel: str) -> None:
    env = write_env(tmp_path / "environment.yml", channels=[channel], deps=["pytorch=2.13"], platforms=["linux-64"])
    first = envguard_run("lock", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = (tmp_path / "conda-lock.yml").read_bytes()
    write_env(env, channels=[channel], deps=["pytorch=2.99"], platforms=["linux-64"])
    proc = envguard_run("lock", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "environment.yml:5: `pytorch=2.99`: " in proc.stderr and "2.12.0, 2.13.0" in proc.stderr
    assert (tmp_path / "conda-lock.yml").read_bytes() == before
    create = envguard_run("create", "-p", str(tmp_path / "env"), "--no-check", cwd=tmp_path)
    assert create.returncode == 2 and "environment.yml:5: `pytorch=2.99`" in create.stderr, create.stderr
    assert not (tmp_path / "env").exists()
