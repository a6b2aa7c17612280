"""The file a user names is the file used, and nothing a user has is lost (issue 35, points 1 and 3).

* ``envguard lock`` writes its lock only where there is none or over a conda-lock file: README.md, a pixi
  manifest, a requirements file, an environment file, another kind of lock, any text or binary file named as
  ``--lockfile`` (or standing where the default conda-lock.yml goes) is refused before any solve, exit 2, in
  one line that says what the file is, and is left byte for byte as it was. A conda-lock file made from
  another spec is replaced, and a line on stderr says whose it was. ``export`` (``--force`` included) follows
  the same rule for the locks it writes.
* ``envguard create --lockfile NAME`` of a missing NAME solves, writes and builds nothing: exit 4 (lock
  missing), with the ``envguard lock`` that makes that lock on purpose, which runs as printed. ``check`` and
  ``why`` of a missing named lock likewise solve nothing and say how to make it.

Every case runs the real CLI (``envguard.cli.run`` in-process, or the installed command in a subprocess) over
real files; where a lock is written, it is a real rattler solve over the test channel written by conda-lock's
writer.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.channels import HOST_PY, host_platform
from support.lock_support import write_env

from envguard import cli

# A spec whose channel does not exist: any solve of it fails (exit 6), so an exit 2 that names the target
# proves the target was refused before a solve was tried.
NO_CHANNEL = "file:///nonexistent/envguard-test-channel"

PIXI_TOML = """\
[workspace]
name = "demo"
channels = ["conda-forge"]
platforms = ["linux-64"]

[dependencies]
python = "3.12.*"
pytorch = ">=2.5"
"""

NOT_LOCKS: dict[str, tuple[bytes, str]] = {
    # name: (content, what the refusal calls it)
    "README.md": (b"# demo\n\nTrain with `python train.py`.\n\nNotes: keep this file.\n", "a Markdown document"),
    "pixi.toml": (PIXI_TOML.encode(), "a pixi manifest"),
    "pyproject.toml": (b'[project]\nname = "demo"\nversion = "0.1"\n', "a pyproject.toml"),
    "requirements.txt": (b"numpy==1.26.4\ntorch>=2.5 ; platform_system == 'Linux'\n-r base.txt\n",
                         "a pip requirements file"),
    "environment.yml": (b"name: other\nchannels: [conda-forge]\ndependencies:\n  - python=3.12\n",
                        "an environment file"),
    "pixi.lock": (b"version: 6\nenvironments:\n  default:\n    channels:\n    - url: https://conda.anaconda.org/"
                  b"conda-forge/\n    packages: {}\npackages: []\n", "a pixi.lock"),
    "conda-linux-64.lock": (b"# platform: linux-64\n@EXPLICIT\nhttps://conda.anaconda.org/conda-forge/linux-64/"
                            b"zlib-1.3.1-hb9d3cd8_2.conda#c9f075ab2f33b3bbee9e62d4ad0a6cd8\n", "an @EXPLICIT lock"),
    "report.json": (json.dumps({"schema": "envguard.check/1", "packages": []}).encode(),
                    "an `envguard check` report"),
    "notes.txt": (b"Ask Ana before changing the CUDA line: the cluster driver is 535.\n",
                  "a text file, not a conda-lock file"),
    "model.bin": (bytes(range(256)) * 64, "a binary file"),
}


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.run(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a directory): what a refused command must leave."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


@pytest.mark.parametrize("name", sorted(NOT_LOCKS))
def test_lock_never_writes_over_a_file_that_is_not_a_lock(name: str, tmp_path: Path, channel_url: str,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    content, what = NOT_LOCKS[name]
    # spec.yml would fail to solve (so the refusal comes before a solve); good.yml solves and locks
    write_env(tmp_path / "spec.yml", channels=[NO_CHANNEL], deps=["python=3.12"], platforms=["linux-64"])
    write_env(tmp_path / "good.yml", channels=[channel_url], deps=[f"python={HOST_PY}"], platforms=[host_platform()])
    (tmp_path / name).write_bytes(content)
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)

    for spec in ("spec.yml", "good.yml"):
        code, out, err = run_cli(capsys, "lock", "-f", spec, "--lockfile", name)
        line = error_line(err)
        assert code == 2, (spec, code, out, err)
        assert line.startswith(f"error: {name}: --lockfile: {what}"), line
        assert "written only where there is none or over a conda-lock file" in line and "(fix:" in line, line
        assert tree(tmp_path) == before  # byte for byte, and no temporary file beside it

    # create's --force is about the environment, never a way to replace a file that is no lock
    code, out, err = run_cli(capsys, "create", "-p", "env", "-f", "spec.yml", "--lockfile", name, "--force")
    assert code == 2 and name in error_line(err), (code, out, err)
    assert tree(tmp_path) == before


def test_the_default_lock_path_is_guarded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """No --lockfile: the conda-lock.yml beside the spec is the target, and someone's notes stand there."""
    write_env(tmp_path / "environment.yml", channels=[NO_CHANNEL], deps=["python=3.12"], platforms=["linux-64"])
    notes = b"TODO: lock this project\n- ask Ana which CUDA line the cluster has\n"
    (tmp_path / "conda-lock.yml").write_bytes(notes)
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    for argv in (["lock"], ["create", "-p", "env"], ["create", "-p", "env", "--force"]):
        code, out, err = run_cli(capsys, *argv)
        line = error_line(err)
        assert code == 2 and "conda-lock.yml" in line, (argv, code, out, err)
        assert tree(tmp_path) == before, argv


