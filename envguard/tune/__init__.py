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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envguard.envs import resolve_python as interpreter_of
from envguard.errors import ExitCode, UserError
from envguard.findings import Finding
from envguard.tune.options import DEFAULT_BUDGET, TuneOptions
from envguard.tune.search import AdaptiveSearch, GridSearch, Settings, Space, best_of, mean_results

RECOMMEND_TOLERANCE = 0.03  # within this of the best, the simplest setting is recommended
_CURRENT_KEYS = {"num_workers": int, "prefetch_factor": int, "persistent_workers": bool, "pin_memory": bool,
                 "multiprocessing_context": str}
_ALIASES = {"start_method": "multiprocessing_context", "context": "multiprocessing_context",
            "workers": "num_workers", "prefetch": "prefetch_factor", "persistent": "persistent_workers",
            "pin": "pin_memory"}

__all__ = ["DEFAULT_BUDGET", "Settings", "Space", "TuneOptions", "TuneResult", "parse_current", "tune"]


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
        """samples/s per setting: the mean of its measurements (None where every one failed)."""
        return mean_results(self.trials)

    @property
    def recommended_trial(self) -> dict[str, Any] | None:
        """The recommended setting's trial (its latest measurement, when it was measured again)."""
        base = self.space.base_method if self.space else "fork"
        best = best_of(self.results(), base, RECOMMEND_TOLERANCE)
        if best is None:
            return None
        return [t for t in self.ok_trials if Settings.from_dict(t["settings"]) == best][-1]

    @property
    def recommended(self) -> Settings | None:
        t = self.recommended_trial
        return Settings.from_dict(t["settings"]) if t else None

    @property
    def current_trial(self) -> dict[str, Any] | None:
        return next((t for t in self.trials if t.get("role") == "current"), None)

    def to_dict(self) -> dict[str, Any]:
        from envguard.tune.formats import to_json

        return to_json(self)

    def to_markdown(self) -> str:
        from envguard.tune.formats import to_markdown

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
            if not (1 if key == "prefetch_factor" else 0) <= values[key] <= 256:
                raise UserError(f"{key}={raw} is out of range", key="--current",
                                fix="num_workers from 0 to 256, prefetch_factor from 1 to 256")
        elif raw.lower() in ("none", "null", ""):
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
        raise UserError(f"batch size must be at least 1, got {batch_size}", key="--batch-size",
                        fix="e.g. --batch-size 32")
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
    """The interpreter of the target environment: the one every command picks (envguard.envs.resolve_target:
    -p PREFIX, -n NAME, the active conda environment, the one environment.yml names)."""
    return interpreter_of(prefix=Path(prefix) if prefix is not None else None, name=name)


def tune(options: TuneOptions) -> TuneResult:
    """Measure DataLoader settings for ``options.dataset`` in the target interpreter and return the evidence
    (what each option means: TuneOptions)."""
    o = options
    python, prefix, name, dataset, demo, batch_size = o.python, o.prefix, o.name, o.dataset, o.demo, o.batch_size
    step_ms, busy, budget, current, max_workers, timeout = (o.step_ms, o.busy, o.budget, o.current, o.max_workers,
                                                            o.timeout)
    trial_timeout, strategy, h2d, cwd, candidates, on_trial = (o.trial_timeout, o.strategy, o.h2d, o.cwd, o.candidates,
                                                               o.on_trial)
    from envguard.tune import report
    from envguard.tune.runner import ProbeGone, ProbeProcess
    from envguard.tune.session import Session, samples_per_trial

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
    recorded: dict[str, Any] = {"batch_size": batch_size, "step_ms": step_ms, "busy": busy, "budget_s": budget,
                               "timeout_s": timeout, "trial_timeout_s": trial_timeout, "max_workers": max_workers,
                               "h2d": h2d, "dataset": dataset or "--demo", "current_given": current is not None}
    args = ["--demo"] if demo else ["--dataset", str(dataset)]
    args += ["--path", str(work_dir), "--step-ms", f"{step_ms:g}", "--h2d", h2d] + ["--busy"] * busy
    if batch_size is not None:
        args += ["--batch-size", str(batch_size)]
    probe = ProbeProcess(exe, args, work_dir)
    session = Session(probe, budget=budget, timeout=timeout, trial_timeout=trial_timeout, on_trial=on_trial)
    space: Space | None = None
    finished = False
    try:
        probe.start()
        loaded = session.load()
        recorded["batch_size"] = session.inspect.get("batch_size") or batch_size  # the factory's, when it gave one
        if loaded:
            insp = session.inspect
            space = Space.for_machine(float(insp["cpus"]["usable"]), insp["methods"]["usable"],
                                      insp["methods"]["default"], bool(insp["cuda"]["available"]), max_workers)
            if cur.num_workers and not cur.multiprocessing_context:  # torch's default: the platform's
                cur = replace(cur, multiprocessing_context=insp["methods"]["default"])
            cur = cur.normal()
            samples = samples_per_trial(insp, int(recorded["batch_size"]))
            recorded["samples_per_trial"] = samples
            search = None if candidates is not None else \
                AdaptiveSearch(space) if strategy == "adaptive" else GridSearch(space)
            session.run([(cur, "current")] + [(c.normal(), "given") for c in candidates or ()], search, samples)
        finished = not session.timed_out and not session.crashed
    except ProbeGone:
        session.crashed = True
    finally:  # also on Ctrl-C: nothing the probe started outlives the run
        run = probe.stop(finished=finished)
    if session.crashed:
        session.stopped = f"the probe process ended unexpectedly ({_how(run.returncode)})"
    result = TuneResult(python=str(exe), inspect=session.inspect, options=recorded, space=space,
                        trials=session.trials, current=cur, findings=[], exit_code=0, timed_out=session.timed_out,
                        duration=time.monotonic() - session.t0,
                        strategy=strategy if candidates is None else "given", skipped=session.skipped,
                        stopped=session.stopped, shm_removed=run.shm_removed, pids=run.pids)
    result.findings = report.findings(result, probe_stderr=run.stderr_tail, crashed=session.crashed)
    if result.timed_out:
        result.exit_code = int(ExitCode.SMOKE_TIMEOUT)
    elif not result.ok_trials:
        result.exit_code = int(ExitCode.SMOKE_FAILED)
    return result


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
                        fix="pip install matplotlib (envguard's `plot` extra), or leave out --plot "
                            "(the terminal chart needs nothing)")
    if not p.parent.exists():
        raise UserError("the plot's directory does not exist", file=str(p), key="--plot",
                        fix="create the directory or name another file")
    return p


def write_plot(result: TuneResult, path: str | os.PathLike[str]) -> Path:
    from envguard.tune.plot import write_plot as _write

    return _write(result, Path(path))

