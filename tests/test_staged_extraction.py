"""The bytes checked are the bytes linked (#42): rattler extracts each cold archive into a private staging folder
(envguard.create.unpack), the tree is judged as it lies on disk (envguard.create.stagedtree), and only then moved
into the package cache, where rattler's link step takes it without extracting anything again. Real archives,
real creates in a real envguard process."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from support import channels
from support.channels import _zstd_stored
from support.create_fixtures import envguard_popen, envguard_run, make_lock, siblings, write_env

from envguard.create.unpack import UNPACK_TAG

pytestmark = pytest.mark.slow


def _lock_for(tmp_path: Path, chan: Path, name: str) -> Path:
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    channels.strip_indexed_timestamps(chan)
    return make_lock(write_env(tmp_path / f"proj-{name}", channels.channel_url(chan), [name]))


def _create(tmp_path: Path, lock: Path, target: Path, **env: str) -> tuple[int, list[str]]:
    proc = envguard_run("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet",
                        env={"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs"), **env}, timeout=120)
    return proc.returncode, [ln for ln in proc.stderr.splitlines() if ln.strip()]


def _pkgs_left(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "pkgs").iterdir()) if (tmp_path / "pkgs").exists() else []


def test_rattler_links_the_verified_staged_tree_and_extracts_nothing_again(tmp_path: Path) -> None:
    """After the staged tree is moved into the cache (``<stem>/`` and a ``<stem>.lock`` as rattler writes it),
    rattler's link step takes that very entry: a file marked in the cache entry between the verification and the
    install is what the environment holds (a re-extraction would have restored the archive's bytes)."""
    chan = tmp_path / "chan"
    channels.build_package(chan, "egstage", "1.0", noarch="generic", fmt="conda",
                           files={"share/egstage.txt": "original\n"}, symlinks={"share/link": "egstage.txt"})
    lock = _lock_for(tmp_path, chan, "egstage")
    target = tmp_path / "env"
    proc = envguard_popen("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet",
                          env={"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs"), "ENVGUARD_TESTING": "1",
                               "ENVGUARD_TEST_PAUSE_AT": "verified:3"})
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "paused at verified" in line, line
    entry = tmp_path / "pkgs" / "egstage-1.0-h0_0"
    lock_bytes = (tmp_path / "pkgs" / "egstage-1.0-h0_0.lock").read_bytes()
    sha = hashlib.sha256(next((chan / "noarch").glob("egstage-*.conda")).read_bytes()).hexdigest()
    assert lock_bytes == (1).to_bytes(8, "big") + bytes.fromhex(sha)  # what rattler itself writes there
    assert not [p for p in (tmp_path / "pkgs").iterdir() if p.name.startswith(UNPACK_TAG) and any(p.iterdir())]
    with open(entry / "share" / "egstage.txt", "r+") as fh:  # in place: same inode, same size
        fh.write("MARKED!!\n")
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert (target / "share" / "egstage.txt").read_text() == "MARKED!!\n"
    assert os.readlink(target / "share" / "link") == "egstage.txt"
    assert not [n for n in _pkgs_left(tmp_path) if n.startswith(UNPACK_TAG)]


def test_a_killed_runs_staging_folder_is_never_trusted_and_is_removed(tmp_path: Path) -> None:
    """What a run killed mid-extraction left (``.envguard-unpack-<dead pid>/<stem>/``, a tree of other bytes)
    is neither linked nor kept: the next create extracts the archive itself and removes the folder."""
    chan = tmp_path / "chan"
    channels.build_package(chan, "egleft", "1.0", noarch="generic", fmt="conda", files={"share/egleft.txt": "ok\n"})
    lock = _lock_for(tmp_path, chan, "egleft")
    dead = tmp_path / "pkgs" / f"{UNPACK_TAG}999999" / "egleft-1.0-h0_0" / "share"
    dead.mkdir(parents=True)
    (dead / "egleft.txt").write_text("planted\n")
    code, lines = _create(tmp_path, lock, tmp_path / "env")
    assert code == 0, lines
    assert (tmp_path / "env" / "share" / "egleft.txt").read_text() == "ok\n"
    assert (tmp_path / "pkgs" / "egleft-1.0-h0_0" / "share" / "egleft.txt").read_text() == "ok\n"
    assert not [n for n in _pkgs_left(tmp_path) if n.startswith(UNPACK_TAG)]
    dead.mkdir(parents=True)  # and a create that finds the environment unchanged (extracts nothing) removes it too
    code, lines = _create(tmp_path, lock, tmp_path / "env")
    assert code == 0, lines
    assert not [n for n in _pkgs_left(tmp_path) if n.startswith(UNPACK_TAG)]


