"""``envguard lock`` in a project with variants (envguard.variants, docs/variants.md): every variant locked,
together.

Each variant is locked as ``conda-lock -f environment.yml -f variants/<name>.yml -p <its platforms>`` would
lock it (conda-lock's own merge, envguard.lock.spec), into ``conda-lock.<name>.yml``, by the one lock
function (:func:`envguard.lock.lock`): an existing lock is still the starting point, so an edit moves only
what it forces, in every variant. Together means: the default variant is locked first; every other variant's
solve then prefers the default's new records (rattler's locked packages) for every package this variant does
not force to differ. Forced are the torch family and the CUDA libraries (``relock.rank`` < 2), records that
depend on ``__cuda``, and what already differed between the two variants' previous locks (the solver found
those differences then; keeping them keeps a re-lock minimal). So, outside what a variant forces, every
package is the same record in every variant's lock on a platform; what still differs is reported
(:func:`differences`), forced or not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.errors import UserError
from envguard.lock.lockfile import LockEntry, read_lock
from envguard.lock.relock import MODE_UPDATE_ALL, RelockPlan, canonical, rank
from envguard.lock.solver import Preferred
from envguard.variants import Variant, declared_variants, variant_files, variant_metadata

SCHEMA = "envguard.lock-variants/1"


def _by_platform(entries: Iterable[LockEntry]) -> dict[str, dict[tuple[str, str], LockEntry]]:
    out: dict[str, dict[tuple[str, str], LockEntry]] = {}
    for e in entries:
        key = (e.manager, canonical(e.name) if e.manager == "pip" else e.name)
        out.setdefault(e.platform, {})[key] = e
    return out


def _entries(lockfile: Path) -> list[LockEntry]:
    """A lock's packages; none when it is missing or unreadable (it is then solved fresh, as relock does)."""
    if not lockfile.is_file():
        return []
    try:
        return read_lock(lockfile).packages
    except UserError:
        return []


def _cuda_bound(e: LockEntry | None) -> bool:
    return e is not None and "__cuda" in e.dependencies


@dataclass
class Together:
    """The default variant's lock, before and after this run, as another variant's solve sees it."""

    before: list[LockEntry]
    after: list[LockEntry]
    own_before: list[LockEntry]  # this variant's previous lock

    def preferred(self, plan: RelockPlan, platforms: Iterable[str], cuda: str) -> dict[str, list[Preferred]]:
        """platform -> the records to keep: this variant's own (relock's rules) for what it forces, the
        default's new ones for everything else."""
        own = plan.preferred(platforms, cuda)
        before, after, mine = _by_platform(self.before), _by_platform(self.after), _by_platform(self.own_before)
        out: dict[str, list[Preferred]] = {}
        for p in platforms:
            keep = {w.name: w for w in own.get(p, [])}
            for (manager, name), e in after.get(p, {}).items():
                if manager != "conda" or plan.is_updated(name) or rank(name) < 2 or _cuda_bound(e):
                    continue
                old_mine, old_default = mine.get(p, {}).get((manager, name)), before.get(p, {}).get((manager, name))
                forced_before = (old_mine is not None and old_default is not None
                                 and old_mine.filename != old_default.filename)
                if (forced_before or _cuda_bound(old_mine)) and name in keep and plan.mode != MODE_UPDATE_ALL:
                    continue  # the two differed before: what this variant forces, kept as it was
                keep[name] = Preferred(name=e.name, subdir=e.subdir, filename=e.filename, sha256=e.sha256)
            out[p] = list(keep.values())
        return out


# ------------------------------------------------------------------ what differs between two variants


@dataclass(frozen=True)
class Difference:
    name: str
    manager: str
    this: str | None  # "version build" in this variant, None: absent
    default: str | None  # in the default variant
    # "torch family", "CUDA library", "needs __cuda", "depends on them", "pinned by them", "needed by them",
    # "not forced"
    why: str

    @property
    def forced(self) -> bool:
        return self.why != "not forced"


