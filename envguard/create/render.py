"""``envguard create`` on a terminal: step lines and a progress display fed by the installer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard import render
from envguard.create import CreateReporter
from envguard.render import escape, rich_console

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class CreateRenderer(CreateReporter):
    """envguard.create.CreateReporter rendered with rich: on a terminal, step lines and a progress display;
    otherwise only the summary line. Waiting for another create and cleaning up after an interrupted one
    are said on stderr in both cases; --quiet silences everything but warnings, errors and the summary."""

    def __init__(self, *, quiet: bool, live: bool) -> None:
        self.quiet = quiet
        self.progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}
        self._live = live

    @property
    def wants_events(self) -> bool:
        return self._live  # no display, no per-package events from the installer

    def _bar(self) -> Progress:
        if self.progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=rich_console(render.out), transient=True)
            self.progress.start()
        return self.progress

    def stage(self, text: str) -> None:
        if self._live:  # step lines only on a terminal: logs get the summary line
            render.out.print(f"[dim]·[/dim] {escape(text)}", markup=True, highlight=False)

    def note(self, text: str) -> None:
        if self.quiet:
            return
        if render.is_terminal(render.err, build=False):
            render.err.print(f"envguard: {text}", markup=False)
        else:  # a log or a pipe: the same line without importing rich (~20 ms: the variant line of every create)
            render.print_plain(render.err, f"envguard: {text}")

    def warning(self, text: str) -> None:
        render.warn(text)  # --quiet silences everything but warnings, errors and the summary

    def waiting(self, holder_pid: int | None, waited_s: float) -> None:
        if self.quiet:
            return
        who = f"envguard process {holder_pid}" if holder_pid else "another envguard process"
        render.err.print(f"waiting for {who}, which is creating this environment ({waited_s:.0f} s)", markup=False)

    def verify_start(self, total: int) -> None:
        if self._live:
            self._tasks["verified"] = self._bar().add_task("verified", total=total)

    def verified(self, name: str) -> None:
        self._advance("verified")

    def install_start(self, total: int) -> None:
        if not self._live:
            return
        bar = self._bar()
        for key in ("cached", "linked"):
            if key in self._tasks:
                bar.update(self._tasks[key], total=total)
            else:
                self._tasks[key] = bar.add_task(key, total=total)

    def _advance(self, key: str) -> None:
        if self._live and key in self._tasks and self.progress is not None:
            self.progress.advance(self._tasks[key])

    def cached(self, name: str) -> None:
        self._advance("cached")

    def linked(self, name: str) -> None:
        self._advance("linked")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _why_replaced(r: Any) -> str:
    """What moved, as the fingerprint of what was built tells it: the environment, the lock, or both."""
    import os

    from envguard.redact import redact

    if r.drift_cause in ("lock", "both"):
        same = r.built_from is not None and os.path.abspath(r.built_from) == os.path.abspath(r.lockfile)
        if same:
            moved = f"the lock moved: {redact(str(r.lockfile))} changed since the environment was built from it"
        elif r.built_from:
            moved = f"the lock moved: the environment was built from another lock ({redact(r.built_from)})"
        else:
            moved = "the lock moved: it holds other packages than the environment was built from"
        return moved + ("; and it had drifted from what was built" if r.drift_cause == "both" else "")
    if r.drift_cause == "unknown":
        return "it differed from the lock (no fingerprint says what it was built from)"
    return "it had drifted from the lock"


def print_created(result: Any) -> None:
    """The summary line of a create (what was built, from which lock, with which backend), then the check of
    the new environment when one ran."""
    from envguard.create import summarise_drift
    from envguard.redact import redact

    r = result  # envguard.create.CreateResult
    shown = redact(str(r.prefix))
    why = getattr(r.prefix, "why", "")
    chosen = f" ({why})" if why else ""
    if r.status == "unchanged":
        how = " (built by the envguard run we waited for)" if r.waited else ""
        render.print_plain(render.out, f"unchanged: {shown}{chosen} already matches {redact(str(r.lockfile))}{how}; "
                           f"fingerprint {r.fingerprint.digest[:12]}")
    else:
        pip = f" + {r.pip_count} pip" if r.pip_count else ""
        render.print_plain(render.out, f"{r.status} {shown}{chosen}: {r.conda_count} conda{pip} packages from "
                           f"{redact(str(r.lockfile))} with {r.backend} in {r.seconds:.1f} s; "
                           f"fingerprint {r.fingerprint.digest[:12]}")
        if r.drift:
            render.print_plain(render.out, f"  {_why_replaced(r)}: {redact(summarise_drift(r.drift))}")
    if r.check is not None:
        render.print_findings(r.check.findings, title=f"envguard check {shown}")