def _repack_with(pkg: Path, paths_edit: dict[str, dict[str, object]]) -> None:
    """Rewrite a .conda's info/paths.json entries (by path) and keep the payload as it is."""
    import io

    with zipfile.ZipFile(pkg) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    info_name = next(n for n in members if n.startswith("info-"))
    raw = _read_zstd(members[info_name])
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(raw)) as src, \
            tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None  # type: ignore[union-attr]
            if m.name == "info/paths.json" and data is not None:
                doc = json.loads(data)
                for e in doc["paths"]:
                    e.update(paths_edit.get(e["_path"], {}))
                data = json.dumps(doc).encode()
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    members[info_name] = _zstd_stored(out.getvalue())
    with zipfile.ZipFile(pkg, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _read_zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(data).read()


def test_a_file_whose_size_is_not_what_paths_json_says_is_refused_and_not_cached(tmp_path: Path) -> None:
    """A payload file whose size differs from its paths.json record (what an empty file written for a FIFO or
    device entry looks like): the archive's own hash is the locked one, so only the extracted tree can tell.
    Exit 3 naming the package and the entry, nothing linked, the cache not holding it, no staging left. (Its
    content against paths.json's sha256 is not hashed on the cold path: the archive's sha256 pins every byte
    rattler extracted; envguard.create.stagedtree's doc.)"""
    chan = tmp_path / "chan"
    pkg = channels.build_package(chan, "eglie", "1.0", noarch="generic", fmt="conda",
                                 files={"share/eglie.txt": "honest\n"})
    _repack_with(pkg, {"share/eglie.txt": {"size_in_bytes": 99}})
    lock = _lock_for(tmp_path, chan, "eglie")
    target = tmp_path / "env"
    code, lines = _create(tmp_path, lock, target)
    assert code == 3 and len(lines) == 1, lines
    assert "eglie 1.0" in lines[0] and "share/eglie.txt" in lines[0] and "99" in lines[0], lines
    assert not target.exists() and siblings(target) == []
    assert not [n for n in _pkgs_left(tmp_path) if n.startswith(("eglie", UNPACK_TAG))], _pkgs_left(tmp_path)


def test_cold_then_warm_creates_share_one_verified_entry(tmp_path: Path) -> None:
    """The cold create moves the verified tree in and records it (cachetree, VerifiedStamps); the next create is
    warm (links the entry without extracting: its marked file shows it), and an edit of the entry in place is
    still noticed (#27): the entry is extracted again from the archive."""
    chan = tmp_path / "chan"
    channels.build_package(chan, "egwarm", "1.0", noarch="generic", fmt="conda", files={"share/egwarm.txt": "one\n"})
    lock = _lock_for(tmp_path, chan, "egwarm")
    code, lines = _create(tmp_path, lock, tmp_path / "env1")
    assert code == 0, lines
    cached = tmp_path / "pkgs" / "egwarm-1.0-h0_0" / "share" / "egwarm.txt"
    ino = cached.stat().st_ino
    code, lines = _create(tmp_path, lock, tmp_path / "env2")
    assert code == 0, lines
    assert cached.stat().st_ino == ino  # the same entry, not extracted again
    assert (tmp_path / "env2" / "share" / "egwarm.txt").stat().st_ino == ino  # linked from it
    os.chmod(cached, 0o644)
    with open(cached, "r+") as fh:
        fh.write("two\n")  # same size: an in-place edit
    code, lines = _create(tmp_path, lock, tmp_path / "env3")
    assert code == 0, lines
    assert (tmp_path / "env3" / "share" / "egwarm.txt").read_text() == "one\n"


def test_concurrent_cold_creates_share_one_cache(tmp_path: Path) -> None:
    """Two creates of two environments, started together on one empty package cache: each extracts into its own
    staging folder; whichever moves an entry in second finds the first one's (same sha256, same verified tree)
    and links it as it is. Both succeed, the cache holds one entry per package and no staging folder."""
    chan = tmp_path / "chan"
    names = [f"egconc{i}" for i in range(4)]
    for name in names:
        channels.build_package(chan, name, "1.0", noarch="generic", fmt="conda",
                               files={f"share/{name}/{j}.txt": f"{name} {j}\n" * 500 for j in range(40)})
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    channels.strip_indexed_timestamps(chan)
    lock = make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), names))
    env = {"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs")}
    procs = [envguard_popen("create", "-p", str(tmp_path / f"env{k}"), "--lockfile", str(lock), "--no-check",
                            "--quiet", env=env) for k in range(2)]
    for proc in procs:
        _out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    for k in range(2):
        for name in names:
            assert (tmp_path / f"env{k}" / "share" / name / "7.txt").read_text() == f"{name} 7\n" * 500
    left = _pkgs_left(tmp_path)
    assert not [n for n in left if n.startswith(UNPACK_TAG)], left
    assert sorted(n for n in left if n.startswith("egconc") and not n.endswith(".lock")) == [
        f"{n}-1.0-h0_0" for n in names]
    code, lines = _create(tmp_path, lock, tmp_path / "env-warm")  # and the cache they left verifies warm
    assert code == 0, lines


