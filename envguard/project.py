"""Where the project is: the directory of its environment.yml, found upward from the working directory.

git, uv and pixi find their project from any subdirectory; so does envguard. The search goes from the
working directory up to the first repository root (a directory holding ``.git`` or ``.hg``), the home
directory or the filesystem's root, whichever comes first, and stops at the first directory holding an
environment file: a subproject's own environment.yml wins over its repository's. Above a repository root
nothing is looked at: an environment.yml there belongs to some other project.
"""

from __future__ import annotations

import os
from pathlib import Path

SPEC_NAMES = ("environment.yml", "environment.yaml")
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
