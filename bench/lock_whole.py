"""Benchmark the wholeness pass of `envguard lock --check` (run on demand: python bench/lock_whole.py [--runs N]).

The real 1,482-record conda-lock file of ../shared/realworld (Clay-foundation/model: linux-64, osx-64,
osx-arm64) and the environment file it was made from, its content hashes recomputed by conda-lock for the
installed conda-lock (the file's own are an older conda-lock's), so that both tools call the pair fresh:

* conda-lock's `lock --check-input-hash` (real CLI, stub `--conda`), whole process: the peer;
* `envguard lock --check`, whole process, on the lock as conda-lock wrote it (the exact path: conda-lock's hash);
* the same with envguard's input fingerprint in the lock (the fast path, as for a lock envguard wrote);
* inside one fresh process per run: the freshness verdict alone, then the wholeness pass alone
  (`envguard.lock.check_whole`: the lock read, rattler imported, every dependency judged).

Target (issue #35): the wholeness pass well under 0.2x conda-lock's check. Offline, in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BIN = Path(sys.executable).parent
REALWORLD = REPO.parent / "shared" / "realworld"
LOCK = REALWORLD / "conda-lock" / "Clay-foundation__model__conda-lock@32518ce.yml"
SPEC = REALWORLD / "environment" / "Clay-foundation__model__environment@32518ce.yml"
PLATFORMS = ["linux-64", "osx-64", "osx-arm64"]

_IN_PROCESS = """
import time
c0, t0 = time.process_time(), time.perf_counter()
from pathlib import Path
from envguard.lock import check_fresh, check_whole
c1, t1 = time.process_time(), time.perf_counter()
fresh = check_fresh([Path("environment.yml")], Path("conda-lock.yml"))
c2, t2 = time.process_time(), time.perf_counter()
check_whole(Path("conda-lock.yml"), fresh=fresh.fresh)
c3, t3 = time.process_time(), time.perf_counter()
assert fresh.fresh, fresh.message
print(t1 - t0, t2 - t1, t3 - t2, c1 - c0, c2 - c1, c3 - c2)
"""

def _median(cmd: list[str], cwd: Path, runs: int, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of a whole process, medians: the CPU time holds still on a machine others share."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout[-1000:]}{proc.stderr[-2000:]}")
    return statistics.median(walls), statistics.median(cpus)


def _pair(root: Path, *, fingerprint: bool) -> Path:
    """A project directory: the real environment file and lock, its content hashes conda-lock's own now."""
    from envguard.lock import META_FINGERPRINT, lock_metadata
    from envguard.lock.solver import virtual_package_repo
    from envguard.lock.spec import conda_lock_spec

    proj = root / ("fingerprint" if fingerprint else "exact")
    proj.mkdir()
    spec = proj / "environment.yml"
    spec.write_bytes(SPEC.read_bytes())
    lock_spec = conda_lock_spec([spec], PLATFORMS)
    hashes, custom = lock_metadata([spec], lock_spec, virtual_package_repo(None), "default")
    text = LOCK.read_text(encoding="utf-8")
    for p in PLATFORMS:
        text, n = re.subn(rf"(?m)^(    {re.escape(p)}: )[0-9a-f]{{64}}$", rf"\g<1>{hashes[p]}", text)
        assert n == 1, p
    if fingerprint:  # what envguard writes beside conda-lock's hash: the fast path (the CUDA default kept implicit)
        keys = "".join(f"    {k}: {v}\n" for k, v in sorted(custom.items()) if k.startswith(META_FINGERPRINT))
        text = text.replace("\npackage:\n", f"\n  custom_metadata:\n{keys}package:\n", 1)
    (proj / "conda-lock.yml").write_text(text, encoding="utf-8")
    return proj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    root = Path(tempfile.mkdtemp(prefix="envguard-bench-whole-"))
    env = dict(os.environ, XDG_CACHE_HOME=str(root / "cache"), RATTLER_CACHE_DIR=str(root / "cache" / "rattler"),
               TMPDIR=str(root))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"lock --check wholeness benchmark (python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load {load:.1f}) in {root}")
    exact, fast = _pair(root, fingerprint=False), _pair(root, fingerprint=True)
    stub = root / "stub-conda"
    stub.write_text('#!/bin/sh\necho "conda 24.1.0"\n')
    stub.chmod(0o755)
    mapping = REPO / "envguard" / "data" / "conda-pypi-mapping.json"
    theirs, theirs_cpu = _median([str(BIN / "conda-lock"), "lock", "--check-input-hash", "--conda", str(stub),
                                  "--kind", "lock", "-f", "environment.yml", "--lockfile", "conda-lock.yml",
                                  "--pypi_to_conda_lookup_file", str(mapping)], exact, runs, env)
    exact_wall, exact_cpu = _median([str(BIN / "envguard"), "lock", "--check"], exact, runs, env)
    fast_wall, fast_cpu = _median([str(BIN / "envguard"), "lock", "--check"], fast, runs, env)
    parts = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _IN_PROCESS], cwd=fast, env=env, capture_output=True, text=True,
                             check=True).stdout
        parts.append([float(x) for x in out.split()])
    imports, verdict, whole, imports_cpu, verdict_cpu, whole_cpu = (statistics.median(p[i] for p in parts)
                                                                   for i in range(6))
    print(f"  medians of {runs}, wall / CPU seconds; ratios to conda-lock's, wall / CPU")
    print(f"  conda-lock lock --check-input-hash (1,482 records, 3 platforms): {theirs:.3f} / {theirs_cpu:.3f}")
    print(f"  envguard lock --check, exact path (conda-lock's hash): {exact_wall:.3f} / {exact_cpu:.3f}, "
          f"{exact_wall / theirs:.2f}x / {exact_cpu / theirs_cpu:.2f}x")
    print(f"  envguard lock --check, fingerprint path: {fast_wall:.3f} / {fast_cpu:.3f}, "
          f"{fast_wall / theirs:.2f}x / {fast_cpu / theirs_cpu:.2f}x")
    print(f"  in one process (fingerprint path): imports {imports:.3f} / {imports_cpu:.3f}, freshness verdict "
          f"{verdict:.3f} / {verdict_cpu:.3f}, wholeness pass {whole:.3f} / {whole_cpu:.3f} = "
          f"{whole / theirs:.3f}x / {whole_cpu / theirs_cpu:.3f}x conda-lock's check (target well under 0.2x)")
    print(f"  so without the wholeness pass the fingerprint path would take about {fast_cpu - whole_cpu:.3f} s of CPU "
          f"({(fast_cpu - whole_cpu) / theirs_cpu:.2f}x)")

if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # py-rattler's runtime can crash during interpreter finalisation (engine-notes.md)
