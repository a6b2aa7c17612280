"""What a prefix's pip-side dists say about where they came from.

For every dist that conda does not own (:class:`envguard.prefix.Dist` with ``owner != "conda"``) this reads
the files pip and its peers leave in a ``*.dist-info``: ``INSTALLER``, the PEP 376 ``REQUESTED`` marker,
PEP 610's ``direct_url.json`` (an archive URL with its hash, a VCS commit, a local directory, editable or
not), the ``WHEEL`` tags it was installed from and the ``Requires-Dist`` lines of ``METADATA``.

Files are read with a size cap: a dist-info is untrusted input, and none of these files is legitimately
large (METADATA bodies are skipped at the first blank line).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard.model import pep503
from envguard.prefix import Dist, PrefixInfo
from envguard.redact import redact
from envguard.safeio import open_regular, read_small_text

_MAX_SMALL = 1 << 16  # INSTALLER, WHEEL, direct_url.json: a few hundred bytes in practice
_MAX_HEADERS = 4 << 20  # METADATA headers; the long description after the blank line is never read
_MAX_LINE = 1 << 16
SourceKind = str  # "index" | "url" | "file" | "vcs" | "dir" | "editable" | "unknown"


@dataclass(frozen=True)
class PipDist:
    """One non-conda dist and what is known about its origin."""

    name: str  # as METADATA names it
    version: str
    path: str  # the dist-info, relative to the prefix
    installer: str | None
    requested: bool  # a REQUESTED marker
    source: SourceKind
    url: str | None = None  # the direct URL (archive, VCS with @commit, or file:// of a directory), redacted
    sha256: str | None = None  # from direct_url.json's archive_info
    tags: tuple[str, ...] = ()  # WHEEL "Tag:" lines: the wheel it was installed from
    requires: tuple[str, ...] = ()  # Requires-Dist lines, as written
    provides_extra: tuple[str, ...] = ()  # Provides-Extra lines
    has_metadata: bool = True
    problem: str | None = None  # an unreadable direct_url.json and the like

    @property
    def key(self) -> str:
        return pep503(self.name)


def _read_small(path: str) -> str | None:
    return read_small_text(path, _MAX_SMALL)


def _requires(meta: str) -> tuple[tuple[str, ...], bool, tuple[str, ...]]:
    """(Requires-Dist lines, whether METADATA exists, Provides-Extra lines), reading headers only, in bounded
    lines."""
    if not os.path.lexists(meta):
        return (), False, ()
    out: list[str] = []
    extras: list[str] = []
    read = 0
    try:
        with open_regular(meta) as fh:  # checked through the descriptor: no swap between a check and the open
            while read < _MAX_HEADERS:
                raw = fh.readline(_MAX_LINE)
                read += len(raw)
                line = raw.decode("utf-8", "replace")
                if not line.strip():
                    break
                if line.startswith("Requires-Dist:"):
                    out.append(line[len("Requires-Dist:"):].strip())
                elif line.startswith("Provides-Extra:"):
                    extras.append(line[len("Provides-Extra:"):].strip())
    except OSError:
        return (), True, ()
    return tuple(out), True, tuple(e for e in extras if e)


def _tags(wheel_text: str | None) -> tuple[str, ...]:
    if not wheel_text:
        return ()
    return tuple(line.split(":", 1)[1].strip() for line in wheel_text.splitlines()
                 if line.startswith("Tag:") and ":" in line)


def _direct_url(text: str) -> tuple[SourceKind, str | None, str | None, str | None]:
    """(kind, url, sha256, problem) from a PEP 610 document."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        return "unknown", None, None, f"direct_url.json is not JSON ({e.msg})"
    if not isinstance(data, dict) or not isinstance(data.get("url"), str) or not data["url"]:
        return "unknown", None, None, "direct_url.json has no url"
    url = redact(data["url"])
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id") if isinstance(vcs.get("commit_id"), str) else None
        kind = vcs.get("vcs") if isinstance(vcs.get("vcs"), str) else "git"
        return "vcs", f"{kind}+{url}" + (f"@{commit}" if commit else ""), None, None
    dir_info = data.get("dir_info")
    if isinstance(dir_info, dict):
        return ("editable" if dir_info.get("editable") is True else "dir"), url, None, None
    archive = data.get("archive_info")
    sha256 = None
    if isinstance(archive, dict):
        hashes = archive.get("hashes")
        if isinstance(hashes, dict) and isinstance(hashes.get("sha256"), str):
            sha256 = hashes["sha256"].lower()
        elif isinstance(archive.get("hash"), str) and archive["hash"].startswith("sha256="):
            sha256 = archive["hash"][len("sha256="):].lower()
    if sha256 is not None and (len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256)):
        sha256 = None
    return ("file" if url.startswith("file:") else "url"), url, sha256, None


