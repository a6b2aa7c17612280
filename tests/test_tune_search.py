"""The tuner's pure parts: the search space, the adaptive search against the exhaustive grid on known
throughput surfaces, the recommendation rule, and the report's findings with numbers. No processes."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from envguard.findings import Severity
from envguard.tune import TuneResult
from envguard.tune.formats import text_chart, to_json, verdict_lines
from envguard.tune.report import findings, gain, not_tried, snippet
from envguard.tune.search import AdaptiveSearch, GridSearch, Settings, Space, best_of, growth_sequence, untried

MiB = 1 << 20


def test_space_follows_the_usable_cpus_the_pickling_and_cuda() -> None:
    sp = Space.for_machine(2.0, ["fork", "forkserver", "spawn"], "fork", cuda=False)
    assert sp.workers == (0, 1, 2, 3, 4, 6, 8) and sp.methods == ("fork", "forkserver", "spawn")
    assert sp.pin == (False,) and len(sp.grid()) == 6 * 3 * 2 * 2 + 1
    assert Space.for_machine(1.5, ["fork"], "fork", cuda=False).workers[-1] == 8  # at least 8
    assert Space.for_machine(6.0, ["fork"], "fork", cuda=False).workers[-1] == 24
    assert Space.for_machine(2.0, ["fork"], "fork", cuda=False, max_workers=5).workers == (0, 1, 2, 3, 4, 5)
    cuda = Space.for_machine(2.0, ["spawn"], "forkserver", cuda=True)
    assert cuda.pin == (False, True) and cuda.base_method == "spawn" and len(cuda.grid()) == 2 * (6 * 4 + 1)
    assert growth_sequence(sp.workers) == [0, 1, 2, 4, 8]
    assert growth_sequence((0, 1, 2, 3, 4, 6)) == [0, 1, 2, 4, 6]


def test_settings_round_trip_and_wording() -> None:
    s = Settings(4, None, True, False, "fork")
    assert s.normal().prefetch_factor == 2 and Settings.from_dict(s.to_dict()) == s.normal()
    assert s.kwargs() == {"num_workers": 4, "prefetch_factor": 2, "persistent_workers": True, "pin_memory": False,
                          "multiprocessing_context": "fork"}
    assert Settings(0, 4, True, False, "spawn").normal() == Settings(0)  # the rest needs workers
    assert Settings(0).kwargs() == {"num_workers": 0, "pin_memory": False}
    assert s.label() == "4 workers, fork, prefetch 2, persistent"
    assert Settings(1, 4, False, True, "spawn").short() == "1 × spawn, prefetch 4, pinned"


def _surface(kind: str) -> Callable[[Settings], float | None]:
    """samples/s as a function of the settings, shaped like what the tuner meets."""
    def io_bound(s: Settings) -> float:  # a sleeping dataset: more workers help up to the cap
        w = s.num_workers
        v = 100.0 * max(w, 0.9)
        if w and not s.persistent_workers and s.multiprocessing_context != "fork":
            v *= 0.3  # spawn re-imports torch every epoch
        return v * (1.03 if s.prefetch_factor == 4 else 1.0)

    def cpu_bound(s: Settings) -> float:  # 2 CPUs: saturates, then extra workers cost
        w = s.num_workers
        return 300.0 if w == 0 else 280.0 * min(w, 2) - 15.0 * max(0, w - 2)

    def peak_at_3(s: Settings) -> float:
        return 400.0 - 60.0 * abs(s.num_workers - 3) + (5.0 if s.multiprocessing_context == "forkserver" else 0.0)

    def with_failures(s: Settings) -> float | None:  # 1 and 2 workers fail (a hang, a crash)
        return None if s.num_workers in (1, 2) else io_bound(s)

    return {"io": io_bound, "cpu": cpu_bound, "peak": peak_at_3, "failures": with_failures}[kind]


@pytest.mark.parametrize("kind", ["io", "cpu", "peak", "failures"])
def test_adaptive_search_finds_the_grid_best_in_a_fraction_of_the_trials(kind: str) -> None:
    f = _surface(kind)
    space = Space.for_machine(2.0, ["fork", "forkserver", "spawn"], "fork", cuda=False)
    results: dict[Settings, float | None] = {}
    search = AdaptiveSearch(space)
    while (s := search.propose(results)) is not None:
        assert s not in results and s in space.grid()
        results[s] = f(s)
    grid = {s: f(s) for s in space.grid()}
    grid_best = max(v for v in grid.values() if v is not None)
    rec = best_of(results, space.base_method, 0.03)
    assert rec is not None and grid[rec] is not None and grid[rec] >= 0.9 * grid_best, (rec, grid[rec], grid_best)
    assert len(results) <= len(grid) / 3, len(results)
    # it tried every start method and prefetch factor once it had a best worker count
    tried = set(results)
    assert not untried(space, tried)["multiprocessing_context"] and not untried(space, tried)["prefetch_factor"]


def test_growth_stops_when_throughput_stops_improving_and_refines_between() -> None:
    space = Space.for_machine(2.0, ["fork"], "fork", cuda=False)
    f = _surface("cpu")
    results: dict[Settings, float | None] = {}
    search = AdaptiveSearch(space)
    order = []
    while (s := search.propose(results)) is not None:
        order.append(s)
        results[s] = f(s)
    workers_on_base = [s.num_workers for s in order if s == space.base(s.num_workers)]
    assert workers_on_base[:4] == [0, 1, 2, 4]  # 4 is no better than 2: growth stops before 8
    assert 8 not in workers_on_base and 3 in workers_on_base  # refined between 2 and 4
    assert best_of(results, "fork").num_workers == 2  # type: ignore[union-attr]


def test_with_cuda_the_pinned_copy_is_the_first_setting_tried_around_the_best() -> None:
    """On an H200 a 30 s budget ran out before pin_memory=True was tried, so the GPU machine was told to keep
    pin_memory=False; with CUDA it is the first neighbour of the best worker count."""
    space = Space.for_machine(2.0, ["fork", "forkserver", "spawn"], "fork", cuda=True)
    results: dict[Settings, float | None] = {}
    search = AdaptiveSearch(space)
    order = []
    while (s := search.propose(results)) is not None:
        order.append(s)
        results[s] = 100.0 + min(s.num_workers, 2) * 50 + (30 if s.pin_memory else 0)
    first_other = next(i for i, s in enumerate(order) if s.num_workers > 0 and s != space.base(s.num_workers))
    assert order[first_other].pin_memory is True and order[first_other].num_workers == 2, order
    assert best_of(results, "fork").pin_memory is True  # type: ignore[union-attr]
    cpu = Space.for_machine(2.0, ["fork", "spawn"], "fork", cuda=False)
    assert not any(s.pin_memory for s in AdaptiveSearch(cpu).neighbours(cpu.base(2)))


def test_skipped_proposals_are_not_proposed_again_and_grid_covers_everything() -> None:
    space = Space.for_machine(2.0, ["fork", "spawn"], "fork", cuda=False, max_workers=2)
    skip = {space.base(1)}
    s = AdaptiveSearch(space).propose({space.base(0): 50.0}, skip)
    assert s == space.base(2)
    grid = GridSearch(space)
    seen: dict[Settings, float | None] = {}
    while (s := grid.propose(seen)) is not None:
        seen[s] = 1.0
    assert set(seen) == set(space.grid()) and len(seen) == len(space.grid())


def test_recommendation_prefers_the_simplest_of_near_equals() -> None:
    results = {Settings(8, 2, True, False, "fork"): 1000.0, Settings(4, 2, True, False, "fork"): 985.0,
               Settings(4, 4, True, False, "spawn"): 1001.0, Settings(2, 2, True, False, "fork"): 700.0,
               Settings(3, 2, True, False, "fork"): None}
    assert best_of(results, "fork", 0.03) == Settings(4, 2, True, False, "fork")
    assert best_of(results, "fork") == Settings(4, 4, True, False, "spawn")
    assert best_of({Settings(1): None}, "fork") is None


# ---------------------------------------------------------------- the report, on results built by hand


def _result(trials: list[dict], *, shm_free: int = 64 << 30, nofile: int = 65536, step_ms: float = 0.0,
            cuda: bool = False) -> TuneResult:
    inspect = {"torch": {"version": "2.13.0+cpu", "cuda": None}, "errors": [],
               "dataset": {"label": "m:f", "class": "m.D", "kind": "map", "length": 1000, "picklable": True},
               "batch_size": 32, "cpus": {"usable": 2.0, "affinity": 2, "cgroup_quota": None, "cpu_count": 2},
               "methods": {"available": ["fork", "forkserver", "spawn"], "default": "fork",
                           "usable": ["fork", "forkserver", "spawn"]},
               "limits": {"shm": {"path": "/dev/shm", "free": shm_free}, "nofile": {"soft": nofile},
                          "sharing_strategy": "file_descriptor"},
               "cuda": {"available": cuda}, "sample": {"item_s": 0.01, "item_cpu_s": 0.0005, "batch_bytes": 8 * MiB}}
    space = Space.for_machine(2.0, ["fork", "forkserver", "spawn"], "fork", cuda=cuda)
    for i, t in enumerate(trials, 1):
        t.setdefault("id", i)
        t.setdefault("status", "ok")
        t.setdefault("batch_bytes", 8 * MiB)
        t.setdefault("tensors_per_batch", 2)
    r = TuneResult(python="/env/bin/python", inspect=inspect, options={"batch_size": 32, "step_ms": step_ms,
                   "budget_s": 60.0, "samples_per_trial": 480}, space=space, trials=trials,
                   current=Settings.from_dict(trials[0]["settings"]), findings=[], exit_code=0, timed_out=False,
                   duration=42.0)
    r.findings = findings(r)
    return r


def _t(workers: int, v: float, method: str = "fork", persistent: bool = True, **kw: object) -> dict:
    s = Settings(workers, 2 if workers else None, persistent if workers else False, False,
                 method if workers else None).to_dict()
    return {"settings": s, "samples_per_s": v, "epoch_s": 1000 / v, "epoch_start_s": 0.3, "wait_fraction": 0.5, **kw}


def test_numbers_that_will_bite_are_warnings_with_the_numbers() -> None:
    grow = {"memory": {"main": {}, "workers": [{"start": {"uss": 10 * MiB}, "end": {"uss": 110 * MiB}}] * 8}}
    r = _result([_t(0, 90.0, role="current"), _t(8, 700.0, **grow),
                 _t(4, 150.0, "spawn", persistent=False, epoch_start_s=3.2)], shm_free=64 * MiB, nofile=1024)
    by = {f.code: f for f in r.findings}
    assert by["shm"].severity is Severity.ERROR and "64.0 MiB free" in by["shm"].message
    assert "8 workers x prefetch 2 x 8.0 MiB batches = 128.0 MiB" in by["shm"].message
    assert by["fd-limit"].severity is Severity.WARNING and "1024" in by["fd-limit"].message
    assert "100.0 MiB" in by["cow-memory"].message and "800.0 MiB" in by["cow-memory"].message
    restart = by["worker-restart"]
    assert restart.severity is Severity.INFO and "imports torch" in restart.message
    # no persistent twin measured: the cost is the first batch's time less one batch loaded serially (32 x 10 ms)
    assert "2.88 s more to the first batch than loading its first batch alone would (3.20 s against 0.32 s)" \
        in restart.message
    assert by["pin-cpu"].severity is Severity.INFO
    assert by["max-workers"].fix == "rerun with --max-workers 16"  # still best at the cap (8)
    assert r.recommended == Settings(8, 2, True, False, "fork")
    assert gain(r) == pytest.approx(700 / 90)
    code = snippet(r)
    assert code is not None and 'multiprocessing_context="fork",' in code and "num_workers=8," in code


def test_restart_cost_of_the_current_settings_is_a_warning_and_idle_time_is_reported() -> None:
    r = _result([_t(4, 150.0, "spawn", persistent=False, epoch_start_s=3.0, wait_fraction=0.7, role="current"),
                 _t(4, 400.0, "spawn", wait_fraction=0.05)], step_ms=40)
    restart = next(f for f in r.findings if f.code == "worker-restart")
    assert restart.severity is Severity.WARNING and "trial 1" in restart.message
    assert "2.70 s more to the first batch than with persistent workers (3.00 s against 0.30 s)" in restart.message
    lines = verdict_lines(r)
    assert any("idle 70% of the time" in ln for ln in lines) and any("compute-bound" in ln for ln in lines)
    assert to_json(r)["current_idle_fraction"] == 0.7


def test_not_tried_and_the_chart() -> None:
    r = _result([_t(0, 90.0, role="current"), _t(1, 95.0), _t(2, 180.0), _t(4, 350.0)])
    r.skipped = [{"settings": Settings(4, 2, True, False, "spawn").to_dict(), "reason": "budget"}]
    nt = not_tried(r)
    assert "pin_memory=True: no CUDA device" in nt
    assert any(x.startswith("not started, estimated to run past the budget (60 s) from the trials before them: 4 workers, spawn") for x in nt)
    assert any(x.startswith("num_workers=3, 6, 8:") for x in nt)
    chart = text_chart(r, width=60, height=6)
    assert chart[0] == "samples/s" and chart[1].startswith(" 350 │")
    body = "\n".join(chart[1:7])
    assert body.count("b") == 3 and body.count("a") == 1  # three points on one line, the in-process one
    assert "a in-process" in chart[-1] and "b fork, prefetch 2, persistent" in chart[-1]


def test_failures_are_grouped_with_their_trials() -> None:
    failed = {"status": "failed", "error": "RuntimeError: DataLoader timed out after 5 seconds", "phase": "epoch"}
    r = _result([_t(0, 90.0, role="current"), {**_t(1, 1.0), **failed}, {**_t(2, 1.0), **failed}])
    hang = [f for f in r.findings if f.code == "hang"]
    assert len(hang) == 1 and "trial 2 (1 worker, fork" in hang[0].message and "trials 3" in hang[0].message
    assert math.isclose(r.recommended_trial["samples_per_s"], 90.0)  # type: ignore[index]


def test_close_winners_are_measured_again_side_by_side() -> None:
    from envguard.tune.search import mean_results
    from envguard.tune.session import Session

    fork8, fs8, fork4 = (Settings(8, 2, True, False, "fork"), Settings(8, 2, True, False, "forkserver"),
                         Settings(4, 2, True, False, "fork"))
    session = Session(None, budget=60, timeout=180, trial_timeout=60)  # type: ignore[arg-type]
    session.trials = [{"settings": s.to_dict(), "status": "ok", "samples_per_s": v}
                      for s, v in ((fork4, 350.0), (fork8, 590.0), (fs8, 663.0))]
    assert session.confirmations() == [(fork8, "confirm"), (fs8, "confirm")]  # the runner-up first
    session.trials.append({"settings": fs8.to_dict(), "status": "ok", "samples_per_s": 580.0})
    session.trials.append({"settings": fork8.to_dict(), "status": "failed"})
    means = mean_results(session.trials)
    assert means[fs8] == pytest.approx(621.5) and means[fork8] == 590.0 and means[fork4] == 350.0
    session.trials = session.trials[:1] + [{"settings": fs8.to_dict(), "status": "ok", "samples_per_s": 663.0}]
    assert session.confirmations() == []  # a clear winner needs no second look


def test_the_first_batch_of_an_epoch_is_not_counted_as_worker_start_up() -> None:
    """Fork workers without persistence: 0.40 s to the first batch, against 0.35 s with persistent workers
    (that batch is loaded either way). 0.05 s of a 1 s epoch is no warning; 0.40 s (40%) was one."""
    r = _result([_t(0, 90.0, role="current"), _t(8, 1000.0, epoch_start_s=0.35),
                 _t(8, 950.0, persistent=False, epoch_start_s=0.40)])
    assert "worker-restart" not in {f.code for f in r.findings}
    slow = _result([_t(0, 90.0, role="current"), _t(8, 1000.0, epoch_start_s=0.35),
                    _t(8, 700.0, persistent=False, epoch_start_s=0.60, epoch_s=1.0)])
    restart = next(f for f in slow.findings if f.code == "worker-restart")
    assert "0.25 s more to the first batch than with persistent workers" in restart.message
    assert "25% of the epoch (trial 3)" in restart.message


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class _FakeProbe:
    """Answers trial requests at once, moving a fake clock by what each trial takes: fork trials about what the
    estimator expects, spawn trials far longer (its estimate is wrong), so one is cut at its limit."""

    def __init__(self, clock: _Clock) -> None:
        self.clock, self.sent = clock, []

    def send(self, req: dict) -> None:
        self.sent.append((self.clock.now, req))

    def receive(self, timeout: float) -> dict:
        _, req = self.sent[-1]
        s = Settings.from_dict(req["settings"])
        takes = 60.0 if s.multiprocessing_context == "spawn" else 1.0
        if takes > req["limit_s"]:
            self.clock.now += req["limit_s"] + 0.05  # the probe stops the trial's processes and answers
            return {"type": "trial", "id": req["id"], "status": "timeout", "seconds": req["limit_s"],
                    "error": f"the trial process did not finish within {req['limit_s']} s"}
        self.clock.now += takes
        return {"type": "trial", "id": req["id"], "status": "ok", "seconds": takes,
                "samples_per_s": 100.0 * max(s.num_workers, 0.9)}


def test_the_search_stops_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every trial after the first is cut where the budget ends (less what stopping takes), and a trial that
    ran long is cut there, with no verdict: the run ends inside the budget, on a fake clock."""
    import types

    from envguard.tune import session as session_mod
    from envguard.tune.session import Session

    clock = _Clock()
    monkeypatch.setattr(session_mod, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    probe = _FakeProbe(clock)
    session = Session(probe, budget=12.0, timeout=60.0, trial_timeout=60.0)  # type: ignore[arg-type]
    session.inspect = {"batch_size": 32, "cpus": {"usable": 2.0}, "torch_import_s": 0.2,
                       "sample": {"item_s": 0.001, "item_cpu_s": 0.0005}, "dataset": {"length": 480}}
    space = Space.for_machine(2.0, ["fork", "spawn"], "fork", cuda=False, max_workers=4)
    session.run([(Settings(0), "current")], AdaptiveSearch(space), samples=480)
    t0 = session.t0
    for sent_at, req in probe.sent[1:]:
        assert req["limit_s"] <= 12.0 - (sent_at - t0) + 1e-6, (sent_at - t0, req)
    assert clock.now - t0 <= 12.0, clock.now - t0
    cut = [t for t in session.trials if t["status"] == "budget"]
    assert [Settings.from_dict(t["settings"]).multiprocessing_context for t in cut] == ["spawn"]
    assert session.stopped == "the budget of 12 s was spent"


def test_a_second_look_cut_at_the_budget_is_not_called_untried() -> None:
    cut = {**_t(8, 1.0), "status": "budget", "role": "confirm"}
    r = _result([_t(0, 90.0, role="current"), _t(8, 700.0), cut])
    assert not [x for x in not_tried(r) if x.startswith("not started, estimated to run past the budget")], not_tried(r)
    never = {**_t(4, 1.0, "spawn"), "status": "budget"}
    r = _result([_t(0, 90.0, role="current"), _t(8, 700.0), never])
    assert any(x.startswith("not started, estimated to run past the budget (60 s) from the trials before them: 4 workers, spawn") for x in not_tried(r))


def test_the_terminal_report_prints_names_as_they_are(capsys: pytest.CaptureFixture[str]) -> None:
    """A dataset called "data:boom" followed by ": " is text, not rich's :boom: emoji code; a dataset that
    did not load says so instead of "?: ?, unknown samples, batch size None"."""
    from envguard.tune.formats import summary_lines
    from envguard.tune.render import print_tune

    r = _result([_t(0, 90.0, role="current"), _t(2, 180.0)])
    r.inspect["dataset"]["label"] = "data:boom"
    capsys.readouterr()
    print_tune(r)
    out = capsys.readouterr().out
    assert "dataset data:boom: m.D, 1000 samples" in out and "💥" not in out
    r.inspect.pop("dataset")
    r.options["dataset"] = "mydata:make"
    assert "torch 2.13.0+cpu (CPU build); dataset mydata:make: not loaded" in summary_lines(r)


def test_a_setting_measured_twice_is_reported_by_its_mean() -> None:
    """The recommendation is judged on each setting's mean; its figure, gain and chart say the same."""
    r = _result([_t(0, 100.0, role="current"), _t(8, 600.0), _t(4, 500.0), _t(8, 700.0, role="confirm")])
    assert r.recommended == Settings(8, 2, True, False, "fork")
    assert any(ln.startswith("recommended: 8 workers, fork, prefetch 2, persistent: 650 samples/s (mean of 2 trials), "
                             "6.50x the current settings' 100") for ln in verdict_lines(r)), verdict_lines(r)
    doc = to_json(r)
    assert doc["recommended_samples_per_s"] == 650.0 and doc["gain"] == 6.5
    from envguard.tune.formats import series
    assert series(r)["fork, prefetch 2, persistent"] == [(4, 500.0), (8, 650.0)]


def test_a_measurement_far_above_the_estimated_ideal_is_not_called_100_percent() -> None:
    """The ideal is an estimate from items timed one by one: 2000 samples/s measured against an estimated 400
    says the estimate was low, never "100% of the ideal"; one a little under it keeps its percentage."""
    r = _result([_t(0, 90.0, role="current"), _t(4, 2000.0), _t(8, 700.0)])
    text = "\n".join(verdict_lines(r))
    assert "recommended: 4 workers" in text, text
    assert "above the estimated ideal of 400 samples/s" in text and "100%" not in text, text
    rows = {t["label"]: t for t in to_json(r)["trials"]}
    four = next(t for label, t in rows.items() if label.startswith("4 workers"))
    assert four["efficiency"] is None and four["ideal_underestimated"] is True
    eight = next(t for label, t in rows.items() if label.startswith("8 workers"))
    assert eight["efficiency"] == 0.875 and eight["ideal_underestimated"] is False


def test_not_measured_settings_are_called_not_measured() -> None:
    r = _result([_t(0, 90.0, role="current"), _t(1, 95.0), _t(2, 180.0), _t(4, 350.0)])
    nt = not_tried(r)
    untouched = [x for x in nt if x.startswith("num_workers=")]
    assert untouched and all("not measured" in x and "showed no gain" not in x for x in untouched), nt
