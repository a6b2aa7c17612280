"""``envguard tune``: measure the user's own DataLoader inside the environment and recommend settings.

The tuning probe (``tune/probe/tune_probe.py``, standalone: stdlib + torch) runs by path in the target
environment's interpreter. It imports the user's ``MODULE:FACTORY`` once, inspects the dataset, then
measures one DataLoader configuration per trial, each in a fresh process. This module decides what to try
(``search.py``, within ``--budget``), classifies what failed into the failure catalogue, and returns a plain
:class:`TuneResult`; ``report.py`` turns it into findings, JSON and markdown, ``render.py`` into a terminal
report and ``plot.py`` into a PNG or SVG.

Exit codes: 0 when at least one configuration worked (failed ones are findings), 7 when none did,
124 when the overall ``--timeout`` stopped the run, 2 for bad input.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from envguard.errors import ExitCode, UserError
from envguard.findings import Finding
from envguard.tune.search import AdaptiveSearch, GridSearch, Settings, Space, best_of

DEFAULT_BUDGET = 60.0
TARGET_EPOCH_S = 5.0  # a trial's epoch: at most what one process loads in about this long
RECOMMEND_TOLERANCE = 0.03  # within this of the best, the simplest setting is recommended
_CURRENT_KEYS = {"num_workers": int, "prefetch_factor": int, "persistent_workers": bool, "pin_memory": bool,
                 "multiprocessing_context": str}
_ALIASES = {"start_method": "multiprocessing_context", "context": "multiprocessing_context",
            "workers": "num_workers", "prefetch": "prefetch_factor", "persistent": "persistent_workers",
            "pin": "pin_memory"}

__all__ = ["DEFAULT_BUDGET", "Settings", "Space", "TuneResult", "parse_current", "tune"]


@dataclass
class TuneResult:
    python: str
    inspect: dict[str, Any]
    options: dict[str, Any]
    space: Space | None
    trials: list[dict[str, Any]]
    current: Settings
    findings: list[Finding]
    exit_code: int
    timed_out: bool
    duration: float
    strategy: str = "adaptive"
    skipped: list[dict[str, Any]] = field(default_factory=list)  # proposals not run, with the reason
    stopped: str | None = None  # why the search ended early (budget, timeout, probe crash)
    shm_removed: list[str] = field(default_factory=list)
    pids: list[int] = field(default_factory=list)  # every process seen as the probe's own (all stopped)

    @property
    def ok_trials(self) -> list[dict[str, Any]]:
        return [t for t in self.trials if t.get("status") == "ok" and t.get("samples_per_s")]

    def results(self) -> dict[Settings, float | None]:
        """samples/s per setting (the best of repeated measurements; None where every one failed)."""
        out: dict[Settings, float | None] = {}
        for t in self.trials:
            s = Settings.from_dict(t["settings"])
            v = t.get("samples_per_s") if t.get("status") == "ok" else None
            if v is not None or s not in out:
                out[s] = v if out.get(s) is None else max(out[s] or 0, v or 0)
        return out

    @property
    def recommended_trial(self) -> dict[str, Any] | None:
        base = self.space.base_method if self.space else "fork"
        best = best_of(self.results(), base, RECOMMEND_TOLERANCE)
        if best is None:
            return None
        return max((t for t in self.ok_trials if Settings.from_dict(t["settings"]) == best),
                   key=lambda t: t["samples_per_s"])

    @property
    def recommended(self) -> Settings | None:
        t = self.recommended_trial
        return Settings.from_dict(t["settings"]) if t else None

    @property
    def current_trial(self) -> dict[str, Any] | None:
        return next((t for t in self.trials if t.get("role") == "current"), None)

    def to_dict(self) -> dict[str, Any]:
        from envguard.tune.report import to_json

        return to_json(self)

    def to_markdown(self) -> str:
        from envguard.tune.report import to_markdown

        return to_markdown(self)


def parse_current(text: str | None) -> Settings:
    """``--current 'num_workers=4,pin_memory=False'``: the user's present DataLoader settings.

    Unset keys take torch's defaults (``num_workers=0``, ``prefetch_factor=2``, ``persistent_workers=False``,
    ``pin_memory=False``, the platform's start method)."""
    if not text or not text.strip():
        return Settings(0)
    values: dict[str, Any] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, raw = part.partition("=")
        key, raw = key.strip(), raw.strip().strip("'\"")
        key = _ALIASES.get(key, key)
        if not sep or key not in _CURRENT_KEYS:
            raise UserError(f"unknown setting {part.strip()!r}", key="--current",
                            fix=f"use KEY=VALUE pairs with keys {', '.join(_CURRENT_KEYS)}")
        kind = _CURRENT_KEYS[key]
        if kind is bool:
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise UserError(f"{key}={raw!r} is not True or False", key="--current", fix=f"e.g. {key}=True")
            values[key] = raw.lower() in ("true", "1", "yes")
        elif kind is int:
            try:
                values[key] = int(raw)
            except ValueError:
                raise UserError(f"{key}={raw!r} is not a whole number", key="--current",
                                fix=f"e.g. {key}=4") from None
            if values[key] < 0 or (key == "prefetch_factor" and values[key] < 1):
                raise UserError(f"{key}={raw} is out of range", key="--current",
                                fix="num_workers >= 0, prefetch_factor >= 1")
        else:
            if raw.lower() in ("none", "null", ""):
                values[key] = None
            elif raw not in ("fork", "forkserver", "spawn"):
                raise UserError(f"{key}={raw!r} is not a start method", key="--current",
                                fix="use fork, forkserver or spawn")
            else:
                values[key] = raw
    workers = values.get("num_workers", 0)
    if not workers and ("prefetch_factor" in values or values.get("persistent_workers")):
        raise UserError("prefetch_factor and persistent_workers need num_workers > 0 (torch refuses them)",
                        key="--current", fix="add num_workers=N or drop them")
    return Settings(workers, values.get("prefetch_factor"), bool(values.get("persistent_workers", False)),
                    bool(values.get("pin_memory", False)), values.get("multiprocessing_context"))


