"""Channel credentials (``user:password@`` and ``/t/<token>``) never reach a lock, a terminal or a report.

Real runs: a test channel served over HTTP behind basic auth and a token path, the real CLI in subprocesses
(lock, lint, diff, create, check, lock --check), every stdout, stderr and written file searched for the secrets,
and every JSON output parsed (masking must not eat the quote that ends a URL).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.redact import redact

USER, PASSWORD, TOKEN = "alice-user", "pw-S3cr3t", "tk-T0ken77"
SECRETS = (USER, PASSWORD, TOKEN)


@pytest.mark.parametrize("text, expected", [
    ('{"channel": "http://u:p@h/t/tok", "n": 1}', '{"channel": "http://***@h/t/***", "n": 1}'),
    ("(http://h/t/tok)", "(http://h/t/***)"),
    ("`http://h/t/tok`, next", "`http://h/t/***`, next"),
    ('"https://h/x?token=abc"', '"https://h/x?token=***"'),
    ('["http://u:p@h","x@y"]', '["http://***@h","x@y"]'),
    ("http://${U}:${P}@h/t/${T}/linux-64", "http://${U}:${P}@h/t/${T}/linux-64"),
    ("https://u:p(a)ss@h/t/tok/noarch/a-1-0.conda", "https://***@h/t/***/noarch/a-1-0.conda"),
])
def test_redact_masks_the_secret_and_nothing_around_it(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redacted_json_stays_json() -> None:
    doc = {"channel": f"http://{USER}:{PASSWORD}@h:1/t/{TOKEN}", "url": f"https://h/t/{TOKEN}",
           "list": [f"http://h/x?token={TOKEN}", "after"]}
    text = redact(json.dumps(doc, indent=2))
    assert json.loads(text)["list"][1] == "after" and not [s for s in SECRETS if s in text]


def _envguard(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "envguard", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=180)


def _clean(proc: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    leaked = [s for s in SECRETS if s in proc.stdout + proc.stderr]
    assert not leaked, (what, leaked, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (what, proc.stderr)
    return proc


def _env_file(path: Path, channel: str) -> Path:
    from envguard.platforms import host_platform

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"name: s\nchannels:\n  - {channel}\ndependencies:\n  - python=3.11\n  - egsecret\n"
                    f"platforms:\n  - {host_platform()}\n")
    return path


@pytest.fixture
def server(channel_factory):
    from envguard.platforms import host_platform

    chan = channel_factory([
        {"name": "python", "version": "3.11.9", "build": "h0_0", "subdir": host_platform(),
         "files": {"share/python-stub.txt": "not an interpreter\n"}},
        {"name": "egsecret", "version": "1.0", "noarch": "generic", "files": {"share/egsecret.txt": "ok\n"}},
    ], name="private")
    # the token is the URL's last segment: the case where masking used to swallow the closing quote
    srv = channel_factory.serve(chan, auth=(USER, PASSWORD), token=TOKEN)
    assert srv.url.endswith(f"/t/{TOKEN}")
    return srv


@pytest.mark.slow
def test_literal_credentials_stay_out_of_lock_and_output(server, tmp_path: Path) -> None:
    project = tmp_path / "literal"
    env = _env_file(project / "environment.yml", server.url_with_auth(USER, PASSWORD))
    locked = _clean(_envguard("lock", "--no-cuda", cwd=project), "lock")
    assert locked.returncode == 0, locked.stderr
    assert "literal credential" in locked.stderr  # warned, masked
    assert server.requests  # the solve really went through the authenticated server
    lock_text = (project / "conda-lock.yml").read_text()
    assert not [s for s in SECRETS if s in lock_text] and "http://***@127.0.0.1" in lock_text

    assert _clean(_envguard("lock", "--check", cwd=project), "lock --check").returncode == 0
    for fmt in ("text", "json", "markdown"):
        lint = _clean(_envguard("lint", "--format", fmt, cwd=project), f"lint {fmt}")
        assert lint.returncode == 1 and "EG115" in lint.stdout  # the credential itself is a lint error
        if fmt == "json":
            json.loads(lint.stdout)
        diff = _clean(_envguard("diff", str(env), "conda-lock.yml", "--format", fmt, cwd=project), f"diff {fmt}")
        assert diff.returncode == 0, diff.stderr
        if fmt == "json":
            doc = json.loads(diff.stdout)
            assert doc["spec_reports"][0]["checks"][-1]["locked"]["channel"].endswith("/t/***")
    # the lock holds no credentials, so installing from it cannot work: create says why and how, before any
    # download (it used to be the server's 401, exit 6, with no hint at the cause)
    asked = len(server.requests)
    created = _clean(_envguard("create", "-p", str(tmp_path / "env"), "--no-check", cwd=project,
                               env={"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs")}), "create")
    assert created.returncode == 2 and created.stderr.count("\n") == 1, created.stderr
    assert "credential masked" in created.stderr and "${VAR}" in created.stderr, created.stderr
    assert len(server.requests) == asked and not (tmp_path / "env").exists()


@pytest.mark.slow
def test_placeholder_credentials_install_and_reports_stay_clean(server, tmp_path: Path) -> None:
    project = tmp_path / "templated"
    port = server.base_url.rsplit(":", 1)[1]
    channel = f"http://${{EG_SECRET_USER}}:${{EG_SECRET_PW}}@127.0.0.1:{port}/t/${{EG_SECRET_TOKEN}}"
    env_file = _env_file(project / "environment.yml", channel)
    creds = {"EG_SECRET_USER": USER, "EG_SECRET_PW": PASSWORD, "EG_SECRET_TOKEN": TOKEN,
             "ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs")}
    assert _clean(_envguard("lock", "--no-cuda", cwd=project, env=creds), "lock").returncode == 0
    lock_text = (project / "conda-lock.yml").read_text()
    assert not [s for s in SECRETS if s in lock_text] and f"url: {channel}" in lock_text

    prefix = tmp_path / "env"
    created = _clean(_envguard("create", "-p", str(prefix), "--no-check", cwd=project, env=creds), "create")
    assert created.returncode == 0, created.stderr
    downloads = [r for r in server.requests if r.endswith((".conda", ".tar.bz2"))]
    assert len(downloads) == 2  # both packages came through the authenticated server
    assert (prefix / "share" / "egsecret.txt").read_text() == "ok\n"

    for fmt in ("text", "json", "markdown"):
        check = _clean(_envguard("check", "-p", str(prefix), "--no-smoke", "--lockfile", "conda-lock.yml",
                                 "--format", fmt, cwd=project, env=creds), f"check {fmt}")
        assert check.returncode in (0, 1), check.stderr
        if fmt == "json":
            report = json.loads(check.stdout)
            assert {p["name"] for p in report["packages"]} == {"python", "egsecret"}
            (tmp_path / "report.json").write_text(check.stdout)
        diff = _clean(_envguard("diff", str(env_file), str(prefix), "--format", fmt, cwd=project, env=creds),
                      f"diff {fmt}")
        assert diff.returncode == 0, diff.stdout + diff.stderr
        if fmt == "json":
            json.loads(diff.stdout)
    report = _clean(_envguard("diff", str(tmp_path / "report.json"), "conda-lock.yml", "--format", "json",
                              cwd=project, env=creds), "diff report")
    assert report.returncode == 0 and json.loads(report.stdout)["equal"] is True


@pytest.mark.slow
def test_unreachable_channel_error_is_masked_and_one_line(tmp_path: Path) -> None:
    project = tmp_path / "down"
    _env_file(project / "environment.yml", f"http://{USER}:{PASSWORD}@127.0.0.1:9/t/{TOKEN}/chan")
    failed = _clean(_envguard("lock", "--no-cuda", cwd=project), "lock")
    assert failed.returncode == 6
    # besides the literal-credential warning, exactly one line: rattler's "Caused by:" chain is joined into it
    errors = [ln for ln in failed.stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert len(errors) == 1 and errors[0].startswith("error: cannot load channels"), failed.stderr
    assert "/t/***" in errors[0] and "Caused by" in errors[0], failed.stderr
    assert not (project / "conda-lock.yml").exists()
