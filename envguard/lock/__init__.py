"""``envguard lock`` and ``envguard lock --check``.

``lock`` reads the spec (our validation, then conda-lock's parser), solves
each platform with rattler using conda-lock's virtual packages, resolves the
``pip:`` section with conda-lock's PyPI solver, and writes conda-lock.yml with
conda-lock's models and writer, atomically. An existing lock's records are
preferred by both solvers (relock.py), so an edit moves only what it forces,
and the result says what moved and why (changes.py). ``check_fresh`` is read-only and,
for locks envguard wrote, never imports conda-lock (see lockfile.py).
:func:`cuda_record_text` (the CUDA assumption a lock records for a ``--cuda`` argument) is shared with
adopted.py, which records it for an adopted environment's lock.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envguard.errors import EnvguardError, UserError, with_fix

# host_records, pip_records and read_lock are re-exported: create, check and export read locks through envguard.lock
from envguard.lock.lockfile import (
    META_CUDA,
    META_CUDA_FROM,
    META_FINGERPRINT,
    cuda_arg,
    fast_path_possible,
    fingerprint,
    input_digest,
)
from envguard.lock.lockfile import (  # a lock is whole (envguard.lockwhole): lock --check and create ask
    check_whole as check_whole,
)
from envguard.lock.lockfile import (
    host_records as host_records,
)
from envguard.lock.lockfile import (
    pip_records as pip_records,
)
from envguard.lock.lockfile import (
    read_lock as read_lock,
)
from envguard.lock.lockfile import (
    require_whole as require_whole,
)
from envguard.project import lock_for_spec
from envguard.redact import redact
from envguard.sources.lockscan import read_metadata  # the metadata block alone (public: lock --check, run, check)
from envguard.yamlio import load_fast, read_bytes

# The wing's public API beyond the command itself: what other wings may use (docs/architecture.md).
# The spec reader is imported on first use: `lock --check` answers without it.
_LAZY = {"read_spec": "spec", "validate": "spec", "SpecIssue": "spec", "EnvSpec": "spec",
         "match_spec_problem": "matchspec", "version_problem": "matchspec", "rattler_form": "matchspec"}
# export writes a lock for what a prefix already holds, with the same models, writer and content hash.
_LAZY.update({"write_adopted": "adopted", "AdoptedPackage": "adopted", "AdoptedLock": "adopted"})
# `envguard why`: dependency paths read from a lock (the command's function, for cli.py)
_LAZY.update({"why_locked": "why", "WhyResult": "why"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"envguard.lock.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'envguard.lock' has no attribute {name!r}")

DEFAULT_FILE = "environment.yml"

CudaArg = str | None | bool  # None: from the spec or the lock (envguard.lock.cuda), False: no CUDA


@dataclass(frozen=True)
class Progress:
    """One step of a lock, for a progress display."""

    stage: str  # "spec" | "solve" | "pip" | "write" | "done"
    platform: str | None = None
    index: int = 0  # 1-based position of the platform
    total: int = 0
    detail: str = ""


Reporter = Callable[[Progress], None]


@dataclass
class LockResult:
    lockfile: Path
    platforms: list[str]
    packages: dict[str, int]  # platform -> number of packages (conda + pip)
    cuda: str  # the recorded assumption: "11.4", "12.4", "none"
    changed: bool
    content_hash: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cuda_why: str = ""  # where the assumption came from: "cuda-version=12.9 in environment.yml"
    changes: Any = None  # envguard.lock.changes.ChangeReport: what moved since the old lock, and why
    mirror: str = ""  # "mirror: conda-forge from URL (SETTING)": where channels were read from, when a mirror

    @property
    def cuda_note(self) -> str:
        """What a summary line says about ``__cuda``: nothing for a lock without one (a CPU build guard,
        --no-cuda) or without a platform that has CUDA (osx only)."""
        if self.cuda in ("none", "default") or not any(p.startswith(("linux-", "win-")) for p in self.platforms):
            return ""
        return f"__cuda={self.cuda}, {self.cuda_why}" if self.cuda_why else f"__cuda={self.cuda}"


@dataclass
class Freshness:
    """The verdict of ``envguard lock --check``: why, and (when not fresh) the command that makes it fresh."""

    fresh: bool
    missing: bool
    stale_platforms: list[str]
    reason: str  # "conda-lock.yml is fresh for linux-64", "conda-lock.yml is not locked for osx-arm64"
    command: str = ""  # `envguard lock ...` that re-locks it; "" when fresh
    fast: bool = False  # decided from the fingerprint, without conda-lock

    @property
    def fix(self) -> str:
        return f"run `{self.command}`" if self.command else ""

    @property
    def message(self) -> str:
        """The line a user sees: the reason, then the fix."""
        return with_fix(self.reason, self.fix)


def default_files(files: list[Path] | None) -> list[Path]:
    if files:
        return [Path(f) for f in files]
    from envguard.project import project_dir

    found = project_dir()  # the project's environment.yml, from a subdirectory too; shown relative to here
    return [Path(os.path.relpath(found / DEFAULT_FILE))] if found != Path.cwd() else [Path(DEFAULT_FILE)]


def fix_command(files: list[Path], lockfile: Path, platforms: list[str] | None = None) -> str:
    parts = ["envguard", "lock"]
    for f in files:
        parts += ["-f", str(f)]
    for p in platforms or []:
        parts += ["--platform", p]
    parts += ["--lockfile", str(lockfile)]
    return shlex.join(parts)


def relock_command(files: list[Path], lockfile: Path) -> str:
    """The `envguard lock` that re-locks ``lockfile`` from ``files`` (for :func:`relock_platforms`)."""
    return fix_command(files, lockfile, relock_platforms(files, lockfile))


def relock_platforms(files: Sequence[Path], lockfile: Path) -> list[str] | None:
    """The ``--platform`` values of a re-lock of ``lockfile`` from ``files``: None when the files declare
    ``platforms:`` (those then decide, :func:`envguard.platforms.command_platforms`), else the platforms the
    lock covers now (None when it names none): a re-lock never narrows a lock to this machine's platform."""
    for f in files:
        try:
            data = load_fast(f)
        except (EnvguardError, OSError):
            continue
        if isinstance(data, dict) and data.get("platforms"):
            return None
    try:
        meta = read_metadata(lockfile)
    except EnvguardError:
        return None
    listed = meta.get("platforms") if isinstance(meta, dict) else None
    return [str(x) for x in listed] if isinstance(listed, list) and listed else None


