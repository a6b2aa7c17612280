"""``variables:`` in environment.yml (CEP 24) end to end: linted (names a shell exports, string values),
carried into the lock's custom_metadata, judged by `lock --check` (conda-lock's hash leaves them out),
written by create into ``conda-meta/state`` as conda writes it, applied by `envguard run` (rattler's activator
reads the state file), shown by `diff`, and written back by `export`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import envguard_run, make_lock, write_env

DUMP = "import json, os; print(json.dumps(dict(os.environ)))"
PY = sys.executable


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("vars-channel")
    channels.make_channel(root, [{"name": "egplain", "version": "1.0", "noarch": "generic",
                                  "files": {"share/egplain.txt": "x\n"}}],
                          subdirs=("noarch", channels.host_platform()))
    return channels.channel_url(root)


def _with_variables(spec: Path, variables: dict[str, str]) -> None:
    lines = [line for line in spec.read_text().splitlines() if line]
    cut = lines.index("variables:") if "variables:" in lines else len(lines)
    body = [f"  {k}: {json.dumps(v)}" for k, v in variables.items()]
    spec.write_text("\n".join(lines[:cut] + (["variables:", *body] if body else [])) + "\n")


def _lock_meta(lock: Path) -> dict[str, str]:
    from envguard.lock import read_metadata

    return dict((read_metadata(lock) or {}).get("custom_metadata") or {})


@pytest.mark.slow
def test_variables_round_trip_spec_lock_state_run_export(tmp_path: Path, channel: str) -> None:
    work, env = tmp_path / "work", tmp_path / "env"
    spec = write_env(work, channel, ["egplain"])
    _with_variables(spec, {"EG_MODE": "train", "EG_DATA": "/data/set one"})
    lock = make_lock(spec)
    meta = _lock_meta(lock)
    assert meta["envguard.variables.EG_MODE"] == "train" and meta["envguard.variables.EG_DATA"] == "/data/set one"
    fresh = envguard_run("lock", "--check", cwd=work)
    assert fresh.returncode == 0, fresh.stderr

    first = envguard_run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work, timeout=300)
    assert first.returncode == 0, first.stderr
    seen = json.loads(first.stdout)
    assert seen["EG_MODE"] == "train" and seen["EG_DATA"] == "/data/set one"
    state = json.loads((env / "conda-meta" / "state").read_text())
    assert state["env_vars"] == {"EG_MODE": "train", "EG_DATA": "/data/set one"}
    assert envguard_run("diff", str(lock), str(env), cwd=work).returncode == 0  # the environment is its lock

    # one set by hand (`conda env config vars set`) beside them: kept across a sync
    state["env_vars"]["BY_HAND"] = "mine"
    (env / "conda-meta" / "state").write_text(json.dumps(state))

    # an edit of variables: alone makes the lock stale (conda-lock's content hash would call it fresh)
    _with_variables(spec, {"EG_MODE": "eval"})
    stale = envguard_run("lock", "--check", cwd=work)
    assert stale.returncode == 4 and "variables:" in stale.stderr and "EG_MODE" in stale.stderr, stale.stderr
    shown = envguard_run("diff", str(spec), str(lock), cwd=work)
    assert shown.returncode == 1, shown.stderr
    assert "variable EG_MODE changed: A 'eval', B 'train'" in shown.stdout
    assert "variable EG_DATA removed in B" not in shown.stdout and "variable EG_DATA added in B" in shown.stdout
    refused = envguard_run("run", "--locked", "-p", str(env), "--", PY, "-c", DUMP, cwd=work)
    assert refused.returncode == 4, refused.stderr

    synced = envguard_run("run", "-p", str(env), "--", PY, "-c", DUMP, cwd=work, timeout=300)
    assert synced.returncode == 0, synced.stderr
    seen = json.loads(synced.stdout)
    assert seen["EG_MODE"] == "eval" and "EG_DATA" not in seen and seen["BY_HAND"] == "mine"
    assert _lock_meta(lock).get("envguard.variables.EG_DATA") is None
    assert json.loads((env / "conda-meta" / "state").read_text())["env_vars"] == {"BY_HAND": "mine", "EG_MODE": "eval"}

    out = tmp_path / "exported"
    exported = envguard_run("export", "-p", str(env), "--output-dir", str(out), cwd=tmp_path, timeout=300)
    assert exported.returncode in (0, 1), exported.stderr
    import yaml

    written = yaml.safe_load((out / "environment.yml").read_text())
    assert written["variables"] == {"BY_HAND": "mine", "EG_MODE": "eval"}
    # the exported lock carries them too: it is fresh for the exported file
    assert _lock_meta(out / "conda-lock.yml")["envguard.variables.EG_MODE"] == "eval"
    again = envguard_run("lock", "--check", "-f", str(out / "environment.yml"), "--lockfile",
                         str(out / "conda-lock.yml"), cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_bad_variables_are_linted_and_refused_by_lock(tmp_path: Path) -> None:
    from envguard.errors import UserError
    from envguard.lint import lint_paths
    from envguard.lock.spec import read_spec

    spec = tmp_path / "environment.yml"
    spec.write_text("name: t\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\nvariables:\n"
                    "  GOOD: \"fine\"\n  bad-name: x\n  VERSION: 1.10\n  EMPTY:\n  HOME_DIR: \"$HOME/x\"\n"
                    "  PATH: /opt/bin\n  lower: \"v\"\n")
    found = [f for f in lint_paths([spec]).findings if f.code == "EG140"]
    by_line = {f.line: f for f in found}
    assert sorted(by_line) == [7, 8, 9, 10, 11, 12], found
    assert "not an environment variable name" in by_line[7].message
    assert "float" in by_line[8].message and "quote it" in (by_line[8].fix or "")
    assert "null" in by_line[9].message
    assert "'$'" in by_line[10].message
    assert "set by activation itself" in by_line[11].message
    assert str(by_line[12].severity.value) == "warning" and "LOWER" in by_line[12].message
    with pytest.raises(UserError) as err:
        read_spec([spec])
    assert "variables.bad-name" in str(err.value.format() if hasattr(err.value, "format") else err.value)
    ok = tmp_path / "ok.yml"
    ok.write_text("name: t\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\nvariables:\n  A_B: \"1.10\"\n")
    assert not [f for f in lint_paths([ok]).findings if f.code == "EG140"]
    notmap = tmp_path / "list.yml"
    notmap.write_text("name: t\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\nvariables:\n  - A=1\n")
    assert [f.line for f in lint_paths([notmap]).findings if f.code == "EG140"] == [5]


def test_diff_of_two_environment_files_shows_variable_changes(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yml", tmp_path / "b.yml"
    base = "name: t\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n"
    a.write_text(base + "variables:\n  KEEP: \"1\"\n  OLD: \"x\"\n  MODE: \"a\"\n")
    b.write_text(base + "variables:\n  KEEP: \"1\"\n  NEW: \"y\"\n  MODE: \"b\"\n")
    proc = envguard_run("diff", str(a), str(b), "--format", "json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert sorted(doc["spec_changes"]) == ["variable MODE changed: A 'a', B 'b'", "variable NEW added in B ('y')",
                                           "variable OLD removed in B (was 'x')"]
    assert "3 variable changes" in doc["summary"] and not doc["equal"]
    same = envguard_run("diff", str(a), str(a), cwd=tmp_path)
    assert same.returncode == 0, same.stdout


def test_a_state_file_activation_would_misread_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from envguard.cli import run

    monkeypatch.setattr(os, "execve", lambda *a: (_ for _ in ()).throw(AssertionError("exec reached")))
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    state = prefix / "conda-meta" / "state"
    state.write_text(json.dumps({"env_vars": {"X": "$(touch /tmp/eg-never)"}}))
    assert run(["shell-hook", "--no-sync", "-p", str(prefix)]) == 2
    err = capsys.readouterr().err
    assert "conda-meta/state" in err and "env_vars.X" in err
    state.write_text(json.dumps({"other": 1}))  # rattler fails on a state without env_vars: said as bad input
    assert run(["shell-hook", "--no-sync", "-p", str(prefix)]) == 2
    state.write_text(json.dumps({"env_vars": {"FINE": "a b"}}))
    assert run(["shell-hook", "--no-sync", "-p", str(prefix), "--shell", "bash"]) == 0
    assert "FINE" in capsys.readouterr().out
