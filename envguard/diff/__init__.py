"""Compare two environment descriptions in terms a reviewer cares about. Pure: no I/O.

:func:`diff_packages` pairs packages by their normalised key (``pytorch`` and
``torch`` are one package) and classifies each difference; a change can carry
several classes at once (a pytorch that moved from 2.1.2 cuda120 to 2.1.2
cpu_generic is *rebuilt* and a *CPU↔CUDA flip*). :func:`spec_vs_lock` checks
an environment file's requested specs against locked packages. Core packages
(python, torch, CUDA, numpy) are listed first.

Rendering to markdown lives here too (pure text); the rich tables are in envguard/diff/render.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Iterable, Literal

from envguard.channels import CONDA_EXTENSIONS
from envguard.model import Package
from envguard.redact import redact
from envguard.sources import RequestedSpec
from envguard.versions import compare_versions, major_minor, pypi_version

# Every class a change can carry, most alarming first (also the order of the summary).
KINDS: tuple[str, ...] = (
    "hash-changed", "pip-over-conda", "cpu-cuda-flip", "cuda-line", "python-minor", "manager", "channel",
    "downgraded", "upgraded", "rebuilt", "removed", "added", "spec-changed",
)
LABELS: dict[str, str] = {
    "hash-changed": "hash changed (same name, version, build)",
    "pip-over-conda": "pip over conda (both managers record it)",
    "cpu-cuda-flip": "CPU↔CUDA build flip",
    "cuda-line": "CUDA line change",
    "python-minor": "Python minor change (ABI break)",
    "manager": "moved between conda and pip",
    "channel": "channel change",
    "downgraded": "downgraded",
    "upgraded": "upgraded",
    "rebuilt": "rebuilt",
    "removed": "removed",
    "added": "added",
    "spec-changed": "requested spec changed",
}
ChangeSeverity = Literal["error", "warning", "info"]
_SEVERITY: dict[str, ChangeSeverity] = {
    "hash-changed": "error", "pip-over-conda": "error", "cpu-cuda-flip": "warning", "cuda-line": "warning", "python-minor": "warning",
    "manager": "warning", "channel": "warning", "downgraded": "warning",
}
# Packages whose version *is* the CUDA line.
CUDA_LINE_PACKAGES = frozenset({"cuda-version", "cudatoolkit", "pytorch-cuda", "cuda-toolkit"})
_CUDA_IN_BUILD = re.compile(r"(?:^|[_.+-])cuda_?(?P<v>\d+(?:\.\d+)?)")
_CU_IN_BUILD = re.compile(r"(?:^|[_.+-])cu(?P<v>\d{2,3})(?=$|[_.-])")
_TOKENS = re.compile(r"[_.+-]")


# --------------------------------------------------------------------------- facts about one package


def core_rank(key: str) -> int:
    """0 python, 1 torch, 2 CUDA, 3 numpy; 99 for everything else."""
    if key == "python":
        return 0
    if key == "torch":
        return 1
    if key in CUDA_LINE_PACKAGES or key.startswith(("cuda-", "nvidia-")) or key in ("cudnn", "nccl", "cutensor"):
        return 2
    if key == "numpy":
        return 3
    return 99


def _cuda_digits(v: str) -> str:
    if "." in v:
        return ".".join(v.split(".")[:2])
    if len(v) == 2:
        return v if v.startswith("1") else f"{v[0]}.{v[1]}"  # cuda12 = 12.x; cuda92 = 9.2
    if len(v) == 3:
        return f"{v[:2]}.{v[2]}"  # cuda118 = 11.8
    return f"{v[:2]}.{v[2:]}"


def cuda_line(pkg: Package) -> str | None:
    """The CUDA line a package is built for or pins: ``12.6``, ``11.8``, ``12`` (major only), or None."""
    if pkg.key in CUDA_LINE_PACKAGES and pkg.version:
        return major_minor(pkg.version) or pkg.version  # cuda-version 12: the major line
    for text in (pkg.build or "", pkg.version.partition("+")[2]):
        if not text:
            continue
        m = _CUDA_IN_BUILD.search(text) or _CU_IN_BUILD.search(text)
        if m:
            return _cuda_digits(m.group("v"))
    return None


def variant(pkg: Package) -> str | None:
    """``cuda`` or ``cpu`` when the build says so (``cuda120_...``, ``cpu_mkl_...``, ``+cu121``, ``gpu_0``)."""
    if pkg.key in CUDA_LINE_PACKAGES:
        return None  # their "variant" is the CUDA line itself
    if cuda_line(pkg) is not None:
        return "cuda"
    for text in (pkg.build or "", pkg.version.partition("+")[2]):
        tokens = _TOKENS.split(text.lower())
        if "cpu" in tokens:
            return "cpu"
        if "gpu" in tokens or "cuda" in tokens:
            return "cuda"
    return None


def _minor(version: str) -> str:
    return major_minor(version) or version


def _lines_compatible(a: str, b: str) -> bool:
    """``12`` (major only, from ``cuda12*``) is compatible with ``12.6``."""
    if "." not in a or "." not in b:
        return a.split(".")[0] == b.split(".")[0]
    return a == b


# --------------------------------------------------------------------------- changes


@dataclass(frozen=True)
class Change:
    key: str
    kinds: tuple[str, ...]
    old: Package | None = None
    new: Package | None = None
    detail: str = ""
    old_spec: str | None = None  # only for spec-vs-spec diffs
    new_spec: str | None = None

    @property
    def name(self) -> str:
        p = self.new or self.old
        return p.name if p is not None else self.key

    @property
    def severity(self) -> ChangeSeverity:
        ranks = {"error": 0, "warning": 1, "info": 2}
        return min((_SEVERITY.get(k, "info") for k in self.kinds), key=ranks.__getitem__, default="info")

    @property
    def core(self) -> bool:
        return core_rank(self.key) < 99

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "name": self.name, "kinds": list(self.kinds), "severity": self.severity,
            "core": self.core, "detail": redact(self.detail),
            "old": _pkg_dict(self.old), "new": _pkg_dict(self.new),
            "old_spec": self.old_spec, "new_spec": self.new_spec,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Change":
        return cls(key=d["key"], kinds=tuple(d["kinds"]), old=_pkg(d.get("old")), new=_pkg(d.get("new")),
                   detail=d.get("detail", ""), old_spec=d.get("old_spec"), new_spec=d.get("new_spec"))


def _pkg_dict(p: Package | None) -> dict[str, Any] | None:
    """A package for the JSON report: without ``depends`` (noise for a reviewer, and most of the bytes)."""
    if p is None:
        return None
    d = p.to_dict()
    del d["depends"]
    return d


def _pkg(d: dict[str, Any] | None) -> Package | None:
    if d is None:
        return None
    return Package(**{**d, "depends": tuple(d.get("depends") or ())})


def _sort_key(c: Change) -> tuple[int, str, str]:
    return (core_rank(c.key), c.key, c.name)


def classify(old: Package, new: Package) -> tuple[tuple[str, ...], str]:
    """The classes of the difference between two packages with the same key, and a short explanation."""
    kinds: list[str] = []
    notes: list[str] = []
    if old.manager != new.manager:
        kinds.append("manager")
        notes.append(f"{old.manager} → {new.manager}")
    cmp = compare_versions(old.version, new.version)
    if cmp is not None and cmp > 0:
        kinds.append("downgraded")
    elif cmp is not None and cmp < 0:
        kinds.append("upgraded")
    elif cmp == 0 and old.build and new.build and old.build != new.build:
        kinds.append("rebuilt")
    elif cmp is None and old.version != new.version and old.version and new.version:
        kinds.append("upgraded")  # incomparable versions: still a change
        notes.append("versions not comparable")
    va, vb = variant(old), variant(new)
    if va and vb and va != vb:
        kinds.append("cpu-cuda-flip")
        la, lb = cuda_line(old), cuda_line(new)
        notes.append(f"{'CUDA ' + la if va == 'cuda' and la else va.upper()} → "
                     f"{'CUDA ' + lb if vb == 'cuda' and lb else vb.upper()}")
    else:
        la, lb = cuda_line(old), cuda_line(new)
        if la and lb and not _lines_compatible(la, lb):
            kinds.append("cuda-line")
            notes.append(f"CUDA {la} → {lb}")
    if old.key == "python" and old.version and new.version and _minor(old.version) != _minor(new.version):
        kinds.append("python-minor")
        notes.append(f"python {_minor(old.version)} → {_minor(new.version)}")
    if old.manager == new.manager == "conda" and old.channel and new.channel and old.channel != new.channel:
        kinds.append("channel")
        notes.append(f"channel {old.channel} → {new.channel}")
    if (old.manager == new.manager and old.version == new.version and (old.build or None) == (new.build or None)
            and _same_artifact(old, new)):
        for h in ("sha256", "md5"):
            ha, hb = getattr(old, h), getattr(new, h)
            if ha and hb:
                if ha.lower() != hb.lower():
                    kinds.append("hash-changed")
                    notes.append(f"{h} differs for the same artifact: republished or tampered")
                break
    return tuple(kinds), "; ".join(notes)


def _artifact(url: str) -> str:
    """``linux-64/x-1-0.conda`` (subdir and file name): one artifact on every mirror and channel."""
    parts = url.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 2)
    if parts[-1].endswith(CONDA_EXTENSIONS):
        return "/".join(parts[-2:])
    return parts[-1]  # a wheel's name carries its platform; its PyPI directory is a content hash


def _same_artifact(a: Package, b: Package) -> bool:
    """Whether two packages name one file, so that their hashes must agree.

    The same name-version-build exists once per subdir (python_abi-3.11-4_cp311
    for linux-64 and for osx-arm64); those differ legitimately.
    """
    if a.url and b.url:
        return _artifact(a.url) == _artifact(b.url)
    return a.platform is None or b.platform is None or a.platform == b.platform


def _pair(olds: list[Package], news: list[Package]) -> tuple[list[tuple[Package, Package]], list[Package], list[Package]]:
    """Match packages with one key: same name and manager first, then across managers."""
    olds, news = list(olds), list(news)
    pairs: list[tuple[Package, Package]] = []
    # Same manager but another name (pytorch-gpu vs pytorch) is a different package: added/removed.
    for match in (lambda a, b: a.name == b.name and a.manager == b.manager,
                  lambda a, b: a.manager != b.manager):
        for a in list(olds):
            b = next((x for x in news if match(a, x)), None)
            if b is not None:
                pairs.append((a, b))
                olds.remove(a)
                news.remove(b)
    return pairs, olds, news


def _group(pkgs: Iterable[Package]) -> dict[str, list[Package]]:
    out: dict[str, list[Package]] = {}
    for p in pkgs:
        out.setdefault(p.key, []).append(p)
    return out


def _both_managers(pkgs: list[Package]) -> bool:
    return {p.manager for p in pkgs} >= {"conda", "pip"}


def _pip_over_conda(key: str, olds: list[Package], news: list[Package]) -> tuple[list[Change], list[Package],
                                                                                   list[Package]]:
    """One side records a package under both managers (pip installed over conda's copy), the other does not:
    that is a change of its own, whatever the versions. Returns it and what is left to pair as usual."""
    if _both_managers(news) and not _both_managers(olds):
        over = [p for p in news if p.manager == "pip"]
        base = next((p for p in olds if p.manager == "conda"), olds[0] if olds else None)
        changes = []
        for p in over:
            kinds, _ = classify(base, p) if base is not None else ((), "")
            extra = tuple(k for k in kinds if k in ("upgraded", "downgraded"))
            conda = next(q for q in news if q.manager == "conda")
            changes.append(Change(key=key, kinds=("pip-over-conda", *extra), old=base, new=p,
                                  detail=f"conda's {conda.name} {conda.version} is still recorded; pip's "
                                         f"{p.version} was installed over it"))
        return changes, olds, [p for p in news if p.manager != "pip"]
    if _both_managers(olds) and not _both_managers(news):
        over = [p for p in olds if p.manager == "pip"]
        base = next((p for p in news if p.manager == "conda"), news[0] if news else None)
        changes = [Change(key=key, kinds=("pip-over-conda",), old=p, new=base,
                          detail=f"A records {p.name} under conda and pip (pip's {p.version}); B only once")
                   for p in over]
        return changes, [p for p in olds if p.manager != "pip"], news
    return [], olds, news


def identical_artifact(a: Package, b: Package) -> bool:
    """The same file on both sides: same artifact URL and the same sha256, whatever versions the files claim."""
    return bool(a.url and b.url and a.sha256 and b.sha256 and a.sha256.lower() == b.sha256.lower()
                and _artifact(a.url) == _artifact(b.url))


def _relabel_note(a: Package, b: Package) -> str:
    placeholder = "0.0.0" in (a.version, b.version)
    why = (" (conda-lock ≥ 3 writes the placeholder 0.0.0 for a pip package locked from a URL)"
           if placeholder else "")
    return (f"{a.name}: A says version {a.version or '?'}, B says {b.version or '?'}, but both name the same "
            f"artifact ({_artifact(a.url or '')}, same sha256): the same package, not a version change{why}")


def diff_packages(old: list[Package], new: list[Package], notes: list[str] | None = None) -> list[Change]:
    """Every difference between two package lists of one platform, core packages first.

    Two records of one artifact (same URL and sha256) are the same package even when the files claim
    different versions; that disagreement goes to ``notes`` when given, never into the changes.
    """
    go, gn = _group(old), _group(new)
    changes: list[Change] = []
    for key in go.keys() | gn.keys():
        over, olds, news = _pip_over_conda(key, go.get(key, []), gn.get(key, []))
        changes += over
        pairs, removed, added = _pair(olds, news)
        for a, b in pairs:
            if identical_artifact(a, b):
                if notes is not None and a.version != b.version:
                    notes.append(_relabel_note(a, b))
                continue
            kinds, detail = classify(a, b)
            if kinds:
                changes.append(Change(key=key, kinds=kinds, old=a, new=b, detail=detail))
        changes += [Change(key=key, kinds=("removed",), old=a) for a in removed]
        changes += [Change(key=key, kinds=("added",), new=b) for b in added]
    return sorted(changes, key=_sort_key)


def _same_request(a: RequestedSpec, b: RequestedSpec) -> bool:
    """Whether two written specs ask for the same thing: ``python=3.11`` (environment.yml) and ``python 3.11.*``
    (a pixi manifest) do; each manager's own parser says so, the text as written when it cannot read it."""
    if a.manager != b.manager or (a.channel or None) != (b.channel or None):
        return False
    if a.spec == b.spec:
        return True
    try:
        if a.manager == "conda":
            from rattler import MatchSpec

            return str(MatchSpec(a.spec, strict=False)) == str(MatchSpec(b.spec, strict=False))
        from packaging.requirements import Requirement

        ra, rb = Requirement(a.spec), Requirement(b.spec)
        return (ra.name.lower(), ra.specifier, ra.extras, ra.url, str(ra.marker)) == (
            rb.name.lower(), rb.specifier, rb.extras, rb.url, str(rb.marker))
    except Exception:  # rattler's and packaging's parse errors: compare the text as written
        return False


def diff_requested(old: list[RequestedSpec], new: list[RequestedSpec], platform: str | None = None) -> list[Change]:
    """Two environment files: which requested specs were added, removed or changed."""
    def by_key(specs: list[RequestedSpec]) -> dict[tuple[str, str], RequestedSpec]:
        return {(s.key, s.manager): s for s in specs if s.applies_to(platform)}

    a, b = by_key(old), by_key(new)
    changes = []
    for k in a.keys() | b.keys():
        sa, sb = a.get(k), b.get(k)
        ta = f"{sa.channel}::{sa.spec}" if sa and sa.channel else (sa.spec if sa else None)
        tb = f"{sb.channel}::{sb.spec}" if sb and sb.channel else (sb.spec if sb else None)
        if ta == tb or (sa is not None and sb is not None and _same_request(sa, sb)):
            continue
        kind = "removed" if sb is None else "added" if sa is None else "spec-changed"
        changes.append(Change(key=k[0], kinds=(kind,), old_spec=ta, new_spec=tb,
                              detail="pip section" if k[1] == "pip" else ""))
    return sorted(changes, key=_sort_key)


# --------------------------------------------------------------------------- spec against lock

SpecStatus = Literal["satisfied", "unsatisfied", "missing"]


@dataclass(frozen=True)
class SpecCheck:
    spec: RequestedSpec
    status: SpecStatus
    locked: Package | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "status": self.status,
                "locked": _pkg_dict(self.locked), "reason": redact(self.reason)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SpecCheck":
        return cls(spec=RequestedSpec.from_dict(d["spec"]), status=d["status"], locked=_pkg(d.get("locked")),
                   reason=d.get("reason", ""))


def _conda_satisfies(spec: RequestedSpec, pkg: Package) -> tuple[bool, str]:
    from rattler import MatchSpec, Version, VersionSpec

    try:
        ms = MatchSpec(spec.spec, strict=False)
    except Exception as e:  # rattler raises its own exception types
        return False, f"cannot read the spec: {e}"
    if ms.version:
        try:
            if not VersionSpec(str(ms.version)).matches(Version(pkg.version)):
                return False, f"version {pkg.version} does not match {ms.version}"
        except Exception as e:
            return False, f"cannot compare version {pkg.version!r}: {e}"
    if ms.build and pkg.build is not None and not fnmatchcase(pkg.build, str(ms.build)):
        return False, f"build {pkg.build} does not match {ms.build}"
    if spec.channel and pkg.channel and spec.channel.rstrip("/").rsplit("/", 1)[-1] != pkg.channel.rsplit("/", 1)[-1]:
        return False, f"from channel {pkg.channel}, asked for {spec.channel}"
    return True, ""


def _pip_satisfies(spec: RequestedSpec, pkg: Package) -> tuple[bool, str]:
    from packaging.requirements import InvalidRequirement, Requirement
    try:
        req = Requirement(spec.spec)
    except InvalidRequirement:
        return True, "direct reference: version not checked"
    if not req.specifier:
        return True, ""
    version = pypi_version(pkg.version)
    if version is None:
        return False, f"version {pkg.version!r} is not PEP 440"
    ok = req.specifier.contains(version, prereleases=True)
    return (True, "") if ok else (False, f"version {pkg.version} does not match {req.specifier}")


def check_spec(spec: RequestedSpec, pkg: Package) -> tuple[bool, str]:
    ok, reason = (_conda_satisfies if spec.manager == "conda" else _pip_satisfies)(spec, pkg)
    if ok and spec.manager != pkg.manager:
        reason = f"requested from {spec.manager}, locked from {pkg.manager}"
    return ok, reason


@dataclass
class SpecReport:
    platform: str | None
    checks: list[SpecCheck] = field(default_factory=list)
    unrequested: list[Package] = field(default_factory=list)
    environment: str | None = None  # pixi: the environment compared, when a diff compares several

    @property
    def where(self) -> str:
        parts = [f"on {self.platform}" if self.platform else "", f"(env {self.environment})" if self.environment else ""]
        return " ".join(p for p in parts if p)

    @property
    def failing(self) -> list[SpecCheck]:
        return [c for c in self.checks if c.status != "satisfied"]

    def to_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "environment": self.environment,
                "checks": [c.to_dict() for c in self.checks], "unrequested": [_pkg_dict(p) for p in self.unrequested]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SpecReport":
        return cls(platform=d.get("platform"), checks=[SpecCheck.from_dict(c) for c in d.get("checks", [])],
                   unrequested=[p for p in (_pkg(x) for x in d.get("unrequested", [])) if p is not None],
                   environment=d.get("environment"))


# PEP 508 marker values of each conda platform (python_version comes from the locked python).
_MARKER_ENV: dict[str, dict[str, str]] = {
    "linux": {"sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"},
    "osx": {"sys_platform": "darwin", "platform_system": "Darwin", "os_name": "posix"},
    "win": {"sys_platform": "win32", "platform_system": "Windows", "os_name": "nt"},
}
_MACHINE = {"64": "x86_64", "arm64": "arm64", "aarch64": "aarch64", "ppc64le": "ppc64le"}


def _marker_applies(spec: RequestedSpec, platform: str | None, python: str | None) -> bool:
    """False when a pip spec's ``; sys_platform == ...`` marker excludes the platform being compared."""
    if spec.manager != "pip" or ";" not in spec.spec or platform is None:
        return True
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        marker = Requirement(spec.spec).marker
    except InvalidRequirement:
        return True
    if marker is None:
        return True
    os_part, _, arch = platform.partition("-")
    env = dict(_MARKER_ENV.get(os_part, {}))
    machine = _MACHINE.get(arch)
    if machine:
        env["platform_machine"] = "AMD64" if os_part == "win" and arch == "64" else machine
    if python:
        env["python_version"] = _minor(python)
        env["python_full_version"] = python
    try:
        return bool(marker.evaluate(env))
    except Exception:
        return True


def _import_winner(cands: list[Package]) -> Package | None:
    """The copy `import` loads when a package is locked from conda and from pip: pip's (it installs last)."""
    managers = {p.manager for p in cands}
    if managers != {"conda", "pip"}:
        return None
    return next(p for p in cands if p.manager == "pip")


def spec_vs_lock(requested: list[RequestedSpec], packages: list[Package], platform: str | None = None) -> SpecReport:
    """Whether each requested spec that applies to ``platform`` is satisfied, and what nobody asked for."""
    by_key = _group(packages)
    python = next((p.version for p in by_key.get("python", []) if p.manager == "conda"), None)
    checks: list[SpecCheck] = []
    asked: set[str] = set()
    for spec in requested:
        if not spec.applies_to(platform) or not _marker_applies(spec, platform, python):
            continue
        asked.add(spec.key)
        cands = by_key.get(spec.key, [])
        cands = sorted(cands, key=lambda p: (p.name != spec.name, p.manager != spec.manager))
        if not cands:
            checks.append(SpecCheck(spec, "missing", None, "not in the lock"))
            continue
        winner = _import_winner(cands)
        if winner is not None:
            # torch from conda and from pip (envguard.mixing): the request is met only by the copy `import` loads
            other = next(p for p in cands if p is not winner)
            ok = winner.manager == spec.manager and check_spec(spec, winner)[0]
            reason = (f"{other.manager} {other.name} {other.version} is locked too, but {winner.manager} "
                      f"{winner.name} {winner.version} is the copy `import` loads (pip installs over conda's files)")
            checks.append(SpecCheck(spec, "satisfied" if ok else "unsatisfied", winner, reason))
            continue
        ok, reason = check_spec(spec, cands[0])
        checks.append(SpecCheck(spec, "satisfied" if ok else "unsatisfied", cands[0], reason))
    checks.sort(key=lambda c: ({"missing": 0, "unsatisfied": 1, "satisfied": 2}[c.status], core_rank(c.spec.key),
                               c.spec.key))
    unrequested = sorted((p for p in packages if p.key not in asked), key=lambda p: (core_rank(p.key), p.key))
    return SpecReport(platform=platform, checks=checks, unrequested=unrequested)


# --------------------------------------------------------------------------- a whole comparison


@dataclass
class Side:
    label: str  # "A" or "B"
    kind: str
    path: str  # redacted
    platform: str | None = None
    environment: str | None = None

    def describe(self) -> str:
        extra = [x for x in (self.environment and f"env {self.environment}", self.platform) if x]
        return f"{self.path} ({self.kind}{', ' + ', '.join(extra) if extra else ''})"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "path": redact(self.path), "platform": self.platform,
                "environment": self.environment}


