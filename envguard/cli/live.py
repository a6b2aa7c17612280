"""The commands that live in an environment: run (a command in it), shell (an interactive shell in it) and
shell-hook (its activation script, for eval). Registered by envguard/cli/__init__.py.

They write nothing on standard output but what they are for (shell-hook's script; run's and shell's
output is the command's own); what envguard has to say (a sync) is one line each on stderr."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envguard.cli.app import flag, name_option, option, prefix_option, run_state, say_interrupted

if TYPE_CHECKING:
    from envguard.envs import Target

_SYNC_HELP = {
    "locked": "Refuse a stale lock (exit 4) instead of re-locking it; a drifted or missing environment is still "
              "built from the lock.",
    "frozen": "Make the environment the lock as it is, without reading the environment file.",
    "no_sync": "Use the environment as it is: no lock is read, nothing is built.",
}


def _say(text: str) -> None:
    from envguard.redact import escape_controls, redact

    sys.stderr.write(f"envguard: {redact(escape_controls(text))}\n")
    sys.stderr.flush()


def _mode(locked: bool, frozen: bool, no_sync: bool) -> str:
    given = [n for n, v in (("--locked", locked), ("--frozen", frozen), ("--no-sync", no_sync)) if v]
    if len(given) > 1:
        from envguard.errors import UserError

        raise UserError(f"{' and '.join(given)} exclude each other", key=given[1],
                        fix="--locked refuses a stale lock, --frozen installs the lock as it is, --no-sync runs the "
                            "environment as it is: pass one of them")
    return "locked" if locked else "frozen" if frozen else "none" if no_sync else "sync"


def _prepare(prefix: Path | None, name: str | None, mode: str) -> "Target":
    from envguard.activate import prepare

    try:
        return prepare(prefix, name, mode, say=_say)
    except KeyboardInterrupt as e:  # a sync was interrupted: say what the target holds, as create does
        run_state["interrupt_reported"] = True
        raise typer.Exit(say_interrupted(str(e) or "interrupted")) from None


# ---------------------------------------------------------------- run


def run_cmd(
    command: Annotated[list[str], typer.Argument(metavar="COMMAND [ARGS]...",
        help="The command and its arguments (after `--` when an argument starts with -).")],
    prefix: Annotated[Path | None, prefix_option(help="Environment to run in.")] = None,
    name: Annotated[str | None, name_option(help="Named environment to run in.")] = None,
    locked: Annotated[bool, flag("--locked", help=_SYNC_HELP["locked"])] = False,
    frozen: Annotated[bool, flag("--frozen", help=_SYNC_HELP["frozen"])] = False,
    no_sync: Annotated[bool, flag("--no-sync", help=_SYNC_HELP["no_sync"])] = False,
) -> None:
    """Run a command in the environment, activated as conda activates it, after making it its lock."""
    from envguard.activate import run

    target = _prepare(prefix, name, _mode(locked, frozen, no_sync))
    raise typer.Exit(run(target, command))


# ---------------------------------------------------------------- shell


def shell_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Environment to start the shell in.")] = None,
    name: Annotated[str | None, name_option(help="Named environment to start the shell in.")] = None,
    locked: Annotated[bool, flag("--locked", help=_SYNC_HELP["locked"])] = False,
    frozen: Annotated[bool, flag("--frozen", help=_SYNC_HELP["frozen"])] = False,
    no_sync: Annotated[bool, flag("--no-sync", help=_SYNC_HELP["no_sync"])] = False,
) -> None:
    """Start your shell ($SHELL) in the environment, activated, with a prompt marker; `exit` leaves it."""
    from envguard.activate import shell

    target = _prepare(prefix, name, _mode(locked, frozen, no_sync))
    raise typer.Exit(shell(target))


# ---------------------------------------------------------------- shell-hook


def shell_hook_cmd(
    prefix: Annotated[Path | None, prefix_option(help="Environment to activate.")] = None,
    name: Annotated[str | None, name_option(help="Named environment to activate.")] = None,
    shell_name: Annotated[str | None, option("--shell", metavar="SHELL",
        help="bash, zsh, fish, powershell or cmd (default: $SHELL's, else bash).")] = None,
    locked: Annotated[bool, flag("--locked", help=_SYNC_HELP["locked"])] = False,
    frozen: Annotated[bool, flag("--frozen", help=_SYNC_HELP["frozen"])] = False,
    no_sync: Annotated[bool, flag("--no-sync", help=_SYNC_HELP["no_sync"])] = False,
) -> None:
    """Print the environment's activation script, for `eval "$(envguard shell-hook -p ENV)"`."""
    from envguard.activate import hook, shell_for

    shell_for(shell_name)  # an unknown --shell is refused before anything is synced
    target = _prepare(prefix, name, _mode(locked, frozen, no_sync))
    sys.stdout.write(hook(target, shell_name))
    raise typer.Exit(0)