def cuda_record_text(cuda_arg: str, vpr: Any, platform_hint: str | None = None) -> str:
    if cuda_arg == "":
        return "none"
    if cuda_arg != "default":
        return cuda_arg
    from envguard.lock.solver import cuda_version_of

    for p in ([platform_hint] if platform_hint else []) + ["linux-64", "win-64", "linux-aarch64"]:
        v = cuda_version_of(vpr, p)
        if v:
            return v
    return "default"


def _recorded_cuda(meta: dict[str, Any] | None, key: str = META_CUDA) -> str | None:
    custom = (meta or {}).get("custom_metadata") or {}
    if not isinstance(custom, dict):  # a damaged lock: no recorded assumption
        return None
    v = custom.get(key)
    return str(v) if v is not None else None


def _cuda_from_record(recorded: str | None) -> str | bool | None:
    if recorded is None:
        return None
    return False if recorded == "none" else recorded


def _existing_meta(lockfile: Path) -> dict[str, Any] | None:
    if not lockfile.exists():
        return None
    try:
        return read_metadata(lockfile)
    except UserError:
        return None


def lock(
    files: list[Path] | None = None,
    *,
    platforms: list[str] | None = None,
    cuda: CudaArg = None,
    lockfile: Path | None = None,
    reporter: Reporter | None = None,
    update: Sequence[str] = (),
    update_all: bool = False,
    together: Any = None,
    metadata: dict[str, str] | None = None,
) -> LockResult:
    """Solve and write ``lockfile``; raise UserError (2) / BackendError (6), leaving any old lock untouched.

    An existing lock is the starting point (envguard.lock.relock): its records are kept wherever the spec
    still allows them, ``update`` names move to the newest the spec allows, ``update_all`` solves from
    scratch. ``LockResult.changes`` says what moved and why.

    ``together`` (envguard.lock.together.Together): another variant's lock of the same project, whose records
    this solve prefers wherever this variant does not force its own (locked together, docs/variants.md);
    ``metadata``: more envguard keys for the lock's custom_metadata (the variant's).
    """
    from envguard.lock import changes as change_report
    from envguard.lock import relock
    from envguard.lock.lockfile import (
        build_lockfile,
        locked_conda_dependency,
        mirror_line,
        mirror_metadata,
        redacted_channels,
        relative_source,
        write_lock_atomic,
    )
    from envguard.lock.pypi import mapping_path, solve_pip
    from envguard.lock.solvefail import SpecLines
    from envguard.lock.solver import (
        platform_virtual_packages,
        rattler_virtual_packages,
        solve_platforms,
        virtual_package_repo,
    )
    from envguard.lock.spec import read_spec

    started = time.perf_counter()
    report = reporter or (lambda _p: None)
    files = default_files(files)
    given_lockfile = lockfile is not None
    lockfile = lock_for_spec(files[0], lockfile)
    if lockfile.is_dir():  # say so before a solve, not as a write failure (exit 6) after it
        raise UserError("is a directory, expected a lock file", file=str(lockfile), key="--lockfile",
                        fix="pass a file path such as conda-lock.yml")
    if any(p.exists() and not p.is_dir() for p in lockfile.parents):
        raise UserError("a parent of the lock file is not a directory", file=str(lockfile), key="--lockfile",
                        fix="pass a path inside an existing directory")
    from envguard.filekind import require_lock_target

    # before any solve: a lock replaces only a lock (README.md given as --lockfile stays README.md)
    replaced = require_lock_target(lockfile, files, key="--lockfile" if given_lockfile else None)
    report(Progress("spec", detail=", ".join(str(f) for f in files)))
    spec = read_spec(files, platforms)
    plan = relock.plan(lockfile, update=update, update_all=update_all,
                       requested=[n for kind, line in spec.origins if (n := change_report.name_of(kind, line))])
    mapping = str(mapping_path())
    lock_spec = spec.lock_spec(mapping)
    plats = list(lock_spec.platforms)

    from envguard.lock import cuda as cuda_assumption

    meta = _existing_meta(lockfile)
    assumption = cuda_assumption.resolve(
        cuda, _recorded_cuda(meta), _recorded_cuda(meta, META_CUDA_FROM),
        cuda_assumption.from_spec(lock_spec.dependencies, ", ".join(str(f) for f in files)), str(lockfile))
    carg = cuda_arg(assumption.value)
    vpr = virtual_package_repo(assumption.value)
    cuda_rec = cuda_record_text(carg, vpr)

    from conda_lock.lockfile import apply_categories

    # ${VAR} placeholders are expanded for the solve only; records are mapped back below.
    real_channels = [c.env_replaced_url() for c in lock_spec.channels]
    for c in real_channels:
        unset = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", c)
        if unset:
            raise UserError(f"channel {redact(c)} needs ${{{unset[0]}}}, which is not set",
                            file=", ".join(str(f) for f in files), key="channels",
                            fix=f"export {unset[0]}=... before locking")
    vps = {p: rattler_virtual_packages(vpr, p) for p in plats}
    deps = {p: list(lock_spec.dependencies[p]) for p in plats}
    total = len(plats)

    def on_platform(p: str, i: int) -> None:
        report(Progress("solve", p, i, total))

    solved = solve_platforms(channels=real_channels, dependencies=deps, virtual_packages=vps,
                             on_platform=on_platform,
                             cuda_note=("no __cuda" if cuda_rec == "none" else f"__cuda={cuda_rec}")
                             + f", {assumption.why}",
                             preferred=together.preferred(plan, plats, cuda_rec) if together is not None
                             else plan.preferred(plats, cuda_rec),
                             update=plan.is_updated if plan.update else None, where=SpecLines(spec))

    packages: list[Any] = []
    counts: dict[str, int] = {}
    moved: list[Any] = []
    for i, p in enumerate(plats, start=1):
        planned = {r.name.normalized: locked_conda_dependency(r, p, lock_spec.channels) for r in solved.records[p]}
        requested = {d.name: d for d in deps[p] if d.manager == "conda" and not d.name.startswith("__")}
        missing = [n for n in requested if n not in planned]
        if missing:  # cannot happen after a successful solve; guard conda-lock's KeyError anyway
            from envguard.errors import BackendError

            raise BackendError(f"the solution for {p} lacks requested packages: {', '.join(missing)}")
        apply_categories(requested=requested, planned=planned, mapping_url=mapping)
        pip_planned: dict[str, Any] = {}
        if any(d.manager == "pip" for d in deps[p]):
            report(Progress("pip", p, i, total))
            pip_locked, use_latest = plan.pip_locked(p)

            def pip_progress(what: str, p: str = p, i: int = i) -> None:  # which package it is at
                report(Progress("pip", p, i, total, what))

            pip_planned = solve_pip(lock_spec=lock_spec, platform=p, conda_locked=planned,
                                    platform_virtual_packages=platform_virtual_packages(vpr, p),
                                    mapping_url=mapping, pip_locked=pip_locked, use_latest=use_latest,
                                    progress=pip_progress)
        packages += list(planned.values()) + list(pip_planned.values())
        counts[p] = len(planned) + len(pip_planned)
        constrains = {r.name.normalized: list(r.constrains) for r in solved.records[p]}
        moved.append(change_report.platform_changes(
            platform=p, plan=plan, old=[change_report.node_of(e) for e in plan.entries(p)],
            new=[change_report.node_of_locked(d, constrains.get(d.name, ())) for d in planned.values()]
            + [change_report.node_of_locked(d) for d in pip_planned.values()],
            requested=change_report.requested_of(deps[p], spec.origins),
            unavailable=solved.unavailable.get(p, set()), cuda_after=cuda_rec))

    report(Progress("write", detail=str(lockfile)))
    content_hash, custom = lock_metadata(files, lock_spec, vpr, cuda_rec)
    # a mirror's URLs are the channel's: recorded, so that every reader of the lock knows (envguard.condaconfig)
    written = [str(c.url) for c in lock_spec.channels]
    custom.update(mirror_metadata(written))
    if assumption.source == cuda_assumption.FROM_FLAG:
        custom[META_CUDA_FROM] = cuda_assumption.FROM_FLAG
    custom.update(metadata or {})
    lf = build_lockfile(
        packages=packages,
        lock_spec=lock_spec,
        channels=redacted_channels(lock_spec.channels),
        platforms=plats,
        content_hash=content_hash,
        sources=[relative_source(lockfile, f) for f in files],
        custom=custom,
    )
    try:
        changed = write_lock_atomic(lf, lockfile)
    except OSError as e:
        from envguard.errors import BackendError

        raise BackendError(f"cannot write {lockfile}: {e.strerror or e}") from None
    report(Progress("done", detail=str(lockfile)))
    return LockResult(lockfile=lockfile, platforms=plats, packages=counts, cuda=cuda_rec, changed=changed,
                      content_hash={p: content_hash[p] for p in plats},
                      warnings=list(spec.warnings) + ([replaced] if replaced and changed else []),
                      seconds=time.perf_counter() - started, cuda_why=assumption.why, mirror=mirror_line(written),
                      changes=change_report.build_report(lockfile=str(lockfile), written=changed, plan=plan,
                                                         cuda_after=cuda_rec, platforms=moved))


