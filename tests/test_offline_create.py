"""Mirrors and offline end to end: a channel built with rattler's indexer, served on 127.0.0.1 as the mirror of
a channel URL that does not resolve, named by a .condarc ($CONDARC) or by pixi's project config; lock and
create reach it only through that configuration; create --offline then installs from the warm package cache
and, with a cold one, names every missing package in one line (exit 6). And the one route from a name to a
URL (condaconfig.resolve_channel), with the setting that decided it, for every command."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import ENVGUARD

from envguard import channelfacts, condaconfig

CANONICAL = "https://conda.example.invalid/forge"  # never resolves: only a mirror can answer for it


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CONDA", "PIXI", "RATTLER")) and k not in ("XDG_CONFIG_HOME",
                                                                         "ENVGUARD_CHANNEL_ALIAS")}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs"), **extra}


def envguard_run(*args: str, env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """The real CLI with exactly ``env`` (no session cache: what is cached is what this test put there)."""
    return subprocess.run([*ENVGUARD, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout,
                          check=False)


def _channel(root: Path) -> Path:
    return channels.make_channel(root, [
        {"name": "alpha", "version": "1.0", "noarch": "generic", "depends": ["beta"],
         "files": {"share/alpha.txt": "alpha"}},
        {"name": "beta", "version": "2.0", "noarch": "generic", "files": {"share/beta.txt": "beta"}},
    ], subdirs=("noarch", channels.host_platform()))


def _project(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "environment.yml").write_text(f"name: t\nchannels:\n  - {CANONICAL}\ndependencies:\n  - alpha\n"
                                          f"platforms:\n  - {channels.host_platform()}\n")


def _one_line(text: str) -> str:
    assert text.count("\n") == 1, text
    return text


@pytest.mark.slow
def test_condarc_mirror_then_create_offline_warm_and_cold(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _project(work)
    with channels.serve_directory(_channel(tmp_path / "channel")) as server:
        rc = tmp_path / "condarc.yml"
        rc.write_text(f"mirrored_channels:\n  {CANONICAL}: [{server.url}]\n")
        env = _env(tmp_path, CONDARC=str(rc))
        proc = envguard_run("lock", env=env, cwd=work, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert f"channel configuration: {rc}: mirrored_channels" in proc.stderr
        lock = (work / "conda-lock.yml").read_text(encoding="utf-8")
        assert f"{CANONICAL}/noarch/alpha-1.0-h0_0.tar.bz2" in lock  # the lock keeps the canonical URL

        # cold package cache, offline: nothing downloaded, both packages named, one line, exit 6
        proc = envguard_run("create", "--offline", "-p", str(tmp_path / "env1"), "--no-check", env=env,
                            cwd=work, timeout=300)
        assert proc.returncode == 6, proc.stdout + proc.stderr
        line = _one_line(proc.stderr)
        assert "offline: 2 packages neither in the package cache" in line
        assert f"alpha 1.0 ({CANONICAL}/noarch/alpha-1.0-h0_0.tar.bz2)" in line and "beta 2.0 (" in line
        assert not (tmp_path / "env1").exists()
        assert not any("alpha-1.0" in r for r in server.requests)

        # online: the downloads go to the mirror (the canonical host does not exist)
        proc = envguard_run("create", "-p", str(tmp_path / "env1"), "--no-check", env=env, cwd=work, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert any(r.endswith("/noarch/alpha-1.0-h0_0.tar.bz2") for r in server.requests)
    # the mirror is gone: the warm cache alone builds another environment, and lock --offline re-solves
    proc = envguard_run("create", "--offline", "-p", str(tmp_path / "env2"), "--no-check", env=env, cwd=work,
                        timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "env2" / "share" / "alpha.txt").read_text() == "alpha"
    # an environment that already is the lock needs no package at all: unchanged, even with the cache gone
    shutil.rmtree(tmp_path / "pkgs")
    proc = envguard_run("create", "--offline", "-p", str(tmp_path / "env2"), "--no-check", env=env, cwd=work,
                        timeout=300)
    assert proc.returncode == 0 and "unchanged" in proc.stdout, proc.stdout + proc.stderr
    proc = envguard_run("lock", "--offline", "--update-all", env=env, cwd=work, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_pixi_project_mirror_serves_lock_and_create(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _project(work)
    with channels.serve_directory(_channel(tmp_path / "channel")) as server:
        (work / ".pixi").mkdir()
        (work / ".pixi" / "config.toml").write_text(f'[mirrors]\n"{CANONICAL}" = ["{server.url}"]\n')
        env = _env(tmp_path)
        proc = envguard_run("lock", env=env, cwd=work, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert f"channel configuration: {work / '.pixi' / 'config.toml'}: mirrors" in proc.stderr
        proc = envguard_run("create", "-p", str(tmp_path / "env"), "--no-check", env=env, cwd=work, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "env" / "share" / "beta.txt").read_text() == "beta"


@pytest.mark.slow
def test_lock_offline_on_a_mirrored_channel_names_it_not_a_dns_error(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _project(work)
    rc = tmp_path / "condarc.yml"
    rc.write_text(f"mirrored_channels:\n  {CANONICAL}: [http://127.0.0.1:9/never]\n")
    proc = envguard_run("lock", "--offline", env=_env(tmp_path, CONDARC=str(rc)), cwd=work, timeout=300)
    assert proc.returncode == 6, proc.stderr
    line = proc.stderr.splitlines()[-1]
    assert line.startswith("envguard: offline: cannot load channels") or "offline:" in line, proc.stderr
    assert CANONICAL in line and "dns" not in line.lower(), line


def test_one_route_from_a_name_to_a_url_says_which_setting(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path
    (home / ".condarc").write_text("channel_alias: https://alias.example/\n"
                                   "custom_channels:\n  pytorch: https://pt.example/\n"
                                   "mirrored_channels:\n  conda-forge: [https://m.example/cf]\n")
    env = {"HOME": str(home)}
    r = condaconfig.resolve_channel("conda-forge", env, home, home)
    assert (r.url, r.source) == ("https://alias.example/conda-forge", "~/.condarc: channel_alias")
    assert r.mirrors == ("https://m.example/cf",) and r.mirror_source == "~/.condarc: mirrored_channels"
    assert r.describe() == ("https://alias.example/conda-forge, from ~/.condarc: channel_alias, mirrored by "
                            "https://m.example/cf per ~/.condarc: mirrored_channels")
    assert condaconfig.resolve_channel("pytorch", env, home, home).source == "~/.condarc: custom_channels"
    # envguard's own override wins over conda's variable and files, and says so
    both = {**env, "CONDA_CHANNEL_ALIAS": "https://conda-var.example/",
            "ENVGUARD_CHANNEL_ALIAS": "file:///srv/mirror"}
    r = condaconfig.resolve_channel("bioconda", both, home, home)
    assert (r.url, r.source) == ("file:///srv/mirror/bioconda", "ENVGUARD_CHANNEL_ALIAS")
    # nothing configured: conda's own answers, and nothing claims to have decided
    bare = tmp_path / "bare"
    bare.mkdir()
    r = condaconfig.resolve_channel("conda-forge", {"HOME": str(bare)}, bare, bare)
    assert (r.url, r.source, r.mirrors) == ("https://conda.anaconda.org/conda-forge", condaconfig.BUILT_IN, ())
    assert condaconfig.resolve_channel("defaults", {"HOME": str(bare)}, bare, bare).url == condaconfig.DEFAULTS_URL
    # init and lint read records through channelfacts, which asks the same function
    for k in [k for k in os.environ if k.startswith(("CONDA", "PIXI"))] + ["ENVGUARD_CHANNEL_ALIAS"]:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(bare)
    assert channelfacts.channel_url("pytorch") == "https://pt.example/pytorch"
    assert channelfacts.channel_url("defaults") == condaconfig.DEFAULTS_URL


def test_readme_offline_section_names_what_the_commands_have() -> None:
    """README's "Offline and mirrors" is prose pointing at docs/offline.md (whose blocks test_offline runs):
    the options and files it names exist."""
    from typer.testing import CliRunner

    from envguard.cli import app

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Offline and mirrors", 1)[1].split("\n## ", 1)[0]
    assert "envguard lock --offline" in section and "envguard create --offline" in section
    assert "(docs/offline.md)" in section and (Path(__file__).resolve().parent.parent / "docs/offline.md").is_file()
    for cmd in ("lock", "create"):
        result = CliRunner().invoke(app, [cmd, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "--offline" in result.output, result.output
