"""What `envguard run` costs over starting the interpreter directly, on an environment that is its lock.

    python bench/run.py [--runs 15]

Builds a small environment (two packages from a local channel: an ``activate.d`` script and an
``env_vars.d`` file), with `envguard lock` and `envguard create`, in a temporary directory. Then, alternating,
median wall-clock of N runs of:

* ``python -c pass`` (this interpreter, started directly: the floor);
* the activation alone, as a `pixi run`-like tool does it: rattler's script for the prefix, run by bash,
  the environment read back (envguard.activate.activated_environ, in this process);
* ``envguard run -p ENV -- python -c pass``: the whole command (start-up, the fast sync test, the activation,
  exec of the same interpreter).

Prints each median and the ratios (run / direct, run's overhead in seconds: the target is at most 0.3 s), all
measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))


def _environment(root: Path, env: dict[str, str]) -> Path:
    from support import channels

    chan = root / "channel"
    channels.make_channel(chan, [
        {"name": "egact", "version": "1.0", "noarch": "generic",
         "files": {"etc/conda/activate.d/egact.sh": "export EGACT_VAR=on\n"}},
        {"name": "egvars", "version": "1.0", "noarch": "generic",
         "files": {"etc/conda/env_vars.d/egvars.json": json.dumps({"EGVARS_DATA": "x"})}},
    ], subdirs=("noarch", channels.host_platform()))
    work = root / "work"
    work.mkdir()
    (work / "environment.yml").write_text(
        f"name: bench\nchannels:\n  - {channels.channel_url(chan)}\ndependencies:\n  - egact\n  - egvars\n"
        f"platforms:\n  - {channels.host_platform()}\n")
    prefix = root / "env"
    for argv in (["lock"], ["create", "-p", str(prefix), "--no-check", "-q"]):
        subprocess.run([sys.executable, "-m", "envguard", *argv], cwd=work, env=env, check=True,
                       stdout=subprocess.DEVNULL)
    return prefix


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envguard-bench-run-") as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONDA")}
        env.update(ENVGUARD_PKGS_DIR=str(root / "pkgs"), ENVGUARD_CACHE_DIR=str(root / "cache"),
                   PYTHONPYCACHEPREFIX=str(root / "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        prefix = _environment(root, env)
        work = root / "work"

        from envguard.activate import activated_environ
        from envguard.envs import resolve_target

        target = resolve_target(prefix, None)
        cases = {
            "python -c pass (direct)": lambda: subprocess.run([sys.executable, "-c", "pass"], env=env, check=True),
            "activation alone (rattler + bash)": lambda: activated_environ(target),
            "envguard run -- python -c pass": lambda: subprocess.run(
                [sys.executable, "-m", "envguard", "run", "-p", str(prefix), "--", sys.executable, "-c", "pass"],
                env=env, cwd=work, check=True),
        }
        times: dict[str, list[float]] = {k: [] for k in cases}
        for i in range(args.runs + 1):  # the first round warms the caches and compiles: not counted
            for label, fn in cases.items():
                t = _timed(fn)
                if i:
                    times[label].append(t)
        med = {k: statistics.median(v) for k, v in times.items()}
        for label, m in med.items():
            print(f"{label:<36} median {m * 1000:8.1f} ms   min {min(times[label]) * 1000:8.1f} ms")
        direct, run = med["python -c pass (direct)"], med["envguard run -- python -c pass"]
        act = med["activation alone (rattler + bash)"]
        print(f"run / direct: {run / direct:.1f}x; run's overhead {run - direct:.3f} s (target: at most 0.3 s); "
              f"run / (direct + activation alone): {run / (direct + act):.1f}x")


if __name__ == "__main__":
    main()
