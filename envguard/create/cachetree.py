"""A package cache entry verified as a tree: the type of every declared path (regular file, symlink,
directory), every symlink's target and every file's mode bits, not only the files' contents.

What the tree must be comes from the verified archive: the types and link targets from envguard's scan
of the archive (envguard.create.prelink), the permission bits from the entry rattler extracted from those
very bytes in the same create. rattler never extracts setuid, setgid or sticky bits (tar modes are masked
to ``0o777``: observed with py-rattler 0.28), so a cached file with one of them was edited, whatever its
archive says. The tree is recorded per archive (its locked sha256) in
``<package cache>/.envguard-trees.json`` as a digest plus the symlinks and the files whose mode is not
``0o644`` (to name what changed). Every create ``lstat``s each declared path before anything is linked
(scan_identity): identities equal to the ones stamped after the last verification mean the same tree;
otherwise the entry's tree is compared with that record, and an entry that differs is extracted again
from its verified archive (envguard.create.prelink), or exit 3 when the archive is gone. The record is
trusted as the package cache itself is (VerifiedStamps' doc).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.create.integrity import newest_records, read_record_file, write_record_file
from envguard.redact import shorten

#: bits rattler's extraction never sets: any of them on a cached file is an edit
SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
DEFAULT_MODE = 0o644


@dataclass
class EntryScan:
    """One ``lstat`` pass over an extracted package's declared paths and its info/ files."""

    identity: str  # digest of every identity (see scan_identity): the stamp of VerifiedStamps
    tree: str  # digest of the tree: types, symlink targets, mode bits
    newest: int  # newest time in the identity, in ns
    fine: bool  # whether ctimes look finer than a millisecond (the file system's timestamps do)
    ctimes: str = ""  # digest of the declared files' ctimes (see scan_identity)
    nlinks: str = ""  # digest of their link counts
    to_hash: list[tuple[str, str, int]] = field(default_factory=list)  # regular files: (path, full path, size)
    links: dict[str, str] = field(default_factory=dict)  # symlinks: path -> target
    modes: dict[str, int] = field(default_factory=dict)  # regular files: path -> mode & 0o7777
    kinds: dict[str, str] = field(default_factory=dict)  # path -> "f", "l", "d" or "?"


def escapes(rel: str) -> bool:
    """A cheap test for what must never be stat'ed or hashed inside a cache entry: a '..' part or an absolute
    path (pathsafety.path_problem, run on every path anyway, says exactly what is wrong with it). It runs for
    every path of every warm create, so the substring tests that rule out almost all of them come first."""
    if not (rel[:1] in "/\\" or ".." in rel or "\x00" in rel or rel[1:2] == ":"):
        return False
    return (rel.startswith(("/", "\\")) or rel == ".." or rel.startswith("../") or "/../" in rel
            or rel.endswith("/..") or "\x00" in rel or (len(rel) > 1 and rel[1] == ":"))


@dataclass
class IdentityScan:
    """The ``lstat`` pass alone: enough to vouch for an entry whose identities are the stamped ones."""

    identity: str  # digest of every identity (see scan_identity): the stamp of VerifiedStamps
    newest: int  # newest time in the identity, in ns
    fine: bool  # whether ctimes look finer than a millisecond (the file system's timestamps do)
    links: dict[str, str]  # symlinks: path -> target
    seen: list[tuple[Any, ...]]  # one identity per declared non-directory path, then the info/ files
    ctimes: str = ""  # digest of the declared files' ctimes: what VerifiedStamps.vouches_package compares
    nlinks: str = ""  # digest of their link counts: a changed ctime is explained by a changed link count


