"""The activation script of a prefix for one shell, as conda's CEP 32 describes activation, written by
rattler's activator (``rattler.shell.activate``): the prefix's bin directories in front of PATH,
``CONDA_PREFIX``, the variables of ``conda-meta/state`` and ``etc/conda/env_vars.d``, then every
``etc/conda/activate.d`` script of that shell in lexicographic order; the environment active before
(``CONDA_PREFIX``) is deactivated first (its variables unset, its ``deactivate.d`` scripts run).

envguard adds what rattler leaves out and CEP 32 asks for: ``CONDA_DEFAULT_ENV`` (the environment's name for
one in an envs directory, else its path) and ``CONDA_PROMPT_MODIFIER`` (the prompt marker ``(name) ``).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envguard.errors import UserError

#: the shells `envguard shell-hook --shell` writes for; "cmd" is rattler's cmd_exe
SHELLS = ("bash", "zsh", "fish", "powershell", "cmd")

# rattler writes a prefix into double quotes (and bash's CONDA_PREFIX unquoted): a path holding one of these
# would be read by the shell as something else than the path
_UNSAFE_IN_PATH = ('"', "$", "`", "\\", "\n", "\r")


@dataclass(frozen=True)
class Activation:
    """What activating ``prefix`` takes in ``shell``: the script (rattler's, then envguard's additions) and the
    environment's display name (the prompt marker's)."""

    prefix: Path
    shell: str
    script: str
    display_name: str


def display_name(prefix: Path, source: str = "") -> str:
    """``CONDA_DEFAULT_ENV`` as conda sets it: the name of an environment found by name (``-n``, the one
    environment.yml names), else its path."""
    return prefix.name if source in ("name", "project") else str(prefix)


def shell_for(name: str | None, env: Mapping[str, str] | None = None) -> str:
    """The shell to write for: ``name`` when given (one of :data:`SHELLS`), else ``$SHELL``'s when it is one
    of them, else bash."""
    if name is not None:
        if name not in SHELLS:
            raise UserError(f"unknown shell {name!r}", key="--shell", fix=f"use one of {', '.join(SHELLS)}")
        return name
    current = os.path.basename((env if env is not None else os.environ).get("SHELL", ""))
    return current if current in SHELLS else "bash"


def check_prefix_path(prefix: Path) -> None:
    """Refuse a prefix whose path the activation scripts cannot carry literally (exit 2): rattler quotes a
    path with double quotes, where ``$``, a backquote, ``"`` and ``\\`` mean something else."""
    bad = [c for c in _UNSAFE_IN_PATH if c in str(prefix)]
    if bad:
        raise UserError(f"the environment's path holds {bad[0]!r}, which the activation scripts of a shell cannot "
                        "carry as it is", file=str(prefix), key="-p",
                        fix="move or rebuild the environment at a path without $, `, \", \\ or line breaks")


def check_state(prefix: Path) -> None:
    """Refuse a ``conda-meta/state`` rattler's activator would misread (exit 2): one without an ``env_vars``
    object (rattler fails on it), or a value it would expand or cut (it writes values in double quotes;
    conda keeps them literal, and envguard lints them in environment.yml: EG140)."""
    path = prefix / "conda-meta" / "state"
    if not path.exists():  # most environments: nothing imported, nothing read (bench/run.py)
        return
    from envguard.variables import UNSAFE, read_state

    state = read_state(prefix)
    env = state.get("env_vars") if state is not None else None
    if not isinstance(env, dict):
        raise UserError("not a JSON object with an `env_vars` object, which activation reads", file=str(path),
                        key="env_vars", fix="restore it (`envguard create` writes it from the lock), or remove it")
    for key, value in env.items():
        bad = [c for c in UNSAFE if c in str(value)]
        if bad:
            raise UserError(f"variable {key}'s value holds {bad[0]!r}, which rattler's activation would expand or "
                            "cut (conda keeps it literal)", file=str(path), key=f"env_vars.{key}",
                            fix="set a value without \", $, `, \\ or line breaks (`conda env config vars set`, or "
                                "variables: in environment.yml and `envguard lock`)")


def activation(prefix: Path, shell: str, *, source: str = "", env: Mapping[str, str] | None = None) -> Activation:
    """The activation of ``prefix`` for ``shell`` (one of :data:`SHELLS`), from the environment ``env``
    (default: this process's): its PATH is the one rattler prepends to, its ``CONDA_PREFIX`` the environment
    deactivated first (when it still exists)."""
    from rattler.shell import ActivationVariables, PathModificationBehavior, Shell, activate

    env = os.environ if env is None else env
    check_prefix_path(prefix)
    check_state(prefix)
    current = env.get("CONDA_PREFIX") or None
    # the same prefix too: rattler then deactivates it first (its bin directories leave PATH, its
    # deactivate.d scripts run), as conda reactivates, so that nothing appears twice
    previous = Path(current) if current and os.path.isdir(current) else None
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    # Replace: rattler computes the whole PATH (with Prepend it writes the old PATH out and then appends
    # ${PATH} again, so every entry would appear twice)
    variables = ActivationVariables(current_prefix=previous, current_path=path or [os.defpath],
                                    path_modification_behavior=PathModificationBehavior.Replace)
    kind = {"bash": Shell.bash, "zsh": Shell.zsh, "fish": Shell.fish, "powershell": Shell.powershell,
            "cmd": Shell.cmd_exe}[shell]
    result = activate(prefix, variables, kind)
    name = display_name(prefix, source)
    extra = {"CONDA_DEFAULT_ENV": name, "CONDA_PROMPT_MODIFIER": f"({os.path.basename(name) or name}) "}
    return Activation(prefix, shell, result.script.rstrip("\n") + "\n" + _exports(shell, extra), name)


def _exports(shell: str, values: Mapping[str, str]) -> str:
    """Lines that set ``values`` in ``shell``, each value taken literally."""
    lines = []
    for key, value in values.items():
        if shell in ("bash", "zsh"):
            lines.append(f"export {key}={shlex.quote(value)}")
        elif shell == "fish":
            quoted = value.replace("\\", "\\\\").replace("'", "\\'")
            lines.append(f"set -gx {key} '{quoted}'")
        elif shell == "powershell":
            lines.append(f"${{Env:{key}}} = '{value.replace(chr(39), chr(39) * 2)}'")
        else:  # cmd: within "..." only % is special
            lines.append(f'@SET "{key}={value.replace("%", "%%")}"')
    return "\n".join(lines) + "\n"
