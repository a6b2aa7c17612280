"""`envguard create`: real locks (`envguard lock`), real rattler installs from the test channels.

Every environment here is built by the real CLI, in-process (``cli.run``) or, where a process must die or
two must race, as real subprocesses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from support import channels
from support.channels import HOST_PY
from support.create_fixtures import (
    BASE_DEPS,
    ENVGUARD,
    envguard_popen,
    envguard_run,
    make_lock,
    run_cli,
    siblings,
    tree_state,
    write_env,
)

from envguard import render
from envguard.create.integrity import cache_entry_sha256
from envguard.create.prefixlock import holder_path
from envguard.fingerprint import read_fingerprint
from envguard.platforms import python_in_prefix

pytestmark = pytest.mark.slow  # each test creates real environments


def run_python(prefix: Path, code: str) -> subprocess.CompletedProcess[str]:
    script = prefix.parent / f"probe_{prefix.name}.py"  # a file, not `python -c`
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([python_in_prefix(prefix), str(script)], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture(scope="module")
def base_lock(tmp_path_factory: pytest.TempPathFactory, channel_url: str) -> Path:
    env_file = write_env(tmp_path_factory.mktemp("base"), channel_url, BASE_DEPS)
    return make_lock(env_file)


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "pkgs"
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(cache))
    return cache


def small_channel(channel_factory, name: str = "small") -> Path:
    """Three tiny noarch packages: egsmall-a, egsmall-b (needs a), egtamper."""
    return channel_factory([
        {"name": "egsmall-a", "version": "1.0", "noarch": "generic", "files": {"share/egsmall/a.txt": "a\n"}},
        {"name": "egsmall-b", "version": "1.0", "noarch": "generic", "depends": ["egsmall-a"],
         "files": {"share/egsmall/b.txt": "b\n"}},
        {"name": "egtamper", "version": "1.0", "noarch": "generic", "files": {"share/egtamper/data.txt": "original\n"}},
    ], name=name)


def small_lock(tmp_path: Path, url: str) -> Path:
    return make_lock(write_env(tmp_path / "proj", url, ["egsmall-b", "egtamper"]))


def tamper(channel_dir: Path) -> str:
    """Rebuild egtamper 1.0 at the same URL with different bytes; return the new sha256."""
    path = channels.build_package(channel_dir, "egtamper", "1.0", "h0_0", noarch="generic",
                                  files={"share/egtamper/data.txt": "original\n"}, extra_bytes=b"evil")
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def locked_sha(lockfile: Path, name: str) -> str:
    from envguard.lock.lockfile import read_lock

    return next(p.sha256 for p in read_lock(lockfile).packages if p.name == name)


# --------------------------------------------------------------------------- round trips


def test_round_trip_local_channel(tmp_path: Path, base_lock: Path, capsys) -> None:
    target = tmp_path / "env"
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")
    assert code == 0, err
    assert f"created {target}" in out and "7 conda" in out
    # the environment's own interpreter runs, with the env as sys.prefix, and imports the real torch
    proc = run_python(target, "import sys, torch, numpy, egtool\nprint(sys.prefix)\n"
                               "print(torch.tensor([1.0, 2.0]).sum().item())\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(target), "3.0"]
    # entry points and prefix placeholders carry the final path, not the staging directory
    tool = subprocess.run([str(target / "bin" / "egtool")], capture_output=True, text=True)
    assert tool.stdout.strip() == f"egtool {target}"
    assert (target / "etc" / "egplaceholder.conf").read_text() == f"prefix={target}\n"
    assert (target / "bin" / "eglink-data").read_text() == (target / "share/eglink/target.txt").read_text()
    fp = read_fingerprint(target)
    assert fp is not None and fp.platform == channels.host_platform() and fp.backend == "rattler"
    assert fp.conda["pytorch"] == locked_sha(base_lock, "pytorch")
    assert siblings(target) == []
    # same lock again: nothing to do, nothing touched
    before = tree_state(target)
    code, out, _ = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")
    assert code == 0 and out.startswith("unchanged:")
    assert tree_state(target) == before


def test_round_trip_http_channel(tmp_path: Path, standard_channel, private_cache: Path, capsys) -> None:
    with channels.serve_directory(standard_channel.path, prefix="channel") as server:
        lockfile = make_lock(write_env(tmp_path / "proj", server.url, [f"python={HOST_PY}", "egtool", "eglink"]))
        target = tmp_path / "env"
        code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
        assert code == 0, err
        downloads = [r for r in server.requests if r.endswith((".tar.bz2", ".conda"))]
    assert len(downloads) == 3  # every package came over HTTP into the empty cache
    proc = run_python(target, "import sys, egtool\nprint(sys.prefix)\n")
    assert proc.stdout.strip() == str(target), proc.stderr
    assert cache_entry_sha256(private_cache, f"egtool-1.0.0-{_build(lockfile, 'egtool')}") == \
        locked_sha(lockfile, "egtool")


def _build(lockfile: Path, name: str) -> str:
    from envguard.lock.lockfile import read_lock

    return next(p.build for p in read_lock(lockfile).packages if p.name == name)


def test_named_env_goes_to_envguard_envs_dir(tmp_path: Path, channel_factory, monkeypatch, capsys) -> None:
    chan = small_channel(channel_factory)
    lockfile = small_lock(tmp_path, channels.channel_url(chan))
    monkeypatch.setenv("ENVGUARD_ENVS_DIR", str(tmp_path / "envs"))
    code, out, err = run_cli(capsys, "create", "-n", "demo", "--lockfile", str(lockfile), "--no-check")
    assert code == 0, err
    assert (tmp_path / "envs" / "demo" / "share" / "egsmall" / "b.txt").read_text() == "b\n"


def test_create_from_environment_file_locks_first(tmp_path: Path, channel_factory, capsys) -> None:
    chan = small_channel(channel_factory)
    env_file = write_env(tmp_path / "proj", channels.channel_url(chan), ["egsmall-b"])
    target = tmp_path / "env"
    code, _, err = run_cli(capsys, "create", "-p", str(target), "-f", str(env_file), "--no-check")
    assert code == 0, err
    assert (env_file.parent / "conda-lock.yml").is_file()
    assert (target / "share" / "egsmall" / "a.txt").is_file()


def test_post_create_check_runs_in_the_new_env(tmp_path: Path, base_lock: Path, capsys) -> None:
    target = tmp_path / "env"
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock))
    assert code == 0, out + err
    assert f"envguard check {target}" in out and "0 errors" in out


# --------------------------------------------------------------------------- integrity


def test_tampered_local_artifact_exits_3_and_purges_cache(tmp_path: Path, channel_factory, private_cache,
                                                          capsys) -> None:
    chan = small_channel(channel_factory)
    lockfile = small_lock(tmp_path, channels.channel_url(chan))
    # a good create fills the cache with egtamper
    assert run_cli(capsys, "create", "-p", str(tmp_path / "first"), "--lockfile", str(lockfile), "--no-check")[0] == 0
    stem = "egtamper-1.0-h0_0"
    assert (private_cache / stem).is_dir()
    expected = locked_sha(lockfile, "egtamper")
    actual = tamper(chan)
    target = tmp_path / "env"
    code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
    assert code == 3
    assert "egtamper 1.0" in err and expected in err and actual in err
    assert not target.exists() and siblings(target) == []
    assert not (private_cache / stem).exists() and not (private_cache / f"{stem}.lock").exists()


def test_tampered_http_artifact_exits_3(tmp_path: Path, channel_factory, private_cache, capsys) -> None:
    chan = small_channel(channel_factory, "served")
    server = channel_factory.serve(chan)
    lockfile = small_lock(tmp_path, server.url)
    expected = locked_sha(lockfile, "egtamper")
    actual = tamper(chan)
    target = tmp_path / "env"
    code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
    assert code == 3, err
    assert "egtamper 1.0" in err and expected in err and actual in err
    assert not target.exists() and siblings(target) == []
    leftovers = [p.name for p in private_cache.iterdir() if "egtamper" in p.name]
    assert leftovers == []


def test_tampered_sha256_in_lock_exits_3(tmp_path: Path, channel_factory, capsys) -> None:
    chan = small_channel(channel_factory)
    lockfile = small_lock(tmp_path, channels.channel_url(chan))
    real = locked_sha(lockfile, "egsmall-a")
    fake = "ab" * 32
    lockfile.write_text(lockfile.read_text().replace(real, fake))
    target = tmp_path / "env"
    code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
    assert code == 3
    assert "egsmall-a" in err and fake in err and real in err
    assert not target.exists()


def test_verified_stamps_skip_rehashing_but_never_a_changed_artifact(tmp_path: Path, channel_factory,
                                                                    private_cache, monkeypatch, capsys) -> None:
    """A warm create trusts a recorded hash only for the very same file: a rebuilt artifact is hashed again."""
    from envguard.create import integrity

    monkeypatch.setattr(integrity, "STAMP_MIN_AGE_NS", 0)  # the fixture's files are seconds old
    hashed: list[str] = []
    real_digest = integrity.file_digest
    monkeypatch.setattr(integrity, "file_digest", lambda path, algorithm="sha256": (
        hashed.append(Path(path).name), real_digest(path, algorithm))[1])
    chan = small_channel(channel_factory, "stamped")
    lockfile = small_lock(tmp_path, channels.channel_url(chan))
    assert run_cli(capsys, "create", "-p", str(tmp_path / "one"), "--lockfile", str(lockfile), "--no-check")[0] == 0
    # cold: each archive is hashed once, as it is copied into the private folder (archive.private_copy, not
    # file_digest), and that hash is stamped for the file it read
    assert hashed == [] and (private_cache / integrity.VerifiedStamps.NAME).is_file()
    assert len(integrity.VerifiedStamps(private_cache).entries) == 3
    assert run_cli(capsys, "create", "-p", str(tmp_path / "two"), "--lockfile", str(lockfile), "--no-check")[0] == 0
    assert hashed == []  # all three vouched for by their stamps
    expected = locked_sha(lockfile, "egtamper")
    actual = tamper(chan)
    target = tmp_path / "three"
    code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
    assert code == 3, err
    assert len(hashed) == 1 and hashed[0].startswith("egtamper-1.0-h0_0.")  # only the changed file
    assert "egtamper 1.0" in err and expected in err and actual in err
    assert not target.exists() and not (private_cache / "egtamper-1.0-h0_0").exists()


def test_recently_changed_artifacts_get_no_stamp(tmp_path: Path, channel_factory, private_cache, capsys) -> None:
    """Files changed within STAMP_MIN_AGE_NS could be rewritten within one clock tick unnoticed: no stamp."""
    from envguard.create import integrity

    chan = small_channel(channel_factory, "fresh")
    lockfile = small_lock(tmp_path, channels.channel_url(chan))
    assert run_cli(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile", str(lockfile), "--no-check")[0] == 0
    stamps = integrity.VerifiedStamps(private_cache)
    assert stamps.entries == {}


def test_create_process_imports_no_yaml_rich_pydantic_or_conda_lock(tmp_path: Path, base_lock: Path) -> None:
    """The whole-process cost of a quiet create (bench/create.py): PyYAML, rich, pydantic and conda-lock stay
    unimported when a lock exists and nothing is displayed. (typer 0.29 imports pydantic to parse any option:
    ~0.1 s, which is why pyproject.toml keeps typer below 0.29; bench/README.md, "start-up".)"""
    proc = subprocess.run([*ENVGUARD, "create", "-p", str(tmp_path / "env"), "--lockfile", str(base_lock),
                           "--no-check", "--quiet"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("created ")
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "rattler" in imported and "envguard.create" in imported
    assert not {"yaml", "rich", "rich.console", "conda_lock", "pydantic", "pydantic_core"} & imported


def test_bad_option_values_keep_typers_message(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "--timeout", "soon")
    assert code == 2
    assert "--timeout" in err and "'soon' is not a valid" in err  # typer's own words


# --------------------------------------------------------------------------- pip


@pytest.fixture
def pip_lock(tmp_path: Path, channel_url: str, pypi_index, base_lock) -> Path:
    return make_lock(write_env(tmp_path / "pipproj", channel_url, [f"python={HOST_PY}", "pip"], pip=["egdemo-b==1.0"],
                               pip_index=pypi_index.url))


def test_pip_packages_installed_with_hashes(tmp_path: Path, pip_lock: Path, capsys) -> None:
    target = tmp_path / "env"
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(pip_lock), "--no-check")
    assert code == 0, err
    assert "+ 2 pip" in out
    proc = run_python(target, "import sys, egdemo_a, egdemo_b\nprint(egdemo_a.__file__)\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(str(target) + os.sep)
    fp = read_fingerprint(target)
    assert fp is not None and set(fp.pip) == {"egdemo-a", "egdemo-b"}


def test_pip_wrong_hash_exits_3_and_force_keeps_old_env(tmp_path: Path, pip_lock: Path, base_lock: Path,
                                                         capsys) -> None:
    target = tmp_path / "env"
    assert run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")[0] == 0
    before = tree_state(target)
    real = locked_sha(pip_lock, "egdemo-a")
    wrong = "f" * 64
    pip_lock.write_text(pip_lock.read_text().replace(real, wrong))
    # over an existing env: the conda part installs into staging, pip fails, the old env stays
    code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(pip_lock), "--force",
                           "--no-check")
    assert code == 3, err
    assert "egdemo-a" in err and wrong in err and real in err
    assert tree_state(target) == before
    assert siblings(target) == []
    # and into a fresh prefix: nothing appears
    fresh = tmp_path / "fresh"
    code, _, _ = run_cli(capsys, "create", "-p", str(fresh), "--lockfile", str(pip_lock), "--no-check")
    assert code == 3 and not fresh.exists() and siblings(fresh) == []


def test_pip_console_scripts_point_at_the_final_prefix(tmp_path: Path, channel_url: str, base_lock, capsys) -> None:
    wheel = channels.build_wheel(tmp_path / "wheels", "egscript", "1.0", files={
        "egscript/__init__.py": "import sys\n\ndef main():\n    print('egscript', sys.prefix)\n",
        "egscript-1.0.dist-info/entry_points.txt": "[console_scripts]\negscript = egscript:main\n",
    })
    index = channels.build_pypi_index(tmp_path / "pypi", [wheel])
    with channels.serve_directory(index.root) as server:
        lockfile = make_lock(write_env(tmp_path / "proj", channel_url, [f"python={HOST_PY}", "pip"],
                                       pip=["egscript==1.0"], pip_index=f"{server.url}/simple"))
        target = tmp_path / "env"
        code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
    assert code == 0, err
    script = target / "bin" / "egscript"
    assert script.read_text().splitlines()[0] == f"#!{target}/bin/python"
    proc = subprocess.run([str(script)], capture_output=True, text=True)
    assert proc.stdout.strip() == f"egscript {target}", proc.stderr


# --------------------------------------------------------------------------- atomicity


def test_kill_9_while_linking_leaves_no_target_and_next_run_cleans(tmp_path: Path, base_lock: Path) -> None:
    target = tmp_path / "env"
    proc = envguard_run("create", "-p", str(target), "--lockfile", str(base_lock), "--no-check", "--quiet",
                        env={"ENVGUARD_TESTING": "1", "ENVGUARD_TEST_KILL_AT": "link:3"})
    assert proc.returncode == -9, proc.stderr
    assert not target.exists()
    assert [n for n in siblings(target) if "envguard-staging-" in n]  # the half-built staging dir is there
    proc = envguard_run("create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")
    assert proc.returncode == 0, proc.stderr
    assert "removed the leftover staging directory" in proc.stderr
    assert siblings(target) == [] and read_fingerprint(target) is not None


def test_kill_9_during_force_keeps_old_env(tmp_path: Path, base_lock: Path, channel_factory, capsys) -> None:
    target = tmp_path / "env"
    assert run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")[0] == 0
    before = tree_state(target)
    other = small_lock(tmp_path, channels.channel_url(small_channel(channel_factory)))
    for hook, extra in (("link:2", {}), ("swap", {"ENVGUARD_TEST_NO_RENAME_EXCHANGE": "1"})):
        proc = envguard_run("create", "-p", str(target), "--lockfile", str(other), "--force", "--no-check",
                            env={"ENVGUARD_TESTING": "1", "ENVGUARD_TEST_KILL_AT": hook, **extra})
        assert proc.returncode == -9, (hook, proc.stderr)
        if hook == "link:2":
            assert tree_state(target) == before
        else:  # killed between the two renames: the old env is aside until the next run puts it back
            assert not target.exists()
        # the next run (same old lock, no --force) restores/cleans and finds the old env unchanged
        code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")
        assert code == 0 and out.startswith("unchanged:"), (hook, err)
        assert tree_state(target) == before and siblings(target) == []


def test_another_lock_rebuilds_without_force_and_force_rebuilds_a_match(tmp_path: Path, base_lock: Path,
                                                                         channel_factory, capsys) -> None:
    """create is a sync: an environment that is not what the lock says is rebuilt (no --force needed) and the
    output says how it differed; --force rebuilds one that matches; the old one never stays beside it."""
    target = tmp_path / "env"
    assert run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")[0] == 0
    other = small_lock(tmp_path, channels.channel_url(small_channel(channel_factory)))
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(other), "--no-check")
    assert code == 0 and out.startswith("replaced"), err
    # it was the lock that moved (another one), not the environment: the output says which (issue 35, 9)
    assert f"the lock moved: the environment was built from another lock ({base_lock})" in out, out
    assert "drifted" not in out and "egsmall-b 1.0 missing" in out and " added" in out
    assert not (target / "bin" / "python").exists() and (target / "share" / "egsmall" / "b.txt").exists()
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(other), "--no-check")
    assert code == 0 and out.startswith("unchanged:"), err
    inode = target.stat().st_ino  # files are hard links into the package cache: the directory is what is new
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(other), "--force", "--no-check")
    assert code == 0 and out.startswith("replaced") and "drifted" not in out, err
    assert target.stat().st_ino != inode
    assert siblings(target) == []


def test_target_that_is_not_an_env_exits_2_untouched(tmp_path: Path, base_lock: Path, capsys) -> None:
    target = tmp_path / "data"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    before = tree_state(target)
    for extra in ([], ["--force"]):
        code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check",
                               *extra)
        assert code == 2 and "not a conda environment" in err
        assert tree_state(target) == before
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # named as what it is (it was "a file"), and never opened
    code, _, err = run_cli(capsys, "create", "-p", str(fifo), "--lockfile", str(base_lock), "--no-check")
    assert code == 2 and f"{fifo} exists and is a FIFO (named pipe); it was left untouched" in err, err
    empty = tmp_path / "empty"
    empty.mkdir()  # an empty directory is a fine place for a new environment
    code, _, err = run_cli(capsys, "create", "-p", str(empty), "--lockfile", str(base_lock), "--no-check")
    assert code == 0 and (empty / "conda-meta").is_dir(), err


# --------------------------------------------------------------------------- concurrency


def test_concurrent_creates_wait_then_succeed_or_time_out(tmp_path: Path, base_lock: Path) -> None:
    target = tmp_path / "env"
    first = envguard_popen("create", "-p", str(target), "--lockfile", str(base_lock), "--no-check",
                           env={"ENVGUARD_TESTING": "1", "ENVGUARD_TEST_PAUSE_AT": "link:2:4"})
    pid_file = holder_path(target)  # in envguard's own lock folder, not beside the prefix
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not pid_file.exists() or pid_file.read_text().strip() != str(first.pid)):
        time.sleep(0.05)
    assert pid_file.read_text().strip() == str(first.pid)
    busy = envguard_run("create", "-p", str(target), "--lockfile", str(base_lock), "--no-check", "--timeout", "1")
    assert busy.returncode == 5, busy.stderr
    assert f"process {first.pid}" in busy.stderr
    second = envguard_popen("create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")
    out1, err1 = first.communicate(timeout=60)
    out2, err2 = second.communicate(timeout=60)
    assert first.returncode == 0, err1
    assert second.returncode == 0, err2
    assert out1.startswith("created") and out2.startswith("unchanged")
    assert f"waiting for envguard process {first.pid}" in err2
    shown = [o.rsplit("fingerprint ", 1)[1].strip() for o in (out1, out2)]
    assert shown[0] == shown[1] == read_fingerprint(target).digest[:12]


# --------------------------------------------------------------------------- lock problems


def test_missing_lock_exits_4(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile",
                           str(tmp_path / "nope.yml"), "--no-check")
    assert code == 4 and "nope.yml" in err
    env_file = write_env(tmp_path, "file:///nowhere", ["python"])
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "-f", str(env_file), "--locked",
                           "--no-check")
    assert code == 4 and "--locked" in err
    assert not (tmp_path / "env").exists()


def test_stale_lock_is_relocked_refused_with_locked_or_installed_with_frozen(tmp_path: Path, channel_factory,
                                                                             capsys) -> None:
    """uv's and pixi's conventions: by default a stale lock is re-locked first, --locked refuses it (exit 4,
    naming the fix), --frozen installs it as it is without reading the environment file."""
    chan = small_channel(channel_factory)
    env_file = write_env(tmp_path / "proj", channels.channel_url(chan), ["egsmall-b"])
    lockfile = make_lock(env_file)
    env_file.write_text(env_file.read_text().replace("  - egsmall-b\n", "  - egsmall-b\n  - egtamper\n"))
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile", str(lockfile), "--locked",
                           "--no-check")
    assert code == 4 and "stale" in err and "envguard lock" in err and "--frozen" in err
    assert not (tmp_path / "env").exists()
    stale = lockfile.read_bytes()
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "frozen"), "--lockfile", str(lockfile), "--frozen",
                           "--no-check")
    assert code == 0 and "stale" not in err, err
    assert not (tmp_path / "frozen" / "share" / "egtamper").exists() and lockfile.read_bytes() == stale
    # named with --lockfile it is installed exactly as written or refused, never re-locked
    code, out, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile", str(lockfile), "--no-check")
    assert code == 4 and "named with --lockfile" in err and lockfile.read_bytes() == stale, err
    # read through its spec (-f), the spec's default lock is re-locked first, and create says so
    code, out, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "-f", str(env_file), "--no-check")
    assert code == 0 and "re-locked it first" in err, err
    assert (tmp_path / "env" / "share" / "egtamper" / "data.txt").is_file() and lockfile.read_bytes() != stale
    assert "egtamper" in lockfile.read_text()


def test_failed_relock_names_frozen_and_keeps_lock_and_env(tmp_path: Path, channel_factory, capsys) -> None:
    """Offline (the spec's channel unreachable), the re-lock of a stale lock fails with one line naming --frozen;
    the lock and the environment stay as they were."""
    chan = small_channel(channel_factory)
    env_file = write_env(tmp_path / "proj", channels.channel_url(chan), ["egsmall-b"])
    lockfile = make_lock(env_file)
    target = tmp_path / "env"
    assert run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")[0] == 0
    before, stale = tree_state(target), lockfile.read_bytes()
    env_file.write_text(env_file.read_text().replace(channels.channel_url(chan), "http://127.0.0.1:9/offline")
                        .replace("  - egsmall-b\n", "  - egsmall-b\n  - egtamper\n"))
    code, _, err = run_cli(capsys, "create", "-p", str(target), "-f", str(env_file), "--no-check")
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 6 and len(lines) == 1 and "re-locking it failed" in lines[0] and "--frozen" in lines[0], err
    assert lockfile.read_bytes() == stale and tree_state(target) == before
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--frozen", "--no-check")
    assert code == 0 and out.startswith("unchanged:"), err


def test_lock_without_host_platform_exits_4(tmp_path: Path, channel_factory, capsys) -> None:
    chan = small_channel(channel_factory)
    lockfile = small_lock(tmp_path, channels.channel_url(chan))
    host = channels.host_platform()
    other = "osx-arm64" if host != "osx-arm64" else "linux-64"
    lockfile.write_text(lockfile.read_text().replace(f"platform: {host}", f"platform: {other}")
                        .replace(f"- {host}\n", f"- {other}\n").replace(f"  {host}:", f"  {other}:"))
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile", str(lockfile), "--no-check")
    assert code == 4 and host in err


# --------------------------------------------------------------------------- disk and permissions


def _unshare_works() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.requires(_unshare_works(), "needs `unshare -m` (a private mount namespace) for tmpfs")
@pytest.mark.parametrize("case", ["full", "readonly"])
def test_full_disk_or_read_only_exits_6_with_path(tmp_path: Path, channel_factory, case: str) -> None:
    chan = channel_factory([{"name": "egbig", "version": "1.0", "files": {"share/egbig/blob.bin": os.urandom(600_000)}}])
    lockfile = make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), ["egbig"]))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    ro = f" && mount -o remount,ro {mnt}" if case == "readonly" else ""
    script = (f"mount -t tmpfs -o size=256k tmpfs {mnt}{ro} && "
              f"exec {' '.join(ENVGUARD)} create -p {mnt}/env "
              f"--lockfile {lockfile} --no-check --quiet")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 6, proc.stderr
    assert str(mnt) in proc.stderr
    assert ("no space left" in proc.stderr.lower()) if case == "full" else ("read-only" in proc.stderr.lower())
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- units


def test_leftover_cleanup_only_touches_dead_processes(tmp_path: Path) -> None:
    from envguard.create.staging import cleanup_leftovers

    target = tmp_path / "env"
    (target / "conda-meta").mkdir(parents=True)
    dead = _dead_pid()
    alive = os.getppid()
    (tmp_path / f".env.envguard-staging-{dead}").mkdir()
    (tmp_path / f".env.envguard-staging-{alive}").mkdir()
    (tmp_path / f".other.envguard-staging-{dead}").mkdir()
    notes = cleanup_leftovers(target)
    assert len(notes) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["env", f".env.envguard-staging-{alive}", f".other.envguard-staging-{dead}"])


def test_fault_hooks_need_the_testing_opt_in(monkeypatch) -> None:
    """ENVGUARD_TEST_* in a user's environment does nothing without ENVGUARD_TESTING=1."""
    import sys

    code = "from envguard.create.staging import fault_hook\nfault_hook('staged')\nprint('alive')\n"
    base = {k: v for k, v in os.environ.items() if k != "ENVGUARD_TESTING"}
    stray = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**base, "ENVGUARD_TEST_KILL_AT": "staged"})
    assert stray.returncode == 0 and stray.stdout == "alive\n", stray.stderr
    hooked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**base, "ENVGUARD_TEST_KILL_AT": "staged", "ENVGUARD_TESTING": "1"})
    assert hooked.returncode == -9 and hooked.stdout == ""
    from envguard.settings import TEST_NO_RENAME_EXCHANGE, test_hook

    monkeypatch.setenv("ENVGUARD_TEST_NO_RENAME_EXCHANGE", "1")
    monkeypatch.delenv("ENVGUARD_TESTING", raising=False)
    assert test_hook(TEST_NO_RENAME_EXCHANGE) == ""
    monkeypatch.setenv("ENVGUARD_TESTING", "1")
    assert test_hook(TEST_NO_RENAME_EXCHANGE) == "1"


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_fingerprint_edited_by_hand_is_ignored(tmp_path: Path) -> None:
    from envguard.fingerprint import Fingerprint, fingerprint_path, write_fingerprint

    fp = Fingerprint(platform="linux-64", content_hash="abc", conda={"x": "1" * 64}, pip={})
    write_fingerprint(tmp_path, fp)
    assert read_fingerprint(tmp_path) == fp
    data = json.loads(fingerprint_path(tmp_path).read_text())
    data["packages"]["conda"]["x"] = "2" * 64
    fingerprint_path(tmp_path).write_text(json.dumps(data))
    assert read_fingerprint(tmp_path) is None


