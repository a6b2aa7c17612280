"""``envguard lint``'s output: the findings as a table (text), JSON or markdown; unreadable files on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from envguard import render


def show(result: Any, fmt: str) -> None:
    from rich.text import Text

    from envguard.redact import redact
    from envguard.report import findings_to_json, findings_to_markdown

    r = result  # envguard.lint.LintResult
    for message in r.unreadable:
        render.print_wrapped(Text.assemble(("error:", "red"), f" {redact(str(message))}"), console=render.err)
    title = f"envguard lint: {', '.join(r.files)}"
    if fmt == "json":
        from envguard.jsonout import severity_counts

        doc = {"schema": "envguard.lint/1", "exit_code": r.exit_code,
               "counts": {"files": len(r.files), "unreadable": len(r.unreadable), **severity_counts(r.findings)},
               "files": [redact(str(f)) for f in r.files], "findings": findings_to_json(r.findings),
               "unreadable": [redact(str(m)) for m in r.unreadable], "summary": r.summary,
               "codes": r.counts}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(findings_to_markdown(title, r.findings, summary=r.summary))
    else:
        render.print_findings(r.findings, title=title, summary=r.summary)
