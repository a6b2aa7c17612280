"""What a backend is: something that lays down a list of locked conda artifacts into a directory.

A backend never solves and never decides where the environment ends up: `envguard.create` hands it an
:class:`InstallPlan` and a build directory, verifies hashes before and after, renames and rolls back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from envguard.create.integrity import Artifact


@dataclass(frozen=True)
class InstallPlan:
    artifacts: tuple[Artifact, ...]
    target: Path  # where the environment will live (the final prefix)
    cache_dir: Path  # rattler package cache (external backends use their own)
    platform: str
    lockfile: Path | None = None
    #: rattler's HTTP client carrying the channels' credentials (envguard.auth), None for the default one
    client: Any = None


class InstallProgress(Protocol):
    """Events a backend reports; every method may be called from an installer thread.

    ``wants_events`` False says nobody listens to the per-package events (install_start, cached, linked):
    a backend may then skip reporting them. For rattler that matters: every event is a call from a Rust
    thread into Python under the GIL, about 0.06 s for 500 packages. Objects without the attribute get
    every event.
    """

    @property
    def wants_events(self) -> bool: ...

    def install_start(self, total: int) -> None: ...

    def cached(self, name: str) -> None: ...

    def linked(self, name: str) -> None: ...

    def message(self, text: str) -> None: ...


class NullProgress:
    wants_events = False

    def install_start(self, total: int) -> None:
        pass

    def cached(self, name: str) -> None:
        pass

    def linked(self, name: str) -> None:
        pass

    def message(self, text: str) -> None:
        pass


@runtime_checkable
class Backend(Protocol):
    #: name used by --backend / ENVGUARD_BACKEND
    name: str
    #: True when the backend can build in one directory an environment meant to live at another path
    #: (prefix placeholders and shebangs get the final path). Then envguard builds in a staging directory
    #: beside the target and renames it into place; otherwise it builds at the target path itself, with
    #: the old environment moved aside and a marker that lets the next run undo a half-built one.
    relocatable: bool

    def available(self) -> bool: ...

    def describe(self) -> str:
        """One line for messages: the backend and, for external tools, the executable used."""
        ...

    def install(self, plan: InstallPlan, build_dir: Path, progress: InstallProgress) -> None:
        """Install every artifact of ``plan`` into ``build_dir`` (empty or absent). Raise EnvguardError."""
        ...
