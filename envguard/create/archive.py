"""What envguard judges of a package archive itself, before rattler extracts it, and how an archive is fetched.

* :func:`check_all_before_extraction`: every cold archive, before anything inflates it (exit 3 naming the
  package and the member or entry). A ``.conda`` from its zip headers (envguard.create.zipcheck: the directory
  accounts for every byte, no member hidden, listed twice or overlapping, local headers agreeing with the
  directory, only the three members a ``.conda`` holds) and from its small info section (each entry at most
  METADATA_CAP, no name twice, and what the zip directory, the zstd frame headers and ``info/paths.json``'s
  ``size_in_bytes`` declare held to ENVGUARD_MAX_EXTRACTED_BYTES). A ``.tar.bz2`` has no directory: its entry
  names are judged from rattler's own listing beside its extraction (envguard.create.stagedtree.check_names),
  and its extraction is bounded by the byte budget (envguard.create.unpack).
* :class:`EntryLedger`: the tar entries read, under their normalised names (``./a//b`` is ``a/b``, as the
  extractor writes it): a name twice, an ``info/`` entry past METADATA_CAP, or entries declaring more than the
  budget is refused at the entry's header, before its data is inflated.
* :func:`private_copy`: an archive copied once into this run's private folder, hashed on the way (for an
  installer that reads the archive itself); :func:`bounded_download`: an http(s) download stops, and is
  refused, past ENVGUARD_MAX_ARTIFACT_BYTES (the lock records no size): a server sending an endless body fills
  neither the disk nor the time.
* :data:`METADATA_CAP`: no entry of the ``info/`` section larger than this is read (64 MiB; real packages'
  metadata is kilobytes): a small archive whose ``paths.json`` inflates to gigabytes is refused at its header.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from envguard import settings
from envguard.create.integrity import Artifact, VerifiedStamps, mismatch_error, purge_cache_entry
from envguard.errors import BackendError, IntegrityError
from envguard.redact import redact, shorten

#: the largest ``info/`` entry of an archive that is read (decompressed size, from its tar header)
METADATA_CAP = 64 * 1024 * 1024
_CHUNK = 1 << 20


def private_copy(art: Artifact, src: Path, dest: Path, cache_dir: Path, *, lockfile: Path | None = None,
                 stamps: VerifiedStamps | None = None) -> None:
    """Copy ``src`` to ``dest`` through one open file, hashing what is copied; raise IntegrityError (after
    removing the copy and the package's cache entry) when that is not what the lock names. A right hash is
    stamped in ``stamps`` for the file that was open (its identity from fstat: a file swapped in at ``src``
    meanwhile has another inode and ctime, so the stamp never vouches for it)."""
    algorithm, expected = ("sha256", art.sha256) if art.sha256 else ("md5", art.md5)
    where = redact(art.locked_url or art.url)
    if not expected:
        raise IntegrityError(f"{art.name} {art.version}: the lock has no sha256 or md5 for {where}",
                             fix="re-lock with `envguard lock`", command="envguard lock")
    h = hashlib.new(algorithm)
    try:
        fd = os.open(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO swapped in must not block
    except FileNotFoundError:
        raise BackendError(f"{art.name} {art.version}: artifact not found: {where}",
                           fix="restore the channel, or re-lock against a channel that has it") from None
    except OSError as e:
        raise BackendError(f"{art.name} {art.version}: cannot read {where}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IntegrityError(f"{art.name} {art.version}: the locked artifact {src} is not a regular file",
                                 fix="restore the package archive the lock names, or re-lock")
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while chunk := os.read(fd, _CHUNK):
                h.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
        finally:
            os.close(out)
    finally:
        os.close(fd)
    actual = h.hexdigest()
    if actual != expected.lower():
        dest.unlink(missing_ok=True)
        purge_cache_entry(cache_dir, art.stem)
        raise mismatch_error(art.name, art.version, art.locked_url or art.url, expected, actual, algorithm,
                             lockfile=lockfile)
    if stamps is not None:
        stamps.record(src, st, f"{algorithm}:{actual}")


def normalised(name: str) -> str:
    """A tar entry's name as an extractor writes it: no empty or ``.`` parts, no leading ``/``."""
    return "/".join(part for part in name.split("/") if part not in ("", "."))


class EntryLedger:
    """The tar entries of one archive, as they are read; see the module doc."""

    def __init__(self, art: Artifact, filename: str) -> None:
        self.art = art
        self.filename = filename
        self.conda = filename.endswith(".conda")
        self.kinds: dict[str, bool] = {}  # normalised name -> is a directory
        self.declared_bytes = 0  # the bytes its entries' headers declare, so far
        self.budget = settings.max_extracted_bytes()

    def _refuse(self, what: str, why: str = "the installer could extract other bytes than envguard checked"
                ) -> IntegrityError:
        return IntegrityError(f"{self.art.name} {self.art.version}: the archive {shorten(self.filename, 120)} "
                              f"{what}; {why}",
                              fix="use the channel's original archive, or re-lock")

    def add(self, section: str, name: str, *, kind: str, size: int) -> None:
        """One entry; ``kind``: "file", "symlink", "hardlink" or "other" (a directory, or a FIFO or device,
        which the reader does not tell apart: the extracted tree is judged by paths.json, stagedtree)."""
        key = normalised(name)
        if not key:
            return
        is_dir = kind == "other"
        in_info = key == "info" or key.startswith("info/")
        if self.conda and in_info != (section == "info"):
            where = "its payload (pkg-*.tar.zst)" if section == "pkg" else "its info-*.tar.zst"
            raise self._refuse(f"has the entry {shorten(key, 120)!r} in {where}")
        seen = self.kinds.get(key)
        if seen is not None and not (seen and is_dir):
            raise self._refuse(f"has the entry {shorten(key, 120)!r} twice")
        self.kinds[key] = is_dir
        self.declared_bytes += max(size, 0)
        if self.declared_bytes > self.budget:  # at the header, before the entry is inflated or extracted
            raise self._refuse(f"declares more than {self.budget} bytes of entries (at {shorten(key, 120)!r})",
                               "a decompression bomb would fill the disk (ENVGUARD_MAX_EXTRACTED_BYTES)")
        if section == "info" and size > METADATA_CAP:
            raise self._refuse(f"has the metadata entry {shorten(key, 120)!r} of {size} bytes (more than "
                               f"{METADATA_CAP // (1024 * 1024)} MiB)", "envguard reads no metadata that large")


def check_before_extraction(art: Artifact, path: Path) -> None:
    """:func:`check_all_before_extraction` of one archive."""
    check_all_before_extraction([(art, path)])


def check_all_before_extraction(items: Sequence[tuple[Artifact, Path]]) -> None:
    """Everything judged of each archive before anything inflates it (exit 3 naming the package, and the
    member or the entry; the first archive in ``items`` order that fails). A ``.conda``: its zip layout
    (envguard.create.zipcheck: members hidden from the directory, listed twice, overlapping, disagreeing local
    headers, data after the directory), its members (exactly ``metadata.json``, ``info-<stem>.tar.zst``,
    ``pkg-<stem>.tar.zst``), what they declare they inflate to (the directory's sizes, the zstd frames' content
    sizes), then its small info section: each entry at most METADATA_CAP, no name twice, and the sizes
    ``info/paths.json`` declares, in all, at most ENVGUARD_MAX_EXTRACTED_BYTES (the info sections of all the
    archives read concurrently, in one event loop: ~2 ms an archive, ~15 ms for one of 2,000 files). A
    ``.tar.bz2`` has no directory and no declared sizes short of decompressing it all, which its extraction
    does once already: it is judged by its entry names and bounded as it is extracted (module doc). The
    extraction is bounded for every archive; this refuses a declared bomb before a byte is written."""
    condas: list[tuple[Artifact, Path]] = []
    for art, path in items:
        if path.name.endswith(".conda"):
            _conda_headers(art, path)
            condas.append((art, path))
    if condas:
        from envguard.create.backends.rattler_backend import run_coroutine

        run_coroutine(_all_info_sizes(condas))


def _conda_headers(art: Artifact, path: Path) -> None:
    import zipfile

    from envguard.create.zipcheck import ZipBudgetError, ZipLayoutError, check_layout

    where = f"{art.name} {art.version}: the .conda archive {shorten(path.name, 120)}"
    fix = "use the channel's original archive, or re-lock"
    try:
        with open(path, "rb") as fh:
            check_layout(fh)
            with zipfile.ZipFile(fh) as zf:
                names = zf.namelist()
    except ZipBudgetError as e:
        raise IntegrityError(f"{where} {e}; a decompression bomb would fill the disk", fix=fix) from None
    except ZipLayoutError as e:
        raise IntegrityError(f"{where} {e}; the installer could extract members that envguard never checked",
                             fix=fix) from None
    except (zipfile.BadZipFile, OSError) as e:
        raise IntegrityError(f"{art.name} {art.version}: not a readable .conda archive ({e})",
                             fix="restore the package archive the lock names, or re-lock") from None
    stem = path.name[:-len(".conda")]
    unexpected = sorted(set(names) - {"metadata.json", f"info-{stem}.tar.zst", f"pkg-{stem}.tar.zst"})
    if unexpected:
        raise IntegrityError(f"{where} has unexpected members {', '.join(shorten(n, 80) for n in unexpected[:3])}; "
                             "the installer could read other members than envguard checked", fix=fix)


async def _all_info_sizes(condas: list[tuple[Artifact, Path]]) -> None:
    import asyncio

    gate = asyncio.Semaphore(8)

    async def one(art: Artifact, path: Path) -> None:
        async with gate:
            await _info_sizes(art, path)

    for outcome in await asyncio.gather(*(one(a, p) for a, p in condas), return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


async def _info_sizes(art: Artifact, path: Path) -> None:
    """The info section of a ``.conda`` (a few KB: rattler's reader inflates that member alone): each entry
    through an :class:`EntryLedger`, then the sum of paths.json's ``size_in_bytes`` against the budget."""
    from rattler.package_streaming import PackageArchive

    from envguard.create.entryfiles import paths_entries

    ledger = EntryLedger(art, path.name)
    paths_json = None
    try:
        archive = await PackageArchive.from_path(path)
        async for entry in archive.stream("info"):
            kind = ("symlink" if entry.is_symlink else "hardlink" if entry.is_hardlink else "file"
                    if entry.is_file else "other")
            ledger.add("info", entry.name, kind=kind, size=entry.size)  # METADATA_CAP before it is read
            if normalised(entry.name) == "info/paths.json" and entry.is_file:
                paths_json = await entry.read()
        entries, _declared = paths_entries(paths_json, None)
    except IntegrityError:
        raise
    except Exception as e:  # noqa: BLE001 - rattler's reader raises its own types; a bad paths.json is ValueError
        raise IntegrityError(f"{art.name} {art.version}: the archive {shorten(path.name, 120)} cannot be read: "
                             f"{shorten(' '.join(str(e).split()), 200)}",
                             fix="restore the archive from the channel, or re-lock") from None
    total, largest = 0, (0, "")
    for item in entries:
        size = item.get("size_in_bytes")
        if type(size) is int and size > 0 and item.get("path_type") != "softlink":  # a link's: its target's
            total += size
            largest = max(largest, (size, str(item.get("_path"))))
    if total > ledger.budget:
        raise ledger._refuse(f"declares {total} bytes of files in info/paths.json (the largest "
                             f"{shorten(largest[1], 120)!r}), more than {ledger.budget}",
                             "a decompression bomb would fill the disk (ENVGUARD_MAX_EXTRACTED_BYTES)")


class _Capped:
    """A writer for rattler's download_to_writer: the file, and a refusal past ``cap`` bytes."""

    def __init__(self, fh: BinaryIO, cap: int) -> None:
        self.fh, self.cap, self.written, self.over = fh, cap, 0, False

    def write(self, data: bytes) -> int:
        self.written += len(data)
        if self.written > self.cap:
            self.over = True
            raise OSError(f"more than {self.cap} bytes")
        return self.fh.write(data)


async def bounded_download(art: Artifact, client: Any, url: str, dest: Path) -> None:
    """Download ``url`` to ``dest``, at most ENVGUARD_MAX_ARTIFACT_BYTES of it; past that, IntegrityError."""
    from rattler.package_streaming import download_to_writer

    cap = settings.max_artifact_bytes()
    with open(dest, "wb") as fh:
        writer = _Capped(fh, cap)
        try:
            await download_to_writer(client, url, writer)
        except Exception:
            if not writer.over:
                raise
    if writer.over:
        dest.unlink(missing_ok=True)
        raise IntegrityError(f"{art.name} {art.version}: the server sent more than {cap} bytes for "
                             f"{redact(art.locked_url or art.url)}; refused (ENVGUARD_MAX_ARTIFACT_BYTES)",
                             fix="check the channel, or raise ENVGUARD_MAX_ARTIFACT_BYTES for a package that big")
