"""One reading of each artifact (docs/reliability.md): the bytes envguard hashes are the bytes it scans and the
installer extracts; an archive two readers could read differently is refused; metadata bombs are refused at
their tar header. Real hostile archives built here, real creates in a real envguard process."""

from __future__ import annotations

import json
import os
import resource
import struct
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from support import channels
from support.channels import _tar_bytes, _zstd_stored
from support.create_fixtures import envguard_popen, envguard_run, make_lock, siblings, write_env

from envguard.create.archive import METADATA_CAP


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


def _rewrite_conda(pkg: Path, *, pkg_tar: bytes | None = None, info_tar: bytes | None = None) -> None:
    with zipfile.ZipFile(pkg) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    with zipfile.ZipFile(pkg, "w") as zf:
        for name, data in members.items():
            if name.startswith("pkg-") and pkg_tar is not None:
                data = _zstd_stored(pkg_tar)
            elif name.startswith("info-") and info_tar is not None:
                data = _zstd_stored(info_tar)
            zf.writestr(name, data)


def _info_members(pkg: Path) -> list[tuple[str, bytes | None, str | None, int]]:
    with tarfile.open(pkg, "r:bz2") as tar:
        return [(m.name, tar.extractfile(m).read(), None, 0o644)  # type: ignore[union-attr]
                for m in tar.getmembers() if m.name.startswith("info/")]


# --------------------------------------------------------------------------- swap after hashing


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["tar.bz2", "conda"])
def test_an_artifact_replaced_after_hashing_is_not_what_gets_installed_or_cached(tmp_path: Path, fmt: str) -> None:
    """Replaced (os.replace) after envguard hashed it and before rattler extracted it, the channel's artifact
    was installed (13 of 13 trials) and kept in the package cache for later creates."""
    chan = tmp_path / "chan"
    pkg = channels.build_package(chan, "egswap", "1.0", noarch="generic", fmt=fmt,
                                 files={"share/egswap.txt": "original\n"})
    lock = _lock_for(tmp_path, chan, "egswap")
    evil = channels.build_package(tmp_path / "evil", "egswap", "1.0", noarch="generic", fmt=fmt,
                                  files={"share/egswap.txt": "replaced\n"}, extra_bytes=b"x")
    target = tmp_path / "env"
    proc = envguard_popen("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet",
                          env={"ENVGUARD_PKGS_DIR": str(tmp_path / "pkgs"), "ENVGUARD_TESTING": "1",
                               "ENVGUARD_TEST_PAUSE_AT": "verified:3"})
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert "paused at verified" in line, line
    os.replace(evil, pkg)  # the self-consistent rebuild takes the locked artifact's place
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 3), err
    cached = tmp_path / "pkgs" / "egswap-1.0-h0_0" / "share" / "egswap.txt"
    if proc.returncode == 0:
        assert (target / "share" / "egswap.txt").read_text() == "original\n"
    assert not cached.exists() or cached.read_text() == "original\n"
    assert not [p for p in (tmp_path / "pkgs").iterdir() if p.name.startswith(".envguard-downloads")]
    # the next create (warm) links what the cache holds: never the replacement
    code, lines = _create(tmp_path, lock, tmp_path / "env2")
    assert code == 3 and "sha256 mismatch" in lines[0] and len(lines) == 1, lines
    assert not (tmp_path / "env2").exists()


# --------------------------------------------------------------------------- duplicate and misplaced tar entries


