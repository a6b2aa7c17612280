"""The change classes (KINDS, each with a label and a severity), one :class:`Change` between two packages
of one key, and :func:`classify`, which names every class a difference carries.

Shared with the other diff modules: :func:`pkg_dict` and :func:`package_from_dict` (a package in the
JSON report and back), :func:`sort_key` (the order changes are listed in, core packages first),
:func:`artifact_key` and :func:`identical_artifact` (the same file on two mirrors or channels)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from envguard.channels import CONDA_EXTENSIONS
from envguard.diff.facts import core_rank, cuda_line, lines_compatible, minor_line, variant
from envguard.model import Package
from envguard.redact import redact
from envguard.versions import compare_versions

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
    "hash-changed": "error", "pip-over-conda": "error",
    "cpu-cuda-flip": "warning", "cuda-line": "warning", "python-minor": "warning", "manager": "warning",
    "channel": "warning", "downgraded": "warning",
}


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
            "old": pkg_dict(self.old), "new": pkg_dict(self.new),
            "old_spec": self.old_spec, "new_spec": self.new_spec,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Change:
        return cls(key=d["key"], kinds=tuple(d["kinds"]), old=package_from_dict(d.get("old")),
                   new=package_from_dict(d.get("new")), detail=d.get("detail", ""),
                   old_spec=d.get("old_spec"), new_spec=d.get("new_spec"))


def pkg_dict(p: Package | None) -> dict[str, Any] | None:
    """A package for the JSON report: without ``depends`` (noise for a reviewer, and most of the bytes)."""
    if p is None:
        return None
    d = p.to_dict()
    del d["depends"]
    return d


def package_from_dict(d: dict[str, Any] | None) -> Package | None:
    if d is None:
        return None
    return Package(**{**d, "depends": tuple(d.get("depends") or ())})


def sort_key(c: Change) -> tuple[int, str, str]:
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
        if la and lb and not lines_compatible(la, lb):
            kinds.append("cuda-line")
            notes.append(f"CUDA {la} → {lb}")
    if old.key == "python" and old.version and new.version and minor_line(old.version) != minor_line(new.version):
        kinds.append("python-minor")
        notes.append(f"python {minor_line(old.version)} → {minor_line(new.version)}")
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


def artifact_key(url: str) -> str:
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
        return artifact_key(a.url) == artifact_key(b.url)
    return a.platform is None or b.platform is None or a.platform == b.platform


def identical_artifact(a: Package, b: Package) -> bool:
    """The same file on both sides: same artifact URL and the same sha256, whatever versions the files claim."""
    return bool(a.url and b.url and a.sha256 and b.sha256 and a.sha256.lower() == b.sha256.lower()
                and artifact_key(a.url) == artifact_key(b.url))
