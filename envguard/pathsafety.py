"""Nothing outside the prefix: the rules every path and symlink a package declares must follow.

A conda package names the files it installs in ``info/paths.json`` and carries them (and its symlinks) as
archive entries. An installer joins those names to the prefix, so ``share/../../victim.txt`` deletes or
writes a file beside the environment, an absolute name panics rattler's installer, and a symlink
``share/passwd -> /etc/passwd`` makes the environment a way to write outside itself. envguard refuses all
of these before anything is linked (envguard.create.prelink) and reports any that exist in an installed
environment (``check --files/--deep``, EG536), whatever the installer would have done.

The rules (pure functions, no file system access):

* a path is relative, uses ``/``, and is normalised: no empty, ``.`` or ``..`` part, no NUL, no drive or
  backslash (which Windows would read as a separator);
* following the symlinks the packages declare (:func:`resolve`, like the kernel, at most 40 hops), every
  path, and every symlink's target, stays inside the prefix;
* a symlink pointing outside the prefix is refused unless the allow-list (``ENVGUARD_SYMLINK_ALLOW``) names
  it: comma- or space-separated ``PACKAGE:PATH`` glob pairs, e.g. ``ENVGUARD_SYMLINK_ALLOW=tzdata:share/zoneinfo/*``.
  Paths that leave the prefix are never allowed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from envguard import settings
from envguard.redact import shorten

MAX_HOPS = 40  # as Linux's MAXSYMLINKS


@dataclass(frozen=True)
class Unsafe:
    """One path of ``package`` that would put or point something outside the prefix."""

    package: str
    path: str
    reason: str

    def describe(self) -> str:
        return f"{shorten(self.path, 160)} {self.reason}"


def path_problem(path: str, *, windows: bool = False) -> str | None:
    """Why ``path`` is not a relative, normalised path inside the prefix, else None. A backslash is a
    separator only on Windows (``windows``); elsewhere it is an ordinary character of a file name."""
    if not path:
        return "is empty"
    if "\x00" in path:
        return "contains a NUL byte"
    if path.startswith("/") or path.startswith("\\") or (len(path) > 1 and path[1] == ":" and path[0].isalpha()):
        return "is absolute"
    if windows and "\\" in path:
        return "contains a backslash (a path separator on Windows)"
    parts = path.split("/")
    if ".." in parts:
        return "leaves the prefix ('..')"
    if "" in parts or "." in parts:
        return "is not normalised (empty or '.' part)"
    return None


def target_is_absolute(target: str) -> bool:
    return target.startswith(("/", "\\")) or (len(target) > 1 and target[1] == ":" and target[0].isalpha())


def resolve(parts: list[str], links: Mapping[str, str], final_ok: frozenset[str] = frozenset()) -> list[str] | None:
    """The parts of the path inside the prefix that ``parts`` leads to, following ``links`` (path -> target
    of every symlink the prefix will hold); None when it leaves the prefix, meets an absolute target or
    loops. ``..`` at the prefix's top leaves it (unlike ``/..`` at the file system's root). A symlink in
    ``final_ok`` (allowed to point outside) ends the walk when it is the last part: a link *to* it stays
    inside; a path *through* it (a directory to write into) does not."""
    out: list[str] = []
    pending = list(reversed(parts))
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                return None
            out.pop()
            continue
        out.append(part)
        key = "/".join(out)
        if not pending and key in final_ok:
            return out
        target = links.get(key) if links else None
        if target is not None:
            hops += 1
            if hops > MAX_HOPS or target_is_absolute(target):
                return None
            out.pop()
            pending.extend(reversed(target.replace("\\", "/").split("/")))
    return out


def allow_list(env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(package glob, path glob) pairs from ``ENVGUARD_SYMLINK_ALLOW``."""
    raw = settings.text(settings.SYMLINK_ALLOW, env)
    pairs: list[tuple[str, str]] = []
    for item in raw.replace(",", " ").split():
        pkg, sep, path = item.strip().partition(":")
        if sep and pkg and path:
            pairs.append((pkg, path))
    return pairs


def allowed(package: str, path: str, allow: Iterable[tuple[str, str]]) -> bool:
    return any(fnmatch.fnmatchcase(package, p) and fnmatch.fnmatchcase(path, g) for p, g in allow)


def check_package(package: str, paths: Iterable[str], symlinks: Mapping[str, str],
                  links: Mapping[str, str], allow: Iterable[tuple[str, str]] = (), *,
                  windows: bool = False, final_ok: frozenset[str] = frozenset()) -> list[Unsafe]:
    """Every problem of one package: its declared ``paths`` (paths.json and archive entries) and its
    ``symlinks`` (path -> target), resolved against ``links``, every symlink of the prefix-to-be.
    ``final_ok``: the symlinks the allow-list lets point outside (a link to one of them is fine)."""
    allow = list(allow)
    found: list[Unsafe] = []
    inside: dict[str, bool] = {}  # parent directory -> whether it resolves inside (a package's files share few)
    for path in paths:
        problem = path_problem(path, windows=windows)
        if problem:
            found.append(Unsafe(package, path, problem))
            continue
        parent = path.rpartition("/")[0]
        if not parent:
            continue
        ok = inside.get(parent)
        if ok is None:
            ok = inside[parent] = resolve(parent.split("/"), links) is not None
        if not ok:
            found.append(Unsafe(package, path, "lies under a symlink that leads outside the prefix"))
    for path, target in symlinks.items():
        if path_problem(path, windows=windows):
            continue  # reported above, or an archive entry reported by the caller
        if target_is_absolute(target):
            if not allowed(package, path, allow):
                found.append(Unsafe(package, path, f"is a symlink to {shorten(target, 160)}, outside the prefix"))
            continue
        base = resolve(path.split("/")[:-1], links)
        leads_out = base is None or resolve(base + target.replace("\\", "/").split("/"), links, final_ok) is None
        if leads_out and not allowed(package, path, allow):
            found.append(Unsafe(package, path, f"is a symlink to {shorten(target, 160)}, which leads outside "
                                               "the prefix"))
    return found
