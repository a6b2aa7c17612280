"""A tuning run written out: JSON, the terminal's rows and lines, markdown and a chart without matplotlib.

Pure, like report.py, whose findings, derived figures and recommendation it reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envguard.findings import sort_findings
from envguard.redact import redact
from envguard.smoke import human_bytes
from envguard.tune.report import (
    IDEAL_NOISE,
    SCHEMA,
    derived,
    gain,
    mean_of,
    not_tried,
    snippet,
)
from envguard.tune.search import Settings

if TYPE_CHECKING:
    from envguard.tune import TuneResult


# ---------------------------------------------------------------- formats


def to_json(result: TuneResult) -> dict[str, Any]:
    rec = result.recommended
    rt, ct = result.recommended_trial, result.current_trial
    insp = result.inspect
    trials = []
    for t in result.trials:
        d = {k: v for k, v in t.items() if k not in ("type", "stderr_tail", "traceback")}
        d.update(derived(result, t))
        trials.append(d)
    g = gain(result)
    return {
        "schema": SCHEMA,
        "python": result.python,
        "torch": insp.get("torch"),
        "dataset": insp.get("dataset"),
        "batch_size": result.options.get("batch_size"),
        "step_ms": result.options.get("step_ms"),
        "busy_step": result.options.get("busy"),
        "strategy": result.strategy,
        "budget_s": result.options.get("budget_s"),
        "duration_s": round(result.duration, 3),
        "samples_per_trial": result.options.get("samples_per_trial"),
        "exit_code": result.exit_code,
        "counts": {"trials": len(trials), "ok": len(result.ok_trials), "failed": len(trials) - len(result.ok_trials),
                   "findings": len(result.findings)},
        "timed_out": result.timed_out,
        "stopped": result.stopped,
        "machine": {"cpus": insp.get("cpus"), "limits": insp.get("limits"), "cuda": insp.get("cuda"),
                    "start_methods": insp.get("methods"), "isolation": insp.get("isolation"),
                    "h2d": insp.get("h2d"), "torch_import_s": insp.get("torch_import_s")},
        "sample": {k: v for k, v in (insp.get("sample") or {}).items() if k not in ("stderr_tail", "traceback")},
        "space": result.space.to_dict() if result.space else None,
        "trials": trials,
        "recommended": rec.kwargs() if rec else None,
        "recommended_trial": rt["id"] if rt else None,
        "recommended_samples_per_s": mean_of(result, rt),  # the mean of its measurements
        "current": result.current.kwargs(),
        "current_trial": ct["id"] if ct else None,
        "gain": round(g, 4) if g else None,
        "current_idle_fraction": ct.get("wait_fraction") if ct and ct.get("status") == "ok" else None,
        "snippet": snippet(result),
        "not_tried": not_tried(result),
        "skipped": result.skipped,
        "shm_removed": result.shm_removed,
        "findings": [{k: (redact(v) if isinstance(v, str) else v) for k, v in f.to_dict().items()}
                     for f in sort_findings(result.findings)],
    }


def _num(v: Any, fmt: str = "{:.0f}") -> str:
    return fmt.format(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else ""


def trial_rows(result: TuneResult) -> list[dict[str, str]]:
    """The trial table's cells, shared by the terminal and markdown renderings."""
    rec = result.recommended_trial
    rows = []
    for t in result.trials:
        d = derived(result, t)
        role = "current" if t.get("role") == "current" else ""
        if rec is not None and t["id"] == rec["id"]:
            role = (role + ", " if role else "") + "recommended"
        grow = d.get("worker_uss_growth")
        ok = t.get("status") == "ok"
        rows.append({
            "#": str(t["id"]), "settings": Settings.from_dict(t["settings"]).short(),
            "samples/s": _num(t.get("samples_per_s")) if ok else f"{t.get('status')}: {t.get('code', '')}".rstrip(": "),
            "epoch start": _num(t.get("epoch_start_s"), "{:.2f} s"),
            "waits": _num(t.get("wait_fraction"), "{:.0%}"),
            "eff.": "above est." if d.get("ideal_underestimated") else _num(d.get("efficiency"), "{:.0%}"),
            "mem/worker": ("+" + human_bytes(grow)) if isinstance(grow, int) and grow >= 0 else "",
            "": role})
    return rows


