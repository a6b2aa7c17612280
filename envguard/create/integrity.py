"""sha256 verification of package artifacts, and cleaning bad ones out of the package cache.

rattler verifies the sha256 of what it downloads over http(s), but links ``file://`` packages without
checking them (engine-notes.md). So before anything is linked, envguard checks every local artifact against
the lock: it hashes it, unless a stamp recorded when this very file last hashed right still vouches for it
(:class:`VerifiedStamps`). A failure names the package, the expected and the actual hash, and removes that
package's entry from the rattler package cache, so that nothing extracted from the bad bytes can be linked
later.

Layout of rattler's package cache (py-rattler 0.28, as observed): ``<cache>/<name>-<version>-<build>/`` is
the extracted package, ``<cache>/<stem>.lock`` holds a revision and the sha256 it was extracted for, and
``<cache>/.<stem><random>`` are extractions in progress.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from envguard.channels import CONDA_EXTENSIONS
from envguard.errors import IntegrityError, UserError
from envguard.redact import redact
from envguard.yamlio import read_bytes, special_file

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Artifact:
    """One conda package to install, as the lock describes it."""

    name: str
    version: str
    build: str
    url: str
    sha256: str | None
    md5: str | None
    subdir: str
    depends: tuple[str, ...] = ()
    #: the URL as the lock writes it, when it differs from ``url`` (``${VAR}`` credentials filled in)
    locked_url: str | None = None
    #: a verified local copy of the archive (downloaded by envguard.create.prelink) the installer reads
    local: Path | None = None

    @property
    def install_url(self) -> str:
        """The URL the installer is given: the local verified copy when there is one."""
        return self.local.resolve().as_uri() if self.local is not None else self.url

    @property
    def key(self) -> str:
        """The archive's identity for envguard's records: its locked sha256 (else md5)."""
        return f"sha256:{self.sha256}" if self.sha256 else f"md5:{self.md5}"

    @cached_property
    def filename(self) -> str:
        return url_filename(self.url)

    @cached_property
    def stem(self) -> str:
        """``name-version-build``: the package cache's directory name."""
        return strip_archive_suffix(self.filename)

    @property
    def channel(self) -> str:
        """The channel URL: the artifact URL without ``/<subdir>/<file>``."""
        return self.url.rsplit("/", 2)[0]


def url_filename(url: str) -> str:
    """The file name an artifact URL ends in (without its query or fragment): the one reading of it that
    the lock's checks (envguard.create.plan), the package cache's directory name and the installer's record
    all use."""
    return url.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1]


def strip_archive_suffix(filename: str) -> str:
    """``x-1.0-h0_0.conda`` -> ``x-1.0-h0_0``; any other name unchanged."""
    for suffix in CONDA_EXTENSIONS:
        if filename.endswith(suffix):
            return filename[: -len(suffix)]
    return filename


def is_file_url(url: str) -> bool:
    """Whether urlsplit(url).scheme is ``file``, without urlsplit for the usual URLs."""
    head = url[:5]
    if head[:1].isalnum() and not any(c in head for c in "\t\r\n"):  # nothing urlsplit strips or removes
        return head.lower() == "file:"
    try:
        return urlsplit(url).scheme == "file"
    except ValueError:  # a malformed host ("https://[x"): not a local file
        return False


def file_url_path(url: str) -> Path | None:
    """The local path of a ``file://`` URL, else None."""
    if not is_file_url(url):
        return None
    if url.startswith("file:///") and not any(c in url for c in "%?#\t\r\n") and os.name != "nt":
        return Path(url[7:])  # what urlsplit and unquote give for this form: no host, escape, query or fragment
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme != "file":
        return None
    path = unquote(parts.path)
    if os.name == "nt" and re.match(r"^/[A-Za-z]:", path):  # file:///C:/x -> C:/x
        path = path[1:]
    return Path(path)


