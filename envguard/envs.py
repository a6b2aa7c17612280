"""Which environment a command acts on: ``-p PREFIX``, ``-n NAME`` or the default.

One place for every command (create, check, smoke, diff, export, tune), so that a name means the same
prefix everywhere and every report can say which environment it looked at and why
(:func:`resolve_target`). conda's conventions are the anchor:

1. ``-p/--prefix`` or ``-n/--name``, as given;
2. else the active conda environment (``CONDA_PREFIX``), unless it is a conda installation's base and the
   project names an environment of its own; else the activated virtualenv (``VIRTUAL_ENV``), unless it is
   the one envguard runs in;
3. else the environment the project's ``environment.yml`` names (``name:``), when it exists;
4. else nothing: exit 2 naming the flags. envguard's own interpreter, or the virtualenv a git hook runs in,
   is never picked for the user: it is what people check by mistake.

``create`` (``existing=False``) takes 1, else the spec's ``name:`` in the envs directory, as
``conda env create`` does. Names are looked up as conda does: ``ENVGUARD_ENVS_DIR`` first (envguard's own),
then ``CONDA_ENVS_PATH`` / ``CONDA_ENVS_DIRS``, then the envs folder of a known conda root, then the
per-user and usual installer locations, then ``~/.conda/environments.txt``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envguard import settings
from envguard.errors import UserError
from envguard.safeio import read_small_text

_INSTALLER_ROOTS = ("miniforge3", "mambaforge", "miniconda3", "anaconda3")
SPEC_FILE = "environment.yml"


class NoTargetError(UserError):
    """No environment to act on (none given, none active, none the project names, or the named one is
    missing). Exit 2 like any bad input; a git hook may choose to skip instead (``check --skip-missing``)."""


class Target(type(Path())):  # type: ignore[misc]  # the concrete Path class of this OS
    """The prefix a command acts on: a :class:`~pathlib.Path` that also says why it was chosen.

    ``why`` is a few words for a report's header ("given with -p", "the active conda environment
    (CONDA_PREFIX)", ...); ``source`` is one of ``prefix``, ``name``, ``active``, ``virtualenv``, ``project``.
    Paths derived from a Target (``/``, ``.parent``) are Targets with an empty ``why``.
    """

    why: str = ""
    source: str = ""
    prefix: Path | None = None  # an interpreter's Target: the environment it is in


def _target(path: str | os.PathLike[str], source: str, why: str) -> Target:
    t = Target(os.path.abspath(os.path.expanduser(os.fspath(path))))
    t.source, t.why = source, why
    return t


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    if env is not None:
        return env
    from envguard import CONDA_ROOT_AT_START

    if os.environ.get("CONDA_ROOT") == CONDA_ROOT_AT_START:
        return os.environ
    # conda-lock, once imported, claims envguard's own interpreter is a conda root: not where envs live
    shell = {k: v for k, v in os.environ.items() if k != "CONDA_ROOT"}
    if CONDA_ROOT_AT_START is not None:
        shell["CONDA_ROOT"] = CONDA_ROOT_AT_START
    return shell


def _split(value: str) -> list[Path]:
    return [Path(p.strip()).expanduser() for p in value.split(os.pathsep) if p.strip()]


def envs_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """Every directory that may hold named environments, in search order, without repeats."""
    env = _env(env)
    own = settings.path(settings.ENVS_DIR, env)
    dirs: list[Path] = [own] if own else []
    for var in ("CONDA_ENVS_PATH", "CONDA_ENVS_DIRS"):
        dirs += _split(env.get(var, ""))
    roots = [env.get("CONDA_ROOT"), env.get("MAMBA_ROOT_PREFIX")]
    if env.get("CONDA_EXE"):
        roots.append(str(Path(env["CONDA_EXE"]).resolve().parent.parent))
    dirs += [Path(r).expanduser() / "envs" for r in roots if r]
    home = Path(env.get("HOME") or Path.home())
    dirs += [home / ".conda" / "envs"] + [home / r / "envs" for r in _INSTALLER_ROOTS]
    return list(dict.fromkeys(dirs))  # first occurrence wins, order kept


def create_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where ``create -n NAME`` puts a new environment.

    ``ENVGUARD_ENVS_DIR`` when set; else the first entry of ``CONDA_ENVS_PATH``;
    else ``$CONDA_ROOT/envs``; else ``~/.conda/envs`` (conda's per-user envs dir).
    """
    env = _env(env)
    own = settings.path(settings.ENVS_DIR, env)
    if own:
        return own
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