@dataclass
class PlatformDifferences:
    variant: str
    against: str
    platform: str
    same: int  # packages that are the same record in both
    differences: list[Difference] = field(default_factory=list)

    @property
    def unforced(self) -> list[Difference]:
        return [d for d in self.differences if not d.forced]


def _label(e: LockEntry | None) -> str | None:
    if e is None:
        return None
    return f"{e.version} {e.build}".strip() if e.manager == "conda" else e.version


def _same(a: LockEntry, b: LockEntry) -> bool:
    return a.filename == b.filename if a.manager == "conda" else a.version == b.version and a.url == b.url


def _allows(spec: str, version: str) -> bool:
    from rattler import Version, VersionSpec

    try:
        return bool(VersionSpec(spec or "*", strict=False).matches(Version(version)))
    except Exception:  # noqa: BLE001 - a range rattler cannot read: count it as allowing (not forced)
        return True


def _pinned(k: tuple[str, str], p: str, a: Mapping[str, Mapping[tuple[str, str], LockEntry]],
            b: Mapping[str, Mapping[tuple[str, str], LockEntry]], why: Mapping[tuple[str, str], str]) -> bool:
    """Whether a forced package of one side pins ``k`` to a range the other side's record is outside (the
    CUDA and CPU builds of one pytorch release built against other libabseil releases, say)."""
    for mine, other in ((a, b), (b, a)):
        theirs = other[p].get(k)
        if theirs is None or k[0] != "conda":
            continue
        for kk, e in mine[p].items():
            if kk in why and k[1] in e.dependencies and not _allows(e.dependencies[k[1]], theirs.version):
                return True
    return False


def differences(variant: str, against: str, mine: Sequence[LockEntry], theirs: Sequence[LockEntry]
                ) -> list[PlatformDifferences]:
    """Per platform both locks have: which packages differ, and whether the variant forces it."""
    a, b = _by_platform(mine), _by_platform(theirs)
    out: list[PlatformDifferences] = []
    for p in [p for p in a if p in b]:
        keys = list(dict.fromkeys([*a[p], *b[p]]))
        differ = [k for k in keys if k not in a[p] or k not in b[p] or not _same(a[p][k], b[p][k])]
        why: dict[tuple[str, str], str] = {}
        for k in differ:
            if k[0] == "conda" and rank(k[1]) == 0:
                why[k] = "torch family"
            elif k[0] == "conda" and rank(k[1]) == 1:
                why[k] = "CUDA library"
            elif _cuda_bound(a[p].get(k)) or _cuda_bound(b[p].get(k)):
                why[k] = "needs __cuda"
        grown = True
        while grown:  # what depends on a forced package, and what only a forced package needs
            grown = False
            forced_names = {k[1] for k in why}
            for k in differ:
                if k in why:
                    continue
                sides = [s[p][k] for s in (a, b) if k in s[p]]
                if any(forced_names & set(e.dependencies) for e in sides):
                    why[k], grown = "depends on them", True
                elif _pinned(k, p, a, b, why):
                    why[k], grown = "pinned by them", True
                elif len(sides) == 1 and any(k[1] in e.dependencies for s in (a, b) for kk, e in s[p].items()
                                             if kk in why and kk[1] != k[1]):
                    why[k], grown = "needed by them", True
        out.append(PlatformDifferences(variant, against, p, same=len(keys) - len(differ), differences=[
            Difference(k[1], k[0], _label(a[p].get(k)), _label(b[p].get(k)), why.get(k, "not forced"))
            for k in sorted(differ, key=lambda k: (k not in why, rank(k[1]), k[1]))]))
    return out


# ------------------------------------------------------------------ the run