@dataclass
class PlatformDiff:
    a_platform: str | None
    b_platform: str | None
    changes: list[Change] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.a_platform == self.b_platform:
            return self.a_platform or "any platform"
        return f"{self.a_platform or 'any'} ↔ {self.b_platform or 'any'}"

    def to_dict(self) -> dict[str, Any]:
        return {"a_platform": self.a_platform, "b_platform": self.b_platform,
                "changes": [c.to_dict() for c in self.changes]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PlatformDiff":
        return cls(d.get("a_platform"), d.get("b_platform"), [Change.from_dict(c) for c in d.get("changes", [])])


SCHEMA = "envguard.diff/1"


@dataclass
class DiffResult:
    a: Side
    b: Side
    platforms: list[PlatformDiff] = field(default_factory=list)
    spec_reports: list[SpecReport] = field(default_factory=list)
    spec_side: str | None = None  # "A" or "B": the environment file checked against the other side
    only_in_a: list[str] = field(default_factory=list)  # platforms (with --all-platforms)
    only_in_b: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return (not any(pd.changes for pd in self.platforms) and not any(r.failing for r in self.spec_reports)
                and not self.only_in_a and not self.only_in_b)

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in KINDS}
        for pd in self.platforms:
            for c in pd.changes:
                for k in c.kinds:
                    out[k] += 1
        return {k: v for k, v in out.items() if v}

    def primary_counts(self) -> dict[str, int]:
        """Each change counted once, under its most alarming class (KINDS order): these add up to the total."""
        out = {k: 0 for k in KINDS}
        for pd in self.platforms:
            for c in pd.changes:
                if c.kinds:
                    out[min(c.kinds, key=KINDS.index)] += 1
        return {k: v for k, v in out.items() if v}

    def summary(self) -> str:
        parts: list[str] = []
        counts = self.primary_counts()
        n = sum(len(pd.changes) for pd in self.platforms)
        if n:
            detail = ", ".join(f"{v} {LABELS[k]}" for k, v in counts.items())
            parts.append(f"{n} change{'s' * (n != 1)} ({detail})")
        for r in self.spec_reports:
            bad = len(r.failing)
            total = len(r.checks)
            where = f" {r.where}" if r.where else ""
            parts.append(f"{total - bad} of {total} requested specs satisfied{where}"
                         + (f", {bad} not" if bad else "") + f"; {len(r.unrequested)} locked packages not requested")
        if self.only_in_a:
            parts.append(f"platforms only in A: {', '.join(self.only_in_a)}")
        if self.only_in_b:
            parts.append(f"platforms only in B: {', '.join(self.only_in_b)}")
        if not parts:
            return "no differences"
        return ("no package differences; " if not n and not self.spec_reports else "") + "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "equal": self.equal, "summary": redact(self.summary()), "counts": self.counts(),
            "a": self.a.to_dict(), "b": self.b.to_dict(),
            "platforms": [pd.to_dict() for pd in self.platforms],
            "spec_side": self.spec_side, "spec_reports": [r.to_dict() for r in self.spec_reports],
            "only_in_a": self.only_in_a, "only_in_b": self.only_in_b, "notes": [redact(n) for n in self.notes],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DiffResult":
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not an {SCHEMA} document")
        side = lambda s: Side(s["label"], s["kind"], s["path"], s.get("platform"), s.get("environment"))  # noqa: E731
        return cls(a=side(d["a"]), b=side(d["b"]), platforms=[PlatformDiff.from_dict(p) for p in d["platforms"]],
                   spec_reports=[SpecReport.from_dict(r) for r in d.get("spec_reports", [])],
                   spec_side=d.get("spec_side"), only_in_a=list(d.get("only_in_a", [])),
                   only_in_b=list(d.get("only_in_b", [])), notes=list(d.get("notes", [])))