def _lookup(name: str, env: Mapping[str, str] | None,
            aside: Callable[[Path], bool] | None = None) -> tuple[Path | None, list[Path]]:
    """(the prefix of the existing environment ``name`` or None, the directories searched). ``aside(path)``
    says whether an environment that is missing at ``path`` was moved aside by an interrupted create: then
    ``path`` is the answer (check names where it is), not a search that goes on and says nothing exists."""
    dirs = envs_dirs(env)
    candidates = [d / name for d in dirs]
    home = Path(_env(env).get("HOME") or Path.home())
    # conda records every environment it created here, wherever it lives
    for line in (read_small_text(home / ".conda" / "environments.txt", 16 << 20) or "").splitlines():
        if line.strip() and Path(line.strip()).name == name:
            candidates.append(Path(line.strip()))
    for c in candidates:
        if c.is_dir() or (aside is not None and not c.exists() and aside(c)):
            return Path(os.path.abspath(c)), dirs
    return None, dirs


def find_env(name: str, env: Mapping[str, str] | None = None, aside: Callable[[Path], bool] | None = None) -> Path:
    """The prefix of an existing environment called ``name``; a one-line error when none exists."""
    validate_name(name)
    found, dirs = _lookup(name, env, aside)
    if found is None:
        import shlex

        raise NoTargetError(f"no environment named {name!r} in {', '.join(str(d) for d in dirs)}",
                            key="-n/--name",
                            fix=f"create it with `envguard create -n {shlex.quote(name)}`, or pass its path with -p")
    return found


def spec_name(spec_files: Sequence[str | os.PathLike[str]]) -> tuple[str, Path] | None:
    """The ``name:`` of the first environment file that exists and names one, and that file.

    A file that cannot be read or parsed names nothing here: lint and lock report it with line and column.
    """
    from envguard.yamlio import load_fast

    for f in spec_files:
        path = Path(f)
        if not path.is_file():
            continue
        try:
            data = load_fast(path)
        except (UserError, OSError):
            continue
        name = data.get("name") if isinstance(data, dict) else None
        if isinstance(name, str) and name.strip():
            return name.strip(), path
    return None


