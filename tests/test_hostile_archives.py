"""Hostile package archives, one of each kind issue #42 names, all in one ``file://`` channel: each is locked
with the real `envguard lock` and refused by the real `envguard create` (a subprocess): exit 3 in one line
naming the package and the entry (the member, for the zip-level cases), nothing of it linked (the prefix never
made), nothing outside the package cache touched (a sentinel folder that the hostile entries aim at, by link,
by `../`, by absolute name), and the package cache holding no entry for it afterwards.

The zip-level rules (envguard.create.zipcheck) are also checked on their own, fast, on archives built here.
Archives are built by hand (tarfile, zipfile, zstd frames of raw and RLE blocks): no compression library is
needed and every byte is the one the test means.
"""

from __future__ import annotations

import bz2
import io
import json
import os
import struct
import tarfile
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import channels
from support.channels import _tar_bytes, _zstd_stored
from support.create_fixtures import envguard_run, make_lock, siblings, tree_state, write_env

from envguard.create.archive import check_all_before_extraction, check_before_extraction
from envguard.create.integrity import Artifact
from envguard.create.zipcheck import ZipBudgetError, ZipLayoutError, check_layout
from envguard.errors import IntegrityError

VERSION, BUILD = "1.0", "h0_0"
BOMB_BYTES = 2 << 30  # what each decompression bomb inflates to
BOMB_BUDGET = 1 << 30  # ENVGUARD_MAX_EXTRACTED_BYTES for the creates of the bombs
_DEEP = "../" * 40  # enough `../` to climb from any folder a package is extracted into up to /


# --------------------------------------------------------------------------- building archives


def _stem(name: str) -> str:
    return f"{name}-{VERSION}-{BUILD}"


def _info_members(scratch: Path, name: str, files: dict[str, str], symlinks: dict[str, str]
                  ) -> list[tuple[str, bytes | None, str | None, int]]:
    """The info/ members (index.json, paths.json, ...) of a package declaring ``files`` and ``symlinks``: the
    fixture builder's own, so paths.json says what conda-build would."""
    built = channels.build_package(scratch / name, name, VERSION, BUILD, noarch="generic", fmt="tar.bz2",
                                   files=files, symlinks=symlinks)
    with tarfile.open(built, "r:bz2") as tar:
        return [(m.name, tar.extractfile(m).read(), None, 0o644)  # type: ignore[union-attr]
                for m in tar.getmembers() if m.name.startswith("info/")]


