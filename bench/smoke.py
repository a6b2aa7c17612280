"""Benchmark: `envguard smoke --quick` and `envguard smoke` against `python -c "import torch"`.

    python bench/smoke.py [--python PATH] [--runs 5]

Whole processes, round-robin (interpreter start, CLI import, probe, DataLoader workers all counted),
medians of N runs. Targets: quick <= 2x, default <= 4x the bare torch import. With a GPU it also
reports the probe's pinned host->device bandwidth as a fraction of the best copy bandwidth measured
on this machine (bench/copy_bw.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _envguard() -> list[str]:
    script = Path(sys.executable).parent / "envguard"
    return [str(script)] if script.exists() else [sys.executable, "-m", "envguard"]


def _timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    return time.perf_counter() - t, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=sys.executable, help="interpreter to probe (default: this one)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    cmds = {
        "python -c 'import torch'": [args.python, "-c", "import torch"],
        "envguard smoke --quick": [*_envguard(), "smoke", "--python", args.python, "--quick", "--format", "json"],
        "envguard smoke": [*_envguard(), "smoke", "--python", args.python, "--format", "json"],
    }
    for argv in cmds.values():  # warm the page cache once
        subprocess.run(argv, capture_output=True, timeout=600)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    last_default: dict = {}
    for _ in range(args.runs):
        for name, argv in cmds.items():
            secs, p = _timed(argv)
            if name.startswith("envguard") and p.returncode != 0:
                print(f"{name} exited {p.returncode}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}", file=sys.stderr)
                return 1
            if name == "envguard smoke":
                last_default = json.loads(p.stdout)
            times[name].append(secs)

    base = statistics.median(times["python -c 'import torch'"])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cores {os.cpu_count()}, load average {load:.1f}, {args.runs} runs each, medians")
    print(f"{'command':34} {'median':>8} {'min':>8} {'ratio':>7} {'target':>7}")
    for name, ts in times.items():
        med = statistics.median(ts)
        target = {"envguard smoke --quick": "<= 2x", "envguard smoke": "<= 4x"}.get(name, "")
        print(f"{name:34} {med:7.2f}s {min(ts):7.2f}s {med / base:6.2f}x {target:>7}")
    checks = {c["name"]: c for c in last_default.get("probe", {}).get("checks", [])}
    per = ", ".join(f"{n.split(':')[1]} {c.get('seconds', 0):.2f}s" for n, c in checks.items()
                    if n.startswith("dataloader:"))
    print(f"default run: DataLoader round trips {per}")

    pinned = checks.get("pinned-memory", {})
    if pinned.get("status") == "pass":
        p = subprocess.run([args.python, str(HERE / "copy_bw.py")], capture_output=True, text=True, timeout=600)
        best = json.loads(p.stdout).get("best_h2d_gbps") if p.returncode == 0 else None
        got = pinned["detail"]["pinned_gbps"]
        if best:
            print(f"pinned H2D in the probe: {got:.1f} GB/s = {got / best:.0%} of the best copy measured "
                  f"({best:.1f} GB/s); pageable {pinned['detail']['pageable_gbps']:.1f} GB/s")
    else:
        print("pinned memory: not exercised (no CUDA device)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
