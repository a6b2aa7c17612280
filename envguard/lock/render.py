"""``envguard lock`` on a terminal: a progress line fed by the lock's reporter."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard import render
from envguard.render import rich_console

if TYPE_CHECKING:
    from envguard.lock import LockResult, Progress


def lock_with_progress(lock: Callable[..., LockResult], files: list[Path] | None, platforms: list[str] | None,
                        cuda: str | bool | None, lockfile: Path | None) -> LockResult:
    """Run the lock with a rich status line on a terminal; silently otherwise."""
    if not render.err.is_terminal:
        return lock(files, platforms=platforms, cuda=cuda, lockfile=lockfile)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    labels = {"spec": "reading {detail}", "solve": "solving {platform}",
              "pip": "resolving pip: for {platform}", "write": "writing {detail}", "done": "done"}
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=rich_console(render.err), transient=True) as progress:
        task = progress.add_task("locking", total=None)

        def reporter(p: Progress) -> None:
            fields = vars(p)
            done = max(0, fields["index"] - 1) if fields["stage"] in ("solve", "pip") else None
            if fields["stage"] == "write":
                done = progress.tasks[0].total
            # refresh now: a solve can take less than one refresh period
            progress.update(task, description=labels.get(fields["stage"], fields["stage"]).format(**fields),
                            total=fields["total"] or progress.tasks[0].total, completed=done, refresh=True)

        return lock(files, platforms=platforms, cuda=cuda, lockfile=lockfile, reporter=reporter)


def print_locked(result: Any) -> None:
    """The lock's warnings, then one line: what was written (or left unchanged), packages per platform."""
    r = result  # envguard.lock.LockResult
    for w in r.warnings:
        render.warn(w)
    counts = ", ".join(f"{p}: {n}" for p, n in r.packages.items())
    verb = "wrote" if r.changed else "unchanged:"
    cuda_note = f"; {r.cuda_note}" if r.cuda_note else ""
    render.print_plain(render.out, f"{verb} {r.lockfile} ({counts} packages{cuda_note}) in {r.seconds:.1f} s")
