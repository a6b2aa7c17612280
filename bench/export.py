"""Benchmark `envguard export` against `pip freeze` on the same prefix, measured in the same run.

    python bench/export.py [--conda 250] [--pip 250] [--repeat 5] [--keep DIR]

Builds the prefix of bench/check.py (rattler, from a local channel): python plus about 250 noarch:python
conda packages and about 250 pip dists in pip's on-disk layout (INSTALLER=pip, RECORD, WHEEL). Then, as
whole processes (interpreter start and imports included), round-robin, medians of ``--repeat`` warm runs:

* ``envguard export -p PREFIX --output-dir DIR --no-index --force``: environment.yml + conda-lock.yml (conda-lock's
  models, writer and content hash), no index lookups. Target: <= 1.0x ``pip freeze``, though it reads both
  the conda records and the dists.
* ``envguard export --format environment``: the spec alone (no conda-lock involved).
* ``python -m pip --python PREFIX/bin/python freeze``: the peer.
* ``python -c "import conda_lock"``: how much of the export is the import of the lock format's authority.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import check as check_bench  # noqa: E402  (bench/check.py: the same 500-package prefix)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conda", type=int, default=250, help="conda noarch:python packages")
    ap.add_argument("--pip", type=int, default=250, help="pip-installed dists")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="build under this directory and keep it")
    args = ap.parse_args(argv)

    root = args.keep or Path(tempfile.mkdtemp(prefix="envguard-bench-export-"))
    os.environ.setdefault("RATTLER_CACHE_DIR", str(root / "rattler-cache"))
    os.environ.setdefault("XDG_CACHE_HOME", str(root / "cache"))
    # Every process starts from compiled bytecode, as an installed envguard does (pip compiles on install):
    # with PYTHONDONTWRITEBYTECODE set (as on our dev machines) an editable envguard would compile its modules
    # on every run. The bytecode goes to a cache under the bench directory, filled by the untimed warm-up.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    try:
        t = time.perf_counter()
        prefix = root / "prefix"
        if not (prefix / "conda-meta").is_dir():
            prefix = check_bench.build_prefix(root, args.conda, args.pip, blob_kib=1)
        print(f"built {prefix}: {args.conda} conda + {args.pip} pip dists in {time.perf_counter() - t:.1f} s; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
        eg = check_bench.envguard_argv()
        out = root / "out"
        walls = check_bench.median_walls({
            "lock": [*eg, "export", "-p", str(prefix), "--output-dir", str(out), "--no-index", "--force"],
            "spec": [*eg, "export", "-p", str(prefix), "--output-dir", str(out / "spec"), "--no-index", "--force",
                     "--format", "environment"],
            "freeze": [sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "freeze",
                       "--disable-pip-version-check"],
            "conda_lock": [sys.executable, "-c", "import conda_lock"],
        }, args.repeat)
        lock_text = (out / "conda-lock.yml").read_text()
        assert lock_text.count("\n- name: ") == args.conda + args.pip + 1, "the lock lacks packages"
        freeze = walls["freeze"]
        print()
        heading = f"measure (median of {args.repeat}, whole processes)"
        print(f"{heading:<52} {'seconds':>8} {'ratio':>7}  target")
        print(f"{'pip freeze':<52} {freeze:>8.3f} {1.0:>6.2f}x")
        print(f"{'export: environment.yml + conda-lock.yml':<52} {walls['lock']:>8.3f} "
              f"{walls['lock'] / freeze:>6.2f}x  <= 1.0x")
        print(f"{'export --format environment':<52} {walls['spec']:>8.3f} {walls['spec'] / freeze:>6.2f}x")
        label = 'of which not avoidable: python -c "import conda_lock"'
        print(f"{label:<52} {walls['conda_lock']:>8.3f} {walls['conda_lock'] / freeze:>6.2f}x")
        ok = walls["lock"] / freeze <= 1.0
        print(f"\nload average after: {os.getloadavg()[0]:.1f}")
        print("target met" if ok else "target NOT met")
        return 0 if ok else 1
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    code = main()
    # py-rattler's runtime can crash at interpreter exit (engine-notes.md): leave without finalising.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
