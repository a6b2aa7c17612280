"""Benchmark: `envguard diff` of the two largest real conda-lock files, as a whole process.

Peer, measured in the same run: conda-lock's own ``parse_conda_lock_file`` of
the same two files, in process, after its import (so the peer gets the
benefit of the doubt). Target: envguard's whole diff (interpreter start,
imports, reading both files, diffing, JSON output) <= 0.5x the peer.

Also checks that the diff process never imports conda_lock and reports
whether it imported rattler.

Usage: python bench/diff.py [--runs N] [--realworld DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def realworld_dir(arg: str | None) -> Path:
    d = Path(arg or os.environ.get("ENVGUARD_REALWORLD") or REPO.parent / "shared" / "realworld")
    if not (d / "conda-lock").is_dir():
        sys.exit(f"no real-world corpus at {d} (pass --realworld DIR)")
    return d


def two_largest(d: Path) -> list[Path]:
    files = sorted((p for p in (d / "conda-lock").iterdir() if p.is_file()), key=lambda p: p.stat().st_size)
    return files[-2:]


def measure(a: Path, b: Path, runs: int) -> tuple[list[float], list[float], float, str]:
    """Interleave the two so that both see the same machine load (CI machines are shared)."""
    cmd = [sys.executable, "-m", "envguard", "diff", str(a), str(b), "--all-platforms", "--format", "json",
           "--exit-zero"]
    t = time.perf_counter()
    from conda_lock.lockfile import parse_conda_lock_file

    import_s = time.perf_counter() - t
    eg: list[float] = []
    cl: list[float] = []
    for _ in range(runs):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        eg.append(time.perf_counter() - t)
        if p.returncode != 0:
            sys.exit(f"envguard diff failed ({p.returncode}): {p.stderr.strip()}")
        t = time.perf_counter()
        parse_conda_lock_file(a)
        parse_conda_lock_file(b)
        cl.append(time.perf_counter() - t)
    imports = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], capture_output=True, text=True).stderr
    return eg, cl, import_s, imports


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--realworld")
    args = ap.parse_args()
    a, b = two_largest(realworld_dir(args.realworld))
    n = sum(1 for f in (a, b) for line in f.open() if line.startswith("- "))
    print(f"files: {a.name} ({a.stat().st_size:,} B), {b.name} ({b.stat().st_size:,} B); {n} package entries")

    eg, cl, cl_import, imports = measure(a, b, args.runs)
    eg_med, cl_med = statistics.median(eg), statistics.median(cl)
    print(f"envguard diff, whole process: median {eg_med:.3f} s, min {min(eg):.3f} s ({args.runs} runs)")
    print(f"conda-lock parse_conda_lock_file x2, in process: median {cl_med:.3f} s, min {min(cl):.3f} s "
          f"(+ {cl_import:.3f} s to import conda_lock, not counted)")
    ratio, ratio_min = eg_med / cl_med, min(eg) / min(cl)
    verdict = "met" if ratio <= 0.5 else "MISSED"
    print(f"ratio envguard / conda-lock parse: {ratio:.2f}x median, {ratio_min:.2f}x min "
          f"(target <= 0.50x: {verdict})")
    mods = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in imports.splitlines() if "|" in line}
    print(f"diff process imported conda_lock: {'conda_lock' in mods}; rattler: {'rattler' in mods}")


if __name__ == "__main__":
    main()
