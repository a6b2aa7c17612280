"""What ``envguard create`` tells its caller: progress callbacks (CreateReporter; envguard/create/render.py
renders them) and the result. :class:`Progress` is the backends' install callback that build.py hands
the installer (it forwards to the reporter)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard import settings
from envguard.create.staging import fault_hook
from envguard.fingerprint import Fingerprint


class CreateReporter:
    """Callbacks for progress; every method is a no-op here. envguard/create/render.py renders them with rich.

    ``cached``/``linked`` may be called from installer threads.
    """

    def stage(self, text: str) -> None:
        """A new step begins (verifying, installing, pip, activating, checking)."""

    def waiting(self, holder_pid: int | None, waited_s: float) -> None:
        """Another envguard holds the prefix lock; called every few seconds while waiting."""

    def verify_start(self, total: int) -> None:
        """``total`` archives are read before anything is extracted: downloaded when remote, hashed against
        the lock and every entry scanned (envguard.create.prelink). Not called when every package is cached."""

    def verified(self, name: str) -> None:
        """One of those archives passed."""

    def install_start(self, total: int) -> None:
        """The installer starts ``total`` package operations."""

    def cached(self, name: str) -> None:
        """A package is in the package cache (downloaded or already there)."""

    @property
    def wants_events(self) -> bool:
        """Whether install_start/cached/linked are listened to (default: when a subclass overrides one).
        Without a listener the installer is not asked for per-package events, which cost time."""
        cls = type(self)
        return any(getattr(cls, m) is not getattr(CreateReporter, m) for m in ("install_start", "cached", "linked"))

    def linked(self, name: str) -> None:
        """A package is linked into the new environment."""

    def note(self, text: str) -> None:
        """Something envguard did besides the create itself (cleaning up after an interrupted run)."""

    def warning(self, text: str) -> None:
        """Something the user should know about what is built (a variant that cannot run here); said even
        under --quiet. By default a note."""
        self.note(f"warning: {text}")


class Progress:
    """InstallProgress for backends: forwards to the reporter and runs the fault hook ``link:<n>``
    (envguard.create.staging.fault_hook) as each package is linked."""

    def __init__(self, reporter: CreateReporter) -> None:
        self.reporter = reporter
        self.linked_count = 0
        self._lock = threading.Lock()

    @property
    def wants_events(self) -> bool:
        # an armed test hook (``link:<n>``) counts linked events even when nothing is displayed
        return bool(getattr(self.reporter, "wants_events", True) or settings.test_hook(settings.TEST_KILL_AT)
                    or settings.test_hook(settings.TEST_PAUSE_AT))

    def install_start(self, total: int) -> None:
        self.reporter.install_start(total)

    def cached(self, name: str) -> None:
        self.reporter.cached(name)

    def linked(self, name: str) -> None:
        with self._lock:
            self.linked_count += 1
            n = self.linked_count
        self.reporter.linked(name)
        fault_hook(f"link:{n}")

    def message(self, text: str) -> None:
        self.reporter.stage(text)


@dataclass
class CreateResult:
    prefix: Path
    status: str  # "created", "replaced" (drifted, or --force) or "unchanged"
    backend: str
    lockfile: Path
    fingerprint: Fingerprint
    conda_count: int = 0
    pip_count: int = 0
    verified_local: int = 0
    waited: bool = False
    check: Any = None  # envguard.check.CheckReport when the command layer checked the new environment
    seconds: float = 0.0  # lock to environment in place, without the check
    drift: list[str] = field(default_factory=list)  # how the environment it replaced differed from the lock
    # why it differed (envguard.create.drift.cause): "drifted", "lock" (the lock moved since it was built),
    # "both" or "unknown"; and the lock its fingerprint says it was built from
    drift_cause: str = ""
    built_from: str | None = None
    # the lock's text and the sha256 of its bytes as this run read them: the check that follows judges them
    lock_text: str | None = field(default=None, repr=False, compare=False)
    lock_sha256: str | None = None

    @property
    def exit_code(self) -> int:
        """0, or the check's exit code when the post-create check found problems."""
        if self.check is not None:
            return int(getattr(self.check, "exit_code", 0))
        return 0
