"""``envguard create``: build an environment from the lock, atomically, with every hash verified.

The sequence, all under a per-prefix lock (envguard.create.prefixlock):

1. Clean what an interrupted earlier run left beside the target (envguard.create.staging.cleanup_leftovers).
2. Verify the sha256 of every local (``file://``) artifact against the lock: rattler does not.
3. Build. A relocatable backend (rattler) builds in ``.<name>.envguard-staging-<pid>`` beside the target,
   with rattler's ``alternative_target_prefix`` so that placeholders and shebangs carry the final path.
   pip packages go into the same staging directory, then the fingerprint.
4. Swap it into place: a plain rename when the target is absent; over an existing environment (``--force``)
   an atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``), or else rename-aside + rename-in. The old
   environment is deleted only once the new one is in place.

A SIGKILL at any point leaves the target as it was once the next run has cleaned up: staging directories
are deleted, an old environment renamed aside is put back if the target is missing, and (for external
backends, which build at the target path itself) a half-built target marked by
``.<name>.envguard-building-<pid>`` is removed before the old one is restored. SIGINT is deferred while the
renames run.

The modules, in that order: freshness.py (which lock), plan.py (the lock read into a LockPlan), build.py (the
build under the prefix lock), report.py (progress callbacks and the result); prelink.py, integrity.py,
staging.py, prefixlock.py and backends/ do the work they call.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from pathlib import Path

from envguard import settings
from envguard.create.backends import get_backend
from envguard.create.build import create_locked, json_str, scrub_credentials, target_identity
from envguard.create.freshness import check_lock_fresh, ensure_lock, spec_files_for
from envguard.create.options import CreateOptions
from envguard.create.plan import LockPlan, expand_url, read_plan
from envguard.create.report import CreateReporter, CreateResult
from envguard.errors import EnvguardError, Interrupted, UserError
from envguard.fingerprint import Fingerprint, read_fingerprint
from envguard.leftovers import interrupt_report
from envguard.platforms import host_platform

__all__ = ["CreateOptions", "CreateReporter", "CreateResult", "LockPlan", "check_lock_fresh", "create", "ensure_lock",
           "expand_url", "json_str", "read_plan", "scrub_credentials", "spec_files_for", "summarise_drift"]


# --------------------------------------------------------------------------- create


def create(options: CreateOptions) -> CreateResult:
    """Make the environment at ``options.prefix`` (or ``name``, else the spec's ``name:``) exactly the lock.

    A sync: a missing environment is created, one that drifted from the lock is rebuilt (see
    envguard.create.drift), one that matches is left alone unless ``force``. A stale default lock of the spec
    is re-locked first, one named with ``lockfile`` is refused (exit 4); ``locked`` refuses any stale lock,
    ``frozen`` installs the lock without reading the spec. See the module doc. The
    new environment is not checked here: the command layer does that (envguard.cli.workflow.create_and_check).

    Raises EnvguardError subclasses: UserError (2: bad input, target is not an environment), IntegrityError
    (3), StaleLockError (4: lock missing, stale under --locked, or without this platform), BusyError (5),
    BackendError (6: installer, permissions, disk full, a failed re-lock).
    """
    o = options
    prefix, name, lockfile, env_files, locked, frozen = (o.prefix, o.name, o.lockfile, o.env_files, o.locked,
                                                         o.frozen)
    backend, timeout, reporter, cache_dir, cwd, platform = (o.backend, o.timeout, o.reporter, o.cache_dir, o.cwd,
                                                            o.platform)
    started = time.monotonic()
    rep = reporter or CreateReporter()
    from envguard.envs import resolve_target

    if locked and frozen:
        raise UserError("--locked and --frozen exclude each other", key="--frozen",
                        fix="--locked refuses a stale lock, --frozen installs it without looking at the spec: "
                            "pass one of them")
    files = [Path(f) for f in env_files]
    here = Path(cwd) if cwd else Path.cwd()
    specs = spec_files_for(files, Path(lockfile) if lockfile is not None else None, here)
    target = resolve_target(prefix, name, existing=False, cwd=here, spec_files=specs)
    from envguard.create.variant import choose_variant

    chosen = choose_variant(o.variant, specs, lockfile=Path(lockfile) if lockfile is not None else None,
                            env_files=files, platform=platform or host_platform(), locked=locked, frozen=frozen)
    given = files  # what ensure_lock refuses as a spec that is a lock (-f, as without variants)
    if chosen is not None:  # a project with variants: the chosen variant's lock, judged against its own files
        rep.note(chosen.line)
        if chosen.warning:
            rep.warning(chosen.warning)
        lockfile, files = chosen.variant.lockfile, chosen.files
        # choose_variant read both files already (the overlay is judged an overlay) and, unless --frozen, found
        # the lock fresh for them: the kind check (a YAML parse of each) only where nothing else read them
        given = files if frozen else given
    if timeout is not None and timeout < 0:
        raise UserError(f"must be 0 or more seconds, got {timeout:g}", key="--timeout",
                        fix="pass how long to wait for another create of this prefix, e.g. --timeout 600")
    for parent in target.parents:  # a file where a directory of the path must go: bad input, not a disk fault
        if parent.exists():
            if not parent.is_dir():
                raise UserError("a file stands where a directory of the prefix path must go", file=str(parent),
                                key="-p", fix="choose a prefix path whose parents are directories")
            break
    be = get_backend(backend)
    found: dict[str, tuple[int, int] | None] = {}  # what stood at the target before this run built anything
    expected: Fingerprint | None = None
    try:
        lock_path, lock_bytes = ensure_lock(Path(lockfile) if lockfile is not None else None, given,
                                            locked=locked, frozen=frozen, reporter=rep, cwd=here, spec_files=specs)
        platform = platform or host_platform()
        plan = read_plan(lock_path, platform, data=lock_bytes)  # the bytes whose kind was checked: read once
        pkgs = Path(cache_dir) if cache_dir is not None else settings.package_cache_dir()
        as_is = shlex.join(["envguard", "create", "-p", str(target), "--lockfile", str(lock_path), "--frozen",
                            *(["--force"] if o.force else [])])
        plan, notes = check_lock_fresh(plan, files, locked=locked, frozen=frozen, reporter=rep,
                                       explicit=lockfile is not None, cache_dir=pkgs, frozen_command=as_is)
        for n in notes:
            rep.note(n)
        from envguard.create.freshness import checked_spec_files
        from envguard.create.history import read_request

        checked = [] if frozen else checked_spec_files(plan, files)
        plan.request = read_request(checked or specs, platform, checked=bool(checked))
        expected = plan.fingerprint(be.name)
        if chosen is not None:
            from dataclasses import replace

            expected = replace(expected, variant=chosen.variant.name)
        result = create_locked(target, be, plan, lock_path, platform, expected, pkgs, o, rep=rep, started=started,
                               found=found)
        result.lock_text, result.lock_sha256 = plan.text, plan.lock_sha256  # for the check: not read again
        return result
    except Interrupted:
        raise
    except KeyboardInterrupt:  # say what the target really holds now (a (re-)lock is replaced atomically)
        in_place = expected is not None and _new_env_in_place(target, found, expected)
        raise Interrupted(interrupt_report(target, in_place)) from None
    except EnvguardError as e:  # a library call's error wrapped around a Ctrl-C or SIGTERM is that interrupt
        if not _interrupt_under(e):
            raise
        in_place = expected is not None and _new_env_in_place(target, found, expected)
        raise Interrupted(interrupt_report(target, in_place)) from None


def _interrupt_under(error: BaseException) -> bool:
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _new_env_in_place(target: Path, found: dict[str, tuple[int, int] | None], expected: Fingerprint) -> bool:
    """Whether this run's new environment stands at ``target``: another directory than the one found there
    before the build, carrying the lock's fingerprint. The fingerprint alone cannot tell: an environment
    that drifted after create (or one rebuilt with --force) carries the same one while it is still the old."""
    if "before" not in found:
        return False  # interrupted before this run touched the target (waiting for the prefix lock)
    now = target_identity(target)
    if now is None or now == found["before"]:
        return False
    current = read_fingerprint(target)
    return current is not None and current.digest == expected.digest


def summarise_drift(drift: Sequence[str]) -> str:
    """How an environment differed from the lock, in one line (the first few differences)."""
    from envguard.create.drift import summarise

    return summarise(drift)
