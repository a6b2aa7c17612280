"""``envguard check``: the report's title line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envguard.check import CheckReport


def check_title(report: CheckReport) -> str:
    from envguard.redact import redact

    r = report
    parts = [f"envguard check {redact(str(r.prefix))}"] + ([r.target_why] if getattr(r, "target_why", "") else [])
    parts += [f"{r.kind}", f"python {r.python_version or '?'}", r.platform]
    if r.torch is not None and r.torch.source != "none":
        build = f"CUDA {r.torch.cuda}" if r.torch.cuda else ("CPU" if r.torch.cpu else "build unknown")
        parts.append(f"torch {r.torch.version} ({build})")
    variant = getattr(r, "variant", None)
    if variant:
        parts.append(f"variant {variant['name']}")
    lock_why = f" ({r.lock_why})" if getattr(r, "lock_why", "") else ""
    parts.append(f"lock {redact(r.lock_file)}{lock_why}" if r.lock_file else f"no lock{redact(lock_why)}")
    return " · ".join(parts)


def show(report: Any, fmt: str) -> None:
    """``envguard check``'s output: the title and the findings (text), the report as JSON, or markdown."""
    import json
    import sys

    from envguard import render
    from envguard.report import findings_to_markdown

    r = report
    if fmt == "json":
        sys.stdout.write(json.dumps(r.to_json(), indent=2) + "\n")
    elif fmt == "markdown":
        from envguard.smoke import proved_line

        sys.stdout.write(findings_to_markdown(check_title(r), r.findings) + f"\n{proved_line(r.smoke)}\n")
    else:
        from envguard.smoke import proved_line

        render.print_findings(r.findings, title=check_title(r), notes=[proved_line(r.smoke)])
