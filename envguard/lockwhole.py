"""A lock is whole: what each locked record needs is locked beside it, on the same platform.

conda-lock's ``content_hash`` covers the spec, not the package list, so a lock cut short, or with a record
removed by hand or by a bad merge, still reads as fresh, and installing it builds whatever is left (or rattler
fails late with its own message). This module is the one judgement every command applies to a lock it reads
(``lint``: EG159, ``lock --check``, ``create``, ``check``: EG518, ``diff``), without a solve, linear in the
lock:

* every dependency of a conda record (virtual packages ``__*`` aside) is satisfied by a conda record of the
  same platform, judged by rattler's own ``MatchSpec.matches`` on that record (name, version and build);
* a ``noarch: python`` record has a python on its platform (conda-lock does not record the noarch kind: a
  noarch record whose build is conda-build's ``py_N``/``pyh…`` string is one);
* a ``pip`` record has its interpreter: a python conda record on its platform, where the platform has conda
  records at all. A lock of pip records alone describes the packages of an interpreter it does not provide (a
  virtualenv's, which ``check -p VENV`` judges by it); ``create`` refuses to install one (no python, exit 6).

A dependency whose name nothing on the platform has is always a failure. One whose name is there in a version
or build the constraint does not allow is a failure where the lock's dependencies are the solve's own
(envguard's locks and pixi.lock), and only a warning in a conda-lock file written by conda-lock: conda-lock
copies the dependencies of a package conda merely linked from its cache from that cache's
``repodata_record.json``, which can predate a repodata patch the solve used (a real lock records libarrow
needing ``aws-crt-cpp >=0.26.0,<0.26.1.0a0`` beside aws-crt-cpp 0.25.0, and conda installs it).

Not judged: a pip record's own dependencies (PyPI names, which a conda record may provide under another
name, with markers that depend on the interpreter: pip's resolver judged them when the lock was written), a
dependency rattler cannot parse (the installer never reads it), and what a dependency asks beyond name, version
and build (``build_number``, ``track_features``, a channel: the lock records none of them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from envguard.errors import IntegrityError

_EXTENSIONS = (".conda", ".tar.bz2")
SHOWN = 3  # missing dependencies named in one error line; the rest are counted
OWN_METADATA_PREFIX = "envguard."  # the custom_metadata keys envguard writes into a conda-lock file
FIX = ("restore the lock from version control, or re-lock with `envguard lock`: a lock that is not whole "
       "installs an environment nobody solved")

_Key = tuple[str, str, str, str]  # name, version, build, subdir
# the build strings conda-build gives a noarch: python package (conda-forge's pyhd8ed1ab_0, defaults' py_0); a
# noarch: generic one such as cpython's py313hd8ed1ab_101 is not one
_NOARCH_PY = ("pyh", "py_")


class LockedRecord(Protocol):
    """What a reader's package gives (envguard.model.Package, envguard.lock's LockEntry)."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def manager(self) -> str: ...
    @property
    def url(self) -> str | None: ...
    @property
    def depends(self) -> Sequence[str]: ...


@dataclass(frozen=True)
class Hole:
    """One dependency of one record that no record of its platform in the lock satisfies."""

    platform: str  # the platform label ("linux-64", or "cuda/linux-64" for a pixi environment)
    record: str  # "numpy 1.26.4 py311h64a7726_0", "pip requests 2.31.0"
    package: str  # the record's name
    missing: str  # the dependency as the lock writes it: "python >=3.11,<3.12.0a0"
    name: str  # the dependency's package name: "python"
    found: str = ""  # what the lock has under that name instead ("python 3.10.14 h...", ...), "" when nothing

    @property
    def absent(self) -> bool:
        """No record of that name at all (always a failure)."""
        return not self.found

    @property
    def what(self) -> str:
        """The hole without its platform."""
        why = (f"which the lock's {self.found} does not satisfy" if self.found
               else f"and the lock has no {self.name}")
        return f"{self.record} needs `{self.missing}`, {why}"

    @property
    def message(self) -> str:
        return f"{self.platform}: {self.what}"


def judges_versions(kind: str, custom_metadata: Mapping[str, Any] | None) -> bool:
    """Whether a version or build a dependency does not allow is a failure (the lock's dependencies are its
    solve's own: pixi.lock, a conda-lock file envguard wrote) or a warning (conda-lock's): see the module doc."""
    return kind == "pixi" or any(str(k).startswith(OWN_METADATA_PREFIX) for k in custom_metadata or {})


