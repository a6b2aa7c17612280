"""Cold path, step 2 and 3: the tree rattler extracted into staging is judged as it lies on disk, then moved into
the package cache as the entry rattler's link step uses.

**Judged** (:func:`verify`), against the tree's own ``info/paths.json`` (else ``info/files``), by one walk of
the staged folder (no symlink followed) and one ``lstat`` per entry; each refusal is exit 3 naming the package
and the entry:

* no FIFO, socket or device anywhere; no setuid, setgid or sticky bit (rattler's extraction sets none);
* the ``info/`` files the installer reads (paths.json, index.json, link.json, ...) are regular files; the rest
  of ``info/`` is never linked, so it is not held to paths.json;
* outside ``info/``: every file and symlink on disk is listed, and listed with its type (a symlink where a file
  is declared, a file where a symlink is); every listed file or symlink is there; a listed file has the listed
  size (an empty file is what rattler writes for a FIFO or device entry: a size that differs catches it);
* a regular file with more links than the tree holds is a hard link to something outside the package;
* the files' contents are *not* hashed against paths.json here (``hash_files`` does it on request): every byte
  of the tree came out of the archive whose sha256, computed by rattler over exactly the bytes it extracted, is
  the lock's, so a file's content is pinned already; per-file hashes would only test paths.json's consistency
  with its own archive, at one more read of every extracted byte (measured on the real PyTorch tree: 1.7 s of
  CPU, and 6.1 s of wall time on a loaded machine whose page cache had dropped the fresh files: bench/README.md,
  #42). This is what the cold path did before too (the scan never hashed files); the warm path hashes every
  file against paths.json whenever the identities stamped after this create's link no longer vouch for it.
* symlink targets and every path are judged afterwards with every package's paths together
  (envguard.pathsafety, in envguard.create.prelink): inside the prefix, or allowed.

**Moved** (:func:`move_into_cache`): under rattler's own global cache lock (``<cache>/.cache.lock``, an
exclusive flock, which rattler's fetch takes too), the staged folder is renamed to ``<cache>/<stem>`` and
``<stem>.lock`` is written as rattler writes it: revision 1 (8 bytes, big-endian) then the 32 bytes of the
archive's sha256 (py-rattler 0.28). rattler, with ValidationMode.skip (envguard.create.backends.rattler_backend),
then links from that entry and extracts nothing (tests/test_staged_extraction.py proves it with a marked file).
An entry that another create put there meanwhile for the same sha256 is kept when it holds the verified tree
(same types, targets, modes, and its files hash right); otherwise it is set aside and replaced.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.create import cachetree
from envguard.create.archive import METADATA_CAP, normalised
from envguard.create.entryfiles import INFO_FILES, info_digest, info_present, paths_entries, read_entry_file
from envguard.create.integrity import Artifact, file_digest, purge_cache_entry
from envguard.errors import IntegrityError
from envguard.redact import shorten

_ODD = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device"}


@dataclass
class StagedTree:
    """What a verified staged tree holds: what envguard.create.prelink's _Package needs."""

    entries: list[tuple[str, str]]  # paths.json: (path, path_type)
    paths: list[str]  # the declared paths
    symlinks: dict[str, str]  # declared softlinks -> target on disk
    inner_links: dict[str, str]  # every symlink on disk outside info/ -> target
    info: str  # digest of the INFO_FILES
    scan: cachetree.EntryScan
    declared_by: str | None
    #: (rel, full path, sha256) of every file paths.json gives a sha256 for (hashed only on request: module doc)
    sha_declared: list[tuple[str, str, str]] = field(default_factory=list)


def refusal(art: Artifact, entry: str, what: str, why: str = "nothing was installed") -> IntegrityError:
    return IntegrityError(f"{art.name} {art.version}: the archive {shorten(art.filename, 120)} {what} "
                          f"(entry {shorten(entry, 160)!r}); {why}",
                          fix="use the channel's original archive, or re-lock against a channel with an intact build")


