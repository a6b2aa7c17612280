"""Tests of the test channel library itself (tests/support/channels.py): real rattler solves and installs."""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import rattler
import rattler.package_streaming
from rattler import BuildString, GenericVirtualPackage, PackageName, Version
from support import channels
from support.channel_fixtures import ChannelFactory
from support.channels import HOST_PY
from support.require import require

HOST = channels.host_platform()
CAN_RUN_HOST_PYTHON = HOST in ("linux-64", "osx-arm64")


def _virtual(platform: str, cuda: str | None) -> list[GenericVirtualPackage]:
    """The virtual packages conda-lock assumes by default for ``platform`` (plus an optional __cuda)."""
    pkgs: list[tuple[str, str, str]] = []
    if platform.startswith("linux"):
        pkgs += [("__unix", "0", "0"), ("__linux", "5.10", "0"), ("__glibc", "2.28", "0"),
                 ("__archspec", "1", "x86_64")]
    elif platform.startswith("osx"):
        pkgs += [("__unix", "0", "0"), ("__osx", "11.0", "0"), ("__archspec", "1", "arm64")]
    else:
        pkgs += [("__win", "0", "0"), ("__archspec", "1", "x86_64")]
    if cuda:
        pkgs.append(("__cuda", cuda, "0"))
    return [GenericVirtualPackage(PackageName(n), Version(v), BuildString(b)) for n, v, b in pkgs]


def _solve(
    channel: str, specs: list[str], platform: str, cuda: str | None, cache: Path
) -> dict[str, rattler.RepoDataRecord]:
    records = channels.run(rattler.solve(
        [channel], specs, gateway=rattler.Gateway(cache_dir=cache), platforms=[platform, "noarch"],
        virtual_packages=_virtual(platform, cuda),
    ))
    return {r.name.normalized: r for r in records}


def _install(records: list[rattler.RepoDataRecord], prefix: Path, cache: Path) -> None:
    channels.run(rattler.install(records, prefix, cache_dir=cache, show_progress=False, execute_link_scripts=False))


ENV_SPECS = [f"python {HOST_PY}.*", "pytorch 2.13.*", "pip", "egtool", "egplaceholder", "eglink"]


# ---------------------------------------------------------------------------------------------------- packages

def _tar_members(path: Path) -> dict[str, tarfile.TarInfo | bytes]:
    out: dict[str, tarfile.TarInfo | bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(bz2.decompress(path.read_bytes()))) as tar:
        for m in tar.getmembers():
            out[m.name] = tar.extractfile(m).read() if m.isfile() else m  # type: ignore[union-attr]
    return out


def test_build_package_writes_metadata_and_is_reproducible(tmp_path: Path) -> None:
    kwargs = dict(
        subdir="linux-64", depends=["python >=3.11"], constrains=["foo <2"],
        files={"bin/tool": "#!/bin/sh\necho hi\n", "etc/x.conf": f"p={channels.PLACEHOLDER}\n"},
        symlinks={"bin/tool-link": "tool"},
    )
    pkg = channels.build_package(tmp_path / "a", "demo", "1.0", "h0_0", **kwargs)
    again = channels.build_package(tmp_path / "b", "demo", "1.0", "h0_0", **kwargs)
    salted = channels.build_package(tmp_path / "c", "demo", "1.0", "h0_0", extra_bytes=b"x", **kwargs)
    assert pkg == tmp_path / "a" / "linux-64" / "demo-1.0-h0_0.tar.bz2"
    assert pkg.read_bytes() == again.read_bytes()
    assert pkg.read_bytes() != salted.read_bytes()

    members = _tar_members(pkg)
    index = json.loads(members["info/index.json"])  # type: ignore[arg-type]
    assert (index["name"], index["version"], index["build"], index["subdir"]) == ("demo", "1.0", "h0_0", "linux-64")
    assert index["depends"] == ["python >=3.11"] and index["constrains"] == ["foo <2"]
    assert (index["platform"], index["arch"]) == ("linux", "x86_64")
    paths = {p["_path"]: p for p in json.loads(members["info/paths.json"])["paths"]}  # type: ignore[arg-type]
    assert paths["bin/tool"]["sha256"] == hashlib.sha256(b"#!/bin/sh\necho hi\n").hexdigest()
    assert paths["etc/x.conf"]["prefix_placeholder"] == channels.PLACEHOLDER
    assert paths["etc/x.conf"]["file_mode"] == "text"
    assert "prefix_placeholder" not in paths["bin/tool"]
    assert paths["bin/tool-link"]["path_type"] == "softlink"
    link = members["bin/tool-link"]
    assert isinstance(link, tarfile.TarInfo) and link.issym() and link.linkname == "tool"


