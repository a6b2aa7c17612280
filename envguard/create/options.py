"""What one ``envguard create`` is asked to do: every option of :func:`envguard.create.create`, with its
default, in one frozen value that the command layer (envguard/cli/, workflow.py among it) and the tests build."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envguard.create.report import CreateReporter


@dataclass(frozen=True)
class CreateOptions:
    """``prefix`` (or ``name``, else the spec's ``name:``): the environment to make. ``lockfile``: default
    ``conda-lock.yml`` beside the first ``env_files`` entry, else in ``cwd``. ``force`` rebuilds a match;
    ``locked`` refuses a stale lock, ``frozen`` installs it without reading the spec. ``backend``: rattler
    (default), micromamba, mamba or conda. ``timeout``: seconds to wait for another create of this prefix.
    ``cache_dir``: the package cache (default: envguard.settings.package_cache_dir). ``platform``: default
    the host's. ``offline``: no network, only the package cache and local channels (envguard.create.offline;
    a re-lock then solves offline too, envguard.settings.set_offline). ``variant``: the declared variant to
    build in a project with variants (default: the one this machine runs, envguard.create.variant)."""

    prefix: str | os.PathLike[str] | None = None
    name: str | None = None
    lockfile: str | os.PathLike[str] | None = None
    env_files: Sequence[str | os.PathLike[str]] = ()
    force: bool = False
    locked: bool = False
    frozen: bool = False
    backend: str | None = None
    timeout: float | None = None
    reporter: CreateReporter | None = None
    cache_dir: str | os.PathLike[str] | None = None
    cwd: str | os.PathLike[str] | None = None
    platform: str | None = None
    offline: bool = False
    variant: str | None = None
