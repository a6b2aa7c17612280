"""No credential on disk: after lock, create, check and diff against an authenticated channel and index,
no file under a fresh HOME, XDG_CACHE_HOME and TMPDIR (nor the project or the new environment) holds the
user name, the password or the token (docs/reliability.md).

Failure 3: rattler's repodata cache (``rattler/cache/*.info.json``, mode 0644, and the shard
caches) kept the full channel URL with ``user:password@`` or ``/t/<token>/``. Everything here is the real
CLI in subprocesses, against a real HTTP server on 127.0.0.1 that requires Basic auth *and* a token path,
and a PEP 503 index behind Basic auth for the ``pip:`` section.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import channels
from support.channels import HOST_PY

from envguard.redact import redact

USER, PASSWORD, TOKEN = "eg-alice-4242", "eg-pw-S3cr3t-77", "eg-tok-9d8e7f"
SECRETS = (USER, PASSWORD, TOKEN)


def test_placeholder_mixed_with_a_literal_is_masked() -> None:
    assert redact("https://${USER}:literalpw@host/c") == "https://***@host/c"
    assert redact("https://literaluser:${PASS}@host/c") == "https://***@host/c"
    assert redact("https://eg-alice@host/c") == "https://***@host/c"  # a user name alone is masked too
    assert redact("https://${USER}:${PASS}@host/c") == "https://${USER}:${PASS}@host/c"


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, str]:
    """A fresh HOME, XDG_CACHE_HOME and TMPDIR; no cache variable of the test session leaks in."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RATTLER_CACHE_DIR", "CONDA_PKGS_DIRS", "PIP_CACHE_DIR", "ENVGUARD_PKGS_DIR",
                        "PRE_COMMIT_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "RATTLER_AUTH_FILE")}
    for var, sub in (("HOME", "home"), ("XDG_CACHE_HOME", "cache"), ("TMPDIR", "tmp")):
        (tmp_path / sub).mkdir()
        env[var] = str(tmp_path / sub)
    return env


