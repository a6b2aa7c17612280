"""What a lock changed, package by package, and why: the report printed after every ``envguard lock``.

The reasons are output only; the lock file stays exactly conda-lock's. Each change gets the one reason the
inputs show, tried in this order (the first that holds wins):

* ``update-all`` / ``update``: ``--update-all`` or ``--update NAME`` asked for it;
* ``spec``: a spec line names the package and its locked build no longer matches that line;
* ``republished``: the channel's file of the same name has other bytes (sha256) than the locked one;
* ``unavailable``: the locked file is no longer in the channels;
* ``cuda``: the ``__cuda`` assumption changed and the package's build is what it picks (the old or the new
  build depends on ``__cuda``, or it is pytorch's or a CUDA library);
* ``dependency``: a package of the new solution depends on it with a range the locked version is outside
  (or, for a new package, needs it at all); ``constraint``: a package's run constraint excludes it;
* ``requested``: a spec line asks for a package that was not locked;
* ``not-requested`` / ``no-longer-needed``: a package left because no spec line and no other package
  needs it any more;
* ``solver``: none of the above: the solver moved it together with the packages around it.

pytorch, the CUDA libraries and python are listed first: they are what a reviewer looks for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from envguard.lock.lockfile import LockEntry
from envguard.lock.relock import MODE_NEW, MODE_UPDATE_ALL, RelockPlan, canonical, rank
from envguard.redact import redact
from envguard.versions import conda_key, pypi_version

SCHEMA = "envguard.lock-changes/1"
KINDS = ("added", "removed", "upgraded", "downgraded", "rebuilt")
_CAUSES = frozenset({"update-all", "update", "spec", "requested", "not-requested", "cuda", "unavailable"})


@dataclass(frozen=True)
class Reason:
    kind: str
    text: str
    package: str | None = None  # the package whose dependency or constraint forced it
    spec: str | None = None  # the spec line, as written
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class Change:
    name: str
    manager: str  # "conda" | "pip"
    change: str  # one of KINDS
    before: dict[str, str] | None  # {"version", "build"}
    after: dict[str, str] | None
    reason: Reason


@dataclass
class PlatformChanges:
    platform: str
    new_platform: bool  # not in the old lock: solved fresh, its packages are not listed one by one
    packages: int
    changes: list[Change] = field(default_factory=list)


@dataclass
class ChangeReport:
    lockfile: str
    written: bool
    mode: str
    update: list[str]
    cuda_before: str | None
    cuda_after: str
    platforms: list[PlatformChanges]
    removed_platforms: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def current(self) -> bool:
        """Nothing moved: no package, no platform."""
        return not self.removed_platforms and all(not p.new_platform and not p.changes for p in self.platforms)

    def summary(self, platform: str, limit: int = 4) -> str:
        """One platform's changes in a few words, for a line that is not the lock's own report (create's
        re-lock): ``2 changed: rich added, filelock 3.16.1 -> 3.17.0``; ``nothing moved``."""
        mine = next((p for p in self.platforms if p.platform == platform), None)
        if mine is None:
            return "nothing moved"
        if mine.new_platform:
            return f"{platform} solved fresh ({mine.packages} packages)"
        if not mine.changes:
            return "nothing moved"
        words = []
        for c in mine.changes[:limit]:
            if c.before and c.after and c.change in ("upgraded", "downgraded"):
                words.append(f"{c.name} {c.before.get('version')} -> {c.after.get('version')}")
            else:
                words.append(f"{c.name} {c.change}")
        more = f", {len(mine.changes) - limit} more" if len(mine.changes) > limit else ""
        return f"{len(mine.changes)} changed: {', '.join(words)}{more}"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            # the fields every command's JSON carries (docs/json.md): a report is only written for a lock made
            "exit_code": 0,
            "counts": {"platforms": len(self.platforms), "packages": sum(p.packages for p in self.platforms),
                       "changes": sum(len(p.changes) for p in self.platforms)},
            "lockfile": self.lockfile,
            "written": self.written,
            "current": self.current,
            "mode": self.mode,
            "update": list(self.update),
            "cuda": {"before": self.cuda_before, "after": self.cuda_after},
            "platforms": [{"platform": p.platform, "new_platform": p.new_platform, "packages": p.packages,
                           "changes": [{**{k: v for k, v in asdict(c).items() if k != "reason"},
                                        "reason": asdict(c.reason)} for c in p.changes]}
                          for p in self.platforms],
            "removed_platforms": list(self.removed_platforms),
            "note": self.note,
        }


# ------------------------------------------------------------------ one package, as both sides see it


@dataclass(frozen=True)
class Node:
    name: str  # canonical within its manager: conda names as written, pip names PEP 503
    manager: str
    version: str
    build: str
    sha256: str | None
    depends: Mapping[str, str]  # name -> version range, as the lock writes it
    constrains: tuple[str, ...] = ()


def node_of(entry: LockEntry, constrains: Iterable[str] = ()) -> Node:
    key = canonical(entry.name) if entry.manager == "pip" else entry.name
    deps = {(canonical(n) if entry.manager == "pip" else n): v for n, v in entry.dependencies.items()}
    return Node(key, entry.manager, entry.version, entry.build if entry.manager == "conda" else "",
                entry.sha256, deps, tuple(constrains))


@dataclass(frozen=True)
class Requested:
    """One spec line that names a package: what conda-lock parsed, and where the line is."""

    name: str
    manager: str
    text: str  # as written in the file
    dependency: Any  # conda-lock's VersionedDependency (or another Dependency kind)
    file: str | None = None
    line: int | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else (self.file or "the spec")


def _unreadable() -> tuple[type[BaseException], ...]:
    """What rattler and packaging raise on a spec or version they cannot read: then no verdict (True)."""
    from packaging.specifiers import InvalidSpecifier
    from packaging.version import InvalidVersion
    from rattler.exceptions import (
        InvalidMatchSpecError,
        InvalidPackageNameError,
        InvalidVersionError,
        InvalidVersionSpecError,
    )

    return (InvalidMatchSpecError, InvalidPackageNameError, InvalidVersionError, InvalidVersionSpecError,
            InvalidSpecifier, InvalidVersion, ValueError, TypeError)


def _conda_matches(spec: str, node: Node, platform: str) -> bool:
    from rattler import BuildString, MatchSpec, PackageRecord

    try:
        record = PackageRecord(node.name, node.version, BuildString(node.build or "0"), 0, platform)
        return bool(MatchSpec(spec, strict=False).matches(record))
    except _unreadable():  # the solve accepted the spec already; an old record it cannot read gets no verdict
        return True


def _version_in(rng: str, node: Node) -> bool:
    """Does ``node``'s version lie in the dependency range ``rng`` (conda's or PEP 440's grammar)?"""
    rng = (rng or "").strip()
    if not rng or rng == "*":
        return True
    try:
        if node.manager == "pip":
            from packaging.specifiers import SpecifierSet

            return SpecifierSet(rng).contains(node.version, prereleases=True)
        from rattler import Version, VersionSpec

        return bool(VersionSpec(rng.split()[0], strict=False).matches(Version(node.version)))
    except _unreadable():
        return True


