"""The real-tree workload of bench/create.py (``--real-tree``): a real PyTorch environment's files, repackaged.

Every distribution installed in this interpreter's site-packages (``<sys.prefix>/lib/python3.X/site-packages``;
in envguard's dev venv ~94 distributions, ~30,000 files, 1.3 GB, torch CPU ~14,000 of them) becomes one
noarch-generic ``.conda`` package holding that distribution's real files, read from disk: the files its
``*.dist-info/RECORD`` lists (``importlib.metadata``'s ``dist.files``), at their paths relative to
``sys.prefix`` (``lib/python3.X/site-packages/...``; the scripts RECORD lists as ``../../../bin/x`` land in
``bin/x``, and anything outside the prefix is skipped and counted). Symlinks stay symlinks. Files in
site-packages that no RECORD lists go into one leftover package, ``realtree-unowned``. The packages are built one
at a time (tests/support/channels.py ``build_package``: a ``.conda`` is always stored, raw zstd blocks, whatever
``compresslevel`` says, which only applies to ``.tar.bz2``), so the largest one (torch) bounds the memory
used, not the whole tree. Indexed with rattler's indexer and locked with the real ``envguard lock``.

``--real-tree-max-mib N`` stops adding distributions once N MiB are taken (greedy: a distribution is taken
if it still fits), torch first whenever it fits; the default takes them all.

Then, each round, alternating which goes first: the whole ``envguard create`` process and the peer process
(rattler.LockFile + rattler.install, bench/create.py's PEER), each cold (an empty package cache of its own:
the archives extracted) and warm (that cache again), and envguard's pre-link step in-process
(envguard.create.prelink.prepare): cold (an empty cache: each archive extracted by rattler into a staging
folder, 4 at once, its tree judged and moved into the cache: #42), and warm with the extracted files'
identities stamped (every create after the first) and with the stamps dropped (every extracted file hashed
against paths.json). Each round's caches and prefixes are removed at its end (the last round's are kept with
``--keep``). Printed: medians of each, the ratios envguard / peer (median and fastest rounds), the user CPU of
both processes (their children included), and, from one more cold run in-process (:func:`cold_split`), where
a cold create's own work goes.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib.metadata
import os
import re
import resource
import shutil
import stat
import statistics
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

UNOWNED = "realtree-unowned"


@dataclasses.dataclass
class Dist:
    """One package to build: its conda name and version, and its (prefix-relative path, path on disk) pairs."""

    name: str
    version: str
    files: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    size: int = 0  # bytes of its regular files


def conda_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_version(version: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+!]", "_", version) or "0"


def collect(site_packages: Path, prefix: Path) -> tuple[list[Dist], collections.Counter[str]]:
    """Every distribution in ``site_packages`` with the files its RECORD lists, and the leftover files."""
    owned: set[str] = set()
    skipped: collections.Counter[str] = collections.Counter()
    dists: list[Dist] = []

    def take(dist: Dist, path: str) -> None:
        rel = os.path.relpath(path, prefix)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            skipped["outside the prefix"] += 1
            return
        if path in owned:
            skipped["listed by a second distribution"] += 1
            return
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            skipped["listed but missing"] += 1
            return
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            skipped["not a file or symlink"] += 1
            return
        owned.add(path)
        dist.files.append((rel.replace(os.sep, "/"), path))
        if stat.S_ISREG(st.st_mode):
            dist.size += st.st_size

    found = importlib.metadata.distributions(path=[str(site_packages)])
    for d in sorted(found, key=lambda d: conda_name(d.metadata["Name"] or "")):
        name = conda_name(d.metadata["Name"] or "")
        if not name or d.files is None or any(x.name == name for x in dists):
            continue  # no RECORD (or a duplicate name): its files go to the leftover package
        dist = Dist(name, conda_version(d.version))
        for f in d.files:
            take(dist, os.path.normpath(d.locate_file(f)))
        dists.append(dist)
    left = Dist(UNOWNED, "0")
    for dirpath, dirnames, filenames in os.walk(site_packages):
        dirnames.sort()
        for entry in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = os.path.join(dirpath, entry)
            if path not in owned:
                take(left, path)
    if left.files:
        dists.append(left)
    return dists, skipped


def choose(dists: list[Dist], max_bytes: int | None) -> list[Dist]:
    """Torch first when it fits, then the others by name, the leftover package last; each while it fits."""
    ordered = sorted(dists, key=lambda d: (d.name != "torch", d.name == UNOWNED, d.name))
    chosen, total = [], 0
    for dist in ordered:
        if max_bytes is None or total + dist.size <= max_bytes:
            chosen.append(dist)
            total += dist.size
    return chosen


def build(chan: Path, dists: list[Dist]) -> int:
    """One stored ``.conda`` per distribution, built one at a time; returns the bytes packaged."""
    from support import channels

    total = 0
    for dist in dists:
        files: dict[str, bytes] = {}
        symlinks: dict[str, str] = {}
        for rel, path in dist.files:
            if os.path.islink(path):
                symlinks[rel] = os.readlink(path)
            else:
                files[rel] = Path(path).read_bytes()
                total += len(files[rel])
        channels.build_package(chan, dist.name, dist.version, noarch="generic", files=files, symlinks=symlinks,
                               fmt="conda")
        del files  # only one package's contents in memory at a time
    for sub in channels.SUBDIRS:
        (chan / sub).mkdir(parents=True, exist_ok=True)
    channels.index_channel(chan)
    return total


def real_tree_costs(root: Path, env: dict[str, str], plat: str, peer_script: Path,
                    args: argparse.Namespace) -> None:
    """Build, lock and measure the real-tree workload (see the module doc)."""
    from support import channels

    from envguard.create import read_plan
    from envguard.lock import lock

    prefix = Path(sys.prefix)
    site_packages = Path(sysconfig.get_path("purelib"))
    t0 = time.perf_counter()
    dists, skipped = collect(site_packages, prefix)
    limit = None if args.real_tree_max_mib is None else args.real_tree_max_mib * 1024 * 1024
    chosen = choose(dists, limit)
    n_files = sum(len(d.files) for d in chosen)
    chan = root / "realtree-channel"
    t1 = time.perf_counter()
    total = build(chan, chosen)
    t2 = time.perf_counter()
    proj = root / "realtree-proj"
    proj.mkdir()
    (proj / "environment.yml").write_text(
        f"channels:\n  - {channels.channel_url(chan)}\ndependencies:\n"
        + "".join(f"  - {d.name}\n" for d in chosen) + f"platforms:\n  - {plat}\n")
    lockfile = Path(lock([proj / "environment.yml"]).lockfile)
    plan = read_plan(lockfile, plat)
    t3 = time.perf_counter()
    archives = sum(p.stat().st_size for p in chan.glob("noarch/*.conda"))
    print(f"\nreal tree ({site_packages}): {len(plan.conda)} packages of {len(dists)} distributions, {n_files} files, "
          f"{total / 1e6:.0f} MB ({archives / 1e6:.0f} MB of archives); torch "
          f"{'in' if any(d.name == 'torch' for d in chosen) else 'left out'}; skipped: "
          f"{', '.join(f'{v} {k}' for k, v in sorted(skipped.items())) or 'none'}")
    print(f"  read {t1 - t0:.1f} s, built and indexed {t2 - t1:.1f} s, locked {t3 - t2:.1f} s; "
          f"peak memory of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    time.sleep(2.1)  # envguard trusts a hash stamp only for files unchanged for 2 s when hashed
    measure(root, env, plat, peer_script, lockfile, plan, total, n_files, args)


def measure(root: Path, env: dict[str, str], plat: str, peer_script: Path, lockfile: Path, plan: Any,
            total: int, n_files: int, args: argparse.Namespace) -> None:
    """The rounds: cold and warm processes against the peer, and the warm pre-link step in-process."""
    from create_runs import Runs

    runs = Runs(env, plat, peer_script, lockfile, plan)
    create, peer, prepare_time = runs.create, runs.peer, runs.prepare

    def pairs(state: str, r: int, eg_pkgs: Path, pr_pkgs: Path) -> list[tuple[str, Callable[[Path, Path], float],
                                                                           Path, Path]]:
        both = [(f"envguard create, {state} (process)", create, eg_pkgs, root / f"rt-eg-{state}{r}"),
                (f"peer rattler.install, {state} (process)", peer, pr_pkgs, root / f"rt-peer-{state}{r}")]
        return both if r % 2 == 0 else both[::-1]  # alternating which goes first

    rows: dict[str, list[float]] = collections.defaultdict(list)
    cpu: dict[str, list[float]] = collections.defaultdict(list)  # user CPU of the processes (children)

    def timed(key: str, run: Callable[[Path, Path], float], pkgs: Path, target: Path) -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
        rows[key].append(run(pkgs, target))
        cpu[key].append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before)

    load_before = os.getloadavg()
    for r in range(args.rounds):
        eg_pkgs, pr_pkgs = root / f"rt-pkgs{r}", root / f"rt-peer-pkgs{r}"
        rows["prepare, cold (extracted into staging, judged, moved in)"].append(prepare_time(root / f"rt-prep{r}"))
        shutil.rmtree(root / f"rt-prep{r}")
        for key, run, pkgs, target in pairs("cold", r, eg_pkgs, pr_pkgs):
            timed(key, run, pkgs, target)
        rows["prepare, warm, identities stamped"].append(prepare_time(eg_pkgs))
        runs.forget_identities(eg_pkgs)
        rows["prepare, warm, every file hashed"].append(prepare_time(eg_pkgs))
        create(eg_pkgs, root / f"rt-eg-restamp{r}")  # hashes the files again and stamps their identities
        for key, run, pkgs, target in pairs("warm", r, eg_pkgs, pr_pkgs):
            timed(key, run, pkgs, target)
        if r == args.rounds - 1:
            split = warm_split(eg_pkgs, plan, plat)
        if r < args.rounds - 1 or not args.keep:  # 2.6 GB of caches a round: not kept for the next
            for path in root.glob(f"rt-*{r}"):
                shutil.rmtree(path, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    for k, v in med.items():
        print(f"  {k:<45} median {v:.3f} s  ({', '.join(f'{x:.3f}' for x in rows[k])})")
    for state in ("cold", "warm"):
        eg_key, pr_key = f"envguard create, {state} (process)", f"peer rattler.install, {state} (process)"
        eg, pr = med[eg_key], med[pr_key]
        eg_cpu, pr_cpu = statistics.median(cpu[eg_key]), statistics.median(cpu[pr_key])
        print(f"  {state} ratio envguard / peer: {eg / pr:.2f} (envguard {eg - pr:+.3f} s); fastest rounds "
              f"{min(rows[eg_key]) / min(rows[pr_key]):.2f}; user CPU (median, child processes included) "
              f"envguard {eg_cpu:.2f} s, peer {pr_cpu:.2f} s")
    warm_floor(split, med["peer rattler.install, warm (process)"])
    cold_split(root, plan)
    hashed = med["prepare, warm, every file hashed"]
    stamped = med["prepare, warm, identities stamped"]
    print(f"  hashing the extracted files: {total / 1e6 / hashed:.0f} MB/s; with the stamps: "
          f"{n_files / max(stamped, 1e-9):.0f} files/s checked by stat")
    print("  load average before / after: " + " / ".join(", ".join(f"{x:.2f}" for x in la)
                                                         for la in (load_before, os.getloadavg())))


def warm_split(pkgs: Path, plan: Any, plat: str) -> dict[str, float]:
    """Where a warm create's own work goes (#42), in this process, on the last round's warm cache, medians of 5:
    the pre-link check (envguard.create.prelink.prepare: paths.json read, one lstat of every declared file,
    the stamps compared), the pass after linking that stamps the files' new ctimes and link counts
    (Prepared.finalize's second lstat pass, #38 point 9), and the floor of any per-file check: one bare
    ``os.lstat`` of every file of the entries, nothing else."""
    from envguard.create import cachetree
    from envguard.create.entryfiles import info_present
    from envguard.create.prelink import prepare

    checks, restamps, floors = [], [], []
    for _ in range(5):
        t0 = time.perf_counter()
        prepared = prepare(plan.conda, pkgs, platform=plat)
        t1 = time.perf_counter()
        for pkg in prepared.packages:
            entry = os.path.join(pkgs, pkg.art.stem)
            cachetree.scan_identity(entry, pkg.entries, info_present(entry) if pkg.present is None else pkg.present)
        t2 = time.perf_counter()
        prepared.cleanup()
        files = [os.path.join(pkgs, pkg.art.stem, rel) for pkg in prepared.packages for rel, _k in pkg.entries]
        t3 = time.perf_counter()
        for path in files:
            os.lstat(path)
        floors.append(time.perf_counter() - t3)
        checks.append(t1 - t0)
        restamps.append(t2 - t1)
    return {"check": statistics.median(checks), "restamp": statistics.median(restamps),
            "floor": statistics.median(floors), "files": float(len(files))}


def warm_floor(split: dict[str, float], peer_warm: float) -> None:
    """What the warm target leaves for envguard's own work, against what the per-file checks cost at least."""
    budget = 0.2 * peer_warm
    print(f"  warm split (in-process, medians of 5): pre-link check {split['check']:.3f} s, stamping after linking "
          f"{split['restamp']:.3f} s; one bare lstat of each of the {split['files']:.0f} files {split['floor']:.3f} s "
          f"(two passes: {2 * split['floor']:.3f} s) against the {budget:.3f} s a 1.2x target leaves over the peer")


def cold_split(root: Path, plan: Any) -> None:
    """Where a cold create's own work goes (#42), in this process, one run: rattler's extraction of every archive
    into staging with the names listed (envguard.create.unpack's child, 4 in flight: wall and its CPU), the
    judging of each tree (one walk, one lstat per entry, paths.json read), the moves into the cache; and, for the
    record, what hashing every file against paths.json would add (stagedtree's ``hash_files``, off in a create)."""
    from envguard.create import stagedtree, unpack
    from envguard.create.archive import check_all_before_extraction
    from envguard.create.integrity import file_url_path

    arts = list(plan.conda)
    staging = root / "rt-split" / "stage"
    staging.mkdir(parents=True)
    jobs = [(Path(str(file_url_path(a.url))), staging / a.stem) for a in arts]
    tc = time.perf_counter()
    check_all_before_extraction([(a, src) for a, (src, _d) in zip(arts, jobs, strict=True)])
    checked = time.perf_counter() - tc
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = list(unpack.extract_all(jobs, budget=1 << 40, concurrency=4))
    t1 = time.perf_counter()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert not any(d.error for d in done), [d.error for d in done if d.error][:1]
    trees = [stagedtree.verify(a, str(staging / a.stem)) for a in arts]
    t2 = time.perf_counter()
    items = [item for tree in trees for item in tree.sha_declared]  # what hash_files=True would hash
    self0 = resource.getrusage(resource.RUSAGE_SELF)
    t3 = time.perf_counter()
    bad = stagedtree.hash_all(items)
    t4 = time.perf_counter()
    self1 = resource.getrusage(resource.RUSAGE_SELF)
    assert bad is None, bad
    cache = root / "rt-split" / "pkgs"
    cache.mkdir()
    for a, tree, d in zip(arts, trees, sorted(done, key=lambda d: d.index), strict=True):
        stagedtree.move_into_cache(cache, a.stem, str(staging / a.stem), d.sha256, tree, str(staging / "x"))
    t5 = time.perf_counter()
    print(f"  cold split (in-process, one run): archive-level checks before extraction {checked:.2f} s; "
          f"rattler extraction into staging + names listed {t1 - t0:.2f} s "
          f"wall ({cpu1.ru_utime - cpu0.ru_utime:.2f} s user, {cpu1.ru_stime - cpu0.ru_stime:.2f} s sys CPU in the "
          f"child); trees judged {t2 - t1:.2f} s; (not done by a create: sha256 of its {len(items)} files "
          f"{t4 - t3:.2f} s wall, {self1.ru_utime - self0.ru_utime:.2f} s CPU); moved into the cache {t5 - t4:.3f} s")
    shutil.rmtree(root / "rt-split", ignore_errors=True)