@pytest.mark.slow
@pytest.mark.parametrize("case", ["symlink-twice", "info-in-payload", "paths-json-twice-tar-bz2"])
def test_an_archive_whose_entries_two_readers_could_read_differently_is_refused(tmp_path: Path, case: str) -> None:
    """Two `share/passwd` entries (the scan saw `-> ok.txt`, the extractor wrote the last, `-> /etc/passwd`),
    an `info/paths.json` hidden in the payload tar, two `info/paths.json` in a .tar.bz2: refused, exit 3."""
    chan = tmp_path / "chan"
    fmt = "tar.bz2" if case.endswith("tar-bz2") else "conda"
    pkg = channels.build_package(chan, "egtwice", "1.0", noarch="generic", fmt=fmt,
                                 files={"share/ok.txt": "ok\n"}, symlinks={"share/passwd": "ok.txt"})
    payload = [("share/ok.txt", b"ok\n", None, 0o644), ("share/passwd", None, "ok.txt", 0o777)]
    if case == "symlink-twice":
        _rewrite_conda(pkg, pkg_tar=_tar_bytes([*payload, ("./share//passwd", None, "/etc/passwd", 0o777)]))
        wanted = "twice (entry 'share/passwd')"
    elif case == "info-in-payload":
        hidden = json.dumps({"paths": [{"_path": "/etc/evil", "path_type": "hardlink"}], "paths_version": 1})
        _rewrite_conda(pkg, pkg_tar=_tar_bytes([*payload, ("info/paths.json", hidden.encode(), None, 0o644)]))
        wanted = "(entry 'info/paths.json')"
    else:
        info = _info_members(pkg)
        paths = next(d for n, d, _t, _m in info if n == "info/paths.json")
        assert paths is not None
        evil = json.loads(paths)
        evil["paths"][0]["_path"] = "../escaped.txt"
        raw = _tar_bytes([*info, ("info/paths.json", json.dumps(evil).encode(), None, 0o644), *payload])
        import bz2

        pkg.write_bytes(bz2.compress(raw))
        wanted = "twice (entry 'info/paths.json')"
    lock = _lock_for(tmp_path, chan, "egtwice")
    target = tmp_path / "env"
    code, lines = _create(tmp_path, lock, target)
    assert code == 3 and len(lines) == 1 and wanted in lines[0], lines
    assert "internal error" not in lines[0]
    assert not target.exists() and siblings(target) == []
    assert not (tmp_path / "escaped.txt").exists()


# --------------------------------------------------------------------------- metadata bombs


def _zstd_rle_zeros_after(head: bytes, zeros: int) -> bytes:
    """A zstd frame: ``head`` in a raw block, then ``zeros`` NUL bytes in RLE blocks (4 bytes per 128 KiB)."""
    block = 128 * 1024
    out = bytearray(struct.pack("<I", 0xFD2FB528)) + bytes([0x00, 7 << 3])
    out += (0 | (len(head) << 3)).to_bytes(3, "little") + head
    while zeros:
        n = min(block, zeros)
        zeros -= n
        out += ((1 if not zeros else 0) | (1 << 1) | (n << 3)).to_bytes(3, "little") + b"\0"
    return bytes(out)


@pytest.mark.slow
def test_a_small_archive_whose_paths_json_inflates_to_a_gigabyte_is_refused_quickly(tmp_path: Path) -> None:
    """A 1.4 KB archive whose paths.json inflated to 1.5 GiB aborted under a 2 GiB memory limit, and took 102 s
    and 3.2 GB under 4 GiB."""
    chan = tmp_path / "chan"
    pkg = channels.build_package(chan, "egbomb", "1.0", noarch="generic", fmt="conda",
                                 files={"share/egbomb.txt": "x\n"})
    with zipfile.ZipFile(pkg) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    index = json.dumps({"name": "egbomb", "version": "1.0", "build": "h0_0", "build_number": 0, "depends": [],
                        "subdir": "noarch", "noarch": "generic"}).encode()
    first = tarfile.TarInfo("info/index.json")  # the index first (the indexer reads it)
    first.size = len(index)
    head = first.tobuf(tarfile.PAX_FORMAT) + index + bytes(-len(index) % 512)
    size = 1 << 30  # then 1 GiB of NULs as info/paths.json
    header = tarfile.TarInfo("info/paths.json")
    header.size = size
    header.mtime = 0
    info_tar = _zstd_rle_zeros_after(head + header.tobuf(tarfile.PAX_FORMAT), size + 1024)
    with zipfile.ZipFile(pkg, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, info_tar if name.startswith("info-") else data)
    assert pkg.stat().st_size < 100_000
    lock = _lock_for(tmp_path, chan, "egbomb")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.monotonic()
    code, lines = _create(tmp_path, lock, tmp_path / "env")
    elapsed = time.monotonic() - t0
    assert code == 3 and len(lines) == 1, lines
    assert "'info/paths.json' of 1073741824 bytes" in lines[0] and "egbomb" in lines[0] and f"{METADATA_CAP // (1 << 20)} MiB" in lines[0]
    assert elapsed < 60
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib < 600 * 1024 or peak_kib == before, peak_kib  # far below the 1 GiB it would inflate to


# --------------------------------------------------------------------------- an endless body


