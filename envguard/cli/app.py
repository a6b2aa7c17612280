"""The app itself: the command group, the options every command shares (declared once), the root callback
(--verbose, --version) and the small helpers the commands use to refuse bad input in one line.

No ``from __future__ import annotations`` in the cli package: typer would evaluate every option's annotation
string on every run (about 30 ms for the ~90 options); evaluated once at import they cost nothing.
"""

import os
import sys
from typing import Annotated, Any

import typer
import typer.core

from envguard import __version__, render, settings
from envguard.errors import ExitCode
from envguard.render import escape as _escape


class _Group(typer.core.TyperGroup):
    """The app's command group, which finishes how --help reads where typer's parameters take no setting for
    it: ``-h, --help`` shows no value, like every other flag (typer prints ``<bool>``; see "options shared by
    the commands" below), and an argument's row shows its name only (``FILE``, not ``FILE <list[Path]>``)."""

    def get_help_option(self, ctx: Any) -> Any:
        return _shown_as_flag(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from envguard.cli.helptext import show_help  # lazily: only --help draws it (not typer's: helptext.py)

        show_help(self, ctx)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command: Any = super().get_command(ctx, cmd_name)
        if command is not None:  # the subcommand's --help, made once from the names this app sets (-h, --help)
            _shown_as_flag(command.get_help_option(ctx))
            for param in command.params:
                if param.param_type_name == "argument" and not isinstance(param.type, _Untyped):
                    param.type = _Untyped(param.type)
        return command


class Command(typer.core.TyperCommand):
    """Every command: its --help drawn by envguard.cli.helptext, as the group's."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from envguard.cli.helptext import show_help  # lazily: only --help draws it

        show_help(self, ctx)


def _shown_as_flag(help_option: Any) -> Any:
    if help_option is not None:
        help_option.metavar = ""
    return help_option


class _Untyped:
    """A parameter's own type, except that --help names none: typer's help panel prints
    ``param.type.get_metavar(...)`` beside an argument, or ``<name>`` when that is None; an empty string
    prints nothing. Everything else (conversion, completion) is the wrapped type's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner(*args, **kwargs)

    def get_metavar(self, *args: Any, **kwargs: Any) -> str:
        return ""


app = typer.Typer(
    name="envguard",
    cls=_Group,
    help="Declared, locked, verified and explainable PyTorch environments.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# ---------------------------------------------------------------- options shared by the commands
# Declared once, each with its default beside it (``prefix: Annotated[Path | None, prefix_option(...)] =
# None``). typer's --help prints a type beside every option (``--force <bool>``, ``--platform <list[str]>``),
# which makes a flag look as if it took a value: each option here names its value (``--platform PLATFORM``)
# and a flag shows none, through typer's own ``metavar``.


def option(*decls: str, help: str, metavar: str | None = None, **kwargs: Any) -> Any:
    """An option taking a value; --help shows it as ``metavar``, by default the long name in capitals."""
    if metavar is None:
        metavar = next(d for d in decls if d.startswith("--"))[2:].upper()
    return typer.Option(*decls, metavar=metavar, help=help, **kwargs)


def flag(*decls: str, help: str, **kwargs: Any) -> Any:
    """An on/off option: nothing after it in --help."""
    return typer.Option(*decls, metavar="", help=help, **kwargs)


def prefix_option(help: str) -> Any:
    """``--prefix``/``-p``: the environment's directory (conda's convention)."""
    return option("--prefix", "-p", metavar="PREFIX", help=help)


def name_option(help: str) -> Any:
    """``--name``/``-n``: an environment by name, in the envs directory."""
    return option("--name", "-n", metavar="NAME", help=help)


def lockfile_option(help: str) -> Any:
    return option("--lockfile", metavar="FILE", help=help)


def env_files_option(help: str) -> Any:
    """``--file``/``-f``: environment files, repeatable."""
    return option("--file", "-f", metavar="FILE", help=help)


def platforms_option(help: str) -> Any:
    """``--platform``, repeatable."""
    return option("--platform", metavar="PLATFORM", help=help)


def format_option(help: str = "text, json or markdown.") -> Any:
    return option("--format", metavar="FORMAT", help=help)


def misused_prefix_option() -> Any:
    """A hidden ``-p`` for the commands that take no prefix, so that ``-p`` gets a one-line explanation
    (:func:`no_prefix_here`) instead of "no such option"."""
    return typer.Option("-p", "--prefix", hidden=True)


def check_format(fmt: str, fix: str = "use text, json or markdown") -> None:
    """The report formats every reporting command accepts."""
    from envguard.errors import UserError

    if fmt not in ("text", "json", "markdown"):
        raise UserError(f"unknown format {fmt!r}", key="--format", fix=fix)


run_state = {"verbose": False, "interrupt_reported": False}
#: the commands that write nothing the user has (their probes' work folders are removed whatever ends them):
#: an interrupt of one of them changed nothing, and its line says so
READ_ONLY_COMMANDS = frozenset({"lint", "why", "check", "smoke", "diff", "fleet"})

def _version(value: bool) -> None:
    if value:
        render.out.print(f"envguard {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    verbose: Annotated[bool, flag("--verbose", "-v", help="Show tracebacks and debug detail.")] = False,
    version: Annotated[bool, flag("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    run_state["verbose"] = verbose
    run_state["began"] = True  # the command runs next: an interrupt before this changed nothing
    run_state["changes_nothing"] = ctx.invoked_subcommand in READ_ONLY_COMMANDS
    settings.set_verbose(verbose)  # native code's output too (rattler_backend)

def fail(message: str, code: ExitCode) -> typer.Exit:
    from envguard.redact import redact

    render.err.print(f"[red]error:[/red] {_escape(redact(message))}", markup=True)
    return typer.Exit(int(code))


def no_prefix_here(command: str, value: str | None) -> None:
    """``-p`` means ``--prefix`` in every envguard command (conda's convention); ``lock`` and ``init`` take
    platforms with ``--platform`` only. Say so in one line rather than "no such option"."""
    if value is None:
        return
    from envguard.errors import UserError
    from envguard.platforms import KNOWN_PLATFORMS

    if value in KNOWN_PLATFORMS:
        raise UserError(f"-p means --prefix in envguard and {command} takes no prefix: the platform flag of "
                        f"{command} is --platform", key="-p", fix=f"`envguard {command} --platform {value}`")
    if "/" in value or "\\" in value or value.startswith((".", "~")) or os.path.exists(value):
        import shlex

        raise UserError(f"{value!r} looks like a path: the platform flag of {command} is --platform, and -p "
                        f"(--prefix) belongs to the commands that act on an environment", key="-p",
                        fix=f"`envguard create -p {shlex.quote(value)}` builds an environment there")
    raise UserError(f"-p {value}: -p means --prefix in envguard and {command} takes no prefix", key="-p",
                    fix=f"name platforms with --platform, e.g. `envguard {command} --platform linux-64`")


def say_interrupted(message: str) -> int:
    """One plain line (rich may be the very import that was interrupted), exit code 130; after a SIGTERM
    (raised as a KeyboardInterrupt, so that every command cleans up alike) the line says "terminated" and
    the code is 143."""
    from envguard.redact import escape_controls, redact

    terminated = bool(run_state.get("terminated"))
    if message == "interrupted" and not run_state.get("began"):  # parsing the command line: nothing ran yet
        message = "interrupted before the command began: nothing was changed"
    elif message == "interrupted" and run_state.get("changes_nothing"):  # said of every stop, not only create's
        message = "interrupted: nothing was changed (the command only reads; a probe it started was stopped)"
    if terminated and message.startswith("interrupted"):
        message = "terminated (SIGTERM)" + message[len("interrupted"):]
    try:
        sys.stderr.write(redact(escape_controls(message)) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    return int(ExitCode.TERMINATED if terminated else ExitCode.INTERRUPTED)
