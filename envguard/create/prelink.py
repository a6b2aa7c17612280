"""Before the installer links a single file: every package verified and every path it declares safe.

For each locked conda artifact, in lock order:

1. **Warm**: rattler's package cache holds it extracted (``<cache>/<stem>/``, recorded for the locked
   sha256). It is checked against what its verified archive held: the digest of the ``info/`` files the
   installer reads (``paths.json``, ``index.json``, ``link.json``, ...), recorded when envguard judged the
   tree extracted from it (step 2), its tree (every declared path's type, symlink target and mode bits
   against the tree recorded then: :mod:`envguard.create.cachetree`), then every file ``paths.json``
   lists, by size and sha256. The identities of those files (size, mtime, inode, device, mode; not the
   ctime, which every hard link made or removed changes: :func:`envguard.create.cachetree.scan_entry`),
   recorded after a full verification, spare the hashing on the next create while none of them changed.
   Any difference (a file edited, truncated or deleted in the cache, or edited in an environment it is
   hard-linked into, an edited ``paths.json``) removes the entry: it is extracted again (step 2).
2. **Cold** (no entry, or one just removed): rattler extracts the archive into a private staging folder
   (envguard.create.unpack: the ``file://`` artifact itself, or, over http(s), a copy envguard downloads and
   hashes first, so that a flipped or truncated download is an integrity failure, exit 3, naming the package),
   several at once, and reports the sha256 of the bytes it read, which must be the lock's (exit 3). The tree on
   disk is then judged against its own ``info/paths.json`` (envguard.create.stagedtree), and, once every
   package passed step 3, moved into the package cache as the entry rattler links from: the bytes checked are
   the bytes linked. An entry that must be re-extracted but whose archive is gone is exit 3.
3. All packages' paths and symlinks are checked together with :mod:`envguard.pathsafety` (relative,
   normalised, inside the prefix, symlinks included): exit 3 naming the package and the path.

Credentials never travel inside a URL the installer or its caches see: :class:`envguard.auth.Credentials`
takes them out and gives rattler a client that sends them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from envguard import settings
from envguard.auth import Credentials
from envguard.create import cachetree, pathchecks, stagedtree, unpack
from envguard.create.archive import bounded_download, check_all_before_extraction, private_copy
from envguard.create.cachetree import TreeRecords
from envguard.create.entryfiles import (
    entry_is_directory,
    info_digest,
    info_present,
    odd_leftover,
    paths_entries,
    read_entry_file,
)
from envguard.create.integrity import (
    NOT_A_FILE,
    Artifact,
    VerifiedStamps,
    cache_entry_sha256,
    file_digest,
    file_url_path,
    is_file_url,
    mismatch_error,
    purge_cache_entry,
    verify_local_artifacts,
)
from envguard.create.pathchecks import PathChecks
from envguard.create.stagedtree import StagedTree
from envguard.errors import BackendError, IntegrityError
from envguard.leftovers import remove_dead_owners
from envguard.pathsafety import Unsafe, allow_list, allowed, check_package, path_problem
from envguard.redact import redact, shorten

DOWNLOAD_TAG = ".envguard-downloads-"
_CONCURRENCY = 4


@dataclass
class _Package:
    """What one package will put into the prefix."""

    art: Artifact
    entries: list[tuple[str, str]] = field(default_factory=list)  # paths.json: (path, path_type)
    paths: list[str] = field(default_factory=list)  # paths.json paths (and, from an archive, every entry)
    symlinks: dict[str, str] = field(default_factory=dict)  # declared path -> link target
    inner_links: dict[str, str] = field(default_factory=dict)  # every symlink of the archive
    info: str = ""  # digest of the INFO_FILES, from the archive
    cold: bool = False  # scanned from its archive in this create: its extracted tree is recorded after linking
    present: list[str] | None = None  # the INFO_FILES its extracted entry has, when the warm check listed them
    scan: cachetree.EntryScan | None = None  # the warm check's scan of its extracted entry
    vouched: bool = False  # that scan's identities were the stamped ones: nothing was hashed
    declared_by: str | None = None  # info/paths.json, else info/files, else None


@dataclass
class Prepared:
    """The artifacts to hand the installer (a downloaded one points at its verified copy) and its client."""

    artifacts: tuple[Artifact, ...]
    client: Any = None
    verified_local: int = 0
    download_dir: Path | None = None
    staging_dir: Path | None = None  # envguard.create.unpack: where rattler extracted the cold archives
    cache_dir: Path | None = None
    packages: list[_Package] = field(default_factory=list)  # verified, to be stamped after linking

    def finalize(self) -> None:
        """After a successful install: record the tree and the identities of the entries extracted by this
        install (from their verified archives), and the identities of warm entries that were hashed, so that
        the next create need not hash them. Linking changes no identity (cachetree.scan_entry) but the files'
        ctimes and link counts, which the stamp holds beside it: a warm entry's are taken again (one lstat per
        file), so that only a change made after this create can tell a ctime from a link count (#38 point 9)."""
        todo = [pkg for pkg in self.packages if not pkg.vouched]
        # the warm entries too, a second lstat pass: their ctimes are in the stamp (VerifiedStamps.vouches_package)
        restamp = [pkg for pkg in self.packages if pkg.vouched]
        if self.cache_dir is None or not (todo or restamp):
            return
        stamps = VerifiedStamps(self.cache_dir)
        trees = TreeRecords(self.cache_dir)
        for pkg in todo:
            found: cachetree.EntryScan | str | None = pkg.scan
            if pkg.cold or found is None:  # just extracted from the verified archive: its tree is that archive's
                entry = os.path.join(self.cache_dir, pkg.art.stem)
                found = cachetree.scan_entry(entry, pkg.entries,
                                             info_present(entry) if pkg.present is None else pkg.present)
                if isinstance(found, str):
                    continue
                if cachetree.archive_differences(found, pkg.entries, pkg.inner_links) is not None:
                    trees.forget(pkg.art.key)  # never vouched for: extracted again next time
                    stamps.forget_package(pkg.art.key)
                    continue
                trees.record(pkg.art.key, found)
            if isinstance(found, cachetree.EntryScan):
                stamps.record_package(pkg.art.key, pkg.info, found.identity, found.newest, found.fine,
                                      found.ctimes, found.nlinks)
        for pkg in restamp:  # linking changed their ctimes and link counts: stamp them as they are now
            entry = os.path.join(self.cache_dir, pkg.art.stem)
            ident = cachetree.scan_identity(entry, pkg.entries, info_present(entry) if pkg.present is None
                                            else pkg.present)
            if not isinstance(ident, str):
                stamps.record_package(pkg.art.key, pkg.info, ident.identity, ident.newest, ident.fine,
                                      ident.ctimes, ident.nlinks)
        trees.save()
        stamps.save()

    def cleanup(self) -> None:
        """Remove the downloaded copies (the installer has extracted them into the package cache)."""
        for folder in (self.download_dir, self.staging_dir):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self.download_dir = self.staging_dir = None


def prepare(artifacts: Sequence[Artifact], cache_dir: Path, *, platform: str, lockfile: Path | None = None,
            use_cache: bool = True, note: Callable[[str], None] = lambda _t: None,
            stage: Callable[[str], None] = lambda _t: None, offline: bool = False,
            reading: Callable[[int], None] = lambda _n: None, read: Callable[[str], None] = lambda _n: None,
            ) -> Prepared:
    """Verify and check everything the installer will link; see the module doc. Raises IntegrityError (3)
    or BackendError (6). ``use_cache`` False (external installers with caches of their own): every artifact
    is taken from its verified archive. ``offline``: an artifact that would have to be downloaded (its cache
    entry found altered) is refused, named, instead (envguard.create.offline). ``reading(n)``: n archives
    are about to be read (downloaded, hashed, scanned); ``read(name)`` after each one."""
    from envguard import condaconfig

    creds, config = Credentials(), condaconfig.load()
    arts = [_from_mirror_folder(_without_credentials(a, creds), config) for a in artifacts]
    missing: set[str] = set()
    stage(f"verifying {sum(1 for a in arts if is_file_url(a.url))} local artifacts")
    # the archives of packages not extracted yet are hashed once, as they are copied (archive.private_copy)
    extracted = {a.stem for a in arts if use_cache and entry_is_directory(cache_dir, a.stem)}
    copied = {a.stem for a in arts} - extracted
    stamps = VerifiedStamps(cache_dir)
    verified = verify_local_artifacts(arts, cache_dir, lockfile=lockfile, missing=missing, copied=copied,
                                      stamps=stamps)
    trees = TreeRecords(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    ready: list[_Package] = []
    cold: list[tuple[int, Artifact, str | None]] = []  # (index, artifact, why its cache entry was altered)
    for i, art in enumerate(arts):
        altered = None
        if art.stem in extracted:
            pkg, altered = _check_entry(art, cache_dir, stamps, trees)
            if pkg is not None:
                ready.append(pkg)
                continue
            purge_cache_entry(cache_dir, art.stem)
            stamps.forget_package(art.key)
            trees.forget(art.key)
        elif use_cache:
            altered = odd_leftover(cache_dir, art.stem)
            if altered:  # rattler's extraction would fail on it (exit 6): cleared like an altered entry
                purge_cache_entry(cache_dir, art.stem)
        if altered:
            note(f"{art.name} {art.version}: its package cache entry was altered ({altered}); extracting it "
                 "again from the verified archive")
        cold.append((i, art, altered))
    remote = [a for _i, a, _w in cold if not is_file_url(a.url)]
    if offline and remote:
        from envguard.create.offline import missing_error

        raise missing_error([f"{a.name} {a.version} ({redact(a.locked_url or a.url)})" for a in remote], cache_dir)
    said = config.served_note([a.locked_url or a.url for _i, a, _w in cold])
    if said:  # which mirror the archives come from, in one line
        note(said)
    client = creds.client(config.mirror_map())  # downloads go to the configured mirrors
    prepared = Prepared(tuple(arts), client, verified, cache_dir=cache_dir if use_cache else None)
    try:
        staged: list[tuple[_Package, StagedTree, str]] = []
        if cold:
            reading(len(cold))
            sources = _run(_obtain_all(cold, cache_dir, client, missing, prepared, lockfile, stage, stamps,
                                       copy=not use_cache))
            prepared.staging_dir = unpack.staging_root(cache_dir)
            shutil.rmtree(prepared.staging_dir, ignore_errors=True)
            remove_dead_owners(cache_dir, unpack.UNPACK_TAG)  # what killed runs left half-extracted: never trusted
            prepared.staging_dir.mkdir(mode=0o700)
            staged = _extract_all([a for _i, a, _w in cold], sources, prepared.staging_dir, lockfile, stamps, read,
                                  platform.startswith("win"))
            for (i, art, _why), src, (pkg, _tree, _sha) in zip(cold, sources, staged, strict=True):
                if not is_file_url(art.url) or not use_cache:
                    arts[i] = dataclasses.replace(arts[i], local=src)
                pkg.cold = True
                ready.append(pkg)
        prepared.artifacts = tuple(arts)
        _check_paths(ready, platform, cache_dir if use_cache else None)
        if use_cache:  # every tree judged and every path checked: only now is anything put where rattler links from
            for pkg, tree, sha in staged:
                assert prepared.staging_dir is not None
                stagedtree.move_into_cache(cache_dir, pkg.art.stem, str(prepared.staging_dir / pkg.art.stem), sha,
                                           tree, str(prepared.staging_dir / f"replaced-{pkg.art.stem}"))
                trees.record(pkg.art.key, tree.scan)
                stamps.record_package(pkg.art.key, pkg.info, None)
        prepared.packages = ready
    except BaseException:
        prepared.cleanup()
        stamps.save()
        trees.save()
        raise
    stamps.save()
    trees.save()
    return prepared


def _from_mirror_folder(art: Artifact, config: Any) -> Artifact:
    """An archive under a channel that a ``file://`` folder mirrors (envguard.condaconfig) is read from that
    folder: rattler's HTTP client cannot fetch file:// URLs. conda-meta keeps the lock's URL (``locked_url``)."""
    local = config.local_url(art.url)
    if local is None:
        return art
    return dataclasses.replace(art, url=local, locked_url=art.locked_url or art.url)


def _without_credentials(art: Artifact, creds: Credentials) -> Artifact:
    clean = creds.strip(art.url)
    if clean == art.url:
        return art
    return dataclasses.replace(art, url=clean, locked_url=art.locked_url or art.url)


# --------------------------------------------------------------------------- warm: the extracted entry


def _check_entry(art: Artifact, cache_dir: Path, stamps: VerifiedStamps,
                 trees: TreeRecords) -> tuple[_Package | None, str | None]:
    """(package, None) when the extracted entry is what the verified archive held; else (None, why), where
    why is None for an entry envguard never verified (it is simply extracted again).

    Cheap when nothing changed: paths.json is read and every file it lists is lstat'ed; when the files'
    identities (and those of the info/ files) are the ones stamped after the last verification, that is all
    (they determine the tree: envguard.create.cachetree.scan_identity). Otherwise the tree (types, symlink
    targets, modes) is compared with the one recorded from the verified archive, then every file is hashed."""
    rec = stamps.package(art.key)
    tree = trees.get(art.key)
    if rec is None or tree is None:
        return None, None
    recorded = cache_entry_sha256(cache_dir, art.stem)
    if recorded == NOT_A_FILE:
        return None, f"{shorten(art.stem, 120)}.lock is not a regular file"
    if art.sha256 and recorded is not None and recorded != art.sha256:
        return None, None  # extracted from another build of the same name: rattler would replace it too
    entry = os.path.join(cache_dir, art.stem)
    present = info_present(entry)
    paths_json = read_entry_file(entry, "info/paths.json") if "info/paths.json" in present else None
    files = read_entry_file(entry, "info/files") if paths_json is None and "info/files" in present else None
    try:
        entries, declared = paths_entries(paths_json, files)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        return None, f"info/paths.json: {shorten(str(e), 80)}"
    pkg = _Package(art, info=rec[0], entries=declared, present=present)
    pkg.paths = [p for p, _t in pkg.entries]
    ident = cachetree.scan_identity(entry, pkg.entries, present)
    if isinstance(ident, str):
        return None, ident
    pkg.symlinks = ident.links
    pkg.inner_links = dict(ident.links)
    if stamps.vouches_package(art.key, rec[0], ident.identity, ident.ctimes, ident.nlinks):
        pkg.vouched = True  # stamped after a verification: the tree is the verified one (scan_identity's doc)
        return pkg, None
    found = cachetree.expand(ident, entry, pkg.entries)
    if found.tree != tree.digest:
        return None, cachetree.tree_differences(found, pkg.entries, tree)
    to_hash = found.to_hash
    pkg.scan = found
    # not vouched for: the info/ files against the archive's digest, then every file against paths.json
    loaded = {"info/paths.json": paths_json}
    info = info_digest(lambda n: loaded[n] if n in loaded else
                        (read_entry_file(entry, n) if n in present else None))
    if info != rec[0]:
        return None, "its info/ metadata (paths.json, index.json, ...) differs from the verified archive's"
    meta = {e["_path"]: e for e in entries}
    for rel, _full, size in to_hash:
        want = meta[rel].get("size_in_bytes")
        if isinstance(want, int) and size != want:
            return None, f"{shorten(rel, 120)} changed size ({size} bytes, {want} in paths.json)"
    bad = _hash_files([(rel, full, str(meta[rel]["sha256"]).lower()) for rel, full, _size in to_hash
                       if isinstance(meta[rel].get("sha256"), str)])
    return (None, bad) if bad else (pkg, None)


def _hash_files(items: list[tuple[str, str, str]]) -> str | None:
    """The first file whose sha256 differs from paths.json's, as a reason; None when all agree."""
    todo = items

    def one(item: tuple[str, str, str]) -> str | None:
        rel, full, sha = item
        try:
            return None if file_digest(full) == sha else f"{shorten(rel, 120)} changed content (sha256)"
        except OSError as e:
            return f"{shorten(rel, 120)} cannot be read ({e.strerror or e})"

    if len(todo) > 8:
        with ThreadPoolExecutor(min(4, os.cpu_count() or 1)) as pool:
            results = list(pool.map(one, todo, chunksize=16))
    else:
        results = [one(it) for it in todo]
    return next((r for r in results if r), None)


# --------------------------------------------------------------------------- cold: the verified archive


def _run(coro: Any) -> Any:
    from envguard.create.backends.rattler_backend import run_coroutine

    return run_coroutine(coro)


async def _obtain_all(cold: list[tuple[int, Artifact, str | None]], cache_dir: Path, client: Any,
                      missing: set[str], prepared: Prepared, lockfile: Path | None,
                      stage: Callable[[str], None], stamps: VerifiedStamps, copy: bool) -> list[Path]:
    """The archive each cold artifact is extracted from: a ``file://`` artifact's own file (rattler's extraction
    hashes what it reads), or, downloaded over http(s) (or with ``copy``: for an external installer, which reads
    the archive itself), a private copy, hashed against the lock before anything reads it."""
    remote = [art for _i, art, _w in cold if not is_file_url(art.url)]
    prepared.download_dir = cache_dir / f"{DOWNLOAD_TAG}{os.getpid()}"
    shutil.rmtree(prepared.download_dir, ignore_errors=True)
    remove_dead_owners(cache_dir, DOWNLOAD_TAG)  # what runs killed mid-download left
    prepared.download_dir.mkdir(mode=0o700, parents=True)
    if remote:
        stage(f"downloading {len(remote)} packages")
    gate = asyncio.Semaphore(_CONCURRENCY)

    async def obtain(art: Artifact, altered: str | None) -> Path:
        assert prepared.download_dir is not None
        if is_file_url(art.url):
            path = file_url_path(art.url)
            if path is None or art.stem in missing:
                raise _gone(art, altered) if altered else BackendError(
                    f"{art.name} {art.version}: artifact not found: {redact(art.url)}",
                    fix="restore the channel, or re-lock against a channel that has it")
            if not copy:
                return path
            local = prepared.download_dir / art.filename
            async with gate:
                await asyncio.to_thread(private_copy, art, path, local, cache_dir, lockfile=lockfile, stamps=stamps)
            return local
        local = prepared.download_dir / art.filename
        async with gate:
            await _download(art, local, client, cache_dir, lockfile, altered)
        return local

    tasks = [asyncio.ensure_future(obtain(art, why)) for _i, art, why in cold]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _extract_all(arts: list[Artifact], sources: list[Path], staging: Path, lockfile: Path | None,
                 stamps: VerifiedStamps, read: Callable[[str], None], windows: bool
                 ) -> list[tuple[_Package, StagedTree, str]]:
    """rattler extracts every archive into ``staging`` (envguard.create.unpack); each tree is judged as soon as
    it is there (envguard.create.stagedtree), while the next ones are extracted. (package, tree, sha256 of the
    bytes rattler read) per artifact, in order."""
    check_all_before_extraction(list(zip(arts, sources, strict=True)))  # before anything inflates them
    before = {i: _identity(src) for i, (art, src) in enumerate(zip(arts, sources, strict=True))
              if is_file_url(art.url)}
    jobs = [(src, staging / art.stem) for art, src in zip(arts, sources, strict=True)]
    budget = settings.max_extracted_bytes()
    out: list[tuple[_Package, StagedTree, str] | None] = [None] * len(arts)
    try:
        with closing(unpack.extract_all(jobs, budget=budget, concurrency=_CONCURRENCY)) as results:
            for done in results:
                art = arts[done.index]
                if done.error and "os error 27" in done.error:  # EFBIG: a file crossed RLIMIT_FSIZE (unpack's doc)
                    entry = done.error.split("`")[1] if done.error.count("`") >= 2 else ""
                    raise unpack.OverBudget(done.index, entry, budget)
                if done.error:
                    raise _unreadable(art, done.error)
                algorithm, expected = ("sha256", art.sha256) if art.sha256 else ("md5", art.md5)
                actual = done.sha256 if algorithm == "sha256" else done.md5
                if not expected or actual != expected.lower():
                    purge_cache_entry(staging.parent, art.stem)
                    raise mismatch_error(art.name, art.version, art.locked_url or art.url, expected or "<none>",
                                         actual, algorithm, lockfile=lockfile)
                st = before.get(done.index)
                if st is not None and _same(st, _identity(sources[done.index])):  # the file rattler read, unchanged
                    stamps.record(sources[done.index], st, f"{algorithm}:{actual}")
                stagedtree.check_names(art, done.pkg_names, done.info_names, done.names_error)
                tree = stagedtree.verify(art, str(staging / art.stem),
                                         paths_first=partial(_forms, art, windows=windows))
                pkg = _Package(art, entries=tree.entries, paths=tree.paths, symlinks=tree.symlinks,
                               inner_links=tree.inner_links, info=tree.info, declared_by=tree.declared_by)
                out[done.index] = (pkg, tree, done.sha256)
                read(art.name)
    except unpack.OverBudget as e:
        art = arts[e.index]
        raise IntegrityError(f"{art.name} {art.version}: the archive {shorten(art.filename, 120)} inflates to more "
                             f"than {budget} bytes (entry {shorten(e.entry, 160)!r}); extraction was stopped and "
                             "nothing was installed (ENVGUARD_MAX_EXTRACTED_BYTES)",
                             fix="use the channel's original archive, or raise ENVGUARD_MAX_EXTRACTED_BYTES for a "
                             "package that big") from None
    except unpack.ChildFailed as e:
        raise BackendError(f"rattler's extraction failed: {shorten(redact(str(e)), 300)}") from None
    return [x for x in out if x is not None]


def _forms(art: Artifact, paths: list[str], windows: bool) -> None:
    """The declared paths' own form (relative, normalised, no ``..``): exit 3 naming the first that is not."""
    unsafe = [Unsafe(art.name, p, problem) for p in paths if (problem := path_problem(p, windows=windows))]
    if unsafe:
        raise _refusal(unsafe)


def _identity(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _same(a: os.stat_result, b: os.stat_result | None) -> bool:
    return b is not None and (a.st_size, a.st_mtime_ns, a.st_ctime_ns, a.st_ino, a.st_dev) == (
        b.st_size, b.st_mtime_ns, b.st_ctime_ns, b.st_ino, b.st_dev)


def _unreadable(art: Artifact, detail: str) -> BackendError | IntegrityError:
    lower = detail.lower()
    if "no space left" in lower or "permission denied" in lower or "disk quota" in lower:
        return BackendError(f"{art.name} {art.version}: cannot extract into the package cache: "
                            f"{shorten(redact(detail), 300)}", fix="check permissions and free space of your cache "
                            "directory")
    return IntegrityError(f"{art.name} {art.version}: the archive {shorten(art.filename, 120)} cannot be extracted: "
                          f"{shorten(redact(detail), 200)}", fix="restore the archive from the channel, or re-lock")


def _gone(art: Artifact, altered: str) -> IntegrityError:
    return IntegrityError(f"{art.name} {art.version}: its package cache entry was altered ({altered}) and its "
                          f"archive {redact(art.locked_url or art.url)} is gone, so it cannot be extracted again",
                          fix="restore the archive, or re-lock against a channel that has it")


async def _download(art: Artifact, dest: Path, client: Any, cache_dir: Path, lockfile: Path | None,
                    altered: str | None) -> None:
    """Download ``art`` to ``dest`` and check it against the lock's hash before anything reads it."""
    from rattler.networking import Client

    try:
        await bounded_download(art, client or Client.default_client(), art.url, dest)
    except IntegrityError:
        raise
    except Exception as e:  # noqa: BLE001 - rattler's errors carry the causal chain in str(e)
        detail = " ".join(str(e).split())
        if altered and ("404" in detail or "410" in detail):
            raise _gone(art, altered) from None
        raise BackendError(f"{art.name} {art.version}: cannot download {redact(art.locked_url or art.url)}: "
                           f"{shorten(redact(detail), 300)}") from None
    algorithm, expected = ("sha256", art.sha256) if art.sha256 else ("md5", art.md5)
    if not expected:
        raise IntegrityError(f"{art.name} {art.version}: the lock has no sha256 or md5 for "
                             f"{redact(art.locked_url or art.url)}",
                             fix="re-lock with `envguard lock`", command="envguard lock")
    actual = await asyncio.to_thread(file_digest, dest, algorithm)
    if actual != expected.lower():
        dest.unlink(missing_ok=True)
        purge_cache_entry(cache_dir, art.stem)
        raise mismatch_error(art.name, art.version, art.locked_url or art.url, expected, actual, algorithm,
                             lockfile=lockfile)


# --------------------------------------------------------------------------- every path, together


def _check_paths(packages: list[_Package], platform: str, cache_dir: Path | None = None) -> None:
    """Every package's paths and symlinks, together (envguard.pathsafety); exit 3 naming the first unsafe
    one. When every package was verified warm, an answer recorded for the very same inputs stands
    (envguard.create.pathchecks)."""
    allow = allow_list()
    windows = platform.startswith("win")
    records, digest = None, ""
    if cache_dir is not None and packages and not any(pkg.cold for pkg in packages):
        records = PathChecks(cache_dir)
        digest = pathchecks.key(windows, allow, [(p.art.key, p.info, p.symlinks, p.inner_links) for p in packages])
        if records.has_passed(digest):
            return
    links: dict[str, str] = {}
    for pkg in packages:
        links.update(pkg.symlinks)
    final_ok = frozenset(p for pkg in packages for p in pkg.symlinks if allow and allowed(pkg.art.name, p, allow))
    unsafe: list[Unsafe] = []
    for pkg in packages:
        own = {**pkg.inner_links, **links} if pkg.inner_links else links
        unsafe += check_package(pkg.art.name, pkg.paths, pkg.symlinks, own, allow, windows=windows,
                                final_ok=final_ok)
    if unsafe:
        raise _refusal(unsafe)
    if records is not None:
        records.record(digest)


def _refusal(unsafe: list[Unsafe]) -> IntegrityError:
    first = unsafe[0]
    more = f" (and {len(unsafe) - 1} more unsafe path{'s' * (len(unsafe) > 2)})" if len(unsafe) > 1 else ""
    return IntegrityError(
        f"{first.package}: unsafe path in the package: {first.describe()}{more}; nothing was installed",
        fix="remove the package from the lock or use a fixed build; a symlink to a trusted location outside the "
        f"prefix can be allowed with ENVGUARD_SYMLINK_ALLOW={first.package}:PATH")
