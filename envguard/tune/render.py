"""``envguard tune`` on a terminal: the recommendation first, the trial table, a compact chart and the findings."""

from __future__ import annotations

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


def tune_title(result: Any) -> str:
    from envguard.redact import redact

    state = "timed out" if result.timed_out else ("no configuration worked" if result.exit_code else "done")
    return f"envguard tune: {state} in {result.duration:.1f} s · {redact(result.python)}"


# one trial per line where the table does not fit: "3. 2 workers, fork: samples/s 718, waits 5% · recommended"
_SEPS = {"settings": ". ", "samples/s": ": samples/s ", "": " · "}


def print_tune(result: Any) -> None:
    """The title, the verdict (what is recommended, and why), what was measured, the trials as a table that
    fits the width (or one per line), the chart, the snippet, what was not tried and the findings."""
    from envguard.tune.formats import summary_lines, text_chart, trial_rows, verdict_lines
    from envguard.tune.report import not_tried, snippet

    out = render.out
    render.print_plain(out, tune_title(result))
    for line in verdict_lines(result) + summary_lines(result):
        render.print_plain(out, line)
    rows = trial_rows(result)
    if rows:
        columns = [render.Column(col, wrap=col == "settings", sep=_SEPS.get(col, f", {col} "),
                                 justify="left" if col in ("settings", "") else "right") for col in rows[0]]
        style = {"ok": "green", "failed": "red", "timeout": "red", "crashed": "red", "budget": "yellow"}
        cells: list[list[Any]] = []
        for r, t in zip(rows, result.trials, strict=False):
            row: list[Any] = list(r.values())
            if t.get("status") != "ok":
                row[2] = (row[2], style.get(str(t.get("status")), ""))
            if "recommended" in r[""]:
                row[1] = (row[1], "bold")
            cells.append(row)
        render.print_table(columns, cells, simple=True)
    chart = text_chart(result, width=max(30, min(60, int(out.width) - 8)))
    if chart:
        out.print("\n".join(chart), markup=False, highlight=False, soft_wrap=True)
    code = snippet(result, indent="    ")
    if code:
        out.print(code, markup=False, highlight=False, soft_wrap=True)
    nt = not_tried(result)
    if nt:
        render.print_plain(out, "not tried:")
        for line in nt:
            render.print_wrapped(f"  - {line}", hang=4)
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
