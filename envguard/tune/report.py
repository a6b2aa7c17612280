"""What a tuning run means: findings, derived figures and the recommendation (formats.py writes them out).

Pure: reads a :class:`envguard.tune.TuneResult`, starts nothing. Failures are classified with the failure
catalogue (``envguard/data/failures.yaml``) exactly like the smoke test's, so one wording reaches the user.
formats.py and render.py read the figures and texts made here; :func:`inspect_error` (a probe's error as a
finding) is public for the tests that feed it a real probe failure.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from envguard import catalog
from envguard.findings import Finding, Severity
from envguard.smoke import NOFILE_WARN, SHM_WARN_BYTES, headline, human_bytes
from envguard.tune.search import Settings, untried

if TYPE_CHECKING:
    from envguard.tune import TuneResult

SCHEMA = "envguard.tune/1"
COW_WARN_BYTES = 32 << 20  # a worker's private memory growing this much over an epoch is copy-on-read at work
RESTART_WARN_FRACTION = 0.10  # worker start-up above this share of an epoch, paid every epoch


def _f(case_id: str, severity: Severity, message: str) -> Finding:
    return Finding(code=case_id, severity=severity, message=message, fix=catalog.get(case_id).fix)


def _clean(line: str) -> str:
    """A worker's re-raised ItemError reads ``tune_probe_dataset.ItemError: ValueError in __getitem__(13): ...``
    (``__main__.`` or ``__mp_main__.`` from a probe that defined it in its entry point)."""
    return re.sub(r"^(?:__main__\.|__mp_main__\.|tune_probe_dataset\.)?ItemError: ", "", line.strip())


def _index(text: str) -> int | None:
    m = re.search(r"in __getitems?__\(\[?(\d+)", text)
    return int(m.group(1)) if m else None


def label(t: dict[str, Any]) -> str:
    return Settings.from_dict(t["settings"]).label()


# ---------------------------------------------------------------- derived figures


IDEAL_NOISE = 1.15  # measured up to this many times the estimated ideal: the estimate holds (noise)


def ideal(result: TuneResult, s: Settings) -> float | None:
    """What the pipeline could reach with these settings: the step's pace, or the workers' (no overheads).

    Workers: ``w`` items in parallel, capped by the usable CPUs for the CPU share of an item. In the main
    process (no workers) loading and the step take turns.
    """
    sample = result.inspect.get("sample") or {}
    item_s = float(sample.get("item_s") or 0.0)
    if item_s <= 0:
        return None
    item_cpu = max(float(sample.get("item_cpu_s") or 0.0), 1e-9)
    cpus = float((result.inspect.get("cpus") or {}).get("usable") or 1.0)
    batch = int(result.options.get("batch_size") or 1)
    step = float(result.options.get("step_ms") or 0.0) / 1000.0
    if s.num_workers == 0:
        return 1.0 / (item_s + step / batch)
    data = min(s.num_workers / item_s, cpus / item_cpu)
    return min(data, batch / step) if step > 0 else data


def uss_growth(t: dict[str, Any]) -> tuple[int | None, int | None]:
    """(largest worker growth, main process growth) of private memory over the measured window, bytes."""
    mem = t.get("memory") or {}

    def grow(entry: dict[str, Any] | None) -> int | None:
        if not entry or not entry.get("start") or not entry.get("end"):
            return None
        a, b = entry["start"].get("uss"), entry["end"].get("uss")
        if a is None or b is None:
            a, b = entry["start"].get("rss"), entry["end"].get("rss")
        return None if a is None or b is None else int(b) - int(a)

    workers = [g for g in (grow(w) for w in mem.get("workers") or []) if g is not None]
    return (max(workers) if workers else None), grow(mem.get("main"))


def derived(result: TuneResult, t: dict[str, Any]) -> dict[str, Any]:
    s = Settings.from_dict(t["settings"])
    out: dict[str, Any] = {"label": s.label()}
    if t.get("status") != "ok":
        return out
    best = ideal(result, s)
    v = t.get("samples_per_s")
    out["ideal_samples_per_s"] = round(best, 3) if best else None
    # The ideal comes from items timed one by one before the trials: a measurement a little above it is noise,
    # far above it (warm caches, a first item that was slow) means the estimate was wrong, and a percentage of
    # it would say nothing (never "100%" of 40 beside 718 measured).
    above = bool(best and v and v > best * IDEAL_NOISE)
    out["ideal_underestimated"] = above
    out["efficiency"] = round(min(1.0, v / best), 4) if best and v and not above else None
    wait = t.get("wait_fraction")
    step = float(result.options.get("step_ms") or 0.0)
    out["bound"] = None if wait is None else ("data" if wait >= 0.10 or step <= 0 else "compute")
    out["worker_uss_growth"], out["main_uss_growth"] = uss_growth(t)
    return out


# ---------------------------------------------------------------- findings


def findings(result: TuneResult, *, probe_stderr: str = "", crashed: bool = False) -> list[Finding]:
    out: list[Finding] = []
    insp = result.inspect
    if not insp:
        if result.timed_out:
            out.append(_f("hang", Severity.ERROR, result.stopped or "the tune probe did not answer in time"))
        else:
            case = catalog.classify(probe_stderr, default="tune-error")
            last = headline(probe_stderr.strip()[-3000:]) or "no output"
            out.append(_f(case.id, Severity.ERROR, f"the tune probe ended before inspecting the dataset: {last}"))
        return out
    for err in insp.get("errors") or []:
        out.append(inspect_error(err))
    if insp.get("errors"):
        return out
    out += _trial_failures(result)
    if crashed:
        case = catalog.classify(probe_stderr, default="tune-error")
        said = headline(probe_stderr.strip()[-3000:]) or "no output"
        out.append(_f(case.id, Severity.ERROR, f"{result.stopped}: {said}"))
    elif result.timed_out:
        out.append(_f("hang", Severity.ERROR, f"{result.stopped}; its processes were stopped"))
    if result.trials and not result.ok_trials and not [f for f in out if f.severity is Severity.ERROR]:
        what = "was stopped by the budget" if all(t.get("status") == "budget" for t in result.trials) else \
            "finished within its limit"
        out.append(_f("tune-error", Severity.ERROR, f"no configuration {what}: nothing was measured"))
    ds = insp.get("dataset") or {}
    methods = insp.get("methods") or {}
    dropped = [m for m in methods.get("available") or [] if m not in (methods.get("usable") or [])]
    if not ds.get("picklable", True) and dropped:
        out.append(_f("pickling", Severity.WARNING,
                      f"the dataset cannot be pickled ({ds.get('pickle_error')}): {' and '.join(dropped)} were "
                      f"skipped, since they pickle it into every worker; only fork workers were measured"))
    out += warnings(result)
    return out


def inspect_error(err: dict[str, Any]) -> Finding:
    stage, text = str(err.get("stage")), str(err.get("error") or "")
    full = text + "\n" + str(err.get("traceback") or "")
    head = _clean(headline(text)) or text[:300]
    if stage == "torch":
        case = catalog.classify(full, default="torch-missing")
        return _f(case.id, Severity.ERROR, f"import torch failed in the target interpreter: {head}")
    if stage in ("import", "spec"):
        case = catalog.classify(full, default="dataset-import")
        return _f(case.id, Severity.ERROR, f"the dataset module does not import: {head}")
    if stage == "empty":
        return _f("dataset-empty", Severity.ERROR, head)
    if stage == "sample":
        idx = err.get("index")
        idx = _index(full) if idx is None else idx
        case = catalog.classify(full, default="dataset-item" if idx is not None else "tune-error")
        where = f" at index {idx}" if idx is not None else ""
        return _f(case.id, Severity.ERROR, f"loading the first items in the main process failed{where} "
                                           f"(before any trial): {head}")
    case = catalog.classify(full, default="dataset-factory")
    return _f(case.id, Severity.ERROR, f"the dataset factory failed: {head}")


def _trial_failures(result: TuneResult) -> list[Finding]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t in result.trials:
        if t.get("status") not in ("failed", "timeout", "crashed"):
            continue
        error = str(t.get("error") or "")
        sigs = [str(s) for s in t.get("worker_signals") or []]
        text = "\n".join([error, str(t.get("traceback") or ""), str(t.get("stderr_tail") or "")]
                         + (["worker signals: " + " ".join(sigs)] if sigs else []))
        idx = _index(text)
        default = "dataset-item" if idx is not None else ("hang" if t["status"] == "timeout" else "tune-error")
        case = catalog.classify(text, default=default)
        head = _clean(headline(error)) or error[:300]
        if sigs:
            head += f" (worker ended by {', '.join(sigs)})"
        if idx is not None and f"({idx})" not in head:
            head += f" (at index {idx})"
        t["code"] = case.id
        groups.setdefault((case.id, head), []).append(t)
    out = []
    for (code, head), ts in groups.items():
        first = ts[0]
        more = f" and {len(ts) - 1} more: trials {', '.join(str(t['id']) for t in ts[1:])}" if len(ts) > 1 else ""
        phase = f" during {first['phase']}" if first.get("phase") else ""
        out.append(_f(code, Severity.ERROR, f"trial {first['id']} ({label(first)}){more} failed{phase}: {head}"))
    return out


def warnings(result: TuneResult) -> list[Finding]:
    """Numbers that will bite the recommended (or the current) settings in production."""
    out: list[Finding] = []
    insp = result.inspect
    rec = result.recommended_trial
    cur = result.current_trial
    lim = insp.get("limits") or {}
    batch_bytes = next((t.get("batch_bytes") for t in result.ok_trials if t.get("batch_bytes")), None) or \
        (insp.get("sample") or {}).get("batch_bytes")
    for who, t in (("recommended", rec), ("current", cur)):
        if t is None or t.get("status") != "ok" or (who == "current" and rec is not None and t["id"] == rec["id"]):
            continue
        s = Settings.from_dict(t["settings"])
        shm = lim.get("shm") or {}
        if s.num_workers and batch_bytes and shm.get("free") is not None:
            need = s.num_workers * (s.prefetch_factor or 2) * int(batch_bytes)
            free = int(shm["free"])
            what = (f"the {who} settings keep {s.num_workers} workers x prefetch {s.prefetch_factor} x "
                    f"{human_bytes(batch_bytes)} batches = {human_bytes(need)} in flight")
            if need > free:
                out.append(_f("shm", Severity.ERROR, f"{shm.get('path', '/dev/shm')} has {human_bytes(free)} free, "
                                                     f"less than {what}"))
            elif free < SHM_WARN_BYTES or need > free / 2:
                out.append(_f("shm", Severity.WARNING, f"{shm.get('path', '/dev/shm')} has only {human_bytes(free)} "
                                                       f"free; {what}"))
        nofile = (lim.get("nofile") or {}).get("soft")
        tensors = int(t.get("tensors_per_batch") or 1)
        if s.num_workers and nofile is not None and lim.get("sharing_strategy") == "file_descriptor" and nofile >= 0:
            fds = s.num_workers * (s.prefetch_factor or 2) * tensors
            if nofile < NOFILE_WARN or nofile < 4 * fds + 256:
                out.append(_f("fd-limit", Severity.WARNING,
                              f"open-file limit (ulimit -n) is {nofile} with the file_descriptor sharing strategy; "
                              f"the {who} settings hold about {fds} descriptors for batches in flight "
                              f"({s.num_workers} workers x prefetch {s.prefetch_factor} x {tensors} tensors), and "
                              "every batch the training loop keeps holds more"))
        grow, _ = uss_growth(t)
        if grow is not None and grow > COW_WARN_BYTES:
            epoch = t.get("samples")
            out.append(_f("cow-memory", Severity.WARNING,
                          f"with the {who} settings each worker's private memory grew by up to {human_bytes(grow)} "
                          f"over {epoch} samples (trial {t['id']}); with {s.num_workers} workers that is "
                          f"{human_bytes(grow * s.num_workers)} more than the dataset needs"))
    out += _restart_warning(result)
    if not (insp.get("cuda") or {}).get("available"):
        h2d = result.options.get("h2d")
        ran = " (the copy path ran in its CPU fallback)" if h2d == "cpu" else ""
        out.append(_f("pin-cpu", Severity.INFO, "no CUDA device: pin_memory was not searched and host-to-device "
                                                f"copies were not measured{ran}"))
    out += _cap_note(result)
    return out


def restart_cost(result: TuneResult, t: dict[str, Any]) -> tuple[float, float, bool] | None:
    """(seconds, baseline, measured) that a setting without persistent workers pays again at each epoch's start.

    Time to the first batch is not all start-up: with persistent workers the first batch of an epoch still
    has to be loaded (by one worker). The cost is the difference from the same setting with persistent
    workers where that was measured, else from one batch loaded serially (the item time the probe measured).
    """
    s = Settings.from_dict(t["settings"])
    if not s.num_workers or s.persistent_workers or t.get("epoch_start_s") is None:
        return None
    twin = replace(s, persistent_workers=True)
    starts = [float(o["epoch_start_s"]) for o in result.ok_trials
              if o.get("epoch_start_s") is not None and Settings.from_dict(o["settings"]) == twin]
    if starts:
        base, measured = sum(starts) / len(starts), True
    else:
        item_s = float((result.inspect.get("sample") or {}).get("item_s") or 0.0)
        base, measured = item_s * int(result.options.get("batch_size") or 1), False
    return max(0.0, float(t["epoch_start_s"]) - base), base, measured


def _restart_warning(result: TuneResult) -> list[Finding]:
    """spawn/forkserver without persistent workers re-imports torch and the user's modules every epoch."""
    worst: tuple[float, dict[str, Any], float, float, bool] | None = None
    for t in result.ok_trials:
        cost = restart_cost(result, t)
        epoch = float(t.get("epoch_s") or 0.0)
        if cost is None or epoch <= 0:
            continue
        share = cost[0] / epoch
        if share >= RESTART_WARN_FRACTION and (worst is None or share > worst[0]):
            worst = (share, t, *cost)
    if worst is None:
        return []
    share, t, extra_s, base, measured = worst
    s = Settings.from_dict(t["settings"])
    cur = result.current_trial
    sev = Severity.WARNING if (cur is not None and cur["id"] == t["id"]) or \
        (result.recommended_trial or {}).get("id") == t["id"] else Severity.INFO
    imports = " (each one imports torch and the dataset's modules)" if s.multiprocessing_context != "fork" else ""
    than = "with persistent workers" if measured else "loading its first batch alone would"
    return [_f("worker-restart", sev,
               f"without persistent workers, {s.num_workers} {s.multiprocessing_context} workers start again every "
               f"epoch{imports}: {extra_s:.2f} s more to the first batch than {than} ({t['epoch_start_s']:.2f} s "
               f"against {base:.2f} s), {share:.0%} of the epoch (trial {t['id']})")]


