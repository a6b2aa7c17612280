"""``envguard smoke``: the title line and the table of the probe's checks."""

from __future__ import annotations

from envguard import render

def smoke_title(result: "object") -> str:
    from envguard.redact import redact

    r = result  # envguard.smoke.SmokeResult
    tv = r.probe.get("torch") or {}
    build = f"CUDA {tv['cuda']}" if tv.get("cuda") else "CPU build"
    what = f"torch {tv['version']} ({build})" if tv.get("version") else "torch not imported"
    state = "timed out" if r.timed_out else ("passed" if r.exit_code == 0 else "failed")
    return f"envguard smoke {redact(r.python)} · {what} · {state} in {r.duration:.1f} s"


def print_smoke_checks(result: "object") -> None:
    from rich.table import Table

    checks = result.probe.get("checks") or []
    if not checks:
        return
    style = {"pass": "green", "fail": "red", "not-exercised": "yellow", "skip": "dim"}
    table = Table(show_lines=False, expand=False)
    for col in ("check", "status", "seconds"):
        table.add_column(col)
    for c in checks:
        st = str(c.get("status"))
        secs = c.get("seconds")
        table.add_row(str(c.get("name")), f"[{style.get(st, 'white')}]{st}[/]",
                      f"{secs:.2f}" if isinstance(secs, (int, float)) else "")
    render.out.print(table)


def smoke_checks_markdown(result: "object") -> str:
    checks = result.probe.get("checks") or []
    if not checks:
        return ""
    lines = ["", "| check | status | seconds |", "|---|---|---|"]
    for c in checks:
        secs = c.get("seconds")
        lines.append(f"| {c.get('name')} | {c.get('status')} | {f'{secs:.2f}' if isinstance(secs, (int, float)) else ''} |")
    return "\n".join(lines) + "\n"