def test_conda_format_is_readable_by_rattler(tmp_path: Path) -> None:
    big = os.urandom(300_000)  # more than two raw zstd blocks
    pkg = channels.build_package(
        tmp_path / "ch", "demo", "1.0", "h0_0", noarch="generic", fmt="conda",
        files={"share/demo/big.bin": big, "share/demo/a.txt": "a\n"},
    )
    assert pkg.suffix == ".conda"
    with zipfile.ZipFile(pkg) as zf:
        assert json.loads(zf.read("metadata.json")) == {"conda_pkg_format_version": 2}
        assert {"pkg-demo-1.0-h0_0.tar.zst", "info-demo-1.0-h0_0.tar.zst"} <= set(zf.namelist())
    rattler.package_streaming.extract(pkg, tmp_path / "out")
    assert (tmp_path / "out" / "share" / "demo" / "big.bin").read_bytes() == big
    assert json.loads((tmp_path / "out" / "info" / "index.json").read_text())["noarch"] == "generic"


def test_make_channel_indexes_all_subdirs(tmp_path: Path) -> None:
    chan = channels.make_channel(tmp_path / "ch", [
        channels.PackageSpec("a", "1.0", subdir="linux-64"),
        {"name": "b", "version": "2.0", "build": "h1_1", "noarch": "generic", "fmt": "conda"},
    ])
    linux = json.loads((chan / "linux-64" / "repodata.json").read_text())
    noarch = json.loads((chan / "noarch" / "repodata.json").read_text())
    assert list(linux["packages"]) == ["a-1.0-h0_0.tar.bz2"]
    assert list(noarch["packages.conda"]) == ["b-2.0-h1_1.conda"]
    for sub in channels.SUBDIRS:
        assert (chan / sub / "repodata.json").is_file()
    channels.strip_indexed_timestamps(chan)
    assert "indexed_timestamp" not in json.loads((chan / "linux-64" / "repodata.json").read_text())["packages"][
        "a-1.0-h0_0.tar.bz2"]


@pytest.mark.parametrize("fmt", ["tar.bz2", "conda"])
def test_tampered_package_keeps_old_repodata(channel_factory: ChannelFactory, fmt: str, tmp_path: Path) -> None:
    chan = channel_factory([
        channels.PackageSpec("t", "1.0", noarch="generic", fmt=fmt, files={"share/t.txt": "good\n"})])
    pkg = chan / "noarch" / f"t-1.0-h0_0.{fmt}"
    key = "packages" if fmt == "tar.bz2" else "packages.conda"
    listed = json.loads((chan / "noarch" / "repodata.json").read_text())[key][pkg.name]["sha256"]
    assert listed == hashlib.sha256(pkg.read_bytes()).hexdigest()
    assert "indexed_timestamp" not in json.loads((chan / "noarch" / "repodata.json").read_text())[key][pkg.name]

    old, new = channel_factory.tamper(pkg, files={"share/t.txt": "evil\n"})
    assert old == listed != new == hashlib.sha256(pkg.read_bytes()).hexdigest()
    assert json.loads((chan / "noarch" / "repodata.json").read_text())[key][pkg.name]["sha256"] == listed
    rattler.package_streaming.extract(pkg, tmp_path / "x")  # still a valid archive, with the new content
    assert (tmp_path / "x" / "share" / "t.txt").read_text() == "evil\n"


def test_channel_factory_copies_the_standard_channel(channel_factory: ChannelFactory, test_channel: Path) -> None:
    copy = channel_factory.copy(test_channel)
    assert copy != test_channel
    assert (copy / "noarch" / "repodata.json").read_bytes() == (test_channel / "noarch" / "repodata.json").read_bytes()


# ---------------------------------------------------------------------------------------------------- solving

