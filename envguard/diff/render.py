"""``envguard diff`` as tables: the verdict, then one table per platform and the requested specs against the
lock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard import render

if TYPE_CHECKING:
    from envguard.diff import DiffResult


def print_diff(result: DiffResult, max_unrequested: int = 25) -> None:
    """The verdict first, then what A and B are, one table per platform that changed and the requested
    specs against the lock: tables that fit the width, or one package per line (render.print_table)."""
    from rich.text import Text

    from envguard.diff import LABELS, describe
    from envguard.redact import redact as _redact
    from envguard.redact import shorten_words

    def redact(text: str) -> str:  # masked, and what hostile input makes long cut short
        return shorten_words(_redact(text))

    r = result
    render.print_wrapped(Text(redact(r.summary()), style="bold" if not r.equal else "green"))
    render.print_wrapped(f"A: {redact(r.a.describe())}")
    render.print_wrapped(f"B: {redact(r.b.describe())}")
    style = {"error": "bold red", "warning": "yellow", "info": ""}
    Column = render.Column
    changes = [Column("package"), Column("change", wrap=True, sep=": "), Column("A", wrap=True, sep=": "),
               Column("B", wrap=True, sep=" -> "), Column("note", wrap=True, sep=" · ")]
    for pd in r.platforms:
        if not pd.changes:
            continue
        rows = []
        for c in pd.changes:
            a = describe(c.old) if c.old or c.old_spec is None else redact(c.old_spec)
            b = describe(c.new) if c.new or c.new_spec is None else redact(c.new_spec)
            rows.append([(redact(c.name), "bold" if c.core else ""),
                         (", ".join(LABELS[k] for k in c.kinds), style[c.severity]),
                         redact(a), redact(b), redact(c.detail)])
        render.print_table(changes, rows, title=redact(pd.label))
    specs = [Column(""), Column("spec", wrap=True), Column("locked", wrap=True, sep=": "),
             Column("note", wrap=True, sep=" · ")]
    for rep in r.spec_reports:
        where = f" {rep.where}" if rep.where else ""
        rows = []
        for chk in rep.checks:
            ok = chk.status == "satisfied"
            rows.append([("ok" if ok else chk.status, "green" if ok else "bold red"), redact(chk.spec.spec),
                         redact(describe(chk.locked)), redact(chk.reason)])
        render.print_table(specs, rows, title=f"requested specs ({r.spec_side}) against {r.other_words()}{where}")
        if rep.unrequested:
            names = [p.name for p in rep.unrequested]
            more = f", … (+{len(names) - max_unrequested})" if len(names) > max_unrequested else ""
            render.print_wrapped(Text(f"{len(names)} locked packages nobody asked for directly{where}: "
                                      f"{redact(', '.join(names[:max_unrequested]))}{more}", style="dim"))
    for c in getattr(r, "spec_changes", []):
        render.print_wrapped(Text(f"{redact(c)}", style="bold yellow"))
    for n in r.notes:
        render.print_wrapped(Text(f"note: {redact(n)}", style="dim"))


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