@pytest.mark.slow
def test_an_http_server_sending_an_endless_body_is_refused_past_the_cap(tmp_path: Path) -> None:
    """A server sending an endless body for a 700-byte artifact: 3.4-5.9 GB written in 60 s, no answer."""
    import http.server
    import threading

    chan = channels.make_channel(tmp_path / "chan", [
        {"name": "egendless", "version": "1.0", "noarch": "generic", "files": {"share/egendless.txt": "x\n"}}])
    state = {"endless": False, "sent": 0}

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):  # type: ignore[no-untyped-def]
            super().__init__(*a, directory=str(chan), **kw)

        def log_message(self, *_a: object) -> None:
            pass

        def do_GET(self) -> None:
            if not (state["endless"] and self.path.endswith(".tar.bz2")):
                super().do_GET()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"\0" * 65536
            try:
                while state["sent"] < 4 << 30:
                    self.wfile.write(chunk)
                    state["sent"] += len(chunk)
            except OSError:
                pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        lock = make_lock(write_env(tmp_path / "proj", f"http://127.0.0.1:{server.server_address[1]}",
                                   ["egendless"]))
        state["endless"] = True
        t0 = time.monotonic()
        code, lines = _create(tmp_path, lock, tmp_path / "env", ENVGUARD_MAX_ARTIFACT_BYTES="2000000")
        elapsed = time.monotonic() - t0
    finally:
        server.shutdown()
        server.server_close()
    assert code == 3 and len(lines) == 1, lines
    assert "egendless 1.0: the server sent more than 2000000 bytes" in lines[0]
    assert elapsed < 60 and state["sent"] < 200 << 20, (elapsed, state["sent"])
    left = [p for p in (tmp_path / "pkgs").rglob("*") if p.is_file() and p.stat().st_size > 2_000_000]
    assert left == [] and not (tmp_path / "env").exists()


# --------------------------------------------------------------------------- each cold archive read a bounded number of times