@pytest.mark.parametrize("platform", channels.PLATFORMS)
def test_standard_channel_solves_on_every_platform(channel_url: str, platform: str, tmp_path: Path) -> None:
    records = _solve(channel_url, ENV_SPECS, platform, None, tmp_path / "cache")
    assert {"python", "pytorch", "numpy", "pip", "egtool", "egplaceholder", "eglink"} <= set(records)
    assert str(records["pytorch"].build).startswith("cpu_")
    assert str(records["python"].version).startswith(f"{HOST_PY}.")
    assert records["python"].subdir == platform and records["egtool"].subdir == "noarch"


@pytest.mark.parametrize(("platform", "cuda", "extra", "build_prefix", "cuda_version"), [
    ("linux-64", None, [], "cpu_", None),
    # cuda-version constrains __cuda to the major line only (as on conda-forge): a 12.6 driver takes the newest
    # CUDA 12 build; cuda-version picks the line
    ("linux-64", "12.6", [], "cuda128_", "12.8"),
    ("linux-64", "12.0", ["cuda-version 12.6.*"], "cuda126_", "12.6"),
    ("linux-64", "12.8", [], "cuda128_", "12.8"),
    # win-64 has the cuda126 build only; it runs on the newest 12.x libraries (real win-64 locks show cuda128
    # builds beside cuda-version 12.9)
    ("win-64", "12.6", [], "cuda126_", "12.8"),
    ("osx-arm64", None, [], "cpu_", None),
])
def test_cuda_build_only_with_cuda_virtual_package(
    channel_url: str, tmp_path: Path, platform: str, cuda: str | None, extra: list[str], build_prefix: str,
    cuda_version: str | None
) -> None:
    records = _solve(channel_url, [f"python {HOST_PY}.*", "pytorch 2.13.*", *extra], platform, cuda, tmp_path / "cache")
    assert str(records["pytorch"].build).startswith(build_prefix)
    assert (str(records["cuda-version"].version) if "cuda-version" in records else None) == cuda_version


def test_cuda_version_constrains_the_driver(channel_url: str, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="cuda"):
        _solve(channel_url, ["pytorch 2.13.*", "cuda-version 13.0.*"], "linux-64", "12.6", tmp_path / "cache")
    with pytest.raises(Exception, match="cuda"):  # a CUDA 12 build needs a CUDA 12 driver
        _solve(channel_url, ["pytorch 2.13.* cuda*"], "linux-64", "11.4", tmp_path / "cache")
    # ... of any minor: the major line is all cuda-version asks of the driver
    records = _solve(channel_url, ["pytorch 2.13.*", "cuda-version 12.8.*"], "linux-64", "12.0", tmp_path / "cache")
    assert str(records["pytorch"].build).startswith("cuda128_")
    older = _solve(channel_url, ["pytorch 2.12.*"], "linux-64", None, tmp_path / "cache")
    assert str(older["pytorch"].version) == "2.12.0"


