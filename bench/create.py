"""Benchmark `envguard create` against a plain `rattler.install` of the same records, warm package cache.

    python bench/create.py [--packages 500] [--rounds 5]

1. Generate a synthetic channel (tests/support/channels.py ``generate_channel``) and lock every name in it with the
   real `envguard lock`: a lock of ``--packages`` conda packages for this platform.
2. Warm the package cache with one untimed create.
3. Each round, alternating order: the whole ``envguard create`` process (``python -m envguard create -p ...
   --no-check --quiet``: start-up, lock reading, freshness, the pre-link verification (every artifact's hash,
   a stat against its recorded stamp when unchanged; every cache entry against paths.json; every path), staging,
   fingerprint, rename), and the peer: the plain-rattler way to install the same lock, a process that imports rattler,
   reads the lock with ``rattler.LockFile`` and calls ``rattler.install`` into a fresh prefix. Also the bare
   ``rattler.install`` call timed inside this process, and the CLI's fixed start-up (``create --help``).

Prints medians and the overhead ratio envguard / peer process (target <= 1.2), the same ratio of the fastest
rounds (the least disturbed by other load), the user and system CPU time of both processes, and the
load average.

4. The cost of the verified package cache (``--cache-packages N``, 0 to skip): a second channel
   whose packages carry real files (``--files`` per package, ``--kib`` KiB on average, stored ``.conda``), and
   envguard's pre-link step (envguard.create.prelink.prepare: archive hashes, archive scans, cache entries
   checked against paths.json, every path checked) timed in-process in its three states: cold (empty package
   cache: every archive scanned), warm with the files' identities stamped (what every create after the first
   pays: a stat per file), and warm with the stamps dropped (every extracted file hashed against paths.json,
   as after another tool touched the cache). Also the whole ``envguard create`` process cold and warm against
   the same peer process as above, cold and warm. On a shared machine the install's fsyncs and threads make
   single rounds vary 2-3x and system time balloon; user CPU time is the steadiest measure of envguard's own
   extra work. Both processes run from compiled bytecode (see below). Everything lives in a temporary
   directory (caches included); nothing touches ~/.cache.

5. A realistic workload (``--real-tree``, off by default: it packages ~1.3 GB): every distribution installed in
   this interpreter's site-packages (envguard's dev venv: a real PyTorch environment, ~30,000 files) as one
   stored ``.conda`` of its real files (those its ``*.dist-info/RECORD`` lists), locked, and the whole
   ``envguard create`` process cold and warm against the peer process, with envguard's pre-link step warm
   in-process. ``--real-tree-max-mib N`` takes distributions only up to N MiB (torch first when it fits) for a
   quicker run. See bench/create_realtree.py.

    python bench/create.py --packages 20 --rounds 3 --cache-packages 0 --real-tree [--real-tree-max-mib 900]
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

PEER = r'''
# The plain-rattler way to install a conda-lock file: rattler reads the lock, installs the host records.
import asyncio, os, sys
from pathlib import Path
import rattler
lock = rattler.LockFile.from_path(Path(sys.argv[1]))
env = lock.default_environment()
platform = next(p for p in env.platforms() if p.name == sys.argv[4])
records = env.conda_repodata_records_for_platform(platform)
asyncio.run(rattler.install(records, sys.argv[2], cache_dir=Path(sys.argv[3]), show_progress=False,
                            execute_link_scripts=False))
os._exit(0)
'''


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=500, help="conda packages in the lock")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--cache-packages", type=int, default=120,
                        help="packages with files for the verified-cache costs (0: skip)")
    parser.add_argument("--files", type=int, default=20, help="files per package (verified-cache costs)")
    parser.add_argument("--kib", type=int, default=48, help="average file size in KiB (verified-cache costs)")
    parser.add_argument("--real-tree", action="store_true",
                        help="also package this interpreter's site-packages (real files, ~1.3 GB) and measure it")
    parser.add_argument("--real-tree-max-mib", type=int, default=None, metavar="N",
                        help="--real-tree: take distributions only up to N MiB, torch first (default: all)")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="envguard-bench-create-"))
    env = dict(os.environ)
    env.update({"XDG_CACHE_HOME": str(root / "cache"), "RATTLER_CACHE_DIR": str(root / "cache" / "rattler"),
                "ENVGUARD_PKGS_DIR": str(root / "pkgs"), "TMPDIR": str(root / "tmp")})
    for key in ("ENVGUARD_BACKEND", "ENVGUARD_TEST_KILL_AT", "ENVGUARD_TEST_PAUSE_AT"):
        env.pop(key, None)
    # Both processes start from compiled bytecode, as an installed envguard does (pip compiles on install).
    # With PYTHONDONTWRITEBYTECODE set (as on our dev machines) an editable envguard would otherwise compile
    # its modules from source on every run (~20 ms) while rattler ships compiled; the bytecode goes to a
    # cache under the temporary directory, filled by the untimed warm-up runs.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    (root / "tmp").mkdir()
    os.environ.update({k: v for k, v in env.items() if k in ("XDG_CACHE_HOME", "RATTLER_CACHE_DIR",
                                                              "ENVGUARD_PKGS_DIR", "TMPDIR")})
    # this process's own temporary files too (the in-process lock's conda-lock directories): it ends with
    # os._exit, which runs no exit handler, so only the removal of root removes them
    tempfile.tempdir = str(root / "tmp")

    from support import channels

    from envguard.create import read_plan
    from envguard.platforms import host_platform

    plat = host_platform()
    t0 = time.perf_counter()
    # generate_channel makes about one name per two records; ask for twice the names we want
    gen = channels.generate_channel(root / "channel", 2 * args.packages, platforms=(plat,))
    names = gen.names[: args.packages]
    env_file = root / "proj" / "environment.yml"
    env_file.parent.mkdir()
    env_file.write_text("channels:\n  - " + gen.url + "\ndependencies:\n" + "".join(f"  - {n}\n" for n in names)
                        + f"platforms:\n  - {plat}\n")
    from envguard.lock import lock

    lockfile = lock([env_file]).lockfile
    plan = read_plan(Path(lockfile), plat)
    n = len(plan.conda)
    print(f"channel + lock: {n} conda packages for {plat} in {time.perf_counter() - t0:.1f} s")
    peer_script = root / "peer.py"
    peer_script.write_text(PEER)
    pkgs = root / "pkgs"

    cpu: dict[str, list[tuple[float, float]]] = {"envguard": [], "peer": []}

    def child_cpu() -> tuple[float, float]:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime, usage.ru_stime

    def cpu_since(before: tuple[float, float]) -> tuple[float, float]:
        user, system = child_cpu()
        return user - before[0], system - before[1]

    def envguard(i: int) -> float:
        cpu0 = child_cpu()
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "envguard", "create", "-p", str(root / f"eg{i}"),
                               "--lockfile", str(lockfile), "--no-check", "--quiet"], env=env,
                              capture_output=True, text=True)
        took = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"envguard create failed ({proc.returncode}): {proc.stderr.strip()}")
        cpu["envguard"].append(cpu_since(cpu0))
        return took

    def peer(i: int) -> float:
        cpu0 = child_cpu()
        start = time.perf_counter()
        # the peer has a package cache of its own: its hard links would change the ctimes of envguard's
        # extracted files, which envguard then hashes again (the verified cache; see verified_cache_costs)
        proc = subprocess.run([sys.executable, str(peer_script), str(lockfile), str(root / f"peer{i}"),
                               str(root / "peer-pkgs"), plat],
                              env=env, capture_output=True, text=True)
        took = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"peer failed ({proc.returncode}): {proc.stderr.strip()}")
        cpu["peer"].append(cpu_since(cpu0))
        return took

    def in_process(i: int) -> float:
        import asyncio

        import rattler

        from envguard.create.backends.rattler_backend import to_record

        recs = [to_record(a) for a in plan.conda]
        start = time.perf_counter()
        # a package cache of its own, as the peer's: linking from envguard's would change the ctimes of its
        # extracted files, and the next timed create would hash them all again (until issue 27 it did)
        asyncio.run(rattler.install(recs, root / f"inproc{i}", cache_dir=root / "inproc-pkgs", show_progress=False,
                                    execute_link_scripts=False))
        return time.perf_counter() - start

    def cli_floor(*argv: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "envguard", *argv], env=env, capture_output=True)
        return time.perf_counter() - start

    def phases() -> dict[str, float]:
        """envguard's own steps before the install, in this (already imported) process."""
        from envguard.create import check_lock_fresh
        from envguard.create.prelink import prepare

        out: dict[str, float] = {}
        start = time.perf_counter()
        p = read_plan(Path(lockfile), plat)
        out["read lock"] = time.perf_counter() - start
        start = time.perf_counter()
        check_lock_fresh(p, [], locked=False)
        out["freshness"] = time.perf_counter() - start
        start = time.perf_counter()
        prepare(p.conda, pkgs, platform=plat, lockfile=Path(lockfile)).cleanup()
        out["pre-link verification"] = time.perf_counter() - start
        return out

    load_before = os.getloadavg()
    envguard(-1)  # warm the package cache, the OS file cache and the bytecode cache
    peer(-1)
    in_process(-1)
    cli_floor("create", "--help")
    cli_floor("--version")
    eg, pr, ip, fl, fv = [], [], [], [], []
    ph: dict[str, list[float]] = {}
    for i in range(args.rounds):
        if i % 2:
            pr.append(peer(i))
            eg.append(envguard(i))
        else:
            eg.append(envguard(i))
            pr.append(peer(i))
        ip.append(in_process(i))
        fl.append(cli_floor("create", "--help"))
        fv.append(cli_floor("--version"))
        for k, v in phases().items():
            ph.setdefault(k, []).append(v)
    m_eg, m_pr, m_ip = statistics.median(eg), statistics.median(pr), statistics.median(ip)
    print(f"envguard create (whole process)   median {m_eg:.3f} s  ({', '.join(f'{x:.3f}' for x in eg)})")
    print(f"peer: rattler.install (process)   median {m_pr:.3f} s  ({', '.join(f'{x:.3f}' for x in pr)})")
    print(f"rattler.install call (in-process) median {m_ip:.3f} s")
    ratio = m_eg / m_pr
    print(f"overhead ratio envguard / peer process: {ratio:.2f} (target <= 1.2) -> {'OK' if ratio <= 1.2 else 'OVER'}")
    print(f"fastest rounds: envguard {min(eg):.3f} s, peer {min(pr):.3f} s, ratio {min(eg) / min(pr):.2f}")
    for what, pick in (("user", 0), ("sys", 1)):  # the warm-up runs left out
        c_eg = statistics.median(c[pick] for c in cpu["envguard"][1:])
        c_pr = statistics.median(c[pick] for c in cpu["peer"][1:])
        print(f"{what} CPU (median): envguard {c_eg:.3f} s, peer {c_pr:.3f} s, envguard - peer {c_eg - c_pr:+.3f} s")
    print(f"envguard / bare in-process install: {m_eg / m_ip:.2f}")
    print(f"CLI start-up: `envguard --version` {statistics.median(fv):.3f} s, `envguard create --help` "
          f"{statistics.median(fl):.3f} s (the difference is typer rendering the help with rich)")
    print("envguard steps in-process: " + ", ".join(f"{k} {statistics.median(v):.3f} s" for k, v in ph.items()))
    print("load average before / after: " + " / ".join(", ".join(f"{x:.2f}" for x in la)
                                                       for la in (load_before, os.getloadavg())))
    import shutil

    try:
        if args.cache_packages:
            verified_cache_costs(root, env, plat, peer_script, args)
        if args.real_tree:
            from create_realtree import real_tree_costs

            real_tree_costs(root, env, plat, peer_script, args)
    finally:  # also when a workload fails: --real-tree leaves gigabytes
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")
    sys.stdout.flush()
    os._exit(0)  # py-rattler's runtime can crash at interpreter exit (engine-notes.md)


