"""Benchmark: `envguard fleet` over 100, 1,000 and 10,000 node reports, as a whole process.

The reports are generated from real ones: `envguard check --no-smoke --format json` of this
interpreter's environment (or the reports given with --report), copied once per node with a host name
and, for one node in 20, a real-looking deviation (another numpy, another driver, torch pip-installed
over conda's), so that the grouping has groups to find.

Peer (the floor), measured in the same run: a process that only reads every report and parses it with
`json.loads`. Both are whole processes (interpreter start included), interleaved so that both see the
same machine load. Targets: fleet <= 3x the floor at 1,000 reports, and linear: the time per report at
10,000 about the same as at 1,000.

Usage: python bench/fleet.py [--sizes 100,1000,10000] [--runs 3] [--report FILE ...]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = '''import json, sys, pathlib
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    with open(p, "rb") as f:
        json.loads(f.read())
'''


def real_reports(given: list[str]) -> list[dict]:
    if given:
        return [json.loads(Path(p).read_text()) for p in given]
    # -p: no command falls back to envguard's own interpreter; this environment is named explicitly
    proc = subprocess.run([sys.executable, "-m", "envguard", "check", "-p", sys.prefix, "--no-smoke", "--format",
                           "json"],
                          capture_output=True, text=True, env={**os.environ, "ENVGUARD_NVIDIA_SMI": ""})
    if proc.returncode not in (0, 1):
        sys.exit(f"envguard check failed ({proc.returncode}): {proc.stderr.strip()}")
    return [json.loads(proc.stdout)]


def variant(rep: dict, i: int) -> dict:
    """Node i: the real report, or one in 20 deviating in a way real fleets do."""
    out = copy.deepcopy(rep) if i % 20 == 0 else rep
    kind = (i // 20) % 3
    if i % 20 == 0 and kind == 0:
        for p in out["packages"]:
            if p["name"] == "numpy":
                p["version"] = "1.26.4"
    elif i % 20 == 0 and kind == 1:
        out["gpu"] = {"driver_version": "535.104.05", "gpus": [{"name": "NVIDIA H100 80GB HBM3", "capability": "9.0"}]}
    elif i % 20 == 0:
        out["findings"] = out["findings"] + [{"code": "EG520", "severity": "error", "message": "torch installed by pip",
                                              "fix": "", "file": None, "line": None, "package": "torch"}]
        out["exit_code"] = 1
    return out


def generate(directory: Path, reports: list[dict], n: int) -> int:
    directory.mkdir(parents=True)
    size = 0
    for i in range(n):
        rep = variant(reports[i % len(reports)], i)
        text = json.dumps({**rep, "host": f"gpu{i:05d}"}, indent=2)
        (directory / f"gpu{i:05d}.json").write_text(text)
        size += len(text)
    return size


def measure(directory: Path, floor: Path, runs: int) -> tuple[float, float, int]:
    cmd = [sys.executable, "-m", "envguard", "fleet", str(directory), "--format", "json"]
    eg: list[float] = []
    fl: list[float] = []
    code = 0
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        eg.append(time.perf_counter() - t)
        code = p.returncode
        if code not in (0, 1):
            sys.exit(f"envguard fleet failed ({code}): {p.stderr.strip()}")
        t = time.perf_counter()
        subprocess.run([sys.executable, str(floor), str(directory)], check=True)
        fl.append(time.perf_counter() - t)
    return statistics.median(eg), statistics.median(fl), code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--report", action="append", default=[], help="real check reports to generate from")
    args = ap.parse_args()
    reports = real_reports(args.report)
    with tempfile.TemporaryDirectory(prefix="envguard-bench-fleet-") as tmp:
        floor = Path(tmp) / "floor.py"
        floor.write_text(FLOOR)
        print(f"reports generated from {len(reports)} real one(s), {len(reports[0]['packages'])} packages each; "
              f"median of {args.runs}; load {os.getloadavg()[0]:.1f}")
        print(f"{'reports':>8} {'MB':>7} {'fleet s':>8} {'floor s':>8} {'ratio':>6} {'fleet ms/report':>16} "
              f"{'floor ms/report':>16}")
        for n in (int(x) for x in args.sizes.split(",")):
            d = Path(tmp) / f"r{n}"
            size = generate(d, reports, n)
            eg, fl, code = measure(d, floor, args.runs)
            print(f"{n:>8} {size / 1e6:>7.1f} {eg:>8.3f} {fl:>8.3f} {eg / fl:>5.2f}x {eg / n * 1000:>16.3f} "
                  f"{fl / n * 1000:>16.3f}   (exit {code})")


if __name__ == "__main__":
    main()