def scan_identity(entry: str, declared: list[tuple[str, str]], info_names: list[str],
                  stats: dict[str, os.stat_result] | None = None) -> IdentityScan | str:
    """The identities of ``entry``'s declared paths ((path, paths.json path_type)) and of its ``info_names``
    files, or why it cannot match (a declared path missing).

    A declared file's identity is its size, mtime, inode, device and mode, not its ctime: every hard link
    made or removed (linking the file into an environment, deleting one, another tool sharing the cache)
    changes the ctime of the cache's own file, so with it any environment's removal would have every file
    hashed again on the next create. What the ctime adds, catching an in-place rewrite whose author then
    set the mtime back, does not hold against anyone able to write the package cache: the stamps recording
    the identities live there too. An accidental edit (through an environment's hard link included) changes
    the mtime, a replaced file its inode. The info/ files, which no environment links, keep their ctime.

    The declared files' ctimes and link counts are digested beside the identity (``ctimes``, ``nlinks``):
    a ctime that changed while no link count did is an in-place change (an edit whose author set the mtime
    back, which no one can do to a ctime), and VerifiedStamps.vouches_package then vouches for nothing;
    ctimes that changed together with link counts are what environments made or removed do (issue #38 point 9).

    The identities determine the tree (:func:`expand`): a symlink's is its target, a file's its mode bits,
    anything else (a FIFO, socket or device) has one naming its type, a directory has none (it turning into
    anything else adds one). So identities equal to those stamped after a verification mean the tree is the
    verified one too, and a create pays only this pass for an unchanged entry.

    ``stats``: ``lstat`` results already taken of the entry's paths (envguard.create.stagedtree's walk of a tree
    it just judged), used instead of a second ``lstat`` of each."""
    seen: list[tuple[Any, ...]] = []
    ctimes: list[int] = []
    nlinks: list[int] = []
    links: dict[str, str] = {}
    newest = 0
    fine = True
    prefix = entry + os.sep
    lstat, ifmt, readlink, add = os.lstat, stat.S_IFMT, os.readlink, seen.append
    add_ctime, add_nlink = ctimes.append, nlinks.append
    for rel, _kind in declared:
        if escapes(rel):
            continue  # the archive itself declares it: refused with the other unsafe paths
        try:
            st = (stats.get(rel) if stats is not None else None) or lstat(prefix + rel)
        except OSError:
            return f"{shorten(rel, 120)} is missing"
        fmt = ifmt(st.st_mode)
        if fmt == stat.S_IFREG:
            mtime = st.st_mtime_ns
            add((rel, st.st_size, mtime, st.st_ino, st.st_dev, st.st_mode & 0o7777))
            add_ctime(st.st_ctime_ns)
            add_nlink(st.st_nlink)
            newest = max(newest, mtime)
            if fine and st.st_ctime_ns % 1_000_000 == 0:
                fine = False
        elif fmt == stat.S_IFLNK:
            target = links[rel] = readlink(prefix + rel)
            add(("L", rel, target, st.st_ino, st.st_dev))
        elif fmt != stat.S_IFDIR:  # a FIFO, socket or device in a package's place (never in a verified one)
            add(("?", rel, fmt))
    for name in info_names:
        try:  # the metadata itself: an edit after the check is caught next time
            st = (stats.get(name) if stats is not None else None) or lstat(prefix + name)
        except OSError:
            continue
        add(("I", name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, st.st_mode))
        newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
    # marshal's format 2 (no object references): the same values always give the same bytes, 4x faster than repr
    return IdentityScan(hashlib.sha256(marshal.dumps(seen, 2)).hexdigest(), newest, fine, links, seen,
                        hashlib.sha256(marshal.dumps(ctimes, 2)).hexdigest(),
                        hashlib.sha256(marshal.dumps(nlinks, 2)).hexdigest())


def expand(found: IdentityScan, entry: str, declared: list[tuple[str, str]]) -> EntryScan:
    """The tree of an identity pass: every declared path's type, symlink target and mode bits, and the regular
    files to hash against paths.json."""
    out = EntryScan(found.identity, "", found.newest, found.fine, found.ctimes, found.nlinks, links=dict(found.links))
    # told apart by length (a file may well be called "L"): a file's identity has 6 fields, a symlink's 5, an
    # odd type's 3, an info/ file's 8; an odd one wins over a file of the same path (one lstat'ed twice)
    files = {ident[0]: ident for ident in found.seen if len(ident) == 6}
    odd = {ident[1]: ident for ident in found.seen if len(ident) in (3, 5)}
    prefix = entry + os.sep
    tree: list[tuple[object, ...]] = []
    for rel, kind in declared:
        ident = odd.get(rel) or files.get(rel)
        if ident is None:
            if escapes(rel):
                continue  # never stat'ed (scan_identity)
            out.kinds[rel] = "d"
            tree.append(("d", rel))
        elif len(ident) == 5:
            out.kinds[rel] = "l"
            tree.append(("l", rel, ident[2]))
        elif len(ident) == 3:
            out.kinds[rel] = "?"
            tree.append(("?", rel, ident[2]))
        else:
            bits = ident[5]
            out.kinds[rel] = "f"
            out.modes[rel] = bits
            tree.append(("f", rel, bits))
            if kind not in {"softlink", "directory"}:
                out.to_hash.append((rel, prefix + rel, ident[1]))
    out.tree = hashlib.sha256(repr(tree).encode("utf-8", "surrogateescape")).hexdigest()
    return out


def scan_entry(entry: str, declared: list[tuple[str, str]], info_names: list[str],
               stats: dict[str, os.stat_result] | None = None) -> EntryScan | str:
    """The identities and the tree of ``entry`` (scan_identity, then expand), or why it cannot match."""
    found = scan_identity(entry, declared, info_names, stats)
    return found if isinstance(found, str) else expand(found, entry, declared)


