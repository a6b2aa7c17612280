"""``envguard diff`` as tables: one per platform, then the requested specs against the lock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard import render

if TYPE_CHECKING:
    from envguard.diff import DiffResult


def print_diff(result: DiffResult, max_unrequested: int = 25) -> None:
    from rich.table import Table
    from rich.text import Text

    from envguard.diff import LABELS, describe
    from envguard.redact import redact as _redact
    from envguard.redact import shorten_words

    def redact(text: str) -> str:  # masked, and what hostile input makes long cut short
        return shorten_words(_redact(text))

    r = result
    render.out.print(Text(f"A: {redact(r.a.describe())}\nB: {redact(r.b.describe())}"))
    style = {"error": "bold red", "warning": "yellow", "info": ""}
    for pd in r.platforms:
        if not pd.changes:
            continue
        table = Table(title=Text(redact(pd.label)), expand=False)
        for col in ("package", "change", "A", "B", "note"):
            table.add_column(col, overflow="fold")
        for c in pd.changes:
            a = describe(c.old) if c.old or c.old_spec is None else redact(c.old_spec)
            b = describe(c.new) if c.new or c.new_spec is None else redact(c.new_spec)
            table.add_row(Text(redact(c.name), style="bold" if c.core else ""),
                          Text(", ".join(LABELS[k] for k in c.kinds), style=style[c.severity]),
                          Text(redact(a)), Text(redact(b)), Text(redact(c.detail)))
        render.out.print(table)
    for rep in r.spec_reports:
        where = f" {rep.where}" if rep.where else ""
        table = Table(title=Text(f"requested specs ({r.spec_side}) against {r.other_words()}{where}"), expand=False)
        for col in ("", "spec", "locked", "note"):
            table.add_column(col, overflow="fold")
        for chk in rep.checks:
            ok = chk.status == "satisfied"
            table.add_row(Text("ok" if ok else chk.status, style="green" if ok else "bold red"),
                          Text(redact(chk.spec.spec)), Text(redact(describe(chk.locked))), Text(redact(chk.reason)))
        render.out.print(table)
        if rep.unrequested:
            names = [p.name for p in rep.unrequested]
            more = f", … (+{len(names) - max_unrequested})" if len(names) > max_unrequested else ""
            render.out.print(Text(f"{len(names)} locked packages nobody asked for directly{where}: "
                           f"{redact(', '.join(names[:max_unrequested]))}{more}", style="dim"))
    for c in getattr(r, "spec_changes", []):
        render.out.print(Text(f"{redact(c)}", style="bold yellow"))
    for n in r.notes:
        render.out.print(Text(f"note: {redact(n)}", style="dim"))
    render.out.print(Text(redact(r.summary()), style="bold" if not r.equal else "green"))


def show(result: Any, fmt: str) -> None:
    """``envguard diff``'s output: the tables above (text), JSON or markdown (a pull-request comment)."""
    import json
    import sys

    from envguard.redact import redact

    if fmt == "json":
        sys.stdout.write(redact(json.dumps(result.to_dict(), indent=2, ensure_ascii=False)) + "\n")
    elif fmt == "markdown":
        from envguard.diff import to_markdown

        sys.stdout.write(redact(to_markdown(result)))
    else:
        print_diff(result)