def _cap_note(result: TuneResult) -> list[Finding]:
    space = result.space
    rec = result.recommended
    if space is None or rec is None or rec.num_workers != space.workers[-1] or result.options.get("max_workers"):
        return []
    cpus = (result.inspect.get("cpus") or {}).get("usable")
    return [Finding(code="max-workers", severity=Severity.INFO,
                    message=f"throughput was still best at {rec.num_workers} workers, the most tried (4 x {cpus:g} "
                            "usable CPUs, at least 8): a dataset that waits on I/O may gain from more",
                    fix=f"rerun with --max-workers {rec.num_workers * 2}")]


# ---------------------------------------------------------------- the recommendation


def mean_of(result: TuneResult, t: dict[str, Any] | None) -> float | None:
    """samples/s of the trial's setting: the mean of its measurements, the figure the recommendation is judged on
    (close winners are measured twice)."""
    return result.results().get(Settings.from_dict(t["settings"])) if t else None


def gain(result: TuneResult) -> float | None:
    rec, cur = result.recommended_trial, result.current_trial
    if not rec or not cur or cur.get("status") != "ok":
        return None
    mine, theirs = mean_of(result, rec), mean_of(result, cur)
    return mine / theirs if mine and theirs else None


def snippet(result: TuneResult, indent: str = "") -> str | None:
    rec = result.recommended
    if rec is None:
        return None
    ds = result.inspect.get("dataset") or {}
    lines = ["loader = DataLoader(", "    dataset,", f"    batch_size={result.options.get('batch_size')},"]
    if ds.get("sampler"):
        lines.append("    sampler=sampler,")
    if ds.get("collate_fn"):
        lines.append("    collate_fn=collate_fn,")
    for k, v in rec.kwargs().items():
        lines.append(f"    {k}={v!r}," if not isinstance(v, str) else f'    {k}="{v}",')
    lines.append(")")
    return "\n".join(indent + ln for ln in lines)


