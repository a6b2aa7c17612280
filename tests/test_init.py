"""envguard init: every combination in the data lints clean, impossible ones are refused,
files are never overwritten without --force, the build guards solve as intended, and the
templates ship in the wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from envguard import cli, compat
from envguard.errors import UserError
from envguard.findings import Severity
from envguard.init import CPU, init, resolve
from envguard.lint import lint_file

REPO = Path(__file__).resolve().parent.parent


def _combos() -> list[tuple[str, str, str, str, list[str]]]:
    """(python, torch, CUDA line or cpu, channel, platforms): every released combination in the data, each CUDA
    line on the platforms whose builds accept it."""
    c = compat.load()
    out = []
    for channel in c.known_channels:
        route = c.route(channel)
        for rel in route.released:
            for py in c.supported_python:
                if py not in rel.python:
                    continue
                out.append((py, rel.version, CPU, channel, []))
                for cuda in rel.cuda:
                    plats = [p for p in rel.cuda_platforms if rel.build_line(p, cuda)]
                    out.append((py, rel.version, cuda, channel, plats))
    return out


COMBOS = _combos()


def test_combos_cover_every_route() -> None:
    channels = {c[3] for c in COMBOS}
    assert channels == {"conda-forge", "pytorch"}
    assert any(c[2] == CPU for c in COMBOS) and any(c[2] != CPU for c in COMBOS)
    assert not any(c[1] in ("2.14", "2.15") for c in COMBOS)  # no release evidence on conda-forge (data)
    assert ("3.11", "2.13", "12.8", "conda-forge", ["win-64"]) in COMBOS  # a line of one platform only


@pytest.mark.slow
def test_every_combination_lints_without_errors(tmp_path: Path) -> None:
    from envguard.lock.spec import read_spec

    for i, (py, torch, cuda, channel, plats) in enumerate(COMBOS):
        out = tmp_path / f"{i}" / "environment.yml"
        result = init(python=py, torch=torch, cuda=cuda, channel=channel, platforms=plats or None, output=out)
        findings = lint_file(out)
        errors = [(f.code, f.message) for f in findings if f.severity is Severity.ERROR]
        assert not errors, f"{(py, torch, cuda, channel)}: {errors}"
        data = yaml.safe_load(out.read_text())
        deps = data["dependencies"]
        assert f"python={py}" in deps
        torch_spec = next(d for d in deps if isinstance(d, str) and d.startswith("pytorch="))
        if channel == "conda-forge":
            assert data["channels"] == ["conda-forge", "nodefaults"]
            guard = "cpu*" if cuda == CPU else f"cuda{cuda.split('.')[0]}*"
            assert torch_spec == f"pytorch={torch}.*={guard}"
            assert (f"cuda-version={cuda}" in deps) == (cuda != CPU)
        else:
            assert data["channels"][0] == "pytorch"
            assert (f"pytorch-cuda={cuda}" in deps) == (cuda != CPU)
            assert ("cpuonly" in deps) == (cuda == CPU)
        if cuda != CPU:  # the comment names each platform's build, driver and GPUs
            text = out.read_text()
            for p in result.platforms:
                assert re.search(rf"^# {p}: the cuda\S+ build.*NVIDIA driver .*GPU sm_\d+", text, re.M), (p, text)
        # the lock engineer's parser accepts it too (the same one `envguard lock` uses)
        spec = read_spec([out])
        assert spec.platforms == result.platforms
        if cuda != CPU:
            assert "osx-arm64" not in result.platforms


def test_generated_files_parse_with_conda_lock(tmp_path: Path) -> None:
    """conda-lock, the authority on the lock format, reads one file per route."""
    from conda_lock.src_parser import make_lock_spec

    from envguard.lock.pypi import mapping_path

    for cuda, channel, torch in ((CPU, "conda-forge", None), ("12.9", "conda-forge", None), ("12.4", "pytorch", "2.5")):
        out = tmp_path / channel / cuda / "environment.yml"
        result = init(cuda=cuda, channel=channel, torch=torch, output=out)
        spec = make_lock_spec(src_files=[out], mapping_url=str(mapping_path()))
        assert sorted(spec.platforms) == sorted(result.platforms)
        names = {d.name for deps in spec.dependencies.values() for d in deps}
        assert "pytorch" in names and "python" in names


def test_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "My Project"
    project.mkdir()
    monkeypatch.chdir(project)
    c = compat.load()
    result = init()
    assert result.path == Path("environment.yml") and result.path.exists()
    assert (result.python, result.torch, result.cuda, result.channel) == (
        c.default_python, c.newest_torch, CPU, "conda-forge")
    # the default release is one conda-forge really builds, with its evidence named
    default = c.route("conda-forge").release(result.torch)
    assert default is not None and default.status == "released" and "feedstock" in default.source
    assert set(result.platforms) <= set(default.cpu)
    assert result.platforms == ["linux-64", "osx-arm64", "win-64"]
    data = yaml.safe_load(result.path.read_text())
    assert data["name"] == "my-project"
    assert oct(result.path.stat().st_mode & 0o777) != oct(0o600)


def test_refusals_name_the_nearest_valid_choices() -> None:
    with pytest.raises(UserError) as e:
        resolve(python="3.10", torch="2.15")
    assert e.value.message.startswith("torch 2.15 has no release evidence on conda-forge") and \
        e.value.message.endswith("use --torch 2.13")
    with pytest.raises(UserError) as e:
        resolve(cuda="12.6", platforms=["linux-64"])
    assert e.value.message == "conda-forge builds torch 2.13 for CUDA 12.9 and 13.0 on linux-64; use --cuda 12.9"
    with pytest.raises(UserError) as e:
        resolve(channel="pytorch", torch="2.6")
    assert "frozen at 2.5" in e.value.message and "--channel conda-forge or --torch 2.5" in e.value.message
    with pytest.raises(UserError) as e:  # newer than envguard's lines, and no torch for it on the channel
        resolve(python="3.15")
    assert "use --python 3.11" in e.value.message and "builds no torch for Python 3.15" in e.value.message
    with pytest.raises(UserError) as e:
        resolve(torch="1.13")
    assert "use --torch 2.0" in e.value.message
    with pytest.raises(UserError) as e:
        resolve(cuda="12.9", platforms=["osx-arm64"])
    assert "drop --platform osx-arm64" in e.value.message
    with pytest.raises(UserError) as e:
        resolve(channel="pytorch", torch="2.4", cuda="12.6")
    assert e.value.message == ("the legacy pytorch/nvidia channels builds torch 2.4 for CUDA 11.8, 12.1 and 12.4 on "
                               "linux-64 and win-64; use --cuda 12.4")
    with pytest.raises(UserError):
        resolve(channel="defaults")
    with pytest.raises(UserError):
        resolve(platforms=["linux-99"])


def test_cuda_major_picks_the_newest_line_every_platform_accepts() -> None:
    """`--cuda 12` on linux-64 + win-64: conda-forge builds 2.13 for 12.9 on linux-64 and 12.8 on win-64; the
    win-64 cuda128 build runs on the 12.9 libraries (real locks hold exactly that), so 12.9 serves both."""
    assert resolve(cuda="12")[2] == "12.9"
    assert resolve(cuda="12", platforms=["win-64"])[2] == "12.8"
    assert resolve(cuda="13")[2] == "13.0"
    assert resolve(torch="2.7", cuda="12.6")[2] == "12.6"  # 2.7.x still has cuda126 builds on both
    assert resolve(torch="2.1", cuda="12.5", platforms=["linux-64"])[2] == "12.5"  # the cuda120 build accepts it


def test_python_310_is_allowed_with_a_warning(tmp_path: Path) -> None:
    result = init(python="3.10", torch="2.13", output=tmp_path / "environment.yml")
    assert any(w.startswith("EG103") for w in result.warnings)


def test_never_overwrites_without_force(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "environment.yml"
    target.write_text("name: mine\n", encoding="utf-8")
    assert cli.run(["init"]) == 2
    err = capsys.readouterr().err
    assert "environment.yml" in err and "--force" in err
    assert target.read_text() == "name: mine\n"
    assert cli.run(["init", "--force", "--cuda", "13.0", "--name", "gpu"]) == 0
    data = yaml.safe_load(target.read_text())
    assert data["name"] == "gpu" and "cuda-version=13.0" in data["dependencies"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".environment.yml.")]  # no temp left


def test_cli_refusal_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "env.yml"
    assert cli.run(["init", "--cuda", "12.6", "--platform", "linux-64", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: conda-forge builds torch 2.13 for CUDA 12.9 and 13.0 on linux-64; use --cuda 12.9"
    assert not out.exists()
    assert cli.run(["init", "--platform", "linux-64", "--platform", "linux-aarch64", "--cuda", "12.9", "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["platforms"] == ["linux-64", "linux-aarch64"]


@pytest.mark.slow
@pytest.mark.parametrize("cuda,expect_build", [(CPU, "cpu_"), ("12.9", "cuda129_")])
def test_build_guard_picks_the_intended_build(tmp_path: Path, realdata_channel, cuda: str,
                                              expect_build: str) -> None:
    """Lock a generated file for real (rattler) against conda-forge's real records, CPU and CUDA builds both."""
    from envguard.lock import lock
    from envguard.yamlio import load_fast

    env = tmp_path / "environment.yml"
    init(torch="2.12", cuda=cuda, platforms=["linux-64"], output=env)
    env.write_text(env.read_text().replace("  - conda-forge\n", f"  - {realdata_channel.url}\n"), encoding="utf-8")
    # a machine whose driver supports CUDA 12.9: without the guard the CPU file could get a CUDA build
    lock([env], cuda="12.9", lockfile=tmp_path / "conda-lock.yml")
    data = load_fast(tmp_path / "conda-lock.yml")
    torch = [p for p in data["package"] if p["name"] == "pytorch"]
    assert len(torch) == 1
    assert Path(torch[0]["url"]).name.split("-", 2)[2].startswith(expect_build)
    if cuda != CPU:
        cv = next(p for p in data["package"] if p["name"] == "cuda-version")
        assert str(cv["version"]) == "12.9"
    # EG152 aside: the lock lists the local copy of conda-forge while its URLs are conda-forge's own
    assert not [f for f in lint_file(tmp_path / "conda-lock.yml") if f.severity is Severity.ERROR
                and f.code != "EG152"]


