"""Backends: the registry, and the external-tool wrapper driven against a FAKE micromamba/conda.

No real conda, mamba or micromamba exists on our machines. The fake is an executable on PATH that records
its arguments and the explicit file it was given, then builds a minimal prefix (or fails, or kills envguard
half-way, depending on FAKE_MODE). The rattler backend is exercised for real by test_create.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import envguard_run, make_lock, siblings, tree_state, write_env

from envguard import cli
from envguard.create.backends import available_backends, get_backend
from envguard.create.backends.external import render_explicit
from envguard.errors import BackendError, UserError
from envguard.fingerprint import read_fingerprint

pytestmark = pytest.mark.slow  # each test creates environments with the real backends

FAKE = """#!{python}
import json, os, signal, sys
args = sys.argv[1:]
prefix = args[args.index("--prefix") + 1]
explicit = args[args.index("--file") + 1]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(json.dumps({{"tool": os.path.basename(sys.argv[0]), "args": args,
                          "explicit": open(explicit).read()}}) + "\\n")
mode = os.environ.get("FAKE_MODE", "ok")
os.makedirs(os.path.join(prefix, "conda-meta"), exist_ok=True)
open(os.path.join(prefix, "conda-meta", "history"), "w").close()
if mode == "kill-parent":
    os.makedirs(os.path.join(prefix, "lib"), exist_ok=True)
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(0)
if mode == "fail":
    print("PackagesNotFoundError: the following packages are missing from the target environment",
          file=sys.stderr)
    sys.exit(1)
for line in open(explicit):
    line = line.strip()
    if line and not line.startswith(("#", "@")):
        url, _, digest = line.partition("#")
        stem = url.rsplit("/", 1)[-1].rsplit(".tar.bz2", 1)[0].rsplit(".conda", 1)[0]
        with open(os.path.join(prefix, "conda-meta", stem + ".json"), "w") as fh:
            json.dump({{"url": url, "sha256": digest}}, fh)
"""


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """micromamba, mamba and conda fakes first on PATH; returns the log file (one JSON line per call)."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    for tool in ("micromamba", "mamba", "conda"):
        exe = bin_dir / tool
        exe.write_text(FAKE.format(python=sys.executable))
        exe.chmod(0o755)
    log = tmp_path / "fake.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(log))
    monkeypatch.delenv("FAKE_MODE", raising=False)
    return log


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def small_lock(tmp_path: Path, channel_factory) -> tuple[Path, Path]:
    chan = channel_factory([
        {"name": "egback-a", "version": "1.0", "noarch": "generic", "files": {"share/egback/a.txt": "a\n"}},
        {"name": "egback-b", "version": "2.0", "noarch": "generic", "depends": ["egback-a"],
         "files": {"share/egback/b.txt": "b\n"}},
    ])
    return chan, make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), ["egback-b"]))


def create(*args: str) -> int:
    return cli.run(["create", "--no-check", "--quiet", *args])


