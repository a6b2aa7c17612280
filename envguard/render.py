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


def print_findings(findings: list, title: str | None = None, summary: str | None = None) -> None:
    """A rich table of findings grouped by severity, then a one-line summary (``summary`` replaces it)."""
    from rich.table import Table

    from envguard.errors import with_fix
    from envguard.findings import sort_findings
    from envguard.redact import redact
    from envguard.report import summary_line

    fs = sort_findings(list(findings))
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
    if fs:
        table = Table(title=title, show_lines=False, expand=False)
        for col in ("severity", "code", "where", "message", "fix"):
            table.add_column(col, overflow="fold")
        style = {"error": "red", "warning": "yellow", "info": "blue"}
        for f in fs:
            sev = f.severity.value
            table.add_row(f"[{style[sev]}]{sev}[/]", escape(f.code), escape(redact(f.location or f.package or "")),
                          escape(redact(f.message)), escape(redact(f.fix)))
        out.print(table)
    out.print(summary if summary is not None else summary_line(fs))
