"""`envguard create -p PREFIX` replaces only what envguard made (issue 35, point 2), and says what moved.

A conda environment envguard did not build (``conda-meta/history`` without create's block, no fingerprint)
may hold what its owner put there: a sync of it is refused (exit 2, the prefix untouched) unless --force asks
for it, and with --force the old environment stays in place until the new one is. An environment envguard
built is still a sync. When create rebuilds one, its output says whether the environment drifted from its
lock or the lock moved since it was built (point 9). Every environment is built by the real CLI from real
locks of a small file:// channel; the "foreign" one is an envguard build with envguard's marks taken off and
conda's history put in their place, as conda writes it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import envguard_run, make_lock, run_cli, siblings, tree_state, write_env

from envguard.fingerprint import fingerprint_path, foreign_env, read_fingerprint
from envguard.history import read_built

pytestmark = pytest.mark.slow  # every test builds real environments

CONDA_HISTORY = """==> 2026-11-02 09:14:03 <==
# cmd: /opt/conda/bin/conda create -p {prefix} egsmall-a
# conda version: 24.7.1
+file://{channel}/noarch::egsmall-a-1.0-h0_0
# update specs: ['egsmall-a']
"""


@pytest.fixture
def small(channel_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Two locks of one tiny channel: ``a`` (egsmall-a) and ``ab`` (egsmall-a and egsmall-b), and the channel."""
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    channel = channel_factory([
        {"name": "egsmall-a", "version": "1.0", "noarch": "generic", "files": {"share/egsmall/a.txt": "a\n"}},
        {"name": "egsmall-b", "version": "1.0", "noarch": "generic", "depends": ["egsmall-a"],
         "files": {"share/egsmall/b.txt": "b\n"}},
    ], name="foreign")
    url = channels.channel_url(channel)
    return {"channel": channel, "a": make_lock(write_env(tmp_path / "proj-a", url, ["egsmall-a"])),
            "ab": make_lock(write_env(tmp_path / "proj-ab", url, ["egsmall-b"]))}


def conda_made(prefix: Path, lock: Path, channel: Path, capsys) -> Path:
    """An environment as conda leaves it: the packages of ``lock``, conda's history, no envguard record, and a
    file its owner put there."""
    assert run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(lock), "--no-check")[0] == 0
    fingerprint_path(prefix).unlink()
    (prefix / "conda-meta" / "history").write_text(CONDA_HISTORY.format(prefix=prefix, channel=channel))
    (prefix / "notes.txt").write_text("my notes, kept in the environment\n")
    assert read_fingerprint(prefix) is None and read_built(prefix) is None
    return prefix


def installed(prefix: Path) -> set[str]:
    return {p.name.rsplit("-", 2)[0] for p in (prefix / "conda-meta").glob("*.json")
            if not p.name.startswith("envguard-")}


def test_a_conda_environment_envguard_did_not_build_is_refused_without_force(small: dict[str, Path],
                                                                             tmp_path: Path, capsys) -> None:
    prefix = conda_made(tmp_path / "env", small["a"], small["channel"], capsys)
    assert foreign_env(prefix) == ("a conda environment envguard did not build (conda-meta/history without "
                                   "envguard's record)")
    before = tree_state(prefix)
    code, out, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(small["ab"]), "--no-check")
    assert code == 2 and out == "", err
    [line] = err.strip().splitlines()  # one line: what is there, how it differs, and that --force replaces it
    assert str(prefix) in line and "envguard did not build" in line and "conda-meta/history" in line, line
    assert "egsmall-b 1.0 missing" in line and "--force" in line and "Traceback" not in line, line
    assert tree_state(prefix) == before and siblings(prefix) == []  # nothing touched, the user's file included
    # the same packages as the lock: nothing to replace, and nothing written into it either
    code, out, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(small["a"]), "--no-check")
    assert code == 0 and out.startswith("unchanged:"), err
    assert tree_state(prefix) == before


def test_force_replaces_it_keeping_the_old_one_until_the_new_one_is_in_place(small: dict[str, Path],
                                                                             tmp_path: Path, capsys) -> None:
    prefix = conda_made(tmp_path / "env", small["a"], small["channel"], capsys)
    before = tree_state(prefix)
    # killed once the new environment is complete but not yet in place: the old one, the user's file with it
    proc = envguard_run("create", "-p", str(prefix), "--lockfile", str(small["ab"]), "--force", "--no-check",
                        env={"ENVGUARD_TESTING": "1", "ENVGUARD_TEST_KILL_AT": "staged"})
    assert proc.returncode == -9, proc.stderr
    assert tree_state(prefix) == before
    code, out, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(small["ab"]), "--force",
                             "--no-check")
    assert code == 0 and out.startswith(f"replaced {prefix}"), err
    assert "it differed from the lock" in out and "egsmall-b 1.0 missing" in out, out
    assert not (prefix / "notes.txt").exists() and installed(prefix) == {"egsmall-a", "egsmall-b"}
    assert foreign_env(prefix) is None and siblings(prefix) == []
    # now envguard's: a sync again, without --force, and it says the lock moved (the environment did not drift)
    code, out, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(small["a"]), "--no-check")
    assert code == 0 and out.startswith(f"replaced {prefix}"), err
    assert f"the lock moved: the environment was built from another lock ({small['ab']})" in out, out
    assert "drifted" not in out and installed(prefix) == {"egsmall-a"}


def test_an_environment_without_history_or_fingerprint_is_not_envguards_either(small: dict[str, Path],
                                                                               tmp_path: Path, capsys) -> None:
    """conda-meta/ alone (records a user copied in, no history at all): still not envguard's to replace."""
    prefix = conda_made(tmp_path / "env", small["a"], small["channel"], capsys)
    (prefix / "conda-meta" / "history").unlink()
    code, _, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(small["ab"]), "--no-check")
    assert code == 2 and "(conda-meta/ without envguard's record)" in err and (prefix / "notes.txt").exists(), err