def summary_lines(result: TuneResult) -> list[str]:
    insp = result.inspect
    out = []
    tv = insp.get("torch") or {}
    ds = insp.get("dataset") or {}
    if tv:
        build = f"CUDA {tv['cuda']}" if tv.get("cuda") else "CPU build"
        if ds:
            what = (f"dataset {ds.get('label', '?')}: {ds.get('class', '?')}, "
                    f"{ds.get('length') if ds.get('length') is not None else 'unknown'} samples, "
                    f"batch size {result.options.get('batch_size')}, step {result.options.get('step_ms'):g} ms"
                    + (" (busy)" if result.options.get("busy") else ""))
        else:  # the module, the factory or the dataset itself failed: the findings say how
            what = f"dataset {result.options.get('dataset')}: not loaded"
        out.append(f"torch {tv.get('version')} ({build}); {what}")
    cpus = insp.get("cpus") or {}
    if cpus:
        quota = cpus.get("cgroup_quota")
        why = f"cgroup quota {quota:g}" if quota is not None else "no cgroup CPU quota"
        shm = (insp.get("limits") or {}).get("shm") or {}
        free = f"; /dev/shm {human_bytes(shm['free'])} free" if shm.get("free") is not None else ""
        methods = ", ".join((insp.get("methods") or {}).get("usable") or [])
        out.append(f"usable CPUs {cpus.get('usable'):g} (affinity {cpus.get('affinity')}, {why}; os.cpu_count() "
                   f"{cpus.get('cpu_count')}); start methods {methods}{free}")
    if result.trials:
        n_ok = len(result.ok_trials)
        out.append(f"{len(result.trials)} trial{'s' * (len(result.trials) != 1)} ({n_ok} worked) of "
                   f"{result.options.get('samples_per_trial')} samples each, {result.strategy} search, "
                   f"{result.duration:.0f} s of a {result.options['budget_s']:g} s budget"
                   + (f"; {result.stopped}" if result.stopped else ""))
    return out


def verdict_lines(result: TuneResult) -> list[str]:
    rec, cur = result.recommended_trial, result.current_trial
    out = []
    if rec is None:
        out.append("no configuration worked: see the findings")
        return out
    d = derived(result, rec)
    g = gain(result)
    vs = ""
    given = result.options.get("current_given", True)
    who = "the current settings" if given else "DataLoader's defaults (num_workers=0)"
    whose = "the current settings'" if given else "DataLoader's defaults' (num_workers=0)"
    mine = mean_of(result, rec) or float(rec["samples_per_s"])
    n = sum(1 for t in result.ok_trials if Settings.from_dict(t["settings"]) == Settings.from_dict(rec["settings"]))
    if cur is not None and cur["id"] == rec["id"]:
        vs = f" ({who} themselves)"
    elif g is not None and cur is not None:
        vs = f", {g:.2f}x {whose} {mean_of(result, cur):.0f}"
    elif cur is not None:
        vs = f" ({who} failed)"
    ideal_v = d.get("ideal_samples_per_s")
    if ideal_v and mine > ideal_v * IDEAL_NOISE:
        of_ideal = (f"; above the estimated ideal of {ideal_v:.0f} samples/s (that estimate, from items timed one "
                    "by one before the trials, is too low here)")
    elif ideal_v:
        of_ideal = f"; {min(1.0, mine / ideal_v):.0%} of the estimated ideal {ideal_v:.0f} samples/s"
    else:
        of_ideal = ""
    out.append(f"recommended: {d['label']}: {mine:.0f} samples/s" + (f" (mean of {n} trials)" if n > 1 else "") + vs
               + of_ideal)
    step = float(result.options.get("step_ms") or 0.0)
    if step > 0 and rec.get("wait_fraction") is not None:
        bound = "data-bound" if d.get("bound") == "data" else "compute-bound"
        out.append(f"with a {step:g} ms step the loop is {bound}: the step waits for data "
                   f"{rec['wait_fraction']:.0%} of the time")
    if cur is not None and cur.get("status") == "ok" and cur.get("wait_fraction") is not None and step > 0:
        who = "the current settings" if result.options.get("current_given", True) else "DataLoader's defaults"
        out.append(f"{who} leave the GPU idle {cur['wait_fraction']:.0%} of the time "
                   "(the step waiting for the next batch)")
    elif cur is not None and step <= 0:
        out.append("no --step-ms: the consumer does no work, so this is the loader's own throughput "
                   "(pass --step-ms to see the GPU idle time the current settings imply)")
    return out


