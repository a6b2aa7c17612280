"""`envguard export` on real prefixes: built by `envguard create` from real locks of the test channels, with
real pip installs from the local PEP 503 index on top, and the test virtualenv itself (torch from pip).

The round trip is the whole workflow as real processes: create from a lock, export, diff the two locks,
`lock --check` the exported pair, create from the exported lock, `check --deep` the result.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support import channels
from support.channels import HOST_PY, HOST_PY_TAG
from support.create_fixtures import BASE_DEPS, envguard_run, make_lock, write_env
from support.require import require

from envguard import cli
from envguard.export import CODES, export
from envguard.lock import read_lock

pytestmark = pytest.mark.slow  # exports real created environments

PLAT = channels.host_platform()


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.run(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def codes(findings) -> set[str]:
    return {f.code for f in findings}


def spec_of(directory: Path) -> dict:
    return yaml.safe_load((directory / "environment.yml").read_text())


def pip_section(spec: dict) -> list[str]:
    return next((d["pip"] for d in spec["dependencies"] if isinstance(d, dict)), [])


def entries(lock_path: Path) -> set[tuple]:
    """Everything a lock says about each package, to compare two locks strictly."""
    return {(e.name, e.version, e.manager, e.platform, e.url, e.md5 or None, e.sha256 or None,
             tuple(sorted(e.dependencies.items())), e.categories) for e in read_lock(lock_path).packages}


def pip_install(prefix: Path, *args: str) -> None:
    """The environment's own pip (the test channel's pip package), from the local index only."""
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL")}
    env["PIP_CONFIG_FILE"] = os.devnull
    proc = subprocess.run([str(prefix / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir",
                           "--disable-pip-version-check", "-q", *args], capture_output=True, text=True, env=env,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def created(tmp_path_factory: pytest.TempPathFactory, channel_url: str, pypi_index) -> tuple[Path, Path]:
    """(prefix, its lock): the standard packages plus egdemo-b (and egdemo-a) from the local index, built by
    the real `envguard create` from a real `envguard lock`."""
    root = tmp_path_factory.mktemp("export-base")
    lock = make_lock(write_env(root / "proj", channel_url, BASE_DEPS, pip=["egdemo-b"], pip_index=pypi_index.url))
    proc = envguard_run("create", "-p", str(root / "env"), "--lockfile", str(lock), "--no-check", "-q")
    assert proc.returncode == 0, proc.stderr
    return root / "env", lock


@pytest.fixture
def env_copy(created: tuple[Path, Path], tmp_path: Path) -> Path:
    """A private copy of the created prefix, to break."""
    dst = tmp_path / "env"
    shutil.copytree(created[0], dst, symlinks=True)
    return dst


# ------------------------------------------------------------------------------------------- round trip


def test_round_trip_create_export_diff_create_check(created: tuple[Path, Path], tmp_path: Path) -> None:
    prefix, original = created
    out = tmp_path / "exported"
    # a home directory above the prefix: the files name it ~/env, never the absolute path
    proc = envguard_run("export", "-p", str(prefix), "--output-dir", str(out), "--no-index", env={"HOME": str(prefix.parent)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"wrote {out / 'conda-lock.yml'}" in proc.stdout

    # the two locks hold the same packages, down to URLs, hashes and dependencies
    diff = envguard_run("diff", str(original), str(out / "conda-lock.yml"))
    assert diff.returncode == 0 and "no differences" in diff.stdout, diff.stdout + diff.stderr
    assert entries(out / "conda-lock.yml") == entries(original)
    exported = read_lock(out / "conda-lock.yml")
    assert exported.platforms == [PLAT] and exported.sources == ["environment.yml"]
    assert exported.custom_metadata["envguard.export.prefix"] == f"~/{prefix.name}"
    for written in (out / "conda-lock.yml", out / "environment.yml"):
        assert str(prefix.parent) not in written.read_text()
    assert exported.cuda == read_lock(original).cuda == "none"  # the CPU build guard: what `lock` assumes

    # the exported pair is fresh by conda-lock's own hash
    fresh = envguard_run("lock", "--check", "-f", str(out / "environment.yml"))
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr

    # and rebuilds an environment that passes check --deep, smoke test included
    rebuilt = tmp_path / "rebuilt"
    proc = envguard_run("create", "-p", str(rebuilt), "--lockfile", str(out / "conda-lock.yml"), "--no-check", "-q")
    assert proc.returncode == 0, proc.stderr
    check = envguard_run("check", "-p", str(rebuilt), "--lockfile", str(out / "conda-lock.yml"), "--deep",
                         "--format", "json", cwd=tmp_path, timeout=300)
    report = json.loads(check.stdout)
    assert check.returncode == 0, report["findings"]
    assert report["files"]["mode"] == "sha256" and report["files"]["problems"] == []
    assert not [f for f in report["findings"] if f["code"] in ("EG510", "EG511", "EG512", "EG514")]


def test_spec_from_an_env_without_history_is_what_nothing_depends_on(created: tuple[Path, Path], env_copy: Path,
                                                                        tmp_path: Path) -> None:
    prefix = env_copy
    (prefix / "conda-meta" / "history").write_text("")  # as rattler leaves it: no record of what was asked for
    result = export(prefix, output=tmp_path / "out", fmt="environment", use_index=False,
                    driver_info_fn=lambda: None)
    tmp_path = tmp_path / "out"
    spec = spec_of(tmp_path)
    assert [f.path.name for f in result.files] == ["environment.yml"]
    # numpy is pytorch's dependency: not requested; python is always named, torch with its release and build
    assert spec["dependencies"][:2] == [f"python={HOST_PY}", "pytorch=2.13.*=cpu*"]
    assert set(spec["dependencies"][2:-1]) == {"egtool", "egplaceholder", "eglink", "pip"}
    pip_locked = [e for e in read_lock(created[1]).packages if e.manager == "pip"]
    assert sorted(pip_section(spec)) == sorted(f"{e.name} @ {e.url}" for e in pip_locked)  # as pip recorded them
    assert spec["platforms"] == [PLAT] and spec["name"] == "env"
    assert "EG601" in codes(result.findings) and result.requested_from == "inferred"
    assert result.exit_code == 0


# ------------------------------------------------------------------------------------------- pip on conda


@pytest.fixture
def conda_env(tmp_path: Path, channel_url: str) -> Path:
    lock = make_lock(write_env(tmp_path / "proj", channel_url, BASE_DEPS))
    proc = envguard_run("create", "-p", str(tmp_path / "env"), "--lockfile", str(lock), "--no-check", "-q")
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "env"


def test_pip_on_conda_from_an_index_carries_versions_sources_and_hashes(conda_env: Path, pypi_index,
                                                                         tmp_path: Path) -> None:
    pip_install(conda_env, "--index-url", pypi_index.url, "egdemo-b")  # pulls egdemo-a 2.0 as a dependency
    out = tmp_path / "out"
    result = export(conda_env, output=out, index_urls=[pypi_index.url], driver_info_fn=lambda: None)
    assert result.exit_code == 0, result.findings

    spec = spec_of(out)
    assert pip_section(spec) == ["egdemo-b==1.0"]  # what was asked for (REQUESTED), not the closure
    assert spec["pip-repositories"] == [pypi_index.url]
    assert "pip" in spec["dependencies"]
    pip_entries = {e.name: e for e in read_lock(out / "conda-lock.yml").packages if e.manager == "pip"}
    assert set(pip_entries) == {"egdemo-a", "egdemo-b"}
    for name, version in (("egdemo-a", "2.0"), ("egdemo-b", "1.0")):
        wheel = pypi_index.wheels[(name, version)]
        assert pip_entries[name].version == version
        assert pip_entries[name].url == f"{pypi_index.url.rsplit('/simple', 1)[0]}/files/{wheel.name}"
        assert pip_entries[name].sha256 == pypi_index.sha256[wheel.name]
    assert pip_entries["egdemo-b"].dependencies == {"egdemo-a": ">=1.0"}

    fresh = envguard_run("lock", "--check", "-f", str(out / "environment.yml"))
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "fresh" in fresh.stdout
    # the environment matches the lock exported from it
    check = envguard_run("check", "-p", str(conda_env), "--lockfile", str(out / "conda-lock.yml"), "--no-smoke",
                         "--format", "json", cwd=tmp_path)
    assert check.returncode == 0, check.stdout


def test_without_an_index_pip_entries_are_written_without_a_hash_and_reported(conda_env: Path, pypi_index,
                                                                               tmp_path: Path) -> None:
    pip_install(conda_env, "--index-url", pypi_index.url, "egdemo-b")
    result = export(conda_env, output=tmp_path, use_index=False, driver_info_fn=lambda: None)
    pip_entries = [e for e in read_lock(tmp_path / "conda-lock.yml").packages if e.manager == "pip"]
    assert {e.name for e in pip_entries} == {"egdemo-a", "egdemo-b"}
    assert all(e.sha256 is None and e.url == f"https://pypi.org/simple/{e.name}/" for e in pip_entries)
    finding = next(f for f in result.findings if f.code == "EG614")
    assert "egdemo-a, egdemo-b" in finding.message and finding.severity.value == "warning"
    # an index that answers nothing: reported, not a crash
    result = export(conda_env, output=tmp_path, force=True, index_urls=["http://127.0.0.1:9/simple"],
                    index_timeout=5, driver_info_fn=lambda: None)
    assert {"EG614", "EG618"} <= codes(result.findings)


def test_pip_over_conda_is_named_with_checks_rules(conda_env: Path, tmp_path: Path) -> None:
    wheel = channels.build_wheel(tmp_path / "wheels", "numpy", "9.9")
    pip_install(conda_env, "--no-deps", "--no-index", str(wheel))
    result = export(conda_env, output=tmp_path / "out", use_index=False, driver_info_fn=lambda: None)
    found = codes(result.findings)
    # check's rules: pip's numpy replaces the one conda-meta records (EG521, which names the copy, and no
    # EG520 besides it); the wheel came from a local file
    numpy = {f.code for f in result.findings if f.package == "numpy"}
    assert "EG521" in numpy and "EG520" not in numpy and "EG612" in found
    assert result.exit_code == 1
    numpy_pip = next(e for e in read_lock(tmp_path / "out" / "conda-lock.yml").packages
                     if e.name == "numpy" and e.manager == "pip")
    assert numpy_pip.url == wheel.as_uri()
    assert numpy_pip.sha256 == __import__("hashlib").sha256(wheel.read_bytes()).hexdigest()


def test_cuda_build_keeps_its_cuda_line_and_assumption(channel_url: str, session_tmp: Path,
                                                       tmp_path: Path) -> None:
    from support import check_envs

    prefix, _ = check_envs.make_env(channel_url,
                                    [f"python {HOST_PY}.*", "pytorch 2.13.0 *cuda126*", "cuda-version 12.6.*",
                                                  "pip"], tmp_path / "env", session_tmp / "check-pkgs", cuda="12.6")
    out = tmp_path / "out"
    result = export(prefix, output=out, use_index=False, driver_info_fn=lambda: None)
    deps = spec_of(out)["dependencies"]
    assert "pytorch=2.13.*=cuda126*" in deps and "cuda-version=12.6" in deps
    assert read_lock(out / "conda-lock.yml").cuda == "12.6"  # __cuda for a re-lock: the installed CUDA line
    assert result.torch is not None and "CUDA 12.6" in result.torch and "EG620" not in codes(result.findings)
    fresh = envguard_run("lock", "--check", "-f", str(out / "environment.yml"))
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr

    # pip CUDA 11 wheels beside conda's CUDA 12: check's mixing rule names it, in export as in check
    check_envs.pip_install(prefix, channels.build_wheel(tmp_path / "wheels", "nvidia-cublas-cu11", "11.11.3.6"))
    result = export(prefix, output=tmp_path / "mixed", fmt="environment", use_index=False,
                    driver_info_fn=lambda: None)
    lines = next(f for f in result.findings if f.code == "EG572")
    assert "nvidia-cublas-cu11" in lines.message and "cuda-version 12.6" in lines.message
    assert result.exit_code == 1
    check = envguard_run("check", "-p", str(prefix), "--no-smoke", "--format", "json", cwd=tmp_path)
    assert "EG572" in {f["code"] for f in json.loads(check.stdout)["findings"]}


# ------------------------------------------------------------------------------------------- torch from pip


def test_plain_venv_with_torch_from_pip(tmp_path: Path) -> None:
    """The test virtualenv itself: torch from pip (2.13.0+cpu here), no conda-meta."""
    from importlib.metadata import distribution

    try:
        torch = distribution("torch")
    except Exception:
        require(False, "torch is not installed in the test environment")
    require(torch.read_text("REQUESTED") is not None, "torch was not installed on request here")
    result = export(sys.prefix, output=tmp_path, use_index=False, driver_info_fn=lambda: None)
    spec = spec_of(tmp_path)
    assert spec["dependencies"][:2] == [f"python={sys.version_info[0]}.{sys.version_info[1]}", "pip"]
    assert f"torch=={torch.version}" in pip_section(spec)
    assert not any(p.startswith("pip") for p in pip_section(spec))
    assert result.kind == "venv" and not (tmp_path / "conda-lock.yml").exists()
    assert "EG621" in codes(result.findings)
    label = torch.version.partition("+")[2]
    if label:  # a PyTorch-index build names its index and its build
        assert spec["pip-repositories"] == [f"https://download.pytorch.org/whl/{label}"]
        assert result.torch is not None and f"torch {torch.version}" in result.torch
        header = (tmp_path / "environment.yml").read_text().splitlines()[:3]
        assert any("CPU build" in h or "CUDA" in h for h in header)
    if label == "cpu":
        cpu = next(f for f in result.findings if f.code == "EG620")
        assert cpu.severity.value == "info"

        class Driver:
            driver_version = "550.54.15"

        on_gpu = export(sys.prefix, output=tmp_path, force=True, fmt="environment", use_index=False,
                        driver_info_fn=Driver)
        assert next(f for f in on_gpu.findings if f.code == "EG620").severity.value == "warning"


# ------------------------------------------------------------------------------------------- formats


def test_explicit_format_with_hashes(created: tuple[Path, Path], tmp_path: Path) -> None:
    prefix, original = created
    result = export(prefix, output=tmp_path, fmt="explicit", use_index=False, driver_info_fn=lambda: None)
    assert sorted(w.path.name for w in result.files) == [f"conda-{PLAT}.lock", f"requirements-{PLAT}.txt"]
    explicit = tmp_path / f"conda-{PLAT}.lock"
    lock = read_lock(original)
    conda = [e for e in lock.packages if e.manager == "conda"]
    lines = [ln for ln in explicit.read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines[0] == "@EXPLICIT" and len(lines) == 1 + len(conda)
    assert {ln for ln in lines[1:]} == {f"{e.url}#{e.sha256}" for e in conda}
    # python before the packages that need it, as conda installs them in file order
    names = [ln.rsplit("/", 1)[-1].split("-")[0] for ln in lines[1:]]
    assert names.index("python") < names.index("egtool") and names.index("numpy") < names.index("pytorch")
    from rattler.explicit_environment import ExplicitEnvironmentSpec

    assert len(ExplicitEnvironmentSpec.from_path(explicit).packages) == len(conda)
    req = (tmp_path / f"requirements-{PLAT}.txt").read_text()
    for e in lock.packages:
        if e.manager == "pip":
            # installed by `envguard create` from the lock: pinned by name with the lock's hash, on the index the
            # spec named, not as one platform's wheel URL
            assert f"{e.name}=={e.version} --hash=sha256:{e.sha256}" in req.splitlines()
    assert req.splitlines()[1].startswith("--index-url http://127.0.0.1:") and " @ " not in req
    # the explicit file with its `# pip` lines is the same environment as the lock
    diff = envguard_run("diff", str(original), str(explicit))
    assert diff.returncode == 0, diff.stdout
    assert "EG619" not in codes(result.findings)  # every requirement has its hash: pip takes the file as it is


def test_pinned_and_history(env_copy: Path, tmp_path: Path) -> None:
    result = export(env_copy, output=tmp_path / "pinned", fmt="environment", pinned=True,
                    driver_info_fn=lambda: None)
    deps = spec_of(tmp_path / "pinned")["dependencies"]
    assert deps[0].startswith(f"python={HOST_PY}.") and deps[0].endswith("=h0_0_cpython")
    assert f"pytorch=2.13.0=cpu_generic_{HOST_PY_TAG}_h0_0" in deps and result.requested_from == "pinned"

    (env_copy / "conda-meta" / "history").write_text(
        "==> 2026-01-01 00:00:00 <==\n# cmd: conda create -p env python=3.11 pytorch numpy eglink\n"
        "# update specs: ['python=3.11', 'pytorch=2.13.0=cpu*', 'numpy', 'eglink']\n"
        "==> 2026-01-02 00:00:00 <==\n# remove specs: ['eglink']\n"
        "# update specs: [\"egtool>=1\", '__import__(\"os\")']\n")
    result = export(env_copy, output=tmp_path / "history", fmt="environment", driver_info_fn=lambda: None)
    deps = spec_of(tmp_path / "history")["dependencies"]
    assert [d for d in deps if isinstance(d, str)] == ["python=3.11", "pytorch=2.13.0=cpu*", "egtool>=1", "numpy",
                                                       "pip"]
    assert result.requested_from == "history" and "EG601" not in codes(result.findings)


# ------------------------------------------------------------------------------------------- findings


def test_channel_mixing_and_credentials_from_conda_meta(env_copy: Path, tmp_path: Path) -> None:
    """Records that say they came from conda-forge, defaults and a token-protected channel."""
    meta = env_copy / "conda-meta"
    rewrites = {"numpy": "https://conda.anaconda.org/conda-forge", "pytorch": "https://conda.anaconda.org/conda-forge",
                "python": "https://conda.anaconda.org/conda-forge", "egtool": "https://repo.anaconda.com/pkgs/main",
                "eglink": "https://conda.anaconda.org/t/tk-SECRET-123/private"}
    for f in meta.glob("*.json"):
        data = json.loads(f.read_text())
        if data.get("name") in rewrites:
            base = rewrites[data["name"]]
            data["channel"] = base
            data["url"] = f"{base}/{data['subdir']}/{data['fn']}"
            f.write_text(json.dumps(data))
    out = tmp_path / "out"
    result = export(env_copy, output=out, use_index=False, driver_info_fn=lambda: None)
    spec = spec_of(out)
    assert spec["channels"][0] == "conda-forge"
    assert "https://repo.anaconda.com/pkgs/main" in spec["channels"]
    mix = next(f for f in result.findings if f.code == "EG113")
    assert mix.file == str(out / "environment.yml") and mix.line
    assert "EG604" in codes(result.findings)
    for path in out.iterdir():
        assert "tk-SECRET-123" not in path.read_text()
    assert "tk-SECRET-123" not in " ".join(f.message + f.fix for f in result.findings)


def test_files_changed_since_install_with_deep(env_copy: Path, tmp_path: Path) -> None:
    conf = env_copy / "etc" / "egplaceholder.conf"
    data = conf.read_bytes()
    conf.unlink()
    conf.write_bytes(data.replace(b"prefix", b"prefiX"))  # same size, other content
    assert "EG532" not in codes(export(env_copy, output=tmp_path / "a", fmt="environment", use_index=False,
                                       driver_info_fn=lambda: None).findings)
    result = export(env_copy, output=tmp_path / "b", fmt="environment", deep=True, use_index=False,
                    driver_info_fn=lambda: None)
    assert "EG532" in codes(result.findings) and result.exit_code == 1


def test_editable_local_directory_and_vcs_sources(env_copy: Path, tmp_path: Path) -> None:
    """direct_url.json as pip writes it for the other kinds of source."""
    site = env_copy / "lib" / f"python{HOST_PY}" / "site-packages"
    kinds = {
        "egedit": {"url": "file:///work/proj", "dir_info": {"editable": True}},
        "egdir": {"url": "file:///work/other", "dir_info": {}},
        "egvcs": {"url": "https://github.com/org/egvcs.git",
                  "vcs_info": {"vcs": "git", "commit_id": "a" * 40, "requested_revision": "main"}},
    }
    requires = {"egedit": "Requires-Dist: egdep>=1\nRequires-Dist: egextra; extra == 'dev'\n"}
    for name, direct in kinds.items():
        d = site / f"{name}-1.0.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{requires.get(name, '')}")
        (d / "INSTALLER").write_text("pip\n")
        (d / "REQUESTED").write_text("")
        (d / "direct_url.json").write_text(json.dumps(direct))
    for name in ("egdep", "egextra", "egloose"):  # installed from an index as dependencies: no REQUESTED marker
        d = site / f"{name}-1.0.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (d / "INSTALLER").write_text("pip\n")
    hostile = site / "eghostile-1.0.dist-info"  # a direct_url.json that never ends: not read, named
    hostile.mkdir()
    (hostile / "METADATA").write_text("Metadata-Version: 2.1\nName: eghostile\nVersion: 1.0\n")
    (hostile / "INSTALLER").write_text("pip\n")
    (hostile / "direct_url.json").symlink_to("/dev/zero")
    out = tmp_path / "out"
    result = export(env_copy, output=out, use_index=False, driver_info_fn=lambda: None)
    found = {f.code: f for f in result.findings}
    assert {"EG610", "EG611", "EG613", "EG617"} <= set(found) and result.exit_code == 1
    assert "eghostile" in found["EG617"].message
    assert "pip install -e /work/proj" in found["EG610"].fix
    pip = pip_section(spec_of(out))
    assert f"egvcs @ git+https://github.com/org/egvcs.git@{'a' * 40}" in pip
    assert not any(p.startswith(("egedit", "egdir")) for p in pip)
    # the editable project cannot be in the spec, so what it requires is, pinned, with what its extra [dev]
    # brought in (egextra is installed, so the extra was); not what nothing asked for (egloose)
    assert {"egdep==1.0", "egextra==1.0"} <= set(pip) and not any(p.startswith("egloose") for p in pip)
    locked = {e.name for e in read_lock(out / "conda-lock.yml").packages if e.manager == "pip"}
    assert "egvcs" in locked and not {"egedit", "egdir"} & locked
    assert "refuses a lock with this entry" in found["EG613"].fix  # create installs hash-checked pip only

    # the requirements file: egdemo-a/-b hashed, egvcs and the index dists not: pip would refuse it as a whole
    result = export(env_copy, output=tmp_path / "explicit", fmt="explicit", use_index=False,
                    driver_info_fn=lambda: None)
    mixed = next(f for f in result.findings if f.code == "EG619")
    assert mixed.message.startswith(f"requirements-{PLAT}.txt has --hash on 2 of ")
    assert mixed.message.endswith("refuses those of egdep, egextra, eghostile, egloose, egvcs")


def test_index_lookup_picks_the_wheel_of_the_installed_tags(tmp_path: Path) -> None:
    """A project page with one version built for two platforms and an sdist (PEP 503 over real HTTP)."""
    from envguard.export.index import IndexClient

    page = tmp_path / "simple" / "egtags"
    page.mkdir(parents=True)
    rows = {"egtags-1.0-cp311-cp311-manylinux_2_28_x86_64.whl": "1" * 64,
            "egtags-1.0-cp311-cp311-macosx_11_0_arm64.whl": "2" * 64,
            "egtags-1.0.tar.gz": "3" * 64, "egtags-2.0-py3-none-any.whl": "4" * 64}
    (page / "index.html").write_text("<html><body>" + "".join(
        f'<a href="../../files/{fn}#sha256={h}">{fn}</a>' for fn, h in rows.items()) + "</body></html>")
    with channels.serve_directory(tmp_path) as server:
        client = IndexClient([f"http://user:pw@127.0.0.1:{server.port}/simple"])
        hit = client.find("egtags", "1.0", ["cp311-cp311-macosx_11_0_arm64"])
        assert hit is not None and hit.sha256 == "2" * 64 and not hit.sdist
        assert hit.url == f"http://127.0.0.1:{server.port}/files/egtags-1.0-cp311-cp311-macosx_11_0_arm64.whl"
        built_here = client.find("egtags", "1.0", ["cp311-cp311-linux_x86_64"])
        assert built_here is not None and built_here.sdist and built_here.sha256 == "3" * 64
        assert client.find("egtags", "3.0", ["py3-none-any"]) is None
        assert client.find("nothere", "1.0", []) is None and not client.unreachable


# ------------------------------------------------------------------------------------------- bad input


def test_not_an_environment_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notenv").mkdir()
    (tmp_path / "notenv" / "README").write_text("hello\n")
    for target in (tmp_path / "notenv", tmp_path / "missing", tmp_path / "notenv" / "README"):
        proc = envguard_run("export", "-p", str(target), "--output-dir", str(tmp_path / "out"))
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = envguard_run("export", "-p", str(tmp_path / "notenv"), "--format", "yaml")
    assert proc.returncode == 2 and "--format" in proc.stderr


def test_unreadable_record_and_dist_info_without_metadata_are_findings(env_copy: Path, tmp_path: Path,
                                                                        capsys) -> None:
    record = next((env_copy / "conda-meta").glob("egtool-*.json"))
    record.write_text("{not json")
    broken = env_copy / "lib" / f"python{HOST_PY}" / "site-packages" / "egbroken-1.0.dist-info"
    broken.mkdir()
    (broken / "INSTALLER").write_text("pip\n")
    code, out, err = run_cli(capsys, "export", "-p", str(env_copy), "--output-dir", str(tmp_path / "out"), "--no-index")
    assert code == 1 and "Traceback" not in out + err and not err
    assert "EG533" in out and "EG617" in out
    locked = {e.name for e in read_lock(tmp_path / "out" / "conda-lock.yml").packages}
    assert "egtool" not in locked and "python" in locked


def test_existing_files_are_replaced_only_with_force_and_atomically(created: tuple[Path, Path], tmp_path: Path,
                                                                     capsys) -> None:
    prefix, _ = created
    out = tmp_path / "out"
    assert run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index")[0] == 0
    spec, lock = out / "environment.yml", out / "conda-lock.yml"
    spec.write_text("# my own edits\n" + spec.read_text())
    before = {p.name: (p.read_bytes(), p.stat().st_ino) for p in (spec, lock)}

    code, _, err = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index")
    assert code == 2 and "environment.yml" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert {p.name: (p.read_bytes(), p.stat().st_ino) for p in (spec, lock)} == before

    (out / "conda-lock.yml").unlink()
    (out / "conda-lock.yml").mkdir()  # cannot be replaced even with --force: nothing else is touched either
    code, _, err = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index", "--force")
    assert code == 2 and "conda-lock.yml" in err and spec.read_bytes() == before["environment.yml"][0]
    (out / "conda-lock.yml").rmdir()

    code, text, _ = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index", "--force")
    assert code == 0 and f"wrote {spec}" in text
    assert spec.stat().st_ino != before["environment.yml"][1] and not spec.read_text().startswith("# my own")
    assert sorted(p.name for p in out.iterdir()) == ["conda-lock.yml", "environment.yml"]  # no staging left
    code, text, _ = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index", "--force")
    assert code == 0 and f"unchanged: {spec}" in text and f"unchanged: {lock}" in text  # byte-identical


def test_codes_are_documented() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "commands" / "export.md").read_text(encoding="utf-8")
    missing = [c for c in CODES if f"`{c}`" not in doc]
    assert not missing, f"docs/commands/export.md does not list {missing}"
