"""``envguard smoke``: the title line and the table of the probe's checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard import render

if TYPE_CHECKING:
    from envguard.smoke import SmokeResult


def smoke_title(result: SmokeResult, why: str = "") -> str:
    """``envguard smoke: passed in 2.0 s · torch ... · <python> · <why it was chosen>``: the verdict first."""
    from envguard.redact import redact

    r = result
    tv = r.probe.get("torch") or {}
    build = f"CUDA {tv['cuda']}" if tv.get("cuda") else "CPU build"
    what = f"torch {tv['version']} ({build})" if tv.get("version") else "torch not imported"
    state = "timed out" if r.timed_out else ("passed" if r.exit_code == 0 else "failed")
    chosen = f" · {why}" if why else ""
    return f"envguard smoke: {state} in {r.duration:.1f} s · {what} · {redact(r.python)}{chosen}"


_PHASES = {"import-torch": "importing torch", "numpy": "NumPy interop", "limits": "reading /dev/shm and ulimit -n",
           "dataloader-fd-limit": "DataLoader with many live batches", "dataloader-shm-leak": "/dev/shm leak check",
           "cuda": "CUDA", "cuda-pinned": "pinned host-to-device copy", "cuda-matmul": "CUDA matmul",
           "distributed": "torch.distributed all-reduce"}


def phase_label(phase: str) -> str | None:
    """What a probe phase means to a reader; None for phases not worth a line."""
    kind, _, method = phase.partition(":")
    if kind == "dataloader" and method:
        return f"DataLoader workers ({method})"
    if kind == "dataloader-hang" and method:
        return f"DataLoader timeout check ({method})"
    return _PHASES.get(phase)


class SmokeProgress:
    """On a terminal, one line per phase the smoke probe went through (each start method has its own), on
    stderr, with the time that phase took; nothing otherwise. A phase's line comes when the next one starts (or
    the probe ends), so its number is a duration, never the time since the start.
    ``with SmokeProgress(enabled=...) as p: run_smoke(..., progress=p.phase)``."""

    def __init__(self, *, enabled: bool, prefix: str = "smoke") -> None:
        self.enabled = enabled
        self.prefix = prefix
        self._current: tuple[str, float] | None = None  # (label, when it started)

    def _finish(self, now: float, note: str = "") -> None:
        if self._current is None:
            return
        label, started = self._current
        self._current = None
        render.err.print(f"[dim]·[/dim] {self.prefix}: {render.escape(label)} "
                         f"[dim]({now - started:.1f} s{note})[/dim]", markup=True, highlight=False)

    def phase(self, phase: str) -> None:
        import time

        if not self.enabled:
            return
        now = time.monotonic()
        self._finish(now)  # any new phase, one without a line of its own too, ends the one before
        label = phase_label(phase)
        self._current = (label, now) if label else None

    def __enter__(self) -> SmokeProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        import time

        if self.enabled:  # the last phase: it ended with the probe (or was cut short by its end)
            self._finish(time.monotonic(), ", interrupted" if exc and exc[0] is not None else "")


def print_smoke_checks(result: SmokeResult) -> None:
    """The probe's checks as a table that fits the width, or one per line (render.print_table)."""
    checks = result.probe.get("checks") or []
    if not checks:
        return
    style = {"pass": "green", "fail": "red", "not-exercised": "yellow", "skip": "dim"}
    columns = [render.Column("check"), render.Column("status", sep=": "),
               render.Column("took", sep=", ", justify="right")]
    rows = []
    for c in checks:
        st = str(c.get("status"))
        secs = c.get("seconds")
        rows.append([str(c.get("name")), (st, style.get(st, "")),
                     f"{secs:.2f} s" if isinstance(secs, (int, float)) else ""])
    render.print_table(columns, rows)


def smoke_checks_markdown(result: SmokeResult) -> str:
    checks = result.probe.get("checks") or []
    if not checks:
        return ""
    lines = ["", "| check | status | seconds |", "|---|---|---|"]
    for c in checks:
        secs = c.get("seconds")
        took = f"{secs:.2f}" if isinstance(secs, (int, float)) else ""
        lines.append(f"| {c.get('name')} | {c.get('status')} | {took} |")
    return "\n".join(lines) + "\n"


def distributed_line(result: SmokeResult) -> str:
    """One line for a rank of a launcher's world: who, how fast it met the others, what it measured."""
    from envguard.smoke import distributed_summary

    d = distributed_summary(result.probe)
    if d is None:
        return ""
    parts = [f"distributed: rank {d['rank']} of {d['world_size']} on {d['host']} ({d['backend'] or '?'}, "
             f"{d['launcher']})"]
    if d["rendezvous_s"] is not None:
        parts.append(f"rendezvous {d['rendezvous_s']:.2f} s")
    if d["allreduce_ok"] is not None:
        parts.append(f"all-reduce {'correct' if d['allreduce_ok'] else 'WRONG'}")
    if d["broadcast_ok"] is not None:
        parts.append(f"broadcast {'correct' if d['broadcast_ok'] else 'WRONG'}")
    parts += [f"{_size(b['bytes'])} {b['busbw_gbps']:.2f} GB/s bus" for b in d["bandwidth"]]
    if d["missing"]:
        parts.append("missing " + ", ".join(f"rank {m['rank']}" + (f" ({m['host']})" if m.get("host") else "")
                                            for m in d["missing"][:10]))
    return " · ".join(parts)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):g} {unit}"
    return f"{n} B"


def show(result: Any, fmt: str, why: str = "") -> None:
    """``envguard smoke``'s output: title, checks, the distributed line and the findings (text), the result as
    JSON, or markdown. ``why``: how the probed environment was chosen."""
    import json
    import sys

    from envguard.redact import redact
    from envguard.report import findings_to_markdown

    r = result
    if fmt == "json":
        sys.stdout.write(redact(json.dumps(r.to_dict(), indent=2, default=str)) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(findings_to_markdown(smoke_title(r, why), r.findings))
        sys.stdout.write(smoke_checks_markdown(r))
    else:
        render.print_plain(render.out, smoke_title(r, why))
        print_smoke_checks(r)
        line = distributed_line(r)
        if line:
            render.print_plain(render.out, line)
        render.print_findings(r.findings)