def test_sigint_while_linking_exits_130_and_keeps_old_env(tmp_path: Path, base_lock: Path, channel_factory,
                                                          capsys) -> None:
    import signal

    target = tmp_path / "env"
    assert run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")[0] == 0
    before = tree_state(target)
    other = small_lock(tmp_path, channels.channel_url(small_channel(channel_factory)))
    proc = envguard_popen("create", "-p", str(target), "--lockfile", str(other), "--force", "--no-check",
                          env={"ENVGUARD_TESTING": "1", "ENVGUARD_TEST_PAUSE_AT": "link:2:5"})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not any("staging" in n for n in siblings(target)):
        time.sleep(0.05)
    time.sleep(0.5)  # well inside the pause after the second package
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert tree_state(target) == before
    code, out, _ = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(base_lock), "--no-check")
    assert code == 0 and out.startswith("unchanged:") and siblings(target) == []


def test_progress_display_counts_verified_cached_and_linked(tmp_path: Path, base_lock: Path, private_cache: Path,
                                                            monkeypatch, capsys) -> None:
    import io

    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(render, "out", Console(file=screen, force_terminal=True, width=100))
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "env"), "--lockfile", str(base_lock),
                           "--no-check")
    assert code == 0, err
    text = screen.getvalue()
    assert "linked" in text and "cached" in text and "7/7" in text
    # an empty package cache: every archive is read (hashed, scanned) first, and counted while it is
    verified = [line for line in text.replace("\r", "\n").splitlines() if "verified" in line]
    assert verified and "7/7" in verified[-1], text
    screen.truncate(0)
    screen.seek(0)
    code, _, err = run_cli(capsys, "create", "-p", str(tmp_path / "env-warm"), "--lockfile", str(base_lock),
                           "--no-check")
    assert code == 0, err
    assert "linked" in screen.getvalue() and "verified" not in screen.getvalue()  # nothing to read: all cached
    screen.truncate(0)
    code, _, _ = run_cli(capsys, "create", "-p", str(tmp_path / "env2"), "--lockfile", str(base_lock),
                         "--no-check", "--quiet")
    assert code == 0 and "linked" not in screen.getvalue()