def _validate(dataset: str | None, demo: bool, batch_size: int | None, step_ms: float, budget: float,
              max_workers: int | None, timeout: float | None, strategy: str) -> None:
    if bool(dataset) == bool(demo):
        raise UserError("give either --dataset MODULE:FACTORY or --demo" if not demo else
                        "--dataset and --demo exclude each other", key="--dataset",
                        fix="e.g. envguard tune --dataset mypkg.data:make_dataset, or --demo")
    if dataset is not None:
        module, sep, factory = dataset.rpartition(":")
        if not sep or not module or not factory or not factory.replace(".", "").replace("_", "").isalnum():
            raise UserError(f"{dataset!r} is not MODULE:FACTORY", key="--dataset",
                            fix="name a module (or a .py file) and a function in it, e.g. mypkg.data:make_dataset")
    if batch_size is not None and batch_size < 1:
        raise UserError(f"batch size must be at least 1, got {batch_size}", key="--batch-size", fix="e.g. --batch-size 32")
    if not math.isfinite(step_ms) or step_ms < 0:
        raise UserError(f"step time must be 0 or more, got {step_ms:g}", key="--step-ms", fix="e.g. --step-ms 50")
    if not math.isfinite(budget) or budget <= 0:
        raise UserError(f"budget must be positive, got {budget:g}", key="--budget", fix="e.g. --budget 60")
    if max_workers is not None and not 0 <= max_workers <= 256:
        raise UserError(f"max workers must be between 0 and 256, got {max_workers}", key="--max-workers",
                        fix="e.g. --max-workers 16")
    if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
        raise UserError(f"timeout must be positive, got {timeout:g}", key="--timeout", fix="e.g. --timeout 300")
    if strategy not in ("adaptive", "grid"):
        raise UserError(f"unknown strategy {strategy!r}", key="strategy", fix="adaptive or grid")


def resolve_python(prefix: str | os.PathLike[str] | None, name: str | None) -> Path:
    """The interpreter of the target environment (-p PREFIX, -n NAME, else the active one)."""
    from envguard.envs import resolve_target
    from envguard.smoke import resolve_python as interpreter_of

    return interpreter_of(prefix=resolve_target(prefix, name))


