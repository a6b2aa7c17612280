"""`envguard run`, `envguard shell` and `envguard shell-hook`: living in the environment, activated as conda
activates it (CEP 32) by rattler's activator.

The modules: script.py (the activation script of a prefix for one shell), environ.py (that script run by a
real shell, the environment it leaves), launch.py (``exec`` of the command, the user's shell started
activated), sync.py (the environment made its lock first, through `envguard create`, as `uv run` does).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from envguard.activate.launch import NotRunnable
from envguard.activate.script import SHELLS, Activation, shell_for
from envguard.envs import Target

__all__ = ["SHELLS", "Activation", "NotRunnable", "activated_environ", "hook", "prepare", "run", "script_effects",
           "shell", "shell_for"]


def prepare(prefix: str | os.PathLike[str] | None, name: str | None, mode: str, *, say: Callable[[str], None],
            cwd: str | os.PathLike[str] | None = None) -> Target:
    """The environment to act in (picked as every command picks it), made its lock first as ``mode`` says:
    ``sync`` (create or sync it, re-locking a stale default lock), ``locked`` (a stale lock is exit 4),
    ``frozen`` (the lock as it is), ``none`` (the environment as it is). ``say``: a line for stderr."""
    from envguard.activate.sync import ensure, pick_target

    here = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    target = pick_target(prefix, name, here)
    ensure(target, mode, cwd=here, say=say)
    if not target.is_dir():
        from envguard.errors import UserError

        raise UserError("not a directory: no environment here", file=str(target), key="-p",
                        fix="pass the environment's directory")
    return target


def activated_environ(target: Target | Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables of a process run in ``target``, activated (bash's script, run by a shell),
    from ``base`` (default: this process's environment as the user's shell gave it). check and smoke run
    their probes in it, so that they see what a job started with `envguard run` sees."""
    from envguard.activate.environ import activated_environ as run_script
    from envguard.activate.environ import base_environ
    from envguard.activate.script import activation

    start = base_environ() if base is None else dict(base)
    return run_script(activation(Path(target), "bash", source=getattr(target, "source", ""), env=start), start)


def script_effects(prefix: Path, base: Mapping[str, str]) -> dict[str, list[str]]:
    """What each ``etc/conda/activate.d`` script of ``prefix`` changes, run alone: its path relative to the
    prefix -> the variables it sets, changes or unsets (only scripts that change some). For saying which
    script made a check fail that passes without activation; each script costs one shell run."""
    from envguard.activate.environ import script_effects as effects

    return effects(prefix, base)


def run(target: Target, argv: Sequence[str]) -> int:
    """Run ``argv`` in ``target``, activated, in envguard's place (``exec``): returns only where the platform
    has no ``exec``, with the command's exit code."""
    from envguard.activate.launch import exec_command

    return exec_command(argv, activated_environ(target))


def hook(target: Target, shell: str | None) -> str:
    """The activation script of ``target`` for ``shell`` (default: the user's ``$SHELL``, else bash), for
    ``eval "$(envguard shell-hook)"``."""
    from envguard.activate.environ import base_environ
    from envguard.activate.script import activation

    base = base_environ()
    return activation(Path(target), shell_for(shell, base), source=target.source, env=base).script


def shell(target: Target) -> int:
    """The user's shell (``$SHELL``, else bash), interactive, in ``target`` activated, with a prompt marker."""
    import shutil

    from envguard.activate.environ import activated_environ as run_script
    from envguard.activate.environ import base_environ, posix_shell
    from envguard.activate.launch import start_shell
    from envguard.activate.script import activation

    base = base_environ()
    shell_path = base.get("SHELL") or posix_shell(base)
    if not os.path.isabs(shell_path):
        shell_path = shutil.which(shell_path, path=base.get("PATH")) or posix_shell(base)
    kind = os.path.basename(shell_path)
    act = activation(Path(target), kind if kind in ("bash", "zsh", "fish") else "bash", source=target.source,
                     env=base)
    activated = {} if kind in ("bash", "zsh", "fish") else run_script(act, base)
    return start_shell(act, activated, base, shell_path)