def _filename_parts(name: str, url: str | None) -> tuple[str, str] | None:
    """(version, build) from ``<name>-<version>-<build>.conda``: the exact strings, whatever YAML made of the
    ``version:`` field (a float 1.10 reads 1.1)."""
    if not url:
        return None
    fn = url.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    for ext in _EXTENSIONS:
        if fn.endswith(ext):
            stem = fn[: -len(ext)]
            if stem.lower().startswith(f"{name.lower()}-"):
                parts = stem[len(name) + 1:].rsplit("-", 1)
                if len(parts) == 2 and all(parts):
                    return parts[0], parts[1]
            return None
    return None


def _subdir(url: str | None) -> str:
    path = (url or "").split("#", 1)[0].split("?", 1)[0].rstrip("/")
    parts = path.rsplit("/", 2)
    return parts[-2] if len(parts) == 3 else ""


def _unreadable() -> tuple[type[BaseException], ...]:
    from rattler.exceptions import (
        InvalidMatchSpecError,
        InvalidPackageNameError,
        InvalidVersionError,
        InvalidVersionSpecError,
    )

    return (InvalidMatchSpecError, InvalidPackageNameError, InvalidVersionError, InvalidVersionSpecError,
            ValueError, TypeError)


class _Judge:
    """rattler's MatchSpec and PackageRecord, each made once per dependency string and per record (a large
    lock repeats ``python >=3.9`` hundreds of times), and the verdict of each pair once."""

    def __init__(self) -> None:
        self.specs: dict[str, Any] = {}
        self.records: dict[_Key, Any] = {}
        self.verdicts: dict[tuple[str, _Key], bool] = {}

    def spec(self, dep: str) -> Any:
        """The parsed MatchSpec, None for what rattler cannot read (not judged)."""
        if dep in self.specs:
            return self.specs[dep]
        from rattler import MatchSpec

        try:
            ms: Any = MatchSpec(dep, strict=False)
            if ms.name is None:
                ms = None
            else:  # name, version and build only: a lock records no build number, track_features or channel
                judged = " ".join([ms.name.normalized, *([str(ms.version or "*"), str(ms.build)] if ms.build else
                                                          [str(ms.version)] if ms.version else [])])
                if judged != str(ms):
                    ms = MatchSpec(judged, strict=False)
        except _unreadable():
            ms = None
        self.specs[dep] = ms
        return ms

    def matches(self, dep: str, ms: Any, key: _Key) -> bool:
        verdict = self.verdicts.get((dep, key))
        if verdict is not None:
            return verdict
        if ms.version is None and ms.build is None:
            verdict = True  # the name alone: the record was found by it
        else:
            rec = self.records.get(key)
            if rec is None:
                from rattler import BuildString, PackageRecord

                name, version, build, subdir = key
                try:  # a legacy build string is taken as the lock writes it (rattler checks CEP 26 otherwise)
                    rec = PackageRecord(name, version, BuildString.new_unchecked(build or "0"), 0, subdir or "noarch")
                except _unreadable():  # a version rattler cannot parse: judged by its name alone
                    rec = False
                self.records[key] = rec
            verdict = True if rec is False else bool(ms.matches(rec))
        self.verdicts[(dep, key)] = verdict
        return verdict


def new_judge() -> _Judge:
    """A judge to share between several :func:`holes_in` calls over one lock (its caches)."""
    return _Judge()


def holes_in(platform: str, records: Iterable[LockedRecord], judge: _Judge | None = None) -> list[Hole]:
    """What is missing among ``records``, the locked records of one platform (of one pixi environment)."""
    judge = judge or _Judge()
    conda: dict[str, list[_Key]] = {}
    rows: list[tuple[LockedRecord, _Key]] = []
    pip: list[LockedRecord] = []
    for r in records:
        if r.manager != "conda":
            pip.append(r)
            continue
        parts = _filename_parts(r.name, r.url)
        version, build = parts if parts else (str(r.version), str(getattr(r, "build", None) or ""))
        key = (r.name.lower(), version, build, _subdir(r.url))
        conda.setdefault(key[0], []).append(key)
        rows.append((r, key))
    out: list[Hole] = []
    for r, (_, version, build, subdir) in rows:
        shown = f"{r.name} {version}" + (f" {build}" if build else "")
        names: set[str] = set()
        for dep in r.depends:
            ms = judge.spec(dep)
            if ms is None:
                continue
            name = ms.name.normalized
            names.add(name)
            if name.startswith("__"):
                continue  # virtual packages: the machine's, never locked
            have = conda.get(name)
            if have and any(judge.matches(dep, ms, k) for k in have):
                continue
            found = ", ".join(" ".join(p for p in k[:3] if p) for k in have or [])
            out.append(Hole(platform, shown, r.name, dep.strip(), name, found))
        if "python" not in conda and "python" not in names and subdir == "noarch" and build.startswith(_NOARCH_PY):
            out.append(Hole(platform, f"{shown} (noarch: python)", r.name, "python", "python"))
    if pip and conda and "python" not in conda:  # pip records alone: a virtualenv's (the module doc)
        out += [Hole(platform, f"pip {r.name} {r.version}", r.name, "python", "python") for r in pip]
    return out