def test_channel_credentials_come_from_env_and_stay_out_of_the_env(tmp_path: Path, channel_factory,
                                                                    private_cache, monkeypatch, capsys) -> None:
    chan = small_channel(channel_factory, "private")
    server = channel_factory.serve(chan, auth=("eguser", "s3cr3t-pw"))
    port_url = server.url.split("://", 1)[1]
    monkeypatch.setenv("EG_USER", "eguser")
    monkeypatch.setenv("EG_PASS", "s3cr3t-pw")
    lockfile = small_lock(tmp_path, f"http://${{EG_USER}}:${{EG_PASS}}@{port_url}")
    assert "s3cr3t-pw" not in lockfile.read_text() and "${EG_PASS}" in lockfile.read_text()
    target = tmp_path / "env"
    monkeypatch.delenv("EG_PASS")
    code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
    assert code == 2 and "EG_PASS" in err and not target.exists()
    monkeypatch.setenv("EG_PASS", "s3cr3t-pw")
    code, out, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--no-check")
    assert code == 0, err
    assert "s3cr3t-pw" not in out + err
    leaked = [p for p in target.rglob("*") if p.is_file() and b"s3cr3t-pw" in p.read_bytes()]
    assert leaked == []
    record = json.loads(next((target / "conda-meta").glob("egtamper-*.json")).read_text())
    assert record["url"].startswith("http://${EG_USER}:${EG_PASS}@")


