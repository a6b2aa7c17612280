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
    """Plain text (no markup, no emoji codes); on a terminal each line wrapped between words at its width
    (:func:`print_wrapped`). Without rich when the console is still unbuilt, surely no terminal (the text is
    written as it is) and the text plain printable ASCII."""
    if isinstance(console, _LazyConsole) and console._console is None and text.isascii() and text.isprintable() \
            and not is_terminal(console, build=False):
        stream = sys.stderr if console._options.get("stderr") else sys.stdout
        stream.write(text + "\n")
        return
    for line in text.split("\n"):
        print_wrapped(line, console=console)


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
    from rich.text import Text

    from envguard.redact import redact, shorten_words

    print_wrapped(Text.assemble(("warning:", "yellow"), f" {redact(shorten_words(message))}"), console=err)


def escape(text: str) -> str:
    """Text shown inside a markup string: "torch[cuda]" or "# [linux]" must not be read as rich tags."""
    from rich.markup import escape

    return escape(text)


# Below this many columns, or when the table's fixed columns would leave the message too little room, a
# terminal gets one finding per line: a table squeezed into 80 columns folds paths mid-word and takes a dozen
# lines per finding.
_TABLE_MIN_WIDTH = 100
_MESSAGE_MIN_WIDTH = 40

def print_findings(findings: list, title: str | None = None, summary: str | None = None,
                   notes: list[str] | None = None) -> None:
    """The findings grouped by severity and a one-line summary (``summary`` replaces it). In a log or a pipe,
    one plain line per finding and the summary last; on a terminal the summary first (the verdict before the
    detail), then a table that fits the width, without the columns no finding fills, or one finding per
    line where it would not fit (:func:`print_table`). ``notes``: lines after the title (on a terminal after
    the verdict too)."""
    from envguard.errors import with_fix
    from envguard.findings import sort_findings
    from envguard.redact import redact
    from envguard.report import summary_line

    fs = sort_findings(list(findings))
    verdict = summary if summary is not None else summary_line(fs)
    if fs and not is_terminal(out):
        # logs and pipes: one plain line per finding, nothing wrapped, easy to grep
        for line in ([title] if title else []) + (notes or []):
            print_plain(out, line)
        for f in fs:
            where = redact(f.location or f.package or "")
            line = f"{f.severity.value}: {f.code}{' ' + where if where else ''}: {redact(f.message)}"
            print_plain(out, with_fix(line, redact(f.fix) if f.fix else None))
        print_plain(out, summary_line(fs))
        return
    if title:
        print_plain(out, title)
    print_plain(out, verdict)
    for line in notes or []:
        print_plain(out, line)
    if not fs:
        return
    style = {"error": "red", "warning": "yellow", "info": "blue"}
    columns = [Column("severity"), Column("code", style="bold"), Column("where"),
               Column("message", wrap=True, least=_MESSAGE_MIN_WIDTH, sep=": "),
               Column("fix", wrap=True, sep="\nfix: ", style="dim")]
    rows = [[(f.severity.value, style[f.severity.value]), f.code, redact(f.location or f.package or ""),
             redact(f.message), redact(f.fix or "")] for f in fs]
    print_table(columns, rows, min_width=_TABLE_MIN_WIDTH)


# ---------------------------------------------------------------- tables and long lines that fit the width

class Column:
    """One column of :func:`print_table`.

    ``wrap``: the cells may wrap between words (a message); otherwise a cell stays on one line (a name, a
    version, a path). ``least``: a wrapping column's narrowest width (never more than its longest cell).
    ``sep``: one item per line, what comes before this cell; a ``sep`` starting with a newline starts an
    indented line of its own. ``style``: every cell's style (a cell given as (text, style) has its own)."""

    __slots__ = ("justify", "least", "name", "sep", "style", "wrap")

    def __init__(self, name: str, *, wrap: bool = False, least: int = 0, sep: str = " ", style: str = "",
                 justify: str = "left") -> None:
        self.name, self.wrap, self.least, self.sep, self.style, self.justify = name, wrap, least, sep, style, justify


def _cell(value: Any, column: Column) -> tuple[str, str]:
    return (value[0], value[1] or column.style) if isinstance(value, tuple) else (str(value), column.style)


