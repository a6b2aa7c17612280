"""The command line. The only module that imports typer and rich.

Each command parses its arguments, calls a plain function that returns a
result, renders that result and maps it onto an exit code. Errors derived from
:class:`envguard.errors.EnvguardError` become one line on stderr; anything
else is a bug, shown in full only with ``--verbose``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

try:  # recent typer vendors click; older releases use the click package
    from typer._click.exceptions import ClickException as _ClickException
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import ClickException as _ClickException
from rich.console import Console

from envguard import __version__
from envguard.errors import EnvguardError, ExitCode

app = typer.Typer(
    name="envguard",
    help="Declared, locked, verified and explainable PyTorch environments.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"verbose": False}
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        out.print(f"envguard {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show tracebacks and debug detail."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    _state["verbose"] = verbose


def warn(message: str) -> None:
    from envguard.redact import redact

    err.print(f"[yellow]warning:[/yellow] {redact(message)}", markup=True)


def fail(message: str, code: ExitCode) -> "typer.Exit":
    from envguard.redact import redact

    err.print(f"[red]error:[/red] {redact(message)}", markup=True)
    return typer.Exit(int(code))


def print_findings(findings: "list", title: str | None = None) -> None:
    """A rich table of findings grouped by severity, then a one-line summary."""
    from rich.table import Table

    from envguard.findings import sort_findings
    from envguard.redact import redact
    from envguard.report import summary_line

    fs = sort_findings(list(findings))
    if fs:
        table = Table(title=title, show_lines=False, expand=False)
        for col in ("severity", "code", "where", "message", "fix"):
            table.add_column(col, overflow="fold")
        style = {"error": "red", "warning": "yellow", "info": "blue"}
        for f in fs:
            sev = f.severity.value
            table.add_row(f"[{style[sev]}]{sev}[/]", f.code, redact(f.location or f.package or ""),
                          redact(f.message), redact(f.fix))
        out.print(table)
    out.print(summary_line(fs))


# ---------------------------------------------------------------- lock (#2)
# ---------------------------------------------------------------- create (#3)
# ---------------------------------------------------------------- smoke (#4)
# ---------------------------------------------------------------- check (#5)
# ---------------------------------------------------------------- diff (#6)
# ---------------------------------------------------------------- init, lint (#7)
# ---------------------------------------------------------------- entry point


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises, never exits)."""
    try:
        app(args=argv, prog_name="envguard", standalone_mode=False)
        return 0
    except typer.Exit as e:
        return int(e.exit_code)
    except typer.Abort:
        err.print("interrupted")
        return int(ExitCode.INTERRUPTED)
    except _ClickException as e:
        e.show(file=sys.stderr)
        return int(ExitCode.USAGE)
    except EnvguardError as e:
        from envguard.redact import redact

        if _state["verbose"]:
            import traceback

            traceback.print_exc()
        err.print(f"[red]error:[/red] {redact(e.message)}", markup=True)
        return int(e.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted")
        return int(ExitCode.INTERRUPTED)
    except Exception as e:  # a bug: one line, unless asked for more
        if _state["verbose"]:
            import traceback

            traceback.print_exc()
        err.print(f"[red]internal error:[/red] {type(e).__name__}: {e} (rerun with --verbose for a traceback)")
        return int(ExitCode.BACKEND)


def main() -> None:
    code = run(sys.argv[1:])
    # py-rattler's async runtime can crash during interpreter finalisation
    # (SIGSEGV/SIGABRT in ~1-3% of runs, see engine-notes.md). Run the atexit
    # handlers and flush ourselves, then leave without finalising.
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)