def _envguard(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "envguard", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)
    shown = [s for s in SECRETS if s in proc.stdout + proc.stderr]
    assert not shown, (args, shown, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def _leaks(*roots: Path) -> list[str]:
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                found += [f"{path}: {s}" for s in SECRETS if s.encode() in data]
    return found


@pytest.mark.slow
def test_lock_create_check_diff_leave_no_credential_on_disk(tmp_path: Path, sandbox: dict[str, str],
                                                              channel_factory, standard_channel) -> None:
    host = channels.host_platform()
    chan = channel_factory.copy(standard_channel.path, "private")
    server = channel_factory.serve(chan, auth=(USER, PASSWORD), token=TOKEN)
    port = server.base_url.rsplit(":", 1)[1]
    index = channels.standard_pypi_index(tmp_path / "pypi")
    pypi = channel_factory.serve(index.root, auth=(USER, PASSWORD))
    pypi_port = pypi.base_url.rsplit(":", 1)[1]

    # 1. literal credentials: the solve uses them, nothing keeps them
    literal = tmp_path / "literal"
    literal.mkdir()
    (literal / "environment.yml").write_text(
        f"name: l\nchannels:\n  - http://{USER}:{PASSWORD}@127.0.0.1:{port}/t/{TOKEN}\n"
        f"dependencies:\n  - python={HOST_PY}\n  - egtool\nplatforms:\n  - {host}\n")
    assert _envguard(sandbox, literal, "lock", "--no-cuda").returncode == 0
    assert _envguard(sandbox, literal, "lock", "--check").returncode == 0
    assert _envguard(sandbox, literal, "diff", "environment.yml", "conda-lock.yml").returncode == 0
    assert _envguard(sandbox, literal, "--verbose", "lint").returncode == 1  # EG115, the credential itself
    caches = (Path(sandbox["HOME"]), Path(sandbox["XDG_CACHE_HOME"]), Path(sandbox["TMPDIR"]))
    assert _leaks(*caches) == []  # rattler's repodata cache kept the whole URL (*.info.json, 0644)

    # 2. ${VAR} placeholders, for the channel and for the pip index: installable, nothing kept either
    creds = {**sandbox, "EG_USER": USER, "EG_PW": PASSWORD, "EG_TOKEN": TOKEN}
    project = tmp_path / "project"
    project.mkdir()
    (project / "environment.yml").write_text(
        f"name: p\nchannels:\n  - http://${{EG_USER}}:${{EG_PW}}@127.0.0.1:{port}/t/${{EG_TOKEN}}\n"
        f"dependencies:\n  - python={HOST_PY}\n  - pip\n  - egtool\n  - pip:\n    - egdemo-b==1.0\n"
        f"pip-repositories:\n  - http://${{EG_USER}}:${{EG_PW}}@127.0.0.1:{pypi_port}/simple\n"
        f"allow-pypi-requests: false\nplatforms:\n  - {host}\n")
    locked = _envguard(creds, project, "lock", "--no-cuda")
    assert locked.returncode == 0, locked.stderr
    lock_text = (project / "conda-lock.yml").read_text()
    # the pip URLs keep their placeholders too (they were written bare, so create failed with 401)
    assert f"url: http://${{EG_USER}}:${{EG_PW}}@127.0.0.1:{pypi_port}/files/egdemo_b-1.0" in lock_text
    assert f"url: http://${{EG_USER}}:${{EG_PW}}@127.0.0.1:{port}/t/${{EG_TOKEN}}/" in lock_text
    env = tmp_path / "env"
    created = _envguard(creds, project, "create", "-p", str(env), "--no-check")
    assert created.returncode == 0, created.stderr
    assert "+ 2 pip" in created.stdout
    assert [r for r in server.requests if r.endswith(".tar.bz2")] and pypi.requests
    record = json.loads(next((env / "conda-meta").glob("egtool-*.json")).read_text())
    assert record["url"].startswith(f"http://${{EG_USER}}:${{EG_PW}}@127.0.0.1:{port}/t/${{EG_TOKEN}}/")
    for fmt in ("text", "json"):
        check = _envguard(creds, project, "check", "-p", str(env), "--no-smoke", "--lockfile", "conda-lock.yml",
                          "--format", fmt)
        assert check.returncode in (0, 1), check.stderr
        assert _envguard(creds, project, "diff", "conda-lock.yml", str(env), "--format", fmt).returncode in (0, 1)

    leaked = _leaks(*caches, literal, project, env)
    assert leaked == [f"{literal / 'environment.yml'}: {s}" for s in SECRETS]  # the user's own input only
    # and the caches were really used (a test that could not fail otherwise)
    assert list((Path(sandbox["XDG_CACHE_HOME"]) / "rattler" / "cache").rglob("*.info.json"))
    assert list((Path(sandbox["XDG_CACHE_HOME"]) / "rattler" / "cache" / "pkgs").glob("egtool-*"))


@pytest.mark.slow
def test_verbose_tracebacks_are_masked_too(tmp_path: Path, sandbox: dict[str, str], channel_factory) -> None:
    """``--verbose`` printed the user name in one error chain (the installer's own error, chained under
    envguard's): the traceback now goes through redact like every other message."""
    chan = channels.make_channel(tmp_path / "chan", [
        {"name": "egsecret", "version": "1.0", "noarch": "generic", "files": {"share/egsecret.txt": "ok\n"}}])
    server = channel_factory.serve(chan, auth=(USER, PASSWORD))
    port = server.base_url.rsplit(":", 1)[1]
    project = tmp_path / "p"
    project.mkdir()
    (project / "environment.yml").write_text(
        f"name: d\nchannels:\n  - http://${{EG_USER}}:${{EG_PW}}@127.0.0.1:{port}\n"
        f"dependencies:\n  - egsecret\nplatforms:\n  - {channels.host_platform()}\n")
    good = {**sandbox, "EG_USER": USER, "EG_PW": PASSWORD}
    assert _envguard(good, project, "lock", "--no-cuda").returncode == 0
    wrong = {**good, "EG_PW": "not-the-password"}
    for argv in (["--verbose", "create", "-p", str(tmp_path / "env"), "--no-check"],
                 ["create", "-p", str(tmp_path / "env"), "--no-check", "-v"],  # -v after the command
                 ["--verbose", "lock", "--no-cuda"], ["lock", "--no-cuda", "-v"]):
        proc = subprocess.run([sys.executable, "-m", "envguard", *argv], capture_output=True, text=True,
                              cwd=project, env=wrong, timeout=120)
        assert proc.returncode == 6 and "401" in proc.stderr, proc.stderr
        assert "Traceback" in proc.stderr, (argv, proc.stderr)  # the traceback was shown, and masked
        assert [s for s in SECRETS if s in proc.stdout + proc.stderr] == [], proc.stderr
    # an error whose own text quotes the literal URL (conda-lock's parser): the traceback repeats it
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "environment.yml").write_text(f"name: b\nchannels:\n  - http://{USER}:{PASSWORD}@[::1/chan\n"
                                         f"dependencies:\n  - egsecret\nplatforms:\n  - {channels.host_platform()}\n")
    for argv in (["--verbose", "lock"], ["lock", "-v"]):
        proc = subprocess.run([sys.executable, "-m", "envguard", *argv], capture_output=True, text=True,
                              cwd=bad, env=sandbox, timeout=120)
        assert proc.returncode == 2 and "Traceback" in proc.stderr and "***@[::1" in proc.stderr, proc.stderr
        assert [s for s in SECRETS if s in proc.stdout + proc.stderr] == [], proc.stderr
