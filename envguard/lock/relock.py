"""What the existing lock contributes to the next solve: the records to keep, and those to move on purpose.

A re-lock starts from the lock already on disk, as pixi, uv and conda-lock do: every conda record of a
platform the lock already has becomes a *preferred* record of that platform's solve (rattler keeps it unless
the spec or another package's dependency excludes it), and every pip record a *locked* one of conda-lock's
PyPI solver (poetry keeps it the same way). So an edit moves only what it must, and the channel's newer
builds wait for ``--update NAME`` or ``--update-all``.

Three things are never preferred: the packages named by ``--update`` (they go to the newest the spec
allows), everything with ``--update-all`` (a solve from scratch), and, when the ``__cuda`` assumption
changed, the records that depend on ``__cuda``, pytorch's family and the CUDA libraries (their build *is*
the choice the assumption makes: a CPU pytorch locked without ``__cuda`` must be free to become a CUDA one).
A platform the lock does not have yet is solved fresh.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard.errors import UserError
from envguard.lock.lockfile import Lock, LockEntry, read_lock
from envguard.lock.solver import Preferred

MODE_NEW = "new"  # no lock yet: every platform is solved fresh
MODE_MINIMAL = "minimal"  # the default: keep what the lock has unless the spec forces a move
MODE_UPDATE = "update"  # --update NAME: those names move to the newest the spec allows
MODE_UPDATE_ALL = "update-all"  # --update-all: from scratch, as if there were no lock


_TORCH = re.compile(r"^(pytorch|torch|libtorch|torchvision|torchaudio|pytorch-.*|torch-.*)$")


def rank(name: str) -> int:
    """0 pytorch and its family, 1 the CUDA libraries, 2 python, 3 everything else: the order a reviewer reads
    a change in, and the packages whose build a ``__cuda`` assumption decides (rank < 2)."""
    from envguard.mixing import conda_cuda_library

    n = name.lower()
    if _TORCH.match(n):
        return 0
    if conda_cuda_library(n) or n == "cuda-version" or n.startswith("nvidia-"):
        return 1
    return 2 if n == "python" else 3


def canonical(name: str) -> str:
    """One spelling per package for comparing names across conda and pip (PEP 503, lower case)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class RelockPlan:
    """The old lock as the next solve sees it."""

    mode: str
    old: Lock | None
    update: tuple[str, ...] = ()  # canonical names given with --update
    old_cuda: str | None = None  # the assumption the old lock recorded
    unreadable: str = ""  # why an existing lock could not be used (it is then solved from scratch)

    def entries(self, platform: str) -> list[LockEntry]:
        if self.old is None or platform not in self.old.platforms:
            return []
        return [e for e in self.old.packages if e.platform == platform]

    def new_platform(self, platform: str) -> bool:
        return self.old is not None and platform not in self.old.platforms

    def is_updated(self, name: str) -> bool:
        return self.mode == MODE_UPDATE and canonical(name) in self.update

    def cuda_changed(self, new_cuda: str) -> bool:
        return self.old is not None and self.old_cuda is not None and self.old_cuda != new_cuda

    def preferred(self, platforms: Iterable[str], new_cuda: str) -> dict[str, list[Preferred]]:
        """platform -> the conda records to keep (rattler's locked packages)."""
        if self.mode in (MODE_NEW, MODE_UPDATE_ALL):
            return {}
        cuda_moved = self.cuda_changed(new_cuda)
        out: dict[str, list[Preferred]] = {}
        for p in platforms:
            keep = []
            for e in self.entries(p):
                if e.manager != "conda" or self.is_updated(e.name):
                    continue
                if cuda_moved and ("__cuda" in e.dependencies or rank(e.name) < 2):  # a CPU build too
                    continue
                keep.append(Preferred(name=e.name, subdir=e.subdir, filename=e.filename, sha256=e.sha256))
            out[p] = keep
        return out

    def pip_locked(self, platform: str) -> tuple[dict[str, Any], list[str]]:
        """conda-lock's ``pip_locked`` and ``use_latest`` for ``platform``'s PyPI solve."""
        if self.mode in (MODE_NEW, MODE_UPDATE_ALL):
            return {}, []
        from conda_lock.lockfile.v2prelim.models import HashModel, LockedDependency

        locked = {}
        for e in self.entries(platform):
            if e.manager != "pip":
                continue
            locked[e.name] = LockedDependency(
                name=e.name, version=e.version, manager="pip", platform=platform,
                dependencies=dict(e.dependencies), url=e.url,
                hash=HashModel(md5=e.md5, sha256=e.sha256))
        use_latest = [canonical(n) for n in locked if self.is_updated(n)]
        return locked, use_latest


def plan(lockfile: Path, *, update: Sequence[str] = (), update_all: bool = False,
         requested: Iterable[str] = ()) -> RelockPlan:
    """Read the lock already at ``lockfile`` (if any) and decide how the next solve uses it.

    ``update`` names must be in that lock (any platform, conda or pip) or among the ``requested`` names of
    the spec: a typo would otherwise move nothing and say nothing. A lock that cannot be read is solved
    from scratch, and the report says so.
    """
    if update and update_all:
        raise UserError("--update NAME and --update-all exclude each other", key="--update",
                        fix="pass --update-all to move everything, or --update NAME for some packages")
    names = tuple(dict.fromkeys(canonical(n) for n in update))
    if not Path(lockfile).is_file():
        return RelockPlan(MODE_NEW, None, names)
    try:
        old = read_lock(lockfile)
    except UserError as e:
        return RelockPlan(MODE_NEW, None, names, unreadable=e.message)
    if names:
        known = {canonical(e.name) for e in old.packages} | {canonical(n) for n in requested}
        unknown = [n for n in names if n not in known]
        if unknown:
            import difflib
            import shlex

            near = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            why = shlex.join(["envguard", "why", near[0], "--lockfile", str(lockfile)]) if near else ""
            raise UserError(f"--update {unknown[0]}: no such package in the lock or the spec", file=str(lockfile),
                            key="--update", fix="name a package the lock or the spec holds"
                            + (f": {near[0]}? (`{why}` shows where it comes from)" if near else ""))
    mode = MODE_UPDATE_ALL if update_all else MODE_UPDATE if names else MODE_MINIMAL
    return RelockPlan(mode, old, names, old_cuda=old.cuda)
