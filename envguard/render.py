"""Terminal output shared by every command: lazy rich consoles, warnings, the findings table.

Only the CLI and the rendering modules (this one and each wing's ``render.py``) import rich; the
commands themselves return plain results.
"""

from __future__ import annotations

import os
import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_LOG_WIDTH = 10_000  # "as wide as it takes": tables in logs keep every cell on one line


class _LazyConsole:
    """A rich Console built on first use. Importing rich and building a console costs ~20 ms, which a
    `envguard create` writing into a log or a pipe never needs (see :func:`print_plain`)."""

    _options: dict[str, Any]
    _console: Console | None

    def __init__(self, **options: Any) -> None:
        object.__setattr__(self, "_options", options)
        object.__setattr__(self, "_console", None)

    def get(self) -> Console:
        if self._console is None:
            from rich.console import Console

            console = Console(**self._options)
            if not console.is_terminal and "width" not in self._options and not os.environ.get("COLUMNS"):
                # A log or a pipe has no width: rich would wrap at 80 columns, breaking paths mid-word.
                console.width = _LOG_WIDTH
            object.__setattr__(self, "_console", console)
            return console
        return self._console

    # A stand-in for rich's Console: every attribute is the console's own.
    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.get(), name, value)


def rich_console(console: Console | _LazyConsole) -> Console:
    """The rich Console itself, for rich objects that take one (Progress, Live)."""
    return console.get() if isinstance(console, _LazyConsole) else console


def print_plain(console: Console | _LazyConsole, text: str) -> None:
    """``console.print(text, markup=False, emoji=False)``, without rich when the console is still unbuilt,
    surely no terminal (rich would write the text as it is) and the text is plain printable ASCII."""
    if isinstance(console, _LazyConsole) and console._console is None and text.isascii() and text.isprintable() \
            and not is_terminal(console, build=False):
        stream = sys.stderr if console._options.get("stderr") else sys.stdout
        stream.write(text + "\n")
        return
    console.print(text, markup=False, emoji=False)


def is_terminal(console: Console | _LazyConsole, *, build: bool = True) -> bool:
    """``console.is_terminal``, answered without rich for an unbuilt console when surely no terminal.
    With ``build=False`` an unbuilt console that may be a terminal is not built: the answer is True."""
    if isinstance(console, _LazyConsole) and console._console is None:
        if not _maybe_terminal(sys.stderr if console._options.get("stderr") else sys.stdout):
            return False
        if not build:
            return True
    return bool(console.is_terminal)


def _maybe_terminal(stream: IO[str]) -> bool:
    """False only where rich's Console.is_terminal is surely False (it also honours these variables)."""
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR") is not None:
        return True
    if "ipykernel" in sys.modules or "idlelib" in sys.modules:
        return True
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return True


# emoji=False: names such as a dataset "data:smile" or a path "a:boom:b" are text, never an emoji code
out = _LazyConsole(highlight=False, soft_wrap=True, emoji=False)
err = _LazyConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def warn(message: str) -> None:
    from envguard.redact import redact, shorten_words

    err.print(f"[yellow]warning:[/yellow] {escape(redact(shorten_words(message)))}", markup=True)


def escape(text: str) -> str:
    """Text shown inside a markup string: "torch[cuda]" or "# [linux]" must not be read as rich tags."""
    from rich.markup import escape

    return escape(text)


# Below this many columns, or when the table's fixed columns would leave the message too little room, a
# terminal gets one finding per line: a table squeezed into 80 columns folds paths mid-word and takes a dozen
# lines per finding.
_TABLE_MIN_WIDTH = 100
_MESSAGE_MIN_WIDTH = 40


def print_findings(findings: list, title: str | None = None, summary: str | None = None) -> None:
    """The findings grouped by severity and a one-line summary (``summary`` replaces it). In a log or a pipe,
    one plain line per finding and the summary last; on a terminal the summary first (the verdict before the
    detail), then a table that fits the width, without the columns no finding fills, or one finding per
    line where it would not fit."""
    from envguard.errors import with_fix
    from envguard.findings import sort_findings
    from envguard.redact import redact
    from envguard.report import summary_line

    fs = sort_findings(list(findings))
    verdict = summary if summary is not None else summary_line(fs)
    if fs and not is_terminal(out):
        # logs and pipes: one plain line per finding, nothing wrapped, easy to grep
        if title:
            print_plain(out, title)
        for f in fs:
            where = redact(f.location or f.package or "")
            line = f"{f.severity.value}: {f.code}{' ' + where if where else ''}: {redact(f.message)}"
            print_plain(out, with_fix(line, redact(f.fix) if f.fix else None))
        print_plain(out, summary_line(fs))
        return
    if not fs:
        out.print(verdict)
        return
    rows = [(f.severity.value, f.code, redact(f.location or f.package or ""), redact(f.message), redact(f.fix or ""))
            for f in fs]
    if title:
        out.print(title, markup=False)
    out.print(verdict, markup=False)
    style = {"error": "red", "warning": "yellow", "info": "blue"}
    width = int(out.width)
    names = ("severity", "code", "where", "message", "fix")
    used = [i for i in range(len(names)) if any(r[i] for r in rows)]  # no column that every finding leaves empty
    # the short columns never wrap (a path stays whole); message and fix wrap between words, so each must be
    # as wide as its longest word (a path in a fix)
    least = {i: max(len(r[i]) for r in rows) if i < 3 else max(
        [_MESSAGE_MIN_WIDTH if i == 3 else 0] + [len(w) for r in rows for w in r[i].split()]) for i in used}
    if width < _TABLE_MIN_WIDTH or sum(least.values()) + 3 * len(used) + 1 > width:
        _findings_per_line(rows, style)
        return
    from rich.table import Table

    table = Table(show_lines=False, expand=False)
    for i in used:
        table.add_column(names[i], no_wrap=i < 3, min_width=least[i], overflow="fold")
    for r in rows:
        cells = [f"[{style[r[0]]}]{r[0]}[/]" if i == 0 else escape(r[i]) for i in used]
        table.add_row(*cells)
    out.print(table)


def _findings_per_line(rows: list[tuple[str, str, str, str, str]], style: dict[str, str]) -> None:
    """One finding per line (its fix on the next, indented); lines wrap between words, never inside one."""
    from rich.text import Text

    for sev, code, where, message, fix in rows:
        line = Text.assemble((sev, style[sev]), " ", (code, "bold"), (f" {where}" if where else ""), ": ", message)
        out.print(line, soft_wrap=False, overflow="fold")
        if fix:
            out.print(Text(f"  fix: {fix}", style="dim"), soft_wrap=False, overflow="fold")