def _kind_name(kind: str, target: str | None = None) -> str:
    if kind == "l":
        return f"a symlink to {shorten(target or '', 80)}"
    return {"f": "a regular file", "d": "a directory"}.get(kind, "not a file, symlink or directory")


def archive_differences(scan: EntryScan, declared: list[tuple[str, str]], archive_links: dict[str, str]) -> str | None:
    """Right after extraction: how the entry differs from what the archive's scan holds (types, symlink
    targets, no special mode bits), else None."""
    for rel, kind in declared:
        if rel not in scan.kinds:
            continue
        want = "l" if rel in archive_links else "d" if kind == "directory" else "f"
        have = scan.kinds[rel]
        if have != want:
            return (f"{shorten(rel, 120)} is {_kind_name(have, scan.links.get(rel))}; the archive has "
                    f"{_kind_name(want, archive_links.get(rel))}")
        if want == "l" and scan.links[rel] != archive_links[rel]:
            return (f"{shorten(rel, 120)} points to {shorten(scan.links[rel], 80)}; the archive's symlink points "
                    f"to {shorten(archive_links[rel], 80)}")
    return special_bits(scan)


def special_bits(scan: EntryScan) -> str | None:
    for rel, bits in scan.modes.items():
        if bits & SPECIAL_BITS:
            names = [n for flag, n in ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid"), (stat.S_ISVTX, "sticky"))
                     if bits & flag]
            return (f"{shorten(rel, 120)} has its {'/'.join(names)} bit set (mode {bits:04o}), which no extracted "
                    "archive has")
    return None


def tree_differences(scan: EntryScan, declared: list[tuple[str, str]], record: TreeRecord) -> str:
    """Why an entry's tree is not the recorded one (its digest already differs)."""
    special = special_bits(scan)
    if special:
        return special
    for rel, kind in declared:
        have = scan.kinds.get(rel)
        if have is None:
            continue
        want = "l" if rel in record.links else "d" if kind == "directory" else "f"
        if have != want:
            return (f"{shorten(rel, 120)} is {_kind_name(have, scan.links.get(rel))}; the verified archive has "
                    f"{_kind_name(want, record.links.get(rel))}")
        if have == "l" and scan.links[rel] != record.links[rel]:
            return (f"{shorten(rel, 120)} points to {shorten(scan.links[rel], 80)}; the verified archive's symlink "
                    f"points to {shorten(record.links[rel], 80)}")
        if have == "f":
            bits, was = scan.modes[rel], record.modes.get(rel, DEFAULT_MODE)
            if bits != was:
                return f"{shorten(rel, 120)} has mode {bits:04o}; the verified archive's is {was:04o}"
    return "its file tree (types, symlink targets, modes) differs from the verified archive's"


@dataclass(frozen=True)
class TreeRecord:
    digest: str
    links: dict[str, str]
    modes: dict[str, int]


class TreeRecords:
    """The verified tree of each extracted package, by archive key, in ``<cache>/.envguard-trees.json``."""

    NAME = ".envguard-trees.json"
    LIMIT = 20000

    def __init__(self, cache_dir: Path) -> None:
        self.path = Path(cache_dir) / self.NAME
        self.changed = False
        data = read_record_file(self.path) or {}
        trees = data.get("trees") if data.get("format") == 1 else None
        self.trees: dict[str, Any] = trees if isinstance(trees, dict) else {}

    def get(self, key: str) -> TreeRecord | None:
        rec = self.trees.get(key)
        if not (isinstance(rec, list) and len(rec) == 4 and isinstance(rec[0], str) and isinstance(rec[1], dict)
                and isinstance(rec[2], dict)):
            return None
        links = {str(k): str(v) for k, v in rec[1].items()}
        modes = {str(k): v for k, v in rec[2].items() if isinstance(v, int)}
        return TreeRecord(rec[0], links, modes)

    def record(self, key: str, scan: EntryScan) -> None:
        modes = {rel: bits for rel, bits in scan.modes.items() if bits != DEFAULT_MODE}
        old = self.get(key)
        if old is not None and old.digest == scan.tree:
            return
        self.trees[key] = [scan.tree, dict(scan.links), modes, time.time_ns()]
        self.changed = True

    def forget(self, key: str) -> None:
        if self.trees.pop(key, None) is not None:
            self.changed = True

    def save(self) -> None:
        """Write atomically when something changed; a failure to write only means extracting again later."""
        if not self.changed:
            return
        write_record_file(self.path, {"format": 1, "trees": newest_records(self.trees, self.LIMIT)})
        self.changed = False
