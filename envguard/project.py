"""Where the project is: the directory of its environment.yml, found upward from the working directory.

git, uv and pixi find their project from any subdirectory; so does envguard. The search goes from the
working directory up to the first repository root (a directory holding ``.git`` or ``.hg``), the home
directory or the filesystem's root, whichever comes first, and stops at the first directory holding an
environment file: a subproject's own environment.yml wins over its repository's. Above a repository root
nothing is looked at: an environment.yml there belongs to some other project.

Which lock belongs to which environment file is decided here too, once, for every command:
:func:`lock_for_spec` (a spec's lock: the one named with ``--lockfile``, else ``conda-lock.yml`` beside the
spec, conda-lock's own default name), :func:`spec_for_lock` (the other way: ``environment.yml`` beside a
lock) and :func:`lock_sources` (the spec files a lock was made from: the ones it records, else the one
beside it). Nothing else spells ``conda-lock.yml`` (tests/test_one_rule.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

SPEC_NAMES = ("environment.yml", "environment.yaml")
LOCK_NAME = "conda-lock.yml"  # conda-lock's default --lockfile, so that `conda-lock` and envguard find the same file
_REPO_MARKERS = (".git", ".hg")


def project_dir(cwd: str | os.PathLike[str] | None = None) -> Path:
    """The directory of the project's environment file, else ``cwd`` itself (absolute either way)."""
    here = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    home = os.path.abspath(os.path.expanduser("~"))
    d = here
    while True:
        if any((d / n).is_file() for n in SPEC_NAMES):
            return d
        if any((d / m).exists() for m in _REPO_MARKERS) or str(d) == home or d.parent == d:
            return here
        d = d.parent


def spec_file(cwd: str | os.PathLike[str] | None = None) -> Path:
    """The project's environment file (``environment.yml`` of :func:`project_dir`, which may not exist)."""
    d = project_dir(cwd)
    return next((d / n for n in SPEC_NAMES if (d / n).is_file()), d / SPEC_NAMES[0])


def lock_for_spec(spec: str | os.PathLike[str], lockfile: str | os.PathLike[str] | None = None, *,
                  variant: str | None = None) -> Path:
    """The lock that belongs to the environment file ``spec``: ``lockfile`` when one was named (``--lockfile``:
    the file a user names is the file used, wherever it is), else :data:`LOCK_NAME` beside ``spec``.

    ``variant`` names one variant of a multi-variant project (#37, envguard.variants): its lock is
    ``conda-lock.<variant>.yml`` beside the spec. Which variants a project declares is not decided here."""
    if lockfile is not None:
        return Path(lockfile)
    name = LOCK_NAME if variant is None else LOCK_NAME.replace(".yml", f".{variant}.yml")
    return Path(spec).parent / name


def spec_for_lock(lockfile: str | os.PathLike[str]) -> Path:
    """The environment file a lock belongs to by where it lies: ``environment.yml`` beside it (which may
    not exist), the converse of :func:`lock_for_spec`."""
    return Path(lockfile).parent / SPEC_NAMES[0]


def lock_sources(lockfile: str | os.PathLike[str], recorded: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """The environment files a lock was made from: the ``recorded`` ones (its ``metadata.sources``, relative to
    the lock's directory, as conda-lock writes them), else :func:`spec_for_lock`."""
    base = Path(lockfile).parent
    return [base / s for s in recorded] or [spec_for_lock(lockfile)]