def not_tried(result: TuneResult) -> list[str]:
    """What the run did not measure, and why."""
    out: list[str] = []
    insp = result.inspect
    if not insp or insp.get("errors"):
        return out
    methods = insp.get("methods") or {}
    dropped = [m for m in methods.get("available") or [] if m not in (methods.get("usable") or [])]
    if dropped:
        out.append(f"{', '.join(dropped)}: the dataset cannot be pickled")
    if not (insp.get("cuda") or {}).get("available"):
        out.append("pin_memory=True: no CUDA device")
    slow = [label(t) for t in result.trials if t.get("status") == "slow"]
    if slow:
        out.append(f"too slow to measure within the trial limit: {'; '.join(slow)}")
    # A setting measured once already is not "not tried" when its second look was cut at the budget.
    measured = {Settings.from_dict(t["settings"]) for t in result.ok_trials}
    budget = [Settings.from_dict(s["settings"]).label() for s in result.skipped if s.get("reason") == "budget"
              and Settings.from_dict(s["settings"]) not in measured]
    budget += [label(t) for t in result.trials if t.get("status") == "budget"
               and Settings.from_dict(t["settings"]) not in measured]
    if budget:
        shown = "; ".join(budget[:4]) + (f"; and {len(budget) - 4} more" if len(budget) > 4 else "")
        out.append(f"not started, estimated to run past the budget ({result.options.get('budget_s'):g} s) "
                   f"from the trials before them: {shown}")
    if result.space is not None:
        tried = {Settings.from_dict(t["settings"]) for t in result.trials}
        tried |= {Settings.from_dict(s["settings"]) for s in result.skipped}
        for dim, values in untried(result.space, tried).items():
            if values:
                shown = ", ".join(str(v) for v in values)
                out.append(f"{dim}={shown}: not measured (the search went another way; nothing is known "
                           "about these)")
    return out