def file_digest(path: str | os.PathLike[str], algorithm: str = "sha256") -> str:
    with open(path, "rb") as fh:
        if hasattr(hashlib, "file_digest"):  # Python >= 3.11: hashes without copying through Python
            return hashlib.file_digest(fh, algorithm).hexdigest()
        h = hashlib.new(algorithm)
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
        return h.hexdigest()


def mismatch_error(name: str, version: str, url: str, expected: str, actual: str, algorithm: str = "sha256",
                   *, lockfile: str | os.PathLike[str] | None = None) -> IntegrityError:
    where = f" (lock: {lockfile})" if lockfile else ""
    return IntegrityError(
        f"{name} {version}: {algorithm} mismatch for {redact(url)}: expected {expected}, got {actual}{where}; "
        "the artifact was changed after locking",
        fix="restore the original artifact, or re-lock with `envguard lock` if the change is intended",
        command="envguard lock",
    )


def verify_local_artifacts(artifacts: Iterable[Artifact], cache_dir: Path | None,
                           *, lockfile: str | os.PathLike[str] | None = None,
                           missing: set[str] | None = None, copied: Collection[str] = (),
                           stamps: VerifiedStamps | None = None) -> int:
    """Check every ``file://`` artifact against the lock's hash; return how many were checked.

    The stems in ``copied`` are only checked to be there and regular files: their archives are about to be
    copied into a private folder, hashed on the way (envguard.create.archive.private_copy), so hashing
    them here too would read every cold archive twice.

    An artifact is hashed unless :class:`VerifiedStamps` in ``cache_dir`` vouches that this very file (same
    size, mtime, ctime, inode and device) already had that hash; what hashes right is stamped for next time.
    Raises IntegrityError for the first mismatch (in lock order) after purging that package from the cache.
    A missing local file is a backend error (exit 6), or, with ``missing`` given, its stem is added there:
    the caller decides whether a verified package cache entry can stand in for it (envguard.create.prelink).
    ``stamps``: the caller's VerifiedStamps of ``cache_dir`` (else they are read here); saved before returning.
    """
    local: list[tuple[Artifact, Path]] = []
    for art in artifacts:
        path = file_url_path(art.url)
        if path is not None:
            local.append((art, path))
    if stamps is None and cache_dir is not None:
        stamps = VerifiedStamps(cache_dir)
    results: list[tuple[Artifact, str, str, str] | None] = []
    to_hash: list[tuple[int, Artifact, Path, str, str, os.stat_result | None]] = []
    for art, path in local:
        algorithm, expected = ("sha256", art.sha256) if art.sha256 else ("md5", art.md5)
        results.append(None)
        if not expected:
            results[-1] = (art, "sha256", "<no hash in the lock>", "-")
            continue
        try:
            st: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            results[-1] = (art, algorithm, expected, "<file missing>")
            continue
        except OSError:
            st = None  # hashing reports it
        if st is not None and not stat.S_ISREG(st.st_mode):
            # a FIFO would block the hash forever, /dev/zero never ends, a directory is no archive: refused at once
            what = ("is a directory, not a package archive" if stat.S_ISDIR(st.st_mode)
                    else special_file(path) or "is not a regular file")
            raise IntegrityError(f"{art.name} {art.version}: the locked artifact {path} {what}",
                                 fix="restore the package archive the lock names, or re-lock")
        if art.stem in copied:
            continue
        if st is None or stamps is None or not stamps.vouches(path, st, f"{algorithm}:{expected.lower()}"):
            to_hash.append((len(results) - 1, art, path, algorithm, expected, st))

    def check(item: tuple[int, Artifact, Path, str, str, os.stat_result | None]) -> None:
        i, art, path, algorithm, expected, st = item
        try:
            actual = file_digest(path, algorithm)
        except FileNotFoundError:
            results[i] = (art, algorithm, expected, "<file missing>")
            return
        if actual != expected.lower():
            results[i] = (art, algorithm, expected, actual)
        elif st is not None and stamps is not None:
            stamps.record(path, st, f"{algorithm}:{actual}")

    # hashlib releases the GIL: a few threads help for many or large files.
    workers = min(4, os.cpu_count() or 1) if len(to_hash) > 8 else 1
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(check, to_hash))
    else:
        for item in to_hash:
            check(item)
    if stamps is not None:
        stamps.save()
    for res in results:
        if res is None:
            continue
        art, algorithm, expected, actual = res
        if actual == "<file missing>" and missing is not None:
            missing.add(art.stem)
            continue
        if actual == "<file missing>":
            from envguard.errors import BackendError

            raise BackendError(f"{art.name} {art.version}: artifact not found: {art.url}",
                               fix="restore the channel, or re-lock against a channel that has it")
        if actual == "-":
            raise IntegrityError(f"{art.name} {art.version}: the lock has no sha256 or md5 for {redact(art.url)}",
                                 fix="re-lock with `envguard lock`", command="envguard lock")
        if cache_dir is not None:
            purge_cache_entry(cache_dir, art.stem)
        raise mismatch_error(art.name, art.version, art.url, expected, actual, algorithm, lockfile=lockfile)
    return len(local)


