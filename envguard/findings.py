"""Findings: what lint, check and smoke report.

A finding has a stable ``code`` (documented, never reused), a severity, a
message and a fix. Reports are pure data; rendering lives in ``report.py`` and
the cli package.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 0, "warning": 1, "info": 2}[self.value]


@dataclass(frozen=True)
class Finding:
    code: str  # e.g. "EG101"; stable
    severity: Severity
    message: str
    fix: str = ""
    file: str | None = None
    line: int | None = None
    package: str | None = None

    def __post_init__(self) -> None:
        from envguard.redact import shorten_words

        for name in ("message", "fix", "file", "package"):  # quoting hostile input stays one line
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, shorten_words(value))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        return d

    @property
    def location(self) -> str:
        if not self.file:
            return ""
        return f"{self.file}:{self.line}" if self.line else self.file


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (f.severity.rank, f.file or "", f.line or 0, f.code))


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity is Severity.ERROR for f in findings)
