"""What each command imports: `python -X importtime -m envguard <cmd>` per command, summed.

    python bench/imports.py [--runs 5] [--tree DIR ...]

For each command (`--help`, `why`, `check --help`, `check --no-smoke -p <this venv>`, `lint` of a two-package
lock, `lock --help`): the number of modules imported, the sum of their own import times (the fastest run,
from compiled bytecode in a cache of its own) and which of the heavy modules a command should import only
when its path uses them (asyncio, ssl, socket, rattler, markdown_it, pygments, pydantic) it imported. Each
--tree is a directory holding an `envguard` package (an older commit unpacked with `git archive`), imported
instead of the installed one (an editable install's finder is taken out of the way), so two versions are
measured in one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HEAVY = ("asyncio", "ssl", "socket", "rattler", "markdown_it", "pygments", "pydantic", "yaml", "conda_lock")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from tests.support.lock_support import SMALL_LOCK  # noqa: E402 - after the path it is found on


def commands(root: Path) -> dict[str, list[str]]:
    lock = root / "conda-lock.yml"
    return {
        "--help": ["--help"],
        "why numpy (small lock)": ["why", "numpy", "--lockfile", str(lock)],
        "check --help": ["check", "--help"],
        "check --no-smoke -p <venv>": ["check", "--no-smoke", "-p", sys.prefix],
        "lint (small lock)": ["lint", str(lock)],
        "lock --help": ["lock", "--help"],
    }


def setup(root: Path) -> None:
    (root / "conda-lock.yml").write_text(SMALL_LOCK)


# `python -m envguard ARGV` with the package taken from TREE when one is given
RUN = ("import runpy, sys\ntree = sys.argv[1]\nif tree:\n"
       "    sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in type(f).__module__]\n"
       "    sys.path.insert(0, tree)\n"
       "sys.argv = ['envguard', *sys.argv[2:]]\nrunpy.run_module('envguard', run_name='__main__', alter_sys=True)\n")


def importtime(argv: list[str], env: dict[str, str], cwd: Path, tree: str = "") -> tuple[int, int, set[str]]:
    """(modules imported, sum of their self times in µs, top-level names imported)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", RUN, tree, *argv], env=env, cwd=cwd,
                          capture_output=True, text=True, check=False)
    n = total = 0
    names: set[str] = set()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _cum, name = (p.strip() for p in line[len("import time:"):].split("|", 2))
        n += 1
        total += int(self_us)
        names.add(name.strip().split(".")[0])
    return n, total, names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", action="append", default=[], help="directory holding an envguard package")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envguard-imports-") as tmp:
        root = Path(tmp)
        setup(root)
        env = dict(os.environ, PYTHONPYCACHEPREFIX=str(root / "pycache"), COLUMNS="120")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        print(f"{args.runs} runs each (the fastest run: load disturbs it least), load {os.getloadavg()[0]:.1f}")
        print("| command | tree | modules | import sum (self, ms) | heavy modules imported |\n|---|---|---|---|---|")
        for label, argv in commands(root).items():
            for tree in args.tree or [""]:
                importtime(argv, env, root, tree)  # compiles into the cache: not counted
                runs = [importtime(argv, env, root, tree) for _ in range(args.runs)]
                heavy = sorted(h for h in HEAVY if h in runs[-1][2])
                print(f"| `{label}` | {tree or 'installed'} | {runs[-1][0]} | {min(r[1] for r in runs) / 1000:.1f} | "
                      f"{', '.join(heavy) or '-'} |")


if __name__ == "__main__":
    main()