def verified_cache_costs(root: Path, env: dict[str, str], plat: str, peer_script: Path,
                         args: argparse.Namespace) -> None:
    """What verifying the package cache before linking costs, cold and warm (see the module doc, step 4)."""
    import random
    import shutil

    from create_runs import Runs
    from support import channels

    from envguard.create import read_plan
    from envguard.lock import lock

    rng = random.Random(1)
    chan = root / "files-channel"
    t0 = time.perf_counter()
    total = 0
    for i in range(args.cache_packages):
        files = {}
        for j in range(args.files):
            size = rng.randint(1, 2 * args.kib * 1024)
            total += size
            files[f"lib/egfiles{i}/f{j}.bin"] = rng.randbytes(size)
        channels.build_package(chan, f"egfiles{i}", "1.0", noarch="generic", files=files, fmt="conda")
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    proj = root / "files-proj"
    proj.mkdir()
    (proj / "environment.yml").write_text(
        f"channels:\n  - {channels.channel_url(chan)}\ndependencies:\n"
        + "".join(f"  - egfiles{i}\n" for i in range(args.cache_packages)) + f"platforms:\n  - {plat}\n")
    lockfile = Path(lock([proj / "environment.yml"]).lockfile)
    plan = read_plan(lockfile, plat)
    n_files = args.cache_packages * args.files
    print(f"\nverified package cache: {len(plan.conda)} packages, {n_files} files, {total / 1e6:.0f} MB "
          f"(built and locked in {time.perf_counter() - t0:.1f} s)")

    runs = Runs(env, plat, peer_script, lockfile, plan)
    create, peer, prepare_time = runs.create, runs.peer, runs.prepare

    rows: dict[str, list[float]] = {}
    for r in range(args.rounds):
        fresh = root / f"vc-pkgs{r}"
        rows.setdefault("prepare, cold (archives scanned)", []).append(prepare_time(fresh))
        shutil.rmtree(fresh)
        cold_eg = create(fresh, root / f"vc-eg-cold{r}")
        cold_pr = peer(root / f"vc-peer-pkgs{r}", root / f"vc-peer-cold{r}")
        rows.setdefault("envguard create, cold (process)", []).append(cold_eg)
        rows.setdefault("peer rattler.install, cold (process)", []).append(cold_pr)
        rows.setdefault("prepare, warm, identities stamped", []).append(prepare_time(fresh))
        runs.forget_identities(fresh)
        rows.setdefault("prepare, warm, every file hashed", []).append(prepare_time(fresh))
        create(fresh, root / f"vc-eg-restamp{r}")  # hashes the files again and stamps their identities
        rows.setdefault("envguard create, warm (process)", []).append(create(fresh, root / f"vc-eg-warm{r}"))
        rows.setdefault("peer rattler.install, warm (process)", []).append(
            peer(root / f"vc-peer-pkgs{r}", root / f"vc-peer-warm{r}"))
    med = {k: statistics.median(v) for k, v in rows.items()}
    for k, v in med.items():
        print(f"  {k:<42} median {v:.3f} s")
    cold = med["envguard create, cold (process)"] / med["peer rattler.install, cold (process)"]
    warm = med["envguard create, warm (process)"] / med["peer rattler.install, warm (process)"]
    print(f"  cold ratio envguard / peer: {cold:.2f}; warm ratio: {warm:.2f}")
    hashed = med["prepare, warm, every file hashed"]
    print(f"  hashing the extracted files: {total / 1e6 / hashed:.0f} MB/s; the stamps save "
          f"{hashed - med['prepare, warm, identities stamped']:.3f} s per create "
          f"({n_files / max(med['prepare, warm, identities stamped'], 1e-9):.0f} files/s checked by stat)")


if __name__ == "__main__":
    main()