def test_registry_default_env_var_and_errors(fake_tools: Path, monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    assert get_backend(None).name == "rattler"
    assert available_backends()[:4] == ["rattler", "micromamba", "mamba", "conda"]
    monkeypatch.setenv("ENVGUARD_BACKEND", "micromamba")
    assert get_backend(None).name == "micromamba"
    assert get_backend("conda").name == "conda"  # the option wins over the variable
    with pytest.raises(UserError) as e:
        get_backend("pixi")
    assert e.value.exit_code == 2 and "rattler" in e.value.message
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert available_backends() == ["rattler"]
    with pytest.raises(BackendError) as e2:
        get_backend(None)
    assert e2.value.exit_code == 6 and "ENVGUARD_BACKEND" in e2.value.message


def test_micromamba_gets_an_explicit_file_with_hashes(fake_tools: Path, small_lock, tmp_path: Path) -> None:
    from envguard.lock.lockfile import host_records, read_lock

    _chan, lockfile = small_lock
    target = tmp_path / "env"
    assert create("-p", str(target), "--lockfile", str(lockfile), "--backend", "micromamba") == 0
    [call] = calls(fake_tools)
    assert call["tool"] == "micromamba"
    explicit_path = call["args"][call["args"].index("--file") + 1]
    assert call["args"] == ["create", "--yes", "--prefix", str(target), "--file", explicit_path]
    lines = call["explicit"].splitlines()
    records = host_records(read_lock(lockfile), channels.host_platform())
    assert "@EXPLICIT" in lines
    # the installer reads envguard's verified private copy of each archive, never the channel's path again
    explicit = lines[lines.index("@EXPLICIT") + 1:]
    assert len(explicit) == len(records)
    for line, r in zip(explicit, records, strict=True):
        assert line.startswith("file://") and "/.envguard-downloads-" in line, line
        assert line.endswith(f"/{r.url.rsplit('/', 1)[-1]}#{r.sha256}"), line
    fp = read_fingerprint(target)
    assert fp is not None and fp.backend == "micromamba" and set(fp.conda) == {"egback-a", "egback-b"}
    assert not Path(explicit_path).exists()  # the temporary explicit file is gone
    assert siblings(target) == []


def test_backend_from_environment_variable(fake_tools: Path, small_lock, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVGUARD_BACKEND", "mamba")
    assert create("-p", str(tmp_path / "env"), "--lockfile", str(small_lock[1])) == 0
    assert [c["tool"] for c in calls(fake_tools)] == ["mamba"]


def test_failing_backend_with_force_restores_old_env(fake_tools: Path, small_lock, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    target = tmp_path / "env"
    assert create("-p", str(target), "--lockfile", str(small_lock[1])) == 0  # rattler
    before = tree_state(target)
    monkeypatch.setenv("FAKE_MODE", "fail")
    capsys.readouterr()
    assert create("-p", str(target), "--lockfile", str(small_lock[1]), "--force", "--backend", "conda") == 6
    err = capsys.readouterr().err
    assert "PackagesNotFoundError" in err and "exit 1" in err
    assert tree_state(target) == before and siblings(target) == []


def test_external_backend_killed_midway_is_undone_by_next_run(fake_tools: Path, small_lock, tmp_path: Path,
                                                              capsys) -> None:
    target = tmp_path / "env"
    assert create("-p", str(target), "--lockfile", str(small_lock[1])) == 0
    before = tree_state(target)
    proc = envguard_run("create", "--no-check", "-p", str(target), "--lockfile", str(small_lock[1]), "--force",
                        "--backend", "micromamba", env={"FAKE_MODE": "kill-parent"})
    assert proc.returncode == -9, proc.stderr
    left = siblings(target)
    assert any("envguard-building-" in n for n in left) and any("envguard-old-" in n for n in left)
    assert (target / "lib").is_dir()  # the half-built environment sits at the target
    from envguard.leftovers import interruption

    found = interruption(target)
    assert found is not None and "half-built" in found.reason
    capsys.readouterr()
    assert create("-p", str(target), "--lockfile", str(small_lock[1])) == 0  # cleans up, then: unchanged
    assert capsys.readouterr().out.startswith("unchanged:")
    assert tree_state(target) == before and siblings(target) == []
    assert interruption(target) is None


def test_tampered_artifact_never_reaches_external_backend(fake_tools: Path, small_lock, tmp_path: Path) -> None:
    chan, lockfile = small_lock
    channels.build_package(chan, "egback-a", "1.0", "h0_0", noarch="generic",
                           files={"share/egback/a.txt": "a\n"}, extra_bytes=b"evil")
    target = tmp_path / "env"
    assert create("-p", str(target), "--lockfile", str(lockfile), "--backend", "micromamba") == 3
    assert calls(fake_tools) == [] and not target.exists()


def test_render_explicit_falls_back_to_md5() -> None:
    from envguard.create.integrity import Artifact

    arts = [Artifact("a", "1", "h0_0", "https://x/noarch/a-1-h0_0.conda", "ab" * 32, "cd" * 16, "noarch"),
            Artifact("b", "1", "h0_0", "https://x/noarch/b-1-h0_0.conda", None, "ef" * 16, "noarch")]
    text = render_explicit(arts, "linux-64", "conda-lock.yml")
    assert text.splitlines()[1:] == ["# platform: linux-64", "@EXPLICIT",
                                     f"https://x/noarch/a-1-h0_0.conda#{'ab' * 32}",
                                     f"https://x/noarch/b-1-h0_0.conda#{'ef' * 16}"]