@pytest.mark.slow
@pytest.mark.skipif(not CAN_RUN_HOST_PYTHON, reason="the venv python package works on Linux/macOS hosts only")
def test_python312_package_is_a_working_312_env(standard_channel: channels.StandardChannel, tmp_path: Path) -> None:
    require(standard_channel.python312_available, "no Python 3.12 interpreter on this machine (pyenv)")
    records = _solve(standard_channel.url, ["python 3.12.*"], HOST, None, tmp_path / "cache")
    assert str(records["python"].version) == standard_channel.python312_version
    prefix = tmp_path / "env312"
    _install(list(records.values()), prefix, tmp_path / "pkgs")
    out = subprocess.run([str(prefix / "bin" / "python"), "-c", "import sys; print(sys.version_info[:2], sys.prefix)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"(3, 12) {prefix}", out.stderr


# ---------------------------------------------------------------------------------------------------- installing

PROBE = r"""
import importlib.metadata, json, sys
import numpy, torch
print(json.dumps({
    "prefix": sys.prefix, "torch_file": torch.__file__, "torch": torch.__version__,
    "torch_dist": importlib.metadata.version("torch"), "numpy": numpy.__version__,
    "tensor": int(torch.arange(4).sum()),
}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not CAN_RUN_HOST_PYTHON, reason="the venv python package works on Linux/macOS hosts only")
def test_installed_env_runs_real_torch(standard_channel: channels.StandardChannel, tmp_path: Path) -> None:
    require(standard_channel.real_torch_version is not None, "torch is not installed in the test environment")
    records = _solve(standard_channel.url, ENV_SPECS, HOST, None, tmp_path / "cache")
    prefix = tmp_path / "env"
    _install(list(records.values()), prefix, tmp_path / "pkgs")

    python = prefix / "bin" / "python"
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    result = subprocess.run([str(python), str(probe)], capture_output=True, text=True, timeout=120, env={
        "PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")})
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert Path(facts["prefix"]) == prefix
    assert facts["torch"] == standard_channel.real_torch_version
    assert facts["torch_dist"] == "2.13.0"  # the conda record's dist-info wins in importlib.metadata
    assert facts["tensor"] == 6
    assert not Path(facts["torch_file"]).is_relative_to(prefix / "lib")  # real torch, through the .pth shim

    # The conda record owns its dist-info: conda-meta lists METADATA.
    meta = json.loads(next((prefix / "conda-meta").glob("pytorch-2.13.0-*.json")).read_text())
    assert f"lib/python{HOST_PY}/site-packages/torch-2.13.0.dist-info/METADATA" in meta["files"]

    tool = subprocess.run([str(prefix / "bin" / "egtool")], capture_output=True, text=True, timeout=60)
    assert tool.returncode == 0, tool.stderr
    assert tool.stdout.strip() == f"egtool {prefix}"

    assert (prefix / "etc" / "egplaceholder.conf").read_text() == f"prefix={prefix}\n"
    assert channels.PLACEHOLDER not in (prefix / "bin" / "egplaceholder").read_text()
    assert os.access(prefix / "bin" / "egplaceholder", os.X_OK)

    link = prefix / "share" / "eglink" / "link.txt"
    assert link.is_symlink() and link.read_text() == "eglink target\n"
    assert (prefix / "bin" / "eglink-data").read_text() == "eglink target\n"

    pip = subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, text=True, timeout=60)
    assert pip.returncode == 0 and str(standard_channel.pip_version) in pip.stdout, pip.stderr


@pytest.mark.slow
@pytest.mark.skipif(not CAN_RUN_HOST_PYTHON, reason="the venv python package works on Linux/macOS hosts only")
def test_pip_installs_into_the_env_over_conda(
    standard_channel: channels.StandardChannel, pypi_index: channels.PypiIndex, tmp_path: Path
) -> None:
    records = _solve(standard_channel.url, [f"python {HOST_PY}.*", "pip"], HOST, None, tmp_path / "cache")
    prefix = tmp_path / "env"
    _install(list(records.values()), prefix, tmp_path / "pkgs")
    result = subprocess.run(
        [str(prefix / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
         "--index-url", pypi_index.url, "egdemo-b"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )
    assert result.returncode == 0, result.stderr
    site = prefix / "lib" / f"python{HOST_PY}" / "site-packages"
    assert (site / "egdemo_a-2.0.dist-info" / "INSTALLER").read_text().strip() == "pip"
    assert (site / "egdemo_b" / "__init__.py").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not CAN_RUN_HOST_PYTHON, reason="the venv python package works on Linux/macOS hosts only")
def test_pip_wheel_can_shadow_the_conda_torch(standard_channel: channels.StandardChannel, tmp_path: Path) -> None:
    """The pip-over-conda scenario later checks rely on: a pip 'torch' replaces conda's dist-info and module."""
    records = _solve(standard_channel.url, [f"python {HOST_PY}.*", "pip", "pytorch 2.13.*"], HOST, None, tmp_path / "c")
    prefix = tmp_path / "env"
    _install(list(records.values()), prefix, tmp_path / "pkgs")
    wheel = channels.build_wheel(tmp_path / "w", "torch", "9.9.9",
                                 files={"torch/__init__.py": "__version__ = '9.9.9'\n"})
    python = str(prefix / "bin" / "python")
    result = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps", "--no-cache-dir",
                             "--disable-pip-version-check", str(wheel)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
    assert result.returncode == 0, result.stderr
    site = prefix / "lib" / f"python{HOST_PY}" / "site-packages"
    assert not (site / "torch-2.13.0.dist-info").exists()  # pip uninstalled conda's record first
    assert (site / "torch-9.9.9.dist-info" / "INSTALLER").read_text().strip() == "pip"
    out = subprocess.run([python, "-c", "import torch; print(torch.__version__, torch.__file__)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["9.9.9", str(site / "torch" / "__init__.py")], out.stderr


@pytest.mark.slow
def test_http_channel_serves_repodata_and_packages(
    http_channel: str, http_channel_server: channels.HttpServer, tmp_path: Path
) -> None:
    with urllib.request.urlopen(f"{http_channel}/noarch/repodata.json") as resp:
        repodata = json.load(resp)
    assert "eglink-1.0.0-h0_0.tar.bz2" in repodata["packages"]
    records = _solve(http_channel, ["eglink"], "linux-64", None, tmp_path / "cache")
    assert records["eglink"].url.startswith("http://127.0.0.1:")
    _install([records["eglink"]], tmp_path / "env", tmp_path / "pkgs")
    assert (tmp_path / "env" / "share" / "eglink" / "target.txt").is_file()
    assert "/noarch/eglink-1.0.0-h0_0.tar.bz2" in http_channel_server.requests


def test_http_server_auth_and_token(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("ok")
    with channels.serve_directory(tmp_path, auth=("user", "s3cret"), token="tok") as server:
        assert server.url.endswith("/t/tok")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"{server.url}/f.txt")
        assert err.value.code == 401
        request = urllib.request.Request(f"{server.url}/f.txt", headers={"Authorization": "Basic dXNlcjpzM2NyZXQ="})
        with urllib.request.urlopen(request) as resp:
            assert resp.read() == b"ok"
        request = urllib.request.Request(f"{server.base_url}/f.txt", headers=request.headers)
        with pytest.raises(urllib.error.HTTPError):  # without the token path
            urllib.request.urlopen(request)


# ---------------------------------------------------------------------------------------------------- PyPI index

def _pip_download(index_url: str, dest: Path, *reqs: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-cache-dir", "--disable-pip-version-check", "--index-url",
         index_url, "--dest", str(dest), *reqs],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )


@pytest.mark.slow
def test_pypi_index_serves_hashed_wheels(pypi_index: channels.PypiIndex, tmp_path: Path) -> None:
    page = urllib.request.urlopen(f"{pypi_index.url}/egdemo-a/").read().decode()
    assert f"#sha256={pypi_index.sha256['egdemo_a-2.0-py3-none-any.whl']}" in page
    result = _pip_download(pypi_index.url, tmp_path / "dl", "egdemo-b")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "dl").iterdir()) == [
        "egdemo_a-2.0-py3-none-any.whl", "egdemo_b-1.0-py3-none-any.whl"]
    with zipfile.ZipFile(tmp_path / "dl" / "egdemo_b-1.0-py3-none-any.whl") as zf:
        assert "Requires-Dist: egdemo-a>=1.0" in zf.read("egdemo_b-1.0.dist-info/METADATA").decode()


@pytest.mark.slow
def test_pypi_index_wrong_hash_is_refused(tmp_path: Path) -> None:
    wheel = channels.build_wheel(tmp_path / "w", "egdemo-c", "1.0")
    index = channels.build_pypi_index(tmp_path / "idx", [wheel], bad_hash_for=[wheel.name])
    with channels.serve_directory(index.root) as server:
        result = _pip_download(f"{server.url}/simple", tmp_path / "dl", "egdemo-c")
    assert result.returncode != 0
    assert "hash" in result.stderr.lower()


# ---------------------------------------------------------------------------------------------------- benchmarks

def test_generated_channel_and_repodata_solve(tmp_path: Path) -> None:
    gen = channels.generate_channel(tmp_path / "gen", 60, platforms=("linux-64", "win-64"))
    for platform in gen.platforms:
        records = _solve(gen.url, gen.root_specs, platform, None, tmp_path / "cache")
        assert set(gen.root_specs) <= set(records) and len(records) > len(gen.root_specs)
    n_files = sum(1 for _ in (tmp_path / "gen").glob("*/*.tar.bz2"))
    assert n_files >= 60

    big = channels.generate_repodata(tmp_path / "big", 500)
    repodata = json.loads((big / "linux-64" / "repodata.json").read_text())
    assert len(repodata["packages"]) == 500
    names = sorted({r["name"] for r in repodata["packages"].values()})
    records = _solve(channels.channel_url(big), names[-3:], "linux-64", None, tmp_path / "cache")
    assert set(names[-3:]) <= set(records)
