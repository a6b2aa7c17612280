"""Which lock ``envguard create`` installs from: the given or default one, made now when there is none, and
re-locked first when the spec changed (refused with ``--locked``, not looked at with ``--frozen``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envguard.create.plan import LockPlan, read_plan
from envguard.create.report import CreateReporter
from envguard.create.staging import fault_hook
from envguard.errors import EnvguardError, IntegrityError, StaleLockError, UserError

if TYPE_CHECKING:
    from envguard.lock import Freshness


def _freshness(plan: LockPlan, files: Sequence[Path]) -> Freshness:
    """`envguard lock --check`'s verdict, for this platform only, on the lock's text as the plan read it."""
    from envguard.lock import check_fresh

    return check_fresh(list(files), plan.lockfile, platforms=[plan.platform], lock_text=plan.text)


def spec_files_for(env_files: Sequence[Path], lockfile: Path | None, cwd: Path) -> list[Path]:
    """The environment files this create reads: ``-f``, else ``environment.yml`` beside the lock (default:
    in the working directory) when it exists. Their ``name:`` names the environment without -p/-n."""
    if env_files:
        return [Path(f) for f in env_files]
    from envguard.project import SPEC_NAMES, project_dir, spec_for_lock

    spec = spec_for_lock(lockfile) if lockfile is not None else project_dir(cwd) / SPEC_NAMES[0]
    return [spec] if spec.is_file() else []


def ensure_lock(lockfile: Path | None, env_files: Sequence[Path], *, locked: bool,
                reporter: CreateReporter, cwd: Path, frozen: bool = False,
                spec_files: Sequence[Path] | None = None) -> tuple[Path, bytes | None]:
    """The lock to install from: given, default, or the default made now from the spec (neither --locked nor
    --frozen), with the bytes its kind was checked on (read once: envguard.create.plan.read_plan parses the
    same bytes; None for a lock made now). A lock named with --lockfile that does not exist is exit 4:
    nothing is solved, written or built."""
    from envguard.yamlio import special_file

    files = [Path(f) for f in env_files]
    for f in files:
        if not f.is_file():
            raise UserError("is a directory, expected an environment file" if f.is_dir() else
                            special_file(f) or "environment file not found", file=str(f), key="-f",
                            fix="pass an existing environment.yml")
    from envguard.filekind import require_spec

    for f in files:
        require_spec(f)  # a lock given as -f would be a spec with no dependencies
    specs = list(spec_files) if spec_files is not None else files
    named = lockfile is not None
    if lockfile is None and not files:
        from envguard.project import project_dir

        cwd = project_dir(cwd)  # the project's lock, from a subdirectory too
    from envguard.project import SPEC_NAMES, lock_for_spec, spec_for_lock

    # without -f: the lock of the project's environment.yml, whether or not that exists yet
    lockfile = lock_for_spec(files[0] if files else cwd / SPEC_NAMES[0], lockfile)
    if lockfile.is_dir() or special_file(lockfile):  # never lock into a FIFO or a device either
        raise UserError("is a directory, expected a lock file" if lockfile.is_dir() else str(special_file(lockfile)),
                        file=str(lockfile), key="--lockfile", fix="pass the path of conda-lock.yml")
    if lockfile.is_file():
        from envguard.filekind import require_lock
        from envguard.yamlio import decode_text, read_bytes

        data = read_bytes(lockfile)
        # an environment file here is a lock of nothing
        require_lock(lockfile, accept={"conda-lock"}, text=decode_text(data, lockfile))
        return lockfile, data
    if named:  # a mistyped path must not become a fresh, unreviewed solve: only the implicit lock is made here
        from envguard.lock import fix_command

        make = fix_command(specs or [spec_for_lock(lockfile)], lockfile)
        raise StaleLockError(f"lock file not found: {lockfile} (a lock named with --lockfile is installed as it "
                             "is, never made by create)",
                             fix=f"check the path, or make that lock on purpose with `{make}` and run this again",
                             command=make)
    if not specs or locked or frozen:
        flag = "--frozen" if frozen else "--locked"
        why = f"{flag} needs an existing lock" if (locked or frozen) else "nothing to install from"
        raise StaleLockError(f"lock file not found: {lockfile} ({why})",
                             fix="run `envguard lock` first" + ("" if specs else ", or pass -f environment.yml"),
                             command="envguard lock")
    reporter.stage(f"no lock yet: locking {', '.join(str(f) for f in specs)} into {lockfile}")
    from envguard.lock import lock as do_lock

    do_lock(specs, lockfile=lockfile)
    return lockfile, None


def checked_spec_files(plan: LockPlan, env_files: Sequence[Path]) -> list[Path]:
    """The environment files :func:`check_lock_fresh` checks the lock against: ``-f``, else the lock's own
    sources when every one of them still exists; empty when there is nothing to check against."""
    files = [Path(f) for f in env_files] or [s for s in plan.sources if s.is_file()]
    if not files or (not env_files and len(files) != len(plan.sources)):
        return []
    return files


def check_lock_fresh(plan: LockPlan, env_files: Sequence[Path], *, locked: bool, frozen: bool = False,
                     reporter: CreateReporter | None = None, explicit: bool = False,
                     cache_dir: Path | None = None, frozen_command: str = "") -> tuple[LockPlan, list[str]]:
    """Staleness as uv and pixi treat it: a stale lock is re-locked first (then installed), refused with
    ``--locked`` (exit 4) and not looked at with ``--frozen``. Returns the plan to install and notes.
    Sources named by the lock that no longer exist are not checked.

    Only the implicit default lock of the spec being read (conda-lock.yml beside it, no ``--lockfile``
    given) is ever re-locked here. A lock named with ``--lockfile`` (``explicit``; the default one spelled
    out too) is installed exactly as written or refused (exit 4, naming ``frozen_command`` and the re-lock
    on purpose), never rewritten from a spec.

    Before anything is decided about a stale lock, its own hashes are checked against the artifacts it
    names (the local ones, and the package cache's record of the others, ``cache_dir``): a lock that was
    tampered with is exit 3 whichever way it goes on, and never "repaired" by a re-lock."""
    if frozen:
        return plan, []
    files = checked_spec_files(plan, env_files)
    if not files:
        return plan, []
    verdict = _freshness(plan, files)  # conda-lock's content hash decides
    if verdict.fresh:
        return plan, []
    from envguard.lock import relock_command

    relock = relock_command(files, plan.lockfile)  # for the platforms it covers, never this one's alone
    verify_own_hashes(plan, cache_dir, relock)
    reason = verdict.reason
    from envguard.project import lock_for_spec

    default_lock = lock_for_spec(files[0])
    own = not explicit and plan.lockfile.resolve() == default_lock.resolve()
    as_is = f"`{frozen_command}`" if frozen_command else "`--frozen`"
    if locked:
        how = ("`envguard create` without --locked re-locks it first, " if own else "")
        raise StaleLockError(f"--locked: {verdict.reason}; {how}--frozen installs it as it is",
                             fix=f"run `{relock}`", command=relock)
    if not own:
        if explicit:
            why = "it was named with --lockfile, so it is installed exactly as written or not at all"
        else:
            why = (f"it is not the lock of {files[0]} (that is {default_lock}), so it is installed exactly as "
                   "written or not at all")
        spelled = explicit and plan.lockfile.resolve() == default_lock.resolve()
        # the spec's own lock: re-locking it is the likely wish; anyone else's lock: installing it as it is
        command = relock if spelled or not frozen_command else frozen_command
        raise StaleLockError(f"{reason}; {why}",
                             fix=f"install it as it is with {as_is}, or re-lock it on purpose with `{relock}` "
                                 "and run this again",
                             command=command)
    if reporter is not None:
        reporter.stage(f"re-locking {plan.lockfile}, the lock of {', '.join(str(f) for f in files)}: {reason}")
    from envguard.lock import lock as do_lock
    from envguard.lock import relock_platforms

    platforms = relock_platforms(files, plan.lockfile)  # the ones it covers, not this machine's alone
    fault_hook("relock")
    before = plan.lockfile.read_bytes()
    try:
        result = do_lock(files, platforms=platforms, lockfile=plan.lockfile)
    except EnvguardError as e:
        raise EnvguardError(f"{reason}, and re-locking it failed: {e.message}",
                            fix=f"correct that and rerun, or install the lock as it is with {as_is}",
                            exit_code=e.exit_code) from None
    relocked = read_plan(plan.lockfile, plan.platform)
    changed = _hashes_changed(plan, relocked)
    if changed:  # remote artifacts nothing here could vouch for: the channel's record is the last witness
        _put_back(plan.lockfile, before)
        raise IntegrityError(f"{plan.lockfile}: {changed[0]} has a different hash in the lock than in its channel"
                             + (f" (and {len(changed) - 1} more)" if len(changed) > 1 else "")
                             + "; the lock was left as it was, not re-locked",
                             fix=f"find out who changed the lock or the channel; re-lock on purpose with `{relock}` "
                                 "only once you trust the channel", command=None)
    moved = result.changes.summary(plan.platform) if result.changes is not None else ""
    note = f"{reason}: re-locked it first" + (f" ({moved})" if moved else "")  # the reason names the file
    return relocked, [note]


def verify_own_hashes(plan: LockPlan, cache_dir: Path | None, relock: str) -> None:
    """The lock's own hashes against the artifacts it names, without any re-lock: every local (``file://``)
    archive, and the sha256 the package cache recorded for a remote one it holds. A mismatch is exit 3 and
    leaves the lock as it is. A local archive that is gone is no integrity failure (a moved channel, which a
    re-lock may mend); remote ones without a cache entry are compared with their channel after a re-lock."""
    from envguard.create.integrity import verify_cache_entries, verify_local_artifacts

    try:
        verify_local_artifacts(plan.conda, cache_dir, lockfile=plan.lockfile, missing=set())
        if cache_dir is not None:
            verify_cache_entries(plan.conda, cache_dir, lockfile=plan.lockfile)
    except IntegrityError as e:
        raise IntegrityError(f"{e.reason}; {plan.lockfile} was left as it was, not re-locked",
                             fix=f"restore the artifact or the lock from where it came from; re-lock on purpose "
                                 f"with `{relock}` only once you trust the channel") from None


def _put_back(path: Path, data: bytes) -> None:
    """Restore a file's bytes whole (write beside it, then rename over it): never half a lock."""
    import os

    tmp = path.with_name(f".{path.name}.envguard-restore")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _hashes_changed(old: LockPlan, new: LockPlan) -> list[str]:
    """Packages both locks name by the same URL with different hashes: one of the two was tampered with."""
    by_url = {a.url: a for a in old.conda}
    out = []
    for a in new.conda:
        was = by_url.get(a.url)
        if was is not None and ((was.sha256 and a.sha256 and was.sha256 != a.sha256)
                                or (was.md5 and a.md5 and was.md5 != a.md5)):
            out.append(f"{a.name} {a.version} {a.build}")
    return out