def _requested_matches(req: Requested, node: Node, platform: str) -> bool:
    dep = req.dependency
    version = getattr(dep, "version", None)
    if version is None:  # a URL or path dependency: nothing to compare with a version
        return True
    if node.manager == "pip":
        return _version_in(version if version != "*" else "", node)
    from envguard.lock.solver import match_spec_of

    return _conda_matches(match_spec_of(dep), node, platform)


def _label(n: Node | None) -> dict[str, str] | None:
    return None if n is None else {"version": n.version, "build": n.build}


def _kind(old: Node, new: Node) -> str | None:
    if old.version != new.version:
        if new.manager == "pip":  # PyPI's order for pip's packages, conda's for conda's (envguard.versions)
            after, before = pypi_version(new.version), pypi_version(old.version)
            if after is not None and before is not None:
                return "upgraded" if after > before else "downgraded"
            return "upgraded" if new.version > old.version else "downgraded"
        return "upgraded" if conda_key(new.version) > conda_key(old.version) else "downgraded"
    if old.build != new.build or (old.sha256 and new.sha256 and old.sha256 != new.sha256):
        return "rebuilt"
    return None


# ------------------------------------------------------------------ the reasons


@dataclass
class _Platform:
    """Everything one platform's reasons are drawn from."""

    platform: str
    plan: RelockPlan
    old: dict[tuple[str, str], Node]
    new: dict[tuple[str, str], Node]
    requested: dict[tuple[str, str], Requested]
    unavailable: set[str]
    cuda_before: str | None
    cuda_after: str
    changed: set[tuple[str, str]] = field(default_factory=set)

    def dependents(self, key: tuple[str, str], side: dict[tuple[str, str], Node]) -> list[Node]:
        manager, name = key
        out = [n for n in side.values() if n.manager == manager and name in n.depends]
        # the packages that themselves moved are the likelier cause; then the order a reviewer reads in
        return sorted(out, key=lambda n: ((n.manager, n.name) not in self.changed, rank(n.name), n.name))

    def moved(self, key: tuple[str, str], old: Node, new: Node) -> Reason:
        """Why ``old`` (locked) gave way to ``new``, another record of the same name."""
        plan, manager, name = self.plan, key[0], key[1]
        if plan.mode == MODE_UPDATE_ALL:
            return Reason("update-all", "--update-all: solved from scratch")
        if plan.is_updated(name):
            return Reason("update", f"--update {canonical(name)}")
        if (old.version, old.build) == (new.version, new.build):  # same file name, other bytes
            return Reason("republished", f"the channel's {name} {old.version} {old.build} has another sha256 than "
                          "the locked one (republished, or tampered with)".replace("  ", " "))
        req = self.requested.get(key)
        if req is not None and not _requested_matches(req, old, self.platform):
            return Reason("spec", f"{req.where} asks for `{req.text}`, which {old.version} {old.build} does not "
                          "match".replace("  ", " "), spec=req.text, file=req.file, line=req.line)
        if manager == "conda" and name in self.unavailable:
            return Reason("unavailable", f"the locked {name} {old.version} {old.build} is no longer in the "
                          "channels")
        if manager == "conda" and self.cuda_before not in (None, self.cuda_after) and (
                "__cuda" in old.depends or "__cuda" in new.depends or rank(name) < 2):
            return Reason("cuda", f"the __cuda assumption changed ({self.cuda_before} -> {self.cuda_after}), which "
                          "picks this build")
        for parent in self.dependents(key, self.new):
            rng = parent.depends.get(name, "")
            if not _version_in(rng, old):
                return Reason("dependency", f"{parent.name} {parent.version} needs {name} {rng}, "
                              f"which {old.version} is outside", package=parent.name)
        for other in self.new.values():
            for c in other.constrains:
                cname, _, rng = c.strip().partition(" ")
                if cname == name and not _version_in(rng, old):
                    return Reason("constraint", f"{other.name} {other.version} constrains {name} to {rng.strip()}",
                                  package=other.name)
        return Reason("solver", "moved by the solver together with the packages around it (no single "
                      "constraint excludes the locked build)")

    def added(self, key: tuple[str, str]) -> Reason:
        if self.plan.mode == MODE_UPDATE_ALL:
            return Reason("update-all", "--update-all: solved from scratch")
        req = self.requested.get(key)
        if req is not None:
            return Reason("requested", f"{req.where} asks for `{req.text}`", spec=req.text, file=req.file,
                          line=req.line)
        for parent in self.dependents(key, self.new):
            rng = parent.depends.get(key[1], "")
            return Reason("dependency", f"needed by {parent.name} {parent.version}"
                          + (f" ({key[1]} {rng})" if rng else ""), package=parent.name)
        return Reason("solver", "added by the solver (no package of the new lock names it)")

    def removed(self, key: tuple[str, str]) -> Reason:
        if self.plan.mode == MODE_UPDATE_ALL:
            return Reason("update-all", "--update-all: solved from scratch")
        parents = self.dependents(key, self.old)
        if not parents:
            return Reason("not-requested", "no spec line asks for it any more")
        stayed = [p for p in parents if (p.manager, p.name) in self.new]
        if not stayed:
            names = ", ".join(p.name for p in parents[:3]) + (", ..." if len(parents) > 3 else "")
            return Reason("no-longer-needed", f"only {names} needed it, and {'it' if len(parents) == 1 else 'they'} "
                          "left", package=parents[0].name)
        p = self.new[(stayed[0].manager, stayed[0].name)]
        return Reason("no-longer-needed", f"{p.name} {p.version} no longer depends on it", package=p.name)


