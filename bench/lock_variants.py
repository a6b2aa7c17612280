"""Benchmark locking N variants together against one lock (run on demand: python bench/lock_variants.py).

The project is the one tests/test_variants_lock.py locks: Python 3.12, torch 2.7 on linux-64 with the variants
cpu, cuda-12.6 and cuda-12.9, against conda-forge's real records (the metadata channel built from
../shared/realworld, tests/support/metadata_channel.py). In one run, whole-process wall time (median of
--runs, every lock written from scratch, repodata cache warm for both):

* one lock: `envguard lock -f environment.yml -f variants/cuda-12.6.yml --lockfile conda-lock.one.yml`;
* N variants: `envguard lock` (every variant, together, and the differences between them).

Target (issue #37): the N-variant lock costs at most N times the one lock. Offline, in a temporary directory
with its own caches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
BIN = Path(sys.executable).parent

BASE = """\
name: bench-variants
channels:
  - {url}
platforms:
  - linux-64
dependencies:
  - python=3.12
  - pytorch=2.7.*=cpu*
  - numpy
  - pip
"""
OVERLAYS = {
    "cpu": "dependencies:\n  - pytorch=2.7.*=cpu*\n",
    "cuda-12.6": "dependencies:\n  - pytorch=2.7.*=cuda12*\n  - cuda-version=12.6\n",
    "cuda-12.9": "dependencies:\n  - pytorch=2.7.*=cuda12*\n  - cuda-version=12.9\n",
}


def _timed(cmd: list[str], cwd: Path, env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        for old in cwd.glob("conda-lock.*yml"):  # from scratch every time: no lock to start from
            old.unlink()
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--realworld", type=Path,
                    default=Path(os.environ.get("ENVGUARD_REALWORLD", REPO.parent / "shared" / "realworld")))
    args = ap.parse_args()
    from support import metadata_channel

    with tempfile.TemporaryDirectory(prefix="envguard-bench-variants-") as tmp:
        root = Path(tmp)
        channel = metadata_channel.build_metadata_channel(metadata_channel.realworld_locks(args.realworld),
                                                          root / "channel")
        project = root / "project"
        (project / "variants").mkdir(parents=True)
        (project / "environment.yml").write_text(BASE.format(url=channel.url))
        for name, text in OVERLAYS.items():
            (project / "variants" / f"{name}.yml").write_text(text)
        env = dict(os.environ, XDG_CACHE_HOME=str(root / "cache"), RATTLER_CACHE_DIR=str(root / "cache" / "rattler"),
                   ENVGUARD_OFFLINE="1")
        envguard = str(BIN / "envguard")
        one_cmd = [envguard, "lock", "-f", "environment.yml", "-f", "variants/cuda-12.6.yml",
                   "--lockfile", "conda-lock.one.yml"]
        all_cmd = [envguard, "lock"]
        _timed(all_cmd, project, env, 1)  # warm the repodata cache and the interpreter's files for both
        one = _timed(one_cmd, project, env, args.runs)
        together = _timed(all_cmd, project, env, args.runs)
        n = len(OVERLAYS)
        print(f"one lock (cuda-12.6):            {one:6.2f} s")
        print(f"{n} variants together (envguard lock): {together:6.2f} s")
        print(f"ratio: {together / one:.2f}x one lock for {n} variants (target <= {n}x): "
              f"{'ok' if together <= n * one else 'OVER TARGET'}")


if __name__ == "__main__":
    main()
