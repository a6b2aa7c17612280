"""Starting what runs in the environment: a command in envguard's place (``exec``), or the user's shell.

``exec`` (POSIX): no envguard process stays between a scheduler and the job, so SIGINT, SIGTERM and SIGHUP
reach the command itself and its exit status (143 for a SIGTERM it dies of) is what the parent sees.
Python ignores SIGPIPE and SIGXFSZ for itself, and an ignored signal stays ignored across ``exec``: both are
put back to their defaults first, as a shell would have them, and no signal stays blocked. Where there is
no ``exec`` (Windows) the command is a child and its exit code is returned.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from envguard.activate.script import Activation
from envguard.errors import UserError


class NotRunnable(UserError):
    """The command cannot be started: not found (exit 127) or not executable (126), as a shell says it."""

    def __init__(self, message: str, status: int, fix: str) -> None:
        super().__init__(message, fix=fix)
        self.exit_code = status  # type: ignore[assignment]  # a shell's codes, outside envguard's own


def _restore_signals() -> None:
    """The dispositions envguard was started with: Python's own changes undone (SIGPIPE, SIGXFSZ), a signal
    the caller ignored ignored again (SIGINT of a script's ``cmd &``, SIGHUP under ``nohup``: envguard's
    handlers replaced them); the other handled signals are reset by ``exec`` itself."""
    from envguard import SIGNALS_IGNORED_AT_START

    for name in ("SIGPIPE", "SIGXFSZ"):
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, signal.SIG_DFL)
    for sig in SIGNALS_IGNORED_AT_START:
        signal.signal(sig, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def exec_command(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """Replace this process with ``argv`` run with ``environ`` (its PATH finds the program); returns only
    where the platform has no ``exec``, with the command's exit code."""
    if not argv:
        raise UserError("no command to run", key="COMMAND", fix="e.g. `envguard run -- python train.py`")
    _flush()
    if os.name != "posix":
        import subprocess

        exe = _which(argv[0], environ)
        return subprocess.call([exe, *argv[1:]], env=dict(environ))
    exe = _which(argv[0], environ)
    _restore_signals()
    try:
        os.execve(exe, list(argv), dict(environ))
    except OSError as e:  # found but not startable: a directory, no permission, a bad interpreter line
        raise NotRunnable(f"cannot run {exe}: {e.strerror or e}", 126,
                          "check that it is an executable file for this machine") from None
    raise AssertionError("unreachable")  # execve returns only by raising


def _which(program: str, environ: Mapping[str, str]) -> str:
    """The program as the activated environment's PATH finds it (a path with a slash is taken as given)."""
    import shutil

    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.exists(program):
            raise NotRunnable(f"command not found: {program}", 127, "check the path")
        return program
    found = shutil.which(program, path=environ.get("PATH") or os.defpath)
    if found is None:
        raise NotRunnable(f"command not found in the environment or on PATH: {program}", 127,
                          "install it into the environment (add it to environment.yml, then `envguard lock`), or "
                          "give its path")
    return found


def start_shell(act: Activation, activated: Mapping[str, str], base: Mapping[str, str], shell_path: str) -> int:
    """Replace this process with the user's interactive shell, activated: bash and zsh read their usual
    startup files first and then the activation (rattler's script, the prompt marker), so that a
    ``conda activate`` in ``~/.bashrc`` does not undo it; fish runs it as its init command; any other shell
    starts with the activated environment (``activated``) and ``PS1`` marked. ``exit`` leaves it."""
    kind = os.path.basename(shell_path)
    marker = f"({os.path.basename(act.display_name) or act.display_name}) "
    if kind == "bash":
        rc = _temp_file(f"[ -f ~/.bashrc ] && . ~/.bashrc\n{act.script}PS1={shlex.quote(marker)}\"${{PS1-}}\"\n",
                        ".bash")
        return exec_command([shell_path, "--rcfile", rc, "-i"], base)
    if kind == "zsh":
        zdot = tempfile.mkdtemp(prefix="envguard-zsh-")
        user = base.get("ZDOTDIR") or base.get("HOME") or str(Path.home())
        restore = (f"export ZDOTDIR={shlex.quote(base['ZDOTDIR'])}\n" if "ZDOTDIR" in base else "unset ZDOTDIR\n")
        Path(zdot, ".zshrc").write_text(
            f"{restore}[ -f {shlex.quote(user)}/.zshrc ] && . {shlex.quote(user)}/.zshrc\n{act.script}"
            f"PROMPT={shlex.quote(marker)}\"${{PROMPT-}}\"\nrm -rf -- {shlex.quote(zdot)}\n", encoding="utf-8")
        return exec_command([shell_path, "-i"], {**base, "ZDOTDIR": zdot})
    if kind == "fish":
        init = _temp_file(act.script + "functions -c fish_prompt __envguard_prompt 2>/dev/null\n"
                          f"function fish_prompt; printf '%s' {shlex.quote(marker)}; __envguard_prompt; end\n",
                          ".fish")
        return exec_command([shell_path, "-i", "--init-command", f"source {shlex.quote(init)}; rm -f -- "
                             f"{shlex.quote(init)}"], base)
    return exec_command([shell_path, "-i"], {**activated, "PS1": marker + activated.get("PS1", "$ ")})


def _temp_file(text: str, suffix: str) -> str:
    """A file the started shell reads once; bash's rc file removes itself, fish's init command removes it."""
    fd, path = tempfile.mkstemp(prefix="envguard-shell-", suffix=suffix)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        if suffix == ".bash":
            text += f"rm -f -- {shlex.quote(path)}\n"
        fh.write(text)
    return path