@dataclass
class VariantsLock:
    """What ``envguard lock`` did in a variant project."""

    results: list[tuple[Variant, Any]]  # (variant, envguard.lock.LockResult), the default first
    between: list[PlatformDifferences]
    skipped: list[str] = field(default_factory=list)  # variants none of whose platforms --platform names
    seconds: float = 0.0

    @property
    def warnings(self) -> list[str]:
        return [w for _v, r in self.results for w in r.warnings]

    @property
    def mirror(self) -> str:
        return next((r.mirror for _v, r in self.results if r.mirror), "")

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "exit_code": 0,
            "counts": {"variants": len(self.results),
                       "packages": sum(sum(r.packages.values()) for _v, r in self.results),
                       "changes": sum(sum(len(p.changes) for p in r.changes.platforms) for _v, r in self.results),
                       "unforced": sum(len(d.unforced) for d in self.between)},
            "variants": [{"name": v.name, "default": v.default, "cuda": v.cuda, "lockfile": str(r.lockfile),
                          "platforms": list(r.platforms), "changes": r.changes.to_json()}
                         for v, r in self.results],
            "between": [{"variant": d.variant, "against": d.against, "platform": d.platform, "same": d.same,
                         "differences": [{"name": x.name, "manager": x.manager, "variant": x.this,
                                          "against": x.default, "why": x.why, "forced": x.forced}
                                         for x in d.differences]} for d in self.between],
            "skipped": list(self.skipped),
        }


def _names_for(variant: Variant, update: Sequence[str], known: Mapping[str, set[str]]) -> list[str]:
    """The --update names this variant moves: those its lock holds, and those no variant's lock holds (its
    plan then judges them against its spec, and refuses a typo)."""
    return [n for n in update if canonical(n) in known[variant.name]
            or not any(canonical(n) in names for names in known.values())]


def _declared(spec: Path, platforms: Sequence[str] | None) -> list[Variant]:
    variants = declared_variants(spec)
    if platforms and not any(p in v.platforms for v in variants for p in platforms):
        raise UserError(f"no variant is locked for {', '.join(platforms)} (their platforms: "
                        f"{', '.join(sorted({p for v in variants for p in v.platforms}))})", key="--platform",
                        fix="name a platform of environment.yml or variants/*.yml")
    return variants


def lock_variants(spec: Path, *, platforms: Sequence[str] | None = None, reporter: Callable[..., None] | None = None,
                  update: Sequence[str] = (), update_all: bool = False) -> VariantsLock:
    """Lock every variant declared beside ``spec`` (the default first), each into its own lock."""
    from envguard.lock import lock

    started = time.perf_counter()
    variants = _declared(spec, platforms)
    before = {v.name: _entries(v.lockfile) for v in variants}
    known = {name: {canonical(e.name) for e in entries} for name, entries in before.items()}
    results: list[tuple[Variant, Any]] = []
    skipped: list[str] = []
    default_after: list[LockEntry] = []
    default = variants[0]
    for v in variants:
        plats = [p for p in v.platforms if not platforms or p in platforms]
        if not plats:
            skipped.append(v.name)
            continue
        together = None if v is default else Together(before[default.name], default_after, before[v.name])
        result = lock(variant_files(spec, v), platforms=plats, lockfile=v.lockfile, reporter=reporter,
                      update=_names_for(v, update, known), update_all=update_all, together=together,
                      metadata=variant_metadata(v, variants))
        results.append((v, result))
        if v is default:
            default_after = read_lock(v.lockfile).packages
    between: list[PlatformDifferences] = []
    if results and results[0][0] is default:
        for v, _r in results[1:]:
            between += differences(v.name, default.name, read_lock(v.lockfile).packages, default_after)
    return VariantsLock(results, between, skipped, time.perf_counter() - started)


def check_variants(spec: Path, platforms: Sequence[str] | None = None) -> list[tuple[Variant, Any]]:
    """``lock --check`` of every variant: (variant, envguard.lock.Freshness), the default first. Read-only."""
    from envguard.lock import check_fresh

    out: list[tuple[Variant, Any]] = []
    for v in _declared(spec, platforms):
        plats = [p for p in v.platforms if not platforms or p in platforms]
        if plats:
            fresh = check_fresh(variant_files(spec, v), v.lockfile, platforms=plats)
            if not fresh.fresh:  # one command re-locks them all, together
                fresh.command = "envguard lock" + "".join(f" --platform {p}" for p in platforms or ())
            out.append((v, fresh))
    return out
