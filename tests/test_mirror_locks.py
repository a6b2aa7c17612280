"""Mirrors are the same channel: a lock written through ``custom_channels``, ``channel_alias``,
``mirrored_channels`` (an HTTP mirror or a ``file://`` folder) or pixi's ``[mirrors]`` names ``conda-forge``,
records which URL served it (``custom_metadata``: ``envguard.mirror.conda-forge``), lints clean here and for a
colleague without the mirror, is fresh for ``lock --check``, builds an environment that ``check`` passes, and
diffs equal to the lock written against conda-forge's own URLs. Every solve is rattler's, against a channel
built with rattler's indexer, on disk or served on 127.0.0.1; every command is the real CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from support import channels
from support.create_fixtures import ENVGUARD

from envguard import condaconfig

CANONICAL = "https://conda.anaconda.org/conda-forge"  # never reached: a mirror answers for it
HOST = channels.host_platform()
SPEC = (f"name: t\nchannels:\n  - conda-forge\n  - nodefaults\ndependencies:\n  - python=3.11\n  - alpha\n"
        f"platforms:\n  - {HOST}\n")


@dataclass
class Mirror:
    root: Path  # holds conda-forge/<subdir>/..., as a mirror of several channels does
    url: str  # the same root served on 127.0.0.1

    @property
    def folder(self) -> Path:
        return self.root / "conda-forge"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirror]:
    root = tmp_path_factory.mktemp("mirror")
    channels.make_channel(root / "conda-forge", [
        {"name": "python", "version": "3.11.0", "subdir": HOST, "files": {"share/python.txt": "python"}},
        {"name": "alpha", "version": "1.0", "noarch": "generic", "depends": ["beta"],
         "files": {"share/alpha.txt": "alpha"}},
        {"name": "beta", "version": "2.0", "noarch": "generic", "files": {"share/beta.txt": "beta"}},
    ], subdirs=("noarch", HOST))
    with channels.serve_directory(root) as server:
        yield Mirror(root, server.url)


def _env(home: Path, cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CONDA", "PIXI", "RATTLER")) and k not in ("XDG_CONFIG_HOME", "ENVGUARD_CHANNEL_ALIAS",
                                                                         "ENVGUARD_OFFLINE")}
    home.mkdir(parents=True, exist_ok=True)
    return {**env, "HOME": str(home), "XDG_CACHE_HOME": str(cache), "ENVGUARD_PKGS_DIR": str(cache / "pkgs"),
            **extra}


def envguard(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ENVGUARD, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300,
                          check=False)


def _project(work: Path) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    (work / "environment.yml").write_text(SPEC)
    return work


def _lock_through(tmp_path: Path, route: str, mirror: Mirror) -> tuple[Path, dict[str, str], str]:
    """Lock SPEC through one route; returns the project, its environment and the lock command's stderr."""
    work = _project(tmp_path / route)
    home = tmp_path / f"home-{route}"
    home.mkdir()
    rc = {"custom_channels": f"custom_channels:\n  conda-forge: {mirror.root.as_uri()}\n",
          "channel_alias": f"channel_alias: {mirror.url}/\n",
          "mirrored_channels": f"mirrored_channels:\n  conda-forge: [{mirror.url}/conda-forge]\n",
          "mirrored_file": f"mirrored_channels:\n  conda-forge: [{mirror.folder.as_uri()}]\n"}
    if route == "pixi":
        (work / ".pixi").mkdir()
        (work / ".pixi" / "config.toml").write_text(f'[mirrors]\n"{CANONICAL}" = ["{mirror.url}/conda-forge"]\n')
    else:
        (home / ".condarc").write_text(rc[route])
    env = _env(home, tmp_path / f"cache-{route}")
    proc = envguard("lock", env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work, env, proc.stderr


def _lock(work: Path) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((work / "conda-lock.yml").read_text(encoding="utf-8"))


def _urls(work: Path) -> set[str]:
    return {p["url"] for p in _lock(work)["package"]}


def _lints_clean(work: Path, env: dict[str, str], colleague: dict[str, str]) -> None:
    for who in (env, colleague):
        proc = envguard("lint", "conda-lock.yml", env=who, cwd=work)
        assert proc.returncode == 0 and "no findings" in proc.stdout, proc.stdout + proc.stderr
    proc = envguard("lint", env=colleague, cwd=work)  # the pre-commit hook: environment.yml and its lock
    assert proc.returncode == 0 and "EG152" not in proc.stdout and "EG130" not in proc.stdout, proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("route", ["custom_channels", "channel_alias", "mirrored_file"])
def test_a_lock_through_a_mirror_names_the_channel_and_lints_checks_and_diffs_as_the_channel(
        tmp_path: Path, mirror: Mirror, route: str) -> None:
    canonical, _cenv, _err = _lock_through(tmp_path, "mirrored_channels", mirror)
    assert _urls(canonical) == {f"{CANONICAL}/{HOST}/python-3.11.0-h0_0.tar.bz2",
                                f"{CANONICAL}/noarch/alpha-1.0-h0_0.tar.bz2", f"{CANONICAL}/noarch/beta-2.0-h0_0.tar.bz2"}
    work, env, stderr = _lock_through(tmp_path, route, mirror)
    served = {"custom_channels": mirror.folder.as_uri(), "channel_alias": f"{mirror.url}/conda-forge",
              "mirrored_file": mirror.folder.as_uri()}[route]
    setting = "mirrored_channels" if route == "mirrored_file" else route
    assert f"mirror: conda-forge from {served} (~/.condarc: {setting})" in stderr.splitlines(), stderr
    lock = _lock(work)
    # the canonical name for whoever has no mirror; the mirror's URLs only in the url: fields conda-lock requires
    assert [c["url"] for c in lock["metadata"]["channels"]] == ["conda-forge"]
    assert lock["metadata"]["custom_metadata"]["envguard.mirror.conda-forge"] == served
    assert _urls(work) == {u.replace(CANONICAL, served) for u in _urls(canonical)}

    colleague = _env(tmp_path / "colleague", tmp_path / "cache-colleague")  # no channel configuration at all
    _lints_clean(work, env, colleague)
    proc = envguard("lock", "--check", env=colleague, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = envguard("diff", str(canonical / "conda-lock.yml"), "conda-lock.yml", env=colleague, cwd=work)
    assert proc.returncode == 0 and "no differences" in proc.stdout, proc.stdout + proc.stderr

    proc = envguard("create", "-p", str(tmp_path / "env"), "--no-check", env=env, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = envguard("check", "-p", str(tmp_path / "env"), "--no-smoke", env=env, cwd=work)
    assert proc.returncode == 0 and "no findings" in proc.stdout, proc.stdout + proc.stderr
    proc = envguard("diff", "conda-lock.yml", str(tmp_path / "env"), env=colleague, cwd=work)
    assert proc.returncode == 0 and "no differences" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.slow
def test_pixi_mirrors_keep_the_canonical_urls_and_lint_clean(tmp_path: Path, mirror: Mirror) -> None:
    work, env, stderr = _lock_through(tmp_path, "pixi", mirror)
    assert f"mirror: conda-forge from {mirror.url}/conda-forge ({work / '.pixi' / 'config.toml'}: mirrors)" in stderr
    assert all(u.startswith(CANONICAL + "/") for u in _urls(work))
    assert "envguard.mirror.conda-forge" not in _lock(work)["metadata"]["custom_metadata"]  # nothing to record
    _lints_clean(work, env, _env(tmp_path / "colleague", tmp_path / "cache-colleague"))


@pytest.mark.slow
def test_a_changed_package_through_a_mirror_is_a_version_change_not_a_channel_change(
        tmp_path: Path, mirror: Mirror) -> None:
    """The other package lists of a diff: only what moved, never `channel file:///... -> conda-forge`."""
    work, env, _err = _lock_through(tmp_path, "custom_channels", mirror)
    newer = channels.copy_channel(mirror.folder, tmp_path / "newer" / "conda-forge")
    channels.build_package(newer, "beta", "2.1", noarch="generic", files={"share/beta.txt": "beta 2.1"})
    channels.index_channel(newer)
    home = tmp_path / "home-newer"
    home.mkdir()
    (home / ".condarc").write_text(f"mirrored_channels:\n  conda-forge: [{newer.as_uri()}]\n")
    other = _project(tmp_path / "newer-work")
    proc = envguard("lock", env=_env(home, tmp_path / "cache-newer"), cwd=other)
    assert proc.returncode == 0, proc.stderr
    proc = envguard("diff", "--format", "json", "conda-lock.yml", str(other / "conda-lock.yml"),
                    env=_env(tmp_path / "colleague", tmp_path / "cache-colleague"), cwd=work)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    changes = [c for pd in json.loads(proc.stdout)["platforms"] for c in pd["changes"]]
    assert [(c["key"], c["kinds"]) for c in changes] == [("beta", ["upgraded"])], changes
    assert (changes[0]["old"]["channel"], changes[0]["new"]["channel"]) == ("conda-forge", "conda-forge")


@pytest.mark.slow
def test_a_file_mirror_serves_create_of_a_lock_with_the_canonical_urls(tmp_path: Path, mirror: Mirror) -> None:
    """rattler's client refuses file:// ("URL scheme is not allowed"): the folder is read in the channel's place
    for the solve and for create's archives, and conda-meta keeps the lock's URLs."""
    canonical, _cenv, _err = _lock_through(tmp_path, "mirrored_channels", mirror)
    home = tmp_path / "home-file"
    home.mkdir()
    (home / ".condarc").write_text(f"mirrored_channels:\n  {CANONICAL}: [{mirror.folder.as_uri()}]\n")
    env = _env(home, tmp_path / "cache-file")
    proc = envguard("create", "-p", str(tmp_path / "env"), "--no-check", env=env, cwd=canonical)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"mirror: 3 archives from {mirror.folder.as_uri()} (~/.condarc: mirrored_channels)" in proc.stderr
    assert (tmp_path / "env" / "share" / "beta.txt").read_text() == "beta"
    meta = next((tmp_path / "env" / "conda-meta").glob("beta-2.0-*.json")).read_text()
    assert f"{CANONICAL}/noarch/beta-2.0-h0_0.tar.bz2" in meta and "file://" not in meta


@pytest.mark.slow
@pytest.mark.parametrize(("mirrors", "words"), [
    ("[FOLDER, https://m.example/cf]", "mix a file:// folder"),
    ("[ftp://m.example/cf]", "not ftp"),
])
def test_a_mirror_rattler_cannot_read_is_refused_in_one_line(tmp_path: Path, mirror: Mirror, mirrors: str,
                                                             words: str) -> None:
    work = _project(tmp_path / "work")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".condarc").write_text(f"mirrored_channels:\n  conda-forge: {mirrors.replace('FOLDER', mirror.folder.as_uri())}\n")
    proc = envguard("lock", env=_env(home, tmp_path / "cache"), cwd=work)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.splitlines()[-1]
    assert ": ~/.condarc: mirrored_channels: " in line and words in line and "(fix: " in line, line
    assert "Traceback" not in proc.stderr and "GatewayError" not in proc.stderr
    assert not (work / "conda-lock.yml").exists()


def _hand_lock(tmp_path: Path, custom: str) -> Path:
    """A conda-lock v1 file of one package from a URL that is not conda-forge's, listing conda-forge."""
    lock = tmp_path / "conda-lock.yml"
    lock.write_text(f"""version: 1
metadata:
  content_hash:
    linux-64: x
  channels:
  - url: conda-forge
    used_env_vars: []
  platforms:
  - linux-64
  sources:
  - environment.yml
  custom_metadata:
{custom}
package:
- name: zlib
  version: 1.3.1
  manager: conda
  platform: linux-64
  dependencies: {{}}
  url: https://mirror.example/cf/linux-64/zlib-1.3.1-h0_0.conda
  hash:
    md5: {"0" * 32}
    sha256: {"1" * 64}
  category: main
  optional: false
""")
    return lock


def test_the_recorded_mirror_names_only_a_listed_channel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record says which listed channel a URL serves; it never makes an unlisted channel a listed one."""
    from envguard.lint import lint_paths

    for k in [k for k in os.environ if k.startswith(("CONDA", "PIXI"))] + ["ENVGUARD_CHANNEL_ALIAS"]:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    lock = _hand_lock(tmp_path, "    envguard.mirror.conda-forge: https://mirror.example/cf")
    assert [f.code for f in lint_paths([lock]).findings] == []
    lock = _hand_lock(tmp_path, "    envguard.mirror.bioconda: https://mirror.example/cf")
    assert sorted(f.code for f in lint_paths([lock]).findings) == ["EG130", "EG152"]
    lock = _hand_lock(tmp_path, "    envguard.cuda: none")  # nothing recorded, nothing configured
    assert sorted(f.code for f in lint_paths([lock]).findings) == ["EG130", "EG152"]
    # this machine's configuration answers for a lock that records nothing (one written by conda-lock)
    (tmp_path / ".condarc").write_text("custom_channels:\n  conda-forge: https://mirror.example/\n")
    lock.write_text(lock.read_text().replace("https://mirror.example/cf/", "https://mirror.example/conda-forge/"))
    assert [f.code for f in lint_paths([lock]).findings] == []


def test_what_a_lock_records_comes_from_the_one_route(tmp_path: Path) -> None:
    home = tmp_path
    (home / ".condarc").write_text("channel_alias: https://alias.example/conda/\n"
                                   "custom_channels:\n  pytorch: https://user:secret@pt.example/\n"
                                   "mirrored_channels:\n  bioconda: [file:///srv/bio]\n"
                                   "  https://conda.anaconda.org/nvidia: [https://nv.example/nvidia]\n")
    cfg = condaconfig.load({"HOME": str(home)}, home, home)
    assert cfg.locked_from(["conda-forge", "pytorch", "file:///local/ch", "https://conda.anaconda.org/nvidia"]) == {
        "conda-forge": "https://alias.example/conda/conda-forge", "pytorch": "https://***@pt.example/pytorch"}
    # a file:// mirror is read in the channel's place (rattler's client cannot fetch it) and recorded as such
    assert cfg.resolve("bioconda").local == "file:///srv/bio"
    assert cfg.expand(["bioconda"]) == ["file:///srv/bio"]
    assert cfg.locked_from(["bioconda"]) == {"bioconda": "file:///srv/bio"}
    assert "https://alias.example/conda/bioconda/" not in cfg.mirror_map()
    assert cfg.local_url("https://alias.example/conda/bioconda/noarch/x-1-0.conda") == \
        "file:///srv/bio/noarch/x-1-0.conda"
    assert cfg.mirror_note(["bioconda", "pytorch"]) == ("mirror: bioconda from file:///srv/bio (~/.condarc: "
                                                       "mirrored_channels); pytorch from https://***@pt.example/pytorch "
                                                       "(~/.condarc: custom_channels)")
    # the same route read backwards: which listed channel a package URL of the lock is
    assert condaconfig.lock_channel_names(["conda-forge", "bioconda"], {}, {
        "https://alias.example/conda/conda-forge", "file:///srv/bio", "https://other.example/x"}, cfg) == {
        "https://alias.example/conda/conda-forge": "conda-forge", "file:///srv/bio": "bioconda"}
    bare = tmp_path / "bare"
    bare.mkdir()
    assert condaconfig.load({"HOME": str(bare)}, bare, bare).locked_from(["conda-forge", "defaults"]) == {}
    shutil.rmtree(bare)


def test_init_and_lint_read_a_channel_from_its_file_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """channelfacts (init's and lint's records) takes the same route as the solve: the folder, not the URL."""
    from envguard import channelfacts

    for k in [k for k in os.environ if k.startswith(("CONDA", "PIXI"))] + ["ENVGUARD_CHANNEL_ALIAS"]:
        monkeypatch.delenv(k, raising=False)
    (tmp_path / ".condarc").write_text(f"mirrored_channels:\n  conda-forge: [{(tmp_path / 'cf').as_uri()}]\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert channelfacts.channel_url("conda-forge") == (tmp_path / "cf").as_uri()
    assert channelfacts.channel_url("bioconda") == "https://conda.anaconda.org/bioconda"
