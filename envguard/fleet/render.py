"""``envguard fleet`` on a terminal: the verdict, one line per group, then what each deviating group differs in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard import render

if TYPE_CHECKING:
    from envguard.fleet import FleetResult


def print_fleet(result: FleetResult, max_changes: int = 30, details: bool = False) -> None:
    """The verdict first, then one line per group (its nodes, how many, its facts, its findings' counts),
    then what each group differs in and its findings grouped by code, with how many (one line per code).
    Lines wrap between words at the console's width (a log's is unlimited: nothing wraps there).
    ``details``: also every package change and every finding, as before."""
    from rich.text import Text

    from envguard.fleet import count_text, describe_fact, distributed_line
    from envguard.redact import redact
    from envguard.report import plural

    r = result
    ref = f"reference: {redact(r.lockfile)}" if r.lockfile else (
        "reference: the majority of each platform" if len(r.platforms) > 1 else "reference: the majority")
    _say(Text(f"envguard fleet · {plural(r.nodes, 'node')} · {ref}", style="bold"))
    _say(Text(redact(r.summary()), style="green" if r.exit_code == 0 else "bold"))
    for i, g in enumerate(r.groups, 1):
        f = g.facts
        mark = ("ref", "green" if not any(g.exit_codes) else "yellow") if g.reference else (f"#{i}", "bold red")
        torch = describe_fact("torch", f["torch"])
        facts = " · ".join(([f"variant {describe_fact('variant', f['variant'])}"] if f.get("variant") else [])
                           + [torch if not f["torch"] else f"torch {torch}",
                              f"{describe_fact('driver', f['driver'])}, GPUs: {describe_fact('gpus', f['gpus'])}",
                              f"smoke {describe_fact('smoke', f['smoke'])}", count_text(g)])
        line = f"{redact(g.ranges)} ({plural(len(g.nodes), 'node')}) · {facts}"
        _say(Text.assemble((f"{mark[0]:<4}", mark[1]), line))
    style = {"error": "bold red", "warning": "yellow", "info": ""}
    for i, g in enumerate(r.groups, 1):
        shown = [x for x in g.findings if x.get("severity") in ("error", "warning")]
        if g.reference and not shown:
            continue
        title = "reference" if g.reference else f"#{i}"
        _say(Text(f"\n{title}: {plural(len(g.nodes), 'node')} {redact(g.ranges)}", style="bold"))
        for k, a, b in g.fact_changes:
            if k == "findings" and not details:  # one entry per finding: the lines by code below say it shorter
                continue
            _say(Text(f"  {k}: {redact(b)} (reference: {redact(a)})"))
        if g.changes:
            _say(Text(f"  {plural(len(g.changes), 'package change')}: " + _change_counts(g.changes)))
        for code, severity, n, message in _by_code(shown):
            _say(Text(f"  {code} {severity} ×{n}: {redact(message)}" if n > 1 else
                                  f"  {code} {severity}: {redact(message)}", style=style.get(severity, "")))
        if details:
            _print_details(g, max_changes)
    if not details and any(g.changes or len(g.findings) > len(_by_code(g.findings)) for g in r.groups):
        _say(Text("\n--details lists every package change and finding; --format json has them all",
                              style="dim"))
    if r.distributed:
        _say(Text(f"\ndistributed: {redact(distributed_line(r.distributed))}"))
    for p in r.identity:  # reports that do not add up to the nodes: the verdict above cannot be trusted
        _say(Text(f"\n{p['problem']}: {redact(p['message'])}", style="bold red"))
    for path, why in r.unreadable:
        _error(Text(f"error: {redact(path)}: {redact(why)} (skipped)", style="red"))


def _say(text: object) -> None:  # lines wrap at the console's width, a log's (COLUMNS) too
    render.print_wrapped(text, always=True)


def _error(text: object) -> None:
    render.print_wrapped(text, console=render.err)


def _change_counts(changes: list) -> str:
    from envguard.diff import LABELS

    counts: dict[str, int] = {}
    for c in changes:
        for k in c.kinds:
            counts[LABELS[k]] = counts.get(LABELS[k], 0) + 1
    return ", ".join(f"{n} {label}" for label, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _by_code(findings: list[dict[str, Any]]) -> list[tuple[str, str, int, str]]:
    """(code, severity, how many, the first one's message): one line per code, in the order they come."""
    seen: dict[tuple[str, str], list[Any]] = {}
    for x in findings:
        key = (str(x.get("code")), str(x.get("severity")))
        if key in seen:
            seen[key][0] += 1
        else:
            seen[key] = [1, str(x.get("message"))]
    return [(code, sev, n, message) for (code, sev), (n, message) in seen.items()]


def _print_details(g: Any, max_changes: int) -> None:
    from rich.text import Text

    from envguard.diff import LABELS, describe
    from envguard.redact import redact

    style = {"error": "bold red", "warning": "yellow", "info": ""}
    if g.changes:
        Column = render.Column
        columns = [Column("what"), Column("change", wrap=True, sep=": "), Column("reference", wrap=True, sep=": "),
                   Column("this group", wrap=True, sep=" -> ")]
        render.print_table(columns, [[(c.name, "bold" if c.core else ""),
                                      (", ".join(LABELS[k] for k in c.kinds), style[c.severity]),
                                      describe(c.old), describe(c.new)] for c in g.changes[:max_changes]])
        if len(g.changes) > max_changes:
            _say(Text(f"… and {len(g.changes) - max_changes} more package changes "
                      "(--format json lists them all)", style="dim"))
    for x in g.findings:
        if x.get("severity") in ("error", "warning"):
            _say(Text(f"    {x.get('code')} {x.get('severity')}: {redact(str(x.get('message')))}",
                      style=style.get(str(x.get("severity")), "")))


def show(result: Any, fmt: str, details: bool = False) -> None:
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
        print_fleet(r, details=details)
        return  # the text names unreadable reports itself
    for path, why in r.unreadable:
        _error(Text(f"error: {redact(path)}: {redact(why)} (skipped)", style="red"))