def read_dist(prefix: Path, dist: Dist) -> PipDist:
    base = os.path.join(prefix, dist.path)
    if not os.path.isdir(base):  # a bare *.egg-info file (distutils): nothing but the name and version
        return PipDist(dist.name, dist.version, dist.path, dist.installer, False, "unknown")
    meta_name = "METADATA" if dist.path.endswith(".dist-info") else "PKG-INFO"
    requires, has_meta, provides = _requires(os.path.join(base, meta_name))
    requested = os.path.exists(os.path.join(base, "REQUESTED"))
    tags = _tags(_read_small(os.path.join(base, "WHEEL")))
    source: SourceKind = "index" if dist.owner == "pip" else "unknown"
    url = sha256 = problem = None
    direct = _read_small(os.path.join(base, "direct_url.json"))
    if direct is not None:
        source, url, sha256, problem = _direct_url(direct)
    elif os.path.exists(os.path.join(base, "direct_url.json")):
        problem = "direct_url.json is unreadable or too large"
    return PipDist(dist.name, dist.version, dist.path, dist.installer, requested, source, url, sha256, tags,
                   requires, provides, has_meta, problem)


def read_dists(info: PrefixInfo) -> list[PipDist]:
    """Every dist conda does not own, in the prefix's order."""
    return [read_dist(info.prefix, d) for d in info.dists if d.owner != "conda"]


@dataclass
class Requested:
    dists: list[PipDist]
    inferred: bool  # no REQUESTED marker or direct_url.json anywhere: the dists nothing depends on


def _requirements(lines: Iterable[str]) -> Iterator[Any]:
    """The Requires-Dist lines that parse, extras' requirements left out (nobody asked for the extra)."""
    from packaging.requirements import InvalidRequirement, Requirement

    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or "extra" not in str(req.marker):
            yield req


def requirement_names(lines: Iterable[str]) -> set[str]:
    """Names in Requires-Dist lines, extras' requirements left out."""
    return {pep503(req.name) for req in _requirements(lines)}


def created_by_envguard(d: PipDist, built: Any) -> bool:
    """Whether ``envguard create`` installed this dist from its lock (conda-meta/history says so, with this
    version and, where pip recorded one, this hash): it was pinned by name, not asked for by its URL."""
    if built is None or d.source not in ("url", "file"):
        return False
    got = built.pip_installed.get(d.key)
    if got is None or got[0] != d.version:
        return False
    return not (got[1] and d.sha256 and got[1] != d.sha256)


def requested(dists: list[PipDist], built: Any = None) -> Requested:
    """The dists someone asked for: the pip specs of the spec ``envguard create`` built the prefix from
    (``built``, envguard.history.Built), and a REQUESTED marker or a direct URL on anything else; with no
    such record, the dists nothing requires."""
    wanted = set()
    if built is not None:
        from packaging.requirements import InvalidRequirement, Requirement

        for line in built.pip_specs:
            try:
                wanted.add(pep503(Requirement(line).name))
            except InvalidRequirement:
                continue
    asked = [d for d in dists if d.key in wanted or (not created_by_envguard(d, built) and (
        d.requested or d.source in ("url", "file", "vcs", "dir", "editable")))]
    if asked:
        return Requested(asked, inferred=False)
    required: set[str] = set()
    for d in dists:
        required |= requirement_names(d.requires)
    return Requested([d for d in dists if d.key not in required], inferred=True)


def kept_dependencies(dists: list[PipDist], asked: list[PipDist],
                      extras: dict[str, list[str]] | None = None) -> list[PipDist]:
    """What the requested dists the spec cannot hold (editable installs, directories built in place) require,
    and so on through any such dist among them; ``extras`` (dist path -> pep503 names) adds what their
    installed extras require. The spec names these instead, pinned: without them a re-lock of the spec would
    lose the versions the project works with, and `pip install -e` would pick new ones."""
    by_key = {d.key: d for d in dists}
    todo = [d for d in asked if d.source in ("editable", "dir")]
    seen = {d.key for d in todo}
    out: list[PipDist] = []
    while todo:
        d = todo.pop()
        for name in sorted(requirement_names(d.requires) | set((extras or {}).get(d.path, ()))):
            dep = by_key.get(name)
            if dep is None or dep.key in seen:
                continue
            seen.add(dep.key)
            (todo if dep.source in ("editable", "dir") else out).append(dep)
    return out


def dependencies(d: PipDist) -> dict[str, str]:
    """``Requires-Dist`` as conda-lock writes a pip entry's dependencies: name -> constraint (``*`` when none)."""
    return {pep503(req.name): str(req.specifier) or "*" for req in _requirements(d.requires)}