def holes(groups: Iterable[tuple[str, Iterable[LockedRecord]]]) -> list[Hole]:
    """Every hole of a lock, given as (platform label, its records) groups."""
    judge = _Judge()
    return [h for platform, records in groups for h in holes_in(platform, records, judge)]


def by_platform(records: Iterable[Any]) -> list[tuple[str, list[Any]]]:
    """A flat list of records (with a ``platform``) grouped by platform, in the lock's order."""
    grouped: dict[str, list[Any]] = {}
    for r in records:
        grouped.setdefault(str(r.platform), []).append(r)
    return list(grouped.items())


def failures(found: Iterable[Hole], *, versions: bool) -> list[Hole]:
    """The holes that make a lock not whole: every absent name, and unmet versions where ``versions``."""
    return [h for h in found if versions or h.absent]


def of_description(desc: Any) -> tuple[list[Hole], list[Hole]]:
    """(the failures, the warnings) of a lock read by envguard.sources: a conda-lock file, or the environment
    of a pixi.lock that was read; ([], []) for every other kind (an explicit file records no dependencies)."""
    if desc.kind not in ("conda-lock", "pixi"):
        return [], []
    several = len(desc.environments) > 1
    found = holes((f"{desc.environment}/{p}" if several else str(p), pk) for p, pk in desc.packages.items())
    failed = failures(found, versions=judges_versions(desc.kind, desc.custom_metadata))
    return failed, [h for h in found if h not in failed]


def of_file(path: str, desc: Any, *, text: str | None = None) -> list[Hole]:
    """The failures of the lock at ``path``, of which ``desc`` is one platform as envguard.sources read it: a
    conda-lock file is read whole (every platform is judged), else (a pixi.lock environment) ``desc``; when
    another platform's entries cannot be read, ``desc`` alone. ``text``: the file's, when already read."""
    from envguard.errors import EnvguardError

    whole = desc
    if desc.kind == "conda-lock":
        from envguard import sources

        try:
            whole = sources.load(path, text=text)
        except EnvguardError:
            pass
    return of_description(whole)[0]


def grouped(found: Iterable[Hole]) -> list[list[Hole]]:
    """Holes of one missing name (and what stands there instead) together, over every platform, in order."""
    out: dict[tuple[str, str], list[Hole]] = {}
    for h in found:
        out.setdefault((h.name, h.found), []).append(h)
    return list(out.values())


def describe(group: Sequence[Hole]) -> str:
    """One group of holes in words: the first record, the dependency it names, the platforms, how many more
    packages need that name."""
    first = group[0]
    where = ", ".join(dict.fromkeys(h.platform for h in group))
    more = len({h.package for h in group}) - 1
    return first.what + f" (on {where}" + (f"; {more} more package{'s' * (more > 1)} need{'s' * (more == 1)} "
                                           f"{first.name}" if more else "") + ")"


def summary(found: Sequence[Hole]) -> str:
    """The holes in one line: the first few missing dependencies named, the rest counted."""
    groups = grouped(found)
    text = "; ".join(describe(g) for g in groups[:SHOWN])
    more = len(groups) - SHOWN
    return text + (f"; and {more} more missing dependenc{'ies' if more > 1 else 'y'}" if more > 0 else "")


def error(file: str, found: Sequence[Hole], *, fix: str = FIX) -> IntegrityError:
    return IntegrityError(f"{file}: the lock is not whole: {summary(found)}", fix=fix, command="envguard lock")


def require_whole(file: str, groups: Iterable[tuple[str, Iterable[LockedRecord]]], *, versions: bool,
                  fix: str = FIX) -> None:
    """Raise IntegrityError (exit 3) naming what is missing when the lock is not whole."""
    found = failures(holes(groups), versions=versions)
    if found:
        raise error(file, found, fix=fix)


__all__ = ["FIX", "OWN_METADATA_PREFIX", "Hole", "LockedRecord", "by_platform", "describe", "error", "failures",
           "grouped", "holes", "holes_in", "judges_versions", "new_judge", "of_description", "of_file",
           "require_whole", "summary"]
