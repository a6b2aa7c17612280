"""Benchmark `envguard create` against a plain `rattler.install` of the same records, warm package cache.

    python bench/create.py [--packages 500] [--rounds 5]

1. Generate a synthetic channel (tests/channels.py ``generate_channel``) and lock every name in it with the
   real `envguard lock`: a lock of ``--packages`` conda packages for this platform.
2. Warm the package cache with one untimed create.
3. Each round, alternating order: the whole ``envguard create`` process (``python -m envguard create -p ...
   --no-check --quiet``: start-up, lock reading, freshness, the hash check of every artifact (a stat against
   its recorded stamp when unchanged, else sha256), staging, fingerprint, rename), and the peer: the plain-rattler way to install the same lock, a process that imports rattler,
   reads the lock with ``rattler.LockFile`` and calls ``rattler.install`` into a fresh prefix. Also the bare
   ``rattler.install`` call timed inside this process, and the CLI's fixed start-up (``create --help``).

Prints medians and the overhead ratio envguard / peer process (target <= 1.3), the same ratio of the fastest
rounds (the least disturbed by other load), the user and system CPU time of both processes, and the
load average. On a shared machine the install's fsyncs and threads make single rounds vary 2-3x and system
time balloon; user CPU time is the steadiest measure of envguard's own extra work. Both processes run from compiled bytecode
(see below). Everything lives in a temporary directory (caches included); nothing touches ~/.cache.
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

    import channels
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
        proc = subprocess.run([sys.executable, str(peer_script), str(lockfile), str(root / f"peer{i}"), str(pkgs),
                               plat],
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
        asyncio.run(rattler.install(recs, root / f"inproc{i}", cache_dir=pkgs, show_progress=False,
                                    execute_link_scripts=False))
        return time.perf_counter() - start

    def cli_floor(*argv: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "envguard", *argv], env=env, capture_output=True)
        return time.perf_counter() - start

    def phases() -> dict[str, float]:
        """envguard's own steps before the install, in this (already imported) process."""
        from envguard.create import check_lock_fresh
        from envguard.create.integrity import verify_local_artifacts

        out: dict[str, float] = {}
        start = time.perf_counter()
        p = read_plan(Path(lockfile), plat)
        out["read lock"] = time.perf_counter() - start
        start = time.perf_counter()
        check_lock_fresh(p, [], locked=False)
        out["freshness"] = time.perf_counter() - start
        start = time.perf_counter()
        verify_local_artifacts(p.conda, pkgs)
        out["artifact hash check"] = time.perf_counter() - start
        return out

    load_before = os.getloadavg()
    envguard(-1)  # warm the package cache, the OS file cache and the bytecode cache
    peer(-1)
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
    print(f"overhead ratio envguard / peer process: {ratio:.2f} (target <= 1.3) -> {'OK' if ratio <= 1.3 else 'OVER'}")
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
    if not args.keep:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"kept {root}")
    sys.stdout.flush()
    os._exit(0)  # py-rattler's runtime can crash at interpreter exit (engine-notes.md)


if __name__ == "__main__":
    main()
