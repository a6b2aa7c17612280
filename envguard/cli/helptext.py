"""``--help``, drawn with rich's Panel and Table in typer's layout: the usage line, the help text, then the
arguments, the options and (for the group) the commands, each in a box.

typer draws it with its own renderer, whose module imports rich.markdown (markdown-it) and rich.traceback
(pygments) as it is imported, for help written in markdown and for pretty tracebacks. envguard has neither:
its help is plain text and its tracebacks are plain ones under --verbose, and those imports were about a
quarter of the modules every --help imported (bench/README.md, "imports per command";
tests/test_imports_follow_need.py). A usage error ("No such option") still goes through typer's renderer:
that path is rare and uses it.

Only public attributes of the command and its parameters are read (``params``, ``opts``, ``metavar``,
``get_help_record``, ``collect_usage_pieces``, ``list_commands``), so a typer release that renames its
internals changes nothing here.
"""

import re
from typing import Any

STYLE_OPTION, STYLE_SHORT, STYLE_METAVAR, STYLE_USAGE = "bold cyan", "bold green", "bold yellow", "yellow"
BORDER = "dim"
MIN_HELP = 24  # the narrowest help column beside the names; narrower, the help goes below them


def show_help(command: Any, ctx: Any) -> None:
    """Print ``command``'s help (a command or the group) on standard output."""
    from rich.console import Console, Group
    from rich.padding import Padding
    from rich.text import Text

    console = Console(highlight=False, emoji=False, markup=False)
    usage = Text.assemble(("Usage: ", STYLE_USAGE), (" ".join([ctx.command_path, *command.collect_usage_pieces(ctx)]),
                                                     "bold"))
    parts: list[Any] = [Padding(usage, (1, 1, 0, 1))]
    if command.help:
        parts.append(Padding(Text(_paragraphs(command.help)), (1, 1, 1, 1)))
    else:
        parts.append(Text(""))
    params = [p for p in command.get_params(ctx) if not p.hidden]
    arguments = [_argument_row(p) for p in params if p.param_type_name == "argument"]
    options = [row for p in params if p.param_type_name == "option" and (row := _option_row(p, ctx))]
    if arguments:
        parts.append(_panel("Arguments", arguments, console.width))
    if options:
        parts.append(_panel("Options", options, console.width))
    if hasattr(command, "list_commands"):
        rows = []
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                rows.append([Text(name, style=STYLE_OPTION), Text(_first_paragraph(sub.help or ""))])
        if rows:
            parts.append(_panel("Commands", rows, console.width))
    console.print(Group(*parts))


def _panel(title: str, rows: list[list[Any]], width: int) -> Any:
    """The rows in a box: a table where the help column keeps MIN_HELP columns beside the names, else each
    row's names on a line of their own and its help below them, indented (no word is cut either way)."""
    from rich import box
    from rich.console import Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    used = [i for i in range(len(rows[0])) if any(row[i].plain for row in rows)]  # no column nothing fills
    names = used[:-1]
    names_width = sum(max(len(row[i].plain) for row in rows) + 1 for i in names)
    table = Table(show_header=False, box=None, padding=(0, 1), expand=True, pad_edge=False)
    if width - 4 - names_width >= MIN_HELP:
        for i in used:
            last = i == used[-1]
            table.add_column(no_wrap=not last, ratio=1 if last else None, overflow="fold" if last else "ellipsis")
        for row in rows:
            table.add_row(*[row[i] for i in used])
    else:
        table.add_column(ratio=1, overflow="fold")
        for row in rows:
            head = Text(" ").join(row[i] for i in names if row[i].plain)
            table.add_row(Group(head, Padding(row[used[-1]], (0, 0, 0, 4))))
    return Panel(table, title=title, title_align="left", border_style=BORDER, box=box.ROUNDED)


def _option_row(param: Any, ctx: Any) -> list[Any] | None:
    from rich.text import Text

    record = param.get_help_record(ctx)
    if record is None:
        return None
    longs = [o for o in param.opts if o.startswith("--")]
    shorts = [o for o in param.opts if not o.startswith("--")]
    negative = [o for o in param.secondary_opts if o.startswith("--")]
    return [Text(",".join(longs), style=STYLE_OPTION), Text(",".join(negative), style=STYLE_OPTION),
            Text(",".join(shorts), style=STYLE_SHORT), Text(param.metavar or "", style=STYLE_METAVAR),
            Text(record[1])]


def _argument_row(param: Any) -> list[Any]:
    from rich.text import Text

    help_text = getattr(param, "help", None) or ""
    if param.required:
        help_text = f"{help_text} [required]".strip()
    return [Text("*" if param.required else "", style="red"), Text(param.metavar or param.name.upper(),
                                                                   style=STYLE_METAVAR), Text(help_text)]


def _paragraphs(text: str) -> str:
    """The help text with each paragraph's lines joined (rich wraps them to the width)."""
    return "\n\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip()))


def _first_paragraph(text: str) -> str:
    return _paragraphs(text).split("\n\n", 1)[0]
