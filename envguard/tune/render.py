"""``envguard tune`` on a terminal: the trial table, a compact chart, the recommendation and the findings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envguard import render


def progress(trial: dict[str, Any]) -> None:
    """One line per finished trial on stderr, while the search runs (terminals only)."""
    if not render.is_terminal(render.err):
        return
    from envguard.tune.report import label

    v = trial.get("samples_per_s")
    how = f"{v:.0f} samples/s" if trial.get("status") == "ok" and v else str(trial.get("status"))
    render.err.print(f"  trial {trial.get('id')}: {label(trial)}: {how} ({trial.get('seconds', 0):.1f} s)",
                     markup=False, highlight=False)


@contextmanager
def _wide(width: int = 120) -> Iterator[None]:
    """A log or a pipe (80 columns to rich) gets whole rows rather than cells wrapped word by word."""
    console = render.rich_console(render.out)
    old = console.width
    if not render.is_terminal(render.out) and old < width:
        console.width = width
    try:
        yield
    finally:
        console.width = old


def tune_title(result: Any) -> str:
    from envguard.redact import redact

    state = "timed out" if result.timed_out else ("no configuration worked" if result.exit_code else "done")
    return f"envguard tune {redact(result.python)} · {state} in {result.duration:.1f} s"


def print_tune(result: Any) -> None:
    from rich import box
    from rich.table import Table

    from envguard.tune.formats import summary_lines, text_chart, trial_rows, verdict_lines
    from envguard.tune.report import not_tried, snippet

    out = render.out
    out.print(tune_title(result), markup=False)
    for line in summary_lines(result):
        out.print(line, markup=False)
    rows = trial_rows(result)
    if rows:
        table = Table(box=box.SIMPLE_HEAD, show_lines=False, expand=False, pad_edge=False)
        for col in rows[0]:
            table.add_column(col, justify="left" if col in ("settings", "") else "right", no_wrap=True)
        style = {"ok": "green", "failed": "red", "timeout": "red", "crashed": "red", "budget": "yellow"}
        for r, t in zip(rows, result.trials, strict=False):
            cells = [render.escape(v) for v in r.values()]
            if t.get("status") != "ok":
                cells[2] = f"[{style.get(str(t.get('status')), 'white')}]{cells[2]}[/]"
            if "recommended" in r[""]:
                cells[1] = f"[bold]{cells[1]}[/]"
            table.add_row(*cells)
        with _wide():
            out.print(table)
    chart = text_chart(result)
    if chart:
        out.print("\n".join(chart), markup=False, highlight=False)
    for line in verdict_lines(result):
        out.print(line, markup=False)
    code = snippet(result, indent="    ")
    if code:
        out.print(code, markup=False, highlight=False)
    nt = not_tried(result)
    if nt:
        out.print("not tried:", markup=False)
        for line in nt:
            out.print(f"  - {line}", markup=False)
    with _wide():
        render.print_findings(result.findings)


def show(result: Any, fmt: str, plot: Path | None = None) -> None:
    """``envguard tune``'s output: the plot written when asked (and something worked), then the result as
    text, JSON or markdown on stdout."""
    import json
    import sys

    from envguard.redact import redact

    if plot is not None and result.ok_trials:
        from envguard.tune.plot import write_plot

        write_plot(result, plot)
        render.print_plain(render.err, f"wrote {plot}")
    elif plot is not None:
        render.warn(f"no plot written to {plot}: no configuration worked")
    if fmt == "json":
        sys.stdout.write(redact(json.dumps(result.to_dict(), indent=2, default=str)) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(result.to_markdown())
    else:
        print_tune(result)
