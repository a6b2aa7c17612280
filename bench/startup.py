"""Start-up of the CLI: whole `envguard` processes that do almost nothing, median of N runs.

    python bench/startup.py [--runs 15] [--tree DIR ...]

Times `envguard --help`, `envguard lint` on a five-line environment.yml and `envguard check --no-smoke -p
<this interpreter's environment>` as whole processes (`python -m envguard ...`). Each --tree is a directory
holding an `envguard` package (e.g. an older commit unpacked with `git archive`), put first on PYTHONPATH so
two versions are measured in the same run, alternating; without --tree, the installed envguard is timed.
Wall-clock medians and minima, and the median CPU time (user + system) of each process, which a
loaded machine disturbs least. Processes run from compiled bytecode in a cache of their own (an installed
envguard is compiled by pip; our dev machines set PYTHONDONTWRITEBYTECODE=1). Also says whether each command
imported pydantic.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL_ENV = "name: x\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\nplatforms: [linux-64]\n"
PYDANTIC_PROBE = ("import sys\ntry:\n    from envguard.cli import run\n    run(sys.argv[1:])\n"
                  "finally:\n    print('pydantic' in sys.modules, file=sys.__stderr__)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--tree", action="append", default=[], help="directory holding an envguard package")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envguard-startup-") as tmp:
        root = Path(tmp)
        (root / "environment.yml").write_text(SMALL_ENV)
        commands = {
            "--help": ["--help"],
            "lint (small file)": ["lint", str(root / "environment.yml")],
            "check --no-smoke -p <venv>": ["check", "--no-smoke", "-p", sys.prefix],
        }
        trees = args.tree or [""]
        envs = {}
        for tree in trees:
            env = dict(os.environ, PYTHONPYCACHEPREFIX=str(root / "pycache"), COLUMNS="120")
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            if tree:
                env["PYTHONPATH"] = os.pathsep.join([str(Path(tree).resolve()), env.get("PYTHONPATH", "")])
            envs[tree or "installed"] = env
        times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in envs for c in commands}
        cpu: dict[tuple[str, str], list[float]] = {(t, c): [] for t in envs for c in commands}
        for run in range(args.runs + 1):  # the first round compiles and warms the caches: not counted
            for label, argv in commands.items():
                for tree, env in envs.items():
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    start = time.perf_counter()
                    subprocess.run([sys.executable, "-m", "envguard", *argv], env=env, cwd=root,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                    if run:
                        after = resource.getrusage(resource.RUSAGE_CHILDREN)
                        times[tree, label].append(time.perf_counter() - start)
                        cpu[tree, label].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        bare = []
        for _ in range(args.runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            bare.append(time.perf_counter() - start)
        print(f"{args.runs} runs each, load {os.getloadavg()[0]:.1f}; bare `python -c pass` "
              f"{statistics.median(bare):.3f} s")
        for label, argv in commands.items():
            for tree, env in envs.items():
                probe = subprocess.run([sys.executable, "-c", PYDANTIC_PROBE, *argv], env=env, cwd=root,
                                       capture_output=True, text=True, check=False)
                pyd = probe.stderr.strip().splitlines()[-1:] == ["True"]
                print(f"{label:28} {tree:24} median {statistics.median(times[tree, label]):.3f} s  "
                      f"min {min(times[tree, label]):.3f} s  CPU (user+sys) median "
                      f"{statistics.median(cpu[tree, label]):.3f} s  pydantic {'yes' if pyd else 'no'}")


if __name__ == "__main__":
    main()
