"""Render findings as JSON-ready data and markdown. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from envguard.findings import Finding, Severity, sort_findings
from envguard.redact import redact


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 node``, ``2 nodes``; ``many`` for words whose plural is not word + s (``1 deviates``/``2 deviate``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def summary_line(findings: Iterable[Finding]) -> str:
    fs = list(findings)
    n_err = sum(f.severity is Severity.ERROR for f in fs)
    n_warn = sum(f.severity is Severity.WARNING for f in fs)
    n_info = len(fs) - n_err - n_warn
    if not fs:
        return "no findings"
    parts = [f"{n_err} error{'s' * (n_err != 1)}", f"{n_warn} warning{'s' * (n_warn != 1)}"]
    if n_info:
        parts.append(f"{n_info} info")
    return ", ".join(parts)


def findings_to_json(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    return [{k: (redact(v) if isinstance(v, str) else v) for k, v in f.to_dict().items()}
            for f in sort_findings(list(findings))]


def _md_cell(text: str) -> str:
    return redact(text).replace("|", "\\|").replace("\n", " ")


def findings_to_markdown(title: str, findings: Iterable[Finding], summary: str | None = None) -> str:
    fs = sort_findings(list(findings))
    icon = {Severity.ERROR: "❌", Severity.WARNING: "⚠️", Severity.INFO: "ℹ️"}
    lines = [f"### {title}", "", f"**{summary if summary is not None else summary_line(fs)}**", ""]
    if fs:
        lines += ["| | code | where | message | fix |", "|---|---|---|---|---|"]
        for f in fs:
            where = f.location or (f.package or "")
            lines.append(
                f"| {icon[f.severity]} | `{f.code}` | {_md_cell(where)} | {_md_cell(f.message)} | {_md_cell(f.fix)} |"
            )
    return "\n".join(lines) + "\n"