# --------------------------------------------------------------------------- text for humans


def describe(p: Package | None) -> str:
    """``2.1.2 cuda120_py311h2667f23_304 conda-forge`` / ``2.1.0 (pip)``."""
    if p is None:
        return ""
    parts = [p.version or "?"]
    if p.build:
        parts.append(p.build)
    parts.append(f"({p.channel})" if p.manager == "conda" and p.channel else f"({p.manager})")
    return redact(" ".join(parts))


_ICON = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}


def _md(text: str) -> str:
    return redact(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(result: DiffResult, *, max_rows: int = 200) -> str:
    """A pull-request comment: summary, one table per platform pair, spec checks."""
    lines = ["### envguard diff", "",
             f"**A:** `{_md(result.a.describe())}`  ", f"**B:** `{_md(result.b.describe())}`", "",
             f"**{_md(result.summary())}**", ""]
    for pd in result.platforms:
        if not pd.changes:
            continue
        lines += [f"#### {_md(pd.label)}", "", "| | package | change | A | B | note |", "|---|---|---|---|---|---|"]
        for c in pd.changes[:max_rows]:
            a = describe(c.old) if c.old or c.old_spec is None else c.old_spec
            b = describe(c.new) if c.new or c.new_spec is None else c.new_spec
            name = f"**{c.name}**" if c.core else c.name
            lines.append(f"| {_ICON[c.severity]} | {_md(name)} | {_md(', '.join(LABELS[k] for k in c.kinds))} "
                         f"| {_md(a)} | {_md(b)} | {_md(c.detail)} |")
        if len(pd.changes) > max_rows:
            lines.append(f"\n… and {len(pd.changes) - max_rows} more (see `--format json`)")
        lines.append("")
    for r in result.spec_reports:
        title = f"#### Requested specs ({result.spec_side}) against the lock" + (f" {r.where}" if r.where else "")
        lines += [title, "", "| | spec | locked | note |", "|---|---|---|---|"]
        for c in r.checks:
            icon = "✅" if c.status == "satisfied" else "❌"
            lines.append(f"| {icon} | `{_md(c.spec.spec)}` | {_md(describe(c.locked) or c.status)} | {_md(c.reason)} |")
        if r.unrequested:
            names = ", ".join(p.name for p in r.unrequested)
            lines += ["", f"<details><summary>{len(r.unrequested)} locked packages nobody asked for directly"
                          f"</summary>\n\n{_md(names)}\n\n</details>"]
        lines.append("")
    for n in result.notes:
        lines.append(f"> {_md(n)}  ")
    return "\n".join(lines).rstrip() + "\n"


# The command's entry (loading two sides and comparing them) lives in envguard.diff.sides, which builds on
# this engine; it is part of the wing's public API, imported on first use.
def __getattr__(name: str) -> Any:
    if name in ("compare", "SideArgs"):
        import importlib

        return getattr(importlib.import_module("envguard.diff.sides"), name)
    raise AttributeError(f"module 'envguard.diff' has no attribute {name!r}")
