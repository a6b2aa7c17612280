"""What `envguard tune` may try, and in which order. Pure: no processes, no clocks.

A :class:`Space` is every DataLoader setting the tuner considers on this machine; ``Space.grid()`` is all of
it (the benchmark's exhaustive peer). :class:`AdaptiveSearch` proposes one setting at a time from the
results so far, so the runner can stop at its budget after any trial:

1. grow ``num_workers`` geometrically (0, 1, 2, 4, 8, ...) until throughput stops improving by more than
   ``tolerance`` (a few percent: measurements on a shared machine are that noisy),
2. refine between the best worker count and its measured neighbours (a peak lies between them),
3. at the best so far: with CUDA the other ``pin_memory`` first, then the other prefetch factors, the other
   start methods that work for this dataset and ``persistent_workers=False``; a change that wins is adopted
   and its own neighbours are tried in turn (coordinate search).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

# Worker counts considered, about x1.5 apart: the search refines between them, never finer.
WORKER_STEPS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
METHODS = ("fork", "forkserver", "spawn")
TORCH_DEFAULT_PREFETCH = 2


@dataclass(frozen=True)
class Settings:
    """DataLoader keyword arguments that the tuner varies. With ``num_workers=0`` the rest do not apply."""

    num_workers: int
    prefetch_factor: int | None = None
    persistent_workers: bool = False
    pin_memory: bool = False
    multiprocessing_context: str | None = None

    def normal(self) -> Settings:
        if self.num_workers == 0:
            return Settings(0, pin_memory=self.pin_memory)
        return replace(self, prefetch_factor=self.prefetch_factor or TORCH_DEFAULT_PREFETCH)

    def kwargs(self) -> dict[str, Any]:
        """The DataLoader keyword arguments, in the order a reader expects them."""
        s = self.normal()
        out: dict[str, Any] = {"num_workers": s.num_workers}
        if s.num_workers:
            out.update(prefetch_factor=s.prefetch_factor, persistent_workers=s.persistent_workers)
        out["pin_memory"] = s.pin_memory
        if s.num_workers:
            out["multiprocessing_context"] = s.multiprocessing_context
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self.normal())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Settings:
        return cls(int(d["num_workers"]), d.get("prefetch_factor"), bool(d.get("persistent_workers")),
                   bool(d.get("pin_memory")), d.get("multiprocessing_context")).normal()

    def series(self) -> str:
        """Everything but the worker count: one line of the throughput-against-workers plot."""
        s = self.normal()
        if not s.num_workers:
            return "in-process" + (", pinned" if s.pin_memory else "")
        parts = [s.multiprocessing_context or "default", f"prefetch {s.prefetch_factor}",
                 "persistent" if s.persistent_workers else "not persistent"]
        if s.pin_memory:
            parts.append("pinned")
        return ", ".join(parts)

    def short(self) -> str:
        """For a table cell: ``8 × fork, prefetch 2, persistent``."""
        s = self.normal()
        if not s.num_workers:
            return "0 (main process)" + (", pinned" if s.pin_memory else "")
        return f"{s.num_workers} × {s.series().replace('not persistent, ', '').replace(', not persistent', '')}"

    def label(self) -> str:
        s = self.normal()
        if not s.num_workers:
            return "0 workers (in the main process)" + (", pinned" if s.pin_memory else "")
        return f"{s.num_workers} worker{'s' * (s.num_workers != 1)}, {s.series()}"


@dataclass(frozen=True)
class Space:
    workers: tuple[int, ...]
    methods: tuple[str, ...] = ("fork",)
    prefetch: tuple[int, ...] = (2, 4)
    persistent: tuple[bool, ...] = (True, False)
    pin: tuple[bool, ...] = (False,)
    base_method: str = "fork"

    @classmethod
    def for_machine(cls, usable_cpus: float, methods: list[str], default_method: str | None, cuda: bool,
                    max_workers: int | None = None) -> Space:
        """Workers up to 4x the usable CPUs (at least 8): a loader that waits on I/O gains beyond the CPU count."""
        cap = max_workers if max_workers is not None else max(8, 4 * math.ceil(usable_cpus))
        workers = tuple(w for w in WORKER_STEPS if w <= cap)
        if cap not in workers:
            workers += (cap,)
        usable = tuple(m for m in METHODS if m in methods)
        base = default_method if default_method in usable else (usable[0] if usable else "fork")
        return cls(workers=workers, methods=usable or ("fork",), pin=(False, True) if cuda else (False,),
                   base_method=base)

    def base(self, workers: int) -> Settings:
        """The growth line: the platform's default start method, torch's default prefetch, persistent."""
        return Settings(workers, self.prefetch[0], True in self.persistent, self.pin[0], self.base_method).normal()

    def grid(self) -> list[Settings]:
        """Every setting of the space (``num_workers=0`` once per pin_memory value)."""
        out: list[Settings] = []
        for pin in self.pin:
            for w in self.workers:
                if w == 0:
                    out.append(Settings(0, pin_memory=pin))
                    continue
                for m in self.methods:
                    for pf in self.prefetch:
                        for pers in self.persistent:
                            out.append(Settings(w, pf, pers, pin, m))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"workers": list(self.workers), "methods": list(self.methods), "prefetch": list(self.prefetch),
                "persistent": list(self.persistent), "pin_memory": list(self.pin), "base_method": self.base_method,
                "grid_size": len(self.grid())}


def growth_sequence(workers: tuple[int, ...]) -> list[int]:
    """0, 1, 2, 4, 8, ... within the space, and its largest value."""
    seq = [w for w in workers if w == 0 or w & (w - 1) == 0]
    if workers and workers[-1] not in seq:
        seq.append(workers[-1])
    return seq


def simplest_key(s: Settings, base_method: str) -> tuple:
    """Among settings that perform alike: fewer workers, the platform's default start method (spawn and
    forkserver need a picklable dataset and a ``__main__`` guard), smaller prefetch, persistent workers,
    no pinning."""
    return (s.num_workers, s.multiprocessing_context != base_method, s.prefetch_factor or 0,
            not s.persistent_workers, s.pin_memory)


def best_of(results: Mapping[Settings, float | None], base_method: str, tolerance: float = 0.0) -> Settings | None:
    """The best measured setting; with ``tolerance``, the simplest within that fraction of the best."""
    ok = {s: v for s, v in results.items() if v is not None and v > 0}
    if not ok:
        return None
    top = max(ok.values())
    near = [s for s, v in ok.items() if v >= top * (1 - tolerance)]
    return min(near, key=lambda s: simplest_key(s, base_method))


def mean_results(trials: list[dict[str, Any]]) -> dict[Settings, float | None]:
    """samples/s per setting over trials: the mean of the successful measurements, None if none succeeded."""
    values: dict[Settings, list[float]] = {}
    for t in trials:
        got = values.setdefault(Settings.from_dict(t["settings"]), [])
        if t.get("status") == "ok" and t.get("samples_per_s"):
            got.append(float(t["samples_per_s"]))
    return {s: (sum(v) / len(v) if v else None) for s, v in values.items()}


class AdaptiveSearch:
    def __init__(self, space: Space, tolerance: float = 0.05) -> None:
        self.space, self.tol = space, tolerance

    def propose(self, results: Mapping[Settings, float | None],
                skipped: frozenset[Settings] | set[Settings] = frozenset()) -> Settings | None:
        """The next setting to measure. ``results``: samples/s of every trial so far (None: it failed);
        ``skipped``: proposals the runner could not afford. None when the search is done."""
        tried = set(results) | set(skipped)
        for step in (self._grow, self._refine, self._neighbours):
            s = step(results, tried)
            if s is not None:
                return s
        return None

    # 1. grow the worker count on the base line
    def _grow(self, results: Mapping[Settings, float | None], tried: set[Settings]) -> Settings | None:
        best = 0.0
        for w in growth_sequence(self.space.workers):
            s = self.space.base(w)
            if s not in tried:
                return s
            v = results.get(s)
            if v is None:
                continue  # a failed (or unaffordable) count says nothing about the next one
            if w >= 2 and best > 0 and v <= best * (1 + self.tol):
                return None  # stopped improving
            best = max(best, v)
        return None

    # 2. refine between the best worker count and its measured neighbours
    def _refine(self, results: Mapping[Settings, float | None], tried: set[Settings]) -> Settings | None:
        sp = self.space
        line = {w: results.get(sp.base(w)) for w in sp.workers if sp.base(w) in results}
        measured = {w: v for w, v in line.items() if v is not None}
        if not measured:
            return None
        top = max(measured.values())
        b = min(w for w, v in measured.items() if v == top)
        lower = [w for w in measured if w < b]
        upper = [w for w in measured if w > b]
        # For a curve with one peak, the best lies between the measured neighbours of the best measured.
        gaps = []
        if upper:
            gaps.append([w for w in sp.workers if b < w < min(upper)])
        if lower:
            gaps.append([w for w in sp.workers if max(lower) < w < b])
        for gap in gaps:
            open_ = [w for w in gap if sp.base(w) not in tried]
            if open_ and len(open_) == len(gap):
                return sp.base(gap[len(gap) // 2])
            if open_:  # part of the gap failed or was skipped: try what is left, nearest the best first
                return sp.base(min(open_, key=lambda w: abs(w - b)))
        return None

    # 3. one dimension at a time around the best so far
    def _neighbours(self, results: Mapping[Settings, float | None], tried: set[Settings]) -> Settings | None:
        sp = self.space
        best = best_of(results, sp.base_method)
        if best is None or best.num_workers == 0:
            return None
        for candidate in self.neighbours(best):
            if candidate not in tried:
                return candidate
        return None

    def neighbours(self, best: Settings) -> list[Settings]:
        sp = self.space
        # pin_memory first (it is only in the space with CUDA): pinned batches copy to the GPU several times
        # faster (3.4x on an H200, bench/gpu_smoke.sh), and a tight budget must not spend itself elsewhere first
        out = [replace(best, pin_memory=p) for p in sp.pin if p != best.pin_memory]
        out += [replace(best, prefetch_factor=pf) for pf in sp.prefetch if pf != best.prefetch_factor]
        out += [replace(best, multiprocessing_context=m, persistent_workers=True) for m in sp.methods
                if m != best.multiprocessing_context]
        out += [replace(best, persistent_workers=p) for p in sp.persistent if p != best.persistent_workers]
        return [s.normal() for s in out]


class GridSearch:
    """The exhaustive peer: every setting of the space, in a fixed order."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.order = space.grid()

    def propose(self, results: Mapping[Settings, float | None],
                skipped: frozenset[Settings] | set[Settings] = frozenset()) -> Settings | None:
        tried = set(results) | set(skipped)
        return next((s for s in self.order if s not in tried), None)


def untried(space: Space, tried: set[Settings]) -> dict[str, list[Any]]:
    """Values of each dimension that no trial used (with num_workers > 0 where the dimension needs workers)."""
    with_workers = [s for s in tried if s.num_workers > 0]
    return {
        "num_workers": [w for w in space.workers if w not in {s.num_workers for s in tried}],
        "multiprocessing_context": [m for m in space.methods
                                    if m not in {s.multiprocessing_context for s in with_workers}],
        "prefetch_factor": [p for p in space.prefetch if p not in {s.prefetch_factor for s in with_workers}],
        "persistent_workers": [p for p in space.persistent if p not in {s.persistent_workers for s in with_workers}],
        "pin_memory": [p for p in space.pin if p not in {s.pin_memory for s in tried}],
    }