class VerifiedStamps:
    """Which local artifacts were hashed and found right, kept in ``<package cache>/.envguard-verified.json``.

    Hashing 500 artifacts on every create costs more than a warm install's own bookkeeping, and a warm
    create gets the bytes from the package cache anyway. So envguard records, per artifact path, the hash
    it verified and the file's (size, mtime_ns, ctime_ns, inode, device), and trusts that record only
    while all five are unchanged: rebuilding, rewriting or replacing the file changes its ctime (which,
    unlike mtime, cannot be set back), and usually its size and inode as well. The same rule git uses for
    its index, with git's guard against "racy" entries: a stamp is trusted only for a file that had not
    changed for ``STAMP_MIN_AGE_NS`` when it was hashed, so a same-size rewrite within the clock tick of a
    coarse-timestamp filesystem cannot keep the old ctime. The file sits in the package cache, which
    envguard trusts as rattler does: anyone able to write it could change the extracted packages
    directly. A missing or unreadable file only means hashing everything again.
    """

    NAME = ".envguard-verified.json"
    LIMIT = 20000  # entries kept (the most recently verified)

    def __init__(self, cache_dir: Path) -> None:
        self.path = Path(cache_dir) / self.NAME
        self.changed = False
        data = read_record_file(self.path) or {}
        entries = data.get("artifacts") if data.get("format") == 1 else {}
        packages = data.get("packages") if data.get("format") == 1 else {}
        self.entries: dict[str, list[Any]] = entries if isinstance(entries, dict) else {}
        #: extracted packages (envguard.create.prelink): archive key -> [info digest, identity digest, when]
        self.packages: dict[str, list[Any]] = packages if isinstance(packages, dict) else {}

    @staticmethod
    def _identity(st: os.stat_result) -> list[int]:
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]

    def vouches(self, path: Path, st: os.stat_result, digest: str) -> bool:
        entry = self.entries.get(str(path))
        return (isinstance(entry, list) and len(entry) == 3 and entry[0] == digest
                and entry[1] == self._identity(st)
                and max(st.st_mtime_ns, st.st_ctime_ns) + STAMP_MIN_AGE_NS <= entry[2])

    def record(self, path: Path, st: os.stat_result, digest: str) -> None:
        now = time.time_ns()
        if max(st.st_mtime_ns, st.st_ctime_ns) + STAMP_MIN_AGE_NS > now:
            return  # changed too recently to be told apart from a rewrite in the same clock tick
        self.entries[str(path)] = [digest, self._identity(st), now]
        self.changed = True

    # ---- extracted packages in the package cache (envguard.create.prelink)

    def package(self, key: str) -> tuple[str, str | None, int] | None:
        """(info digest, identity digest or None, when recorded) of an extracted package, if recorded."""
        entry = self.packages.get(key)
        if (isinstance(entry, list) and len(entry) in (3, 5) and isinstance(entry[0], str)
                and (entry[1] is None or isinstance(entry[1], str)) and isinstance(entry[2], int)):
            return entry[0], entry[1], entry[2]
        return None

    def churn(self, key: str) -> tuple[str, str] | None:
        """(digest of the files' ctimes, digest of their link counts) recorded with the identity, if any."""
        entry = self.packages.get(key)
        if isinstance(entry, list) and len(entry) == 5 and isinstance(entry[3], str) and isinstance(entry[4], str):
            return entry[3], entry[4]
        return None

    def record_package(self, key: str, info: str, identity: str | None, newest_ns: int = 0,
                       fine_clock: bool = False, ctimes: str = "", nlinks: str = "") -> None:
        """Remember the digest of a package's ``info/`` files as its verified archive has them and, when its
        files are known to be right, their identity (envguard.create.cachetree.scan_entry: no ctime for the
        files environments link, so linking or removing an environment changes none). On a file system whose
        timestamps have sub-millisecond resolution (``fine_clock``) no rewrite can keep the same mtime;
        elsewhere, as for artifacts, files changed within STAMP_MIN_AGE_NS get no identity."""
        now = time.time_ns()
        if identity is not None and not fine_clock and newest_ns + STAMP_MIN_AGE_NS > now:
            identity = None  # too recent to be told apart from a rewrite in the same clock tick
        rec = self.package(key)
        churn = (ctimes, nlinks) if identity is not None and ctimes and nlinks else None
        if rec is None or rec[:2] != (info, identity) or self.churn(key) != churn:
            self.packages[key] = [info, identity, now, *(churn or ())]
            self.changed = True

    def vouches_package(self, key: str, info: str, identity: str, ctimes: str, nlinks: str) -> bool:
        """Whether the recorded identity vouches for the entry: the same identity (no ctime in it), and the
        files' ctimes unchanged unless their link counts changed too (an environment made or removed changes
        both; an in-place edit whose mtime was set back changes the ctime alone). A record without ctimes
        (an older envguard's) vouches for nothing: the files are hashed once and stamped again."""
        rec, churn = self.package(key), self.churn(key)
        return (rec is not None and rec[0] == info and rec[1] == identity and churn is not None
                and (churn[0] == ctimes or churn[1] != nlinks))

    def forget_package(self, key: str) -> None:
        if self.packages.pop(key, None) is not None:
            self.changed = True

    def save(self) -> None:
        """Write atomically when something was recorded; a failure to write is not an error."""
        if not self.changed:
            return
        write_record_file(self.path, {"format": 1, "artifacts": newest_records(self.entries, self.LIMIT),
                                      "packages": newest_records(self.packages, self.LIMIT)})
        self.changed = False