def _key(n: Node) -> tuple[str, str]:
    return (n.manager, n.name)


def platform_changes(*, platform: str, plan: RelockPlan, old: Iterable[Node], new: Iterable[Node],
                     requested: Iterable[Requested], unavailable: set[str], cuda_after: str) -> PlatformChanges:
    """The changes of one platform between the old lock's records and the new solution's."""
    new_nodes = {_key(n): n for n in new}
    if plan.mode == MODE_NEW or plan.new_platform(platform):
        return PlatformChanges(platform, True, len(new_nodes))
    old_nodes = {_key(n): n for n in old}
    reqs = {(r.manager, r.name): r for r in requested}
    ctx = _Platform(platform, plan, old_nodes, new_nodes, reqs, unavailable, plan.old_cuda, cuda_after)
    ctx.changed = {k for k in set(old_nodes) | set(new_nodes)
                   if k not in old_nodes or k not in new_nodes or _kind(old_nodes[k], new_nodes[k])}
    out: list[Change] = []
    for key in ctx.changed:
        before, after = old_nodes.get(key), new_nodes.get(key)
        if before is None:
            assert after is not None
            out.append(Change(key[1], key[0], "added", None, _label(after), ctx.added(key)))
        elif after is None:
            out.append(Change(key[1], key[0], "removed", _label(before), None, ctx.removed(key)))
        else:
            out.append(Change(key[1], key[0], _kind(before, after) or "rebuilt", _label(before), _label(after),
                              ctx.moved(key, before, after)))
    # what a reviewer looks for first, then the causes (the lines and flags) before what they brought along
    out.sort(key=lambda c: (rank(c.name), c.reason.kind not in _CAUSES, c.name, c.manager))
    return PlatformChanges(platform, False, len(new_nodes), out)


