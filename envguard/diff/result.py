"""A whole comparison: the two sides, the changes per platform pair, the spec reports, its summary line
and its JSON document (``envguard.diff/1``), read back by fleet and the tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envguard.diff.changes import KINDS, LABELS, Change
from envguard.diff.speccheck import SpecReport
from envguard.redact import redact


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
    environment: str | None = None  # pixi: the environment, when several of both sides are compared

    @property
    def label(self) -> str:
        env = f"{self.environment}: " if self.environment else ""
        if self.a_platform == self.b_platform:
            return env + (self.a_platform or "any platform")
        return f"{env}{self.a_platform or 'any'} ↔ {self.b_platform or 'any'}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"a_platform": self.a_platform, "b_platform": self.b_platform,
                               "changes": [c.to_dict() for c in self.changes]}
        if self.environment is not None:
            out["environment"] = self.environment
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlatformDiff:
        return cls(d.get("a_platform"), d.get("b_platform"), [Change.from_dict(c) for c in d.get("changes", [])],
                   d.get("environment"))


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
    spec_changes: list[str] = field(default_factory=list)  # channels, platforms, name of two environment files
    exit_code: int | None = None  # what the run exits with (--exit-zero); None: 1 when the sides differ, else 0
    variants: dict[str, Any] | None = None  # two variants' locks: what is forced (envguard.diff.variantdiff)

    @property
    def equal(self) -> bool:
        return (not any(pd.changes for pd in self.platforms) and not any(r.failing for r in self.spec_reports)
                and not self.only_in_a and not self.only_in_b and not self.spec_changes)

    def other_words(self) -> str:
        """What the side a spec is checked against is, in a title: a live prefix is not "the lock"."""
        other = self.b if self.spec_side == "A" else self.a
        return "the environment" if other.kind == "prefix" else "the lock"

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
        if self.spec_changes:
            nv = sum(1 for c in self.spec_changes if c.startswith("variable "))  # envguard.variables.changes
            k = len(self.spec_changes) - nv
            if k:
                parts.append(f"{k} channel/platform/name change{'s' * (k != 1)}")
            if nv:
                parts.append(f"{nv} variable change{'s' * (nv != 1)}")
        if self.only_in_a:
            parts.append(f"platforms only in A: {', '.join(self.only_in_a)}")
        if self.only_in_b:
            parts.append(f"platforms only in B: {', '.join(self.only_in_b)}")
        if not parts:
            return "no differences"
        text = ("no package differences; " if not n and not self.spec_reports else "") + "; ".join(parts)
        return f"{self.variants['summary']}; {text}" if self.variants and n else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "equal": self.equal, "summary": redact(self.summary()), "counts": self.counts(),
            "exit_code": self.exit_code if self.exit_code is not None else int(not self.equal),
            "a": self.a.to_dict(), "b": self.b.to_dict(),
            "platforms": [pd.to_dict() for pd in self.platforms],
            "spec_side": self.spec_side, "spec_reports": [r.to_dict() for r in self.spec_reports],
            "only_in_a": self.only_in_a, "only_in_b": self.only_in_b, "notes": [redact(n) for n in self.notes],
            "spec_changes": [redact(c) for c in self.spec_changes],
            "variants": self.variants,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DiffResult:
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not an {SCHEMA} document")
        side = lambda s: Side(s["label"], s["kind"], s["path"], s.get("platform"), s.get("environment"))  # noqa: E731
        return cls(a=side(d["a"]), b=side(d["b"]), platforms=[PlatformDiff.from_dict(p) for p in d["platforms"]],
                   spec_reports=[SpecReport.from_dict(r) for r in d.get("spec_reports", [])],
                   spec_side=d.get("spec_side"), only_in_a=list(d.get("only_in_a", [])),
                   only_in_b=list(d.get("only_in_b", [])), notes=list(d.get("notes", [])),
                   spec_changes=list(d.get("spec_changes", [])),
                   variants=d.get("variants") if isinstance(d.get("variants"), dict) else None)
