"""Which environment a command acts on: ``-p PREFIX``, ``-n NAME`` or the default.

One place for every command (create, check, smoke, diff, export, tune), so that a
name means the same prefix everywhere (:func:`resolve_target`). The search order follows conda's:
``ENVGUARD_ENVS_DIR`` first (envguard's own), then ``CONDA_ENVS_PATH`` /
``CONDA_ENVS_DIRS``, then the envs folder of a known conda root, then the
per-user and usual installer locations, then ``~/.conda/environments.txt``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from envguard.errors import UserError

_INSTALLER_ROOTS = ("miniforge3", "mambaforge", "miniconda3", "anaconda3")


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _split(value: str) -> list[Path]:
    return [Path(p.strip()).expanduser() for p in value.split(os.pathsep) if p.strip()]


def envs_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Every directory that may hold named environments, in search order, without repeats."""
    env = _env(env)
    dirs: list[Path] = []
    if env.get("ENVGUARD_ENVS_DIR"):
        dirs.append(Path(env["ENVGUARD_ENVS_DIR"]).expanduser())
    for var in ("CONDA_ENVS_PATH", "CONDA_ENVS_DIRS"):
        dirs += _split(env.get(var, ""))
    roots = [env.get("CONDA_ROOT"), env.get("MAMBA_ROOT_PREFIX")]
    if env.get("CONDA_EXE"):
        roots.append(str(Path(env["CONDA_EXE"]).resolve().parent.parent))
    dirs += [Path(r).expanduser() / "envs" for r in roots if r]
    home = Path(env.get("HOME") or Path.home())
    dirs += [home / ".conda" / "envs"] + [home / r / "envs" for r in _INSTALLER_ROOTS]
    seen: set[Path] = set()
    return [d for d in dirs if not (d in seen or seen.add(d))]  # type: ignore[func-returns-value]


def create_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where ``create -n NAME`` puts a new environment.

    ``ENVGUARD_ENVS_DIR`` when set; else the first entry of ``CONDA_ENVS_PATH``;
    else ``$CONDA_ROOT/envs``; else ``~/.conda/envs`` (conda's per-user envs dir).
    """
    env = _env(env)
    if env.get("ENVGUARD_ENVS_DIR"):
        return Path(env["ENVGUARD_ENVS_DIR"]).expanduser()
    for d in _split(env.get("CONDA_ENVS_PATH", "")):
        return d
    if env.get("CONDA_ROOT"):
        return Path(env["CONDA_ROOT"]).expanduser() / "envs"
    return Path(env.get("HOME") or Path.home()) / ".conda" / "envs"


def validate_name(name: str) -> str:
    if not name.strip() or name in (".", "..") or "/" in name or "\\" in name or name.startswith("."):
        raise UserError(f"invalid environment name {name!r}", key="-n/--name",
                        fix="give a plain name such as 'torch-dev', or use -p PREFIX for a path")
    return name


def find_env(name: str, env: Mapping[str, str] | None = None) -> Path:
    """The prefix of an existing environment called ``name``; a one-line error when none exists."""
    validate_name(name)
    dirs = envs_dirs(env)
    candidates = [d / name for d in dirs]
    home = Path(_env(env).get("HOME") or Path.home())
    try:  # conda records every environment it created here, wherever it lives
        for line in (home / ".conda" / "environments.txt").read_text(encoding="utf-8").splitlines():
            if line.strip() and Path(line.strip()).name == name:
                candidates.append(Path(line.strip()))
    except OSError:
        pass
    for c in candidates:
        if c.is_dir():
            return Path(os.path.abspath(c))
    raise UserError(f"no environment named {name!r} in {', '.join(str(d) for d in dirs)}", key="-n/--name",
                    fix="create it with `envguard create -n NAME`, or pass its path with -p PREFIX")


def default_target(env: Mapping[str, str] | None = None) -> Path:
    """The active environment: CONDA_PREFIX, else the running interpreter's prefix."""
    p = _env(env).get("CONDA_PREFIX")
    return Path(p) if p else Path(sys.prefix)


def resolve_target(prefix: str | os.PathLike[str] | None, name: str | None, *, existing: bool = True,
                   env: Mapping[str, str] | None = None) -> Path:
    """The environment a command acts on, as an absolute path.

    ``-p PREFIX`` is taken as given (relative to the working directory); ``-n NAME`` is looked up among the
    existing environments (``existing``) or placed where a new one goes (``create``). With neither, a
    command on an existing environment takes the active one; ``create`` needs to be told.
    """
    if prefix is not None and name is not None:
        raise UserError("give either -p PREFIX or -n NAME, not both", key="-p/-n")
    if name is not None:
        if existing:
            return find_env(name, env)
        return Path(os.path.abspath(create_dir(env) / validate_name(name)))
    if prefix is not None:
        return Path(os.path.abspath(os.path.expanduser(os.fspath(prefix))))
    if existing:
        return Path(os.path.abspath(default_target(env)))
    raise UserError("no target environment given", key="-p/-n", fix="pass -p PREFIX (a path) or -n NAME")
