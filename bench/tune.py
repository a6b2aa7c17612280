"""Benchmark: `envguard tune`'s adaptive search against an exhaustive grid over the same space.

    python bench/tune.py [--python PATH] [--budget 60] [--repeats 3] [--step-ms 0] [--json FILE]

On ``--demo`` (500 samples of 10 ms, batch 32): run the adaptive search within ``--budget``, then every
setting of the same space (the grid: workers x start methods x prefetch x persistent), in the same run.
The grid's best measurement is the maximum of many noisy ones, so both winners are then measured again,
alternating, ``--repeats`` times each, and compared on their medians. Targets: the recommended setting
reaches >= 90% of the grid's best, in <= 1/3 of the grid's time.

``--h2d`` (GPU machines, from bench/gpu_smoke.sh): instead, measure the recommended setting with
pin_memory=False and True, alternating, and print the pinned-memory gain of the host-to-device copy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envguard.tune import TuneOptions, TuneResult, tune
from envguard.tune.search import Settings


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def _median_by(result: TuneResult) -> dict[Settings, list[float]]:
    out: dict[Settings, list[float]] = {}
    for t in result.ok_trials:
        out.setdefault(Settings.from_dict(t["settings"]), []).append(float(t["samples_per_s"]))
    return out


def _best(result: TuneResult) -> tuple[Settings, float]:
    t = max(result.ok_trials, key=lambda t: t["samples_per_s"])
    return Settings.from_dict(t["settings"]), float(t["samples_per_s"])


def h2d(args: argparse.Namespace) -> int:
    first = tune(TuneOptions(python=args.python, demo=True, budget=args.budget, step_ms=args.step_ms))
    rec = first.recommended
    if rec is None:
        print("no configuration worked", file=sys.stderr)
        return 1
    if not (first.inspect.get("cuda") or {}).get("available"):
        print("no CUDA device: the pinned-memory gain needs a GPU", file=sys.stderr)
        return 2
    pageable, pinned = replace(rec, pin_memory=False), replace(rec, pin_memory=True)
    again = tune(TuneOptions(python=args.python, demo=True, budget=10_000, step_ms=args.step_ms, current=pageable,
                             candidates=[pinned, pageable] * (args.repeats - 1) + [pinned]))
    rows: dict[bool, list[dict]] = {False: [], True: []}
    for t in again.ok_trials:
        if t.get("h2d"):
            rows[bool(t["settings"]["pin_memory"])].append(t["h2d"] | {"samples_per_s": t["samples_per_s"]})
    if not rows[False] or not rows[True]:
        print("the copies were not measured", file=sys.stderr)
        return 1
    print(f"host-to-device copy of the demo's batches ({rows[True][0]['bytes_per_batch'] / 2**20:.1f} MiB), "
          f"{rec.label()}, step {args.step_ms:g} ms, medians of {args.repeats}:")
    for pin in (False, True):
        keys = ("gbps", "copy_ms", "exposed_ms", "samples_per_s")
        med = {k: statistics.median(r[k] for r in rows[pin]) for k in keys}
        print(f"  pin_memory={pin!s:5}  {med['gbps']:7.2f} GB/s  copy {med['copy_ms']:.3f} ms  host waits "
              f"{med['exposed_ms']:.3f} ms  {med['samples_per_s']:.0f} samples/s")
    gain = statistics.median(r["gbps"] for r in rows[True]) / statistics.median(r["gbps"] for r in rows[False])
    print(f"pinned-memory gain of the copy: {gain:.2f}x")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="interpreter to tune in (default: this one)")
    ap.add_argument("--budget", type=float, default=60.0, help="the adaptive search's budget, seconds")
    ap.add_argument("--repeats", type=int, default=3, help="re-measurements of each winner")
    ap.add_argument("--step-ms", type=float, default=0.0)
    ap.add_argument("--json", default=None, help="also write every trial of both runs to this file")
    ap.add_argument("--h2d", action="store_true", help="GPU: the pinned-memory gain of the H2D copy")
    args = ap.parse_args()
    if args.h2d:
        return h2d(args)

    print(f"cores {os.cpu_count()}, load {_load()} at start; demo dataset, step {args.step_ms:g} ms")
    adaptive = tune(TuneOptions(python=args.python, demo=True, budget=args.budget, step_ms=args.step_ms))
    rec = adaptive.recommended
    if rec is None:
        print("the adaptive search found no working configuration", file=sys.stderr)
        return 1
    print(f"adaptive: {len(adaptive.trials)} trials in {adaptive.duration:.1f} s, recommends {rec.label()} "
          f"({adaptive.recommended_trial['samples_per_s']:.0f} samples/s as measured), load {_load()}")
    grid = tune(TuneOptions(python=args.python, demo=True, strategy="grid", budget=100_000, timeout=100_000,
                            step_ms=args.step_ms))
    best, best_v = _best(grid)
    print(f"grid:     {len(grid.trials)} trials ({len(grid.ok_trials)} worked) in {grid.duration:.1f} s, best "
          f"{best.label()} ({best_v:.0f} samples/s as measured), load {_load()}")
    grid_of_rec = None
    for t in grid.ok_trials:
        if Settings.from_dict(t["settings"]) == rec:
            grid_of_rec = float(t["samples_per_s"])
    if grid_of_rec is not None:
        print(f"          the recommended setting measured {grid_of_rec:.0f} samples/s in the grid "
              f"({grid_of_rec / best_v:.0%} of its best)")
    # Both winners again, alternating, so that neither profits from a lucky measurement.
    others = [best, rec] * (args.repeats - 1) + [best]
    again = tune(TuneOptions(python=args.python, demo=True, budget=100_000, timeout=100_000, step_ms=args.step_ms,
                             current=rec, candidates=others))
    meds = {s: statistics.median(v) for s, v in _median_by(again).items()}
    mine, theirs = meds.get(rec), meds.get(best)
    if mine is None or theirs is None:
        print("a winner failed when measured again", file=sys.stderr)
        return 1
    ratio, time_ratio = mine / theirs, adaptive.duration / grid.duration
    print(f"measured again, alternating, medians of {args.repeats}: recommended {mine:.0f} samples/s, grid's best "
          f"{theirs:.0f} samples/s" + (" (the same setting)" if rec == best else ""))
    print(f"throughput ratio {ratio:.2f} (target >= 0.90), time ratio {time_ratio:.2f} (target <= 0.33)")
    if args.json:
        Path(args.json).write_text(json.dumps({"adaptive": adaptive.to_dict(), "grid": grid.to_dict(),
                                               "again": again.to_dict()}, indent=1, default=str))
    return 0 if ratio >= 0.9 and time_ratio <= 1 / 3 else 1


if __name__ == "__main__":
    t0 = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - t0:.0f} s in all)")
    sys.exit(code)
