"""Offline and mirrors: docs/offline.md's blocks run as written (a local channel made by rattler's indexer,
then the same files as a conda-forge mirror named in ~/.condarc), --offline names what is missing, and the
channel configuration is read as conda and pixi read it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import channels

from envguard import condaconfig

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "offline.md"


def doc_blocks() -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.DOTALL | re.MULTILINE)


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CONDA", "PIXI")) and k not in ("XDG_CONFIG_HOME", "ENVGUARD_OFFLINE")}
    bindir = str(Path(sys.executable).parent)
    return {**env, "HOME": str(home), "PATH": f"{bindir}{os.pathsep}{env.get('PATH', '')}", **extra}


@pytest.mark.slow
def test_the_documented_blocks_run_as_written(tmp_path: Path) -> None:
    home, work, pkgs = tmp_path / "home", tmp_path / "work", tmp_path / "pkgs"
    for d in (home, work, pkgs):
        d.mkdir()
    channels.build_package(pkgs, "numpy", "2.0.0", noarch="generic", files={"share/numpy-demo.txt": "x"})
    channels.build_package(pkgs, "python", "3.11.0", subdir="linux-64", files={"share/python-demo.txt": "py"})
    env = _env(home, PKGS=str(pkgs), XDG_CACHE_HOME=str(tmp_path / "cache"),  # an empty cache: truly offline
               RATTLER_CACHE_DIR=str(tmp_path / "cache" / "rattler"), ENVGUARD_PKGS_DIR=str(tmp_path / "pkgs-cache"))
    local, mirror = doc_blocks()
    first = subprocess.run(["bash", "-euo", "pipefail", "-c", local], cwd=work, env=env, capture_output=True,
                           text=True, timeout=300, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "no findings" in first.stdout, first.stdout  # block 1's `envguard lint`: the file and its lock
    lock = (work / "conda-lock.yml").read_text(encoding="utf-8")
    assert f"{(work / 'local-channel').as_uri()}/noarch/numpy-2.0.0-h0_0.tar.bz2" in lock
    shutil.copy(work / "conda-lock.yml", tmp_path / "local-lock.yml")
    # create --offline with a cold package cache: the local channel's archives are all it needs
    assert (work / "offline-env" / "share" / "numpy-demo.txt").read_text(encoding="utf-8") == "x"
    second = subprocess.run(["bash", "-euo", "pipefail", "-c", mirror], cwd=work, env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "channel configuration: ~/.condarc: custom_channels" in second.stderr, second.stderr
    assert "no findings" in second.stdout, second.stdout  # the mirror's URLs are conda-forge's: no EG152, EG130
    served = f"{(work / 'mirror').as_uri()}/conda-forge"
    assert f"mirror: conda-forge from {served} (~/.condarc: custom_channels)" in second.stderr, second.stderr
    lock = (work / "conda-lock.yml").read_text(encoding="utf-8")
    assert f"{served}/noarch/numpy-2.0.0-h0_0.tar.bz2" in lock, lock
    assert f"envguard.mirror.conda-forge: {served}" in lock and "- url: conda-forge" in lock, lock
    # a colleague without the mirror: the lock (what the envguard-lint hook reads) lints clean, is fresh, and is
    # the same packages as the first block's lock
    colleague = _env(tmp_path / "colleague", XDG_CACHE_HOME=str(tmp_path / "cache"))
    (tmp_path / "colleague").mkdir()
    for args in (["lint"], ["lock", "--check"], ["diff", str(tmp_path / "local-lock.yml"), "conda-lock.yml"]):
        proc = subprocess.run([sys.executable, "-m", "envguard", *args], cwd=work, env=colleague,
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, (args, proc.stdout + proc.stderr)
    assert "no differences" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_offline_without_cached_repodata_names_the_channel(tmp_path: Path) -> None:
    (tmp_path / "environment.yml").write_text("name: x\nchannels:\n  - https://conda.example.invalid/forge\n"
                                              "dependencies:\n  - numpy\nplatforms:\n  - linux-64\n")
    proc = subprocess.run([sys.executable, "-m", "envguard", "lock", "--offline"], cwd=tmp_path,
                          env=_env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "cache")), capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 6, proc.stderr
    assert proc.stderr.count("\n") == 1 and "offline" in proc.stderr
    assert "https://conda.example.invalid/forge" in proc.stderr and "docs/offline.md" in proc.stderr


def test_condarc_search_order_and_variables(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".config" / "conda").mkdir(parents=True)
    (home / ".config" / "conda" / ".condarc").write_text("channel_alias: https://first.example/\n"
                                                         "default_channels: [pkgs/main]\n")
    (home / ".condarc").write_text("channel_alias: https://mirror.example/conda/\n"
                                   "custom_channels:\n  pytorch: https://pt.example/\n"
                                   "mirrored_channels:\n  conda-forge: [https://cf-mirror.example/conda-forge]\n")
    cfg = condaconfig.load({"HOME": str(home)}, home)
    assert cfg.channel_alias == "https://mirror.example/conda/"  # ~/.condarc comes after ~/.config/conda
    assert cfg.url_for("conda-forge") == "https://mirror.example/conda/conda-forge"
    assert cfg.url_for("pytorch") == "https://pt.example/pytorch"
    assert cfg.expand(["defaults", "pytorch"]) == ["https://mirror.example/conda/pkgs/main", "https://pt.example/pytorch"]
    assert cfg.mirror_map() == {"https://mirror.example/conda/conda-forge/": ["https://cf-mirror.example/conda-forge/"]}
    assert cfg.used == ["~/.config/conda/.condarc: channel_alias", "~/.config/conda/.condarc: default_channels",
                        "~/.condarc: channel_alias", "~/.condarc: custom_channels", "~/.condarc: mirrored_channels"]
    env = {"HOME": str(home), "CONDA_CHANNEL_ALIAS": "https://env.example/", "CONDA_DEFAULT_CHANNELS": "a, b"}
    cfg = condaconfig.load(env, home)
    assert cfg.channel_alias == "https://env.example/" and cfg.default_channels == ["a", "b"]
    rc = tmp_path / "explicit.yml"
    rc.write_text("channel_alias: https://last.example/\n")
    assert condaconfig.load({"HOME": str(home), "CONDARC": str(rc)}, home).channel_alias == "https://last.example/"


def test_no_configuration_changes_nothing(tmp_path: Path) -> None:
    cfg = condaconfig.load({"HOME": str(tmp_path)}, tmp_path)
    assert cfg.expand(["conda-forge", "defaults", "https://x.example/c"]) == ["conda-forge", "defaults",
                                                                              "https://x.example/c"]
    assert cfg.mirror_map() == {} and cfg.used == []


def test_pixi_mirrors(tmp_path: Path) -> None:
    (tmp_path / ".pixi").mkdir()
    (tmp_path / ".pixi" / "config.toml").write_text(
        '[mirrors]\n"https://conda.anaconda.org/conda-forge" = ["https://prefix.example/conda-forge"]\n')
    cfg = condaconfig.load({"HOME": str(tmp_path)}, tmp_path)
    assert cfg.mirror_map() == {"https://conda.anaconda.org/conda-forge/": ["https://prefix.example/conda-forge/"]}
    assert cfg.used == ["~/.pixi/config.toml: mirrors"]