@pytest.mark.slow
def test_the_installed_command_refuses_too(tmp_path: Path) -> None:
    """The real `envguard` executable, as a user types it: README.md survives a mistyped --lockfile."""
    write_env(tmp_path / "environment.yml", channels=[NO_CHANNEL], deps=["python=3.12"], platforms=["linux-64"])
    readme = NOT_LOCKS["README.md"][0]
    (tmp_path / "README.md").write_bytes(readme)
    proc = subprocess.run([sys.executable, "-m", "envguard", "lock", "--lockfile", "README.md"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "README.md: --lockfile: a Markdown document" in error_line(proc.stderr)
    assert (tmp_path / "README.md").read_bytes() == readme


def test_a_conda_lock_file_of_another_spec_is_replaced_and_said_so(
        tmp_path: Path, channel_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    plat = host_platform()
    write_env(tmp_path / "a.yml", channels=[channel_url], deps=[f"python={HOST_PY}"], platforms=[plat])
    write_env(tmp_path / "b.yml", channels=[channel_url], deps=[f"python={HOST_PY}", "numpy"], platforms=[plat])
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "lock", "-f", "a.yml", "--lockfile", "shared.yml")
    assert code == 0, err
    assert "replaced" not in err  # a new file: nothing to say

    code, _, err = run_cli(capsys, "lock", "-f", "a.yml", "--lockfile", "shared.yml", "--update-all")
    assert code == 0 and "another spec" not in err, err  # the same spec's lock: an ordinary re-lock

    code, _, err = run_cli(capsys, "lock", "-f", "b.yml", "--lockfile", "shared.yml")
    assert code == 0, err
    assert "replaced shared.yml, a conda-lock file of a.yml (another spec), with the lock of b.yml" in err, err
    assert yaml.safe_load((tmp_path / "shared.yml").read_text())["metadata"]["sources"] == ["b.yml"]

    # a conda-lock file cut short (conda-lock's header, no package list): replaced, and said so
    text = (tmp_path / "shared.yml").read_text()
    (tmp_path / "cut.yml").write_text(text[: text.index("metadata:")] + "metadata:\n  content_hash: {linux-64: ab")
    code, _, err = run_cli(capsys, "lock", "-f", "b.yml", "--lockfile", "cut.yml")
    assert code == 0 and "replaced cut.yml, a damaged conda-lock file" in err, err
    assert yaml.safe_load((tmp_path / "cut.yml").read_text())["package"]


def test_create_with_a_missing_named_lock_makes_and_builds_nothing(
        tmp_path: Path, channel_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Today's main solved environment.yml into nope.yml and built it, exit 0: a typo in CI installed an
    unreviewed fresh solve."""
    write_env(tmp_path / "environment.yml", channels=[channel_url], deps=[f"python={HOST_PY}"],
              platforms=[host_platform()])
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    make = "envguard lock -f environment.yml --lockfile nope.yml"
    for extra in ([], ["--force"], ["-f", "environment.yml"], ["--locked"], ["--frozen"]):
        code, out, err = run_cli(capsys, "create", "-p", "env", "--lockfile", "nope.yml", *extra)
        line = error_line(err)
        assert code == 4, (extra, code, out, err)
        assert "nope.yml" in line and f"`{make}`" in line, (extra, line)
        assert tree(tmp_path) == before, extra  # no lock, no prefix, nothing beside them

    # the fix runs as printed, and makes exactly that lock
    code, out, err = run_cli(capsys, *shlex.split(make)[1:])
    assert code == 0 and (tmp_path / "nope.yml").is_file(), out + err
    assert not (tmp_path / "conda-lock.yml").exists() and not (tmp_path / "env").exists()


def test_reading_commands_say_how_to_make_a_missing_named_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    write_env(tmp_path / "environment.yml", channels=[NO_CHANNEL], deps=["python=3.12"], platforms=["linux-64"])
    monkeypatch.chdir(tmp_path)
    before = tree(tmp_path)
    cases = {
        ("check", "-p", sys.prefix, "--no-smoke", "--lockfile", "nope.yml"): (2, "envguard lock --lockfile nope.yml"),
        ("why", "python", "--lockfile", "nope.yml"):
            (2, "envguard lock -f environment.yml --lockfile nope.yml"),
        ("lock", "--check", "--lockfile", "nope.yml"): (4, "envguard lock -f environment.yml --lockfile nope.yml"),
        ("diff", "nope.yml", "environment.yml"): (2, None),
    }
    for argv, (expected, make) in cases.items():
        code, out, err = run_cli(capsys, *argv)
        line = error_line(err)
        assert code == expected and "nope.yml" in line, (argv, code, out, err)
        if make:
            assert f"`{make}`" in line, (argv, line)
        assert tree(tmp_path) == before, argv


@pytest.mark.slow
def test_export_force_replaces_locks_only(tmp_path: Path, channel_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`export --force` replaces what an earlier export wrote; a Markdown file standing where its
    conda-lock.yml (or its @EXPLICIT file) goes is refused before anything is written, --force or not."""
    from support import check_envs

    cache = tmp_path / "pkgs"
    cache.mkdir()
    prefix, _ = check_envs.make_env(channel_url, [f"python {HOST_PY}.*"], tmp_path / "env", cache)
    out = tmp_path / "out"
    out.mkdir()
    notes = b"How we lock: see the wiki.\n"
    for fmt, target in (("lock", "conda-lock.yml"), ("explicit", f"conda-{host_platform()}.lock")):
        (out / target).write_bytes(notes)
        before = tree(out)
        for force in ([], ["--force"]):
            code, _, err = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--format", fmt,
                                   "--no-index", *force)
            line = error_line(err)
            assert code == 2 and line.startswith(f"error: {out / target}: -o: a text file, not a"), (
                fmt, force, line)
            assert tree(out) == before, (fmt, force)
        (out / target).unlink()
    code, _, err = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index")
    assert code == 0, err
    code, _, err = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index", "--force")
    assert code == 0, err  # its own earlier lock is replaced as before