def table_layout(columns: list[Column], rows: list[list[Any]], width: int, *, min_width: int = 0,
                 edges: bool = True) -> tuple[list[int], list[int] | None]:
    """The columns some row fills (the others are left out), and each one's width in a table that fits
    ``width`` with every word and path whole (each as wide as its longest cell where that fits), or None where
    no table does: then one item per line. Below ``min_width`` columns no table either. ``edges``: the table
    has a border left and right (else none and no padding at its edges)."""
    from rich.cells import cell_len

    used = [i for i in range(len(columns)) if any(_cell(r[i], columns[i])[0] for r in rows)]
    least: list[int] = []
    most: list[int] = []
    for i in used:
        c, texts = columns[i], [_cell(r[i], columns[i])[0] for r in rows]
        most.append(max([cell_len(c.name)] + [cell_len(t) for t in texts]))
        if c.wrap:  # as wide as its longest word, and the least asked (no wider than its longest cell)
            words = [cell_len(w) for t in texts for w in t.split()] + [cell_len(w) for w in c.name.split()]
            least.append(max([min(c.least, most[-1])] + words))
        else:
            least.append(most[-1])
    # rich's boxes: a separator between columns, one cell of padding each side, and the edges
    overhead = (len(used) - 1) + 2 * len(used) + (2 if edges else -2)
    spare = width - overhead - sum(least)
    if width < min_width or spare < 0:
        return used, None
    # what is left over goes to the columns that would wrap, in proportion to what each one lacks
    lack = [m - n for m, n in zip(most, least, strict=True)]
    if sum(lack) <= spare:
        return used, most
    widths = [n + k * spare // sum(lack) for n, k in zip(least, lack, strict=True)]
    return used, widths


def print_table(columns: list[Column], rows: list[list[Any]], *, title: str | None = None,
                verdict: Any = None, min_width: int = 0, simple: bool = False,
                console: Console | _LazyConsole | None = None) -> None:
    """The one way commands put rows on a terminal: the verdict first (when given), then a table that fits
    the console's width (a terminal's, else COLUMNS, unlimited in a log) without breaking a word or a path
    and without the columns no row fills; where no such table fits, one item per line, wrapped between words.
    Cells are text (already redacted), or (text, style). ``simple``: a table with a header rule only."""
    from rich.text import Text

    console = out if console is None else console
    if verdict is not None:
        print_wrapped(verdict, console=console)
    if not rows:
        return
    width = int(console.width)
    used, widths = table_layout(columns, rows, width, min_width=min_width, edges=not simple)
    if widths is None:
        if title:
            print_wrapped(Text(title, style="bold"), console=console, always=True)
        for r in rows:
            _print_item([(columns[i], _cell(r[i], columns[i])) for i in used], console)
        return
    from rich.table import Table

    options: dict[str, Any] = {"title": Text(title) if title else None, "expand": False}
    if simple:
        from rich import box

        options.update(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    table = Table(**options)
    for i, w in zip(used, widths, strict=True):
        c = columns[i]
        table.add_column(c.name, no_wrap=not c.wrap, width=w, overflow="fold", justify=c.justify)  # type: ignore[arg-type]
    for r in rows:
        table.add_row(*(Text(*_cell(r[i], columns[i])) for i in used))
    console.print(table)


def _print_item(cells: list[tuple[Column, tuple[str, str]]], console: Console | _LazyConsole) -> None:
    """One row as a line (a ``sep`` with a newline starts an indented line of its own)."""
    from rich.text import Text

    lines: list[Text] = []
    for column, (text, style) in cells:
        if not text:
            continue
        sep = column.sep
        if not lines or sep.startswith("\n"):
            lines.append(Text("  " + sep.lstrip("\n") if lines else ""))
        elif sep:
            lines[-1].append(sep)
        lines[-1].append(text, style=style)
    for line in lines:  # the layout was decided for the console's width: in a log (COLUMNS) too
        print_wrapped(line, console=console, always=True)


def wrap_offsets(text: str, width: int, hang: int) -> list[tuple[int, int, int]]:
    """Where a line of ``text`` breaks at ``width`` columns: (start, end, indentation) of each piece. Breaks
    fall between words; the pieces after the first are indented by ``hang``, except a word too long for an
    indented line (a path), which gets a line of its own from the first column; only a word longer than a
    whole line is cut (it cannot fit otherwise)."""
    spans: list[tuple[int, int, int]] = []
    i, n = 0, len(text)
    while i < n:
        if spans:
            while i < n and text[i] == " ":  # the space at a break goes
                i += 1
            if i >= n:
                break
        indent = hang if spans and hang < width else 0
        room = width - indent
        if n - i <= room:
            spans.append((i, n, indent))
            break
        body = i + len(text[i:]) - len(text[i:].lstrip(" "))  # leading indentation is no place to break
        word_end = text.find(" ", body)
        word = (n if word_end < 0 else word_end) - i
        if spans and word > room:  # too long for an indented line: one of its own, cut only past the width
            end = i + min(word, width)
            spans.append((i, end, 0))
            i = end
            continue
        cut = text.rfind(" ", body + 1, i + room + 1)
        if cut <= body:
            cut = i + room  # the first word alone is longer than the line
        spans.append((i, cut, indent))
        i = cut
    return spans or [(0, 0, 0)]


def print_wrapped(text: Any, *, console: Console | _LazyConsole | None = None, hang: int | None = None,
                  always: bool = False) -> None:
    """One line of text (str or rich Text), on a terminal at its width: broken between words, never inside a
    word or a path that fits, the continuation indented ``hang`` columns (the line's own indentation and two
    more). In a log or a pipe the line is written whole (easy to grep), unless ``always``: then it is broken at
    the console's width there too (COLUMNS; without it a log's width is unlimited)."""
    from rich.text import Text

    console = out if console is None else console
    whole = text if isinstance(text, Text) else Text(str(text))
    if not always and not is_terminal(console):
        console.print(whole, soft_wrap=True, emoji=False, markup=False, highlight=False)
        return
    width = int(console.width)
    for line in whole.split("\n", allow_blank=True) if "\n" in whole.plain else [whole]:
        plain = line.plain
        own = hang if hang is not None else len(plain) - len(plain.lstrip(" ")) + 2
        for a, b, indent in wrap_offsets(plain, width, own):
            piece = line[a:b]
            console.print(Text(" " * indent) + piece if indent else piece, soft_wrap=True, emoji=False,
                          markup=False, highlight=False)
