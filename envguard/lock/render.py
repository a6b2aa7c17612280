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
                        cuda: str | bool | None, lockfile: Path | None, **options: Any) -> LockResult:
    """Run the lock with a rich status line on a terminal; silently otherwise (``options``: update, ...)."""
    if not render.err.is_terminal:
        return lock(files, platforms=platforms, cuda=cuda, lockfile=lockfile, **options)
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

        return lock(files, platforms=platforms, cuda=cuda, lockfile=lockfile, reporter=reporter, **options)


def print_locked(result: Any) -> None:
    """The lock's warnings, then one line: what was written (or left unchanged), packages per platform."""
    r = result  # envguard.lock.LockResult
    for w in r.warnings:
        render.warn(w)
    counts = ", ".join(f"{p}: {n}" for p, n in r.packages.items())
    verb = "wrote" if r.changed else "unchanged:"
    cuda_note = f"; {r.cuda_note}" if r.cuda_note else ""
    render.print_plain(render.out, f"{verb} {r.lockfile} ({counts} packages{cuda_note}) in {r.seconds:.1f} s")
    if r.changes is not None:
        for line in change_lines(r.changes):
            render.print_plain(render.out, line)


def show(result: Any, fmt: str) -> None:
    """``envguard lock`` output: the summary and the change report (text), or the report alone (json)."""
    if fmt == "json":
        import json

        for w in result.warnings:
            render.warn(w)
        render.print_plain(render.out, json.dumps(result.changes.to_json(), indent=2))
        return
    print_locked(result)


_VERB = {"added": "+", "removed": "-", "upgraded": "^", "downgraded": "v", "rebuilt": "~"}


def _change_text(c: Any) -> str:
    b, a = c.before, c.after
    pip = " (pip)" if c.manager == "pip" else ""
    if c.change == "added":
        what = f"{c.name} {a['version']} {a['build']}".rstrip()
    elif c.change == "removed":
        what = f"{c.name} {b['version']} {b['build']}".rstrip()
    elif c.change == "rebuilt":
        what = f"{c.name} {a['version']}: {b['build'] or 'old file'} -> {a['build'] or 'new file'}"
    else:
        what = f"{c.name} {b['version']} -> {a['version']}"
    return f"  {_VERB[c.change]} {c.change:<10} {what}{pip}: {c.reason.text}"


def change_lines(report: Any) -> list[str]:
    """The change report as plain lines. Platforms with the same changes share one heading."""
    if report.current:
        plats = ", ".join(p.platform for p in report.platforms)
        what = "no package changed" if not report.written else "no package changed (metadata rewritten)"
        return [f"{report.lockfile} was already current: {what} on {plats}"]
    lines: list[str] = [f"note: {report.note}"] if report.note else []
    groups: list[tuple[list[str], Any]] = []
    for p in report.platforms:
        if p.new_platform:
            what = "new lock" if report.mode == "new" else "new platform"
            lines.append(f"{p.platform}: {what}, solved fresh ({p.packages} packages)")
            continue
        body = [_change_text(c) for c in p.changes]
        for names, other in groups:
            if other == body:
                names.append(p.platform)
                break
        else:
            groups.append(([p.platform], body))
    for names, body in groups:
        if not body:
            lines.append(f"{', '.join(names)}: unchanged")
            continue
        counts: dict[str, int] = {}
        for text in body:
            kind = text.split()[1]
            counts[kind] = counts.get(kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in counts.items())
        lines.append(f"{', '.join(names)}: {summary}")
        lines += body
    for p in report.removed_platforms:
        lines.append(f"{p}: no longer locked (not among the platforms any more)")
    return lines
