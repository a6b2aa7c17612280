"""A verified package cache: what rattler extracted is checked against the verified archive before it is
linked (docs/reliability.md), and integrity failures over HTTP are integrity failures (exit 3).

Real creates (the CLI in-process), a real package cache, files edited the way an attacker or an accident
would: in place, same size, in the cache or in an environment the cache is hard-linked into.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from support import channels
from support.create_fixtures import envguard_run, make_lock, run_cli, siblings, write_env

from envguard.create import integrity

DATA = "share/egtamper/data.txt"
SCRIPT = "bin/egscript"


@pytest.fixture
def pkgs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVGUARD_PKGS_DIR", str(tmp_path / "pkgs"))
    return tmp_path / "pkgs"


@pytest.fixture
def chan(tmp_path: Path) -> Path:
    return channels.make_channel(tmp_path / "chan", [
        {"name": "egtamper", "version": "1.0", "noarch": "generic",
         "files": {DATA: "original\n", SCRIPT: "#!/bin/sh\necho fine\n"}},
        {"name": "egother", "version": "1.0", "noarch": "generic", "files": {"share/egother.txt": "other\n"}},
    ])


def _lock(tmp_path: Path, url: str) -> Path:
    return make_lock(write_env(tmp_path / "proj", url, ["egtamper", "egother"]))


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Same size, same inode: what an edit through a hard link does to every other link."""
    assert len(old) == len(new)
    os.chmod(path, 0o644)
    with open(path, "r+b") as fh:
        data = fh.read()
        assert old in data
        fh.seek(0)
        fh.write(data.replace(old, new))


def _create(capsys, target: Path, lock: Path) -> tuple[int, str, str]:
    return run_cli(capsys, "create", "-p", str(target), "--lockfile", str(lock), "--no-check")


@pytest.mark.slow
@pytest.mark.parametrize("what", ["data file", "bin script", "paths.json with it", "deleted file"])
def test_a_tampered_cache_entry_is_extracted_again(tmp_path: Path, chan: Path, pkgs: Path, capsys, what: str) -> None:
    """Failure 2: a same-size edit in the package cache went into the new env with exit 0."""
    lock = _lock(tmp_path, channels.channel_url(chan))
    assert _create(capsys, tmp_path / "first", lock)[0] == 0
    entry = pkgs / "egtamper-1.0-h0_0"
    if what == "data file":
        _edit_in_place(entry / DATA, b"original", b"EVILEVIL")
    elif what == "bin script":
        _edit_in_place(entry / SCRIPT, b"echo fine", b"echo EVIL")
    elif what == "paths.json with it":  # a consistent forgery: the file and the hash that describes it
        _edit_in_place(entry / DATA, b"original", b"EVILEVIL")
        old, new = (hashlib.sha256(t).hexdigest().encode() for t in (b"original\n", b"EVILEVIL\n"))
        _edit_in_place(entry / "info" / "paths.json", old, new)
    else:
        (entry / DATA).unlink()  # was exit 6
    target = tmp_path / "second"
    code, _, err = _create(capsys, target, lock)
    assert code == 0, err
    assert "egtamper 1.0: its package cache entry was altered" in err and "extracting it again" in err
    assert (target / DATA).read_text() == "original\n"
    assert (target / SCRIPT).read_text() == "#!/bin/sh\necho fine\n"
    assert (entry / DATA).read_text() == "original\n"  # the cache is whole again
    assert (tmp_path / "first" / DATA).exists() or what == "deleted file"


@pytest.mark.slow
def test_an_edit_through_an_environments_hard_link_does_not_spread(tmp_path: Path, chan: Path, pkgs: Path,
                                                                    capsys) -> None:
    lock = _lock(tmp_path, channels.channel_url(chan))
    first = tmp_path / "first"
    assert _create(capsys, first, lock)[0] == 0
    installed = first / DATA
    if os.stat(installed).st_ino != os.stat(pkgs / "egtamper-1.0-h0_0" / DATA).st_ino:
        pytest.skip("the installer copied instead of hard-linking here")
    _edit_in_place(installed, b"original", b"EVILEVIL")  # the user's env, and through the link the cache
    code, _, err = _create(capsys, tmp_path / "second", lock)
    assert code == 0 and "altered" in err, err
    assert (tmp_path / "second" / DATA).read_text() == "original\n"