#: how long a file must have been unchanged when it was hashed for its stamp to be trusted (see above)
STAMP_MIN_AGE_NS = 2_000_000_000


#: the largest record file envguard reads back (20,000 entries of a few hundred bytes each fit many times)
RECORD_CAP = 64 << 20


def read_record_file(path: Path) -> dict[str, Any] | None:
    """One of envguard's record files in the package cache, or None when it is missing, unreadable, not a
    regular file (a FIFO there would block the open, a device never end), larger than RECORD_CAP or not a
    JSON object: the records only spare work."""
    try:
        doc = json.loads(read_bytes(path, limit=RECORD_CAP))
    except (UserError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def write_record_file(path: Path, doc: dict[str, Any]) -> None:
    """Write one of envguard's record files in the package cache atomically (a private temporary file, then
    a rename); a failure to write is not an error: the records only spare work. The temporary file is made
    anew (O_EXCL, no symlink followed), so nothing planted under its name (a FIFO would block the open) is
    written through."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    data = json.dumps(doc, separators=(",", ":")).encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0), 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def newest_records(entries: dict[str, list[Any]], limit: int) -> dict[str, list[Any]]:
    """The ``limit`` most recently recorded entries (the time is each entry's last item)."""
    if len(entries) <= limit:
        return entries

    def recorded(key: str) -> int:
        entry = entries[key]
        return entry[-1] if isinstance(entry, list) and entry and isinstance(entry[-1], int) else 0

    return {k: entries[k] for k in sorted(entries, key=recorded)[-limit:]}


def purge_cache_entry(cache_dir: Path, stem: str) -> list[Path]:
    """Remove a package's extracted directory, its cache lock and any half-done extraction."""
    removed: list[Path] = []
    if not cache_dir.is_dir():
        return removed
    candidates = [cache_dir / stem, cache_dir / f"{stem}.lock"]
    # In-progress extractions are ".<stem><random suffix>"; the suffix has no '-', so a longer package
    # name that merely starts with this stem is not matched.
    pattern = re.compile(r"^\." + re.escape(stem) + r"[A-Za-z0-9]{4,12}$")
    candidates += [p for p in cache_dir.iterdir() if pattern.match(p.name)]
    for path in candidates:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        elif path.exists() or path.is_symlink():
            try:
                path.unlink()
                removed.append(path)
            except OSError:
                pass
    return removed


#: opening a file in the package cache to read it: no symlink followed, no FIFO waited on
READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
              | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


#: what cache_entry_sha256 says of a ``<stem>.lock`` that is there but is no regular file (rattler cannot use it)
NOT_A_FILE = ""


def cache_entry_sha256(cache_dir: Path, stem: str) -> str | None:
    """The sha256 rattler recorded for an extracted package (bytes 8..40 of ``<stem>.lock``), if any;
    :data:`NOT_A_FILE` when that lock is a FIFO, a device, a directory or a symlink (rattler's fetch of the
    package then fails: the entry must be cleared, envguard.create.prelink)."""
    try:  # os-level calls: one open, fstat and read (this runs for every cached package on every create)
        fd = os.open(os.path.join(cache_dir, f"{stem}.lock"), READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError:  # ELOOP (a symlink), EISDIR, ...
        return NOT_A_FILE
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return NOT_A_FILE
        data = os.read(fd, 64)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data[8:40].hex() if len(data) >= 40 else None


def verify_cache_entries(artifacts: Iterable[Artifact], cache_dir: Path,
                         *, lockfile: str | os.PathLike[str] | None = None) -> int:
    """After a download, check that each remote artifact's cache entry was extracted for the locked sha256.

    rattler refuses a download whose sha256 differs, and keys its cache entries by sha256; this re-reads
    what it recorded, so that a cache entry from elsewhere (another tool, an older lock) is never linked
    in place of the locked bytes unnoticed. Entries without a readable record are skipped.
    """
    checked = 0
    for art in artifacts:
        if is_file_url(art.url) or not art.sha256:
            continue
        recorded = cache_entry_sha256(cache_dir, art.stem)
        if not recorded:  # none, or no regular file (cleared before the install: envguard.create.prelink)
            continue
        checked += 1
        if recorded != art.sha256.lower():
            purge_cache_entry(cache_dir, art.stem)
            raise mismatch_error(art.name, art.version, art.url, art.sha256, recorded, lockfile=lockfile)
    return checked


# rattler: "hash mismatch when extracting <url> to <dir>: expected <hex>, got <hex>, total size N bytes"
_RATTLER_MISMATCH = re.compile(
    r"hash mismatch when extracting (?P<url>\S+) to (?P<dir>.+?): expected (?P<expected>[0-9a-fA-F]+), "
    r"got (?P<actual>[0-9a-fA-F]+)"
)


def parse_rattler_mismatch(message: str) -> tuple[str, str, str] | None:
    """(url, expected, actual) from a rattler download hash-mismatch error, else None."""
    m = _RATTLER_MISMATCH.search(message)
    if not m:
        return None
    return m["url"], m["expected"].lower(), m["actual"].lower()