def lock_metadata(files: list[Path], lock_spec: Any, vpr: Any, cuda_record: str
                  ) -> tuple[dict[str, str], dict[str, str]]:
    """conda-lock's content hashes and envguard's custom metadata (CUDA assumption, input fingerprints,
    variables:)."""
    from conda_lock.content_hash import compute_content_hashes

    from envguard.lock.pypi import mapping_path
    from envguard.variables import of_files, to_metadata

    content_hash = compute_content_hashes(lock_spec, vpr)
    # variables: (CEP 24) travel in the lock for create to write into conda-meta/state; CEP 37 leaves a lock
    # no other place than custom_metadata, and conda-lock's hash does not cover them (see check_fresh)
    custom = {META_CUDA: cuda_record, **to_metadata(of_files(files))}
    contents = [read_bytes(f) for f in files]
    if fast_path_possible([c.decode("utf-8", "replace") for c in contents]):
        digest = input_digest(files, contents, cuda_record, mapping_path().read_bytes())
        for p in lock_spec.platforms:
            custom[META_FINGERPRINT + p] = fingerprint(digest, p, content_hash[p])
    return content_hash, custom


# ------------------------------------------------------------------ --check


def _file_platforms(files: list[Path], texts: list[str]) -> list[str]:
    from envguard.platforms import LOCKABLE_PLATFORMS

    out: list[str] = []
    for f, t in zip(files, texts, strict=False):
        data = load_fast(f, t)
        if isinstance(data, dict) and isinstance(data.get("platforms"), list):
            for p in data["platforms"]:
                if p not in LOCKABLE_PLATFORMS:
                    raise UserError(f"unsupported platform {p!r}", file=str(f), key="platforms",
                                    fix=f"use some of {', '.join(LOCKABLE_PLATFORMS)}")
                if p not in out:
                    out.append(str(p))
    return out