def test_an_entry_whose_url_names_another_package_is_refused(tmp_path: Path, channel_factory, private_cache: Path,
                                                             capsys) -> None:
    """envguard verifies the package cache directory named by the URL's file (<name>-<version>-<build>) and
    rattler links from the one named by the entry's name, version and build: when they differ, the lock is
    refused (exit 2, naming the key) before anything is verified or linked, with its hash made to match too."""
    chan = small_channel(channel_factory, "mismatch")
    lockfile = small_lock(tmp_path, channels.channel_url(chan))
    text = lockfile.read_text()
    a_url = next(line.split("url: ", 1)[1] for line in text.splitlines() if "/egsmall-a-1.0-" in line and "url: " in line)
    t_url = next(line.split("url: ", 1)[1] for line in text.splitlines() if "/egtamper-1.0-" in line and "url: " in line)
    t_sha, a_sha = locked_sha(lockfile, "egtamper"), locked_sha(lockfile, "egsmall-a")
    lockfile.write_text(text.replace(a_url, t_url, 1).replace(f"sha256: {a_sha}", f"sha256: {t_sha}", 1))
    target = tmp_path / "env"
    code, _, err = run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lockfile), "--frozen", "--no-check")
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "egsmall-a 1.0" in err and "disagree" in err and "url" in err, err
    assert not target.exists() and not (private_cache / "egtamper-1.0-h0_0").exists()