def to_markdown(result: TuneResult) -> str:
    from envguard.report import findings_to_markdown

    lines = [f"### envguard tune {redact(result.python)}", ""]
    lines += [f"- {redact(x)}" for x in summary_lines(result) + verdict_lines(result)]
    rows = trial_rows(result)
    if rows:
        cols = list(rows[0])
        lines += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |" for r in rows]
    code = snippet(result)
    if code:
        lines += ["", "```python", code, "```"]
    nt = not_tried(result)
    if nt:
        lines += ["", "Not tried:"] + [f"- {x}" for x in nt]
    lines += ["", findings_to_markdown("findings", result.findings).rstrip("\n")]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- a chart without matplotlib

MARKS = "abcdefghijklmnopqrstuvwxyz"


def series(result: TuneResult) -> dict[str, list[tuple[int, float]]]:
    """samples/s against num_workers, one line per other setting: the mean of a setting's measurements, the
    figure the recommendation is judged on."""
    lines: dict[str, dict[int, float]] = {}
    for s, v in result.results().items():
        if v:
            lines.setdefault(s.series() if s.num_workers else "in-process", {})[s.num_workers] = float(v)
    return {k: sorted(v.items()) for k, v in lines.items()}


def text_chart(result: TuneResult, width: int = 60, height: int = 8) -> list[str]:
    """samples/s against workers: one letter per setting, a legend below. Plain text, any terminal."""
    data = series(result)
    if not data:
        return []
    xs = sorted({w for pts in data.values() for w, _ in pts})
    top = max(v for pts in data.values() for _, v in pts)
    if top <= 0:
        return []
    names = sorted(data, key=lambda k: (k != "in-process", -max(v for _, v in data[k])))
    marks = {n: MARKS[i % len(MARKS)] for i, n in enumerate(names)}
    col_w = max(3, min(8, (width - 10) // max(len(xs), 1)))
    grid = [[" "] * (col_w * len(xs)) for _ in range(height)]
    for n in names:
        for w, v in data[n]:
            row = height - 1 - min(height - 1, round(v / top * (height - 1)))
            mid = xs.index(w) * col_w + col_w // 2
            # Points that fall in one cell sit side by side; "*" only when the column is full.
            free = [c for c in (mid, mid + 1, mid - 1, mid + 2, mid - 2)
                    if 0 <= c < len(grid[row]) and grid[row][c] == " "]
            if free:
                grid[row][free[0]] = marks[n]
            else:
                grid[row][mid] = "*"
    label_w = max(len(f"{top:.0f}"), 4)
    out = ["samples/s"]
    for i, cells in enumerate(grid):
        val = top * (height - 1 - i) / (height - 1)
        tick = f"{val:.0f}" if i in (0, height // 2, height - 1) else ""
        out.append(f"{tick:>{label_w}} │{''.join(cells).rstrip()}")
    out.append(" " * label_w + " └" + "─" * (col_w * len(xs)))
    axis = "".join(f"{w:^{col_w}}" for w in xs)
    out.append(" " * (label_w + 2) + axis + "  workers")
    legend = [f"{marks[n]} {n}" for n in names] + (["* several"] if any("*" in r for r in grid) else [])
    line = ""
    for item in legend:  # as many per line as fit
        if line and len(line) + 3 + len(item) > width:
            out.append(" " * (label_w + 2) + line)
            line = ""
        line = f"{line}   {item}" if line else item
    out.append(" " * (label_w + 2) + line)
    return out

