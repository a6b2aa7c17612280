"""envguard.prefix on real prefixes: installed by rattler from the test channel, altered by real pip."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest
from support import channels, check_envs
from support.channels import HOST_PY
from support.lanes import builds_environment

from envguard.model import Package
from envguard.prefix import import_origins, inspect_prefix, installed_packages, verify_files

BASE = [f"python {HOST_PY}.*", "pytorch 2.13.0 *cpu*", "pip", "egtool", "eglink", "egplaceholder"]


@pytest.fixture
@builds_environment
def env(channel_url: str, session_tmp: Path, tmp_path: Path) -> Path:
    prefix, _ = check_envs.make_env(channel_url, BASE, tmp_path / "env", session_tmp / "check-pkgs")
    return prefix


def test_installed_packages_reads_conda_meta(env: Path, channel_url: str) -> None:
    pkgs = installed_packages(env, platform="linux-64")
    by_name = {p.name: p for p in pkgs}
    assert set(by_name) == {"python", "pytorch", "numpy", "pip", "egtool", "eglink", "egplaceholder"}
    torch = by_name["pytorch"]
    assert torch.manager == "conda" and torch.version == "2.13.0" and torch.build.startswith("cpu_generic")
    assert torch.key == "torch" and torch.platform == "linux-64"
    assert torch.channel == channel_url.rstrip("/")
    assert len(torch.sha256) == 64 and torch.url.endswith(".tar.bz2")
    # conda owns numpy's and torch's dist-infos: they are not listed a second time as pip packages
    assert all(p.manager == "conda" for p in pkgs)


def test_ownership_conda_pip_unknown(env: Path, tmp_path: Path) -> None:
    wheel = channels.build_wheel(tmp_path / "wheels", "egleaf", "1.0")
    check_envs.pip_install(env, wheel)
    sp = env / "lib" / f"python{HOST_PY}" / "site-packages"
    # a dist-info no installer claims (a hand copy, no INSTALLER)
    legacy = sp / "handmade-0.1.dist-info"
    legacy.mkdir()
    (legacy / "METADATA").write_text("Metadata-Version: 2.1\nName: handmade\nVersion: 0.1\n\nbody: text\n")
    info = inspect_prefix(env)
    owners = {d.name: (d.owner, d.conda_record) for d in info.dists}
    assert owners["torch"] == ("conda", "pytorch")
    assert owners["numpy"] == ("conda", "numpy")
    assert owners["egleaf"] == ("pip", None)
    assert owners["handmade"] == ("unknown", None)
    pkgs = {(p.manager, p.name, p.version) for p in info.packages("linux-64")}
    assert ("pip", "egleaf", "1.0") in pkgs and ("pip", "handmade", "0.1") in pkgs
    assert ("pip", "torch", "2.13.0") not in pkgs  # conda's own dist-info is not a pip package
    assert info.overwritten == []


def test_pip_over_conda_dist_info_is_detected_as_overwritten(env: Path, tmp_path: Path) -> None:
    wheel = channels.build_wheel(tmp_path / "wheels", "torch", "2.13.1")
    check_envs.pip_install(env, wheel)  # pip uninstalls conda's torch-2.13.0.dist-info first
    info = inspect_prefix(env)
    torch_dists = [d for d in info.dists if d.key == "torch"]
    assert [(d.version, d.owner) for d in torch_dists] == [("2.13.1", "pip")]
    assert [(o.package, o.metadata_path.rsplit("/", 2)[-2]) for o in info.overwritten] == [
        ("pytorch", "torch-2.13.0.dist-info")]
    assert Package("torch", "2.13.1", "pip", platform="linux-64") in info.packages("linux-64")


def test_verify_files_size_and_sha256(env: Path) -> None:
    info = inspect_prefix(env)
    assert verify_files(info) == [] and verify_files(info, deep=True) == []
    init = env / f"lib/python{HOST_PY}/site-packages/egtool/__init__.py"
    data = init.read_bytes()
    check_envs.replace_file(init, data.replace(b"print", b"PRINT"))  # same size, other bytes
    (env / "share/eglink/target.txt").unlink()
    problems = verify_files(inspect_prefix(env))
    assert [(p.path, p.package, p.problem) for p in problems] == [("share/eglink/target.txt", "eglink", "missing")]
    deep = {(p.path, p.package, p.problem) for p in verify_files(inspect_prefix(env), deep=True, workers=2)}
    assert deep == {("share/eglink/target.txt", "eglink", "missing"),
                    (f"lib/python{HOST_PY}/site-packages/egtool/__init__.py", "egtool", "sha256")}
    # A file whose prefix placeholder was rewritten at install is compared with its in-prefix
    # size and sha256 (rattler records both), so edits to it are caught too.
    conf = env / "etc/egplaceholder.conf"
    assert str(env).encode() in conf.read_bytes()
    check_envs.replace_file(conf, conf.read_bytes().replace(str(env).encode(), b"/elsewhere"))
    assert ("etc/egplaceholder.conf", "egplaceholder", "size") in {
        (p.path, p.package, p.problem) for p in verify_files(inspect_prefix(env))}
    bad = next(p for p in verify_files(inspect_prefix(env), deep=True) if p.problem == "sha256")
    assert bad.actual == hashlib.sha256(data.replace(b"print", b"PRINT")).hexdigest() != bad.expected


def test_windows_layout_and_unreadable_record(tmp_path: Path) -> None:
    prefix = tmp_path / "winenv"
    sp = prefix / "Lib" / "site-packages" / "egwin-2.0.dist-info"
    sp.mkdir(parents=True)
    (sp / "METADATA").write_text("Name: egwin\nVersion: 2.0\n")
    (sp / "INSTALLER").write_text("uv\n")
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta" / "broken-1-0.json").write_text("{not json")
    info = inspect_prefix(prefix)
    assert info.site_packages == ["Lib/site-packages"]
    assert [(d.name, d.owner) for d in info.dists] == [("egwin", "pip")]
    assert [b[0] for b in info.bad_records] == ["broken-1-0.json"]


def test_import_origins_runs_the_env_interpreter(env: Path) -> None:
    origins = import_origins(env / "bin" / "python")
    assert origins["_python"]["prefix"] == str(env)
    assert origins["torch"]["origin"].endswith(os.path.join("torch", "__init__.py"))
    assert origins["numpy"]["origin"] is not None


def test_inspect_is_read_only(env: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in env.rglob("*") if not p.is_symlink()}
    info = inspect_prefix(env)
    verify_files(info, deep=True)
    after = {p: p.stat().st_mtime_ns for p in env.rglob("*") if not p.is_symlink()}
    assert before == after


def test_host_venv_is_readable() -> None:
    info = inspect_prefix(Path(sys.prefix))
    assert not info.is_conda and info.python_version
    assert any(d.key == "pytest" for d in info.dists)