def check_fresh(
    files: list[Path] | None,
    lockfile: Path | None = None,
    *,
    platforms: list[str] | None = None,
    cuda: CudaArg = None,
    lock_text: str | None = None,
) -> Freshness:
    """Is ``lockfile`` fresh for ``files``? Read-only: no solve, no network, no writes to the project.
    ``lock_text``: the lock's text, when the caller read it already (create: it is not read again).

    The verdict is conda-lock's ``lock --check-input-hash`` verdict for the same
    files, platforms and CUDA assumption (by default the one recorded in the lock).
    """
    from envguard.platforms import command_platforms

    files = default_files(files)
    lockfile = lock_for_spec(files[0], lockfile)
    contents: list[bytes] = []
    for f in files:
        if Path(f).is_dir():
            raise UserError("is a directory, expected a file", file=str(f), key="-f",
                            fix="pass the environment file, e.g. -f environment.yml")
        contents.append(read_bytes(f))  # regular files only, size-limited (yamlio)
        try:
            contents[-1].decode("utf-8")
        except UnicodeDecodeError:
            raise UserError("not UTF-8 text", file=str(f), fix="save the file as UTF-8") from None
    texts = [c.decode("utf-8", "replace") for c in contents]
    from envguard.platforms import LOCKABLE_PLATFORMS

    for p in platforms or []:
        if p not in LOCKABLE_PLATFORMS:
            raise UserError(f"unsupported platform {p!r}", key="--platform",
                            fix=f"use some of {', '.join(LOCKABLE_PLATFORMS)}")
    plats = command_platforms(platforms, lambda: _file_platforms(files, texts))  # files parsed only when needed
    cmd = fix_command(files, lockfile, list(platforms) if platforms else None)

    if lock_text is None and not lockfile.exists():
        return Freshness(False, True, plats, f"{lockfile} is missing", cmd)
    meta = read_metadata(lockfile, lock_text)
    if meta is None:
        where, why = str(lockfile), "has no readable `metadata:` block"
        try:  # only on this error path: parse it all to say where it breaks
            from envguard.yamlio import load_fast

            load_fast(lockfile, lock_text)
        except UserError as e:
            where = f"{lockfile}:{e.line}:{e.column}" if e.line is not None else where
            why = "is not valid YAML"
        return Freshness(False, False, plats, f"{where}: the lock {why}", cmd)
    for key, kind in (("platforms", list), ("content_hash", dict), ("custom_metadata", dict)):
        if meta.get(key) is not None and not isinstance(meta[key], kind):
            return Freshness(False, False, plats, f"{lockfile} is unreadable: metadata.{key} is not a "
                             f"{'list' if kind is list else 'mapping'}", cmd)

    locked_platforms = [str(p) for p in meta.get("platforms") or []]
    hashes = {str(k): str(v) for k, v in (meta.get("content_hash") or {}).items()}
    custom = {str(k): str(v) for k, v in (meta.get("custom_metadata") or {}).items()}
    effective_cuda = cuda if cuda is not None else _cuda_from_record(custom.get(META_CUDA))
    carg = cuda_arg(effective_cuda)

    stale_vars = _variables_moved(files, texts, custom)
    if stale_vars:
        return Freshness(False, False, plats, f"{lockfile} is stale: {stale_vars}", cmd)

    not_locked = [p for p in plats if p not in locked_platforms or p not in hashes]
    undecided = [p for p in plats if p not in not_locked]
    fast_fresh: list[str] = []
    if undecided and fast_path_possible(texts) and any(k.startswith(META_FINGERPRINT) for k in custom):
        from envguard.lock.pypi import mapping_path

        digest = input_digest(files, contents, "none" if carg == "" else carg, mapping_path().read_bytes())
        fast_fresh = [p for p in undecided
                      if custom.get(META_FINGERPRINT + p) == fingerprint(digest, p, hashes[p])]
    slow = [p for p in undecided if p not in fast_fresh]
    stale_hash: list[str] = []
    if slow:
        stale_hash = _stale_by_conda_lock(files, plats, slow, hashes, effective_cuda)

    stale = [p for p in plats if p in not_locked or p in stale_hash]
    if not stale:
        return Freshness(True, False, [], f"{lockfile} is fresh for {', '.join(plats)}", fast=not slow)
    reasons = []
    if not_locked:
        reasons.append(f"not locked for {', '.join(not_locked)}")
    if stale_hash:
        reasons.append(f"stale for {', '.join(stale_hash)} ({', '.join(str(f) for f in files)} changed)")
    return Freshness(False, False, stale, f"{lockfile} is {'; '.join(reasons)}", cmd, fast=not slow)


