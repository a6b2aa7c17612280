"""How ``envguard lock`` and ``envguard why`` look: the progress line fed by the lock's reporter, the
summary, the change report (text or JSON), and the dependency paths ``why`` found."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envguard import render
from envguard.redact import escape_controls
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
              "pip": "resolving pip: for {platform} {detail}", "write": "writing {detail}", "done": "done"}
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
    if r.mirror:
        render.print_plain(render.err, r.mirror)
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
        import sys

        if result.mirror:
            render.print_plain(render.err, result.mirror)
        for w in result.warnings:
            render.warn(w)
        sys.stdout.write(json.dumps(result.changes.to_json(), indent=2) + "\n")  # never wrapped: JSON
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


def _grouped(bodies: Iterable[tuple[str, list[str]]]) -> list[tuple[list[str], list[str]]]:
    """Platforms whose lines are the same share one heading: (platforms, lines), in the order they come."""
    groups: list[tuple[list[str], list[str]]] = []
    for platform, body in bodies:
        for names, other in groups:
            if other == body:
                names.append(platform)
                break
        else:
            groups.append(([platform], body))
    return groups


def change_lines(report: Any) -> list[str]:
    """The change report as plain lines. Platforms with the same changes share one heading."""
    if report.current:
        plats = ", ".join(p.platform for p in report.platforms)
        what = "no package changed" if not report.written else "no package changed (metadata rewritten)"
        return [f"{report.lockfile} was already current: {what} on {plats}"]
    lines: list[str] = [f"note: {report.note}"] if report.note else []
    fresh = [f"{p.platform} ({p.packages} packages)" for p in report.platforms if p.new_platform]
    if fresh:
        lines.append(f"{'new lock' if report.mode == 'new' else 'new platform'}, solved fresh: {', '.join(fresh)}")
    groups = _grouped((p.platform, [_change_text(c) for c in p.changes]) for p in report.platforms
                      if not p.new_platform)
    for names, body in groups:
        if not body:
            lines.append(f"{', '.join(names)}: unchanged")
            continue
        kinds = [text.split()[1] for text in body]
        summary = ", ".join(f"{kinds.count(k)} {k}" for k in ("added", "removed", "upgraded", "downgraded", "rebuilt")
                            if k in kinds)
        lines.append(f"{', '.join(names)}: {summary}")
        lines += body
    for p in report.removed_platforms:
        lines.append(f"{p}: no longer locked (not among the platforms any more)")
    return lines


def _hop(s: Any, first: bool) -> str:
    from envguard.lock.relock import rank

    label = f"{s.name} {s.version}"
    if s.build and rank(s.name) < 2:  # which build of pytorch or a CUDA library is the point of asking
        label += f" {s.build}"
    if s.manager == "pip":
        label += " (pip)"
    return label if first or s.constraint in ("", "*") else f"{label} [{s.constraint}]"


def why_lines(result: Any) -> list[str]:
    """``envguard why`` as plain lines; platforms with the same answer share one heading."""
    lines: list[str] = []
    if not result.spec_files:
        lines.append(f"no spec beside {result.lockfile}: the paths start at the lock's top-level packages")
    bodies: list[tuple[str, list[str]]] = []
    for p in result.platforms:
        if p.found is None:
            body = ["  not in the lock on this platform"]
        else:
            f = p.found
            body = [f"  {f.name} {f.version} {f.build}".rstrip() + (" (pip)" if f.manager == "pip" else "")]
            for path in p.paths:
                chain = " -> ".join(_hop(s, i == 0) for i, s in enumerate(path.steps))
                if path.request is None:
                    body.append(f"  top-level {chain}")
                elif len(path.steps) == 1:
                    body.append(f"  `{path.request}` ({_where(path)}) asks for it directly")
                else:
                    body.append(f"  `{path.request}` ({_where(path)}): {chain}")
            if not p.paths:
                body.append("  no spec line leads to it (the lock and the spec disagree: re-lock)")
        bodies.append((p.platform, body))
    for names, body in _grouped(bodies):
        lines.append(f"{result.name} on {', '.join(names)}:")
        lines += body
    from envguard.lock.relock import rank

    if result.cuda and rank(result.name) < 2:  # the assumption is what picked a CPU or a CUDA build
        lines.append(f"the lock assumed {'no __cuda' if result.cuda == 'none' else '__cuda=' + result.cuda} "
                     "when it was solved (envguard lock --cuda X.Y changes it)")
    # names, versions and paths come from the lock and the spec as written: a newline or a terminal escape in
    # a hostile lock's package name must not reach the terminal or forge a line (issue #38 point 5)
    return [escape_controls(line) for line in lines]


def _where(path: Any) -> str:
    return f"{path.file}:{path.line}" if path.file and path.line else (path.file or "the spec")


def show_why(result: Any, fmt: str) -> None:
    if fmt == "json":
        import json
        import sys

        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")  # never wrapped: JSON
        return
    for line in why_lines(result):
        render.print_plain(render.out, line)


# ------------------------------------------------------------------ a project with variants (#37)


def lock_variants_cmd(spec: Path, platforms: list[str] | None, *, check: bool, update: list[str],
                      update_all: bool, fmt: str) -> None:
    """``envguard lock`` (or ``--check``) where variants/*.yml declare variants: every variant's lock, the
    differences between them; a stale one is a StaleLockError (exit 4) naming it."""
    from envguard.errors import StaleLockError
    from envguard.lock import check_whole
    from envguard.lock.together import check_variants, lock_variants

    if check:
        verdicts = check_variants(spec, platforms)
        for v, fresh in verdicts:
            check_whole(v.lockfile, fresh=fresh.fresh)  # not whole: exit 3, as for one lock
        stale = [(v, f) for v, f in verdicts if not f.fresh]
        for v, f in verdicts:
            if f.fresh:
                render.print_plain(render.out, f"variant {v.name}: {f.message}")
        if stale:
            raise StaleLockError("; ".join(f"variant {v.name}: {f.reason}" for v, f in stale), fix=stale[0][1].fix,
                                 command=stale[0][1].command)
        return
    def run(_files: Any, *, platforms: Any, cuda: Any, lockfile: Any, **options: Any) -> Any:
        return lock_variants(spec, platforms=platforms, **options)

    result: Any = lock_with_progress(run, None, platforms, None, None, update=update, update_all=update_all)
    show_variants(result, fmt)


def variant_lines(result: Any) -> list[str]:
    """What differs between the variants (envguard.lock.together.VariantsLock.between), as plain lines."""
    lines: list[str] = []
    for d in result.between:
        kinds: dict[str, int] = {}
        for x in d.differences:
            kinds[x.why] = kinds.get(x.why, 0) + 1
        what = ", ".join(f"{n} {why}" for why, n in kinds.items() if why != "not forced")
        if not d.differences:
            lines.append(f"{d.variant} vs {d.against} on {d.platform}: the same {d.same} packages")
            continue
        lines.append(f"{d.variant} vs {d.against} on {d.platform}: {d.same} packages the same; "
                     f"{len(d.differences) - len(d.unforced)} differ as the variant forces ({what or 'none'})"
                     + (f"; {len(d.unforced)} differ although it does not force them:" if d.unforced else ""))
        top = [x for x in d.differences if x.forced and x.why in ("torch family", "CUDA library")][:4]
        for x in top:
            lines.append(f"  {x.name}: {x.this or 'absent'} vs {x.default or 'absent'}")
        for x in d.unforced:
            lines.append(f"  ! {x.name}: {x.this or 'absent'} vs {x.default or 'absent'}")
    return [escape_controls(line) for line in lines]


def show_variants(result: Any, fmt: str) -> None:
    if fmt == "json":
        import json
        import sys

        if result.mirror:
            render.print_plain(render.err, result.mirror)
        for w in result.warnings:
            render.warn(w)
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
        return
    for v, r in result.results:
        render.print_plain(render.out, f"variant {v.name}{' (default)' if v.default else ''}:")
        print_locked(r)
    for name in result.skipped:
        render.print_plain(render.out, f"variant {name}: not locked (none of its platforms is among --platform)")
    if result.between:
        render.print_plain(render.out, "between the variants:")
        for line in variant_lines(result):
            render.print_plain(render.out, line)
