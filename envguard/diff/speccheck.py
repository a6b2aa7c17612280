"""An environment file's requested specs against locked (or installed) packages: which are satisfied,
which not and why, and what nobody asked for (:func:`spec_vs_lock`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

from envguard.diff.changes import package_from_dict, pkg_dict
from envguard.diff.facts import core_rank, minor_line
from envguard.diff.packages import group
from envguard.model import Package
from envguard.redact import redact
from envguard.sources import RequestedSpec
from envguard.versions import pypi_version

SpecStatus = Literal["satisfied", "unsatisfied", "missing"]


@dataclass(frozen=True)
class SpecCheck:
    spec: RequestedSpec
    status: SpecStatus
    locked: Package | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"spec": self.spec.to_dict(), "status": self.status,
                "locked": pkg_dict(self.locked), "reason": redact(self.reason)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpecCheck:
        return cls(spec=RequestedSpec.from_dict(d["spec"]), status=d["status"],
                   locked=package_from_dict(d.get("locked")), reason=d.get("reason", ""))


def _conda_satisfies(spec: RequestedSpec, pkg: Package) -> tuple[bool, str]:
    from rattler import MatchSpec, Version, VersionSpec

    try:
        ms = MatchSpec(spec.spec, strict=False)
    except Exception as e:  # noqa: BLE001 - rattler raises its own exception types
        return False, f"cannot read the spec: {e}"
    if ms.version:
        try:
            if not VersionSpec(str(ms.version)).matches(Version(pkg.version)):
                return False, f"version {pkg.version} does not match {ms.version}"
        except Exception as e:  # noqa: BLE001 - rattler's own error types
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
        parts = [f"on {self.platform}" if self.platform else "",
                 f"(env {self.environment})" if self.environment else ""]
        return " ".join(p for p in parts if p)

    @property
    def failing(self) -> list[SpecCheck]:
        return [c for c in self.checks if c.status != "satisfied"]

    def to_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "environment": self.environment,
                "checks": [c.to_dict() for c in self.checks], "unrequested": [pkg_dict(p) for p in self.unrequested]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpecReport:
        return cls(platform=d.get("platform"), checks=[SpecCheck.from_dict(c) for c in d.get("checks", [])],
                   unrequested=[p for p in (package_from_dict(x) for x in d.get("unrequested", [])) if p is not None],
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
        env["python_version"] = minor_line(python)
        env["python_full_version"] = python
    try:
        return bool(marker.evaluate(env))
    except Exception:  # noqa: BLE001 - packaging's marker errors: an unreadable marker is kept
        return True


def _import_winner(cands: list[Package]) -> Package | None:
    """The copy `import` loads when a package is locked from conda and from pip: pip's (it installs last)."""
    managers = {p.manager for p in cands}
    if managers != {"conda", "pip"}:
        return None
    return next(p for p in cands if p.manager == "pip")


def spec_vs_lock(requested: list[RequestedSpec], packages: list[Package], platform: str | None = None) -> SpecReport:
    """Whether each requested spec that applies to ``platform`` is satisfied, and what nobody asked for."""
    by_key = group(packages)
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
