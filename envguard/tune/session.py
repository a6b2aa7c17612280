"""One tuning run against one probe process: load the dataset, then trials until the search, the budget or
the overall timeout ends it. Holds the bookkeeping; the probe process itself is ``runner.py``'s."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from envguard.tune.runner import ProbeProcess
from envguard.tune.search import AdaptiveSearch, GridSearch, Settings, mean_results

TARGET_EPOCH_S = 5.0  # a trial's epoch: at most what one process loads in about this long
CONFIRM_WITHIN = 0.15  # the two best closer than this are measured again, side by side
STOP_S = 0.5  # kept back from the budget: stopping a trial cut at the budget, then the probe, takes this long


def samples_per_trial(inspect: dict[str, Any], batch_size: int) -> int:
    """A trial's epoch: the whole dataset when one process loads it in TARGET_EPOCH_S, else a prefix."""
    length = (inspect.get("dataset") or {}).get("length")
    item_s = float((inspect.get("sample") or {}).get("item_s") or 0.0)
    if item_s <= 0:
        want = 64 * batch_size
    else:
        want = max(4 * batch_size, math.ceil(TARGET_EPOCH_S / item_s / batch_size) * batch_size)
    return int(min(length, want)) if length else int(want)


class Estimator:
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


class Session:
    def __init__(self, probe: ProbeProcess, *, budget: float, timeout: float, trial_timeout: float,
                 on_trial: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.probe = probe
        self.budget, self.timeout, self.trial_timeout = budget, timeout, trial_timeout
        self.on_trial = on_trial
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        self.inspect: dict[str, Any] = {}
        self.trials: list[dict[str, Any]] = []
        self.skipped: list[dict[str, Any]] = []  # proposals not run, with the reason
        self.timed_out = False
        self.crashed = False
        self.stopped: str | None = None  # why the run ended early
        self.results: dict[Settings, float | None] = {}
        self.skip: set[Settings] = set()

    def load(self) -> bool:
        """Wait for the probe's inspection. True when trials can run."""
        from envguard.tune.runner import ProbeGone

        try:
            got = self.probe.receive(self.deadline - time.monotonic())
        except ProbeGone:
            self.crashed = True
            return False
        if got is None:
            self.timed_out = True
            self.stopped = f"the probe did not load the dataset within {self.timeout:g} s (stopped while " \
                           f"{self.probe.last_phase() or 'starting'})"
            return False
        self.inspect = got
        return not got.get("errors")

    def run(self, queue: list[tuple[Settings, str]], search: AdaptiveSearch | GridSearch | None, samples: int) -> None:
        """The queued settings first (the current ones), then the search's proposals, within the budget."""
        est = Estimator(self.inspect, samples)
        while True:
            if queue:
                s, role = queue.pop(0)
                if role == "confirm" and self.left() < est.estimate(s):
                    return  # a confirmation is worth having, not worth going over the budget
            else:
                proposed = search.propose(self.results, self.skip) if search is not None else None
                if proposed is None:
                    if isinstance(search, AdaptiveSearch):
                        queue, search = self.confirmations(), None
                        if queue:
                            continue
                    return
                s, role = proposed, "search"
                if s in self.results:  # the current settings were measured already
                    continue
            left = self.left()
            guess = est.estimate(s)
            if self.trials and guess > left:  # the first trial always runs
                self.skip.add(s)
                self.skipped.append({"settings": s.to_dict(), "reason": "budget", "estimate_s": round(guess, 1)})
                if left < 1.0:
                    self.stopped = f"the budget of {self.budget:g} s was spent"
                    if search is not None:
                        self._skip_rest(search)
                    return
                continue
            if not self.trial(s, role, est, samples, left):
                return

    def left(self) -> float:
        """Seconds of the budget a trial may still take: what stopping the run needs is kept back."""
        return self.budget - STOP_S - (time.monotonic() - self.t0)

    def confirmations(self) -> list[tuple[Settings, str]]:
        """The two best settings once more each, the runner-up first, when they are close: trials run one after
        another on a machine whose load moves, so a close call is settled by measurements side by side."""
        ranked = sorted(((v, s) for s, v in mean_results(self.trials).items() if v),
                        key=lambda vs: vs[0], reverse=True)
        if len(ranked) < 2 or ranked[1][0] < ranked[0][0] * (1 - CONFIRM_WITHIN):
            return []
        return [(ranked[1][1], "confirm"), (ranked[0][1], "confirm")]

    def trial(self, s: Settings, role: str, est: Estimator, samples: int, left: float) -> bool:
        """Run one trial. False when the overall timeout stopped it (nothing more can run)."""
        # A trial may take trial_timeout, or three times its estimate when that is longer (spawn workers
        # under load). The first trial always runs in full; later ones are cut at the budget.
        base = max(self.trial_timeout, 3.0 * est.estimate(s))
        limit = min(base, max(left, 0.1)) if self.trials else base
        budget_limited = limit < base
        limit = min(limit, max(1.0, self.deadline - time.monotonic() - 5.0))  # the overall timeout answers the rest
        req = {"op": "trial", "id": len(self.trials) + 1, "settings": s.to_dict(), "samples": samples,
               "limit_s": round(limit, 2), "dl_timeout": round(est.batch_timeout(s, base), 2)}
        self.probe.send(req)
        res = self.probe.receive(max(0.0, min(limit + 20.0, self.deadline - time.monotonic())))
        if res is None:
            self.timed_out = True
            self.stopped = f"the overall timeout of {self.timeout:g} s was reached during trial {req['id']}"
            self.trials.append({"id": req["id"], "settings": s.to_dict(), "status": "timeout", "role": role,
                                "error": f"stopped by the overall timeout ({self.timeout:g} s)"})
            return False
        res["role"], res["settings"] = role, s.to_dict()
        if res.get("status") in ("slow", "timeout") and budget_limited:
            res["status"] = "budget"  # cut at the budget: not measured, and no verdict on it
        self.trials.append(res)
        if res.get("seconds") and res.get("status") == "ok":
            est.learn(s, float(res["seconds"]))
        self.results[s] = res.get("samples_per_s") if res.get("status") == "ok" else None
        if res.get("status") == "budget":
            self.skip.add(s)
        if self.on_trial is not None:
            self.on_trial(res)
        return True

    def _skip_rest(self, search: AdaptiveSearch | GridSearch) -> None:
        """Record what the search would still have proposed (results unchanged), for "not tried"."""
        for _ in range(500):
            s = search.propose(self.results, self.skip)
            if s is None:
                return
            self.skip.add(s)
            self.skipped.append({"settings": s.to_dict(), "reason": "budget"})