# ------------------------------------------------------------------ from the lock's own objects


def node_of_locked(dep: Any, constrains: Iterable[str] = ()) -> Node:
    """A conda-lock LockedDependency of the new solution as a Node (the same fields the file will hold)."""
    entry = LockEntry(name=dep.name, version=str(dep.version), manager=dep.manager, platform=dep.platform,
                      url=str(dep.url), md5=dep.hash.md5, sha256=dep.hash.sha256,
                      dependencies={str(k): str(v) for k, v in (dep.dependencies or {}).items()})
    return node_of(entry, constrains)


def requested_of(dependencies: Iterable[Any], origins: Mapping[tuple[str, str], tuple[str, int | None]]
                 ) -> list[Requested]:
    """The spec lines of one platform (conda-lock's parsed dependencies), each with the line it came from."""
    where: dict[tuple[str, str], tuple[str, str | None, int | None]] = {}
    for (manager, text), (file, line) in origins.items():
        name = name_of(manager, text)
        if name:
            where.setdefault((manager, name), (text, file, line))
    out = []
    for d in dependencies:
        if d.name.startswith("__"):
            continue
        name = canonical(d.name) if d.manager == "pip" else d.name
        text, file, line = where.get((d.manager, name), (d.name, None, None))
        out.append(Requested(name, d.manager, redact(text), d, file, line))  # a `https://u:p@host/ch::pkg` line
    return out


def name_of(manager: str, text: str) -> str | None:
    """The package a spec line names (conda's match-spec or a PEP 508 requirement), None if unreadable."""
    try:
        if manager == "pip":
            from packaging.requirements import Requirement

            return canonical(Requirement(text).name)
        from rattler import MatchSpec

        return MatchSpec(text, strict=False).name.normalized
    except _unreadable():  # a line only conda-lock's parser reads: no line number for it, the name still shows
        return None


def build_report(*, lockfile: str, written: bool, plan: RelockPlan, cuda_after: str,
                 platforms: list[PlatformChanges]) -> ChangeReport:
    removed = [p for p in (plan.old.platforms if plan.old is not None else []) if p not in
               {c.platform for c in platforms}]
    note = f"the existing lock could not be read ({plan.unreadable}): solved from scratch" if plan.unreadable else ""
    return ChangeReport(lockfile=lockfile, written=written, mode=plan.mode, update=list(plan.update),
                        cuda_before=plan.old_cuda, cuda_after=cuda_after, platforms=platforms,
                        removed_platforms=removed, note=note)
