"""``envguard fleet`` on a terminal: one table of groups, then what each deviating group differs in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard import render

if TYPE_CHECKING:
    from envguard.fleet import FleetResult


def print_fleet(result: FleetResult, max_changes: int = 30) -> None:
    from rich.table import Table
    from rich.text import Text

    from envguard.diff import LABELS, describe
    from envguard.fleet import count_text, describe_fact, distributed_line
    from envguard.redact import redact

    r = result
    ref = f"reference: {redact(r.lockfile)}" if r.lockfile else (
        "reference: the majority of each platform" if len(r.platforms) > 1 else "reference: the majority")
    from envguard.report import plural

    render.out.print(Text(f"envguard fleet · {plural(r.nodes, 'node')} · {ref}", style="bold"))
    table = Table(expand=False)
    for col in ("", "nodes", "n", "torch", "driver · GPUs", "smoke", "findings"):
        table.add_column(col, overflow="fold")
    for i, g in enumerate(r.groups, 1):
        f = g.facts
        mark = ("ref", "green" if not any(g.exit_codes) else "yellow") if g.reference else (f"#{i}", "bold red")
        table.add_row(Text(mark[0], style=mark[1]), Text(redact(g.ranges)), str(len(g.nodes)),
                      Text(describe_fact("torch", f["torch"])),
                      Text(f"{describe_fact('driver', f['driver'])} · {describe_fact('gpus', f['gpus'])}"),
                      Text(describe_fact("smoke", f["smoke"])), Text(count_text(g)))
    render.out.print(table)
    style = {"error": "bold red", "warning": "yellow", "info": ""}
    for i, g in enumerate(r.groups, 1):
        shown = [x for x in g.findings if x.get("severity") in ("error", "warning")]
        if g.reference and not shown:
            continue
        title = "reference" if g.reference else f"#{i}"
        render.out.print(Text(f"\n{title}: {len(g.nodes)} node{'s' * (len(g.nodes) != 1)} {redact(g.ranges)}",
                              style="bold"))
        if g.fact_changes or g.changes:
            t = Table(expand=False)
            for col in ("what", "change", "reference", "this group"):
                t.add_column(col, overflow="fold")
            for k, a, b in g.fact_changes:
                t.add_row(Text(k, style="bold"), Text("differs", style="yellow"), Text(redact(a)), Text(redact(b)))
            for c in g.changes[:max_changes]:
                t.add_row(Text(c.name, style="bold" if c.core else ""),
                          Text(", ".join(LABELS[k] for k in c.kinds), style=style[c.severity]),
                          Text(describe(c.old)), Text(describe(c.new)))
            render.out.print(t)
            if len(g.changes) > max_changes:
                render.out.print(Text(f"… and {len(g.changes) - max_changes} more package changes "
                                      "(--format json lists them all)", style="dim"))
        for x in shown:
            render.out.print(Text(f"  {x.get('code')} {x.get('severity')}: {redact(str(x.get('message')))}",
                                  style=style.get(str(x.get("severity")), "")))
    if r.distributed:
        render.out.print(Text(f"\ndistributed: {redact(distributed_line(r.distributed))}"))
    for path, why in r.unreadable:
        render.err.print(Text(f"error: {redact(path)}: {redact(why)} (skipped)", style="red"))
    render.out.print(Text(redact(r.summary()), style="green" if r.exit_code == 0 else "bold"))


def show(result: Any, fmt: str) -> None:
    """``envguard fleet``'s output: text (the tables above), JSON or markdown on stdout; reports that could not
    be read are named on stderr in every format."""
    import json
    import sys

    from rich.text import Text

    from envguard.redact import redact

    r = result
    if fmt == "json":
        sys.stdout.write(redact(json.dumps(r.to_dict(), indent=2, ensure_ascii=False)) + "\n")
    elif fmt == "markdown":
        from envguard.fleet import to_markdown

        sys.stdout.write(to_markdown(r))
    else:
        print_fleet(r)
        return  # the text names unreadable reports itself
    for path, why in r.unreadable:
        render.err.print(Text(f"error: {redact(path)}: {redact(why)} (skipped)", style="red"))
