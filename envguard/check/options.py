"""What one ``envguard check`` is asked to do: every option of :func:`envguard.check.run_check`, with its
default, in one frozen value that the command layer (envguard/cli/, workflow.py among it) and the tests build."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CheckOptions:
    """``prefix``/``name``: which environment (envguard.envs.resolve_target; default: the active one, else
    the one ``environment.yml`` names). ``lockfile``: default ``conda-lock.yml`` in ``cwd``. ``files``/``deep``:
    verify installed files by size / sha256. ``smoke`` runs the smoke probe in the environment's interpreter;
    ``imports`` (default: same as ``smoke``) runs envguard/in_process/import_origin.py there. ``env`` replaces
    os.environ for the environment rules; ``driver_info_fn`` replaces the NVML / nvidia-smi query. ``core``:
    the core package patterns for pip-over-conda. ``strict``: warnings fail too. ``workers``: threads that
    verify files. ``progress(phase)`` follows the smoke probe. ``distributed`` runs the probe's
    torch.distributed check as well (with ``smoke`` off, only that). ``spec_freshness``: EG516 (see below)."""

    prefix: Path | None = None
    name: str | None = None
    lockfile: Path | None = None
    files: bool = False
    deep: bool = False
    smoke: bool = True
    imports: bool | None = None
    env: Mapping[str, str] | None = None
    driver_info_fn: Callable[[], Any] | None = None
    core: Sequence[str] | None = None
    strict: bool = False
    smoke_timeout: float = 300.0
    cwd: Path | None = None
    workers: int | None = None
    progress: Callable[[str], None] | None = None
    distributed: bool = False
    #: compare the lock with the spec it was made from (EG516); off for the check that follows
    #: `create --frozen`, where the user asked for the lock as it is, whatever the spec beside it says
    spec_freshness: bool = True
    #: ``lockfile`` is a conda-lock file already: create, which runs this check, checked its kind on the bytes it
    #: installed from (or wrote it), so it is not judged again
    lock_kind_known: bool = False
    #: ``lockfile``'s text and the sha256 of its bytes as create read them (the bytes it installed from): every
    #: lock fact is taken from them, and the file is not read again
    lock_text: str | None = None
    lock_sha256: str | None = None
