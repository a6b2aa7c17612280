"""``envguard export`` on a terminal: what was written, then the findings table."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
