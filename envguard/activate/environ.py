"""The environment a command runs in: the activation script run by a real shell, and the variables it left.

Why a shell at all: an ``activate.d`` script is shell code (it may compute paths, call programs, source
other files), so only a shell can say what it sets. rattler's activator writes the script; ``bash`` (else
``/bin/sh``) runs it, and the environment it ends with is read back NUL-separated (``env -0``; envguard's
own interpreter where ``env`` has no ``-0``), so that values holding line breaks survive. The script's own
output goes to stderr and it reads nothing: standard output and input are the command's alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from envguard.activate.script import Activation
from envguard.errors import EnvguardError, ExitCode

# envguard's interpreter, isolated (-I: no PYTHON* variable of the activated environment applies to it)
_DUMP = "import os,sys;sys.stdout.buffer.write(b''.join(k+b'='+v+b'\\0' for k,v in os.environb.items()))"


def posix_shell(env: Mapping[str, str]) -> str:
    """bash where there is one (activate.d scripts are written for bash and zsh, as conda sources them in
    the user's shell), else the system's ``sh``."""
    return shutil.which("bash", path=env.get("PATH") or os.defpath) or "/bin/sh"


def base_environ() -> dict[str, str]:
    """This process's environment as the user's shell gave it: conda-lock, once imported, sets CONDA_ROOT
    in envguard's own process (envguard.envs), which the command must not inherit."""
    from envguard import CONDA_ROOT_AT_START

    env = dict(os.environ)
    env.pop("CONDA_ROOT", None)
    if CONDA_ROOT_AT_START is not None:
        env["CONDA_ROOT"] = CONDA_ROOT_AT_START
    return env


def activated_environ(act: Activation, env: Mapping[str, str]) -> dict[str, str]:
    """The environment after ``act`` (a bash script) ran in a shell started with ``env``.

    Raises EnvguardError (exit 6) naming the prefix when an activation script ends the shell, so that a
    command never runs half-activated."""
    py = sys.executable
    dump = f"env -0 2>/dev/null || exec {_sh_quote(py)} -I -S -c {_sh_quote(_DUMP)}"
    code = "{\n" + act.script + "\n} </dev/null >&2\n" + dump + "\n"
    try:
        proc = subprocess.run([posix_shell(env), "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              env=dict(env), check=False)
    except OSError as e:
        raise EnvguardError(f"could not start a shell to activate {act.prefix}: {e.strerror or e}",
                            fix="make bash or /bin/sh available on PATH", exit_code=ExitCode.BACKEND) from None
    out = proc.stdout
    if proc.returncode != 0 or not out.endswith(b"\0"):
        scripts = act.prefix / "etc" / "conda" / "activate.d"
        raise EnvguardError(f"activating {act.prefix} failed: a script of its {scripts} ended the shell "
                            f"(exit {proc.returncode}) before the environment was set",
                            fix="run `bash -x` on that directory's scripts to see which one exits, and fix or "
                                "remove it (it belongs to a package of the environment)",
                            exit_code=ExitCode.BACKEND)
    result: dict[str, str] = {}
    for item in out[:-1].split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            result[os.fsdecode(key)] = os.fsdecode(value)
    # what the shell itself changed, not the activation: the last command's path, one more nesting level
    result.pop("_", None)
    if "SHLVL" in env:
        result["SHLVL"] = env["SHLVL"]
    else:
        result.pop("SHLVL", None)
    return result


def _sh_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def script_effects(prefix: Path, base: Mapping[str, str]) -> dict[str, list[str]]:
    """Each ``activate.d/*.sh`` script of ``prefix`` run alone by a shell started with ``base`` plus what
    activation sets before the scripts (``CONDA_PREFIX``, the bin directory on PATH): the variables it
    changes (set, changed or unset), by its path relative to the prefix; a script that ends its shell
    changes ``(exits)``."""
    scripts = prefix / "etc" / "conda" / "activate.d"
    try:
        names = sorted(n for n in os.listdir(scripts) if n.endswith(".sh"))
    except OSError:
        return {}
    start = dict(base)
    start["CONDA_PREFIX"] = str(prefix)
    start["PATH"] = os.pathsep.join([str(prefix / "bin"), *[p for p in base.get("PATH", "").split(os.pathsep) if p]])
    before = _dump_after(":", start) or {}
    out: dict[str, list[str]] = {}
    for name in names:
        after = _dump_after(f". {_sh_quote(str(scripts / name))}", start)
        rel = f"etc/conda/activate.d/{name}"
        if after is None:
            out[rel] = ["(exits)"]
            continue
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        if changed:
            out[rel] = changed
    return out


def _dump_after(code: str, env: Mapping[str, str]) -> dict[str, str] | None:
    """The environment a shell started with ``env`` has after ``code`` (None when ``code`` ended it)."""
    py = sys.executable
    dump = f"env -0 2>/dev/null || exec {_sh_quote(py)} -I -S -c {_sh_quote(_DUMP)}"
    try:
        proc = subprocess.run([posix_shell(env), "-c", "{\n" + code + "\n} </dev/null >/dev/null 2>&1\n" + dump],
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=dict(env), check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0 or not proc.stdout.endswith(b"\0"):
        return None
    result = {}
    for item in proc.stdout[:-1].split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key:
            result[os.fsdecode(key)] = os.fsdecode(value)
    for noise in ("_", "SHLVL", "PWD", "OLDPWD"):
        result.pop(noise, None)
    return result