def _entry(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "") -> tuple[tarfile.TarInfo,
                                                                                                  bytes]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.mtime = kind, link, 0o644, 0
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def _tar(entries: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return buf.getvalue()


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": the duplicate-member case means it
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, data in members:
                zf.writestr(zipfile.ZipInfo(name, date_time=(2025, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def _conda_members(name: str, info: list[tuple[str, bytes | None, str | None, int]], pkg_zst: bytes
                   ) -> list[tuple[str, bytes]]:
    return [("metadata.json", b'{"conda_pkg_format_version": 2}'), (f"pkg-{_stem(name)}.tar.zst", pkg_zst),
            (f"info-{_stem(name)}.tar.zst", _zstd_stored(_tar_bytes(info)))]


def _write(chan: Path, name: str, fmt: str, data: bytes) -> Path:
    out = chan / "noarch" / f"{_stem(name)}.{fmt}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def _package(chan: Path, scratch: Path, name: str, payload: list[tuple[tarfile.TarInfo, bytes]], *,
             files: dict[str, str], symlinks: dict[str, str] | None = None, fmt: str = "conda") -> Path:
    """A package whose paths.json declares ``files`` and ``symlinks`` and whose payload is ``payload``."""
    info = _info_members(scratch, name, files, symlinks or {})
    if fmt == "conda":
        return _write(chan, name, fmt, _zip(_conda_members(name, info, _zstd_stored(_tar(payload)))))
    info_entries = [_entry(p, data=d or b"") for p, d, _t, _m in info]
    return _write(chan, name, fmt, bz2.compress(_tar(info_entries + payload)))


def _lying_sizes(chan: Path, scratch: Path, name: str, _outside: Path) -> None:
    """paths.json declares 1 TiB for a file of 2 bytes: refused before extraction (the declared sizes against
    the budget) or after it (the file's size against paths.json), never installed."""
    info = _info_members(scratch, name, A, {})
    patched = []
    for path, data, target, mode in info:
        if path == "info/paths.json" and data is not None:
            doc = json.loads(data)
            doc["paths"][0]["size_in_bytes"] = 1 << 40
            data = json.dumps(doc).encode()
        patched.append((path, data, target, mode))
    pkg_zst = _zstd_stored(_tar([_entry("share/a.txt", data=b"a\n")]))
    _write(chan, name, "conda", _zip(_conda_members(name, patched, pkg_zst)))


def _zstd_rle(head: bytes, zeros: int, *, declare: bool) -> bytes:
    """A zstd frame: ``head`` in a raw block, then ``zeros`` NUL bytes in RLE blocks (4 bytes per 128 KiB);
    ``declare``: the frame header declares its content size (8 bytes), as a one-shot compressor writes it."""
    block = 128 * 1024
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out += bytes([0xC0 if declare else 0x00, 7 << 3])  # content-size flag 3 (8 bytes) or none; 128 KiB window
    if declare:
        out += struct.pack("<Q", len(head) + zeros)
    out += (len(head) << 3).to_bytes(3, "little") + head
    while zeros:
        n = min(block, zeros)
        zeros -= n
        out += ((1 if not zeros else 0) | (1 << 1) | (n << 3)).to_bytes(3, "little") + b"\0"
    return bytes(out)


def _bomb(chan: Path, scratch: Path, name: str, *, declare: bool) -> Path:
    """A .conda of a few tens of KB whose payload is one file of BOMB_BYTES NULs."""
    info = _info_members(scratch, name, {"share/bomb.bin": "x"}, {})
    header = tarfile.TarInfo("share/bomb.bin")
    header.size, header.mtime = BOMB_BYTES, 0
    pkg_zst = _zstd_rle(header.tobuf(tarfile.PAX_FORMAT), BOMB_BYTES + 1024, declare=declare)
    return _write(chan, name, "conda", _zip(_conda_members(name, info, pkg_zst)))


def _directory_offset(data: bytes) -> tuple[int, int]:
    """(where the end record is, the central directory offset it gives)."""
    eocd = data.rfind(b"PK\x05\x06")
    return eocd, struct.unpack_from("<I", data, eocd + 16)[0]


def _hide_members(clean: bytes, hidden_zip: bytes) -> bytes:
    """``clean`` with the local headers and data of ``hidden_zip`` placed between its last listed member and
    its central directory (whose offset moves with them): a directory reader sees ``clean``, a reader of local
    headers front to back sees both."""
    eocd, cd_offset = _directory_offset(clean)
    hidden = hidden_zip[:_directory_offset(hidden_zip)[1]]
    out = bytearray(clean[:cd_offset] + hidden + clean[cd_offset:])
    struct.pack_into("<I", out, eocd + len(hidden) + 16, cd_offset + len(hidden))
    return bytes(out)


# --------------------------------------------------------------------------- the hostile packages


@dataclass
class Case:
    build: Callable[[Path, Path, str, Path], object]  # (channel, scratch, package name, outside folder)
    words: Callable[[str, Path], list[str]]  # what the one line must hold beside the package's name
    env: dict[str, str] = field(default_factory=dict)


def _clean_conda(scratch: Path, name: str, files: dict[str, str], symlinks: dict[str, str] | None = None
                 ) -> bytes:
    return channels.build_package(scratch / f"{name}-clean", name, VERSION, BUILD, noarch="generic", fmt="conda",
                                  files=files, symlinks=symlinks).read_bytes()


def _hidden_members(chan: Path, scratch: Path, name: str, outside: Path) -> None:
    clean = _clean_conda(scratch, name, {"share/a.txt": "a\n"})
    evil = _clean_conda(scratch / "evil", name, {"share/a.txt": "a\n"}, {"share/b": str(outside / "sentinel")})
    with zipfile.ZipFile(io.BytesIO(evil)) as zf:
        hidden = _zip([(i.filename, zf.read(i)) for i in zf.infolist() if i.filename != "metadata.json"])
    _write(chan, name, "conda", _hide_members(clean, hidden))


def _duplicate_member(chan: Path, scratch: Path, name: str, outside: Path) -> None:
    info = _info_members(scratch, name, {"share/a.txt": "a\n"}, {})
    second = _zstd_stored(_tar([_entry("share/a.txt", tarfile.SYMTYPE, link=str(outside / "sentinel"))]))
    members = _conda_members(name, info, _zstd_stored(_tar([_entry("share/a.txt", data=b"a\n")])))
    _write(chan, name, "conda", _zip([*members, (f"pkg-{_stem(name)}.tar.zst", second)]))


def _local_sizes(chan: Path, scratch: Path, name: str, _outside: Path) -> None:
    """The pkg member's local header gives other sizes than its directory entry (a streaming reader reads
    another span of bytes as that member)."""
    data = bytearray(_clean_conda(scratch, name, {"share/a.txt": "a\n"}))
    member = f"pkg-{_stem(name)}.tar.zst".encode()
    at = data.rindex(b"PK\x03\x04", 0, data.index(member))  # its local header: the name's first place
    csize, usize = struct.unpack_from("<II", data, at + 18)
    struct.pack_into("<II", data, at + 18, csize - 512, usize - 512)
    _write(chan, name, "conda", bytes(data))


def _twice(fmt: str) -> Callable[[Path, Path, str, Path], object]:
    def build(chan: Path, scratch: Path, name: str, outside: Path) -> None:
        _package(chan, scratch, name, [_entry("share/ok.txt", data=b"ok\n"),
                                       _entry("share/passwd", tarfile.SYMTYPE, link="ok.txt"),
                                       _entry("./share//passwd", tarfile.SYMTYPE, link=str(outside / "sentinel"))],
                 files={"share/ok.txt": "ok\n"}, symlinks={"share/passwd": "ok.txt"}, fmt=fmt)
    return build


def _twice_benign_last(chan: Path, scratch: Path, name: str, outside: Path) -> None:
    """Two `share/passwd`: the first to the sentinel outside, the last the declared `-> ok.txt`. An extractor
    keeps the last (harmless), a reader of the first judges the other one: refused all the same."""
    _package(chan, scratch, name, [_entry("share/ok.txt", data=b"ok\n"),
                                   _entry("share/passwd", tarfile.SYMTYPE, link=str(outside / "sentinel")),
                                   _entry("./share//passwd", tarfile.SYMTYPE, link="ok.txt")],
             files={"share/ok.txt": "ok\n"}, symlinks={"share/passwd": "ok.txt"}, fmt="tar.bz2")


def _declared(files: dict[str, str], symlinks: dict[str, str]) -> list[tuple[tarfile.TarInfo, bytes]]:
    return ([_entry(p, data=d.encode()) for p, d in files.items()]
            + [_entry(p, tarfile.SYMTYPE, link=t) for p, t in symlinks.items()])


def _consistent(files: Callable[[Path], dict[str, str]], symlinks: Callable[[Path], dict[str, str]] = lambda _o: {}
                ) -> Callable[[Path, Path, str, Path], object]:
    """A package whose paths.json declares exactly what its payload holds: only the path rules refuse it."""
    def build(chan: Path, scratch: Path, name: str, outside: Path) -> None:
        f, s = files(outside), symlinks(outside)
        links_first = sorted(s.items(), key=lambda kv: len(kv[0]))  # a linked folder before what is under it
        payload = [_entry(p, tarfile.SYMTYPE, link=t) for p, t in links_first] + _declared(f, {})
        _package(chan, scratch, name, payload, files=f, symlinks=s)
    return build


def _payload(entries: Callable[[Path], list[tuple[tarfile.TarInfo, bytes]]], files: dict[str, str]
             ) -> Callable[[Path, Path, str, Path], object]:
    """A package whose paths.json declares ``files`` and whose payload is ``entries``."""
    def build(chan: Path, scratch: Path, name: str, outside: Path) -> None:
        _package(chan, scratch, name, entries(outside), files=files)
    return build


A = {"share/a.txt": "a\n"}
CASES: dict[str, Case] = {
    "hidden-zip-members": Case(_hidden_members, lambda n, _o: ["does not list", "hidden there"]),
    "duplicate-zip-members": Case(_duplicate_member, lambda n, _o: [f"duplicate members pkg-{_stem(n)}"]),
    "local-header-sizes": Case(_local_sizes, lambda n, _o: [f"local header for 'pkg-{_stem(n)}.tar.zst'"]),
    # the last of the two is the hostile one: whichever rule sees it first (the tar headers' names, the path
    # rules of the extracted tree) names share/passwd
    "duplicate-tar-entries-conda": Case(_twice("conda"), lambda n, _o: ["share/passwd"]),
    "duplicate-tar-entries-tar-bz2": Case(_twice("tar.bz2"), lambda n, _o: ["share/passwd"]),
    # the last of the two is the declared, harmless one: only a rule on the names themselves refuses it
    "duplicate-tar-entries-tar-bz2-benign-last": Case(_twice_benign_last,
                                                      lambda n, _o: ["share/passwd", "twice"]),
    "dotdot-path": Case(_consistent(lambda o: {**A, _DEEP + str(o / "dotdot.txt").lstrip("/"): "x\n"}),
                        lambda n, _o: ["../../"]),
    "absolute-path": Case(_consistent(lambda o: {**A, str(o / "absolute.txt"): "x\n"}),
                          lambda n, _o: ["absolute.txt"]),
    "symlink-out": Case(_consistent(lambda _o: A, lambda o: {"share/s": str(o / "sentinel")}),
                        lambda n, _o: ["share/s"]),
    "symlink-dir-write-through": Case(_consistent(lambda _o: {"share/d/pwned.txt": "x\n"},
                                                  lambda o: {"share/d": str(o)}), lambda n, _o: ["share/d"]),
    "hardlink-out": Case(_payload(lambda o: [_entry("share/a.txt", data=b"a\n"),
                                             _entry("share/h", tarfile.LNKTYPE,
                                                    link=_DEEP + str(o / "sentinel").lstrip("/"))],
                                  {**A, "share/h": "h\n"}), lambda n, _o: ["share/h"]),
    "fifo": Case(_payload(lambda _o: [_entry("share/a.txt", tarfile.FIFOTYPE)], A), lambda n, _o: ["share/a.txt"]),
    "char-device": Case(_payload(lambda _o: [_entry("share/a.txt", tarfile.CHRTYPE)], A),
                        lambda n, _o: ["share/a.txt"]),
    "block-device": Case(_payload(lambda _o: [_entry("share/a.txt", tarfile.BLKTYPE)], A),
                         lambda n, _o: ["share/a.txt"]),
    "file-not-in-paths-json": Case(_payload(lambda _o: [_entry("share/a.txt", data=b"a\n"),
                                                        _entry("share/extra.txt", data=b"x\n")], A),
                                   lambda n, _o: ["share/extra.txt", "does not list"]),
    "listed-file-missing": Case(_payload(lambda _o: [_entry("share/a.txt", data=b"a\n")],
                                         {**A, "share/gone.txt": "g\n"}), lambda n, _o: ["share/gone.txt"]),
    "paths-json-declares-a-terabyte": Case(_lying_sizes, lambda n, _o: ["share/a.txt"]),
    "zstd-bomb-declared-size": Case(lambda c, s, n, _o: _bomb(c, s, n, declare=True),
                                    lambda n, _o: [f"'pkg-{_stem(n)}.tar.zst'", "ENVGUARD_MAX_EXTRACTED_BYTES"],
                                    {"ENVGUARD_MAX_EXTRACTED_BYTES": str(BOMB_BUDGET)}),
    "zstd-bomb-no-declared-size": Case(lambda c, s, n, _o: _bomb(c, s, n, declare=False),
                                       lambda n, _o: ["share/bomb.bin", "ENVGUARD_MAX_EXTRACTED_BYTES"],
                                       {"ENVGUARD_MAX_EXTRACTED_BYTES": str(BOMB_BUDGET)}),
}


def _name(case: str) -> str:
    return "egh-" + case


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the channel holding every hostile package, the sentinel folder outside everything envguard owns)."""
    root = tmp_path_factory.mktemp("hostile")
    outside = root / "outside"
    outside.mkdir()
    (outside / "sentinel").write_text("untouched\n")
    chan, scratch = root / "chan", root / "scratch"
    for case, spec in CASES.items():
        spec.build(chan, scratch, _name(case), outside)
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    channels.strip_indexed_timestamps(chan)
    return chan, outside


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_archive_is_refused_and_nothing_of_it_lands_anywhere(tmp_path: Path, hostile: tuple[Path, Path],
                                                                       case: str) -> None:
    chan, outside = hostile
    name, spec = _name(case), CASES[case]
    lock = make_lock(write_env(tmp_path / "proj", channels.channel_url(chan), [name]))
    before = tree_state(outside)
    links = os.stat(outside / "sentinel").st_nlink
    target, pkgs = tmp_path / "env", tmp_path / "pkgs"
    t0 = time.monotonic()
    proc = envguard_run("create", "-p", str(target), "--lockfile", str(lock), "--no-check", "--quiet",
                        env={"ENVGUARD_PKGS_DIR": str(pkgs), **spec.env}, timeout=120)
    elapsed = time.monotonic() - t0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3 and len(lines) == 1, (case, proc.returncode, proc.stderr[-2000:])
    assert name in lines[0] and "internal error" not in lines[0], (case, lines)
    for word in spec.words(name, outside):
        assert word in lines[0], (case, word, lines)
    # nothing of it linked: the prefix was never made, nor anything beside it
    assert not target.exists() and siblings(target) == [], case
    # nothing outside touched: the sentinel folder byte for byte, no hard link to the sentinel made
    assert tree_state(outside) == before and os.stat(outside / "sentinel").st_nlink == links, case
    # the cache holds no entry of it (extracted or half-extracted), and no leftovers of the run
    left = sorted(p.name for p in pkgs.iterdir()) if pkgs.exists() else []
    assert not [n for n in left if n.startswith(_stem(name)) and not n.endswith(".lock")], (case, left)
    assert not [n for n in left if n.startswith(".envguard-") and not n.endswith(".json")], (case, left)
    # a bomb is refused before it is inflated: quickly, and with nothing large written anywhere
    big = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size > 64 << 20]
    assert big == [] and elapsed < 60, (case, big, elapsed)


# --------------------------------------------------------------------------- the zip rules, on their own


def _clean_zip() -> bytes:
    return _zip([("metadata.json", b"{}"), ("info-x.tar.zst", _zstd_stored(b"i" * 100)),
                 ("pkg-x.tar.zst", _zstd_stored(b"p" * 300))])


def _patched(data: bytes, member: str, offset: int, fmt: str, value: int, *, central: bool = False) -> bytes:
    """``data`` with one field of ``member``'s local header (or directory entry) set to ``value``."""
    out = bytearray(data)
    sig = b"PK\x01\x02" if central else b"PK\x03\x04"
    name_at = 46 if central else 30
    at = next(i for i in range(len(out)) if out[i:i + 4] == sig and out[i + name_at:i + name_at + len(member)]
              == member.encode())
    struct.pack_into(fmt, out, at + offset, value)
    return bytes(out)


def _data_descriptor_zip(compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip written to an unseekable stream: each member's sizes follow its data (flag bit 3)."""
    class Unseekable(io.RawIOBase):
        def __init__(self) -> None:
            self.buf = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, b: bytes) -> int:  # type: ignore[override]
            self.buf += b
            return len(b)

    sink = Unseekable()
    with zipfile.ZipFile(sink, "w", compression=compression) as zf:
        for name, data in (("metadata.json", b"{}"), ("pkg-x.tar.zst", _zstd_stored(b"p" * 300))):
            with zf.open(name, "w") as fh:
                fh.write(data)
    return bytes(sink.buf)


def _zip64_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in (("metadata.json", b"{}"), ("pkg-x.tar.zst", _zstd_stored(b"p" * 300))):
            with zf.open(name, "w", force_zip64=True) as fh:
                fh.write(data)
    return buf.getvalue()


ACCEPTED = {"clean": _clean_zip, "data-descriptors": _data_descriptor_zip, "zip64-sizes": _zip64_zip,
            "archive-comment": lambda: _clean_zip()[:-2] + struct.pack("<H", 9) + b"a comment"}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_a_zip_whose_directory_accounts_for_every_byte_is_accepted(case: str) -> None:
    data = ACCEPTED[case]()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.testzip() is None
    assert check_layout(io.BytesIO(data), budget=1 << 20) > 0


def _refused() -> dict[str, tuple[bytes, str]]:
    clean = _clean_zip()
    eocd, cd = _directory_offset(clean)
    # a comment holding an end record of its own (not ending the file): readers that take the last signature
    # (Python's zipfile) read that one
    second_eocd = clean[:-2] + struct.pack("<H", 24) + clean[eocd:eocd + 22] + b"xx"
    return {
        "hidden-before-directory": (_hide_members(clean, _zip([("pkg-x.tar.zst", b"evil")])),
                                    "(a member 'pkg-x.tar.zst' hidden there)"),
        "hidden-at-start": (_zip([("pkg-x.tar.zst", b"evil")])[:_directory_offset(
            _zip([("pkg-x.tar.zst", b"evil")]))[0]] + clean, "end record"),
        "duplicate-names": (_zip([("metadata.json", b"{}"), ("pkg-x.tar.zst", b"a"), ("pkg-x.tar.zst", b"b")]),
                            "duplicate members pkg-x.tar.zst"),
        "overlapping": (_patched(clean, "info-x.tar.zst", 42, "<I", 0, central=True), "overlap"),
        "data-after-end-record": (clean + b"\0" * 16, "end record"),
        "data-between-directory-and-end": (clean[:eocd] + b"\0" * 16 + clean[eocd:eocd + 16]
                                           + struct.pack("<I", cd) + clean[eocd + 20:], "between"),
        "second-end-record-in-comment": (second_eocd, "second end record"),
        "cut-short": (clean[:-30], "end"),
        "local-sizes": (_patched(clean, "pkg-x.tar.zst", 18, "<I", 100), "other sizes"),
        "local-method": (_patched(clean, "pkg-x.tar.zst", 8, "<H", 8), "compression method"),
        "local-crc": (_patched(clean, "pkg-x.tar.zst", 14, "<I", 1), "CRC"),
        "local-flags": (_patched(clean, "pkg-x.tar.zst", 6, "<H", 0x08), "flags"),
        "local-name": (_patched(clean, "pkg-x.tar.zst", 30, "<B", ord("q")), "another member's header"),
        "stored-with-descriptor": (_data_descriptor_zip(zipfile.ZIP_STORED), "a data descriptor"),
        "descriptor-sizes": (_patched(_data_descriptor_zip(), "pkg-x.tar.zst", 24, "<I", 5, central=True),
                             "other sizes"),
    }


@pytest.mark.parametrize("case", sorted(_refused()))
def test_a_zip_whose_readers_could_disagree_is_refused_from_its_headers(case: str) -> None:
    data, words = _refused()[case]
    with pytest.raises(ZipLayoutError) as err:
        check_layout(io.BytesIO(data), budget=1 << 40)
    assert words in str(err.value), (case, str(err.value))


def test_declared_sizes_are_held_to_the_budget_before_anything_is_inflated() -> None:
    """The zstd frame content size of a stored .tar.zst member (when its header has one) and the directory's
    uncompressed sizes count against the budget; a frame that declares none is left to the tar headers."""
    header = tarfile.TarInfo("share/bomb.bin")
    header.size = BOMB_BYTES
    head = header.tobuf(tarfile.PAX_FORMAT)
    skippable = struct.pack("<II", 0x184D2A5E, 5) + b"hello"  # content-free frames first hide nothing
    for declare, first in ((True, b""), (True, skippable + skippable), (False, b"")):
        bomb = first + _zstd_rle(head, 1 << 20, declare=declare)
        data = _zip([("metadata.json", b"{}"), ("pkg-x.tar.zst", bomb)])
        assert len(data) < 64 << 10
        if declare:
            with pytest.raises(ZipBudgetError, match=r"'pkg-x\.tar\.zst'.*ENVGUARD_MAX_EXTRACTED_BYTES"):
                check_layout(io.BytesIO(data), budget=1 << 20)
        assert check_layout(io.BytesIO(data), budget=1 << 30) < 1 << 30
    deflated = io.BytesIO()
    with zipfile.ZipFile(deflated, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg-x.tar.zst", bytes(8 << 20))  # 8 MiB in a few KB, declared in the directory
    with pytest.raises(ZipBudgetError, match="8388608 bytes"):
        check_layout(io.BytesIO(deflated.getvalue()), budget=1 << 20)


def _artifact(path: Path) -> Artifact:
    return Artifact(path.name.split("-")[0], VERSION, BUILD, path.as_uri(), None, None, "noarch")


# --------------------------------------------------------------------------- everything before extraction, at once


@pytest.mark.parametrize("case", ["clean", "clean-tar-bz2", "hidden-zip-members", "unexpected-member",
                                  "zstd-bomb-declared-size", "paths-json-declares-a-terabyte"])
def test_what_is_judged_before_extraction_names_the_package_and_the_member(tmp_path: Path, case: str) -> None:
    """envguard.create.archive.check_before_extraction, the one call before an archive is handed to the
    extractor: the zip layout, the members, the declared sizes (zip directory, zstd frame, paths.json); a
    .tar.bz2 passes (its names are judged beside its extraction). Nothing is extracted: the test's folder holds
    only what it built."""
    chan, scratch, outside = tmp_path / "chan", tmp_path / "scratch", tmp_path / "outside"
    name = "egpre"
    fmt = "tar.bz2" if case.endswith("tar-bz2") else "conda"
    if case in ("clean", "clean-tar-bz2"):
        _package(chan, scratch, name, [_entry("share/a.txt", data=b"a\n")], files=A, fmt=fmt)
    elif case == "unexpected-member":
        info = _info_members(scratch, name, A, {})
        members = _conda_members(name, info, _zstd_stored(_tar([_entry("share/a.txt", data=b"a\n")])))
        _write(chan, name, fmt, _zip([*members, ("pkg-other.tar.zst", b"x")]))
    else:
        CASES[case].build(chan, scratch, name, outside)
    path = chan / "noarch" / f"{_stem(name)}.{fmt}"
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    env = {"ENVGUARD_MAX_EXTRACTED_BYTES": str(BOMB_BUDGET)}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        if case.startswith("clean"):
            check_before_extraction(_artifact(path), path)
            return
        with pytest.raises(IntegrityError) as err:
            check_before_extraction(_artifact(path), path)
    words = {"hidden-zip-members": "hidden there", "unexpected-member": "unexpected members pkg-other.tar.zst",
             "zstd-bomb-declared-size": f"'pkg-{_stem(name)}.tar.zst'",
             "paths-json-declares-a-terabyte": "'share/a.txt'"}[case]
    assert f"{name} {VERSION}" in str(err.value) and words in str(err.value), str(err.value)
    if "bomb" in case or "terabyte" in case:
        assert "ENVGUARD_MAX_EXTRACTED_BYTES" in str(err.value)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_many_archives_are_judged_together_and_the_first_refusal_in_order_is_named(tmp_path: Path) -> None:
    """The info sections are read concurrently; the refusal is the first failing archive in lock order."""
    chan, scratch, outside = tmp_path / "chan", tmp_path / "scratch", tmp_path / "outside"
    items = []
    for name, build in (("egok", None), ("eglying", _lying_sizes), ("eghidden", _hidden_members),
                        ("egok2", None)):
        if build is None:
            _package(chan, scratch, name, [_entry("share/a.txt", data=b"a\n")], files=A)
        else:
            build(chan, scratch, name, outside)
        path = chan / "noarch" / f"{_stem(name)}.conda"
        items.append((_artifact(path), path))
    check_all_before_extraction([items[0], items[3]])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ENVGUARD_MAX_EXTRACTED_BYTES", str(BOMB_BUDGET))
        with pytest.raises(IntegrityError, match=r"eghidden 1\.0"):  # its zip headers: before any info is read
            check_all_before_extraction(items)
        with pytest.raises(IntegrityError, match=r"eglying 1\.0.*'share/a\.txt'"):
            check_all_before_extraction([items[0], items[1], items[3]])


def test_a_conda_written_by_conda_forges_own_writer_passes_and_its_frame_sizes_are_read(tmp_path: Path) -> None:
    """conda-package-streaming's transmute (the writer of conda-package-handling, which builds conda-forge's
    .conda files) from a .tar.bz2: the layout passes, and its zstd frames declare their content sizes, which
    are what the budget counts (more than the members' stored sizes)."""
    from conda_package_streaming.transmute import transmute

    bz2_pkg = channels.build_package(tmp_path / "chan", "egreal", VERSION, BUILD, noarch="generic", fmt="tar.bz2",
                                     files={f"lib/f{i}": "x" * i for i in range(300)}, symlinks={"lib/l": "f1"})
    (tmp_path / "out").mkdir()
    conda = Path(transmute(str(bz2_pkg), str(tmp_path / "out")))
    with zipfile.ZipFile(conda) as zf:
        stored = sum(i.file_size for i in zf.infolist())
    with open(conda, "rb") as fh:
        declared = check_layout(fh, budget=1 << 30)
    assert declared > stored + 300 * 299 // 2  # the inflated tars hold at least the files' bytes
    check_before_extraction(_artifact(conda), conda)
    with open(conda, "rb") as fh, pytest.raises(ZipBudgetError):
        check_layout(fh, budget=declared - 1)