@pytest.mark.slow
def test_templates_ship_in_the_wheel(tmp_path: Path) -> None:
    """Build a wheel from a copy of the tree, then run `envguard init` from the unpacked wheel alone."""
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for rel in filter(None, files):
        p = REPO / rel
        if p.is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, src / rel)
    wheels = tmp_path / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    wheel = next(wheels.glob("torch_envguard-*.whl"))  # the distribution name (pyproject.toml)
    names = zipfile.ZipFile(wheel).namelist()
    for t in (REPO / "templates").glob("*.yml"):
        assert f"envguard/templates/{t.name}" in names
    assert "envguard/data/compat.yaml" in names
    assert not any(n.startswith("templates/") for n in names)

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, "-m", "envguard", "init", "--cuda", "12.9"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "pytorch=" in (work / "environment.yml").read_text()
    # and the templates really came from the wheel, not from the source checkout
    probe = tmp_path / "where.py"
    probe.write_text("from envguard.init import _templates_dir\nprint(_templates_dir())\n", encoding="utf-8")
    where = subprocess.run([sys.executable, str(probe)], cwd=work, env=env, capture_output=True, text=True,
                           timeout=60)
    assert where.stdout.strip() == str(site / "envguard" / "templates"), where.stderr


def test_cuda_file_fails_loudly_without_a_driver(tmp_path: Path, realdata_channel) -> None:
    """No __cuda on the solving machine: the guard turns a silent CPU fallback into a solve error."""
    from envguard.errors import EnvguardError
    from envguard.lock import lock

    env = tmp_path / "environment.yml"
    init(torch="2.12", cuda="12.9", platforms=["linux-64"], output=env)
    env.write_text(env.read_text().replace("  - conda-forge\n", f"  - {realdata_channel.url}\n"),
                   encoding="utf-8")
    with pytest.raises(EnvguardError):
        lock([env], cuda=False, lockfile=tmp_path / "conda-lock.yml")
    assert not (tmp_path / "conda-lock.yml").exists()


def test_output_dash_prints_the_file_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`-o -` answers "which lines exist?" in a project that already has an environment.yml (fix texts use it)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "environment.yml").write_text("name: mine\n")
    assert cli.run(["init", "--cuda", "12", "--platform", "linux-64", "-o", "-"]) == 0
    captured = capsys.readouterr()
    data = yaml.safe_load(captured.out)
    assert "cuda-version=12.9" in data["dependencies"] and data["platforms"] == ["linux-64"]
    assert captured.err.startswith("printed: Python 3.11, torch 2.13 (CUDA 12.9)")
    assert (tmp_path / "environment.yml").read_text() == "name: mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["environment.yml"]