def _shown(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def _is_base(prefix: Path, env: Mapping[str, str]) -> bool:
    """Whether ``prefix`` is a conda installation's base environment (it holds conda itself)."""
    roots = {r for r in (env.get("CONDA_ROOT"), env.get("MAMBA_ROOT_PREFIX")) if r}
    return (env.get("CONDA_DEFAULT_ENV") == "base" or (prefix / "condabin").is_dir()
            or any(os.path.abspath(r) == os.path.abspath(prefix) for r in roots))


def _is_own(prefix: str) -> bool:
    """Whether ``prefix`` is the environment envguard itself runs in (a tool's venv, a git hook's)."""
    return os.path.realpath(prefix) == os.path.realpath(sys.prefix)


def _activated_venv(env: Mapping[str, str]) -> str | None:
    """The virtualenv ``activate`` put in VIRTUAL_ENV, unless it is envguard's own (pre-commit and pipx set
    VIRTUAL_ENV to the tool's venv: checking that is checking envguard, not the project)."""
    venv = env.get("VIRTUAL_ENV")
    return venv if venv and not _is_own(venv) else None


def _own_venv_note(env: Mapping[str, str]) -> str:
    venv = env.get("VIRTUAL_ENV")
    return " is envguard's own" if venv and _is_own(venv) else ""


def resolve_target(prefix: str | os.PathLike[str] | None, name: str | None, *, existing: bool = True,
                   env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
                   spec_files: Sequence[str | os.PathLike[str]] | None = None,
                   aside: Callable[[Path], bool] | None = None) -> Target:
    """The environment a command acts on, as an absolute path that says why (:class:`Target`).

    ``-p PREFIX`` is taken as given (relative to the working directory); ``-n NAME`` is looked up among the
    existing environments (``existing``) or placed where a new one goes (``create``). Without either, see the
    module's order. ``spec_files`` are the environment files whose ``name:`` names the project's
    environment (default: ``environment.yml`` in ``cwd``). Raises :class:`NoTargetError` (exit 2) naming
    the flags when nothing fits. ``aside(path)``: whether a missing environment at ``path`` was moved aside
    by an interrupted create (``check`` passes it, to name where it is instead of saying nothing exists).
    """
    if prefix is not None and name is not None:
        raise UserError("give either -p PREFIX or -n NAME, not both", key="-p/-n")
    if prefix is not None:
        return _target(prefix, "prefix", "given with -p")
    if name is not None:
        if existing:
            return _target(find_env(name, env, aside), "name", f"named with -n {name}")
        return _target(create_dir(env) / validate_name(name), "name", f"named with -n {name}")
    envmap = _env(env)
    here = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    if spec_files:
        files = [Path(f) if os.path.isabs(f) else here / f for f in spec_files]
    else:
        from envguard.project import spec_file

        files = [spec_file(here)]  # from a subdirectory too, as git finds its repository
    named = spec_name(files)
    project: tuple[Path | None, str] = (None, "")
    if named is not None:
        name, spec = named
        why = f"named by {_shown(spec, here)} (name: {name})"
        if not existing:
            try:
                validate_name(name)
            except UserError as e:
                raise UserError(e.problem, file=str(spec), key="name",
                                fix="give the environment a plain name, or pass -p PREFIX / -n NAME") from None
            return _target(create_dir(env) / name, "project", why)
        found, _dirs = _lookup(name, env, aside) if "/" not in name and "\\" not in name else (None, [])
        project = (found, why)
    if existing:
        active = envmap.get("CONDA_PREFIX")
        if active and not (project[0] is not None and _is_base(Path(active), envmap)):
            return _target(active, "active", "the active conda environment (CONDA_PREFIX)")
        venv = _activated_venv(envmap)
        if venv is not None:
            return _target(venv, "virtualenv", "the activated virtualenv (VIRTUAL_ENV)")
        if project[0] is not None:
            return _target(project[0], "project", project[1])
    if named is not None and existing:
        where = ", ".join(str(d) for d in envs_dirs(env)[:3])
        why_not = f"{_shown(named[1], here)} names {named[0]!r}, which does not exist (looked in {where}, ...)"
        fix = "build it with `envguard create`, or pass -p PREFIX or -n NAME"
    else:
        present = [_shown(f, here) for f in files if f.is_file()]
        # the file(s) that were read (`create -f other.yml` reads other.yml, not environment.yml)
        why_not = (f"{' and '.join(present)} {'names' if len(present) == 1 else 'name'} no environment (no `name:`)"
                   if present else f"no {' or '.join(_shown(f, here) for f in files)} here names one")
        fix = ("pass -p PREFIX (e.g. -p .venv) or -n NAME, or activate a conda environment or virtualenv"
               if existing else "pass -p PREFIX (a path) or -n NAME, or add `name:` to the environment file")
    active_part = "" if not existing else ("no active conda environment (CONDA_PREFIX) or virtualenv "
                                           f"(VIRTUAL_ENV{_own_venv_note(envmap)}), and ")
    raise NoTargetError(f"no environment to act on: no -p/--prefix or -n/--name given, {active_part}{why_not}",
                        key="-p/-n", fix=fix)


def _interpreter_in(prefix: Path) -> Path | None:
    candidates = [prefix / "python.exe", prefix / "Scripts" / "python.exe"] if sys.platform == "win32" else [
        prefix / "bin" / "python", prefix / "bin" / "python3"]
    return next((c for c in candidates if c.is_file()), None)


def resolve_python(prefix: Path | None = None, name: str | None = None, python: Path | None = None, *,
                   env: dict[str, str] | None = None, cwd: Path | None = None) -> Path:
    """The interpreter to probe: ``--python PATH``, else the environment :func:`resolve_target` picks
    (``-p``, ``-n``, the active conda environment, the one environment.yml names). Relative paths are taken
    from the working directory. Returns a :class:`Target`: ``.why`` says how it was chosen."""
    given = [o for o, v in (("-p/--prefix", prefix), ("-n/--name", name), ("--python", python)) if v]
    if len(given) > 1:
        raise UserError(f"{' and '.join(given)} were both given", fix="name the environment one way only")
    if python is not None:
        p = Target(os.path.abspath(Path(python).expanduser()))
        p.source, p.why = "python", "given with --python"
        if not p.is_file() or not os.access(p, os.X_OK):
            raise UserError("no executable Python interpreter at this path", file=str(p),
                            fix="pass the environment's python, e.g. <prefix>/bin/python")
        return p
    pre = resolve_target(prefix, name, env=env, cwd=cwd)
    if not pre.is_dir():
        import shlex

        raise UserError("prefix does not exist", file=str(pre),
                        fix=f"create it with `envguard create -p {shlex.quote(str(pre))}` or pass an existing prefix")
    exe = _interpreter_in(pre)
    if exe is None:
        raise UserError("no Python interpreter in this environment (looked for bin/python)", file=str(pre),
                        fix="pass a conda prefix or virtualenv that contains python, or --python PATH")
    found = Target(exe)
    found.source, found.why = pre.source, pre.why
    found.prefix = pre  # the environment, for fixes that name it
    return found


@dataclass(frozen=True)
class LockChoice:
    """Which lock judges an environment (``path``; None: none) and why, in a few words for the report's first
    line. ``problem``: the lock envguard built the environment from changed since, or is gone (said as a
    finding); ``recorded``: that lock. Unpacks as ``(path, why)``."""

    path: Path | None
    why: str = ""
    problem: str = ""
    recorded: Path | None = None

    def __iter__(self) -> Iterator[Any]:
        return iter((self.path, self.why))


def recorded_lock(target: str | os.PathLike[str]) -> LockChoice | None:
    """The lock ``envguard create`` recorded in the environment's fingerprint (envguard.fingerprint), with
    what became of it: the same file (the lock envguard built it from), another file at that path (changed
    since: still that lock, and said so), or none (gone: no lock, and said so). None when no fingerprint
    records one (not built by envguard, or by one that did not record it)."""
    from envguard.fingerprint import read_fingerprint

    fp = read_fingerprint(target)
    path = fp.recorded_lock() if fp is not None else None
    if fp is None or path is None:
        return None
    why = "the lock envguard built it from"
    import hashlib

    from envguard.safeio import open_regular

    try:  # a FIFO put there must not block check
        with open_regular(path) as fh:
            h = hashlib.sha256()
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
            now = h.hexdigest()
    except FileNotFoundError:
        return LockChoice(None, f"{why}, {path}, is gone", f"{path}, the lock envguard built this environment "
                          "from, is gone: it is judged by what envguard recorded when it built it", path)
    except OSError as e:
        return LockChoice(None, f"{why}, {path}, cannot be read", f"{path}, the lock envguard built this "
                          f"environment from, cannot be read ({e.strerror or e})", path)
    if now != fp.lock_sha256:
        return LockChoice(path, f"{why}, changed since", f"{path}, the lock envguard built this environment from, "
                          "has changed since: the environment is judged by the lock as it is now", path)
    return LockChoice(path, why, "", path)


def lock_for(target: Path, lockfile: str | os.PathLike[str] | None, *,
             cwd: str | os.PathLike[str] | None = None,
             env: Mapping[str, str] | None = None) -> LockChoice:
    """Which lock an environment is judged against, and why (:class:`LockChoice`).

    In this order: the lock given with ``--lockfile``; the lock envguard built it from (recorded in its
    fingerprint by ``envguard create``: when that lock changed since or is gone, the choice says so and no
    other lock takes its place); the project's conda-lock.yml (beside the environment.yml found from
    ``cwd``, envguard.project) when the environment is the project's: the one its spec names, or one inside
    the project's directory (``./.venv``). Else no lock: a lock in the working directory says nothing
    about an unrelated environment, and judging it by that lock gives errors whose fixes do not apply.
    """
    if lockfile is not None:
        return LockChoice(Path(lockfile), "given with --lockfile")
    recorded = recorded_lock(target)
    if recorded is not None:
        return recorded
    from envguard.project import lock_for_spec, spec_file

    spec = spec_file(cwd)
    lock, whose = lock_for_spec(spec), "the project's lock"
    if spec.is_file() and not lock.is_file():  # a project with variants: the lock of the one this machine runs
        from envguard.variants import machine_variant

        mine = machine_variant(spec)
        if mine is not None:
            lock, whose = mine[0].lockfile, f"the project's lock of variant {mine[0].name}, this machine's"
    if not (spec.is_file() and lock.is_file()):
        return LockChoice(None)
    prefix = Path(os.path.abspath(target))
    if getattr(target, "source", "") == "project" or prefix.is_relative_to(spec.parent):
        return LockChoice(lock, whose)
    named = spec_name([spec])
    if named is not None and "/" not in named[0] and "\\" not in named[0]:
        found, _dirs = _lookup(named[0], env)
        # where the name is found, or where create puts it (also while a killed swap has it moved aside)
        places = [p for p in (found, create_dir(env) / named[0]) if p is not None]
        if any(os.path.realpath(p) == os.path.realpath(prefix) for p in places):
            return LockChoice(lock, f"{whose}: {spec.name} names this environment")
    return LockChoice(None)
