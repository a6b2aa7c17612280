"""Generate synthetic conda channels for benchmarks (wraps tests/support/channels.py).

    python bench/gen_channel.py DIR 500                      # 500 packages per platform, built and indexed
    python bench/gen_channel.py DIR 30000 --repodata-only    # 30,000 records, repodata.json only

Other bench scripts: ``from gen_channel import channels`` (after putting bench/ on sys.path) gives the test
channel library: ``channels.generate_channel(dir, n, platforms)`` and ``channels.generate_repodata(...)``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support import channels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("n", type=int, help="records per platform")
    parser.add_argument("-p", "--platform", action="append", dest="platforms",
                        help="platform subdir (repeatable); default linux-64, osx-arm64, win-64")
    parser.add_argument("--repodata-only", action="store_true", help="write repodata.json without package files")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    platforms = tuple(args.platforms or channels.PLATFORMS)
    start = time.perf_counter()
    if args.repodata_only:
        channels.generate_repodata(args.directory, args.n, platforms, seed=args.seed)
        roots = ""
    else:
        generated = channels.generate_channel(args.directory, args.n, platforms, seed=args.seed)
        roots = " ".join(generated.root_specs)
    print(f"{args.directory}: {args.n} records x {len(platforms)} platforms in {time.perf_counter() - start:.2f} s")
    if roots:
        print(f"root specs: {roots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