def check_names(art: Artifact, pkg_names: list[str] | None, info_names: list[str] | None, error: str) -> None:
    """Defence in depth at the archive, before its tree is judged: the names of its tar entries (rattler's own
    listing, one call per section). An entry whose name leaves the package (``../x``, ``/x``: rattler's extractor
    skips the first silently and writes the second inside the tree), a name twice (the extractor keeps the last
    one, whatever the first was), a ``.conda`` payload entry under ``info/`` (a second paths.json) or an info
    entry outside it: refused, exit 3 naming the entry, whatever the tree on disk turned out to be."""
    if pkg_names is None or info_names is None:
        bad = error.rsplit("invalid package-relative archive path: ", 1)
        if len(bad) == 2:
            raise refusal(art, bad[1], "has an entry whose path leaves the package")
        raise refusal(art, "", f"cannot be listed ({shorten(error, 160)})")
    seen: set[str] = set()
    conda = art.filename.endswith(".conda")
    for section, names in (("info", info_names), ("pkg", pkg_names)):
        for name in names:
            if name in seen:
                raise refusal(art, name, "has the entry twice", "the installer keeps whichever comes last")
            seen.add(name)
            if conda and (name == "info" or name.startswith("info/")) != (section == "info"):
                where = "its payload (pkg-*.tar.zst)" if section == "pkg" else "its info-*.tar.zst"
                raise refusal(art, name, f"has the entry in {where}")


def _walk(root: str) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of everything under ``root``, directories included, no symlink followed."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
            for e in it:
                rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    stack.append(rel)
                yield rel, st



def verify(art: Artifact, staged: str, *, hash_files: bool = False,
           paths_first: Callable[[list[str]], None] | None = None) -> StagedTree:
    """Judge the staged tree (module doc); IntegrityError naming the package and the entry. ``paths_first``
    judges the declared paths' form (envguard.pathsafety) before the tree is compared with them, so that a
    path that leaves the prefix is named as such rather than as an entry missing from the tree."""
    present = info_present(staged)
    for name in INFO_FILES:
        try:
            st = os.lstat(os.path.join(staged, name))
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise refusal(art, name, "has the installer's metadata file as no regular file")
        if st.st_size > METADATA_CAP:  # never read into memory
            raise refusal(art, name, f"has the metadata entry {name!r} of {st.st_size} bytes (more than "
                          f"{METADATA_CAP // (1024 * 1024)} MiB)", "envguard reads no metadata that large")
    paths_json = read_entry_file(staged, "info/paths.json") if "info/paths.json" in present else None
    files = read_entry_file(staged, "info/files") if paths_json is None and "info/files" in present else None
    try:
        meta, declared = paths_entries(paths_json, files)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise refusal(art, "info/paths.json", f"has an unreadable paths.json ({shorten(str(e), 120)})") from None
    if paths_first is not None:
        paths_first([p for p, _t in declared])
    declared_by = "info/paths.json" if paths_json is not None else "info/files" if files is not None else None
    source = declared_by or "its metadata (no info/paths.json, no info/files)"
    typed = declared_by == "info/paths.json"
    wanted: dict[str, tuple[str, dict[str, Any]]] = {}
    for record, (path, path_kind) in zip(meta, declared, strict=False):
        if not cachetree.escapes(path):  # an escaping path is refused by the path rules, never stat'ed
            wanted[normalised(path)] = (path_kind, record)
    links: dict[str, str] = {}
    seen: set[str] = set()
    inodes: dict[tuple[int, int], list[Any]] = {}
    to_hash: list[tuple[str, str, str]] = []
    try:
        walked = list(_walk(staged))
    except OSError as err:
        raise refusal(art, err.filename or staged, f"cannot be read after extraction ({err.strerror or err})") from None
    for rel, st in walked:
        fmt = stat.S_IFMT(st.st_mode)
        if fmt in _ODD:
            raise refusal(art, rel, f"holds {_ODD[fmt]}")
        if fmt == stat.S_IFREG and st.st_mode & cachetree.SPECIAL_BITS:
            raise refusal(art, rel, f"holds a file with mode {st.st_mode & 0o7777:04o}, a special bit set")
        if fmt == stat.S_IFREG and st.st_nlink > 1:
            inodes.setdefault((st.st_dev, st.st_ino), [rel, st.st_nlink, 0])[2] += 1
        if rel == "info" or rel.startswith("info/"):
            continue
        kind = wanted.get(rel)
        if fmt == stat.S_IFDIR:
            if kind is not None and kind[0] != "directory":
                raise refusal(art, rel, f"has a directory where {source} declares a {kind[0]}")
            continue
        if kind is None:
            raise refusal(art, rel, f"has a file {source} does not list", "the installer would extract it unchecked")
        seen.add(rel)
        path_type, record = kind
        if fmt == stat.S_IFLNK:
            target = os.readlink(os.path.join(staged, rel))
            links[rel] = target
            if typed and path_type != "softlink":
                raise refusal(art, rel, f"has a symlink (to {shorten(target, 80)}) where {source} declares a "
                              f"{path_type}")
            continue
        if path_type in ("softlink", "directory") and typed:
            raise refusal(art, rel, f"has a regular file where {source} declares a {path_type}")
        size = record.get("size_in_bytes")
        if isinstance(size, int) and not isinstance(size, bool) and size != st.st_size:
            raise refusal(art, rel, f"has a file of {st.st_size} bytes where {source} declares {size}")
        sha = record.get("sha256")
        if isinstance(sha, str):
            to_hash.append((rel, os.path.join(staged, rel), sha.lower()))
    for rel, (path_type, _record) in wanted.items():
        if path_type != "directory" and rel not in seen:
            raise refusal(art, rel, f"lacks a path {source} lists", "the installer would fail to link it")
    for rel, nlink, count in inodes.values():
        if count < nlink:
            raise refusal(art, rel, "has a hard link to a file outside the package")
    bad = hash_all(to_hash) if hash_files else None
    if bad:
        raise refusal(art, bad, f"has a file whose sha256 differs from {source}'s")
    scan = cachetree.scan_entry(staged, declared, present, dict(walked))  # the walk's lstats, not a second pass
    if isinstance(scan, str):  # the walk above saw every declared path: only a change since then gets here
        raise refusal(art, scan, "changed while it was checked")
    info = info_digest(lambda n: read_entry_file(staged, n) if n in present else None)
    symlinks = {p: links[normalised(p)] for p, _t in declared if normalised(p) in links}
    return StagedTree(declared, [p for p, _t in declared], symlinks, links, info, scan, declared_by, to_hash)