def _zstd_zeros(head: bytes, zeros: int, tail: bytes = b"") -> bytes:
    """A zstd frame without a content size: ``head`` in a raw block, ``zeros`` NUL bytes in RLE blocks (4 bytes per
    128 KiB), then ``tail`` in a raw block."""
    import struct

    block = 128 * 1024
    out = bytearray(struct.pack("<I", 0xFD2FB528)) + bytes([0x00, 7 << 3])
    out += (0 | (len(head) << 3)).to_bytes(3, "little") + head
    while zeros:
        n = min(block, zeros)
        zeros -= n
        out += ((1 << 1) | (n << 3)).to_bytes(3, "little") + b"\0"
    out += (1 | (len(tail) << 3)).to_bytes(3, "little") + tail
    return bytes(out)


def test_an_extraction_past_the_byte_budget_is_stopped_naming_package_and_entry(tmp_path: Path) -> None:
    """A small .conda whose payload inflates to 2 GiB in 32 files of 64 MiB each, while its paths.json declares
    them 2 bytes each (so nothing declared crosses the budget): each file stays under the per-file cap, and the
    extraction is stopped once the file system lost more than the budget (256 MiB here), well before the 2 GiB.
    Exit 3 naming the package and an entry; nothing of it cached or linked, no staging left."""
    import io

    chan = tmp_path / "chan"
    files = {f"share/b{i:02d}.bin": "a\n" for i in range(32)}
    pkg = channels.build_package(chan, "egmany", "1.0", noarch="generic", fmt="conda", files=files)
    size = 64 << 20
    frames = b""  # one zstd frame per file (its header, then its zeros): concatenated frames are one stream
    for i in range(32):
        info = tarfile.TarInfo(f"share/b{i:02d}.bin")
        info.size, info.mtime, info.mode = size, 0, 0o644
        frames += _zstd_zeros(info.tobuf(tarfile.PAX_FORMAT), size)
    frames += _zstd_zeros(b"\0" * 1024, 0)  # the tar's end
    with zipfile.ZipFile(pkg) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, frames if name.startswith("pkg-") else data)
    pkg.write_bytes(buf.getvalue())
    assert pkg.stat().st_size < 2_000_000
    lock = _lock_for(tmp_path, chan, "egmany")
    target = tmp_path / "env"
    code, lines = _create(tmp_path, lock, target, ENVGUARD_MAX_EXTRACTED_BYTES=str(256 << 20))
    assert code == 3 and len(lines) == 1, lines
    assert "egmany 1.0" in lines[0] and "ENVGUARD_MAX_EXTRACTED_BYTES" in lines[0] and "share/b" in lines[0], lines
    assert not target.exists() and siblings(target) == []
    assert not [n for n in _pkgs_left(tmp_path) if n.startswith(("egmany", UNPACK_TAG))], _pkgs_left(tmp_path)
