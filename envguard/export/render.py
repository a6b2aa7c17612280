"""``envguard export`` on a terminal: what was written, then the findings table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard import render
from envguard.render import print_findings, print_plain

if TYPE_CHECKING:
    from envguard.export import ExportResult


def print_export(result: ExportResult) -> None:
    from envguard.redact import redact

    r = result
    for w in r.files:
        verb = "wrote" if w.changed else "unchanged:"
        print_plain(render.out, f"{verb} {redact(str(w.path))} ({w.detail})")
    if r.torch:
        print_plain(render.out, r.torch)
    print_findings(r.findings, title=f"envguard export {r.shown}")


def export_json(result: ExportResult) -> dict[str, Any]:
    """``envguard export --json``: the ``envguard.export/1`` document (docs/json.md)."""
    from envguard.jsonout import severity_counts
    from envguard.redact import redact
    from envguard.report import findings_to_json

    r = result
    files = r.files
    return {"schema": "envguard.export/1", "exit_code": r.exit_code,
            "counts": {"files": len(files), "written": sum(1 for w in files if w.changed),
                       **severity_counts(r.findings)},
            "prefix": r.shown, "platform": r.platform, "kind": r.kind,
            "format": r.format, "requested_from": r.requested_from, "torch": r.torch,
            "files": [{"path": redact(str(w.path)), "kind": w.kind, "changed": w.changed, "detail": w.detail}
                      for w in files],
            "findings": findings_to_json(r.findings)}