RCHAR_PROBE = """
import sys
from envguard.cli.entry import run
code = run(sys.argv[1:])
with open("/proc/self/io") as f:
    io = dict(line.split(": ") for line in f.read().splitlines())
print(f"rchar={io['rchar']} rc={code}", file=sys.stderr)
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io")
def test_a_cold_file_archive_is_hashed_once_not_before_and_again_while_copied(tmp_path: Path) -> None:
    """A cold `file://` archive was hashed on the channel's path, then hashed again as it was copied into the
    private folder: four reads of every archive (hash, copy, scan, extract), then three. Now two, neither through
    Python (#42): rattler extracts it into staging and reports the sha256 of the bytes it read, and rattler lists
    its entries' names in one call. Measured as the bytes the process and
    its reaped children (the extracting process) read (rchar), against a one-kilobyte package's create to cancel
    out the imports."""
    import subprocess
    import sys

    probe = tmp_path / "rchar_probe.py"
    probe.write_text(RCHAR_PROBE)

    def read_bytes(name: str, size: int) -> tuple[int, int]:
        chan = tmp_path / f"chan-{name}"
        pkg = channels.build_package(chan, name, "1.0", noarch="generic", fmt="conda",
                                     files={"share/blob.bin": os.urandom(size)})
        lock = _lock_for(tmp_path, chan, name)
        proc = subprocess.run([sys.executable, str(probe), "create", "-p", str(tmp_path / f"env-{name}"),
                               "--lockfile", str(lock), "--no-check", "--quiet"], capture_output=True, text=True,
                              env={**os.environ, "ENVGUARD_PKGS_DIR": str(tmp_path / f"pkgs-{name}")}, timeout=300)
        last = proc.stderr.strip().splitlines()[-1]
        assert last.endswith("rc=0"), proc.stderr
        return int(last.split()[0].removeprefix("rchar=")), pkg.stat().st_size

    small, _ = read_bytes("egsmall", 1024)
    big, size = read_bytes("egbig", 32 << 20)
    reads = (big - small) / size
    # the archive twice (extracted, hashed on the way; its entries' names listed): envguard.create.unpack
    assert 1.5 < reads < 2.5, f"each cold archive read {reads:.2f} times (extracted, names listed: 2)"


# --------------------------------------------------------------------------- zip members no directory lists


def _eocd_at(data: bytes) -> int:
    return data.rfind(b"PK\x05\x06")


def _hide_members(clean: bytes, hidden_zip: bytes) -> bytes:
    """``clean`` with the local headers and data of ``hidden_zip`` placed between its last listed member and its
    central directory (whose offset in the end record moves with them): a directory reader sees ``clean``, a
    reader of local headers front to back sees both."""
    eocd = _eocd_at(clean)
    cd_offset = struct.unpack_from("<I", clean, eocd + 16)[0]
    hidden = hidden_zip[:struct.unpack_from("<I", hidden_zip, _eocd_at(hidden_zip) + 16)[0]]
    out = bytearray(clean[:cd_offset] + hidden + clean[cd_offset:])
    struct.pack_into("<I", out, eocd + len(hidden) + 16, cd_offset + len(hidden))
    return bytes(out)


def _zip_of(members: dict[str, bytes]) -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


@pytest.mark.slow
def test_a_conda_with_hidden_zip_members_is_refused_and_nothing_of_it_linked(tmp_path: Path) -> None:
    """Members placed between the last listed member and the central directory: the scan read the directory
    and saw a clean package, rattler's extractor read the local headers in order and linked
    `share/b -> /etc/passwd` (exit 0). Now the archive is refused before anything extracts it, exit 3."""
    chan = tmp_path / "chan"
    pkg = channels.build_package(chan, "eghidden", "1.0", noarch="generic", fmt="conda",
                                 files={"share/a.txt": "a\n"})
    with zipfile.ZipFile(pkg) as zf:
        listed = {i.filename: zf.read(i) for i in zf.infolist()}
    # the same package with `share/b -> /etc/passwd` declared in its paths.json and present in its payload
    evil = channels.build_package(tmp_path / "evil", "eghidden", "1.0", noarch="generic", fmt="conda",
                                  files={"share/a.txt": "a\n"}, symlinks={"share/b": "/etc/passwd"})
    with zipfile.ZipFile(evil) as zf:
        hidden = _zip_of({i.filename: zf.read(i) for i in zf.infolist() if i.filename != "metadata.json"})
    pkg.write_bytes(_hide_members(pkg.read_bytes(), hidden))
    with zipfile.ZipFile(pkg) as zf:  # the directory still lists the clean package alone
        assert sorted(zf.namelist()) == sorted(listed)
    lock = _lock_for(tmp_path, chan, "eghidden")
    target = tmp_path / "env"
    code, lines = _create(tmp_path, lock, target)
    assert code == 3 and len(lines) == 1, lines
    assert "eghidden 1.0" in lines[0] and "does not list" in lines[0], lines
    assert not target.exists() and siblings(target) == []
    assert not list((tmp_path / "pkgs").glob("eghidden-1.0*/share")), "nothing of it may reach the cache"


@pytest.mark.parametrize("case", ["clean", "hidden-before-directory", "hidden-at-start", "data-after-end",
                                  "overlapping", "cut-short"])
def test_the_zip_layout_check_accounts_for_every_byte(case: str) -> None:
    """The directory must account for every byte: a gap (anywhere), an overlap, trailing bytes, a cut file."""
    import io

    from envguard.create.zipcheck import ZipLayoutError, check_layout

    clean = _zip_of({"metadata.json": b"{}", "info-x.tar.zst": b"i" * 100, "pkg-x.tar.zst": b"p" * 300})
    hidden = _zip_of({"pkg-x.tar.zst": b"evil"})
    data = {
        "clean": clean,
        "hidden-before-directory": _hide_members(clean, hidden),
        "data-after-end": clean + b"\0" * 16,
        "cut-short": clean[:-30],
    }.get(case)
    if case == "hidden-at-start":  # bytes before the first member: the end record's offsets no longer fit
        data = hidden[:_eocd_at(hidden)] + clean
    if case == "overlapping":  # the second directory entry points at the first member's header
        buf = bytearray(clean)
        cd = struct.unpack_from("<I", buf, _eocd_at(clean) + 16)[0]
        second = buf.index(b"PK\x01\x02", cd + 4)
        struct.pack_into("<I", buf, second + 42, 0)
        data = bytes(buf)
    assert data is not None
    if case == "clean":
        check_layout(io.BytesIO(data))
        return
    with pytest.raises(ZipLayoutError):
        check_layout(io.BytesIO(data))


@pytest.mark.slow
def test_a_payload_that_declares_more_than_the_extraction_budget_is_refused_at_its_header(tmp_path: Path) -> None:
    """A 100 KB .conda whose payload tar declares a 2 GiB file of zeros: the scan inflated it and the installer
    wrote it to the disk. Now the header that crosses ENVGUARD_MAX_EXTRACTED_BYTES (1 GiB here) refuses it,
    quickly, with nothing written."""
    chan = tmp_path / "chan"
    pkg = channels.build_package(chan, "egzbomb", "1.0", noarch="generic", fmt="conda",
                                 files={"share/egzbomb.txt": "x\n"})
    with zipfile.ZipFile(pkg) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    size = 2 << 30
    header = tarfile.TarInfo("share/egzbomb.txt")
    header.size = size
    header.mtime = 0
    pkg_tar = _zstd_rle_zeros_after(header.tobuf(tarfile.PAX_FORMAT), size + 1024)
    with zipfile.ZipFile(pkg, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, pkg_tar if name.startswith("pkg-") else data)
    assert pkg.stat().st_size < 200_000
    lock = _lock_for(tmp_path, chan, "egzbomb")
    t0 = time.monotonic()
    code, lines = _create(tmp_path, lock, tmp_path / "env", ENVGUARD_MAX_EXTRACTED_BYTES=str(1 << 30))
    assert code == 3 and len(lines) == 1, lines
    assert "egzbomb 1.0" in lines[0] and "ENVGUARD_MAX_EXTRACTED_BYTES" in lines[0], lines
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / "env").exists()
    assert not list((tmp_path / "pkgs").glob("egzbomb-1.0*/share"))


def _payload_tar(entries: list[tarfile.TarInfo], data: dict[str, bytes]) -> bytes:
    import io

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info in entries:
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data[info.name]) if info.name in data else None)
    return buf.getvalue()


def _entry(name: str, kind: bytes = tarfile.REGTYPE, *, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.size, info.linkname, info.mode = kind, size, link, 0o644
    return info


HOSTILE_PAYLOADS = {
    # name: (the payload's entries beside share/a.txt, words the one line must hold)
    "fifo": ([_entry("share/a.txt", tarfile.FIFOTYPE)], "share/a.txt"),
    "char-device": ([_entry("share/a.txt", tarfile.CHRTYPE)], "share/a.txt"),
    "unlisted-file": ([_entry("share/a.txt", size=2), _entry("share/extra.txt", size=2)], "share/extra.txt"),
    "listed-missing": ([], "share/a.txt"),
    "dotdot": ([_entry("share/a.txt", size=2), _entry("../escaped.txt", size=2)], "escaped.txt"),
    "absolute": ([_entry("share/a.txt", size=2), _entry("/tmp/eg-absolute.txt", size=2)], "eg-absolute.txt"),
    "hardlink-out": ([_entry("share/a.txt", size=2), _entry("share/h", tarfile.LNKTYPE, link="../../etc/passwd")],
                     "share/h"),
    "symlink-out": ([_entry("share/a.txt", size=2), _entry("share/s", tarfile.SYMTYPE, link="/etc/passwd")],
                    "share/s"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(HOSTILE_PAYLOADS))
def test_a_hostile_payload_entry_is_refused_naming_package_and_entry(tmp_path: Path, case: str) -> None:
    """Each entry an extractor could write otherwise than paths.json declares (a FIFO or device where a file is
    declared: rattler writes an empty file; a file paths.json does not list; a listed file the archive lacks;
    `../` and absolute names; links out of the prefix): exit 3 in one line naming the package and the entry,
    nothing linked, nothing outside touched, nothing cached."""
    chan = tmp_path / "chan"
    pkg = channels.build_package(chan, "eghostile", "1.0", noarch="generic", fmt="conda",
                                 files={"share/a.txt": "a\n"})
    entries, wanted = HOSTILE_PAYLOADS[case]
    data = {e.name: b"a\n" for e in entries if e.type == tarfile.REGTYPE}
    _rewrite_conda(pkg, pkg_tar=_payload_tar([tarfile.TarInfo.frombuf(e.tobuf(), "utf-8", "strict")
                                              for e in entries] if entries else [], data))
    lock = _lock_for(tmp_path, chan, "eghostile")
    target = tmp_path / "env"
    code, lines = _create(tmp_path, lock, target)
    assert code == 3 and len(lines) == 1, (case, lines)
    assert "eghostile" in lines[0] and wanted in lines[0], (case, lines)
    assert not target.exists() and siblings(target) == []
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/eg-absolute.txt").exists()
    assert not list((tmp_path / "pkgs").glob("eghostile-1.0*/share"))
