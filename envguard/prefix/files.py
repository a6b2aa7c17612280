"""The files of a prefix against its conda-meta records: existence and size, with ``deep`` the sha256
(hashed on every core) and the tree (a regular file where a symlink belongs or the reverse, a symlink
re-pointed since it was installed, a setuid/setgid/sticky bit, which no installer extracts), and every path
or symlink that leads outside the prefix (envguard.pathsafety)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from envguard.prefix.records import FileEntry, PrefixInfo
from envguard.redact import shorten

_CHUNK = 1 << 20  # 1 MiB reads: large enough to amortise syscalls, small enough to stay in cache


@dataclass(frozen=True)
class FileProblem:
    path: str
    package: str
    problem: Literal["missing", "size", "sha256", "unreadable", "outside", "type", "target", "mode"]
    expected: str = ""
    actual: str = ""


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        buf = bytearray(_CHUNK)
        view = memoryview(buf)
        while True:
            n = fh.readinto(buf)
            if not n:
                break
            h.update(view[:n])  # hashlib releases the GIL for large updates
    return h.hexdigest()


_SPECIAL_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a symlink" if stat.S_ISLNK(mode) else "not a file, symlink or directory"


def tree_problem(entry: FileEntry, lst: os.stat_result, full: str) -> tuple[Literal["type", "target", "mode"], str,
                                                                                str] | None:
    """(problem, expected, actual) when the installed path's type, symlink target or mode bits are not what
    the record says (a softlink's target: the sha256 of its text the installer recorded), else None."""
    mode = lst.st_mode
    if entry.typed and entry.path_type == "softlink" and not stat.S_ISLNK(mode):
        return "type", "a symlink", _kind(mode)
    if entry.typed and entry.path_type == "hardlink" and stat.S_ISLNK(mode):
        return "type", "a regular file", f"a symlink to {shorten(os.readlink(full), 80)}"
    if stat.S_ISLNK(mode) and entry.link_sha256:
        target = os.readlink(full)
        digest = hashlib.sha256(os.fsencode(target)).hexdigest()
        if digest != entry.link_sha256.lower():
            return "target", entry.link_sha256, f"points to {shorten(target, 80)}"
    if stat.S_ISREG(mode) and mode & _SPECIAL_BITS:
        names = [n for flag, n in ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid"), (stat.S_ISVTX, "sticky"))
                 if mode & flag]
        return "mode", "", f"{'/'.join(names)} (mode {mode & 0o7777:04o})"
    return None


def verify_files(info: PrefixInfo, *, deep: bool = False, workers: int | None = None,
                 only: Iterable[str] | None = None) -> list[FileProblem]:
    """Every file in conda-meta exists with its size; with ``deep``, its sha256 too. A recorded path that
    leaves the prefix, or a symlink pointing outside it (envguard.pathsafety), is an ``outside`` problem."""
    from envguard.pathsafety import allow_list, allowed, path_problem

    wanted = set(only) if only is not None else None
    problems: list[FileProblem] = []
    to_hash: list[tuple[str, str, str]] = []  # (absolute path, relative path, expected sha256)
    owners: list[str] = []
    prefix = os.fspath(info.prefix)
    real_prefix = os.path.realpath(prefix)
    allow = allow_list()
    parents: dict[str, bool] = {}  # directory -> whether it really lies inside the prefix

    def inside(path: str, *, real: bool = True) -> bool:
        path = os.path.realpath(path) if real else os.path.normpath(path)
        return path == real_prefix or path.startswith(real_prefix.rstrip(os.sep) + os.sep)

    # symlinks the allow-list lets point outside (envguard.pathsafety): a link *to* one of them is fine
    allowed_links = {os.path.join(real_prefix, e.path) for r in info.conda for e in r.paths
                     if e.path_type == "softlink" and allow and allowed(r.name, e.path, allow)}

    def link_out(full: str) -> str | None:
        """The target of a symlink chain starting at ``full`` that leads outside the prefix, else None."""
        cur = os.path.join(os.path.realpath(os.path.dirname(full)), os.path.basename(full))
        for _hop in range(40):
            if cur in allowed_links or not os.path.islink(cur):
                return None
            target = os.readlink(cur)
            nxt = os.path.join(os.path.dirname(cur), target)
            if not inside(nxt, real=False):
                return target
            nxt = os.path.normpath(nxt)
            cur = os.path.join(os.path.realpath(os.path.dirname(nxt)), os.path.basename(nxt))
            if not inside(os.path.dirname(cur)):
                return target
        return "a chain of more than 40 symlinks"

    for r in info.conda:
        if wanted is not None and r.name not in wanted:
            continue
        for e in r.paths:
            unsafe = path_problem(e.path)
            if unsafe:  # never stat or hash it: it names a file outside the prefix
                problems.append(FileProblem(e.path, r.name, "outside", actual=unsafe))
                continue
            full = os.path.join(prefix, e.path)
            parent = os.path.dirname(full)
            if parent not in parents:
                parents[parent] = inside(parent)
            if not parents[parent]:
                problems.append(FileProblem(e.path, r.name, "outside",
                                            actual="lies under a symlink that leads outside the prefix"))
                continue
            if e.path_type == "directory":
                if not os.path.isdir(full):
                    problems.append(FileProblem(e.path, r.name, "missing"))
                continue
            try:
                lst = os.lstat(full)
                st = os.stat(full) if e.path_type != "softlink" and stat.S_ISLNK(lst.st_mode) else lst
            except FileNotFoundError:
                problems.append(FileProblem(e.path, r.name, "missing"))
                continue
            except OSError as ex:
                problems.append(FileProblem(e.path, r.name, "unreadable", actual=str(ex)))
                continue
            if stat.S_ISLNK(lst.st_mode) and not inside(full):
                out = link_out(full)
                if out is not None:
                    problems.append(FileProblem(e.path, r.name, "outside",
                                                actual=f"a symlink to {out}, outside the prefix"))
                    continue
            tree = tree_problem(e, lst, full) if deep else None
            if tree is not None:
                problems.append(FileProblem(e.path, r.name, tree[0], tree[1], tree[2]))
                continue
            if e.path_type == "softlink" or e.rewritten:
                continue
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device in its place: never opened
                problems.append(FileProblem(e.path, r.name, "unreadable", actual="not a regular file"))
                continue
            if e.size is not None and st.st_size != e.size:
                problems.append(FileProblem(e.path, r.name, "size", str(e.size), str(st.st_size)))
                continue
            if deep and e.sha256:
                to_hash.append((full, e.path, e.sha256))
                owners.append(r.name)
    if to_hash:
        n = workers or os.cpu_count() or 1

        def one(item: tuple[str, str, str]) -> str:
            try:
                return _sha256(item[0])
            except OSError as ex:
                return f"!{ex}"

        with ThreadPoolExecutor(max_workers=n) as pool:
            hashed = pool.map(one, to_hash, chunksize=16)
            for (_full, rel, want), owner, got in zip(to_hash, owners, hashed, strict=False):
                if got.startswith("!"):
                    problems.append(FileProblem(rel, owner, "unreadable", actual=got[1:]))
                elif got != want:
                    problems.append(FileProblem(rel, owner, "sha256", want, got))
    return problems