@pytest.mark.slow
def test_a_tampered_entry_whose_archive_is_gone_exits_3(tmp_path: Path, chan: Path, pkgs: Path, capsys) -> None:
    lock = _lock(tmp_path, channels.channel_url(chan))
    assert _create(capsys, tmp_path / "first", lock)[0] == 0
    archive = channels.package_path(chan, "noarch", "egtamper-1.0-h0_0.tar.bz2")
    # the archive gone and the entry intact: the verified entry stands in for it
    archive.rename(archive.with_suffix(".away"))
    assert _create(capsys, tmp_path / "offline", lock)[0] == 0
    _edit_in_place(pkgs / "egtamper-1.0-h0_0" / DATA, b"original", b"EVILEVIL")
    target = tmp_path / "second"
    code, _, err = _create(capsys, target, lock)
    assert code == 3, err
    assert "egtamper 1.0: its package cache entry was altered" in err and "is gone" in err
    assert not target.exists() and siblings(target) == []


@pytest.mark.slow
def test_warm_creates_hash_nothing_until_a_file_changes(tmp_path: Path, chan: Path, pkgs: Path, capsys,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The stat-keyed stamps: warm creates hash no extracted file, also after environments linked to the
    cache are removed (which changes the ctime of every cache file they shared); one whose inode or size
    changed is hashed again."""
    from envguard.create import prelink

    monkeypatch.setattr(integrity, "STAMP_MIN_AGE_NS", 0)  # the fixture's files are seconds old
    hashed: list[str] = []
    real = prelink.file_digest
    monkeypatch.setattr(prelink, "file_digest", lambda p, a="sha256": (hashed.append(Path(p).name), real(p, a))[1])
    lock = _lock(tmp_path, channels.channel_url(chan))
    assert _create(capsys, tmp_path / "cold", lock)[0] == 0
    assert hashed == []  # cold: extracted from the verified archive in this very run
    for warm in ("warm1", "warm2"):
        assert _create(capsys, tmp_path / warm, lock)[0] == 0
        assert hashed == []  # each create's own hard links change ctimes, not the identities
    data = pkgs / "egother-1.0-h0_0" / "share" / "egother.txt"
    for gone in ("cold", "warm1", "warm2"):  # rm -rf of environments: the link counts, so the ctimes, change
        shutil.rmtree(tmp_path / gone)
    assert _create(capsys, tmp_path / "after-rm", lock)[0] == 0
    assert hashed == []
    # a new inode with the same bytes (a copy put in place): not vouched for, hashed, still fine
    copy = data.with_name("copy")
    copy.write_bytes(data.read_bytes())
    os.replace(copy, data)
    code, _, err = _create(capsys, tmp_path / "warm3", lock)
    assert code == 0 and "altered" not in err, err
    assert hashed == ["egother.txt"]


def _stat(size: int = 10, mtime: int = 10**18, ctime: int = 10**18, ino: int = 7, dev: int = 3) -> os.stat_result:
    # the 10 sequence fields, the float times, then st_atime_ns, st_mtime_ns, st_ctime_ns
    st = os.stat_result((0o100644, ino, dev, 1, 0, 0, size, 0, 0, 0, 0.0, 0.0, 0.0, 0, mtime, ctime))
    assert (st.st_size, st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns) == (size, ino, dev, mtime, ctime)
    return st


@pytest.mark.parametrize("changed", ["size", "inode", "device", "mtime", "ctime"])
def test_a_stamp_is_trusted_only_for_the_same_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   changed: str) -> None:
    """The identity check itself (size, mtime, ctime, inode, device), with the age guard satisfied."""
    monkeypatch.setattr(integrity.time, "time_ns", lambda: 10**18 + 10 * integrity.STAMP_MIN_AGE_NS)
    stamps = integrity.VerifiedStamps(tmp_path)
    path = tmp_path / "x.conda"
    st = _stat()
    stamps.record(path, st, "sha256:ab")
    assert stamps.vouches(path, st, "sha256:ab") and not stamps.vouches(path, st, "sha256:cd")
    other = {"size": _stat(size=11), "inode": _stat(ino=8), "device": _stat(dev=4), "mtime": _stat(mtime=10**18 + 1),
             "ctime": _stat(ctime=10**18 + 1)}[changed]
    assert not stamps.vouches(path, other, "sha256:ab")
    stamps.save()
    assert integrity.VerifiedStamps(tmp_path).vouches(path, st, "sha256:ab")


def test_verify_cache_entries_reports_an_entry_recorded_for_another_sha256(tmp_path: Path) -> None:
    """A cache entry whose rattler record holds another sha256 than the lock is never linked unnoticed."""
    from envguard.errors import IntegrityError

    locked, other = "a" * 64, "b" * 64
    (tmp_path / "egx-1.0-h0_0" / "info").mkdir(parents=True)
    (tmp_path / "egx-1.0-h0_0.lock").write_bytes((1).to_bytes(8, "big") + bytes.fromhex(other))
    art = integrity.Artifact("egx", "1.0", "h0_0", "https://example.invalid/c/noarch/egx-1.0-h0_0.conda", locked,
                             None, "noarch")
    assert integrity.cache_entry_sha256(tmp_path, art.stem) == other
    with pytest.raises(IntegrityError) as err:
        integrity.verify_cache_entries([art], tmp_path)
    assert "egx 1.0" in err.value.message and locked in err.value.message and other in err.value.message
    assert not (tmp_path / "egx-1.0-h0_0").exists()
    ok = integrity.Artifact("egx", "1.0", "h0_0", art.url, other, None, "noarch")
    (tmp_path / "egx-1.0-h0_0").mkdir()
    (tmp_path / "egx-1.0-h0_0.lock").write_bytes((1).to_bytes(8, "big") + bytes.fromhex(other))
    assert integrity.verify_cache_entries([ok], tmp_path) == 1


# --------------------------------------------------------------------------- over HTTP


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["flipped byte", "truncated"])
def test_a_damaged_download_is_an_integrity_failure_naming_the_package(tmp_path: Path, chan: Path, pkgs: Path,
                                                                       channel_factory, capsys, damage: str) -> None:
    """Failure 5: a flipped or truncated artifact over HTTP exited 6 with rattler's
    extraction error (``numeric field did not have utf-8 text``) and named ``package ?``."""
    server = channel_factory.serve(chan)
    lock = _lock(tmp_path, server.url)
    archive = channels.package_path(chan, "noarch", "egtamper-1.0-h0_0.tar.bz2")
    data = bytearray(archive.read_bytes())
    if damage == "flipped byte":
        data[len(data) // 2] ^= 0xFF
    else:
        del data[len(data) // 2:]
    archive.write_bytes(bytes(data))
    target = tmp_path / "env"
    code, _, err = _create(capsys, target, lock)
    assert code == 3, err
    assert "egtamper 1.0: sha256 mismatch" in err and hashlib.sha256(bytes(data)).hexdigest() in err
    assert "package ?" not in err
    assert not target.exists() and siblings(target) == []
    assert not [p for p in pkgs.iterdir() if "egtamper" in p.name or p.name.startswith(".envguard-downloads")]


# --------------------------------------------------------------------------- the record files themselves

RECORDS = [".envguard-verified.json", ".envguard-trees.json", ".envguard-path-checks.json"]


def _in_thread(fn: Callable[[], object], seconds: float = 20) -> object:
    """``fn()``, failing (not hanging the suite) when it blocks."""
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.update(result=fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{fn} still blocked after {seconds} s"
    return box.get("result")


@pytest.mark.parametrize("kind", ["fifo", "directory", "huge", "deep"])
def test_a_record_file_that_is_not_a_small_regular_file_is_ignored(tmp_path: Path, kind: str) -> None:
    """A FIFO in a record's place blocked every create in its open (issue 27, point 4): a record only spares
    work, so anything but a small regular file of JSON reads as no record."""
    path = tmp_path / ".envguard-trees.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(integrity.RECORD_CAP + 1)
    else:
        path.write_text("[" * 200_000 + "]" * 200_000)
    assert _in_thread(lambda: integrity.read_record_file(path)) is None


def test_a_fifo_planted_at_a_records_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    """The temporary name is predictable (its pid); opening a FIFO planted there to write blocked forever."""
    path = tmp_path / ".envguard-verified.json"
    os.mkfifo(path.with_name(f"{path.name}.{os.getpid()}.tmp"))
    _in_thread(lambda: integrity.write_record_file(path, {"format": 1, "artifacts": {}}))
    assert integrity.read_record_file(path) == {"format": 1, "artifacts": {}}
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.slow
def test_creates_go_on_when_every_record_file_is_a_fifo(tmp_path: Path, chan: Path, pkgs: Path, capsys) -> None:
    """Whole processes with a deadline: a create that blocks fails here instead of hanging."""
    lock = _lock(tmp_path, channels.channel_url(chan))
    for i in range(2):  # the second one is warm: it wrote every record
        assert _create(capsys, tmp_path / f"env{i}", lock)[0] == 0
    assert sorted(p.name for p in pkgs.glob(".envguard-*.json")) == sorted(RECORDS)
    for name in RECORDS:
        (pkgs / name).unlink()
        os.mkfifo(pkgs / name)
    proc = envguard_run("create", "-p", str(tmp_path / "env-fifos"), "--lockfile", str(lock), "--no-check",
                        "--quiet", env={"ENVGUARD_PKGS_DIR": str(pkgs)}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env-fifos" / DATA).read_text() == "original\n"