_VARIABLES_KEY = re.compile(r"^[\"']?variables[\"']?[ \t]*:", re.M)


def _variables_moved(files: list[Path], texts: list[str], custom: dict[str, str]) -> str:
    """Why the lock's recorded ``variables:`` are not the files' ("" when they are, or the lock is not
    envguard's): conda-lock's content hash leaves them out, so its verdict alone would call the lock fresh."""
    if META_CUDA not in custom:  # conda-lock's own lock records none: nothing to judge them by
        return ""
    if not any(k.startswith("envguard.variables.") for k in custom) and not any(_VARIABLES_KEY.search(t)
                                                                               for t in texts):
        return ""  # none on either side: no YAML parse (create's start-up imports no PyYAML, bench/create.py)
    from envguard.variables import changes, from_metadata, of_files

    moved = changes(from_metadata(custom), of_files(files, texts))
    if not moved:
        return ""
    names = [m.split()[1] for m in moved]
    return (f"variables: changed in {', '.join(str(f) for f in files)} since it was locked "
            f"({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})")


def _stale_by_conda_lock(files: list[Path], plats: list[str], check: list[str], hashes: dict[str, str],
                         cuda: str | bool | None) -> list[str]:
    """conda-lock's own comparison, for the platforms the fingerprint could not decide."""
    from conda_lock.content_hash import backwards_compatible_content_hashes

    from envguard.lock.solver import virtual_package_repo
    from envguard.lock.spec import conda_lock_spec, read_spec

    try:
        lock_spec = conda_lock_spec(files, plats)
    except UserError:
        read_spec(files, plats)  # ours names file:line:col and the key, where conda-lock says "'NoneType' ..."
        raise
    vpr = virtual_package_repo(cuda)
    return [p for p in check if hashes[p] not in backwards_compatible_content_hashes(lock_spec, vpr, p)]