def test_create_says_whether_the_environment_drifted_or_the_lock_moved(small: dict[str, Path], tmp_path: Path,
                                                                       capsys) -> None:
    prefix = tmp_path / "env"
    lock = tmp_path / "conda-lock.yml"
    lock.write_bytes(small["a"].read_bytes())
    assert run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(lock), "--no-check")[0] == 0
    # the environment changed, the lock did not
    (prefix / "share" / "egsmall" / "a.txt").unlink()
    code, out, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(lock), "--no-check")
    assert code == 0 and "  it had drifted from the lock: 1 file of egsmall-a missing" in out, out + err
    # the lock moved (the same file, other packages); the environment is still what was built
    lock.write_bytes(small["ab"].read_bytes())
    code, out, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(lock), "--no-check")
    assert code == 0 and f"  the lock moved: {lock} changed since the environment was built from it: " in out, out
    assert "drifted" not in out and installed(prefix) == {"egsmall-a", "egsmall-b"}, out
    # both
    lock.write_bytes(small["a"].read_bytes())
    (prefix / "share" / "egsmall" / "a.txt").unlink()
    code, out, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(lock), "--no-check")
    assert code == 0 and "the lock moved" in out and "and it had drifted from what was built" in out, out


def test_check_of_a_frozen_colleagues_lock_says_it_is_not_this_specs_not_stale(small: dict[str, Path],
                                                                               tmp_path: Path, capsys) -> None:
    """9: built with --frozen from a colleague's lock kept beside this project's environment.yml, the
    environment is judged by that lock; EG516 says the lock does not come from this environment.yml (it never
    did: calling it stale, "environment.yml changed", was wrong), and its fix runs as written."""
    import json
    import re
    import shlex

    proj = small["a"].parent  # environment.yml: egsmall-a only; its own conda-lock.yml beside it
    theirs = proj / "their-lock.yml"
    theirs.write_bytes(small["ab"].read_bytes())  # made from their environment.yml (egsmall-b)
    prefix = tmp_path / "their-env"
    code, _, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(theirs), "--frozen", "--no-check")
    assert code == 0, err
    code, out, err = run_cli(capsys, "check", "-p", str(prefix), "--no-smoke", "--format", "json")
    report = json.loads(out)
    assert code == 1 and report["lockfile"] == str(theirs), (out, err)
    [f516] = [f for f in report["findings"] if f["code"] == "EG516"]
    spec = proj / "environment.yml"
    assert f516["message"].startswith(f"{theirs} does not come from {spec}"), f516
    assert "--frozen" in f516["message"] and "stale" not in f516["message"], f516
    assert "changed" not in f516["message"], f516
    [command] = re.findall(r"`(envguard [^`]+)`", f516["fix"])
    assert shlex.split(command)[:4] == ["envguard", "create", "-p", str(prefix)], command
    assert run_cli(capsys, *shlex.split(command)[1:], "--no-check")[0] == 0
    code, out, _ = run_cli(capsys, "check", "-p", str(prefix), "--no-smoke", "--format", "json")
    assert code == 0 and installed(prefix) == {"egsmall-a"}, out


def test_checks_fix_for_a_conda_environment_says_force_and_runs_as_written(small: dict[str, Path],
                                                                         tmp_path: Path, capsys) -> None:
    """check's fix of an environment envguard did not build rebuilds it with --force: without it, the fix
    run as written would be refused."""
    import json
    import re
    import shlex

    prefix = conda_made(tmp_path / "env", small["a"], small["channel"], capsys)
    code, out, _ = run_cli(capsys, "check", "-p", str(prefix), "--lockfile", str(small["ab"]), "--no-smoke",
                           "--format", "json")
    findings = json.loads(out)["findings"]
    creates = {c for f in findings for c in re.findall(r"`(envguard create [^`]+)`", f["fix"])}
    assert code == 1 and creates, findings
    for command in creates:
        assert shlex.split(command)[-1] == "--force" and str(prefix) in shlex.split(command), command
    command = sorted(creates)[0]
    assert run_cli(capsys, *shlex.split(command)[1:], "--no-check")[0] == 0
    code, out, _ = run_cli(capsys, "check", "-p", str(prefix), "--lockfile", str(small["ab"]), "--no-smoke",
                           "--format", "json")
    assert code == 0 and installed(prefix) == {"egsmall-a", "egsmall-b"}, out


def test_an_exported_conda_environment_is_left_as_it_is_by_create_of_its_own_lock(small: dict[str, Path],
                                                                                 tmp_path: Path, capsys) -> None:
    """export adopts an environment that works: a create of the lock it wrote, at that same prefix, finds it
    already exactly the lock (`unchanged`) and writes nothing into it; after the spec moves on, the sync
    that would replace it asks for --force."""
    prefix = conda_made(tmp_path / "env", small["a"], small["channel"], capsys)
    out = tmp_path / "exported"
    code, _, err = run_cli(capsys, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index")
    assert code in (0, 1) and (out / "conda-lock.yml").is_file(), err
    before = tree_state(prefix)
    code, stdout, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(out / "conda-lock.yml"),
                                "--no-check")
    assert code == 0 and stdout.startswith("unchanged:"), stdout + err
    assert tree_state(prefix) == before and foreign_env(prefix) is not None
    code, _, err = run_cli(capsys, "create", "-p", str(prefix), "--lockfile", str(small["ab"]), "--no-check")
    assert code == 2 and "--force" in err and tree_state(prefix) == before, err