def _samples_per_trial(inspect: dict[str, Any], batch_size: int) -> int:
    """A trial's epoch: the whole dataset when one process loads it in TARGET_EPOCH_S, else a prefix."""
    length = (inspect.get("dataset") or {}).get("length")
    item_s = float((inspect.get("sample") or {}).get("item_s") or 0.0)
    if item_s <= 0:
        want = 64 * batch_size
    else:
        want = max(4 * batch_size, math.ceil(TARGET_EPOCH_S / item_s / batch_size) * batch_size)
    return int(min(length, want)) if length else int(want)


class _Estimator:
    """Seconds a trial will take: a model from the serial item time, corrected by what trials really took."""

    def __init__(self, inspect: dict[str, Any], samples: int) -> None:
        sample = inspect.get("sample") or {}
        self.batch = int(inspect.get("batch_size") or 1)
        self.item_s = max(float(sample.get("item_s") or 0.001), 1e-6)
        self.item_cpu = max(float(sample.get("item_cpu_s") or 0.0), 1e-6)
        self.cpus = float((inspect.get("cpus") or {}).get("usable") or 1.0)
        self.import_s = float(inspect.get("torch_import_s") or 1.0)
        self.samples = samples
        self.ratios: list[float] = []

    def startup(self, s: Settings) -> float:
        """Starting the workers: a fork is cheap; spawn and forkserver workers import torch, about as many
        at a time as there are CPUs, and without persistent workers again for the second epoch."""
        w = s.num_workers
        if w and s.multiprocessing_context in ("spawn", "forkserver"):
            return self.import_s * (1 + math.ceil(w / max(self.cpus, 1.0))) * (1 if s.persistent_workers else 2)
        return 0.1 + 0.02 * w

    def model(self, s: Settings) -> float:
        w = s.num_workers
        rate = 1 / self.item_s if w == 0 else min(w / self.item_s, self.cpus / self.item_cpu)
        return self.samples / rate + self.startup(s) + 0.3

    def batch_timeout(self, s: Settings, limit: float) -> float:
        """DataLoader's ``timeout=``: far beyond one batch and the workers' start-up, so that only a stall
        trips it (with DataLoader's own message) and before the trial's own limit does."""
        wanted = 20 * self.batch * self.item_s + 2 * self.startup(s) + 3.0
        return max(1.0, min(wanted, 0.75 * limit, 60.0))

    def estimate(self, s: Settings) -> float:
        fix = sorted(self.ratios)[len(self.ratios) // 2] if self.ratios else 1.5
        return self.model(s) * max(fix, 0.5)

    def learn(self, s: Settings, seconds: float) -> None:
        self.ratios.append(seconds / max(self.model(s), 1e-3))


def tune(python: str | os.PathLike[str] | None = None, *, prefix: str | os.PathLike[str] | None = None,
         name: str | None = None, dataset: str | None = None, demo: bool = False, batch_size: int | None = None,
         step_ms: float = 0.0, busy: bool = False, budget: float = DEFAULT_BUDGET, current: str | Settings | None = None,
         max_workers: int | None = None, timeout: float | None = None, trial_timeout: float | None = None,
         strategy: str = "adaptive", h2d: str = "auto", cwd: str | os.PathLike[str] | None = None,
         candidates: list[Settings] | None = None,
         on_trial: Callable[[dict[str, Any]], None] | None = None) -> TuneResult:
    """Measure DataLoader settings for ``dataset`` in the target interpreter and return the evidence.

    ``python`` (else ``prefix``/``name``, else the active environment) is the interpreter to tune in.
    ``budget`` bounds the search (seconds, from the start); ``timeout`` (default: budget + 120 s, at least
    twice the budget) is the hard limit after which everything is stopped (exit 124). ``trial_timeout``
    (default 60 s) is the longest one trial may take before it counts as hung. ``h2d``: ``auto`` copies
    batches to the GPU when CUDA is available, ``cpu`` runs the same path into host memory (no GPU),
    ``off`` never. ``strategy="grid"`` measures the whole space (the benchmark's peer); ``candidates``
    measures exactly those settings after the current ones, in order and repeats included, with no search.
    """
    from envguard.tune import report
    from envguard.tune.runner import ProbeGone, ProbeProcess

    _validate(dataset, demo, batch_size, step_ms, budget, max_workers, timeout, strategy)
    if h2d not in ("auto", "cuda", "cpu", "off"):
        raise UserError(f"unknown h2d mode {h2d!r}", key="h2d", fix="auto, cuda, cpu or off")
    cur = current if isinstance(current, Settings) else parse_current(current)
    exe = Path(python) if python is not None else resolve_python(prefix, name)
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise UserError("no executable Python interpreter at this path", file=str(exe),
                        fix="pass the environment's python, e.g. <prefix>/bin/python")
    work_dir = Path(cwd) if cwd is not None else Path.cwd()
    timeout = timeout if timeout is not None else max(2 * budget, budget + 120.0)
    trial_timeout = trial_timeout if trial_timeout is not None else 60.0
    t0 = time.monotonic()
    deadline = t0 + timeout

    args = ["--demo"] if demo else ["--dataset", str(dataset)]
    args += ["--path", str(work_dir), "--step-ms", f"{step_ms:g}", "--h2d", h2d] + ["--busy"] * busy
    if batch_size is not None:
        args += ["--batch-size", str(batch_size)]
    probe = ProbeProcess(exe, args, work_dir)
    trials: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    inspect: dict[str, Any] = {}
    space: Space | None = None
    timed_out, stopped, crash = False, None, None
    options: dict[str, Any] = {"batch_size": batch_size, "step_ms": step_ms, "busy": busy, "budget_s": budget,
                               "timeout_s": timeout, "trial_timeout_s": trial_timeout, "max_workers": max_workers,
                               "h2d": h2d, "dataset": dataset or "--demo", "current_given": current is not None}
    finished = False
    run = None
    try:
        probe.start()
        try:
            got = probe.receive(deadline - time.monotonic())
        except ProbeGone:
            got, crash = None, "inspect"
        if got is None and crash is None:
            timed_out = True
            stopped = f"the probe did not load the dataset within {timeout:g} s (stopped while " \
                      f"{probe.last_phase() or 'starting'})"
        elif got is not None:
            inspect = got
            options["batch_size"] = inspect.get("batch_size") or batch_size
        if inspect and not inspect.get("errors"):
            space = Space.for_machine(float(inspect["cpus"]["usable"]), inspect["methods"]["usable"],
                                      inspect["methods"]["default"], bool(inspect["cuda"]["available"]), max_workers)
            if cur.num_workers and not cur.multiprocessing_context:
                cur = Settings(cur.num_workers, cur.prefetch_factor, cur.persistent_workers, cur.pin_memory,
                               inspect["methods"]["default"])
            cur = cur.normal()
            samples = _samples_per_trial(inspect, int(options["batch_size"]))
            options["samples_per_trial"] = samples
            search: AdaptiveSearch | GridSearch | None = (
                None if candidates is not None else AdaptiveSearch(space) if strategy == "adaptive" else GridSearch(space))
            est = _Estimator(inspect, samples)
            results: dict[Settings, float | None] = {}
            skip: set[Settings] = set()
            queue_: list[tuple[Settings, str]] = [(cur, "current")] + [(c.normal(), "given") for c in candidates or ()]
            while True:
                if queue_:
                    s, role = queue_.pop(0)
                else:
                    if search is None:
                        break
                    s, role = search.propose(results, skip), "search"
                    if s is None:
                        break
                    if s in results:  # the current settings were already measured
                        continue
                now = time.monotonic()
                left = budget - (now - t0)
                guess = est.estimate(s)
                if trials and guess > left:
                    skip.add(s)
                    skipped.append({"settings": s.to_dict(), "reason": "budget", "estimate_s": round(guess, 1)})
                    if left < 1.0:
                        stopped = stopped or f"the budget of {budget:g} s was spent"
                        if search is not None:
                            _skip_rest(search, results, skip, skipped)
                        break
                    continue
                # A trial may take trial_timeout, or three times its estimate when that is longer (spawn
                # workers under load). The first trial always runs; later ones stop at the budget.
                base = max(trial_timeout, 3.0 * guess)
                limit = min(base, max(left + 2.0, 2.0 * guess)) if trials else base
                budget_limited = limit < base
                limit = max(1.0, min(limit, deadline - now - 5.0))
                req = {"op": "trial", "id": len(trials) + 1, "settings": s.to_dict(), "samples": samples,
                       "limit_s": round(limit, 2), "dl_timeout": round(est.batch_timeout(s, limit), 2)}
                probe.send(req)
                res = probe.receive(max(0.0, min(limit + 20.0, deadline - time.monotonic())))
                if res is None:
                    timed_out = True
                    stopped = f"the overall timeout of {timeout:g} s was reached during trial {req['id']}"
                    trials.append({"id": req["id"], "settings": s.to_dict(), "status": "timeout", "role": role,
                                   "error": f"stopped by the overall timeout ({timeout:g} s)"})
                    break
                res["role"] = role
                res["settings"] = s.to_dict()
                if res.get("status") == "slow" and budget_limited:
                    res["status"] = "budget"  # still loading when the budget ran out
                trials.append(res)
                if res.get("seconds"):
                    est.learn(s, float(res["seconds"]))
                results[s] = res.get("samples_per_s") if res.get("status") == "ok" else None
                if res.get("status") == "budget":
                    skip.add(s)
                if on_trial is not None:
                    on_trial(res)
        finished = not timed_out and crash is None
    except ProbeGone:
        crash = "trial"
    finally:  # also on Ctrl-C: nothing the probe started outlives the run
        run = probe.stop(finished=finished)
    if crash is not None:
        stopped = f"the probe process ended unexpectedly ({_how(run.returncode)})"
    duration = time.monotonic() - t0
    result = TuneResult(python=str(exe), inspect=inspect, options=options, space=space, trials=trials, current=cur,
                        findings=[], exit_code=0, timed_out=timed_out, duration=duration,
                        strategy=strategy if candidates is None else "given",
                        skipped=skipped, stopped=stopped, shm_removed=run.shm_removed, pids=run.pids)
    result.findings = report.findings(result, probe_stderr=run.stderr_tail, crashed=crash is not None)
    if timed_out:
        result.exit_code = int(ExitCode.SMOKE_TIMEOUT)
    elif not result.ok_trials:
        result.exit_code = int(ExitCode.SMOKE_FAILED)
    return result


def _skip_rest(search: AdaptiveSearch | GridSearch, results: dict[Settings, float | None], skip: set[Settings],
               skipped: list[dict[str, Any]]) -> None:
    """Record what the search would still have proposed (results unchanged), for "not tried"."""
    for _ in range(500):
        s = search.propose(results, skip)
        if s is None:
            return
        skip.add(s)
        skipped.append({"settings": s.to_dict(), "reason": "budget"})


def _how(returncode: int | None) -> str:
    import signal

    if returncode is None:
        return "no exit status"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def check_plot(path: str | os.PathLike[str]) -> Path:
    """``--plot FILE``: a .png or .svg, and matplotlib importable; checked before any trial runs."""
    p = Path(path)
    if p.suffix.lower() not in (".png", ".svg"):
        raise UserError("the plot is written as PNG or SVG, chosen by the file's extension", file=str(p),
                        key="--plot", fix="name a .png or .svg file")
    from envguard.tune.plot import matplotlib_missing

    missing = matplotlib_missing()
    if missing:
        raise UserError(f"--plot needs matplotlib, which is not importable here ({missing})", key="--plot",
                        fix="pip install 'envguard[plot]', or leave out --plot (the terminal chart needs nothing)")
    if not p.parent.exists():
        raise UserError("the plot's directory does not exist", file=str(p), key="--plot",
                        fix="create the directory or name another file")
    return p


def write_plot(result: TuneResult, path: str | os.PathLike[str]) -> Path:
    from envguard.tune.plot import write_plot as _write

    return _write(result, Path(path))