def hash_all(items: list[tuple[str, str, str]]) -> str | None:
    """The first file (relative path) whose sha256 is not the given one; None when all agree."""

    def one(item: tuple[str, str, str]) -> str | None:
        rel, full, sha = item
        try:
            return None if file_digest(full) == sha else rel
        except OSError:
            return rel

    if len(items) > 8:
        with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
            return next((r for r in pool.map(one, items, chunksize=32) if r), None)
    return next((r for r in map(one, items) if r), None)


class CacheLock:
    """rattler's global package-cache lock (``<cache>/.cache.lock``, an exclusive flock), held while an entry
    is moved in: a rattler fetching into the same cache (another create's install) waits, and so do we."""

    def __init__(self, cache_dir: Path) -> None:
        self.path = os.path.join(cache_dir, ".cache.lock")
        self.fd = -1

    def __enter__(self) -> CacheLock:
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                          | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            import fcntl
        except ImportError:  # Windows: rattler locks with LockFileEx there; envguard's creates hold the prefix lock
            return self
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the descriptor releases the flock


def write_rattler_lock(cache_dir: Path, stem: str, sha256: str) -> None:
    """``<stem>.lock`` as rattler writes it (revision 1, then the sha256's 32 bytes), replacing what is there
    (a new file renamed into place: nothing planted under its name is written through)."""
    path = os.path.join(cache_dir, f"{stem}.lock")
    tmp = os.path.join(cache_dir, f".{stem}.lock.envguard-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        os.write(fd, struct.pack(">Q", 1) + bytes.fromhex(sha256))
    finally:
        os.close(fd)
    os.replace(tmp, path)


def move_into_cache(cache_dir: Path, stem: str, staged: str, sha256: str, tree: StagedTree, aside: str) -> None:
    """Rename the verified ``staged`` tree to ``<cache>/<stem>`` and write its ``<stem>.lock`` (module doc);
    ``aside``: where a replaced entry goes (inside the staging folder, removed with it)."""
    from envguard.create.entryfiles import entry_is_directory
    from envguard.create.integrity import cache_entry_sha256

    dest = os.path.join(cache_dir, stem)
    with CacheLock(cache_dir):
        if entry_is_directory(cache_dir, stem):
            if cache_entry_sha256(cache_dir, stem) == sha256 and _holds(dest, tree):
                shutil.rmtree(staged, ignore_errors=True)  # another create's verified copy: linked as it is
                return
            os.rename(dest, aside)
        purge_cache_entry(cache_dir, stem)
        os.rename(staged, dest)
        write_rattler_lock(cache_dir, stem, sha256)


def _holds(entry: str, tree: StagedTree) -> bool:
    """Whether an entry already in the cache is the verified tree: same tree, files hashing right."""
    scan = cachetree.scan_entry(entry, tree.entries, info_present(entry))
    if isinstance(scan, str) or scan.tree != tree.scan.tree:
        return False
    return hash_all([(rel, os.path.join(entry, rel), sha) for rel, _full, sha in tree.sha_declared]) is None
